// The notebook of one session: cells, their runs over the session's
// WebSocket, and the notebook file that keeps them between visits.
import { api, ApiError, filesURL, json, type Artifact, type CellResult, type EgressRecord, type Event, type Execution, type Session } from "./api";
import { button, h, toast } from "./dom";
import { CodeEditor, type Marker, type RunMode } from "./editor";
import { formatBytes, formatDuration, utf8Len, utf8Prefix } from "./format";
import { fromIpynb, toIpynb } from "./ipynb";
import { renderEgress } from "./network";
import { appendStream, markdownHTML, renderOutput, type Out } from "./render";
import { streamView } from "./stream";

// The notebook is kept in the session's workspace under this name (see
// docs/NOTEBOOK.md), so it lives and ends with the session's files.
export const notebookFile = ".kiln-notebook.json";

export interface CellData {
  id: string;
  type: "code" | "markdown";
  language: string;
  source: string;
  outputs: Out[];
  status?: string; // ok, error, timeout, interrupted, ... or "failed" when it could not run
  seq?: number;
  wallNS?: number;
  cpuNS?: number;
  peakMemory?: number;
  artifacts?: Artifact[];
  actor?: string; // who ran it, when another user of a shared session did
  egress?: EgressRecord[]; // the cell's network attempts
  execId?: string; // the execution's id, whose stored result has all the output kiln kept
  inlineCut?: number; // bytes of stdout and stderr past inlineCap that the page did not keep
}

interface NotebookDoc {
  format: "kiln-notebook";
  version: 1;
  cells: CellData[];
}

// markers are what a result says about lines of the cell: the failing
// line of an error, and compiler diagnostics (errors and warnings).
function markers(r: CellResult): Marker[] {
  const out: Marker[] = [];
  if (r.error?.line) out.push({ line: r.error.line, message: `${r.error.name}: ${r.error.message}`, severity: "error" });
  for (const d of [...(r.error?.diagnostics ?? []), ...(r.diagnostics ?? [])]) {
    out.push({ line: d.line, column: d.column, message: d.message, severity: d.severity === "warning" ? "warning" : "error" });
  }
  return out;
}

// inlineCap is how much stdout and stderr one cell keeps in the page and
// in the notebook file, so that a cell run with a large output limit
// (up to 256 MiB) neither stalls the tab nor bloats the notebook file.
// The rest is in the execution's stored result (GET /v1/executions/{id}),
// which the cut marker's button fetches.
export const inlineCap = 1 << 20; // bytes of UTF-8

// streamBytes is the stdout and stderr a cell shows, in UTF-8 bytes.
function streamBytes(outs: Out[]): number {
  let n = 0;
  for (const o of outs) if (o.kind === "stream") n += utf8Len(o.text);
  return n;
}

// cutMarker says where a cell's output was cut: by the page at inlineCap
// (the service kept more, and the button fetches it), or by the service
// at the session's output limit (kiln kept only what is shown, and where
// to get all of it next time). expand is undefined when the cell's
// execution is not known (an imported notebook).
function cutMarker(d: CellData, limit: number | undefined, expand?: (btn: HTMLButtonElement, note: HTMLElement) => void): HTMLElement {
  const el = h("div", { class: "cut-marker", role: "note" });
  if (d.inlineCut) {
    el.append(h("strong", {}, `✂ Output shown up to ${formatBytes(inlineCap)}`),
      ` in the notebook: ${formatBytes(d.inlineCut)} more of stdout and stderr is in the execution's stored result. `);
  }
  if (d.status === "output_limit") {
    const at = limit ? formatBytes(limit) : "the session's output limit";
    el.append(h("strong", {}, `✂ Output cut at ${at}`),
      ` (this session's output limit, stdout, stderr and displays together). kiln kept no more than that: the rest was dropped as the cell ran. `,
      `To keep all of it, write it to a file in the workspace (it appears in the file explorer and downloads whole), `,
      `e.g. print(..., file=open("out.txt", "a")) or command > out.txt, or create a session with a larger output limit (at most 256 MiB). `);
  }
  if (expand) {
    const note = h("span", { class: "cut-note", "aria-live": "polite" });
    const btn = button("Show the stored output", () => expand(btn, note), { title: "show all of the output kiln stored for this cell" });
    el.append(btn, " ", note);
  }
  return el;
}

