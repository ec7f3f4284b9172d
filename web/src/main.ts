// The kiln notebook: sign in, the session list, and a session's notebook
// with its files. Routes live in the URL's fragment: #/ and #/s/<id>.
import "./style.css";
import { api, ApiError, type Session, type User } from "./api";
import { button, h, toast } from "./dom";
import { CodeEditor, setEditorTheme, loadMonaco } from "./editor";
import { Files } from "./files";
import { History } from "./history";
import { GitPanel } from "./git";
import { formatTTL, sessionUse } from "./format";
import { Notebook } from "./notebook";
import { shareDialog } from "./share";
import { networkFields, networkStatus } from "./network";
import { packagesDialog } from "./packages";
import type { TerminalPanel } from "./terminal";

const app = document.getElementById("app")!;
let me: User | undefined;
let current: Notebook | undefined;
let languages: string[] | undefined;

// ---- theme ----
function applyTheme(dark: boolean): void {
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  setEditorTheme(dark);
  localStorage.setItem("kiln-theme", dark ? "dark" : "light");
}
const savedTheme = localStorage.getItem("kiln-theme");
applyTheme(savedTheme ? savedTheme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches);

function header(...extra: (Node | string)[]): HTMLElement {
  return h("header", { class: "top" }, h("a", { href: "#/", class: "brand", title: "your sessions" }, "kiln"), ...extra, h("span", { class: "spacer" }),
    button("◐", () => applyTheme(document.documentElement.dataset.theme !== "dark"), { title: "switch between dark and light theme" }),
    button("?", showHelp, { title: "keyboard shortcuts" }),
    me ? h("span", { class: "muted user" }, me.name) : "",
    me ? button("Sign out", signOut, { title: "sign out" }) : "");
}

function showHelp(): void {
  const rows = [
    ["Shift+Enter", "run the cell and move to the next (a new one at the end)"],
    ["Ctrl+Enter (⌘+Enter)", "run the cell and stay"],
    ["▲▶ on a cell", "run the cells above it"],
    ["Shift+Enter in a markdown cell", "render it"],
    ["Double-click a markdown cell", "edit it"],
    ["Enter in an input box", "send the line to the running cell"],
    ["Ctrl+S (⌘+S) in a file tab", "save the file"],
    ["Tab after a name or a dot, Ctrl+Space", "complete from the kernel (Python)"],
    ["Shift+Alt+F, or { } on a cell", "format the cell (black, gofmt, rustfmt, clang-format on the server; Monaco's own for JavaScript and TypeScript)"],
    ["Tab / Shift+Tab", "move between controls (in an editor, Ctrl+M then Tab moves focus out)"],
    ["Escape", "close this panel"],
  ];
  const dlg = h("dialog", { class: "help", "aria-label": "keyboard shortcuts" },
    h("h2", {}, "Keyboard shortcuts"),
    h("table", {}, ...rows.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, h("kbd", {}, k)), h("td", {}, v)))),
    button("Close", () => dlg.close(), { title: "close the keyboard shortcuts" }));
  dlg.addEventListener("close", () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
}

async function signOut(): Promise<void> {
  try {
    await api.signOut();
  } catch {
    /* the cookie is cleared either way */
  }
  me = undefined;
  location.hash = "#/";
  route();
}

// ---- sign in ----
function signInScreen(): void {
  const key = h("input", { type: "password", id: "key", autocomplete: "current-password", required: true, "aria-describedby": "key-help" });
  const err = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "signin", "aria-label": "sign in" },
    h("h1", {}, "kiln notebook"),
    h("label", { for: "key" }, "API key"), key,
    h("p", { id: "key-help", class: "muted" }, "The admin key is printed on the server's first start (scripts/install shows it); `kiln key create` makes more. The browser keeps a sign-in cookie, not the key."),
    h("button", { type: "submit" }, "Sign in"), err);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api.signIn(key.value);
      me = await api.me();
      route();
    } catch (x) {
      err.textContent = (x as Error).message;
    }
  });
  app.replaceChildren(h("main", { class: "center" }, form));
  key.focus();
}

// ---- sessions ----
async function languageNames(): Promise<string[]> {
  languages ??= (await api.languages()).map((l) => l.name);
  return languages;
}

