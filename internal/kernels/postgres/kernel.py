"""kiln PostgreSQL kernel: a private PostgreSQL server per session.

It speaks kernelproto (newline-delimited JSON) on fd 3. The server is the
host's PostgreSQL 15 (/usr/lib/postgresql/15/bin), started by this kernel in
the sandbox, as the sandbox's user, in a session of its own (so the SIGINT
that interrupts a cell never reaches it). Its data directory is
.kiln/postgres/data in the workspace, so the database counts against the
workspace's disk limit and outlives the kernel: a kernel restart finds the
server still running (or starts it again on the same data), and the tables
are still there. It listens on a unix socket in .kiln/postgres only
(listen_addresses is empty: nothing on the network), and is tuned to start
fast and to hold scratch data (fsync off, so only a crash of the host can
lose data; 1 MiB WAL segments; 16 MB of shared buffers). The cluster (trust
authentication, the sandbox's user its superuser) is a copy of the one
scripts/deps made once in /usr/local/lib/kiln/postgres-template, or made by
initdb when there is none (or its superuser is another user), and the
server is started, on a thread as soon as the kernel starts, that is with
the session's first postgres cell, which waits for it.

Other programs of the session reach the same database on the socket:
host=/workspace/.kiln/postgres dbname=postgres (for libpq, PGHOST and
PGDATABASE); the kernel sets those in its own environment for programs it
starts.

A cell runs in one long-lived connection in autocommit mode, as psql does:
each statement commits when it ends unless BEGIN opened a transaction, which
lasts until COMMIT or ROLLBACK, across cells too. A cell is split into
statements at semicolons outside strings ('', E'', $tag$ $tag$), quoted
names, comments and parentheses; a last statement without ";" runs too. A
line that starts with a backslash where a statement would start is a psql
meta-command: \\d (relations), \\dt, \\dv, \\di, \\ds, \\dn, \\l, \\d NAME
(the columns and indexes of a table, view or sequence) and \\copy (COPY
through this client, with file names relative to the workspace; server-side
COPY ... FROM '/workspace/f.csv' works too, since the server runs as the
sandbox's user and is its superuser).

The first error stops the cell; the statements before it stay done. The
Error's name is psycopg2's class for the SQLSTATE (UndefinedTable,
SyntaxError, ...); its message says which statement, the line of the cell
and PostgreSQL's position ("statement 2 of 2, line 2, position 15:
relation "x" does not exist"), its traceback the statement, the SQLSTATE,
the line of the cell with a caret, and PostgreSQL's detail and hint; its
line is the cell's line at the position (the statement's first line when
PostgreSQL gives no position).

Results are shown as the SQL kernel shows them: a Display with text/plain
(an aligned table, numbers right-aligned, NULL as NULL), text/html and
application/json ({"columns", "rows"}: integers and floats as numbers,
booleans as true/false, json and jsonb as JSON, numeric and every other
type as PostgreSQL's text, so no precision is lost). Values are
PostgreSQL's own text output. At most MAX_ROWS rows and about MAX_BYTES per
format are shown; a query (SELECT, VALUES, TABLE, WITH) runs through a
cursor, as psql's FETCH_COUNT does, so only those rows are computed and
fetched (a volatile function in the select list runs for those rows only). INSERT, UPDATE, DELETE, MERGE and COPY print "N rows
affected"; notices (RAISE NOTICE) go to stderr.

An interrupt (SIGINT, sent on timeout and cancel) cancels the running query
through PostgreSQL's cancel request: the server and the connection stay,
the cell ends "interrupted". A transaction open at that moment is aborted
and needs ROLLBACK, as in psql. A server stopped between cells is started
again (and the connection made again) by the next cell; one lost while a
statement runs fails that statement, and the cell after it reconnects.
"""

import fcntl
import hashlib
import html
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import unicodedata

# -S leaves out site, and with it Debian's dist-packages, where
# python3-psycopg2 is.
if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")
try:
    import psycopg2
    import psycopg2.extensions
    IMPORT_ERROR = None
except ImportError as e:  # said at the first cell
    psycopg2 = None
    IMPORT_ERROR = e

PG_BIN = "/usr/lib/postgresql/15/bin"
# A cluster made once by scripts/deps, copied instead of running initdb.
TEMPLATE = "/usr/local/lib/kiln/postgres-template"
MAX_ROWS = 10000
MAX_BYTES = 6 << 20  # per format, by row_cost's estimate
MAX_CELL = 80  # characters of a value in the text table
MAX_HTML_CELL = 1000  # characters of a value in the HTML table
START_TIMEOUT = 60  # seconds for initdb and the server's start

# Server settings for a scratch database that starts fast and stays small.
SERVER_SETTINGS = [
    "listen_addresses=",
    "unix_socket_permissions=0700",
    "fsync=off",
    "full_page_writes=off",
    "wal_level=minimal",
    "max_wal_senders=0",
    "min_wal_size=4MB",
    "max_wal_size=32MB",
    "shared_buffers=16MB",
    "max_connections=20",
    "max_logical_replication_workers=0",
    "max_worker_processes=4",
    "log_min_messages=fatal",  # a user's errors would fill server.log
    "log_min_error_statement=panic",
    "log_checkpoints=off",
]

