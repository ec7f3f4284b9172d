// The HTTP API, as the signed-in browser calls it: the session cookie
// authenticates, and every state-changing request carries the CSRF token
// (read from its cookie) in the X-Kiln-Csrf header.

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

export function csrfToken(): string {
  for (const part of document.cookie.split(";")) {
    const [k, v] = part.trim().split("=");
    if (k === "kiln_csrf") return decodeURIComponent(v ?? "");
  }
  return "";
}

async function fail(r: Response): Promise<never> {
  let code = "http_" + r.status;
  let msg = r.statusText || "request failed";
  try {
    const p = await r.json();
    code = p.code ?? code;
    msg = p.detail ?? p.title ?? msg;
  } catch {
    /* not a problem document */
  }
  throw new ApiError(r.status, code, msg);
}

export async function request(method: string, path: string, body?: BodyInit | object, headers: Record<string, string> = {}): Promise<Response> {
  const h: Record<string, string> = { ...headers };
  if (method !== "GET" && method !== "HEAD") h["X-Kiln-Csrf"] = csrfToken();
  let b: BodyInit | undefined;
  if (body instanceof FormData || body instanceof Blob || typeof body === "string" || body instanceof ArrayBuffer) {
    b = body as BodyInit;
  } else if (body !== undefined) {
    b = JSON.stringify(body);
    h["Content-Type"] = "application/json";
  }
  const r = await fetch(path, { method, headers: h, body: b, credentials: "same-origin" });
  if (!r.ok) await fail(r);
  return r;
}

export async function json<T>(method: string, path: string, body?: BodyInit | object): Promise<T> {
  const r = await request(method, path, body);
  if (r.status === 204) return undefined as T;
  return (await r.json()) as T;
}

// filePath escapes each name of a workspace path on its own, as the API wants.
export function filePath(p: string): string {
  return p.split("/").filter((s) => s !== "").map(encodeURIComponent).join("/");
}

export function filesURL(session: string, p: string, query = ""): string {
  return `/v1/sessions/${encodeURIComponent(session)}/files/${filePath(p)}${query}`;
}

export interface User { id: string; name: string; admin: boolean }
export interface Language { name: string; aliases?: string[]; kind: string; version?: string }
export interface Session {
  id: string; status: string; languages: string[]; idle_ttl_seconds: number;
  created: string; last_active: string; ended?: string; end_reason?: string;
  metadata?: Record<string, string>;
  limits: Record<string, number>;
  owner_id?: string;
  role?: Role; // the caller's: owner, or the role of a share
  network?: NetworkPolicy;
  name?: string; // metadata "name", set by renameSession
  use?: SessionUse; // only for a session active in the server's process
}
export interface SessionUse { workspace_bytes: number; workspace_limit_bytes: number; busy: boolean; idle_seconds_left: number; cpu_ms?: number; peak_memory_bytes?: number }
export interface NetworkPolicy { mode: "none" | "allowlist"; allow?: string[] }
export interface EgressRecord {
  time: string; host: string; port: number; addr?: string; kind: string; allowed: boolean; reason?: string;
  bytes_up: number; bytes_down: number; package?: string; cached?: boolean;
}
export interface InstalledPackage { name: string; version: string; requested: boolean; present?: boolean }
export interface PackageResult { manager: string; packages: InstalledPackage[]; wall_ms: number; egress?: EgressRecord[] }
export type Role = "owner" | "collaborator" | "viewer";
export interface Share { session_id: string; user_id: string; role: Role; created: string }
export interface FileInfo { path: string; name: string; type: string; size: number; mtime: string }
export interface FileList { path: string; entries: FileInfo[] }
export interface Output { data: Record<string, unknown>; metadata?: Record<string, unknown>; execute_result?: boolean }
export interface CellError { name: string; message: string; traceback?: string[]; line?: number; diagnostics?: { file: string; line: number; column?: number; severity: string; message: string }[] }
export interface Usage { wall_ms: number; cpu_ms: number; peak_memory_bytes: number; output_bytes: number }
export interface Artifact { path: string; size: number; change: string }
export interface CellResult {
  language: string; status: string; stdout: string; stderr: string; outputs: Output[] | null;
  error?: CellError; exit_code?: number; diagnostics?: CellError["diagnostics"]; usage: Usage; artifacts: Artifact[] | null; notice?: string;
  egress?: EgressRecord[];
}
export interface Execution { id: string; seq: number; language: string; code: string; status: string; result?: CellResult; actor?: string }
export interface Problem { status: number; code: string; detail: string }
export interface Event {
  type: string; data?: string; output?: Output; execution?: Execution; error?: Problem;
  position?: number; reason?: string; prompt?: string; password?: boolean;
  execution_id?: string; // the session event stream's events
  packages?: PackageResult; // done of an install
}

