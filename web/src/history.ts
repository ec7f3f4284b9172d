// The session's execution history (GET /v1/sessions/{id}/executions),
// searchable by code and output, with "re-run in a new cell".
import { json, type Execution } from "./api";
import { button, h, toast } from "./dom";

const maxPages = 10; // 1,000 executions at most: the rest stay on the server

export class History {
  el: HTMLElement;
  private list: HTMLElement;
  private search: HTMLInputElement;
  private all: Execution[] = [];

  constructor(private session: string, private rerun: (language: string, code: string) => void) {
    this.search = h("input", { type: "search", placeholder: "search code and output", "aria-label": "search the history by code or output" });
    this.search.addEventListener("input", () => this.show());
    this.list = h("ol", { class: "history", "aria-label": "executions, newest first" });
    this.el = h("div", { class: "history-tab" }, h("div", { class: "file-bar" }, h("strong", {}, "History"), " ", this.search,
      h("span", { class: "spacer" }), button("⟳", () => this.load(), { title: "reload the history" })), this.list);
  }

  async load(): Promise<void> {
    const all: Execution[] = [];
    let cursor = "";
    try {
      for (let i = 0; i < maxPages; i++) {
        const q = `?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
        const page = await json<{ executions: Execution[]; next_cursor?: string }>("GET", `/v1/sessions/${encodeURIComponent(this.session)}/executions${q}`);
        all.push(...page.executions);
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
    } catch (e) {
      toast(`the history could not be read: ${(e as Error).message}`);
    }
    this.all = all.reverse();
    this.show();
  }

  private show(): void {
    const q = this.search.value.trim().toLowerCase();
    const hits = this.all.filter((x) => !q || `${x.code}\n${x.result?.stdout ?? ""}\n${x.result?.stderr ?? ""}`.toLowerCase().includes(q));
    this.list.replaceChildren(...hits.slice(0, 200).map((x) => this.item(x)));
    if (hits.length === 0) this.list.append(h("li", { class: "muted" }, this.all.length ? "Nothing matches." : "No executions yet."));
  }

  private item(x: Execution): HTMLElement {
    const out = (x.result?.stdout ?? "") + (x.result?.stderr ?? "");
    return h("li", { class: "history-item", "data-seq": String(x.seq) },
      h("div", { class: "cell-status" }, `[${x.seq}] · ${x.language} · ${x.status}`),
      h("pre", { class: "stream" }, x.code.length > 2000 ? x.code.slice(0, 2000) + "…" : x.code),
      out ? h("pre", { class: "stream stdout muted" }, out.length > 500 ? out.slice(0, 500) + "…" : out) : null,
      button("Re-run in a new cell", () => this.rerun(x.language, x.code), { title: `re-run execution ${x.seq} in a new cell` }));
  }
}