# Type OIDs (pg_type) whose text is shown as a number.
INT_OIDS = {20, 21, 23, 26, 28}  # int8, int2, int4, oid, xid
FLOAT_OIDS = {700, 701}
NUMERIC_OID = 1700
BOOL_OID = 16
JSON_OIDS = {114, 3802}


def user_name():
    try:
        import pwd
        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER") or "user"


class Paths:
    """Where the cluster lives: in the workspace (the working directory)."""

    def __init__(self, workspace):
        self.base = os.path.join(workspace, ".kiln", "postgres")
        self.data = os.path.join(self.base, "data")
        self.log = os.path.join(self.base, "server.log")
        self.socket_dir = self.base
        # A unix socket's path has at most 107 bytes; a long workspace path
        # (tests on the host) gets a fixed directory in /tmp instead.
        if len(self.base) + len("/.s.PGSQL.5432") > 100:
            digest = hashlib.sha256(self.base.encode()).hexdigest()[:16]
            self.socket_dir = os.path.join("/tmp", ".kiln-pg-" + digest)


# -- the server ---------------------------------------------------------------


class ServerError(Exception):
    pass


def run_initdb(paths):
    """Makes the cluster in data.new and renames it to data when it is
    whole, so a half-made cluster never looks made. initdb runs in a
    session of its own (an interrupt of the first cell must not stop it)
    and holds initdb.lock: a kernel started after this one was killed
    waits for the orphaned initdb, then makes the cluster itself."""
    os.makedirs(paths.base, mode=0o700, exist_ok=True)
    lock = os.open(os.path.join(paths.base, "initdb.lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(paths.data, "PG_VERSION")):
            tpl = template()
            if tpl:
                copy_template(tpl, paths)
            else:
                initdb(paths, lock)
    finally:
        os.close(lock)


def template():
    """The cluster scripts/deps made once (TEMPLATE), if its superuser is
    this user; None otherwise (initdb makes one)."""
    tpl = os.environ.get("KILN_POSTGRES_TEMPLATE") or TEMPLATE
    try:
        with open(tpl + ".user") as f:
            if f.read().strip() == user_name() and os.path.exists(os.path.join(tpl, "PG_VERSION")):
                return tpl
    except OSError:
        pass
    return None


def copy_template(tpl, paths):
    """Copies the template into data.new, then renames it to data: the same
    cluster initdb would make, in a fraction of its time."""
    work = paths.data + ".new"
    subprocess.run(["rm", "-rf", work])
    try:
        shutil.copytree(tpl, work, symlinks=True, copy_function=shutil.copyfile)
        os.chmod(work, 0o700)  # postgres refuses a data directory others can read
        os.rename(work, paths.data)
    except OSError as e:
        subprocess.run(["rm", "-rf", work])
        hint = space_hint(str(e))
        if hint:
            hint = hint[:-1] + "; a new database needs about 30 MB)"
        raise ServerError("cannot copy the database template %s: %s%s" % (tpl, e, hint))


def initdb(paths, lock):
    work = paths.data + ".new"
    subprocess.run(["rm", "-rf", work])
    cmd = [PG_BIN + "/initdb", "-D", work, "-U", user_name(), "-A", "trust", "-E", "UTF8",
           "--locale=C.UTF-8", "--no-sync", "--no-instructions", "--wal-segsize=1"]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=START_TIMEOUT, start_new_session=True, pass_fds=(lock,))
    if p.returncode == 0:
        os.rename(work, paths.data)
    else:
        out = p.stdout.decode("utf-8", "replace").strip()
        subprocess.run(["rm", "-rf", work])
        hint = space_hint(out)
        if hint:
            hint = hint[:-1] + "; a new database needs about 30 MB)"
        raise ServerError("initdb failed (exit %d): %s%s" % (p.returncode, tail(out), hint))


def space_hint(text):
    if "No space left" in text or "could not extend" in text:
        return (" (the workspace's disk limit is reached: the database's files in .kiln/postgres count against it;"
                " drop tables or delete files to free space)")
    return ""


def tail(text, lines=8):
    return "\n".join(text.splitlines()[-lines:])


def pid_is_postgres(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"postgres" in f.read().split(b"\0")[0]
    except OSError:
        return False


def clear_stale_locks(paths):
    """A postmaster.pid (or socket lock) left by a server of an earlier
    sandbox names a pid that another process may have here: postgres would
    take it for a running server and refuse to start."""
    for f in (os.path.join(paths.data, "postmaster.pid"), os.path.join(paths.socket_dir, ".s.PGSQL.5432.lock")):
        try:
            with open(f) as fh:
                pid = int(fh.readline().strip() or "0")
        except (OSError, ValueError):
            continue
        if pid <= 0 or not pid_is_postgres(pid):
            try:
                os.unlink(f)
            except OSError:
                pass


def running_pid(paths):
    """The pid of a live server on this data directory, or 0."""
    try:
        with open(os.path.join(paths.data, "postmaster.pid")) as fh:
            pid = int(fh.readline().strip() or "0")
    except (OSError, ValueError):
        return 0
    return pid if pid > 0 and pid_is_postgres(pid) else 0


def start_server(paths):
    """Starts the server unless one runs on the data directory; returns the
    Popen (None when it was running)."""
    if not os.path.exists(os.path.join(paths.data, "PG_VERSION")):
        run_initdb(paths)
    if running_pid(paths):
        return None
    clear_stale_locks(paths)
    os.makedirs(paths.socket_dir, mode=0o700, exist_ok=True)
    cmd = [PG_BIN + "/postgres", "-D", paths.data, "-c", "unix_socket_directories=" + paths.socket_dir]
    for s in SERVER_SETTINGS:
        cmd += ["-c", s]
    log = open(paths.log, "ab")
    try:
        # A session of its own: the SIGINT of an interrupt, sent to the
        # kernel's process group, must not shut the server down.
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=paths.data,
                                start_new_session=True, close_fds=True)
    finally:
        log.close()


LOG_PREFIX_RE = re.compile(r"^\d{4}-\d\d-\d\d \S+ \S+ \[\d+\] ")
# Lines a client's attempts to connect during the start leave; not a reason.
LOG_NOISE = ("not yet accepting connections", "is starting up", "is shutting down",
             "Consistent recovery state", "terminating connection because of crash")


def log_size(paths):
    try:
        return os.path.getsize(paths.log)
    except OSError:
        return 0


def log_reason(paths, since):
    """The server's last PANIC or FATAL line logged after offset since,
    without its time stamp; "" if none."""
    try:
        with open(paths.log, "rb") as f:
            f.seek(max(since, log_size(paths) - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    found = ""
    for line in text.splitlines():
        line = LOG_PREFIX_RE.sub("", line).strip()
        if (line.startswith("PANIC:") or line.startswith("FATAL:")) and not any(n in line for n in LOG_NOISE):
            found = " ".join(line.split())
    return found


class Pending:
    """A start of the server (or a connection) under way."""

    def __init__(self):
        self.done = threading.Event()
        self.conn = None
        self.error = None


class Server:
    """The server and the kernel's connection to it."""

    def __init__(self, paths):
        self.paths = paths
        self.proc = None
        self.conn = None
        self.lock = threading.Lock()
        self.mark = 0  # the log's size before the server's last start
        self.conn_mark = 0  # the log's size when the connection was made
        self.pending = None
        self.pending_lock = threading.Lock()

    def start_async(self):
        """Starts ensure on a thread unless one runs; returns its Pending.
        A cell waits on it and can be interrupted while the server starts."""
        with self.pending_lock:
            if self.pending is None or self.pending.done.is_set():
                p = Pending()
                self.pending = p
                threading.Thread(target=self.ensure_into, args=(p,), daemon=True).start()
            return self.pending

    def ensure_into(self, p):
        try:
            p.conn = self.ensure()
        except ServerError as e:
            p.error = e
        except Exception as e:  # a bug here: the cell says so instead of waiting forever
            p.error = ServerError("the PostgreSQL kernel failed while starting the server: %s: %s" % (type(e).__name__, e))
        finally:
            p.done.set()

    def ensure(self):
        """Makes sure there is a connection; returns it or raises ServerError."""
        with self.lock:
            if self.conn is not None and self.alive():
                return self.conn
            self.conn = self.connect()
            self.conn_mark = log_size(self.paths)
            return self.conn

    def connect(self):
        if IMPORT_ERROR is not None:
            raise ServerError("the PostgreSQL driver is missing: %s (install the Debian package python3-psycopg2)" % IMPORT_ERROR)
        deadline = time.monotonic() + START_TIMEOUT
        self.proc = None
        while time.monotonic() < deadline:
            conn = self.try_connect()
            if conn is not None:
                return conn
            if self.proc is None or self.proc.poll() is not None:
                self.check_exit()
                try:
                    self.mark = log_size(self.paths)
                    self.proc = start_server(self.paths)
                except (OSError, subprocess.SubprocessError) as e:
                    raise ServerError("cannot start PostgreSQL: %s%s" % (e, space_hint(str(e))))
            time.sleep(0.02)
        raise ServerError("PostgreSQL did not accept connections within %d s: %s" % (
            START_TIMEOUT, log_reason(self.paths, self.mark) or "its log (.kiln/postgres/server.log) says nothing"))

    def check_exit(self):
        """Raises the reason a server this kernel started has stopped, unless
        it stopped for the old server's processes, which end soon after a
        killed postmaster (the start is then tried again)."""
        if self.proc is None or self.proc.returncode is None:
            return
        logged = log_reason(self.paths, self.mark) or "see .kiln/postgres/server.log"
        if "pre-existing shared memory block" in logged or "already exists" in logged:
            time.sleep(0.1)
            return
        raise ServerError("PostgreSQL stopped as it started (exit %s): %s%s" % (
            self.proc.returncode, logged, space_hint(logged)))

    def try_connect(self):
        if not os.path.exists(os.path.join(self.paths.socket_dir, ".s.PGSQL.5432")):
            return None
        try:
            conn = psycopg2.connect(host=self.paths.socket_dir, dbname="postgres", user=user_name(),
                                    application_name="kiln")
        except psycopg2.OperationalError:
            return None
        conn.autocommit = True
        return conn

    def alive(self):
        """Whether the connection still answers. Only asked between
        transactions: inside one a lost server shows as the statement's
        error, and the cell after it reconnects."""
        c = self.conn
        if c.closed:
            return False
        if c.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
            return c.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_UNKNOWN
        try:
            with c.cursor() as cur:
                cur.execute("SELECT 1")
            del c.notices[:]
            return True
        except psycopg2.Error:
            try:
                c.close()
            except psycopg2.Error:
                pass
            return False

    def drop(self):
        with self.lock:
            c, self.conn = self.conn, None
        if c is not None:
            try:
                c.close()
            except psycopg2.Error:
                pass

    def cancel(self):
        c = self.conn
        if c is not None and not c.closed:
            try:
                c.cancel()
            except psycopg2.Error:
                pass


def text_casts():
    """Every type comes back as PostgreSQL's text: the table shows what
    psql would, and JSON is built from the type OIDs (json_value)."""
    oids = tuple(k for k in psycopg2.extensions.string_types.keys() if isinstance(k, int))
    psycopg2.extensions.register_type(psycopg2.extensions.new_type(oids, "KILN_TEXT", lambda v, cur: v))
    for name in ("UNICODE", "UNICODEARRAY"):
        t = getattr(psycopg2.extensions, name, None)
        if t is not None:
            psycopg2.extensions.register_type(t)


# -- splitting ----------------------------------------------------------------

DOLLAR_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_statements(code):
    """Returns [(kind, text, line, ended)]: kind "sql" or "meta" (a
    backslash command), line the 1-based line of the cell where it starts,
    ended whether a ";" (or, for a meta-command, the line's end) ends it."""
    out = []
    i, n, start = 0, len(code), 0
    depth = 0
    while i < n:
        c = code[i]
        if c == "\\" and code[start:i].strip() == "" and only_comments_before(code, start, i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(("meta", code[i:j].strip(), code.count("\n", 0, i) + 1, True))
            i = start = j
            continue
        if c == "-" and code.startswith("--", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and code.startswith("/*", i):
            i = skip_block_comment(code, i)
            continue
        if c == "'":
            escapes = i > 0 and code[i - 1] in "eE" and (i < 2 or not (code[i - 2].isalnum() or code[i - 2] == "_"))
            i = skip_quoted(code, i, "'", escapes)
            continue
        if c == '"':
            i = skip_quoted(code, i, '"', False)
            continue
        if c == "$" and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            m = DOLLAR_RE.match(code, i)
            if m:
                j = code.find(m.group(0), m.end())
                i = n if j < 0 else j + len(m.group(0))
                continue
        if c == "(":
            depth += 1
        elif c == ")" and depth > 0:
            depth -= 1
        elif c == ";" and depth == 0:
            add_statement(out, code, start, i + 1, True)
            start = i + 1
        i += 1
    add_statement(out, code, start, n, False)
    return out


def only_comments_before(code, start, i):
    return first_token(code[start:i]) < 0


def skip_block_comment(code, i):
    depth, n = 0, len(code)
    while i < n:
        if code.startswith("/*", i):
            depth += 1
            i += 2
        elif code.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def skip_quoted(code, i, q, escapes):
    i += 1
    n = len(code)
    while i < n:
        c = code[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c == q:
            if i + 1 < n and code[i + 1] == q:
                i += 2
                continue
            return i + 1
        i += 1
    return n


def add_statement(out, code, start, end, ended):
    text = code[start:end]
    first = first_token(text)
    if first < 0 or text[first:].strip() == ";":
        return
    line = code.count("\n", 0, start + first) + 1
    out.append(("sql", text[first:], line, ended))


def first_token(text):
    """The offset of the first character that is not space or comment; -1 if none."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            i = skip_block_comment(text, i)
        else:
            return i
    return -1


def is_complete(code):
    """Whether the cell ends with a finished statement (psql would run it)."""
    parts = split_statements(code)
    return not parts or parts[-1][3]


def connection_lost(conn, e):
    if conn.closed or (e.pgcode or "")[:2] in ("08", "57"):
        return True
    if not e.pgcode and type(e) in (psycopg2.DatabaseError, psycopg2.OperationalError, psycopg2.InterfaceError):
        return True
    try:
        return conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_UNKNOWN
    except psycopg2.Error:
        return True


def first_line(text):
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def brief(stmt, limit=120):
    s = " ".join(stmt.split())
    return s if len(s) <= limit else s[:limit - 1] + "\u2026"


# -- formatting ---------------------------------------------------------------


def text_value(v):
    if v is None:
        return "NULL"
    s = str(v)
    s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256 else c for c in s)


def clip(s, limit):
    return s if len(s) <= limit else s[:limit - 1] + "\u2026"


def width(s):
    w = 0
    for c in s:
        if unicodedata.combining(c):
            continue
        w += 2 if unicodedata.east_asian_width(c) in "WF" else 1
    return w


def pad(s, n, right):
    fill = " " * max(0, n - width(s))
    return fill + s if right else s + fill


def json_value(v, oid):
    if v is None:
        return None
    try:
        if oid in INT_OIDS:
            return int(v)
        if oid in FLOAT_OIDS:
            f = float(v)
            return f if f == f and f not in (float("inf"), float("-inf")) else v
        if oid == BOOL_OID:
            return v == "t"
        if oid in JSON_OIDS:
            return json.loads(v)
    except ValueError:
        pass
    return v


def footer(shown, more):
    if more:
        return "(first %d rows shown; the result has more)" % shown
    return "(%d row%s)" % (shown, "" if shown == 1 else "s")


def render(columns, oids, rows, more):
    """The Display data and metadata of a result."""
    numeric = [o in INT_OIDS or o in FLOAT_OIDS or o == NUMERIC_OID for o in oids]
    cells = [[clip(text_value(v), MAX_CELL) for v in r] for r in rows]
    heads = [clip(text_value(c), MAX_CELL) for c in columns]
    widths = [max([width(h)] + [width(r[i]) for r in cells]) for i, h in enumerate(heads)]
    lines = [" " + " | ".join(pad(h, widths[i], False) for i, h in enumerate(heads)).rstrip(),
             "-" + "-+-".join("-" * w for w in widths) + "-"]
    for r in cells:
        lines.append(" " + " | ".join(pad(v, widths[i], numeric[i]) for i, v in enumerate(r)).rstrip())
    lines.append(footer(len(rows), more))
    plain = "\n".join(lines)

    h = ['<table class="kiln-sql">', "<thead><tr>"]
    h += ["<th>%s</th>" % html.escape(str(c)) for c in columns]
    h.append("</tr></thead>")
    h.append("<tbody>")
    for r in rows:
        h.append("<tr>")
        for i, v in enumerate(r):
            if v is None:
                h.append('<td class="null">NULL</td>')
            elif numeric[i]:
                h.append('<td style="text-align:right">%s</td>' % html.escape(v))
            else:
                h.append("<td>%s</td>" % html.escape(clip(v, MAX_HTML_CELL)))
        h.append("</tr>")
    h.append("</tbody></table>")
    if more:
        h.append("<p>%s</p>" % html.escape(footer(len(rows), more)))
    data = {
        "text/plain": plain,
        "text/html": "".join(h),
        "application/json": {"columns": list(columns), "rows": [[json_value(v, oids[i]) for i, v in enumerate(r)] for r in rows]},
    }
    meta = {"rows": len(rows)}
    if more:
        meta["truncated"] = True
    return data, meta


def row_cost(row):
    """An estimate, on the high side, of a row's bytes in any one format."""
    return sum(len(v) * 4 + 16 if isinstance(v, str) else 16 for v in row)


# -- meta-commands ------------------------------------------------------------

RELKINDS = {"r": "table", "v": "view", "m": "materialized view", "i": "index", "S": "sequence",
            "f": "foreign table", "p": "partitioned table", "I": "partitioned index"}

LIST_SQL = """SELECT n.nspname AS "Schema", c.relname AS "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
    WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table'
    WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END AS "Type",
  pg_catalog.pg_get_userbyid(c.relowner) AS "Owner"
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = ANY(%s) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_toast' AND n.nspname !~ '^pg_temp' OR (c.relkind = ANY(%s) AND n.oid = pg_my_temp_schema())
ORDER BY 1, 2"""

COLUMNS_SQL = """SELECT a.attname AS "Column", pg_catalog.format_type(a.atttypid, a.atttypmod) AS "Type",
  CASE WHEN a.attnotnull THEN 'not null' ELSE '' END AS "Nullable",
  COALESCE(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '') AS "Default"
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""

INDEXES_SQL = """SELECT i.relname AS "Index", pg_catalog.pg_get_indexdef(x.indexrelid) AS "Definition"
FROM pg_catalog.pg_index x JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid = %s ORDER BY x.indisprimary DESC, i.relname"""

CONSTRAINTS_SQL = """SELECT conname AS "Constraint", pg_catalog.pg_get_constraintdef(oid, true) AS "Definition"
FROM pg_catalog.pg_constraint WHERE conrelid = %s AND contype IN ('f', 'c') ORDER BY conname"""

# A statement that may be a cursor's query (run_query).
QUERY_RE = re.compile(r"(SELECT|VALUES|TABLE|WITH)\b", re.IGNORECASE)

LIST_KINDS = {
    "d": ["r", "p", "v", "m", "S", "f"], "dt": ["r", "p"], "dv": ["v"], "dm": ["m"],
    "di": ["i", "I"], "ds": ["S"], "dE": ["f"],
}

COPY_RE = re.compile(r"^\s*(from|to)\s+('(?:[^']|'')*'|\S+)(.*)$", re.IGNORECASE | re.DOTALL)
TARGET_RE = re.compile(r"^\s*((?:\"[^\"]*\"|[^\s(])+(?:\s*\([^)]*\))?)", re.DOTALL)


class MetaError(Exception):
    """A meta-command that is wrong or unknown (its message says which)."""


# -- the kernel ---------------------------------------------------------------


class Kernel:
    def __init__(self):
        self.ch = socket.socket(fileno=3)
        self.inbuf = b""
        self.cell_active = False
        self.interrupted = False
        self.early = False
        # Whether the user's statement runs: only then does an interrupt
        # send a cancel, which must not hit the kernel's own cleanup.
        self.querying = False
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, self.on_sigint)
        self.paths = Paths(os.getcwd())
        # Programs this kernel starts (none yet) and clients told by the
        # docs find the server by these.
        os.environ["PGHOST"] = self.paths.socket_dir
        os.environ["PGDATABASE"] = "postgres"
        self.server = Server(self.paths)
        if psycopg2 is not None:
            text_casts()
        self.server.start_async()

    def on_sigint(self, signum, frame):
        if self.cell_active:
            self.interrupted = True
            if self.querying:
                self.server.cancel()

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self.ch.sendall(line.encode("utf-8", "replace") + b"\n")

    def readline(self):
        """Returns the next request line, or None at the end. An interrupt
        between cells is ignored unless a request has already arrived."""
        while b"\n" not in self.inbuf:
            r, _, _ = select.select([self.ch, self.wake_r], [], [])
            if self.wake_r in r and drain(self.wake_r):
                if self.inbuf or pending_bytes(self.ch) > 0:
                    self.early = True
            if self.ch in r:
                data = self.ch.recv(1 << 20)
                if not data:
                    return None
                self.inbuf += data
        line, self.inbuf = self.inbuf.split(b"\n", 1)
        return line

    def run(self):
        self.send({"type": "ready", "language": "postgres", "version": server_version()})
        while True:
            line = self.readline()
            if line is None:
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            t = msg.get("type")
            if t == "execute":
                self.execute(msg)
            elif t == "check":
                status = "complete" if is_complete(msg.get("code", "")) else "incomplete"
                self.send({"type": "check_result", "cell": msg.get("cell", ""), "status": status})
            elif t == "complete":
                self.complete(msg)
            self.early = False

    def execute(self, msg):
        cell = msg.get("cell", "")
        self.interrupted = False
        self.cell_active = True
        if drain(self.wake_r) or self.early:
            self.interrupted = True
        result = {"status": "ok"}
        if not self.interrupted:
            worker = threading.Thread(target=self.run_cell_safely, args=(cell, msg.get("code", ""), result))
            worker.start()
            while worker.is_alive():
                worker.join(0.1)
                # An interrupt that came before the query reached the
                # server cancels nothing: repeat it until the cell ends.
                if self.interrupted and self.querying:
                    self.server.cancel()
        status = "interrupted" if self.interrupted else result["status"]
        self.cell_active = False
        drain(self.wake_r)
        sys.stdout.flush()
        sys.stderr.flush()
        self.send({"type": "done", "cell": cell, "status": status})

    def run_cell_safely(self, cell, code, result):
        try:
            self.run_cell(cell, code, result)
        except Exception as e:  # a bug here: say so rather than hang or pass
            result["status"] = "error"
            self.error(cell, "InternalError", "the PostgreSQL kernel failed: %s: %s" % (type(e).__name__, e), 0, [])

    def run_cell(self, cell, code, result):
        stmts = split_statements(code)
        if not stmts:
            return
        pending = self.server.start_async()
        while not pending.done.wait(0.05):
            if self.interrupted:
                return
        if pending.error is not None:
            self.error(cell, "ServerError", str(pending.error), 0, [])
            result["status"] = "error"
            return
        conn = pending.conn
        for i, (kind, stmt, line, _) in enumerate(stmts, 1):
            if self.interrupted:
                return
            where = "statement %d of %d, line %d" % (i, len(stmts), line)
            try:
                if kind == "meta":
                    self.run_meta(conn, cell, stmt, {"statement": i, "line": line})
                else:
                    self.run_statement(conn, cell, stmt, {"statement": i, "line": line})
            except MetaError as e:
                self.error(cell, "MetaCommandError", "%s: %s" % (where, e), line, [where + ": " + brief(stmt), str(e)])
                result["status"] = "error"
                return
            except psycopg2.Error as e:
                self.notices(conn)
                if self.interrupted:
                    return
                lost = connection_lost(conn, e)
                self.pg_error(cell, e, stmt, line, where, lost)
                if lost:
                    self.server.drop()
                result["status"] = "error"
                return
            except OSError as e:  # \copy's file
                self.error(cell, type(e).__name__, "%s: %s" % (where, e), line, [where + ": " + brief(stmt)])
                result["status"] = "error"
                return

    def run_statement(self, conn, cell, stmt, where):
        if QUERY_RE.match(stmt) and self.run_query(conn, cell, stmt, where):
            return
        with conn.cursor() as cur:
            self.user_execute(cur, stmt)
            self.notices(conn)
            self.show(cur, cell, where, lambda: cur.fetchmany(500))

    def user_execute(self, cur, sql):
        self.querying = True
        try:
            cur.execute(sql)
        finally:
            self.querying = False

    def run_query(self, conn, cell, stmt, where):
        """Runs a query through a cursor, as psql does with FETCH_COUNT, so
        that only the rows shown are computed and fetched: a huge result
        never fills the kernel's memory. Outside a transaction it is one of
        its own; inside the user's, a savepoint lets a statement that
        cannot be a cursor's (SELECT INTO, a data-modifying WITH, an error
        the plain run reports with its position) run plainly instead:
        False then, with nothing done. An error while rows are fetched
        leaves the user's transaction aborted, as without the cursor."""
        began = conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE
        with conn.cursor() as cur:
            cur.execute("BEGIN" if began else "SAVEPOINT kiln_fetch")
            try:
                cur.execute("DECLARE kiln_rows NO SCROLL CURSOR FOR " + stmt)
            except psycopg2.Error:
                del conn.notices[:]
                self.cleanup(conn, "ROLLBACK" if began else "ROLLBACK TO SAVEPOINT kiln_fetch; RELEASE SAVEPOINT kiln_fetch")
                return False

            def fetch():
                self.user_execute(cur, "FETCH 500 FROM kiln_rows")
                return cur.fetchall()

            try:
                first = [fetch()]  # and with it the columns
                self.show(cur, cell, where, lambda: first.pop() if first else fetch())
            except psycopg2.Error:
                alive = not conn.closed and conn.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_UNKNOWN
                if began and alive:
                    self.cleanup(conn, "ROLLBACK")
                raise
            self.cleanup(conn, "CLOSE kiln_rows; " + ("COMMIT" if began else "RELEASE SAVEPOINT kiln_fetch"))
        return True

    def cleanup(self, conn, sql):
        """Runs the kernel's own statements after a user's; a cancel sent
        for the user's statement may still arrive and stop them, so they
        are tried again."""
        for _ in range(3):
            try:
                with conn.cursor() as cur:
                    cur.execute(sql)
                return
            except psycopg2.extensions.QueryCanceledError:
                continue

    def show(self, cur, cell, where, fetch=None):
        """Shows a statement's outcome: its rows (fetch gives them in
        batches, cur.fetchmany by default) or the rows it changed."""
        fetch = fetch or (lambda: cur.fetchmany(500))
        if cur.description is None:
            tag = (cur.statusmessage or "").split(" ")[0]
            if tag in ("INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "SELECT") and cur.rowcount >= 0:
                n = cur.rowcount
                sys.stdout.write("%d row%s affected\n" % (n, "" if n == 1 else "s"))
            return
        columns = [d.name for d in cur.description]
        oids = [d.type_code for d in cur.description]
        rows, cost, more = [], 0, False
        while not more and not self.interrupted:
            batch = fetch()
            if not batch:
                break
            for r in batch:
                c = row_cost(r)
                if len(rows) >= MAX_ROWS or (rows and cost + c > MAX_BYTES):
                    more = True
                    break
                rows.append(r)
                cost += c
        if self.interrupted:
            return
        data, meta = render(columns, oids, rows, more)
        meta.update(where)
        sys.stdout.flush()
        self.send({"type": "display", "cell": cell, "data": data, "metadata": meta})

    def notices(self, conn):
        if conn.notices:
            sys.stderr.write("".join(conn.notices))
            del conn.notices[:]

    def pg_error(self, cell, e, stmt, line, where, lost):
        diag = e.diag
        pos = 0
        try:
            pos = int(diag.statement_position or 0)
        except ValueError:
            pass
        primary = diag.message_primary or first_line(e.pgerror or str(e)) or type(e).__name__
        err_line = line
        tb = [where + ": " + brief(stmt)]
        if e.pgcode:
            tb.append("ERROR: %s (SQLSTATE %s)" % (primary, e.pgcode))
        else:
            tb.append("ERROR: %s" % primary)
        msg = where
        if pos > 0:
            before = stmt[:pos - 1]
            err_line = line + before.count("\n")
            col = pos - 1 - (before.rfind("\n") + 1)
            src = stmt.splitlines()[before.count("\n")] if stmt.splitlines() else ""
            prefix = "LINE %d: " % err_line
            tb.append(prefix + src)
            tb.append(" " * (len(prefix) + width(src[:col])) + "^")
            msg = "%s, position %d (line %d)" % (where, pos, err_line)
        if diag.message_detail:
            tb.append("DETAIL: " + diag.message_detail)
        if diag.message_hint:
            tb.append("HINT: " + diag.message_hint)
        if lost:
            reason = log_reason(self.paths, self.server.conn_mark)
            if reason:
                primary += "; the server stopped: " + reason
            primary += " (the connection to PostgreSQL was lost; the next cell reconnects, and an open transaction is gone)"
        name = type(e).__name__
        hint = space_hint("could not extend" if e.pgcode == "53100" else primary)  # 53100: disk_full
        self.error(cell, name, "%s: %s%s" % (msg, primary, hint), err_line, tb)

    def error(self, cell, name, message, line, traceback):
        sys.stdout.flush()
        sys.stderr.flush()
        msg = {"type": "error", "cell": cell, "name": name, "message": message, "traceback": traceback or [message]}
        if line:
            msg["line"] = line
        self.send(msg)

    # -- meta-commands --

    def run_meta(self, conn, cell, cmd, where):
        word = cmd.split(None, 1)[0][1:]
        arg = cmd[len(word) + 1:].strip()
        if word.lower() == "copy":
            return self.copy(conn, cmd)
        if word.endswith("+"):
            word = word[:-1]
        if word in LIST_KINDS and not arg:
            return self.query(conn, cell, where, LIST_SQL, (LIST_KINDS[word], LIST_KINDS[word]))
        if word == "dn" and not arg:
            return self.query(conn, cell, where, """SELECT nspname AS "Name", pg_catalog.pg_get_userbyid(nspowner) AS "Owner"
FROM pg_catalog.pg_namespace WHERE nspname !~ '^pg_' AND nspname <> 'information_schema' ORDER BY 1""", ())
        if word == "l" and not arg:
            return self.query(conn, cell, where, """SELECT datname AS "Name", pg_catalog.pg_get_userbyid(datdba) AS "Owner",
pg_catalog.pg_encoding_to_char(encoding) AS "Encoding" FROM pg_catalog.pg_database ORDER BY 1""", ())
        if word in ("d", "dt", "dv", "di", "ds") and arg:
            return self.describe(conn, cell, where, arg)
        raise MetaError("unknown meta-command \\%s; this kernel has \\d, \\d NAME, \\dt, \\dv, \\di, \\ds, \\dm, \\dn, \\l and \\copy" % word)

    def query(self, conn, cell, where, sql, args):
        with conn.cursor() as cur:
            cur.execute(sql, args)
            self.show(cur, cell, where)

    def describe(self, conn, cell, where, name):
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)::oid, to_regclass(%s)::text", (name, name))
            oid, shown = cur.fetchone()
        if oid is None:
            raise MetaError("did not find any relation named %s" % name)
        sys.stdout.write('%s "%s"\n' % (self.kind_of(conn, oid).capitalize(), shown))
        self.query(conn, cell, where, COLUMNS_SQL, (int(oid),))
        for sql in (INDEXES_SQL, CONSTRAINTS_SQL):
            with conn.cursor() as cur:
                cur.execute(sql, (int(oid),))
                if cur.rowcount > 0:
                    self.show(cur, cell, where)

    def kind_of(self, conn, oid):
        with conn.cursor() as cur:
            cur.execute("SELECT relkind FROM pg_catalog.pg_class WHERE oid = %s", (int(oid),))
            return RELKINDS.get(cur.fetchone()[0], "relation")

    def copy(self, conn, cmd):
        """\\copy TARGET from|to FILE [options]: COPY ... FROM STDIN or TO
        STDOUT through this connection, the file relative to the workspace."""
        usage = "\\copy wants: \\copy table [(columns)] from 'file' [with (options)], or \\copy table|(query) to 'file' [with (options)]"
        args = cmd[len("\\copy"):]
        if args.lstrip().startswith("("):
            start = len(args) - len(args.lstrip())
            end = start + query_end(args[start:])
        else:
            t = TARGET_RE.match(args)
            end = t.end() if t else 0
        m = COPY_RE.match(args[end:])
        if end == 0 or not m:
            raise MetaError(usage)
        target, direction, name, rest = args[:end].strip(), m.group(1).lower(), m.group(2), m.group(3).strip().rstrip(";")
        if name.startswith("'"):
            name = name[1:-1].replace("''", "'")
        if name.lower() in ("stdin", "stdout", "pstdin", "pstdout"):
            raise MetaError("\\copy from or to %s is not available in a cell; name a file in the workspace" % name)
        sql = "COPY %s %s %s %s" % (target, direction.upper(), "STDIN" if direction == "from" else "STDOUT", rest)
        with conn.cursor() as cur:
            with open(name, "rb" if direction == "from" else "wb") as f:
                self.querying = True
                try:
                    cur.copy_expert(sql, f)
                finally:
                    self.querying = False
            self.notices(conn)
            n = cur.rowcount
            sys.stdout.write("%d row%s %s\n" % (n, "" if n == 1 else "s", "copied" if direction == "from" else "written"))

    # -- completion --

    def complete(self, msg):
        code = msg.get("code", "")
        cursor = max(0, min(int(msg.get("cursor", len(code))), len(code)))
        m = re.search(r"[A-Za-z_][A-Za-z0-9_$]*$", code[:cursor])
        word = m.group(0) if m else ""
        matches = []
        conn = self.server.conn
        if word and conn is not None and not conn.closed and not self.cell_active:
            try:
                with conn.cursor() as cur:
                    cur.execute("""SELECT DISTINCT name FROM (
  SELECT relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  UNION SELECT attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND a.attnum > 0 AND c.relkind IN ('r', 'v', 'm', 'p', 'f')) x
WHERE name ILIKE %s ORDER BY 1 LIMIT 200""", (word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))
                    matches = [r[0] for r in cur.fetchall()]
            except psycopg2.Error:
                pass
        upper = word[:1].isupper()
        matches += [k if upper else k.lower() for k in KEYWORDS if word and k.startswith(word.upper())]
        self.send({"type": "completion", "cell": msg.get("cell", ""), "matches": matches,
                   "cursor_start": cursor - len(word), "cursor_end": cursor})


KEYWORDS = """ALTER AND AS ASC BEGIN BETWEEN BY CASCADE CASE CAST CHECK COMMIT CONSTRAINT
COPY CREATE CROSS DEFAULT DELETE DESC DISTINCT DROP ELSE END EXCEPT EXISTS EXPLAIN
FALSE FOREIGN FROM FULL GROUP HAVING IN INDEX INNER INSERT INTERSECT INTO IS JOIN
KEY LEFT LIKE ILIKE LIMIT NOT NULL OFFSET ON OR ORDER OUTER PRIMARY REFERENCES
RETURNING RIGHT ROLLBACK SELECT SET TABLE THEN TRUE UNION UNIQUE UPDATE USING
VALUES VIEW WHEN WHERE WITH
BIGINT BIGSERIAL BOOLEAN BYTEA DATE INTEGER JSONB NUMERIC SERIAL TEXT TIMESTAMP
TIMESTAMPTZ UUID VARCHAR
AVG COALESCE COUNT MAX MIN NOW NULLIF ROUND SUM STRING_AGG ARRAY_AGG""".split()


def query_end(text):
    """The end of the parenthesized query that text starts with (0 if it
    does not close): split_statements' rules, so ")" in strings is text."""
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            i = skip_quoted(text, i, "'", False)
            continue
        if c == '"':
            i = skip_quoted(text, i, '"', False)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return 0


def server_version():
    try:
        out = subprocess.run([PG_BIN + "/postgres", "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=10).stdout.decode()
        m = re.search(r"\d+(\.\d+)+", out)
        return m.group(0) if m else out.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def drain(fd):
    """Empties a non-blocking pipe; whether there was anything in it."""
    got = False
    try:
        while os.read(fd, 4096):
            got = True
    except BlockingIOError:
        pass
    return got


def pending_bytes(sock):
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


if __name__ == "__main__":
    Kernel().run()
