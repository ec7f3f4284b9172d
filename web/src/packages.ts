// The "Install packages" dialog: pip or npm names into the session
// through POST /v1/sessions/{id}/packages, with pip's or npm's output
// streamed as it installs, then what was installed at which version.
import { request, type Event, type PackageResult, type Session } from "./api";
import { button, h } from "./dom";
import { stripAnsi } from "./format";
import { parseAllow, policyText, renderEgress } from "./network";

// parseSSE takes the complete events off the front of a server-sent
// event stream's text, and returns them and the incomplete rest.
export function parseSSE(buf: string): { events: { event: string; data: string }[]; rest: string } {
  const events: { event: string; data: string }[] = [];
  buf = buf.replace(/\r\n?/g, "\n");
  let i: number;
  while ((i = buf.indexOf("\n\n")) >= 0) {
    const block = buf.slice(0, i);
    buf = buf.slice(i + 2);
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const [k, ...v] = line.split(":");
      const val = v.join(":").replace(/^ /, "");
      if (k === "event") event = val;
      else if (k === "data") data.push(val);
    }
    if (data.length) events.push({ event, data: data.join("\n") });
  }
  return { events, rest: buf };
}

// installedText says what an install did, one package a line.
export function installedText(r: PackageResult): string {
  const lines = r.packages.map((p) => `${p.name} ${p.version}${p.present ? " (already there)" : p.requested ? "" : " (dependency)"}`);
  return `${r.manager}: ${r.packages.length} package${r.packages.length === 1 ? "" : "s"} in ${(r.wall_ms / 1000).toFixed(1)} s\n${lines.join("\n")}`;
}

// install streams one install's events to on and returns its result.
export async function install(session: string, manager: string, packages: string[], on: (ev: Event) => void): Promise<PackageResult> {
  const r = await request("POST", `/v1/sessions/${encodeURIComponent(session)}/packages`, { manager, packages }, { Accept: "text/event-stream" });
  const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the install's stream ended before it finished");
    const p = parseSSE(buf + value);
    buf = p.rest;
    for (const e of p.events) {
      const ev = JSON.parse(e.data) as Event;
      on(ev);
      if (ev.type === "done" && ev.packages) return ev.packages;
      if (ev.type === "error") throw new Error(ev.error?.detail ?? "the install failed");
    }
  }
}

export function packagesDialog(session: Session, onDone: () => void): void {
  const manager = h("select", { id: "pkg-manager" },
    h("option", { value: "pip" }, "pip (Python)"), h("option", { value: "npm" }, "npm (JavaScript, TypeScript)"));
  const names = h("input", { id: "pkg-names", required: true, autocomplete: "off", size: 40, placeholder: "requests==2.31.0 left-pad@1.3.0" });
  const log = h("pre", { class: "stream pkg-log", "aria-label": "install output", "aria-live": "polite" });
  const result = h("div", { class: "pkg-result", "aria-live": "polite" });
  const err = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit" }, "Install");
  const form = h("form", { class: "pkg-form", "aria-label": "install packages" },
    h("label", { for: "pkg-manager" }, "With "), manager, " ",
    h("label", { for: "pkg-names" }, "packages "), names, " ", submit);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const list = parseAllow(names.value);
    if (!list.length) return;
    err.textContent = "";
    log.textContent = "";
    result.replaceChildren();
    submit.disabled = true;
    submit.textContent = "Installing…";
    try {
      const r = await install(session.id, manager.value, list, (ev) => {
        if (ev.type === "queued") log.append(`queued: position ${ev.position ?? "?"}\n`);
        else if (ev.type === "started") log.append(`installing ${list.join(" ")} with ${manager.value}…\n`);
        else if (ev.type === "stdout" || ev.type === "stderr") log.append(stripAnsi(ev.data ?? ""));
        log.scrollTop = log.scrollHeight;
      });
      result.append(h("pre", { class: "stream installed" }, installedText(r)));
      const eg = renderEgress(r.egress);
      if (eg) result.append(eg);
      onDone();
    } catch (x) {
      err.textContent = (x as Error).message;
    } finally {
      submit.disabled = false;
      submit.textContent = "Install";
    }
  });
  const dlg = h("dialog", { class: "help packages", "aria-label": "install packages" },
    h("h2", {}, "Install packages"),
    h("p", { class: "muted" }, `Names with an optional version, separated by spaces or commas. They come from the administrator's package indexes, so the session's network policy must not be none (this session's ${policyText(session.network)}). The kernels see them without a restart.`),
    form, err, log, result,
    button("Close", () => dlg.close(), { title: "close the install dialog" }));
  dlg.addEventListener("close", () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
  names.focus();
}