let nextID = 0;
const newID = () => `c${Date.now().toString(36)}${(nextID++).toString(36)}`;

class Cell {
  root: HTMLElement;
  editor?: CodeEditor;
  outEl: HTMLElement;
  statusEl: HTMLElement;
  langSel?: HTMLSelectElement;
  rendered?: HTMLElement;
  state: "idle" | "queued" | "running" = "idle";
  inputBox?: HTMLElement;
  private shown = 0; // bytes of stdout and stderr kept in the page since the run began
  private full?: Out[]; // the outputs with the stored stdout and stderr, once expanded

  constructor(public nb: Notebook, public d: CellData) {
    this.outEl = h("div", { class: "outputs", "aria-live": "polite", "aria-label": "cell output" });
    this.statusEl = h("div", { class: "cell-status", "aria-live": "polite" });
    this.root = h("section", { class: `cell ${d.type}`, "data-cell": d.id, "aria-label": `${d.type} cell` });
    this.build();
  }

  build(): void {
    const d = this.d;
    const bar = h("div", { class: "cell-bar" });
    if (d.type === "code") {
      this.langSel = h("select", { "aria-label": "cell language", class: "lang", onchange: () => {
        d.language = this.langSel!.value;
        this.editor?.setLanguage(d.language);
        this.nb.changed();
      } });
      for (const l of this.nb.languages) this.langSel.append(h("option", { value: l, selected: l === d.language }, l));
      if (!this.nb.languages.includes(d.language)) this.langSel.append(h("option", { value: d.language, selected: true }, d.language));
      bar.append(
        button("▶", () => this.nb.run(this, "stay"), { title: "run cell (Ctrl+Enter)", cls: "run" }),
        this.langSel,
        button("▲▶", () => this.nb.runAbove(this), { title: "run the cells above this one" }),
        button("{ }", () => void this.format(), { title: "format the cell's code (Shift+Alt+F)" }),
      );
    } else {
      bar.append(button("✓", () => this.renderMarkdown(), { title: "render markdown (Shift+Enter)", cls: "run" }),
        button("✎", () => this.editMarkdown(), { title: "edit markdown" }));
    }
    bar.append(h("span", { class: "spacer" }),
      button("↑", () => this.nb.move(this, -1), { title: "move cell up" }),
      button("↓", () => this.nb.move(this, 1), { title: "move cell down" }),
      button("⌫", () => this.clear(), { title: "clear output" }),
      button("✕", () => this.nb.remove(this), { title: "delete cell" }));
    this.editor = new CodeEditor({
      value: d.source, language: d.type === "code" ? d.language : "markdown", label: `${d.type} cell editor`, autoHeight: true,
      onChange: (v) => { d.source = v; this.nb.changed(); },
      onRun: (mode) => (d.type === "code" ? this.nb.run(this, mode) : this.renderMarkdown(mode)),
      complete: d.type === "code" && (this.nb.session.role ?? "owner") === "owner"
        ? (code, cursor) => api.complete(this.nb.session.id, d.language, code, cursor) : undefined,
      format: d.type === "code" && this.nb.session.role !== "viewer" ? async (code) => {
        try {
          return await api.format(this.nb.session.id, d.language, code);
        } catch (e) {
          toast((e as Error).message);
          throw e;
        }
      } : undefined,
    });
    this.root.replaceChildren(bar, this.editor.el, this.statusEl, this.outEl);
    if (d.type === "markdown") {
      this.rendered = h("div", { class: "markdown rendered", tabindex: "0", title: "double-click to edit", ondblclick: () => this.editMarkdown() });
      this.root.insertBefore(this.rendered, this.statusEl);
      if (d.source.trim() !== "") this.renderMarkdown();
    }
    this.showOutputs();
    this.showStatus();
  }

