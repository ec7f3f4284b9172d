// A code editor for a cell or a file: a plain textarea at once, upgraded to
// Monaco when its chunk has loaded.
import { h } from "./dom";
import { monacoLanguage } from "./format";

type Monaco = typeof import("monaco-editor");
let monacoPromise: Promise<Monaco> | undefined;
let monacoLoaded: Monaco | undefined;
let theme = "vs";

export function loadMonaco(): Promise<Monaco> {
  monacoPromise ??= import("./monaco").then((m) => {
    monacoLoaded = m.monaco;
    m.monaco.editor.setTheme(theme);
    return m.monaco;
  });
  return monacoPromise;
}

export function setEditorTheme(dark: boolean): void {
  theme = dark ? "vs-dark" : "vs";
  monacoLoaded?.editor.setTheme(theme);
}

export type RunMode = "advance" | "stay";

export interface Marker { line: number; column?: number; message: string; severity: "error" | "warning" }

export interface EditorOptions {
  value: string;
  language: string;
  label: string;
  onChange?: (v: string) => void;
  onRun?: (mode: RunMode) => void;
  onSave?: () => void;
  autoHeight?: boolean; // a cell grows with its code; a file tab fills its pane
  // complete asks the kernel for completions at a cursor (code points);
  // format returns the code formatted. Both go to the session's sandbox.
  complete?: (code: string, cursor: number) => Promise<{ matches: string[]; cursor_start: number; cursor_end: number }>;
  format?: (code: string) => Promise<string>;
}

// The languages whose kernel completes (Python's today) and those with a
// formatter on the server (internal/service/format.go); JavaScript and
// TypeScript have Monaco's own.
const kernelCompletes = ["python"];
const serverFormats = ["python", "go", "rust", "c", "cpp"];

// Monaco's providers are per language, not per editor: each finds the
// editor of its model here.
const byModel = new Map<string, EditorOptions>();
let providersRegistered = false;

// utf16 turns a code-point offset into a UTF-16 one (Monaco's).
function utf16(code: string, points: number): number {
  let i = 0;
  for (let n = 0; n < points && i < code.length; n++) i += code.codePointAt(i)! > 0xffff ? 2 : 1;
  return i;
}

function registerProviders(m: Monaco): void {
  if (providersRegistered) return;
  providersRegistered = true;
  for (const kl of kernelCompletes) {
    m.languages.registerCompletionItemProvider(monacoLanguage(kl), {
      triggerCharacters: ["."],
      async provideCompletionItems(model, position) {
        const opts = byModel.get(model.uri.toString());
        if (!opts?.complete) return { suggestions: [] };
        const code = model.getValue();
        const cursor = [...code.slice(0, model.getOffsetAt(position))].length;
        try {
          const r = await opts.complete(code, cursor);
          const start = model.getPositionAt(utf16(code, r.cursor_start));
          const end = model.getPositionAt(utf16(code, r.cursor_end));
          const range = new m.Range(start.lineNumber, start.column, end.lineNumber, end.column);
          return { suggestions: r.matches.slice(0, 500).map((label, i) => ({ label, insertText: label, range, sortText: String(i).padStart(4, "0"),
            kind: m.languages.CompletionItemKind.Variable, detail: "from the kernel" })) };
        } catch {
          return { suggestions: [] }; // a session that ended, a kernel that is busy: no completions
        }
      },
    });
  }
  for (const fl of serverFormats) {
    m.languages.registerDocumentFormattingEditProvider(monacoLanguage(fl), {
      async provideDocumentFormattingEdits(model) {
        const opts = byModel.get(model.uri.toString());
        if (!opts?.format) return [];
        const text = await opts.format(model.getValue());
        return [{ range: model.getFullModelRange(), text }];
      },
    });
  }
}

export class CodeEditor {
  readonly el: HTMLElement;
  private area: HTMLTextAreaElement | null;
  private ed: import("monaco-editor").editor.IStandaloneCodeEditor | undefined;
  private lang: string;
  private disposed = false;

  constructor(private opts: EditorOptions) {
    this.lang = opts.language;
    this.area = h("textarea", { class: "plain-editor", spellcheck: "false", "aria-label": opts.label, rows: Math.max(2, opts.value.split("\n").length) });
    this.area.value = opts.value;
    this.area.addEventListener("input", () => opts.onChange?.(this.area!.value));
    this.area.addEventListener("keydown", (e) => this.keys(e));
    this.el = h("div", { class: "editor" + (opts.autoHeight ? " auto" : " fill") }, this.area);
    loadMonaco().then((m) => this.upgrade(m));
  }

