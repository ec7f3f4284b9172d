// Pure helpers for showing results; unit-tested in format.test.ts.

// MIME types in the order a notebook prefers them.
export const mimeOrder = [
  "application/vnd.kiln.table+json",
  "text/html",
  "image/svg+xml",
  "image/png",
  "image/jpeg",
  "image/gif",
  "text/markdown",
  "application/json",
  "text/plain",
];

export function pickMime(data: Record<string, unknown>): string | undefined {
  for (const m of mimeOrder) if (m in data) return m;
  for (const m of Object.keys(data)) if (m.endsWith("+json")) return m;
  return Object.keys(data)[0];
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

// formatDuration takes nanoseconds (Go's time.Duration in JSON).
export function formatDuration(ns: number): string {
  const ms = ns / 1e6;
  if (ms < 1) return `${(ns / 1e3).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function formatTTL(seconds: number): string {
  if (seconds <= 0) return "none";
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

// stripAnsi removes terminal colour codes (tracebacks have them).
export function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "");
}

// isDataFrameHTML says an HTML output is a plain table (pandas'
// _repr_html_), which the notebook shows natively and pages.
export function isDataFrameHTML(html: string): boolean {
  return /<table[^>]*class="[^"]*dataframe/.test(html) && !/<script/i.test(html);
}

export interface Page { start: number; end: number; pages: number; page: number }

// page bounds page p (0-based) of n rows in pages of size rows.
export function page(n: number, p: number, size: number): Page {
  const pages = Math.max(1, Math.ceil(n / size));
  const pg = Math.min(Math.max(0, p), pages - 1);
  return { start: pg * size, end: Math.min(n, (pg + 1) * size), pages, page: pg };
}

// mimeText joins a MIME bundle's value, which Jupyter allows as a list of lines.
export function mimeText(v: unknown): string {
  if (Array.isArray(v)) return v.join("");
  if (typeof v === "string") return v;
  return JSON.stringify(v, null, 2);
}

// monacoLanguage maps a kiln language to Monaco's name for it.
export function monacoLanguage(lang: string): string {
  const m: Record<string, string> = {
    python: "python", javascript: "javascript", typescript: "typescript", bash: "shell", sql: "sql", postgres: "pgsql",
    go: "go", c: "c", cpp: "cpp", java: "java", rust: "rust", fortran: "plaintext", php: "php", ruby: "ruby",
    markdown: "markdown",
  };
  return m[lang] ?? "plaintext";
}

// formatLeft says how long until an idle time-out, from seconds.
export function formatLeft(seconds: number): string {
  if (seconds <= 0) return "now";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return m ? `${h} h ${m} min` : `${h} h`;
}

// sessionUse is the list's one line of what a session uses.
export function sessionUse(u: { workspace_bytes: number; workspace_limit_bytes: number; busy: boolean; idle_seconds_left: number; cpu_ms?: number; peak_memory_bytes?: number } | undefined): string {
  if (!u) return "—";
  const parts = [];
  if (u.cpu_ms !== undefined) parts.push(`CPU ${formatDuration(u.cpu_ms * 1e6)}`);
  if (u.peak_memory_bytes !== undefined) parts.push(`memory peak ${formatBytes(u.peak_memory_bytes)}`);
  parts.push(`disk ${formatBytes(u.workspace_bytes)} of ${formatBytes(u.workspace_limit_bytes)}`);
  parts.push(u.busy ? "busy (idle clock stopped)" : `idle ends in ${formatLeft(u.idle_seconds_left)}`);
  return parts.join(" · ");
}

// utf8Len counts the UTF-8 bytes of a string without encoding it.
export function utf8Len(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00) { n += 4; i++; } // a surrogate pair
    else n += 3;
  }
  return n;
}

// utf8Prefix is the longest start of s with at most max UTF-8 bytes.
export function utf8Prefix(s: string, max: number): string {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const w = c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xdc00 ? 4 : 3;
    if (n + w > max) return s.slice(0, i);
    n += w;
    if (w === 4) i++;
  }
  return s;
}
