import { describe, expect, it } from "vitest";
import { fromIpynb, toIpynb } from "./ipynb";
import type { CellData } from "./notebook";

let n = 0;
const id = () => `t${n++}`;

const cells: CellData[] = [
  { id: "c1", type: "markdown", language: "markdown", source: "# Title", outputs: [] },
  { id: "c2", type: "code", language: "python", source: "print(1)\n1+1", seq: 3, outputs: [
    { kind: "stream", name: "stdout", text: "1\n" },
    { kind: "display", data: { "text/plain": "2" }, result: true },
    { kind: "display", data: { "image/png": "iVBORw0KGgo=" } },
    { kind: "error", name: "ValueError", message: "bad", traceback: ["line 1"] },
  ] },
];

describe("ipynb", () => {
  it("writes nbformat 4.5 with outputs", () => {
    const nb = toIpynb(cells, "python") as any;
    expect(nb.nbformat).toBe(4);
    expect(nb.nbformat_minor).toBe(5);
    expect(nb.cells[0]).toEqual({ cell_type: "markdown", id: "c1", metadata: {}, source: "# Title" });
    const outs = nb.cells[1].outputs;
    expect(outs.map((o: any) => o.output_type)).toEqual(["stream", "execute_result", "display_data", "error"]);
    expect(outs[1].execution_count).toBe(3);
    expect(outs[2].data["image/png"]).toBe("iVBORw0KGgo=");
  });
  it("reads back what it wrote", () => {
    const back = fromIpynb(JSON.stringify(toIpynb(cells, "python")), id);
    expect(back.map((c) => [c.type, c.language, c.source])).toEqual([["markdown", "markdown", "# Title"], ["code", "python", "print(1)\n1+1"]]);
    expect(back[1].outputs).toEqual(cells[1].outputs);
  });
  it("reads Jupyter's list-of-lines sources and refuses other files", () => {
    const nb = { nbformat: 4, nbformat_minor: 4, metadata: { language_info: { name: "python" } },
      cells: [{ cell_type: "code", source: ["a = 1\n", "a"], outputs: [{ output_type: "stream", name: "stdout", text: ["x\n", "y\n"] }] }] };
    const back = fromIpynb(JSON.stringify(nb), id);
    expect(back[0].source).toBe("a = 1\na");
    expect(back[0].outputs[0]).toEqual({ kind: "stream", name: "stdout", text: "x\ny\n" });
    expect(() => fromIpynb("{", id)).toThrow(/not JSON/);
    expect(() => fromIpynb('{"nbformat": 3, "worksheets": []}', id)).toThrow(/nbformat 4/);
  });
});
