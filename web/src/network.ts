// A session's network: the egress records under a cell's output, the
// session's policy with the owner's dialog to change it, and the network
// fields of the new-session form (see the README's "Network policy").
import "./network.css";
import { api, type EgressRecord, type NetworkPolicy, type Session } from "./api";
import { button, h, toast } from "./dom";
import { formatBytes } from "./format";

// At most this many egress lines show under a cell; the rest are counted.
export const maxEgressShown = 50;

// egressLine says one connection attempt in a line: host:port, allowed or
// denied with the reason, bytes each way, and whether the shared cache
// served it. A host is shown as text (never HTML), and cut.
export function egressLine(r: EgressRecord): string {
  if (r.kind === "dropped") return r.reason ?? "more attempts are in the audit log";
  const host = r.host.length > 255 ? r.host.slice(0, 255) + "…" : r.host;
  const where = `${host}:${r.port}`;
  if (!r.allowed) return `${where} denied: ${r.reason || "refused by the network policy"}`;
  const parts = [r.kind, `${formatBytes(r.bytes_up)} up`, `${formatBytes(r.bytes_down)} down`];
  if (r.package) parts.push(`package ${r.package}`);
  if (r.cached) parts.push("cached");
  return `${where} allowed (${parts.join(", ")})`;
}

// renderEgress is the compact list under a cell's output.
export function renderEgress(rs: EgressRecord[] | undefined): HTMLElement | null {
  if (!rs?.length) return null;
  const denied = rs.filter((r) => !r.allowed && r.kind !== "dropped").length;
  const list = h("ul", { class: "egress", "aria-label": "network attempts" });
  for (const r of rs.slice(0, maxEgressShown)) {
    list.append(h("li", { class: r.allowed ? "allowed" : "denied", "data-host": r.host }, egressLine(r)));
  }
  if (rs.length > maxEgressShown) list.append(h("li", { class: "muted" }, `… ${rs.length - maxEgressShown} more (the audit log has them all)`));
  const sum = `network: ${rs.length} attempt${rs.length === 1 ? "" : "s"}${denied ? `, ${denied} denied` : ""}`;
  return h("details", { class: "egress-wrap", open: denied > 0 }, h("summary", {}, sum), list);
}

// parseAllow reads an allow list typed as text: hosts separated by
// commas, spaces or lines. The server checks each.
export function parseAllow(text: string): string[] {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter((s) => s !== "");
}

// policyText says a policy in a few words.
export function policyText(p: NetworkPolicy | undefined): string {
  if (!p || p.mode !== "allowlist") return "network: none";
  const allow = p.allow ?? [];
  return allow.length ? `network: ${allow.join(", ")}` : "network: package indexes only";
}

// networkFields are the new-session form's: a mode and an allow list.
export function networkFields(): { el: HTMLElement; value: () => NetworkPolicy } {
  const mode = h("select", { id: "net-mode", name: "network" },
    h("option", { value: "none" }, "none: no network (default)"),
    h("option", { value: "allowlist" }, "allowlist: only the hosts below, and the package indexes"));
  const allow = h("input", { id: "net-allow", autocomplete: "off", placeholder: "api.example.com, *.example.org:8443", disabled: true, size: 40 });
  mode.addEventListener("change", () => (allow.disabled = mode.value !== "allowlist"));
  const el = h("fieldset", { class: "network" }, h("legend", {}, "Network"),
    h("label", { for: "net-mode" }, "Policy "), mode, " ",
    h("label", { for: "net-allow" }, "Allowed hosts "), allow);
  return { el, value: () => (mode.value === "allowlist" ? { mode: "allowlist", allow: parseAllow(allow.value) } : { mode: "none" }) };
}

// networkStatus shows the session's policy; its owner clicks it to
// change it. onChange gets the session the server answered with.
export function networkStatus(session: Session, onChange: (s: Session) => void): HTMLElement {
  const label = () => policyText(session.network);
  if ((session.role ?? "owner") !== "owner") return h("span", { class: "muted network-status", title: "the session's network policy" }, label());
  const b = button(label(), () => networkDialog(session, (s) => {
    session.network = s.network;
    b.textContent = label();
    onChange(s);
  }), { title: "the session's network policy: change it", cls: "network-status" });
  return b;
}

// networkDialog lets the owner set the live session's policy; the
// server's refusal (beyond the ceiling, a bad host) is shown as it said it.
export function networkDialog(session: Session, done: (s: Session) => void): void {
  const cur = session.network ?? { mode: "none" };
  const mode = h("select", { id: "netdlg-mode" },
    h("option", { value: "none", selected: cur.mode !== "allowlist" }, "none: no network"),
    h("option", { value: "allowlist", selected: cur.mode === "allowlist" }, "allowlist: only these hosts, and the package indexes"));
  const allow = h("textarea", { id: "netdlg-allow", rows: 4, cols: 44, placeholder: "one host a line: api.example.com, *.example.org, host:8443" });
  allow.value = (cur.allow ?? []).join("\n");
  const err = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "network-form", "aria-label": "network policy" },
    h("label", { for: "netdlg-mode" }, "Policy "), mode, h("br"),
    h("label", { for: "netdlg-allow" }, "Allowed hosts"), h("br"), allow, err,
    h("button", { type: "submit" }, "Save policy"), " ",
    button("Cancel", () => dlg.close(), { title: "close without changing the policy" }));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.textContent = "";
    const p: NetworkPolicy = mode.value === "allowlist" ? { mode: "allowlist", allow: parseAllow(allow.value) } : { mode: "none" };
    try {
      done(await api.setNetwork(session.id, p));
      toast(`the session's ${policyText(p)}`, "info");
      dlg.close();
    } catch (x) {
      err.textContent = (x as Error).message;
    }
  });
  const dlg = h("dialog", { class: "help network", "aria-label": "the session's network policy" },
    h("h2", {}, "Network policy"),
    h("p", { class: "muted" }, "Code reaches the network only through kiln's egress proxy, and only the hosts allowed here (plus the administrator's package indexes). The server may allow you less than you ask; it says so. Open connections the new policy does not allow are cut."),
    form);
  dlg.addEventListener("close", () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
}
