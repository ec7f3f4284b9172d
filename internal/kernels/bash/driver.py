"""kiln bash kernel: the driver.

It speaks kernelproto (newline-delimited JSON) on fd 3 and runs each cell in
one long-lived interactive bash, its child, so that the working directory,
variables (exported or not), functions, aliases and options persist between
cells. The shell side, init.bash (sys.argv[1]), says how the shell is driven
and why it is interactive.

Cell output is never relayed: the shell writes to the kernel's fds 1 and 2.
A cell's stdin is Execute.stdin, kept in a private temporary file, or
/dev/null (reads see end of file at once), or, when it is open
(stdin_open), a FIFO in the private directory that the driver fills with
the agent's answers. A pipe does not say when its reader waits, so the
driver asks (stdin_request) as soon as the cell starts and again each time
it has written the last answer into the FIFO; bash's `read` and programs
then read as from any pipe. End of file closes the FIFO. The requests say
"ahead": the agent does not tell the client that input is wanted for
them. init.bash's `read` does: it sends the driver SIGUSR1 (SIGUSR2 for
read -s) when it is about to read the FIFO, and the driver, if the FIFO is
empty, sends stdin_wait. It also prints read -p's prompt on stderr, which
bash shows only on a terminal.

Before a cell runs, a helper bash parses it without running anything; a
syntax error is reported (Error "SyntaxError" with the line, Done exit_code
2) and nothing runs. Done's exit_code is the status of the cell's last
command, or of `exit N`, or of the command that failed under set -e; when it
is not 0 the status is "error" and an Error "ExitStatus" says "exit status
N" (with the line where exit or set -e stopped the cell). $? is 0 when a cell
starts.

If the shell itself ends (see init.bash for when), a new one starts, with the
old one's variables, functions, aliases, options and working directory when
the old one could save them, and the cell gets an Error "ShellExited" that
says which (or a note on stderr if the status was 0).

An interrupt (SIGINT to the process group) stops the cell's commands and
abandons the rest of the cell, in loops and functions too; the shell and its
state stay. Done says "interrupted", exit_code 130. If the cell does not
stop (a command that was just starting, a program that catches SIGINT), the
interrupt is repeated (RESEND). Background jobs ignore SIGINT, as in a
script. An interrupt between cells is ignored.
"""

import binascii
import fcntl
import json
import os
import re
import select
import shlex
import signal
import socket
import struct
import subprocess
import sys
import termios
import time

BASH = "/usr/bin/bash"
CODE_FD, STATUS_FD, ERR_FD = 20, 21, 22
SEP = b"\0"
# An interrupt can miss a command that is just starting (bash forked it, it
# has not yet exec'd, the signal goes to bash's handler in the child), and a
# program that catches SIGINT may go on: if the cell has not stopped, the
# interrupt is sent again this many seconds after the first.
RESEND = (0.25, 1.0, 3.0)
MAX_MATCHES = 1000

# The cell's command line: read the cell (stderr off so that xtrace shows
# nothing of ours), run it at the top level with our fds closed and stderr
# the kernel's (fd 22), report. The shell's own stderr is /dev/null: after
# an interrupt, and so after our own stops (exit, set -e), bash prints an
# empty line there, which is not the cell's output.
CELL_LINE = (
    b"{ \\__kiln_begin || builtin :; } 2>/dev/null; "
    b'builtin eval -- "$__kiln_pre$__kiln_code" <"$__kiln_in" 2>&22 20<&- 21>&- 22>&-; '
    b"{ \\__kiln_after || builtin :; } 2>/dev/null\n"
)
RESTORE_LINE = (
    b'builtin source -- "$__kiln_state" >/dev/null 2>&1 || builtin :; '
    b"builtin printf 'restored\\0' >&21\n"
)
COMPLETE_LINE = b"{ \\__kiln_complete || builtin :; } 2>/dev/null\n"


class ShellExited(Exception):
    pass