async function sessionsScreen(): Promise<void> {
  const table = h("table", { class: "sessions", "aria-label": "your sessions" });
  const langBox = h("fieldset", { class: "langs" }, h("legend", {}, "Languages (the first checked is the default)"));
  const ttl = h("input", { type: "number", id: "ttl", min: "1", max: "1440", value: "60", "aria-label": "idle time-out in minutes" });
  const net = networkFields();
  const create = h("form", { class: "create", "aria-label": "new session" }, h("h2", {}, "New session"), langBox, net.el,
    h("label", { for: "ttl" }, "Idle time-out (minutes) "), ttl, " ", h("button", { type: "submit" }, "Create session"));
  app.replaceChildren(header(), h("main", { class: "page" }, h("h1", {}, "Sessions"), table, create));
  languageNames().then((ls) => {
    // Python first: the first checked language is the session's default.
    for (const l of [...ls].sort((a, b) => Number(b === "python") - Number(a === "python"))) {
      langBox.append(h("label", { class: "lang-choice" }, h("input", { type: "checkbox", name: "lang", value: l, checked: l === "python" }), ` ${l}`));
    }
  }).catch((e) => toast(e.message));
  create.addEventListener("submit", async (e) => {
    e.preventDefault();
    const langs = Array.from(langBox.querySelectorAll<HTMLInputElement>("input:checked")).map((i) => i.value);
    const btn = create.querySelector("button[type=submit]") as HTMLButtonElement;
    btn.disabled = true;
    btn.textContent = "Creating…";
    try {
      const s = await api.createSession(langs.length ? langs : ["python"], Math.round(Number(ttl.value) * 60), net.value());
      location.hash = `#/s/${s.id}`;
    } catch (x) {
      toast((x as Error).message);
      btn.disabled = false;
      btn.textContent = "Create session";
    }
  });
  try {
    const { sessions } = await api.sessions();
    table.append(h("tr", {}, ...["Session", "State", "Languages", "Idle time-out", "Use", "Last active", "Your role", ""].map((t) => h("th", { scope: "col" }, t))));
    if (sessions.length === 0) table.append(h("tr", {}, h("td", { colspan: "8", class: "muted" }, "No sessions yet: create one below.")));
    for (const s of sessions) table.append(sessionRow(s));
  } catch (e) {
    toast((e as Error).message);
  }
}

// nameCell shows a session's name (its id when it has none) and, for its
// owner, a Rename button that swaps in a text box: Enter saves, Escape
// cancels.
function nameCell(s: Session): HTMLElement {
  const td = h("td", { class: "session-name" });
  const show = () => {
    const link = h("a", { href: `#/s/${s.id}`, title: `open session ${s.id}` }, s.name || s.id);
    td.replaceChildren(link, s.name ? h("span", { class: "muted id" }, ` ${s.id}`) : "",
      (s.role ?? "owner") !== "owner" ? "" : button("✎", edit, { title: `rename session ${s.id}`, cls: "rename" }));
  };
  const edit = () => {
    const input = h("input", { type: "text", value: s.name ?? "", maxlength: "100", "aria-label": `new name for session ${s.id}` });
    const err = h("span", { class: "error", role: "alert" });
    const save = async () => {
      try {
        const next = await api.renameSession(s.id, input.value);
        s.name = next.name;
        show();
      } catch (e) {
        err.textContent = (e as Error).message;
        input.focus();
      }
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") void save();
      if (e.key === "Escape") show();
    });
    td.replaceChildren(input, button("Save", () => void save(), { title: `save the name of session ${s.id}` }),
      button("Cancel", show, { title: "cancel renaming" }), err);
    input.focus();
    input.select();
  };
  show();
  return td;
}

function sessionRow(s: Session): HTMLElement {
  return h("tr", { "data-session": s.id },
    nameCell(s),
    h("td", {}, s.status), h("td", {}, s.languages.join(", ")), h("td", {}, formatTTL(s.idle_ttl_seconds)),
    h("td", { class: "use", title: "what the session uses now: its workspace's disk, and when its idle time-out ends it if nothing happens" }, sessionUse(s.use)),
    h("td", {}, new Date(s.last_active).toLocaleString()),
    h("td", { title: s.role && s.role !== "owner" ? `shared with you by ${s.owner_id}` : "" }, s.role ?? "owner"),
    h("td", {}, button("Open", () => (location.hash = `#/s/${s.id}`), { title: `open session ${s.id}` }),
      (s.role ?? "owner") !== "owner" ? "" : button("Delete", async () => {
        if (!confirm(`Delete session ${s.id}? Its files are removed.`)) return;
        try {
          await api.deleteSession(s.id);
        } catch (e) {
          toast((e as Error).message);
        }
        route();
      }, { title: `delete session ${s.id}` })));
}

