"""kiln SQL kernel: SQLite through Python's sqlite3 module.

It speaks kernelproto (newline-delimited JSON) on fd 3. The database is a
file in the workspace, kiln.db, or the path in $KILN_SQL_DB (relative to the
workspace, the working directory; ":memory:" for a database that lives as
long as the kernel). It persists between cells and kernel restarts.

A cell is split into statements where sqlite3.complete_statement says one
ends (so semicolons in strings, comments and trigger bodies do not split); a
last statement without ";" runs too. Statements run in order, each in
autocommit mode as in the sqlite3 shell: a statement's changes are committed
when it ends, unless the cell opened a transaction with BEGIN, which then
lasts until COMMIT or ROLLBACK, across cells too. The first error stops the
cell; the statements before it stay done. The Error's name is the sqlite3
exception's (OperationalError, IntegrityError, ...); its message says where
and what ("statement 2 of 3, line 5: no such table: x"), its traceback the
statement's trimmed text and SQLite's error code, its line the line of the
cell where the statement starts.

Every statement that returns rows (SELECT, PRAGMA, VALUES, ... RETURNING)
sends a Display: text/plain (an aligned table with a header and a row count,
NULL as NULL, blobs as x'hex'), text/html (a <table> with <thead> and
<tbody>, values escaped) and application/json ({"columns": [...], "rows":
[[...], ...]} with blobs as {"base64": "..."} and infinities as the strings
"Infinity" and "-Infinity"). Its metadata has "statement" and "line" (which
statement of the cell), "rows" (how many are shown) and, when the result was
cut, "truncated": true. At most MAX_ROWS rows, and about MAX_BYTES of each
format, are shown; the rest are not fetched, and the text says so. INSERT,
UPDATE, DELETE and REPLACE print "N rows affected" on stdout; other
statements (CREATE, BEGIN, ...) print nothing.

An interrupt (SIGINT) calls sqlite3_interrupt: the running statement stops
(rolled back, as SQLite does), the statements before it stay done, and the
cell ends "interrupted". Statements run in a worker thread so that the main
thread can take the signal at once.

Check says "complete" when the cell ends with a complete statement (what the
sqlite3 shell waits for before it runs anything), "incomplete" otherwise: an
open string, comment or trigger body, or no final ";". It never says
"invalid": syntax is SQLite's to judge when the cell runs. Complete offers
table and view names (only those after FROM, JOIN, INTO, UPDATE, TABLE),
column names (of every table, or of the one before a "."), and keywords and
common functions in the case the word was typed in.
"""

import base64
import fcntl
import html
import json
import math
import os
import re
import select
import signal
import socket
import sqlite3
import struct
import sys
import termios
import threading
import time
import unicodedata

MAX_ROWS = 10000
MAX_BYTES = 6 << 20  # per format, by row_cost's estimate
MAX_CELL = 80  # characters of a value in the text table
MAX_HTML_CELL = 1000  # characters of a value in the HTML table


def database_path():
    p = os.environ.get("KILN_SQL_DB", "") or "kiln.db"
    if p == ":memory:":
        return p
    return os.path.join(os.getcwd(), p)


# -- splitting ----------------------------------------------------------------


def split_statements(code):
    """Returns [(text, line)] for the statements of a cell, line being the
    1-based line where the statement's first token is."""
    out = []
    start = 0
    for i, ch in enumerate(code):
        if ch == ";" and sqlite3.complete_statement(code[start:i + 1]):
            add_statement(out, code, start, i + 1)
            start = i + 1
    add_statement(out, code, start, len(code))
    return out


def add_statement(out, code, start, end):
    text = code[start:end]
    first = first_token(text)
    if first < 0 or text[first:].strip() == ";":
        return
    line = code.count("\n", 0, start + first) + 1
    out.append((text[first:], line))


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
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            return i
    return -1


def brief(stmt, limit=120):
    s = " ".join(stmt.split())
    return s if len(s) <= limit else s[:limit - 1] + "\u2026"


# -- formatting ---------------------------------------------------------------


def text_value(v):
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        h = v[:32].hex()
        return "x'%s'" % h if len(v) <= 32 else "x'%s'\u2026 (%d bytes)" % (h, len(v))
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    if not isinstance(v, str):
        return s
    s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    s = "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256 else c for c in s)
    return s


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


def json_value(v):
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, float) and math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def footer(shown, more):
    if more:
        return "(first %d rows shown; the result has more)" % shown
    return "(%d row%s)" % (shown, "" if shown == 1 else "s")