  renderMarkdown(mode: RunMode = "stay"): void {
    if (!this.rendered || !this.editor) return;
    this.rendered.innerHTML = markdownHTML(this.d.source || "*empty markdown cell*");
    this.editor.el.hidden = true;
    this.rendered.hidden = false;
    if (mode === "advance") this.nb.focusNext(this);
  }

  editMarkdown(): void {
    if (!this.rendered || !this.editor) return;
    this.rendered.hidden = true;
    this.editor.el.hidden = false;
    this.editor.focus();
  }

  clear(): void {
    this.reset();
    delete this.d.status;
    this.showOutputs();
    this.showStatus();
    this.editor?.markLine(undefined, "");
    this.nb.changed();
  }

  // format formats the cell with its language's formatter, if it has one.
  async format(): Promise<void> {
    try {
      if (!(await this.editor?.format())) toast(`no formatter for ${this.d.language} in the notebook`, "info");
    } catch {
      /* the formatter's refusal was shown */
    }
  }

  // reset drops the outputs of the last run, before the next one.
  reset(): void {
    const d = this.d;
    d.outputs = [];
    for (const k of ["artifacts", "egress", "execId", "inlineCut"] as const) delete d[k];
    this.shown = 0;
    this.full = undefined;
  }

  showOutputs(): void {
    const d = this.d;
    this.outEl.replaceChildren(...(this.full ?? d.outputs).map(renderOutput));
    const cutHere = !!d.inlineCut && !this.full;
    if (cutHere || d.status === "output_limit") {
      const shown = { ...d, inlineCut: cutHere ? d.inlineCut : 0 };
      const expand = d.execId && !this.full ? (btn: HTMLButtonElement, note: HTMLElement) => void this.expand(btn, note) : undefined;
      this.outEl.append(cutMarker(shown, this.nb.session.limits?.output_bytes, expand));
    }
    const eg = renderEgress(this.d.egress);
    if (eg) this.outEl.append(eg);
    this.showArtifacts();
  }

  // keep takes what of a stdout or stderr chunk the page keeps: all of it
  // up to inlineCap bytes for the run, then nothing, counting what it drops.
  private keep(chunk: string): string {
    const d = this.d;
    const n = utf8Len(chunk);
    if (d.inlineCut) {
      d.inlineCut += n;
      return "";
    }
    if (this.shown + n <= inlineCap) {
      this.shown += n;
      return chunk;
    }
    const part = utf8Prefix(chunk, inlineCap - this.shown);
    d.inlineCut = n - utf8Len(part);
    this.shown = inlineCap;
    return part;
  }

  // expand fetches the execution's stored result and shows its stdout and
  // stderr whole (each as one block, ahead of the displays: the stored
  // result does not keep how they interleaved), or says that kiln stored
  // no more than the page shows. The notebook file keeps the capped
  // outputs.
  private async expand(btn: HTMLButtonElement, note: HTMLElement): Promise<void> {
    btn.disabled = true;
    note.textContent = "fetching the stored output…";
    let x: Execution;
    try {
      x = await json<Execution>("GET", `/v1/executions/${encodeURIComponent(this.d.execId ?? "")}`);
    } catch (e) {
      note.textContent = `the stored output could not be fetched: ${(e as Error).message}`;
      btn.disabled = false;
      return;
    }
    const r = x.result;
    const stored = utf8Len(r?.stdout ?? "") + utf8Len(r?.stderr ?? "");
    if (!r || stored <= streamBytes(this.d.outputs)) {
      note.textContent = "kiln stored no more than is shown here.";
      return;
    }
    const full: Out[] = [];
    if (r.stdout) full.push({ kind: "stream", name: "stdout", text: r.stdout });
    if (r.stderr) full.push({ kind: "stream", name: "stderr", text: r.stderr });
    this.full = [...full, ...this.d.outputs.filter((o) => o.kind !== "stream")];
    this.showOutputs();
  }

