// h builds an element: attributes (on* names take listeners), then children.
type Child = Node | string | null | undefined | false;
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    else if (k === "class") el.className = String(v);
    else if (k === "text") el.textContent = String(v);
    else if (k in el && typeof v !== "string") (el as unknown as Record<string, unknown>)[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export function button(label: string, onClick: () => void, opts: { title?: string; cls?: string; text?: string } = {}): HTMLButtonElement {
  return h("button", { type: "button", class: opts.cls ?? "", title: opts.title ?? label, "aria-label": opts.title ?? label, onclick: onClick }, opts.text ?? label);
}

export function toast(msg: string, kind: "error" | "info" = "error"): void {
  const el = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, msg);
  document.body.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 3000);
}