def render(columns, rows, more):
    """The Display data and metadata of a result."""
    cells = [[clip(text_value(v), MAX_CELL) for v in r] for r in rows]
    heads = [clip(text_value(c), MAX_CELL) for c in columns]
    right = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and
             any(isinstance(r[i], (int, float)) for r in rows) for i in range(len(columns))]
    widths = [max([width(h)] + [width(r[i]) for r in cells]) for i, h in enumerate(heads)]
    lines = [" " + " | ".join(pad(h, widths[i], False) for i, h in enumerate(heads)).rstrip(),
             "-" + "-+-".join("-" * w for w in widths) + "-"]
    for r in cells:
        lines.append(" " + " | ".join(pad(v, widths[i], right[i]) for i, v in enumerate(r)).rstrip())
    lines.append(footer(len(rows), more))
    plain = "\n".join(lines)

    h = ['<table class="kiln-sql">', "<thead><tr>"]
    h += ["<th>%s</th>" % html.escape(str(c)) for c in columns]
    h.append("</tr></thead>")
    h.append("<tbody>")
    for r in rows:
        h.append("<tr>")
        for v in r:
            if v is None:
                h.append('<td class="null">NULL</td>')
            elif isinstance(v, (int, float)):
                h.append('<td style="text-align:right">%s</td>' % html.escape(text_value(v)))
            else:
                h.append("<td>%s</td>" % html.escape(clip(text_value(v) if isinstance(v, bytes) else str(v), MAX_HTML_CELL)))
        h.append("</tr>")
    h.append("</tbody></table>")
    if more:
        h.append("<p>%s</p>" % html.escape(footer(len(rows), more)))
    data = {
        "text/plain": plain,
        "text/html": "".join(h),
        "application/json": {"columns": list(columns), "rows": [[json_value(v) for v in r] for r in rows]},
    }
    meta = {"rows": len(rows)}
    if more:
        meta["truncated"] = True
    return data, meta


def row_cost(row):
    """An estimate, on the high side, of a row's bytes in any one format
    (UTF-8 JSON takes up to 3 bytes a character, HTML escapes some
    characters into 5 or 6), so that a Display stays well under
    kernelproto.MaxLine."""
    n = 0
    for v in row:
        if isinstance(v, bytes):
            n += len(v) * 2 + 16
        elif isinstance(v, str):
            n += len(v) * 4 + 16
        else:
            n += 16
    return n


# -- completion ---------------------------------------------------------------

KEYWORDS = """ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH
AUTOINCREMENT BEFORE BEGIN BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN
COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME
CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH
DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN
FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS
HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD
INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED
NATURAL NO NOT NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER
OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE RANGE RECURSIVE
REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT
ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN TIES TO
TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW
VIRTUAL WHEN WHERE WINDOW WITH WITHOUT
INTEGER TEXT REAL BLOB NUMERIC
ABS AVG CHANGES CHAR COALESCE COUNT DATE DATETIME GROUP_CONCAT HEX IFNULL
IIF INSTR JSON JSON_EXTRACT JULIANDAY LENGTH LOWER LTRIM MAX MIN NULLIF
PRINTF QUOTE RANDOM ROUND RTRIM STRFTIME SUBSTR SUM TIME TOTAL TRIM TYPEOF
UNICODE UPPER""".split()

# After these words a name is a table's (or a view's).
TABLE_WORDS = {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "VIEW", "EXISTS"}
PREV_RE = re.compile(r"([A-Za-z_]+)\s+$")
WORD_RE = re.compile(r'(?:([A-Za-z_][A-Za-z0-9_$]*|"[^"]*")\.)?([A-Za-z_][A-Za-z0-9_$]*)?$')


# -- the kernel ---------------------------------------------------------------


