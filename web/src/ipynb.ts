// Jupyter notebooks (nbformat 4.5) in and out: code and markdown cells with
// their outputs, images included.
import type { CellData } from "./notebook";
import type { Out } from "./render";

type Json = Record<string, unknown>;

const text = (v: unknown): string => (Array.isArray(v) ? v.join("") : typeof v === "string" ? v : "");

// A cell id as nbformat 4.5 wants it: 1-64 of [a-zA-Z0-9-_].
function cellID(id: string, i: number): string {
  const clean = id.replace(/[^a-zA-Z0-9_-]/g, "").slice(0, 64);
  return clean || `cell-${i}`;
}

function outputToJupyter(o: Out, seq: number | null): Json {
  switch (o.kind) {
    case "stream":
      return { output_type: "stream", name: o.name, text: o.text };
    case "display":
      return o.result
        ? { output_type: "execute_result", execution_count: seq, data: o.data, metadata: {} }
        : { output_type: "display_data", data: o.data, metadata: {} };
    case "error":
      return { output_type: "error", ename: o.name, evalue: o.message, traceback: o.traceback ?? [] };
    case "notice":
      return { output_type: "display_data", data: { "text/plain": o.text }, metadata: {} };
  }
}

export function toIpynb(cells: CellData[], language: string): Json {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: language, display_name: language, language },
      language_info: { name: language },
    },
    cells: cells.map((c, i) => {
      const id = cellID(c.id, i);
      if (c.type === "markdown") return { cell_type: "markdown", id, metadata: {}, source: c.source };
      const seq = c.seq ?? null;
      return {
        cell_type: "code", id, metadata: { kiln: { language: c.language } }, source: c.source, execution_count: seq,
        outputs: c.outputs.map((o) => outputToJupyter(o, seq)),
      };
    }),
  };
}

function outputFromJupyter(o: Json): Out | undefined {
  switch (o.output_type) {
    case "stream":
      return { kind: "stream", name: o.name === "stderr" ? "stderr" : "stdout", text: text(o.text) };
    case "display_data":
    case "execute_result":
      return typeof o.data === "object" && o.data !== null
        ? { kind: "display", data: o.data as Json, ...(o.output_type === "execute_result" ? { result: true } : {}) }
        : undefined;
    case "error":
      return { kind: "error", name: String(o.ename ?? "Error"), message: String(o.evalue ?? ""), traceback: Array.isArray(o.traceback) ? o.traceback.map(String) : [] };
  }
  return undefined;
}

// fromIpynb reads a notebook; it throws an Error that says what is wrong
// with a file that is not one.
export function fromIpynb(src: string, newID: () => string): CellData[] {
  let doc: Json;
  try {
    doc = JSON.parse(src);
  } catch (e) {
    throw new Error(`not a notebook: the file is not JSON (${(e as Error).message})`);
  }
  if (typeof doc !== "object" || doc === null || doc.nbformat !== 4 || !Array.isArray(doc.cells)) {
    throw new Error("not a notebook kiln can read: it needs nbformat 4 and a list of cells");
  }
  const meta = (doc.metadata ?? {}) as Json;
  const lang = String(((meta.language_info ?? {}) as Json).name ?? ((meta.kernelspec ?? {}) as Json).language ?? "python");
  const cells: CellData[] = [];
  for (const c of doc.cells as Json[]) {
    const source = text(c.source);
    if (c.cell_type === "code") {
      const kiln = ((c.metadata ?? {}) as Json).kiln as Json | undefined;
      const outs = (Array.isArray(c.outputs) ? c.outputs : []).map((o) => outputFromJupyter(o as Json)).filter((o): o is Out => !!o);
      cells.push({ id: newID(), type: "code", language: String(kiln?.language ?? lang), source, outputs: outs,
        seq: typeof c.execution_count === "number" ? c.execution_count : undefined });
    } else {
      cells.push({ id: newID(), type: "markdown", language: "markdown", source, outputs: [] });
    }
  }
  return cells;
}
