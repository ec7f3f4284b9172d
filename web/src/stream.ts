// A stream's output (stdout or stderr) as it grows. Up to virtualAt lines
// it is one <pre>; past that only the lines in view are drawn, in a
// scroll box whose height stands for all of them, so a 100,000-line
// output keeps the page responsive. Chunks append in time proportional
// to the chunk, not to the whole output.
import { button, h } from "./dom";
import { stripAnsi } from "./format";

export const virtualAt = 1000; // lines; below this a plain <pre>
export const lineHeight = 18; // px: every line of a virtual view is one row, without wrapping
const overscan = 20; // lines drawn above and below the view

const views = new WeakMap<HTMLElement, StreamView>();

export class StreamView {
  readonly el: HTMLElement;
  private lines: string[] = [""];
  private pre: HTMLPreElement;
  private box?: HTMLElement; // the virtual scroll box
  private spacer?: HTMLElement;
  private info?: HTMLElement;
  private frame = 0;

  constructor(readonly name: "stdout" | "stderr", text: string) {
    this.pre = h("pre", { class: `stream ${name}`, "aria-label": name });
    this.el = h("div", { class: "stream-out", "data-name": name }, this.pre);
    views.set(this.el, this);
    this.append(text);
  }

  // lineCount does not count the empty line after a final newline.
  get lineCount(): number {
    return this.lines.length - (this.lines[this.lines.length - 1] === "" ? 1 : 0);
  }

  text(): string {
    return this.lines.join("\n");
  }

  append(chunk: string): void {
    chunk = stripAnsi(chunk);
    if (chunk === "") return;
    const parts = chunk.split("\n");
    this.lines[this.lines.length - 1] += parts[0];
    for (let i = 1; i < parts.length; i++) this.lines.push(parts[i]);
    if (this.box) return this.schedule(true);
    if (this.lines.length > virtualAt) return this.virtualise();
    this.pre.append(chunk);
  }

  // virtualise swaps the <pre> for the scroll box that draws only the
  // lines in view.
  private virtualise(): void {
    this.spacer = h("div", { class: "v-spacer" });
    this.pre = h("pre", { class: `stream ${this.name} v-window`, "aria-label": `${this.name}, the lines in view` });
    this.box = h("div", { class: `v-scroll ${this.name}`, tabindex: "0", role: "region",
      "aria-label": `${this.name}: a long output; only the lines in view are drawn` }, this.spacer, this.pre);
    this.info = h("span", { class: "muted v-info" });
    const expand = button("Expand", () => {
      const open = this.box!.classList.toggle("expanded");
      expand.textContent = open ? "Collapse" : "Expand";
      this.schedule(false);
    }, { title: `show more of the ${this.name} output at once` });
    const bar = h("div", { class: "v-bar" }, this.info, expand,
      button("Download", () => this.download(), { title: `download the whole ${this.name} output as a text file` }));
    this.box.addEventListener("scroll", () => this.schedule(false), { passive: true });
    this.el.classList.add("virtual");
    this.el.replaceChildren(bar, this.box);
    this.schedule(true);
  }

  private schedule(follow: boolean): void {
    const box = this.box!;
    // Follow the end while it streams, unless the reader scrolled up.
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 2 * lineHeight;
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw(follow && atEnd);
    });
  }

  private draw(toEnd: boolean): void {
    const box = this.box!;
    this.spacer!.style.height = `${this.lines.length * lineHeight}px`;
    this.info!.textContent = `${this.lineCount.toLocaleString("en")} lines`;
    if (toEnd) box.scrollTop = box.scrollHeight;
    const first = Math.max(0, Math.floor(box.scrollTop / lineHeight) - overscan);
    const last = Math.min(this.lines.length, Math.ceil((box.scrollTop + box.clientHeight) / lineHeight) + overscan);
    this.pre.style.top = `${first * lineHeight}px`;
    this.pre.textContent = this.lines.slice(first, last).join("\n");
    this.pre.dataset.first = String(first);
  }

  private download(): void {
    const a = h("a", { href: URL.createObjectURL(new Blob([this.text()], { type: "text/plain" })), download: `${this.name}.txt` });
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }
}

// streamView finds the view of a stream element made by StreamView.
export function streamView(el: Element | null | undefined): StreamView | undefined {
  return el instanceof HTMLElement ? views.get(el) : undefined;
}