  showArtifacts(): void {
    const arts = (this.d.artifacts ?? []).filter((a) => a.path !== notebookFile && a.change !== "deleted");
    if (arts.length === 0) return;
    const list = h("div", { class: "artifacts" }, h("span", { class: "muted" }, "files: "));
    for (const a of arts) {
      list.append(h("a", { href: filesURL(this.nb.session.id, a.path), download: a.path.split("/").pop(), class: "artifact", title: `download ${a.path} (${a.change})` },
        `${a.path} (${formatBytes(a.size)}, ${a.change})`), " ");
    }
    this.outEl.append(list);
  }

  showStatus(): void {
    const d = this.d;
    this.root.dataset.state = this.state === "idle" ? (d.status ?? "") : this.state;
    if (this.state === "queued") {
      this.statusEl.textContent = "queued: waiting to run";
      return;
    }
    if (this.state === "running") {
      this.statusEl.textContent = d.actor ? `running… (run by ${d.actor})` : "running…";
      return;
    }
    if (!d.status) {
      this.statusEl.textContent = "";
      return;
    }
    const parts = [d.seq ? `[${d.seq}]` : "", d.status];
    if (d.actor) parts.push(`run by ${d.actor}`);
    if (d.wallNS !== undefined) parts.push(`in ${formatDuration(d.wallNS)}`);
    if (d.cpuNS !== undefined) parts.push(`CPU ${formatDuration(d.cpuNS)}`);
    if (d.peakMemory) parts.push(`peak memory ${formatBytes(d.peakMemory)}`);
    this.statusEl.textContent = parts.filter(Boolean).join(" · ");
  }

  setState(s: Cell["state"], note = ""): void {
    this.state = s;
    this.showStatus();
    if (note) this.statusEl.textContent = note;
  }

  // event applies one stream event to the cell.
  event(ev: Event): void {
    const d = this.d;
    switch (ev.type) {
      case "queued":
        this.setState("queued", `queued: position ${ev.position ?? "?"} in line (${ev.reason === "server" ? "the server is busy" : "your other cells are running"})`);
        break;
      case "started":
        d.seq = ev.execution?.seq;
        d.execId = ev.execution?.id ?? d.execId;
        this.setState("running");
        break;
      case "stdout":
      case "stderr": {
        const text = this.keep(ev.data ?? "");
        if (text === "") break;
        if (appendStream(d.outputs, ev.type, text)) this.outEl.append(renderOutput(d.outputs[d.outputs.length - 1]));
        else {
          // Append the chunk, not the whole text again: a long output stays linear.
          const outs = this.outEl.querySelectorAll(`.stream-out[data-name=${ev.type}]`);
          streamView(outs[outs.length - 1])?.append(text);
        }
        break;
      }
      case "display":
        if (ev.output) {
          const o: Out = { kind: "display", data: ev.output.data, result: ev.output.execute_result };
          d.outputs.push(o);
          this.outEl.append(renderOutput(o));
        }
        break;
      case "input_request":
        this.askInput(ev.prompt ?? "", !!ev.password);
        break;
      case "done":
        this.finish(ev);
        break;
      case "error":
        this.inputBox?.remove();
        d.status = "failed";
        d.outputs.push({ kind: "error", name: ev.error?.code ?? "error", message: ev.error?.detail ?? "the cell could not run" });
        this.outEl.append(renderOutput(d.outputs[d.outputs.length - 1]));
        this.setState("idle");
        break;
    }
  }

  private finish(ev: Event): void {
    this.inputBox?.remove();
    const d = this.d;
    const x = ev.execution;
    const r = x?.result;
    d.seq = x?.seq ?? d.seq;
    d.execId = x?.id ?? d.execId;
    d.status = r?.status ?? x?.status ?? "done";
    if (r) {
      // The API reports milliseconds (usage.wall_ms, cpu_ms).
      d.wallNS = r.usage ? r.usage.wall_ms * 1e6 : undefined;
      d.cpuNS = r.usage ? r.usage.cpu_ms * 1e6 : undefined;
      d.peakMemory = r.usage?.peak_memory_bytes;
      d.artifacts = r.artifacts ?? [];
      d.egress = r.egress;
      if (!d.outputs.some((o) => o.kind === "display")) {
        for (const o of r.outputs ?? []) d.outputs.push({ kind: "display", data: o.data, result: o.execute_result });
      }
      if (r.error) d.outputs.push({ kind: "error", name: r.error.name, message: r.error.message, traceback: r.error.traceback });
      if (r.notice) d.outputs.push({ kind: "notice", text: r.notice });
      this.editor?.setMarkers(markers(r));
    }
    this.showOutputs();
    this.setState("idle");
  }

