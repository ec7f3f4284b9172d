# kiln's Python REPL kernel. It speaks package kernelproto on fd 3: newline-
# delimited JSON, Ready first, then one Execute, Complete or Check at a time.
# It runs as -c's program (python3 -u -c <this file>, or a loader that read
# it from fd 3: kernels.Spec.Boot), so it imports
# only what it needs before Ready and the rest on first use.
#
# User code runs in its own module, installed as sys.modules["__main__"]; the
# kernel's names live here and are not reachable from it. Cells compile under
# the filename "<cell N>" and their source is registered in linecache, so
# tracebacks show cell lines; the kernel's own frames are cut from them.
#
# Interrupts: SIGINT raises KeyboardInterrupt only while a cell's code runs,
# and never in the middle of a message write; an interrupted cell sends an
# Error named KeyboardInterrupt (its traceback shows where it stopped) and
# Done "interrupted". A SIGINT while idle is ignored.

import builtins
import io
import os
import sys
import types
import _signal
import _thread

json = None  # imported right after Ready, which it would delay

_CH = 3  # kernelproto.ChannelFD
_MAXLINE = 32 << 20  # kernelproto.MaxLine
_TLA = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST
_CO_COROUTINE = 0x80
_NO_STDIN = "kiln: this cell has no stdin; send stdin with the cell to use input()"

_PID = os.getpid()
_MAIN_THREAD = _thread.get_ident()
_MODCODE = sys._getframe().f_code
_lock = _thread.allocate_lock()

_armed = False  # a cell's code is running: SIGINT raises KeyboardInterrupt
_critical = False  # the main thread is writing a message: defer the interrupt
_pending = False  # an interrupt was deferred
# A cell's execute_result, encoded, waiting to go out with the next message
# (the cell's done at the latest): one write and one wake-up of the agent
# instead of two per cell, in the same order.
_result_out = b""
_cell = None  # id of the running cell; displays outside a cell are dropped
_open = None  # id of a cell whose Done is not sent yet
_count = 0  # cells executed, for "<cell N>"
_flags = 0  # __future__ flags in force, as the REPL remembers them
_shown = set()  # ids of figures this cell already displayed
_loop = None  # the asyncio loop of top-level await, created on first use
_kcode = None  # the kernel's code objects, for cutting tracebacks


def _on_sigint(signum, frame):
    global _pending
    if not _armed:
        return
    if _critical:
        _pending = True
        return
    raise KeyboardInterrupt


def _log(text):
    try:
        sys.__stderr__.write("kiln: %s\n" % text)
        sys.__stderr__.flush()
    except Exception:
        pass


# ---- the channel ----


def _cut(text, n):
    if len(text) <= n:
        return text
    return text[:n] + "\n[kiln: cut %d characters]" % (len(text) - n)


def _shrink(msg):
    """Returns msg made to fit in one line (MaxLine)."""
    msg = dict(msg)
    t = msg.get("type")
    if t in ("display", "execute_result"):
        tp = msg.get("data", {}).get("text/plain", "")
        msg.pop("metadata", None)
        msg["data"] = {
            "text/plain": _cut(tp, 1 << 20)
            + "\n[kiln: this output is over the %d-byte message limit; only text/plain was sent]"
            % _MAXLINE
        }
    elif t == "error":
        msg["message"] = _cut(msg.get("message", ""), 1 << 18)
        tb = [_cut(x, 4096) for x in msg.get("traceback", [])]
        if len(tb) > 400:
            tb = tb[:200] + ["[kiln: cut %d lines]" % (len(tb) - 400)] + tb[-200:]
        msg["traceback"] = tb
    elif t == "completion":
        msg["matches"] = [m for m in msg.get("matches", []) if len(m) < 1000][:5000]
    elif t == "check_result":
        msg["message"] = _cut(msg.get("message", ""), 1 << 18)
    return msg