// ---- a session's notebook ----
const terminals: TerminalPanel[] = []; // the open terminal tabs, hung up on leaving the session
async function notebookScreen(id: string): Promise<void> {
  loadMonaco(); // start fetching the editor while the session loads
  const session = await api.session(id);
  const ls = await languageNames().catch(() => session.languages);
  const langs = [...session.languages, ...ls.filter((l) => !session.languages.includes(l))];
  const nb = new Notebook(session, langs);
  nb.me = me?.id ?? "";
  current = nb;
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "open documents" });
  const pane = h("div", { class: "pane" });
  const openFiles = new Map<string, { tab: HTMLElement; body: HTMLElement; ed: CodeEditor }>();
  const nbTab = button("Notebook", () => select(nbTab, nb.el), { title: "the notebook", cls: "tab" });
  nbTab.setAttribute("role", "tab");
  const history = new History(id, (lang, code) => {
    select(nbTab, nb.el);
    nb.rerun(lang, code);
  });
  const histTab = button("History", () => {
    select(histTab, history.el);
    history.load();
  }, { title: "the session's execution history", cls: "tab" });
  histTab.setAttribute("role", "tab");
  const git = new GitPanel(id, session.role === "viewer", () => files.refresh());
  const gitTab = button("Git", () => {
    select(gitTab, git.el);
    void git.load();
  }, { title: "the workspace as a git repository", cls: "tab" });
  gitTab.setAttribute("role", "tab");
  tabs.append(nbTab, histTab, gitTab);
  const select = (tab: HTMLElement, body: HTMLElement) => {
    for (const t of tabs.children) t.setAttribute("aria-selected", String(t === tab));
    pane.replaceChildren(body);
    if (body !== nb.el) pane.parentElement?.scrollTo({ top: 0 }); // a file tab starts at its top
  };
  const openFile = async (path: string) => {
    const open = openFiles.get(path);
    if (open) return select(open.tab, open.body);
    let text: string;
    try {
      text = await api.readText(id, path);
    } catch (e) {
      return toast((e as Error).message);
    }
    const ext = path.split(".").pop() ?? "";
    const byExt: Record<string, string> = { py: "python", js: "javascript", ts: "typescript", sh: "bash", sql: "sql", go: "go", c: "c", h: "c", cpp: "cpp", java: "java", rs: "rust", php: "php", rb: "ruby", md: "markdown" };
    const state = h("span", { class: "muted", "aria-live": "polite" });
    const save = async () => {
      try {
        await api.write(id, path, ed.value());
        state.textContent = "saved";
        files.refresh();
      } catch (e) {
        toast((e as Error).message);
      }
    };
    const ed = new CodeEditor({ value: text, language: byExt[ext] ?? ext, label: `editor for ${path}`, onSave: save, onChange: () => (state.textContent = "modified") });
    const body = h("div", { class: "file-tab" }, h("div", { class: "file-bar" }, h("strong", {}, path), " ", state, h("span", { class: "spacer" }),
      button("Save", save, { title: `save ${path} (Ctrl+S)` })), ed.el);
    const tab = h("span", { class: "tab-wrap" }, button(path.split("/").pop()!, () => select(tab, body), { title: `open tab ${path}`, cls: "tab" }),
      button("×", () => {
        ed.dispose();
        openFiles.delete(path);
        tab.remove();
        select(nbTab, nb.el);
      }, { title: `close tab ${path}` }));
    tab.setAttribute("role", "tab");
    tabs.append(tab);
    openFiles.set(path, { tab, body, ed });
    select(tab, body);
  };
  const ipynbInput = h("input", { type: "file", accept: ".ipynb,application/x-ipynb+json", hidden: true, "aria-label": "Jupyter notebook to import" });
  ipynbInput.addEventListener("change", async () => {
    const f = ipynbInput.files?.[0];
    ipynbInput.value = "";
    if (!f) return;
    try {
      toast(`imported ${nb.importIpynb(await f.text())} cells from ${f.name}`, "info");
    } catch (e) {
      toast(`${f.name}: ${(e as Error).message}`);
    }
  });
  const files = new Files(id, openFile);
  nb.onCellDone = () => files.refresh();
  let termCount = 0;
  const newTerminal = async () => {
    const n = ++termCount;
    // xterm.js loads with the first terminal, so the first page stays light.
    const { openTerminal } = await import("./terminal");
    const t = openTerminal(id, document.documentElement.dataset.theme === "dark");
    terminals.push(t);
    const showIt = () => {
      select(tab, t.el);
      t.show();
    };
    const tab = h("span", { class: "tab-wrap" }, button(`Terminal ${n}`, showIt, { title: `open tab Terminal ${n}`, cls: "tab" }),
      button("×", () => {
        t.dispose();
        terminals.splice(terminals.indexOf(t), 1);
        tab.remove();
        select(nbTab, nb.el);
      }, { title: `close Terminal ${n}` }));
    tab.setAttribute("role", "tab");
    tabs.append(tab);
    showIt();
  };
  const role = session.role ?? "owner";
  const bar = h("div", { class: "nb-bar", role: "toolbar", "aria-label": "notebook" },
    role === "viewer" ? "" : button("▶▶ Run all", () => nb.runAll(), { title: "run all cells" }),
    role === "viewer" ? "" : button("■ Interrupt", () => nb.interrupt().catch((e) => toast(e.message)), { title: "interrupt the running cell" }),
    role === "viewer" ? "" : button("↻ Restart", () => nb.restart().catch((e) => toast(e.message)), { title: "restart the kernels (files are kept)" }),
    role === "owner" ? button("Share", () => shareDialog(session, me?.id ?? ""), { title: "share the session with other users" })
      : h("span", { class: "muted role", title: `the session is ${session.owner_id}'s` }, `shared with you as ${role}`),
    networkStatus(session, () => {}),
    role === "viewer" ? "" : button("Terminal", () => void newTerminal(), { title: "open a terminal: a shell in the session's sandbox" }),
    role === "viewer" ? "" : button("Install packages", () => packagesDialog(session, () => files.refresh()), { title: "install pip or npm packages into the session" }),
    button("+ Code", () => nb.add("code"), { title: "add a code cell" }),
    button("+ Markdown", () => nb.add("markdown"), { title: "add a markdown cell" }),
    button("Export .ipynb", () => nb.exportIpynb(), { title: "download the notebook as a Jupyter notebook" }),
    button("Export HTML", () => void nb.exportHTML().catch((e) => toast(e.message)), { title: "download the notebook as a standalone HTML file" }),
    button("Import .ipynb", () => ipynbInput.click(), { title: "add the cells of a Jupyter notebook" }),
    ipynbInput, nb.saveState);
  app.replaceChildren(header(h("span", { class: "crumb" }, session.name ? `${session.name} (${session.id})` : `session ${session.id}`), h("span", { class: "muted" }, ` ${session.status} · idle time-out ${formatTTL(session.idle_ttl_seconds)}`)),
    h("div", { class: "workbench" }, files.el, h("main", { class: "main" }, h("div", { class: "sticky" }, bar, tabs), pane)));
  select(nbTab, nb.el);
  await nb.load();
  files.refresh();
  document.body.dataset.ready = "notebook";
}

// ---- routing ----
async function route(): Promise<void> {
  current?.close();
  current = undefined;
  for (const t of terminals.splice(0)) t.dispose();
  delete document.body.dataset.ready;
  try {
    me ??= await api.me();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return signInScreen();
    app.replaceChildren(h("main", { class: "center" }, h("p", { class: "error", role: "alert" }, `kiln cannot be reached: ${(e as Error).message}`)));
    return;
  }
  const m = location.hash.match(/^#\/s\/([^/]+)$/);
  try {
    if (m) await notebookScreen(decodeURIComponent(m[1]));
    else {
      await sessionsScreen();
      document.body.dataset.ready = "sessions";
    }
  } catch (e) {
    toast((e as Error).message);
    if (m) app.append(h("p", { class: "error" }, (e as Error).message, " ", h("a", { href: "#/" }, "back to sessions")));
  }
}

window.addEventListener("hashchange", route);
route();