  private askInput(prompt: string, password: boolean): void {
    this.inputBox?.remove();
    const input = h("input", { type: password ? "password" : "text", class: "stdin", "aria-label": prompt ? `input: ${prompt}` : "input for the running cell", autocomplete: "off" });
    const send = () => {
      this.nb.stdin(input.value + "\n");
      if (!password) appendStream(this.d.outputs, "stdout", input.value + "\n");
      this.showOutputs();
      this.inputBox?.remove();
      this.inputBox = undefined;
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        send();
      }
    });
    this.inputBox = h("div", { class: "input-box" }, h("label", {}, prompt || "input:", " ", input), button("Send", send, { title: "send the input" }),
      button("End input", () => { this.nb.stdinEOF(); this.inputBox?.remove(); }, { title: "close the cell's standard input (EOF)" }));
    this.outEl.append(this.inputBox);
    input.focus();
  }
}

export class Notebook {
  cells: Cell[] = [];
  el: HTMLElement;
  private list: HTMLElement;
  private ws?: WebSocket;
  private wsReady?: Promise<WebSocket>;
  private queue: Cell[] = [];
  private current?: Cell;
  private saveTimer?: number;
  private saving = Promise.resolve();
  private closed = false;
  private events?: EventSource;
  private others = new Map<string, Cell>(); // cells other users run, by execution id
  saveState: HTMLElement;
  me = ""; // the signed-in user's id: cells whose actor is someone else come from the event stream

  onCellDone?: () => void; // the file explorer refreshes: a cell may have changed files

  constructor(public session: Session, public languages: string[]) {
    this.list = h("div", { class: "cells" });
    this.saveState = h("span", { class: "save-state muted", "aria-live": "polite" });
    this.el = h("div", { class: "notebook" }, this.list,
      h("div", { class: "add-row" },
        button("+ Code", () => this.add("code"), { title: "add a code cell at the end" }),
        button("+ Markdown", () => this.add("markdown"), { title: "add a markdown cell at the end" })));
  }