def _encode(msg):
    s = json.dumps(msg, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    if len(s) >= _MAXLINE:
        s = json.dumps(_shrink(msg), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return s.encode("ascii") + b"\n"


# Ordered output (kernelproto): Python's stdout and stderr go on the
# channel as stream messages, in order with displays; output below Python
# (children, C code, os.write(1)) still goes through fds 1 and 2. Each
# ordered message gets a number, and its order mark (the nonce, then the
# number) goes to both pipes first, so the agent can put the two paths back
# in order. The marks go through copies of fds 1 and 2 made at start, so
# that code which points fd 1 elsewhere (a capture) never sees them.
_NONCE = b"\0" + os.urandom(15)  # NUL first: rare in output, so rarely held back
_ORDERED = ("stream", "display", "execute_result", "error")  # a held execute_result is not numbered
_markfds = ()  # the copies of fds 1 and 2; empty: no ordering
_seq = 0


def _order(data):
    """Numbers an encoded ordered message and marks the pipes; _lock held."""
    global _seq
    _seq += 1
    mark = _NONCE + _seq.to_bytes(8, "big")
    for fd in _markfds:
        try:
            os.write(fd, mark)  # 24 bytes: one atomic write
        except OSError:
            pass
    return data[:-2] + b',"seq":%d}\n' % _seq


def _send(msg, hold=False):
    global _critical, _pending, _result_out
    if os.getpid() != _PID:  # a fork of the kernel must not talk
        return
    ordered = _markfds and msg.get("type") in _ORDERED
    if ordered and msg.get("type") != "stream":
        _flush_std()  # what the cell printed before goes first
    data = _encode(msg)
    main = _thread.get_ident() == _MAIN_THREAD
    with _lock:
        if hold and not _result_out:
            # Not numbered: it goes out with the next message (the done, as
            # a rule) in one write, and marks would cost two more; it keeps
            # its order with everything on the channel, but not with output
            # below Python (nor did it before ordered output).
            _result_out = data
            return
        if main:
            _critical = True
        try:
            data, _result_out = _result_out + (_order(data) if ordered else data), b""
            view = memoryview(data)
            while view:
                view = view[os.write(_CH, view) :]
        except OSError:
            os._exit(1)  # the agent is gone
        finally:
            if main:
                _critical = False
    if main and _pending:
        _pending = False
        if _armed:
            raise KeyboardInterrupt


# ---- stdout and stderr ----

_FLUSH_AT = 8192  # bytes buffered before a flush without a newline


def _out(fd, name, data):
    """Sends Python-level output: on the channel in a cell, else to fd."""
    cell = _cell
    if cell is None or not _markfds or os.getpid() != _PID:
        # between cells (a left-over thread: the agent hands it to the next
        # cell), in a fork, or without ordering: the pipe, as below Python
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return
    import binascii

    for i in range(0, len(data), 1 << 20):  # kernelproto.MaxStreamChunk
        b64 = binascii.b2a_base64(data[i : i + (1 << 20)], newline=False).decode("ascii")
        _send({"type": "stream", "cell": cell, "name": name, "data": b64})


class _OutBuffer(io.BufferedIOBase):
    """sys.stdout.buffer: bytes into the same buffer as the text."""

    def __init__(self, owner):
        self._o = owner

    def writable(self):
        return True

    def write(self, b):
        b = bytes(b)
        self._o._put(b, b"\n" in b or b"\r" in b)
        return len(b)

    def flush(self):
        self._o.flush()

    def fileno(self):
        return self._o.fileno()

    def isatty(self):
        return False

    @property
    def raw(self):
        return self

    @property
    def name(self):
        return self._o.name


class _Out(io.TextIOBase):
    """sys.stdout and sys.stderr: buffered, flushed at a newline or carriage
    return, past _FLUSH_AT bytes, before every display and stdin request,
    and at the end of the cell. fileno() is still 1 (or 2), where output
    written below Python goes."""

    def __init__(self, fd, name, like):
        self._fd, self._name = fd, name
        self._enc = getattr(like, "encoding", None) or "utf-8"
        self._errors = getattr(like, "errors", None) or "strict"
        self._buf = []
        self._n = 0
        self._wlock = _thread.RLock()
        self.buffer = _OutBuffer(self)

    encoding = property(lambda self: self._enc)
    errors = property(lambda self: self._errors)
    name = property(lambda self: "<%s>" % self._name)
    mode = "w"
    line_buffering = True
    write_through = False
    newlines = None

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def reconfigure(self, *, encoding=None, errors=None, newline=None, line_buffering=None, write_through=None):
        self.flush()
        if encoding is not None:
            "".encode(encoding)  # LookupError for an unknown codec, as TextIOWrapper
            self._enc = encoding
            if errors is None:
                self._errors = "strict"
        if errors is not None:
            self._errors = errors

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self._put(s.encode(self._enc, self._errors), "\n" in s or "\r" in s)
        return len(s)

    def _put(self, b, eol):
        if not b:
            return
        with self._wlock:
            self._buf.append(b)
            self._n += len(b)
        if eol or self._n >= _FLUSH_AT:
            self.flush()

    def flush(self):
        with self._wlock:
            if not self._buf:
                return
            data = b"".join(self._buf)
            self._buf, self._n = [], 0
            _out(self._fd, self._name, data)


_stdout = _stderr = None  # the _Out objects, once installed


def _flushing(f):
    """Wraps f (it starts code that writes to fds 1 and 2 directly) to flush
    Python's stdout and stderr first, so that print("a"); os.system("echo
    b") keeps its order even without a newline."""

    def wrapper(*args, **kwargs):
        _flush_std()
        return f(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = f.__name__
    wrapper.__doc__ = f.__doc__
    wrapper.__wrapped__ = f
    return wrapper


def _after_fork():
    for w in (_stdout, _stderr):
        if w is not None:
            w._wlock = _thread.RLock()  # another thread may have held it


def _install_std():
    global _stdout, _stderr
    sys.stdout = _stdout = _Out(1, "stdout", sys.__stdout__)
    sys.stderr = _stderr = _Out(2, "stderr", sys.__stderr__)
    for name in ("system", "execv", "execve", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, _flushing(getattr(os, name)))
    os.register_at_fork(before=_flush_std, after_in_child=_after_fork)
    if "subprocess" in sys.modules:
        _patch_subprocess(sys.modules["subprocess"])


def _patch_subprocess(module):
    p = getattr(module, "Popen", None)
    if p is not None and hasattr(p, "_execute_child"):
        p._execute_child = _flushing(p._execute_child)


# What has been read from the channel: the main loop reads it between cells,
# a cell's stdin reads (any thread) while the cell runs, each holding _rlock.
_rbuf = bytearray()
_rscan = 0  # bytes at the start of _rbuf known to hold no newline
_held = []  # messages a stdin read took that are for the main loop
_rlock = _thread.allocate_lock()


def _pop():
    """Returns the next message in _rbuf, or None if no line is complete."""
    global _rscan
    while True:
        nl = _rbuf.find(b"\n", _rscan)
        if nl < 0:
            _rscan = len(_rbuf)
            return None
        line = bytes(_rbuf[:nl])
        del _rbuf[: nl + 1]
        _rscan = 0
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            return msg


def _messages():
    global _rbuf
    while True:
        if _held:
            yield _held.pop(0)
            continue
        with _rlock:
            # A stdin read of a left-over thread may have moved the next
            # message to _held while this waited for the lock.
            msg = _held.pop(0) if _held else _pop()
            while msg is None:
                try:
                    chunk = _os_read(_CH, 1 << 20)
                except KeyboardInterrupt:  # a handler the user installed
                    continue
                if not chunk:
                    return
                _rbuf += chunk
                msg = _pop()
        yield msg


# ---- stdin ----


def _no_stdin(*args, **kwargs):
    raise EOFError(_NO_STDIN)


class _NoStdinBuffer(io.RawIOBase):
    readinto = _no_stdin

    def readable(self):
        return True


class _NoStdin(io.TextIOBase):
    """sys.stdin of a cell sent without stdin: every read fails at once."""

    read = readline = readlines = _no_stdin
    encoding = "utf-8"
    name = "<stdin>"

    def readable(self):
        return True

    def isatty(self):
        return False

    @property
    def buffer(self):
        return _NoStdinBuffer()


def _stdin(text):
    raw = _FixedStdin(text.encode("utf-8", "surrogatepass"))
    return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="surrogatepass")


# Open stdin (Execute.stdin_open): a read with nothing buffered flushes
# stdout and stderr (the prompt), sends stdin_request and waits for the
# agent's answer. Only the running cell's stdin asks; a thread left over
# from an earlier cell, or a fork, reads end of file. The main thread's
# wait is interruptible: SIGINT raises KeyboardInterrupt in it, outside the
# read from the channel, so no message is cut. Another thread waits in
# steps, so that it lets go of the channel when its cell ends.

_stdin_cell = None  # a token of the running cell if its stdin is open
_password = False  # the read is getpass's


def _ask_stdin(n):
    """Returns (data, eof, error): the agent's answer for cell n's stdin."""
    global _rbuf, _critical, _pending
    if os.getpid() != _PID or _stdin_cell is not n:
        return b"", True, None
    import binascii
    import select

    _flush_std()
    main = _thread.get_ident() == _MAIN_THREAD
    while not _rlock.acquire(True, -1 if main else 0.1):
        if _stdin_cell is not n:
            return b"", True, None
    try:
        if _stdin_cell is not n:
            return b"", True, None
        req = {"type": "stdin_request", "cell": _cell}
        if _password:
            req["password"] = True
        _send(req)
        while True:
            msg = _pop()
            if msg is not None:
                if msg.get("type") != "stdin":
                    _held.append(msg)
                    continue
                data = msg.get("data")
                data = binascii.a2b_base64(data) if isinstance(data, str) and data else b""
                err = msg.get("error")
                return data, bool(msg.get("eof")) or bool(err), err if isinstance(err, str) and err else None
            if main:
                select.select([_CH], [], [])
            elif not select.select([_CH], [], [], 0.1)[0]:
                if _stdin_cell is not n:
                    return b"", True, None
                continue
            if main:
                _critical = True
            try:
                chunk = _os_read(_CH, 1 << 20)
                _rbuf += chunk
            finally:
                if main:
                    _critical = False
            if not chunk:
                os._exit(1)  # the agent is gone
            if main and _pending:
                _pending = False
                if _armed:
                    raise KeyboardInterrupt
    finally:
        _rlock.release()


class _OpenStdin(io.RawIOBase):
    """The raw sys.stdin.buffer of a cell with open stdin."""

    name = "<stdin>"

    def __init__(self, n):
        self._n = n
        self._buf = b""
        self._eof = False
        self._err = None

    def readable(self):
        return True

    def fileno(self):
        return 0  # os.read(0) reads this stream (see _read_fd)

    def readinto(self, b):
        if not self._buf and not self._eof:
            self._buf, self._eof, self._err = _ask_stdin(self._n)
        if self._buf:
            k = min(len(b), len(self._buf))
            b[:k] = self._buf[:k]
            self._buf = self._buf[k:]
            return k
        if self._err:
            err, self._err = self._err, None
            raise OSError(err)
        return 0


def _open_stdin(n):
    return io.TextIOWrapper(io.BufferedReader(_OpenStdin(n)), encoding="utf-8", errors="surrogateescape")


class _FixedStdin(io.RawIOBase):
    """The raw sys.stdin.buffer of a cell sent with its stdin."""

    name = "<stdin>"

    def __init__(self, data):
        self._data = memoryview(data)

    def readable(self):
        return True

    def fileno(self):
        return 0

    def readinto(self, b):
        k = min(len(b), len(self._data))
        b[:k] = self._data[:k]
        self._data = self._data[k:]
        return k


# Raw reads of fd 0 (os.read(0, n), as in os.read(sys.stdin.fileno(), n))
# read the running cell's stdin, from the same buffer as sys.stdin, so that
# they see the cell's input (fixed or open) and its end of file rather than
# the kernel's own empty fd 0. A cell without stdin, a fork, and any other
# fd read the real descriptor. Code that reads fd 0 without os.read (a
# child process, C code, open(0)) sees the kernel's fd 0: end of file.
_os_read = os.read
_cell_in = None  # the running cell's stdin, or None


def _read_fd(fd, n):
    s = _cell_in
    if fd == 0 and s is not None and os.getpid() == _PID:
        if n < 0:
            raise ValueError("negative buffersize in read")
        return s.buffer.read1(n) if n else b""
    return _os_read(fd, n)


_read_fd.__name__ = _read_fd.__qualname__ = "read"
_read_fd.__doc__ = _os_read.__doc__


# ---- rich display ----

_RICH = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
)


def _method(obj, name):
    if isinstance(obj, type):
        return None  # a class: its _repr_*_ are unbound functions
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None  # it answers every attribute (a mock, a proxy)
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def _call(obj, name, m, **kwargs):
    try:
        return m(**kwargs)
    except Exception as e:
        _log("%s.%s raised %s: %s; ignored" % (type(obj).__name__, name, type(e).__name__, e))
        return None


def _jsonable(v):
    try:
        json.dumps(v, allow_nan=False)
        return True
    except Exception:
        return False


def _clean(data, md):
    """Makes a MIME bundle JSON: text as str, binary as base64, JSON as JSON."""
    out = {}
    for mime, v in data.items():
        if not isinstance(mime, str) or v is None:
            continue
        if mime == "application/json" or mime.endswith("+json"):
            if isinstance(v, (str, bytes)):
                try:
                    v = json.loads(v)
                except ValueError:
                    continue
            if not _jsonable(v):
                _log("%s data is not JSON; ignored" % mime)
                continue
        elif mime.startswith("text/") or mime.endswith("+xml") or "javascript" in mime:
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif not isinstance(v, str):
                v = str(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            import binascii

            v = binascii.b2a_base64(bytes(v), newline=False).decode("ascii")
        elif isinstance(v, str):
            v = v.strip()  # already base64, as IPython allows
        elif not _jsonable(v):
            continue
        out[mime] = v
    if "text/plain" not in out:
        out["text/plain"] = "<%s>" % ", ".join(sorted(out)) if out else ""
    meta = {}
    for k, v in (md or {}).items():
        if isinstance(k, str) and _jsonable(v):
            meta[k] = v
    return out, meta


def _figure_png(fig):
    b = io.BytesIO()
    fig.savefig(b, format="png", bbox_inches="tight")
    return b.getvalue()


def _bundle(obj, include=None, exclude=None):
    """Returns the MIME bundle and metadata of obj, as IPython's formatter."""
    data, md = {}, {}
    m = _method(obj, "_repr_mimebundle_")
    if m is not None:
        r = _call(obj, "_repr_mimebundle_", m, include=include, exclude=exclude)
        if isinstance(r, tuple) and len(r) == 2:
            r, rmd = r
            if isinstance(rmd, dict):
                md.update(rmd)
        if isinstance(r, dict):
            data.update(r)
    mf = sys.modules.get("matplotlib.figure")
    if mf is not None and isinstance(obj, mf.Figure) and "image/png" not in data:
        try:
            data["image/png"] = _figure_png(obj)
            _shown.add(id(obj))
        except Exception as e:
            _log("rendering a figure failed: %s: %s" % (type(e).__name__, e))
    for mime, name in _RICH:
        if mime in data or (include and mime not in include) or (exclude and mime in exclude):
            continue
        m = _method(obj, name)
        if m is None:
            continue
        r = _call(obj, name, m)
        if isinstance(r, tuple) and len(r) == 2:
            r, rmd = r
            if rmd:
                md[mime] = rmd
        if r is not None:
            data[mime] = r
    if include:
        data = {k: v for k, v in data.items() if k in include or k == "text/plain"}
    if exclude:
        data = {k: v for k, v in data.items() if k not in exclude or k == "text/plain"}
    if not isinstance(data.get("text/plain"), str):
        data["text/plain"] = repr(obj)
    return _clean(data, md)


def _send_display(kind, data, md):
    cell = _cell
    if cell is None:
        return  # not inside a cell (a thread left over from one)
    msg = {"type": kind, "cell": cell, "data": data}
    if md:
        msg["metadata"] = md
    _send(msg, hold=kind == "execute_result")


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None, raw=False, clear=False, **kwargs):
    """Display each object as rich output (its _repr_*_ forms, as Jupyter).

    With raw=True the objects are MIME bundles: dicts of MIME type to data.
    """
    for obj in objs:
        if raw:
            if not isinstance(obj, dict):
                raise TypeError("display(raw=True) takes dicts of MIME type to data")
            data, md = _clean(obj, None)
        else:
            data, md = _bundle(obj, include, exclude)
        if isinstance(metadata, dict):
            md.update(metadata)
        _send_display("display", data, md)


display.__module__ = "builtins"


# ---- matplotlib ----


def _flush_figures():
    """Displays every open pyplot figure as PNG, then closes them all."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        from matplotlib._pylab_helpers import Gcf

        managers = sorted(Gcf.get_all_fig_managers(), key=lambda m: m.num)
        try:
            for m in managers:
                fig = m.canvas.figure
                if id(fig) in _shown:
                    continue
                _shown.add(id(fig))
                try:
                    png = _figure_png(fig)
                except Exception as e:
                    _log("rendering figure %s failed: %s: %s" % (m.num, type(e).__name__, e))
                    continue
                data, _ = _clean({"image/png": png, "text/plain": repr(fig)}, None)
                _send_display("display", data, None)
        finally:
            plt.close("all")
    except ImportError:
        pass


def _show(*args, **kwargs):
    """Displays the open figures now and closes them (kiln's plt.show)."""
    _flush_figures()


def _getpass(prompt="Password: ", stream=None):
    """getpass.getpass in a cell: the prompt on stderr (or stream), then a
    line of stdin, and the agent told that it is a secret. (The real one
    would warn that it cannot turn echo off: stdin is not a terminal.)"""
    global _password
    s = stream or sys.stderr
    s.write(prompt)
    s.flush()
    _password = True
    try:
        line = sys.stdin.readline()
    finally:
        _password = False
    if not line:
        raise EOFError
    return line[:-1] if line.endswith("\n") else line


def _patch_getpass(module):
    module.getpass = _getpass


def _patch_pyplot(module):
    module.show = _show


class _ImportHook:
    """Patches modules when they are first imported, without importing them
    before the user does: pyplot.show, getpass.getpass."""

    _patches = {"matplotlib.pyplot": _patch_pyplot, "getpass": _patch_getpass, "subprocess": _patch_subprocess}

    def find_spec(self, name, path=None, target=None):
        patch = self._patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        orig = loader.exec_module

        def exec_module(module):
            orig(module)
            patch(module)

        loader.exec_module = exec_module
        return spec


# ---- errors ----


def _kernel_code():
    global _kcode
    if _kcode is None:
        seen, todo = set(), [_MODCODE]
        while todo:
            c = todo.pop()
            seen.add(c)
            todo.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
        _kcode = seen
    return _kcode


def _strip_tb(tb):
    kcode = _kernel_code()
    aio = sys.modules.get("asyncio")
    aio = os.path.dirname(aio.__file__) if aio is not None and getattr(aio, "__file__", None) else None
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    i = 0
    while i < len(frames):
        code = frames[i].tb_frame.f_code
        if code not in kcode and not (aio and code.co_filename.startswith(aio)):
            break
        i += 1
    new = None
    for t in reversed(frames[i:]):
        if t.tb_frame.f_code not in kcode:
            new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def _strip_all(e, seen):
    if e is None or id(e) in seen:
        return
    seen.add(id(e))
    try:
        e.__traceback__ = _strip_tb(e.__traceback__)
    except Exception:
        pass
    _strip_all(e.__cause__, seen)
    _strip_all(e.__context__, seen)
    for x in getattr(e, "exceptions", None) or ():
        if isinstance(x, BaseException):
            _strip_all(x, seen)


def _error(cell, e, fn):
    """Sends the Error of exception e raised by the code of cell fn."""
    import traceback

    try:
        _strip_all(e, set())
        tb = "".join(traceback.format_exception(e)).rstrip("\n").split("\n")
    except Exception:
        tb = ["%s: (its traceback could not be formatted)" % type(e).__name__]
    line = 0
    t = e.__traceback__
    while t is not None:
        if t.tb_frame.f_code.co_filename == fn:
            line = t.tb_lineno
        t = t.tb_next
    try:
        message = str(e)
    except Exception:
        message = "<exception str() failed>"
    msg = {"type": "error", "cell": cell, "name": type(e).__name__, "message": message, "traceback": tb}
    if line:
        msg["line"] = line
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, e.__traceback__
    _send(msg)


def _compile_error(cell, e, fn):
    import traceback

    msg = {"type": "error", "cell": cell, "name": type(e).__name__}
    if isinstance(e, SyntaxError):
        where = "line %s, column %s" % (e.lineno, e.offset) if e.offset else "line %s" % e.lineno
        msg["message"] = "%s (%s)" % (e.msg, where)
        msg["traceback"] = "".join(traceback.format_exception_only(e)).rstrip("\n").split("\n")
        if e.filename == fn and e.lineno:
            msg["line"] = e.lineno
    else:
        msg["message"] = str(e)
        msg["traceback"] = ["%s: %s" % (type(e).__name__, e)]
    _send(msg)


# ---- execution ----

_user = types.ModuleType("__main__")
_user.__dict__["__builtins__"] = builtins
_ns = _user.__dict__


def _compile(code, fn):
    """Compiles a cell into its statements and, when the cell ends with an
    expression statement not followed by ';', that expression."""
    global _flags
    # _ast (built in) has the node classes; ast.py on top of it would cost
    # every session's first cell its import (enum, contextlib) and memory.
    import _ast as ast

    tree = compile(code, fn, "exec", _ONLY_AST | _TLA | _flags, True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        node = tree.body[-1]
        try:
            line = code.split("\n")[node.end_lineno - 1].encode("utf-8", "surrogatepass")
            rest = line[node.end_col_offset :].decode("utf-8", "replace")
        except IndexError:
            rest = ""
        if not rest.lstrip().startswith(";"):
            last = tree.body.pop()
    mod = compile(tree, fn, "exec", _TLA | _flags, True)
    _flags |= mod.co_flags & _future_mask()
    expr = None
    if last is not None:
        expr = compile(ast.Expression(last.value), fn, "eval", _TLA | _flags, True)
    return mod, expr


_fmask = None


def _future_mask():
    global _fmask
    if _fmask is None:
        import __future__

        _fmask = 0
        for n in __future__.all_feature_names:
            _fmask |= getattr(__future__, n).compiler_flag
    return _fmask


async def _cell_coro(mod, expr):
    """Runs a cell that awaits, its last expression too, as one task."""
    r = eval(mod, _ns)
    if mod.co_flags & _CO_COROUTINE:
        await r
    if expr is None:
        return None
    r = eval(expr, _ns)
    if expr.co_flags & _CO_COROUTINE:
        r = await r
    return r


def _await(coro):
    """Runs a top-level-await cell on the kernel's one event loop."""
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)
    task = _loop.create_task(coro)
    try:
        return _loop.run_until_complete(task)
    except KeyboardInterrupt:
        if task.done():
            raise
        # interrupted while the cell waited: cancel it, and report the
        # interrupt where the cell was waiting rather than in the loop
        task.cancel()
        try:
            _loop.run_until_complete(asyncio.wait([task], timeout=0.25))
        except BaseException:
            pass
        tb = None
        if task.cancelled():
            try:
                task.result()
            except asyncio.CancelledError as e:
                tb = e.__traceback__
        if tb is None:
            raise
        raise KeyboardInterrupt().with_traceback(tb) from None
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: no "never retrieved" warning


def _result(value):
    _ns["___"] = _ns.get("__")
    _ns["__"] = _ns.get("_")
    _ns["_"] = value
    data, md = _bundle(value)
    _send_display("execute_result", data, md)


def _flush_std():
    for f in (sys.stdout, sys.stderr, _stdout, _stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except Exception:
            pass


# Packages installed into the session (POST /v1/sessions/{id}/packages)
# go into a venv on the sandbox's private /tmp (service/packages.go). Its
# site-packages joins sys.path ahead of the system's, as in the venv
# itself, when it appears or changes, so a cell sees them without a
# restart; its bin/ goes on PATH for subprocesses.
_PKG_VENV = os.path.join(os.environ.get("TMPDIR") or "/tmp", ".kiln", "packages", "python")
_PKG_SITE = os.path.join(_PKG_VENV, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
_pkg_mtime = None


def _see_packages():
    global _pkg_mtime
    try:
        m = os.stat(_PKG_SITE).st_mtime_ns
    except OSError:
        return
    if m == _pkg_mtime:
        return
    _pkg_mtime = m
    if _PKG_SITE not in sys.path:
        at = len(sys.path)
        for i, p in enumerate(sys.path):
            if p.endswith(("site-packages", "dist-packages")):
                at = i
                break
        sys.path.insert(at, _PKG_SITE)
        os.environ["PATH"] = os.path.join(_PKG_VENV, "bin") + os.pathsep + os.environ.get("PATH", "")
    import importlib
    import site

    site.addsitedir(_PKG_SITE)  # its .pth files
    importlib.invalidate_caches()
    _set_pythonpath()


# A session's prebuilt environment (service/environments.go): the
# service links $TMPDIR/.kiln-environment to a read-only layer. Its
# site-packages joins sys.path ahead of the system's and behind the
# session's own venv (which _see_packages puts ahead of the first
# site-packages, the layer's), and PYTHONPATH, for subprocesses, behind
# the venv's site-packages there too.
_ENV_SITE = os.path.join(os.environ.get("TMPDIR") or "/tmp", ".kiln-environment", "python", "site-packages")
_env_seen = False
_BASE_PYTHONPATH = os.environ.get("PYTHONPATH")


def _set_pythonpath():
    if not _env_seen:
        return
    first = [_PKG_SITE] if _pkg_mtime is not None else []
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in first + [_ENV_SITE, _BASE_PYTHONPATH] if p)


def _see_environment():
    global _env_seen
    if _env_seen or not os.path.isdir(_ENV_SITE):
        return
    _env_seen = True
    at = len(sys.path)
    for i, p in enumerate(sys.path):
        if p != _PKG_SITE and p.endswith(("site-packages", "dist-packages")):
            at = i
            break
    sys.path.insert(at, _ENV_SITE)
    _set_pythonpath()
    import importlib

    importlib.invalidate_caches()


def _exit_code(e):
    """The status of SystemExit e, as Python gives it for a script."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _execute(msg):
    global _armed, _pending, _cell, _open, _count, _shown, _stdin_cell, _cell_in
    _see_environment()
    _see_packages()
    cell = msg.get("cell")
    code = msg.get("code")
    if not isinstance(code, str):
        code = ""
    code = code.replace("\r\n", "\n")
    if msg.get("warmup"):
        fn = "<warm-up>"  # takes no number: the user's first cell is <cell 1>
    else:
        _count += 1
        fn = "<cell %d>" % _count
    import linecache

    if not msg.get("warmup"):  # leaves no trace a pooled run's code could see
        linecache.cache[fn] = (len(code), None, [l + "\n" for l in code.split("\n")], fn)
    _open = _cell = cell
    _shown = set()
    status = "ok"
    stdin = msg.get("stdin")
    _stdin_cell = None
    if msg.get("stdin_open"):
        _stdin_cell = object()  # this cell's own: a later cell's differs
        sys.stdin = _cell_in = _open_stdin(_stdin_cell)
    elif msg.get("has_stdin"):
        sys.stdin = _cell_in = _stdin(stdin if isinstance(stdin, str) else "")
    else:
        sys.stdin = _NoStdin()
    argv = msg.get("argv")
    script = isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
    if script:
        sys.argv = list(argv)  # a one-shot run's script and its arguments
    exit_code = None
    try:
        _armed = True
        try:
            mod, expr = _compile(code, fn)
        except KeyboardInterrupt:
            raise
        except Exception as e:
            status = "error"
            _compile_error(cell, e, fn)
        else:
            try:
                if (mod.co_flags | (expr.co_flags if expr else 0)) & _CO_COROUTINE:
                    r = _await(_cell_coro(mod, expr))
                else:
                    r = eval(mod, _ns)
                    r = None if expr is None else eval(expr, _ns)
                if r is not None:
                    _result(r)
            except BaseException as e:
                if script and isinstance(e, SystemExit):
                    # In a one-shot run sys.exit() ends the code as it ends
                    # a script: its status, and its message (when not a
                    # number) on stderr, without a traceback. In a session
                    # it is an error like any other.
                    exit_code = _exit_code(e)
                    status = "ok" if exit_code == 0 else "error"
                else:
                    status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
                    if os.getpid() == _PID:
                        _error(cell, e, fn)
        _flush_figures()
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        _armed = False
        _pending = False
        if os.getpid() != _PID:  # a fork returned from the cell: end it
            _flush_std()
            os._exit(0)
        _flush_std()  # on the channel, while the cell is still the running one
        _cell = None
        _stdin_cell = None
        _cell_in = None
        sys.stdin = _NoStdin()
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            try:
                plt.close("all")
            except Exception:
                pass
        if _signal.getsignal(_signal.SIGINT) is not _on_sigint:
            _signal.signal(_signal.SIGINT, _on_sigint)
        _flush_std()
        done = {"type": "done", "cell": cell, "status": status}
        if exit_code is not None:
            done["exit_code"] = exit_code
        _send(done)
        _open = None


# ---- completion and syntax check ----


def _complete(msg):
    global _armed
    code = msg.get("code")
    code = code if isinstance(code, str) else ""
    cur = msg.get("cursor")
    cur = cur if isinstance(cur, int) and not isinstance(cur, bool) else len(code)
    cur = max(0, min(cur, len(code)))
    matches, start = [], cur
    try:
        import re

        token = re.search(r"[\w.]*$", code[:cur]).group()
        if not token[:1].isdigit():
            base, dot, attr = token.rpartition(".")
            start = cur - len(attr)
            names = ()
            _armed = True
            try:
                if dot:
                    names = _attr_names(base)
                else:
                    import keyword

                    names = list(_ns) + dir(builtins) + keyword.kwlist + keyword.softkwlist
            finally:
                _armed = False
            private = attr.startswith("_")
            matches = sorted(
                {
                    n
                    for n in names
                    if isinstance(n, str) and n.startswith(attr) and (private or not n.startswith("_"))
                }
            )
    except (Exception, KeyboardInterrupt):
        matches, start = [], cur
    _send({"type": "completion", "cell": msg.get("cell", ""), "matches": matches, "cursor_start": start, "cursor_end": cur})


def _attr_names(base):
    parts = base.split(".")
    if not all(p.isidentifier() for p in parts):
        return ()
    missing = object()
    obj = _ns.get(parts[0], missing)
    if obj is missing:
        obj = getattr(builtins, parts[0], missing)
    rest = parts[1:]
    if obj is missing:
        # not defined yet (e.g. "import os; os.pa" before it runs): a module
        # the process has already imported still answers
        for i in range(len(parts), 0, -1):
            obj = sys.modules.get(".".join(parts[:i]), missing)
            if obj is not missing:
                rest = parts[i:]
                break
        else:
            return ()
    for p in rest:
        obj = getattr(obj, p)
    return dir(obj)


def _check(msg):
    code = msg.get("code")
    code = code if isinstance(code, str) else ""
    res = {"type": "check_result", "cell": msg.get("cell", "")}
    try:
        import ast
        import codeop
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc = codeop.CommandCompiler()
            cc.compiler.flags |= _TLA | _flags
            ok = cc(code, "<cell>", "exec")
            status = "incomplete" if ok is None else "complete"
            if ok is not None:
                # as at the Python prompt, a compound statement at the end
                # (def, if, for...) goes on until a blank line
                tree = compile(code, "<cell>", "exec", _ONLY_AST | _TLA | _flags, True)
                if tree.body and any(hasattr(tree.body[-1], a) for a in ("body", "cases")):
                    lines = code.split("\n")
                    if code.endswith("\n"):
                        lines.pop()
                    if lines and lines[-1].strip():
                        status = "incomplete"
        res["status"] = status
    except SyntaxError as e:
        res.update(status="invalid", line=e.lineno or 1, column=e.offset or 1, message=str(e.msg))
    except Exception as e:
        res.update(status="invalid", line=1, column=1, message="%s: %s" % (type(e).__name__, e))
    _send(res)


# ---- main ----


def _main():
    global _open, json
    _signal.signal(_signal.SIGINT, _on_sigint)
    try:
        os.set_inheritable(_CH, False)
    except OSError:
        pass
    global _markfds
    try:
        import fcntl  # the copies high, away from the fds user code opens

        _markfds = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (1, 2))
    except (ImportError, OSError):
        _markfds = ()
    order = ',"order":"%s"' % _NONCE.hex() if _markfds else ""
    ready = '{"type":"ready","language":"python","version":"%s"%s}\n' % (sys.version.split()[0], order)
    try:
        os.write(_CH, ready.encode("ascii"))
    except OSError:
        os._exit(1)
    import json
    builtins.display = display
    sys.modules["__main__"] = _user
    sys.argv = [""]
    sys.stdin = _NoStdin()
    if _markfds:
        _install_std()
    os.read = _read_fd
    sys.meta_path.insert(0, _ImportHook())
    handlers = {"execute": _execute, "complete": _complete, "check": _check}
    for msg in _messages():
        h = handlers.get(msg.get("type"))
        if h is None:
            continue
        try:
            h(msg)
        except BaseException as e:
            if not isinstance(e, KeyboardInterrupt):
                _log("internal error: %s: %s" % (type(e).__name__, e))
            if _open is not None:
                cell, _open = _open, None
                _send({"type": "done", "cell": cell, "status": "interrupted" if isinstance(e, KeyboardInterrupt) else "error"})
    _flush_std()
    os._exit(0)


_main()