class Shell:
    """One interactive bash and the three pipes to it."""

    def __init__(self, init, state):
        code_r, self.code_w = os.pipe()
        self.status_r, status_w = os.pipe()
        err = os.dup(2)
        env = dict(os.environ, PS1="", PS2="", __KILN_STATE=state or "")
        # An interactive bash keeps a copy of its first stderr as "the
        # terminal" (fd 255) and resets the terminal's modes whenever a job
        # dies of a signal, complaining on stderr when that fails. A pty
        # master, never anyone's controlling terminal, takes those resets
        # and the start-up complaints (no terminal, no job control); the
        # shell's first command keeps the real stderr as fd 22, for cells,
        # and makes its own /dev/null.
        tty = open_pty_master()
        self.proc = subprocess.Popen(
            [BASH, "--norc", "--noprofile", "--noediting", "-i"],
            stdin=subprocess.PIPE,
            stderr=tty if tty is not None else subprocess.DEVNULL,
            pass_fds=(code_r, status_w, err),
            env=env,
        )
        for fd in (code_r, status_w, err):
            os.close(fd)
        self.tty = tty
        self.cmd = self.proc.stdin.fileno()
        self.buf = b""
        first = (
            "\\exec %d>&%d 2>/dev/null %d>&- %d<&%d %d<&- %d>&%d %d>&-; "
            "IFS= builtin read -r -d '' __kiln_code <&%d; "
            'builtin eval -- "$__kiln_code"; '
            "builtin printf 'ready %%s\\0' \"$BASH_VERSION\" >&%d\n"
            % (ERR_FD, err, err, CODE_FD, code_r, code_r, STATUS_FD, status_w, status_w, CODE_FD, STATUS_FD)
        )
        try:
            self.send(first.encode(), init)
            rec = self.record()
            if not rec.startswith("ready "):
                raise ShellExited("unexpected first record %r" % rec)
        except ShellExited:
            self.close()
            raise
        self.version = rec[len("ready "):]

    def restore(self):
        """Loads the state a previous shell saved when it exited."""
        self.send(RESTORE_LINE)
        return self.record() == "restored"

    def send(self, line, *args):
        """Writes a command line, then its NUL-terminated arguments."""
        try:
            write_all(self.cmd, line)
            data = b"".join(a.replace("\0", "").encode("utf-8", "replace") + SEP for a in args)
            write_all(self.code_w, data)
        except OSError as e:
            raise ShellExited(str(e))

    def record(self, deadline=None, wake=None, io=None):
        """Reads the next NUL-terminated record from the shell; None if
        deadline (time.monotonic()) passes or wake (a signal's wake-up fd)
        becomes readable first. Meanwhile io, if given, is served: its
        fds() are the descriptors it waits for (read, write), and serve()
        is called with those that are ready."""
        while SEP not in self.buf:
            if deadline is not None or wake is not None or io is not None:
                timeout = None if deadline is None else max(0, deadline - time.monotonic())
                ior, iow, iot = io.fds() if io is not None else ([], [], None)
                if iot is not None:
                    timeout = iot if timeout is None else min(timeout, iot)
                r, w, _ = select.select([self.status_r] + ([wake] if wake is not None else []) + ior, iow, [], timeout)
                if wake in r:
                    drain(wake)
                    return None
                if io is not None:
                    io.serve([f for f in r if f in ior], w)
                if self.status_r not in r:
                    if deadline is not None and time.monotonic() >= deadline:
                        return None
                    continue
            data = os.read(self.status_r, 65536)
            if not data:
                raise ShellExited("end of records")
            self.buf += data
        rec, self.buf = self.buf.split(SEP, 1)
        return rec.decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        """Waits for the shell (it has exited or is about to) and frees its pipes."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        for fd in (self.code_w, self.status_r, self.tty):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class StdinFeed:
    """A cell's open stdin: a FIFO that the cell reads and the driver fills
    with the agent's answers. It asks for more only when it has written
    what it has, so that input waits in the agent, not here.

    The driver opens the FIFO for writing only once the shell has opened it
    for reading (the cell's redirection, which waits for a writer): until
    then a non-blocking open fails, and is tried again every CONNECT_EVERY
    seconds. Then closing the write end is end of file for the cell, never
    a FIFO with no writer that the shell would wait on."""

    CONNECT_EVERY = 0.002

    def __init__(self, kernel, cell, tmpdir):
        if tmpdir is None:
            raise OSError("no private temporary directory")
        self.path = os.path.join(tmpdir, "stdin")
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.mkfifo(self.path, 0o600)
        self.fd = None
        self.connected = False
        self.k, self.cell = kernel, cell
        self.pending = b""
        self.eof = False
        self.asked = False
        self.progress()

    def fds(self):
        """Returns what record waits for: (read fds, write fds, timeout)."""
        r = [] if self.k.ch_closed else [self.k.ch]
        w = [self.fd] if self.pending and self.fd is not None else []
        return r, w, None if self.connected else self.CONNECT_EVERY

    def serve(self, r, w):
        if r:
            self.k.pump_channel()
        self.progress()

    def connect(self):
        if self.connected:
            return
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            self.connected = True
        except OSError:
            pass  # ENXIO: no reader yet

    def answer(self, msg):
        """Takes the agent's answer to the last request."""
        self.asked = False
        data = msg.get("data")
        if isinstance(data, str) and data:
            try:
                self.pending += binascii.a2b_base64(data)
            except (binascii.Error, ValueError):
                pass
        err = msg.get("error")
        if isinstance(err, str) and err:
            sys.stderr.write(err + "\n")
            sys.stderr.flush()
        if msg.get("eof") or err:
            self.eof = True
        self.progress()

    def progress(self):
        self.connect()
        while self.pending and self.fd is not None:
            try:
                n = os.write(self.fd, self.pending)
            except BlockingIOError:
                return
            except OSError:  # EPIPE: the cell closed its stdin
                self.eof = True
                self.close_fifo()
                return
            self.pending = self.pending[n:]
        if self.pending:
            return
        if self.eof:
            if self.connected:
                self.close_fifo()
        elif not self.asked and not self.k.ch_closed:
            self.asked = True
            self.k.send({"type": "stdin_request", "cell": self.cell, "ahead": True})

    def waiting(self, password):
        """The shell's read is about to wait on the FIFO: if it is empty
        and nothing waits to go into it, tell the agent."""
        if not self.connected or self.fd is None or self.pending or self.eof or self.k.ch_closed:
            return
        if pending_bytes(self.fd) > 0:
            return
        msg = {"type": "stdin_wait", "cell": self.cell}
        if password:
            msg["password"] = True
        self.k.send(msg)

    def close_fifo(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.pending = b""

    def close(self):
        self.close_fifo()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def open_pty_master():
    for path in ("/dev/ptmx", "/dev/pts/ptmx"):
        try:
            return os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            pass
    return None


def drain(fd):
    """Empties a non-blocking pipe; whether there was anything in it."""
    got = False
    try:
        while os.read(fd, 4096):
            got = True
    except BlockingIOError:
        pass
    return got


def pending_bytes(f):
    """Bytes waiting in a socket or pipe (either end)."""
    fd = f if isinstance(f, int) else f.fileno()
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# bash -n messages look like "bash: line 3: syntax error near unexpected token `fi'".
MSG_RE = re.compile(r"^(?:.*?: )?line (\d+): (.*)$")


# The parser: a long-lived non-interactive bash that, for each cell, forks a subshell
# which turns on noexec (set -n, which only a non-interactive shell honours)
# and evals the cell, so that bash parses it and runs nothing, not even
# after a stray "}" (the cell is eval's string, never spliced into syntax).
# extglob is on, so that patterns a session enabled it for parse.
CHECKER = r"""builtin trap '' INT
builtin shopt -s extglob
while IFS= builtin read -r -d '' c; do
	l=$LINENO; ( builtin eval "builtin set -n
$c" ) 2>&1
	builtin printf '\0%d %d\n' "$?" "$l"
done
"""
CHECK_END = re.compile(rb"\0(\d+) (\d+)\n$")


class Checker:
    """Parses cells without running them, in the helper (a fork per cell
    instead of a new bash: 0.5 ms instead of 3), or in `bash -n` if the
    helper fails."""

    def __init__(self):
        self.proc = None

    def check(self, code):
        """Returns (status, [(line, message)]): bash's verdict on code."""
        data = code.replace("\0", "").encode("utf-8", "replace") + SEP
        for _ in range(2):
            try:
                if self.proc is None or self.proc.poll() is not None:
                    self.proc = subprocess.Popen(
                        [BASH, "--norc", "--noprofile", "-c", CHECKER],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL, env=clean_env())
                write_all(self.proc.stdin.fileno(), data)
                out = b""
                while True:
                    m = CHECK_END.search(out)
                    if m:
                        break
                    chunk = os.read(self.proc.stdout.fileno(), 65536)
                    if not chunk:
                        raise OSError("the parser exited")
                    out += chunk
            except OSError:
                self.stop()
                continue
            base = int(m.group(2))
            return int(m.group(1)), parse_messages(out[:m.start()], lambda n: n - base)
        p = subprocess.run([BASH, "--norc", "--noprofile", "-n", "-O", "extglob"],
                           input=data[:-1], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=clean_env())
        return p.returncode, parse_messages(p.stderr, lambda n: n)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.proc = None


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("BASH_ENV", "ENV")}


def parse_messages(out, line_of):
    msgs = []
    for raw in out.decode("utf-8", "replace").splitlines():
        m = MSG_RE.match(raw)
        if m and "here-document" not in m.group(2):
            msgs.append((max(0, line_of(int(m.group(1)))), m.group(2)))
        elif raw.strip():
            msgs.append((0, raw.strip()))
    return msgs


def ends_incomplete(rc, msgs, code):
    """Whether bash stopped at the end of the input, wanting more."""
    if rc != 0:
        return any("unexpected end of file" in m or "unexpected EOF" in m for _, m in msgs)
    if any("delimited by end-of-file" in m for _, m in msgs):
        return True  # an open here-document
    tail = code[:-1] if code.endswith("\n") else code
    return (len(tail) - len(tail.rstrip("\\"))) % 2 == 1  # a line continuation


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return None


def status_message(code):
    """exit status 137 (128 + SIGKILL): a status above 128 is, by the shell's
    convention, a command killed by a signal."""
    msg = "exit status %d" % code
    if 128 < code < 128 + 65 and signal_name(code - 128):
        msg += " (128 + %s)" % signal_name(code - 128)
    return msg


# Words before which a word is a command name.
CMD_WORDS = {"then", "do", "else", "elif", "if", "while", "until", "time", "!", "{", "sudo", "exec", "command", "builtin", "xargs", "nohup", "env"}



def bash_word(a):
    """a as one bash word on one line ($'...' when it holds a line break)."""
    if "\n" not in a and "\r" not in a:
        return shlex.quote(a)
    return "$'" + a.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r") + "'"


class Kernel:
    def __init__(self, init):
        self.init = init
        self.ch = socket.socket(fileno=3)
        self.inbuf = b""
        self.held = []  # request lines read while a cell ran
        self.ch_closed = False
        self.feed = None  # the running cell's open stdin
        self.early = False
        self.shell = None
        self.checker = Checker()
        try:
            self.tmpdir = private_dir()
        except OSError:
            self.tmpdir = None  # no stdin for cells, no state kept on an exit
        self.state = os.path.join(self.tmpdir, "state") if self.tmpdir else None
        self.cell_active = False
        self.interrupted = False
        self.armed = False
        self.pending = False
        self.interrupt_at = 0.0
        # SIGINT wakes the wait for the shell's records (to time resends).
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, self.on_sigint)
        # init.bash's read says it is about to wait on open stdin.
        self.wants = 0  # the signal, or 0
        signal.signal(signal.SIGUSR1, self.on_want)
        signal.signal(signal.SIGUSR2, self.on_want)

    def on_sigint(self, signum, frame):
        # Python runs this some bytecodes after the signal; between cells,
        # readline and execute decide from the wake-up fd instead, which the
        # signal itself writes to.
        if not self.cell_active:
            return
        if not self.interrupted:
            self.interrupted = True
            self.interrupt_at = time.monotonic()
        if not self.armed:
            # The shell ignores SIGINT until the cell's code is read; pass the
            # interrupt on once it is armed.
            self.pending = True

    def on_want(self, signum, frame):
        self.wants = signum  # the wait for records acts on it

    def readline(self):
        """Returns the next request line, or None at the end.

        An interrupt between cells is ignored, unless a request has already
        arrived (the agent sent it for that cell): then that request starts
        interrupted. The agent sends the request before the signal, so a
        signal that comes first finds no bytes waiting."""
        if self.held:
            return self.held.pop(0)
        while b"\n" not in self.inbuf:
            if self.ch_closed:
                return None
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

    def pump_channel(self):
        """Reads what the agent sent while a cell runs: stdin answers go to
        the cell's feed, anything else waits for readline."""
        data = self.ch.recv(1 << 20)
        if not data:
            self.ch_closed = True
            return
        self.inbuf += data
        while b"\n" in self.inbuf:
            line, self.inbuf = self.inbuf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("type") == "stdin":
                if self.feed is not None:
                    self.feed.answer(msg)
            else:
                self.held.append(line)

    def send(self, msg):
        self.ch.sendall(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def start_shell(self):
        self.shell = None
        self.shell = Shell(self.init, self.state)

    def restart(self, rc, when=""):
        """Starts a new shell after the old one exited with wait status rc,
        with the old one's state if it saved it. Returns what to tell the user."""
        head = "the shell exited (%s)%s" % (describe_exit(rc), when)
        restored = False
        try:
            self.start_shell()
            if self.state is not None and os.path.getsize(self.state) > 0:
                restored = self.shell.restore()
        except FileNotFoundError:
            pass
        except (ShellExited, OSError) as e:
            if self.shell is None or not self.shell.alive():
                self.shell = None
                return "%s, and a new one could not start: %s" % (head, e)
        finally:
            if self.state is not None:
                try:
                    os.unlink(self.state)
                except OSError:
                    pass
        if restored:
            return ("%s; a new shell was started with the old one's variables, functions, "
                    "aliases, options and working directory (background jobs, open files, "
                    "traps and limits are gone)" % head)
        return ("%s; a new shell was started, and variables, functions, aliases, options "
                "and the working directory were reset" % head)

    def ensure_shell(self):
        if self.shell is not None and self.shell.alive():
            return
        if self.shell is None:
            self.start_shell()
            return
        note(self.restart(self.shell.close(), " between cells"))

    def run(self):
        self.start_shell()
        self.send({"type": "ready", "language": "bash", "version": self.shell.version})
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
            elif t == "complete":
                self.complete(msg)
            elif t == "check":
                self.check(msg)
            self.early = False

    def done(self, cell, status, code):
        # Once Done is out, an interrupt is for the next cell, if any.
        self.cell_active = False
        drain(self.wake_r)
        sys.stdout.flush()
        sys.stderr.flush()
        self.send({"type": "done", "cell": cell, "status": status, "exit_code": code})

    def error(self, cell, name, message, line=0, traceback=None):
        msg = {"type": "error", "cell": cell, "name": name, "message": message,
               "traceback": traceback if traceback is not None else [message]}
        if line:
            msg["line"] = line
        self.send(msg)

    def execute(self, msg):
        cell = msg.get("cell", "")
        code = msg.get("code", "")
        self.interrupted = self.pending = self.armed = False
        self.cell_active = True
        # A signal since the request was taken is for this cell.
        if drain(self.wake_r) or self.early:
            self.interrupted = True
            self.interrupt_at = time.monotonic()
        try:
            self.run_cell(cell, code, msg)
        finally:
            self.cell_active = False

    def run_cell(self, cell, code, msg):
        if self.interrupted:
            return self.done(cell, "interrupted", 130)
        if code.strip():
            rc, msgs = self.checker.check(code)
            if self.interrupted:
                return self.done(cell, "interrupted", 130)
            if rc != 0:
                line, text = next(((l, m) for l, m in msgs if l), msgs[0] if msgs else (0, "syntax error"))
                tb = ["line %d: %s" % (l, m) if l else m for l, m in msgs]
                self.error(cell, "SyntaxError", text, line, tb)
                return self.done(cell, "error", 2)
        try:
            self.ensure_shell()
        except (ShellExited, OSError) as e:
            self.error(cell, "ShellExited", "cannot start bash: %s" % e)
            return self.done(cell, "error", 1)
        stdin = "/dev/null"
        if msg.get("stdin_open"):
            try:
                self.feed = StdinFeed(self, cell, self.tmpdir)
            except OSError as e:
                self.error(cell, "OSError", "cannot make the cell's stdin pipe: %s" % e)
                return self.done(cell, "error", 1)
            stdin = self.feed.path
        elif msg.get("has_stdin"):
            try:
                stdin = self.stdin_file(msg.get("stdin", ""))
            except OSError as e:
                self.error(cell, "OSError", "cannot keep the cell's stdin in a temporary file: %s" % e)
                return self.done(cell, "error", 1)
        self.wants = 0  # a read of an earlier cell's is not this one's
        argv = msg.get("argv")
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            # A one-shot run's arguments are the cell's $@, set on the
            # code's first line so that its line numbers stay.
            code = "builtin set -- " + " ".join(bash_word(a) for a in argv[1:]) + "; " + code
        try:
            self.shell.send(CELL_LINE, code, stdin)
            resends = 0
            while True:
                deadline = None
                if self.interrupted and self.armed and resends < len(RESEND):
                    deadline = self.interrupt_at + RESEND[resends]
                rec = self.shell.record(deadline, self.wake_r, self.feed)
                if self.wants:
                    password, self.wants = self.wants == signal.SIGUSR2, 0
                    if self.feed is not None:
                        self.feed.waiting(password)
                if rec is None:
                    if deadline is not None and time.monotonic() >= deadline:
                        resends += 1
                        os.killpg(os.getpgrp(), signal.SIGINT)
                elif rec == "armed":
                    self.armed = True
                    if self.pending:
                        self.pending = False
                        self.interrupt_at = time.monotonic()
                        os.killpg(os.getpgrp(), signal.SIGINT)
                elif rec.startswith("done "):
                    parts = rec.split()
                    status, line = int(parts[1]), int(parts[2])
                    if not 0 < line <= code.count("\n") + 1:
                        line = 0
                    break
        except ShellExited:
            rc = self.shell.close()
            status = exit_status(rc)
            text = self.restart(rc)
            if self.interrupted:
                note(text)
                return self.done(cell, "interrupted", status)
            if status == 0:
                note(text)
                return self.done(cell, "ok", 0)
            self.error(cell, "ShellExited", text)
            return self.done(cell, "error", status)
        finally:
            if self.feed is not None:
                self.feed.close()
                self.feed = None
            elif stdin != "/dev/null":
                try:
                    os.unlink(stdin)
                except OSError:
                    pass
        if self.interrupted:
            return self.done(cell, "interrupted", status)
        if status != 0:
            self.error(cell, "ExitStatus", status_message(status), line)
            return self.done(cell, "error", status)
        return self.done(cell, "ok", 0)

    def stdin_file(self, data):
        if self.tmpdir is None:
            raise OSError("no private temporary directory")
        path = os.path.join(self.tmpdir, "stdin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, data.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return path

    def check(self, msg):
        code = msg.get("code", "")
        reply = {"type": "check_result", "cell": msg.get("cell", ""), "status": "complete"}
        if code.strip():
            rc, msgs = self.checker.check(code)
            if ends_incomplete(rc, msgs, code):
                reply["status"] = "incomplete"
            elif rc != 0:
                line, text = next(((l, m) for l, m in msgs if l), msgs[0] if msgs else (0, "syntax error"))
                reply.update(status="invalid", message=text)
                if line:
                    reply["line"] = line
        self.send(reply)

    def complete(self, msg):
        code = msg.get("code", "")
        cursor = max(0, min(int(msg.get("cursor", len(code))), len(code)))
        before = code[:cursor]
        mode, word, start = completion_context(before)
        matches = []
        try:
            self.ensure_shell()
            self.shell.send(COMPLETE_LINE, mode, word)
            rec = self.shell.record()
            while rec != "end":
                if rec != "m" and len(matches) < 10 * MAX_MATCHES:
                    matches.append(rec)
                rec = self.shell.record()
        except ShellExited:
            note(self.restart(self.shell.close(), " while completing"))
        matches = sorted(set(matches))[:MAX_MATCHES]
        self.send({"type": "completion", "cell": msg.get("cell", ""), "matches": matches,
                   "cursor_start": start, "cursor_end": cursor})


def completion_context(before):
    """Returns (mode, word, start) for the text before the cursor: what to
    complete (command, file or variable names), the word, and where the
    text the matches replace starts."""
    m = re.search(r"\$\{?([A-Za-z0-9_]*)$", before)
    if m:
        return "variable", m.group(1), m.start(1)
    m = re.search(r"[^\s;|&<>()`\"'=]*$", before)
    word, start = m.group(0), m.start()
    rest = before[:start].rstrip(" \t")
    prev = re.search(r"(\S*)$", rest).group(1)
    command = (rest == "" or rest[-1] in ";|&(`\n{" or rest.endswith("$(") or prev in CMD_WORDS)
    if command and "/" not in word:
        return "command", word, start
    return "file", word, start


def exit_status(rc):
    if rc is None:
        return 1
    return 128 - rc if rc < 0 else rc


def describe_exit(rc):
    if rc is not None and rc < 0:
        return "killed by %s" % (signal_name(-rc) or "signal %d" % -rc)
    return "status %s" % rc


def note(text):
    sys.stderr.write("kiln: %s\n" % text)
    sys.stderr.flush()


def private_dir():
    """Makes a directory only this user can enter, in $TMPDIR or /tmp.
    (tempfile would do, but its imports cost a tenth of the start-up.)"""
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(10):
        path = os.path.join(base, "kiln-bash-" + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
    raise OSError("cannot make a private directory in %s" % base)


def remove_dir(path):
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    os.rmdir(path)


def main():
    k = Kernel(sys.argv[1])
    try:
        k.run()
    finally:
        if k.tmpdir:
            try:
                remove_dir(k.tmpdir)
            except OSError:
                pass


if __name__ == "__main__":
    main()