  async load(): Promise<void> {
    let doc: NotebookDoc | undefined;
    try {
      const text = await api.readText(this.session.id, notebookFile);
      const parsed = JSON.parse(text) as NotebookDoc;
      if (parsed.format === "kiln-notebook" && Array.isArray(parsed.cells)) doc = parsed;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) toast(`the notebook file could not be read: ${(e as Error).message}; starting an empty notebook`);
    }
    const cells = doc?.cells ?? [{ id: newID(), type: "code", language: this.session.languages[0] ?? "python", source: "", outputs: [] }];
    for (const d of cells) this.insert(new Cell(this, { ...d, outputs: d.outputs ?? [] }));
    if (!this.readOnly) this.connect().catch(() => {}); // warm the socket, so the first cell does not wait for it
    this.watch();
  }

  // readOnly: a viewer of a shared session reads, and runs and saves nothing.
  get readOnly(): boolean {
    return this.session.role === "viewer";
  }

  // watch follows the session's event stream, where the cells of every
  // user of the session are told: a cell another user runs is added at
  // the end and fills in as it runs. This user's own cells come over the
  // WebSocket and are left out here.
  private watch(): void {
    const es = new EventSource(api.eventsURL(this.session.id));
    this.events = es;
    const on = (m: MessageEvent) => {
      const ev = JSON.parse(m.data) as Event;
      const id = ev.execution_id;
      if (!id) return;
      if (ev.type === "started") {
        const x = ev.execution;
        if (!x || (x.actor ?? "") === this.me || this.others.has(id)) return;
        const c = new Cell(this, { id: newID(), type: "code", language: x.language, source: x.code, outputs: [], actor: x.actor });
        this.others.set(id, c);
        this.insert(c);
        c.root.dataset.remote = "true";
      }
      const c = this.others.get(id);
      if (!c) return;
      c.event(ev);
      if (ev.type === "done") {
        this.others.delete(id);
        if (!this.readOnly) this.save();
        this.onCellDone?.();
      }
    };
    for (const t of ["started", "stdout", "stderr", "display", "done"]) es.addEventListener(t, on as EventListener);
    // The server ends the stream when the session ends or the share is
    // revoked; the browser then tries again, and a refusal closes it.
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED && !this.closed) {
        toast("live updates of this session stopped: it has ended, or it is no longer shared with you");
      }
    };
  }

  close(): void {
    this.closed = true;
    this.events?.close();
    this.ws?.close();
    for (const c of this.cells) c.editor?.dispose();
  }

  private insert(c: Cell, at = this.cells.length): void {
    this.cells.splice(at, 0, c);
    const next = this.list.children[at];
    if (next) this.list.insertBefore(c.root, next);
    else this.list.append(c.root);
  }

  add(type: "code" | "markdown", after?: Cell): Cell {
    // A new code cell takes the language of the nearest code cell above it.
    const above = this.cells.slice(0, after ? this.cells.indexOf(after) + 1 : this.cells.length).reverse().find((c) => c.d.type === "code");
    const lang = above?.d.language ?? this.session.languages[0] ?? "python";
    const c = new Cell(this, { id: newID(), type, language: type === "code" ? lang : "markdown", source: "", outputs: [] });
    const at = after ? this.cells.indexOf(after) + 1 : this.cells.length;
    this.insert(c, at);
    c.editor?.focus();
    this.changed();
    return c;
  }

  move(c: Cell, by: number): void {
    const i = this.cells.indexOf(c);
    const j = i + by;
    if (j < 0 || j >= this.cells.length) return;
    this.cells.splice(i, 1);
    this.cells.splice(j, 0, c);
    this.list.replaceChildren(...this.cells.map((x) => x.root));
    this.changed();
  }

  remove(c: Cell): void {
    if (c.state !== "idle") {
      toast("the cell is running or queued; interrupt it first");
      return;
    }
    this.cells.splice(this.cells.indexOf(c), 1);
    c.root.remove();
    c.editor?.dispose();
    this.changed();
  }

  focusNext(c: Cell): void {
    const i = this.cells.indexOf(c);
    const next = this.cells[i + 1] ?? this.add("code", c);
    next.editor?.focus();
    next.root.scrollIntoView({ block: "nearest" });
  }

  // changed saves the notebook a moment after the last edit.
  changed(): void {
    window.clearTimeout(this.saveTimer);
    this.saveState.textContent = "unsaved changes";
    this.saveTimer = window.setTimeout(() => this.save(), 800);
  }

  save(): Promise<void> {
    window.clearTimeout(this.saveTimer);
    if (this.readOnly) {
      this.saveState.textContent = "read-only: shared with you as a viewer";
      return this.saving;
    }
    const doc: NotebookDoc = { format: "kiln-notebook", version: 1, cells: this.cells.map((c) => c.d) };
    const body = JSON.stringify(doc);
    this.saving = this.saving.then(async () => {
      try {
        await api.write(this.session.id, notebookFile, body);
        this.saveState.textContent = "saved";
      } catch (e) {
        this.saveState.textContent = "not saved";
        toast(`the notebook could not be saved: ${(e as Error).message}`);
      }
    });
    return this.saving;
  }

  private connect(): Promise<WebSocket> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN && this.wsReady) return this.wsReady;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/v1/sessions/${encodeURIComponent(this.session.id)}/ws`);
    this.ws = ws;
    this.wsReady = new Promise((resolve, reject) => {
      ws.onopen = () => resolve(ws);
      ws.onerror = () => reject(new Error("the connection to the session failed"));
    });
    ws.onmessage = (m) => this.onEvent(JSON.parse(m.data) as Event);
    ws.onclose = (e) => {
      if (this.ws === ws) this.ws = undefined;
      const c = this.current;
      if (c && !this.closed) {
        c.event({ type: "error", error: { status: 0, code: "disconnected", detail: `the connection closed while the cell ran${e.reason ? ": " + e.reason : ""}` } });
        this.current = undefined;
        this.next();
      }
    };
    return this.wsReady;
  }

  private onEvent(ev: Event): void {
    const c = this.current;
    if (!c) {
      if (ev.type === "error") toast(ev.error?.detail ?? "error");
      return;
    }
    c.event(ev);
    if (ev.type === "done" || ev.type === "error") {
      this.current = undefined;
      this.save().then(() => this.onCellDone?.());
      this.next();
    }
  }

  run(c: Cell, mode: RunMode): void {
    if (mode === "advance") this.focusNext(c);
    if (c.d.type !== "code" || c.state !== "idle") return;
    if (this.readOnly) {
      toast("the session is shared with you as a viewer: you can read it, not run cells");
      return;
    }
    c.reset();
    delete c.d.status;
    c.showOutputs();
    c.setState("queued", this.current ? "queued: waits for the cell that is running" : "starting…");
    this.queue.push(c);
    if (!this.current) this.next();
  }

  // exportIpynb downloads the notebook as a Jupyter notebook.
  exportIpynb(): void {
    const nb = toIpynb(this.cells.map((c) => c.d), this.session.languages[0] ?? "python");
    const blob = new Blob([JSON.stringify(nb, null, 1)], { type: "application/x-ipynb+json" });
    const a = h("a", { href: URL.createObjectURL(blob), download: `kiln-${this.session.id}.ipynb` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
  }

  // exportHTML saves the notebook (a viewer's is already saved) and
  // downloads the server's standalone HTML of it
  // (GET /v1/sessions/{id}/export?format=html).
  async exportHTML(): Promise<void> {
    if (!this.readOnly) await this.save();
    const a = h("a", { href: `/v1/sessions/${encodeURIComponent(this.session.id)}/export?format=html`, download: `kiln-${this.session.id}.html` });
    document.body.append(a);
    a.click();
    a.remove();
  }

  // importIpynb adds a Jupyter notebook's cells, with their outputs, at the end.
  importIpynb(src: string): number {
    const cells = fromIpynb(src, newID);
    for (const d of cells) this.insert(new Cell(this, d));
    this.changed();
    return cells.length;
  }

  // rerun adds a code cell with the code at the end and runs it.
  rerun(language: string, code: string): void {
    const c = new Cell(this, { id: newID(), type: "code", language, source: code, outputs: [] });
    this.insert(c);
    c.root.scrollIntoView({ block: "nearest" });
    this.run(c, "stay");
    this.changed();
  }

  runAbove(cell: Cell): void {
    for (const c of this.cells.slice(0, this.cells.indexOf(cell))) if (c.d.type === "code") this.run(c, "stay");
  }

  runAll(): void {
    for (const c of this.cells) if (c.d.type === "code") this.run(c, "stay");
    for (const c of this.cells) if (c.d.type === "markdown") c.renderMarkdown();
  }

  private async next(): Promise<void> {
    const c = this.queue.shift();
    if (!c) return;
    this.current = c;
    try {
      const ws = await this.connect();
      ws.send(JSON.stringify({ type: "execute", execute: { code: c.d.source, language: c.d.language } }));
    } catch (e) {
      c.event({ type: "error", error: { status: 0, code: "disconnected", detail: (e as Error).message } });
      this.current = undefined;
      this.next();
    }
  }

  stdin(data: string): void {
    this.ws?.send(JSON.stringify({ type: "stdin", data }));
  }

  stdinEOF(): void {
    this.ws?.send(JSON.stringify({ type: "stdin", eof: true }));
  }

  // interrupt stops the running cell and drops the ones waiting.
  async interrupt(): Promise<void> {
    for (const c of this.queue) c.setState("idle");
    this.queue = [];
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "interrupt" }));
    else await api.interrupt(this.session.id);
  }

  async restart(): Promise<void> {
    await this.interrupt();
    await api.restart(this.session.id);
    toast("the kernels restarted: variables are gone, files are kept", "info");
  }
}

export const _test = { newID };
