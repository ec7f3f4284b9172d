// Rendering of a cell's outputs: streams, rich displays, errors.
import DOMPurify from "dompurify";
import { marked } from "marked";
import { h, button } from "./dom";
import { isDataFrameHTML, mimeText, page, pickMime, stripAnsi } from "./format";
import { StreamView } from "./stream";

export type Out =
  | { kind: "stream"; name: "stdout" | "stderr"; text: string }
  | { kind: "display"; data: Record<string, unknown>; result?: boolean }
  | { kind: "error"; name: string; message: string; traceback?: string[] }
  | { kind: "notice"; text: string };

export function markdownHTML(src: string): string {
  return DOMPurify.sanitize(marked.parse(src, { async: false }) as string);
}

// Frames for HTML output: each posts "ready" once loaded and its height
// after writing; the sandboxed frame has an opaque origin, so messages are
// matched by their source window.
const frames = new Map<Window, { iframe: HTMLIFrameElement; html: string }>();
window.addEventListener("message", (e) => {
  const f = e.source ? frames.get(e.source as Window) : undefined;
  if (!f || typeof e.data !== "object" || e.data === null) return;
  if (e.data.kilnFrameReady) f.iframe.contentWindow?.postMessage({ html: f.html }, "*");
  if (typeof e.data.kilnFrameHeight === "number") {
    f.iframe.style.height = `${Math.min(Math.max(e.data.kilnFrameHeight, 24), 800)}px`;
  }
});

function htmlFrame(html: string): HTMLElement {
  const iframe = h("iframe", {
    class: "html-output", src: "/ui/frame.html", sandbox: "allow-scripts", title: "HTML output (sandboxed)",
    referrerpolicy: "no-referrer",
  });
  const wrap = h("div", { class: "frame-wrap" }, iframe);
  // The window exists once the iframe is in the document.
  queueMicrotask(() => {
    const attach = () => {
      if (iframe.contentWindow) frames.set(iframe.contentWindow, { iframe, html });
    };
    attach();
    iframe.addEventListener("load", attach);
  });
  return wrap;
}

const rowsPerPage = 25;

function dataTable(html: string): HTMLElement {
  const frag = DOMPurify.sanitize(html, { RETURN_DOM_FRAGMENT: true });
  const table = frag.querySelector("table");
  if (!table) return h("div", {}, "(empty table)");
  table.removeAttribute("border");
  table.className = "data-table";
  const body = table.tBodies[0];
  const rows = body ? Array.from(body.rows) : [];
  const wrap = h("div", { class: "table-output" }, table);
  if (rows.length <= rowsPerPage) return wrap;
  let p = 0;
  const info = h("span", { class: "page-info" });
  const show = () => {
    const pg = page(rows.length, p, rowsPerPage);
    p = pg.page;
    body!.replaceChildren(...rows.slice(pg.start, pg.end));
    info.textContent = `rows ${pg.start + 1}–${pg.end} of ${rows.length} (page ${pg.page + 1} of ${pg.pages})`;
  };
  const nav = h("div", { class: "pager", role: "navigation", "aria-label": "table pages" },
    button("‹ Previous", () => { p--; show(); }, { title: "previous page of rows" }), info,
    button("Next ›", () => { p++; show(); }, { title: "next page of rows" }));
  wrap.append(nav);
  show();
  return wrap;
}

function jsonTree(v: unknown, name = "", depth = 0): HTMLElement {
  if (v !== null && typeof v === "object") {
    const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as object);
    const d = h("details", { class: "json", open: depth < 1 },
      h("summary", {}, name ? `${name}: ` : "", Array.isArray(v) ? `Array(${entries.length})` : `{${entries.length} keys}`));
    for (const [k, x] of entries.slice(0, 1000)) d.append(jsonTree(x, k, depth + 1));
    if (entries.length > 1000) d.append(h("div", { class: "muted" }, `… ${entries.length - 1000} more`));
    return d;
  }
  return h("div", { class: "json-leaf" }, name ? h("span", { class: "json-key" }, `${name}: `) : null,
    h("span", { class: `json-${v === null ? "null" : typeof v}` }, JSON.stringify(v)));
}

function display(data: Record<string, unknown>): HTMLElement {
  const mime = pickMime(data);
  const v = mime ? data[mime] : undefined;
  switch (mime) {
    case "text/html": {
      const html = mimeText(v);
      return isDataFrameHTML(html) ? dataTable(html) : htmlFrame(html);
    }
    case "image/png":
    case "image/jpeg":
    case "image/gif":
      return h("img", { class: "image-output", alt: "image output", src: `data:${mime};base64,${mimeText(v).replace(/\s/g, "")}` });
    case "image/svg+xml":
      // As an image, an SVG's scripts never run.
      return h("img", { class: "image-output", alt: "SVG output", src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(mimeText(v))}` });
    case "text/markdown": {
      const div = h("div", { class: "markdown" });
      div.innerHTML = markdownHTML(mimeText(v));
      return div;
    }
    case "text/plain":
    case undefined:
      return h("pre", { class: "stream result" }, stripAnsi(mimeText(v ?? "")));
    default:
      if (mime === "application/json" || mime.endsWith("+json")) {
        let parsed = v;
        if (typeof v === "string") {
          try { parsed = JSON.parse(v); } catch { /* show as text */ }
        }
        return h("div", { class: "json-output" }, jsonTree(parsed));
      }
      return h("pre", { class: "stream" }, `[${mime}] ${mimeText(v).slice(0, 2000)}`);
  }
}

export function renderOutput(o: Out): HTMLElement {
  switch (o.kind) {
    case "stream":
      return new StreamView(o.name, o.text).el;
    case "display":
      return h("div", { class: "display" }, display(o.data));
    case "error":
      return h("div", { class: "error-output", role: "alert" },
        h("div", { class: "error-title" }, `${o.name}: ${o.message}`),
        o.traceback?.length ? h("pre", { class: "traceback" }, stripAnsi(o.traceback.join("\n"))) : null);
    case "notice":
      return h("div", { class: "notice" }, o.text);
  }
}

// appendStream adds a chunk to the last output when it is the same stream.
export function appendStream(outs: Out[], name: "stdout" | "stderr", text: string): boolean {
  const last = outs[outs.length - 1];
  if (last && last.kind === "stream" && last.name === name) {
    last.text += text;
    return false;
  }
  outs.push({ kind: "stream", name, text });
  return true;
}
