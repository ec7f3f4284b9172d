// The file explorer of a session's workspace: a tree, upload (button and
// drag and drop), download, open, rename, delete, new folder.
import { api, filesURL, type FileInfo } from "./api";
import { button, h, toast } from "./dom";
import { formatBytes } from "./format";

export class Files {
  el: HTMLElement;
  private tree: HTMLElement;
  private open = new Set<string>([""]);
  private input: HTMLInputElement;

  constructor(private session: string, private onOpen: (path: string) => void) {
    this.tree = h("ul", { class: "tree", role: "tree", "aria-label": "workspace files" });
    this.input = h("input", { type: "file", multiple: true, hidden: true, "aria-label": "files to upload", onchange: () => {
      this.upload("", Array.from(this.input.files ?? []));
      this.input.value = "";
    } });
    this.el = h("aside", { class: "files", "aria-label": "file explorer" },
      h("div", { class: "files-bar" }, h("strong", {}, "Files"), h("span", { class: "spacer" }),
        button("Upload", () => this.input.click(), { title: "upload files" }),
        button("New folder", () => this.newFolder(""), { title: "new folder" }),
        button("⟳", () => this.refresh(), { title: "refresh the file list" })),
      this.input, this.tree, h("div", { class: "drop-hint muted" }, "Drop files here to upload"));
    this.el.addEventListener("dragover", (e) => {
      e.preventDefault();
      this.el.classList.add("dragging");
    });
    this.el.addEventListener("dragleave", () => this.el.classList.remove("dragging"));
    this.el.addEventListener("drop", (e) => {
      e.preventDefault();
      this.el.classList.remove("dragging");
      const target = (e.target as HTMLElement).closest("[data-dir]") as HTMLElement | null;
      this.upload(target?.dataset.dir ?? "", Array.from(e.dataTransfer?.files ?? []));
    });
  }

  async upload(dir: string, files: File[]): Promise<void> {
    if (files.length === 0) return;
    try {
      const r = await api.upload(this.session, dir, files);
      toast(`uploaded ${r.files.map((f) => f.path).join(", ")}`, "info");
    } catch (e) {
      toast(`upload failed: ${(e as Error).message}`);
    }
    this.refresh();
  }

  async refresh(): Promise<void> {
    this.tree.replaceChildren(...(await this.listing("")));
  }

  private async listing(dir: string): Promise<HTMLElement[]> {
    try {
      const l = await api.list(this.session, dir);
      return l.entries.map((e) => this.item(e));
    } catch (e) {
      return [h("li", { class: "muted" }, `cannot list: ${(e as Error).message}`)];
    }
  }

  private item(e: FileInfo): HTMLElement {
    const isDir = e.type === "dir";
    const li = h("li", { role: "treeitem", "data-path": e.path, ...(isDir ? { "data-dir": e.path, "aria-expanded": String(this.open.has(e.path)) } : {}) });
    const name = button(isDir ? `${this.open.has(e.path) ? "▾" : "▸"} ${e.name}/` : e.name, () => (isDir ? this.toggle(e.path) : this.onOpen(e.path)),
      { title: isDir ? `open folder ${e.path}` : `open ${e.path} in an editor tab`, cls: "name" });
    const dl = h("a", { href: filesURL(this.session, e.path, isDir ? "?archive=zip" : ""), download: isDir ? `${e.name}.zip` : e.name, title: `download ${e.path}${isDir ? " as a zip" : ""}`, "aria-label": `download ${e.path}`, class: "icon" }, "⇩");
    li.append(h("div", { class: "row" }, name, h("span", { class: "size muted" }, isDir ? "" : formatBytes(e.size)), dl,
      isDir ? button("+", () => this.newFolder(e.path), { title: `new folder in ${e.path}` }) : null,
      button("✎", () => this.rename(e.path), { title: `rename ${e.path}` }),
      button("✕", () => this.remove(e.path, isDir), { title: `delete ${e.path}` })));
    if (isDir && this.open.has(e.path)) {
      const sub = h("ul", { role: "group" });
      li.append(sub);
      this.listing(e.path).then((items) => sub.replaceChildren(...items));
    }
    return li;
  }

  private toggle(path: string): void {
    if (this.open.has(path)) this.open.delete(path);
    else this.open.add(path);
    this.refresh();
  }

  private async newFolder(parent: string): Promise<void> {
    const name = prompt(`New folder in /${parent}:`);
    if (!name) return;
    await this.act(() => api.mkdir(this.session, parent ? `${parent}/${name}` : name));
  }

  private async rename(path: string): Promise<void> {
    const to = prompt(`Rename ${path} to:`, path);
    if (!to || to === path) return;
    await this.act(() => api.move(this.session, path, to));
  }

  private async remove(path: string, isDir: boolean): Promise<void> {
    if (!confirm(`Delete ${path}${isDir ? " and everything in it" : ""}?`)) return;
    await this.act(() => api.remove(this.session, path));
  }

  private async act(f: () => Promise<unknown>): Promise<void> {
    try {
      await f();
    } catch (e) {
      toast((e as Error).message);
    }
    this.refresh();
  }
}