class Kernel:
    def __init__(self):
        self.ch = socket.socket(fileno=3)
        self.inbuf = b""
        self.cell_active = False
        self.interrupted = False
        self.early = False
        self.conn = None
        self.open_error = None
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, self.on_sigint)
        try:
            self.conn = sqlite3.connect(database_path(), isolation_level=None, check_same_thread=False)
            # TEXT that is not UTF-8 shows with U+FFFD instead of failing the query.
            self.conn.text_factory = lambda b: b.decode("utf-8", "replace")
        except sqlite3.Error as e:
            self.open_error = e

    def on_sigint(self, signum, frame):
        if self.cell_active:
            self.interrupted = True
            if self.conn is not None:
                self.conn.interrupt()

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self.ch.sendall(line.encode("utf-8", "replace") + b"\n")

    def readline(self):
        """Returns the next request line, or None at the end. An interrupt
        between cells is ignored unless a request has already arrived: the
        agent sent it for that cell (it sends the request first)."""
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
        self.send({"type": "ready", "language": "sql", "version": sqlite3.sqlite_version})
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
                self.check(msg)
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
                # An interrupt that came just before a statement started
                # finds nothing to stop: repeat it until the cell ends.
                if self.interrupted and self.conn is not None:
                    self.conn.interrupt()
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
            self.error(cell, "InternalError", "the SQL kernel failed: %s: %s" % (type(e).__name__, e), 0, [])

    def run_cell(self, cell, code, result):
        if self.conn is None:
            self.error(cell, "OperationalError", "cannot open the database %s: %s" % (database_path(), self.open_error), 0, [])
            result["status"] = "error"
            return
        stmts = split_statements(code)
        for i, (stmt, line) in enumerate(stmts, 1):
            if self.interrupted:
                return
            try:
                self.run_statement(cell, stmt, {"statement": i, "line": line})
            except sqlite3.Error as e:
                if self.interrupted or isinstance(e, sqlite3.OperationalError) and str(e) == "interrupted":
                    self.interrupted = True
                    return
                where = "statement %d of %d, line %d" % (i, len(stmts), line)
                name = type(e).__name__
                tb = [where + ": " + brief(stmt)]
                code_name = getattr(e, "sqlite_errorname", None)
                tb.append("%s: %s" % (name, e) + (" (%s)" % code_name if code_name else ""))
                self.error(cell, name, "%s: %s" % (where, e), line, tb)
                result["status"] = "error"
                return
            except Exception as e:  # a kernel bug or a value Python cannot convert
                self.error(cell, type(e).__name__, "statement %d of %d, line %d: %s" % (i, len(stmts), line, e), line,
                           ["statement %d of %d, line %d: %s" % (i, len(stmts), line, brief(stmt))])
                result["status"] = "error"
                return

    def run_statement(self, cell, stmt, where):
        cur = self.conn.execute(stmt)
        try:
            if cur.description is None:
                if cur.rowcount >= 0:
                    n = cur.rowcount
                    sys.stdout.write("%d row%s affected\n" % (n, "" if n == 1 else "s"))
                return
            columns = [d[0] for d in cur.description]
            rows, cost, more = [], 0, False
            while True:
                batch = cur.fetchmany(500)
                if not batch:
                    break
                for r in batch:
                    c = row_cost(r)
                    if len(rows) >= MAX_ROWS or (rows and cost + c > MAX_BYTES):
                        more = True
                        break
                    rows.append(r)
                    cost += c
                if more or self.interrupted:
                    break
            if self.interrupted:
                raise sqlite3.OperationalError("interrupted")
            data, meta = render(columns, rows, more)
            meta.update(where)
            sys.stdout.flush()
            self.send({"type": "display", "cell": cell, "data": data, "metadata": meta})
        finally:
            cur.close()

    def error(self, cell, name, message, line, traceback):
        sys.stdout.flush()
        msg = {"type": "error", "cell": cell, "name": name, "message": message, "traceback": traceback or [message]}
        if line:
            msg["line"] = line
        self.send(msg)

    def check(self, msg):
        code = msg.get("code", "")
        status = "complete"
        if first_token(code) >= 0 and not sqlite3.complete_statement(code):
            status = "incomplete"
        self.send({"type": "check_result", "cell": msg.get("cell", ""), "status": status})

    def complete(self, msg):
        code = msg.get("code", "")
        cursor = max(0, min(int(msg.get("cursor", len(code))), len(code)))
        m = WORD_RE.search(code[:cursor])
        table, word = m.group(1), m.group(2) or ""
        start = cursor - len(word)
        prev = PREV_RE.search(code[:start])
        after_table_word = prev is not None and prev.group(1).upper() in TABLE_WORDS
        matches = []
        try:
            if table is not None:
                matches = [c for c in self.columns(table.strip('"')) if c.lower().startswith(word.lower())]
            elif after_table_word:
                matches = [t for t in self.tables() if t.lower().startswith(word.lower())]
            elif word:
                names = self.tables()
                for t in list(names):
                    names = names + self.columns(t)
                matches = sorted({n for n in names if n.lower().startswith(word.lower())})
                upper = word[:1].isupper()
                matches += [k if upper else k.lower() for k in KEYWORDS if k.startswith(word.upper())]
        except sqlite3.Error:
            pass
        seen, out = set(), []
        for x in matches:
            if x not in seen:
                seen.add(x)
                out.append(x)
        self.send({"type": "completion", "cell": msg.get("cell", ""), "matches": out,
                   "cursor_start": start, "cursor_end": cursor})

    def tables(self):
        if self.conn is None:
            return []
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")]

    def columns(self, table):
        if self.conn is None:
            return []
        return [r[0] for r in self.conn.execute("SELECT name FROM pragma_table_info(?)", (table,))]


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