export const api = {
  me: () => json<User>("GET", "/v1/users/me"),
  signIn: (key: string) => json<void>("POST", "/ui/signin", { key }),
  signOut: () => json<void>("POST", "/ui/signout"),
  languages: () => json<Language[]>("GET", "/v1/languages"),
  sessions: () => json<{ sessions: Session[] }>("GET", "/v1/sessions?status=active&limit=100"),
  session: (id: string) => json<Session>("GET", `/v1/sessions/${encodeURIComponent(id)}`),
  createSession: (languages: string[], idleTTLSeconds: number, network?: NetworkPolicy) =>
    json<Session>("POST", "/v1/sessions", { languages, idle_ttl_seconds: idleTTLSeconds, network }),
  setNetwork: (id: string, p: NetworkPolicy) => json<Session>("PUT", `/v1/sessions/${encodeURIComponent(id)}/network`, p),
  complete: (id: string, language: string, code: string, cursor: number) =>
    json<{ matches: string[]; cursor_start: number; cursor_end: number }>("POST", `/v1/sessions/${encodeURIComponent(id)}/complete`, { code, cursor, language }),
  format: async (id: string, language: string, code: string) =>
    (await json<{ code: string }>("POST", `/v1/sessions/${encodeURIComponent(id)}/format`, { code, language })).code,
  renameSession: (id: string, name: string) => json<Session>("PATCH", `/v1/sessions/${encodeURIComponent(id)}`, { name }),
  deleteSession: (id: string) => json<void>("DELETE", `/v1/sessions/${encodeURIComponent(id)}`),
  interrupt: (id: string) => json<void>("POST", `/v1/sessions/${encodeURIComponent(id)}/interrupt`),
  restart: (id: string) => json<void>("POST", `/v1/sessions/${encodeURIComponent(id)}/restart`),
  list: (id: string, dir: string) => json<FileList>("GET", dir === "" ? `/v1/sessions/${encodeURIComponent(id)}/files` : filesURL(id, dir)),
  readText: async (id: string, p: string) => (await request("GET", filesURL(id, p))).text(),
  write: (id: string, p: string, body: string | Blob) => json<FileInfo>("PUT", filesURL(id, p), body instanceof Blob ? body : new Blob([body])),
  upload: (id: string, dir: string, files: File[]) => {
    const fd = new FormData();
    for (const f of files) fd.append("file", f, f.name);
    return json<{ files: FileInfo[] }>("POST", filesURL(id, dir), fd);
  },
  remove: (id: string, p: string) => json<void>("DELETE", filesURL(id, p, "?recursive=true")),
  mkdir: (id: string, p: string) => json<FileInfo>("POST", `/v1/sessions/${encodeURIComponent(id)}/mkdir`, { path: p }),
  move: (id: string, from: string, to: string) => json<FileInfo>("POST", `/v1/sessions/${encodeURIComponent(id)}/move`, { from, to }),
  shares: (id: string) => json<{ shares: Share[] }>("GET", `/v1/sessions/${encodeURIComponent(id)}/shares`),
  share: (id: string, user: string, role: Role) =>
    json<Share>("PUT", `/v1/sessions/${encodeURIComponent(id)}/shares/${encodeURIComponent(user)}`, { role }),
  unshare: (id: string, user: string) => json<void>("DELETE", `/v1/sessions/${encodeURIComponent(id)}/shares/${encodeURIComponent(user)}`),
  eventsURL: (id: string) => `/v1/sessions/${encodeURIComponent(id)}/events`,
};