  private keys(e: KeyboardEvent): void {
    if (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.metaKey) && this.opts.onRun) {
      e.preventDefault();
      this.opts.onRun(e.shiftKey ? "advance" : "stay");
    } else if (e.key === "s" && (e.ctrlKey || e.metaKey) && this.opts.onSave) {
      e.preventDefault();
      this.opts.onSave();
    }
  }

  private upgrade(m: Monaco): void {
    if (this.disposed || !this.area) return;
    const value = this.area.value;
    const hadFocus = document.activeElement === this.area;
    const host = h("div", { class: "monaco-host" });
    this.area.replaceWith(host);
    this.area = null;
    const ed = m.editor.create(host, {
      value, language: monacoLanguage(this.lang), minimap: { enabled: false }, scrollBeyondLastLine: false,
      automaticLayout: true, fontSize: 13, lineNumbers: this.opts.autoHeight ? "off" : "on", folding: !this.opts.autoHeight,
      renderLineHighlight: "none", overviewRulerLanes: 0, ariaLabel: this.opts.label, tabSize: 4,
      scrollbar: this.opts.autoHeight ? { vertical: "hidden", alwaysConsumeMouseWheel: false } : {},
      fixedOverflowWidgets: true,
    });
    this.ed = ed;
    registerProviders(m);
    const uri = ed.getModel()?.uri.toString();
    if (uri) byModel.set(uri, this.opts);
    // Tab after a name or a dot asks for completions (Ctrl+Space always
    // does); elsewhere Tab indents as usual.
    const canComplete = ed.createContextKey<boolean>("kiln.canComplete", false);
    ed.onDidChangeCursorPosition((e) => {
      const model = ed.getModel();
      const before = model && !model.isDisposed() ? model.getLineContent(e.position.lineNumber).slice(0, e.position.column - 1) : "";
      canComplete.set(!!this.opts.complete && /[\w.]$/.test(before));
    });
    ed.addAction({ id: "kiln.complete.tab", label: "Complete", keybindings: [m.KeyCode.Tab],
      precondition: "kiln.canComplete && !suggestWidgetVisible && !inSnippetMode",
      run: () => ed.trigger("kiln", "editor.action.triggerSuggest", {}) });
    if (this.opts.autoHeight) {
      const fit = () => {
        host.style.height = `${Math.max(ed.getContentHeight(), 22)}px`;
      };
      ed.onDidContentSizeChange(fit);
      fit();
    }
    ed.onDidChangeModelContent(() => this.opts.onChange?.(ed.getValue()));
    if (this.opts.onRun) {
      // Actions, not addCommand: a standalone editor's addCommand binds the
      // key for every editor on the page, and the last one made wins, so a
      // cell added later (another user's, in a shared session) would run
      // instead of the one the key was pressed in.
      ed.addAction({ id: "kiln.run.advance", label: "Run cell and advance", keybindings: [m.KeyMod.Shift | m.KeyCode.Enter], run: () => this.opts.onRun!("advance") });
      ed.addAction({ id: "kiln.run.stay", label: "Run cell", keybindings: [m.KeyMod.CtrlCmd | m.KeyCode.Enter], run: () => this.opts.onRun!("stay") });
    }
    if (this.opts.onSave) ed.addCommand(m.KeyMod.CtrlCmd | m.KeyCode.KeyS, () => this.opts.onSave!());
    if (hadFocus) ed.focus();
  }

  value(): string {
    return this.ed ? this.ed.getValue() : (this.area?.value ?? "");
  }

  setLanguage(lang: string): void {
    this.lang = lang;
    const model = this.ed?.getModel();
    if (model && monacoLoaded) monacoLoaded.editor.setModelLanguage(model, monacoLanguage(lang));
  }

  // markLine underlines the line an error points at (1-based).
  markLine(line: number | undefined, message: string): void {
    this.setMarkers(line ? [{ line, message, severity: "error" }] : []);
  }

  // setMarkers underlines what a run reported: the failing line, compiler
  // errors and warnings (lines 1-based; a column marks from there on).
  setMarkers(list: Marker[]): void {
    const model = this.ed?.getModel();
    const m = monacoLoaded;
    if (!model || !m) return;
    const markers = list.filter((x) => x.line >= 1 && x.line <= model.getLineCount()).map((x) => ({
      severity: x.severity === "warning" ? m.MarkerSeverity.Warning : m.MarkerSeverity.Error, message: x.message,
      startLineNumber: x.line, endLineNumber: x.line, startColumn: x.column && x.column > 0 ? x.column : 1, endColumn: model.getLineMaxColumn(x.line),
    }));
    m.editor.setModelMarkers(model, "kiln", markers);
  }

  focus(): void {
    (this.ed ?? this.area)?.focus();
  }

  // format formats the code with the language's formatter (the server's,
  // or Monaco's own for JavaScript and TypeScript); false when there is
  // none for the language.
  async format(): Promise<boolean> {
    const action = this.ed?.getAction("editor.action.formatDocument");
    if (!action || !action.isSupported()) return false;
    await action.run();
    return true;
  }

  dispose(): void {
    this.disposed = true;
    const uri = this.ed?.getModel()?.uri.toString();
    if (uri) byModel.delete(uri);
    // The editor first: disposing its model under it fires events on a
    // disposed model.
    const model = this.ed?.getModel();
    this.ed?.dispose();
    model?.dispose();
  }
}
