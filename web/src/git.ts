// The Git tab: the session's workspace as a git repository, through
// /v1/sessions/{id}/git/... (git runs inside the session's sandbox):
// init, changed files, a diff view, commit of the selected files, log.
import { json } from "./api";
import { button, h, toast } from "./dom";

interface GitFile { path: string; index: string; worktree: string }
interface GitStatus { repo: boolean; branch?: string; files: GitFile[] }
interface GitCommit { hash: string; author: string; time: string; subject: string }

// state says a file's change in words, from git's two status letters.
export function gitState(f: GitFile): string {
  if (f.index === "?") return "untracked";
  const words: Record<string, string> = { M: "modified", A: "added", D: "deleted", R: "renamed", C: "copied", U: "conflict", T: "type changed" };
  const staged = f.index.trim() ? `${words[f.index] ?? f.index} (staged)` : "";
  const work = f.worktree.trim() ? (words[f.worktree] ?? f.worktree) : "";
  return [staged, work].filter(Boolean).join(", ");
}

export class GitPanel {
  el: HTMLElement;
  private body: HTMLElement;
  private diff: HTMLElement;
  private base: string;

  constructor(session: string, private readOnly: boolean, private onChange: () => void) {
    this.base = `/v1/sessions/${encodeURIComponent(session)}/git`;
    this.body = h("div", { class: "git-body" });
    this.diff = h("div", { class: "git-diff", "aria-live": "polite" });
    this.el = h("div", { class: "git-tab" }, h("div", { class: "file-bar" }, h("strong", {}, "Git"), " ",
      h("span", { class: "muted" }, "the workspace as a repository; git runs in the sandbox"), h("span", { class: "spacer" }),
      button("⟳", () => void this.load(), { title: "reload the repository's status" })), this.body, this.diff);
  }

  async load(): Promise<void> {
    let st: GitStatus;
    try {
      st = await json<GitStatus>("GET", `${this.base}/status`);
    } catch (e) {
      this.body.replaceChildren(h("p", { class: "error" }, (e as Error).message));
      return;
    }
    this.diff.replaceChildren();
    if (!st.repo) {
      const bundle = h("input", { type: "text", placeholder: "repo.bundle", "aria-label": "a git bundle file in the workspace" });
      this.body.replaceChildren(h("p", {}, "The workspace is not a git repository."),
        this.readOnly ? "" : h("p", {}, button("Initialise a repository", () => void this.act(() => json("POST", `${this.base}/init`)), { title: "make the workspace a git repository (git init)" }),
          " or, from a bundle you uploaded, ", bundle, " ",
          button("Start from the bundle", () => void this.act(() => json("POST", `${this.base}/bundle`, { bundle: bundle.value })), { title: "start the repository from the git bundle file named in the box" })));
      return;
    }
    const rows = st.files.map((f) => {
      const box = h("input", { type: "checkbox", checked: true, "aria-label": `select ${f.path}`, "data-path": f.path });
      return h("tr", { "data-path": f.path }, h("td", {}, this.readOnly ? "" : box),
        h("td", {}, button(f.path, () => void this.showDiff(f), { title: `show the diff of ${f.path}`, cls: "link" })),
        h("td", { class: "muted" }, gitState(f)));
    });
    const message = h("textarea", { rows: 2, placeholder: "commit message", "aria-label": "commit message" });
    const selected = () => Array.from(this.body.querySelectorAll<HTMLInputElement>("input[type=checkbox]:checked")).map((b) => b.dataset.path!);
    const commit = async () => {
      const paths = selected();
      if (!message.value.trim()) return toast("write a commit message first");
      await this.act(async () => {
        if (paths.length) await json("POST", `${this.base}/stage`, { paths });
        const c = await json<GitCommit>("POST", `${this.base}/commit`, { message: message.value });
        toast(`committed ${c.hash.slice(0, 8)}: ${c.subject}`, "info");
      });
    };
    const log = h("ol", { class: "git-log", "aria-label": "commits, newest first" });
    this.body.replaceChildren(h("p", {}, `On branch ${st.branch || "(none)"} · ${st.files.length ? `${st.files.length} changed` : "nothing to commit"}`),
      st.files.length ? h("table", { class: "git-files", "aria-label": "changed files" }, ...rows) : "",
      this.readOnly || !st.files.length ? "" : h("div", { class: "git-commit" }, message,
        button("Commit selected", () => void commit(), { title: "stage the selected files and commit them" }),
        button("Stage", () => void this.act(() => json("POST", `${this.base}/stage`, { paths: selected() })), { title: "stage the selected files" }),
        button("Unstage", () => void this.act(() => json("POST", `${this.base}/unstage`, { paths: selected() })), { title: "unstage the selected files (they stay in the workspace)" })),
      h("h3", {}, "Log"), log);
    try {
      const { commits } = await json<{ commits: GitCommit[] }>("GET", `${this.base}/log?limit=50`);
      if (!commits.length) log.append(h("li", { class: "muted" }, "no commits yet"));
      for (const c of commits) {
        const li = h("li", { class: "git-commit-item", "data-commit": c.hash }, h("code", {}, c.hash.slice(0, 8)), " ", c.subject,
          h("span", { class: "muted" }, ` — ${c.author}, ${new Date(c.time).toLocaleString()} `));
        if (!this.readOnly) li.append(button("Restore a file…", () => this.restoreForm(li, c), { title: `restore a file as it was in ${c.hash.slice(0, 8)}` }));
        log.append(li);
      }
    } catch (e) {
      log.append(h("li", { class: "error" }, (e as Error).message));
    }
  }

  // restoreForm asks which file to bring back as it was in commit c.
  private restoreForm(li: HTMLElement, c: GitCommit): void {
    li.querySelector(".git-restore")?.remove();
    const path = h("input", { type: "text", placeholder: "path/in/workspace", "aria-label": `file to restore from ${c.hash.slice(0, 8)}` });
    const go = () => void this.act(async () => {
      await json("POST", `${this.base}/restore`, { commit: c.hash, path: path.value });
      toast(`restored ${path.value} from ${c.hash.slice(0, 8)}`, "info");
    });
    path.addEventListener("keydown", (e) => e.key === "Enter" && go());
    li.append(h("span", { class: "git-restore" }, " ", path, " ", button("Restore", go, { title: `restore the file as it was in ${c.hash.slice(0, 8)}` })));
    path.focus();
  }

  private async act(fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      toast((e as Error).message);
    }
    await this.load();
    this.onChange();
  }

  private async showDiff(f: GitFile): Promise<void> {
    const q = (staged: boolean) => `${this.base}/diff?path=${encodeURIComponent(f.path)}${staged ? "&staged=true" : ""}`;
    try {
      let d = await json<{ diff: string; cut?: boolean }>("GET", q(false));
      if (!d.diff && f.index.trim() && f.index !== "?") d = await json("GET", q(true));
      const pre = h("pre", { class: "diff", "aria-label": `diff of ${f.path}` });
      for (const line of (d.diff || (f.index === "?" ? "(untracked: its whole content is new)" : "(no changes)")).split("\n")) {
        const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
        pre.append(h("span", { class: cls }, line + "\n"));
      }
      this.diff.replaceChildren(h("h3", {}, `Diff of ${f.path}`), pre, d.cut ? h("p", { class: "muted" }, "The diff is over 1 MiB and is cut there.") : "");
    } catch (e) {
      toast((e as Error).message);
    }
  }
}
