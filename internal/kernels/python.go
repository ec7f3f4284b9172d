package kernels

import _ "embed"

// pythonSource is the Python kernel (python/kernel.py). Spec.Argv carries it
// inline, as -c's program (which keeps it under Linux's 128 KiB limit on
// one argument, for tests that run it so); the agent gets it through
// Spec.Boot.
//
// What it does, beyond package kernelproto:
//   - User code runs in its own module, installed as __main__ (so pickle
//     finds classes defined in cells); display() is a builtin.
//   - A cell's last expression statement is its execute_result unless it is
//     None or followed by ';'; _, __ and ___ hold the last results.
//   - Rich output follows Jupyter's display protocol (_repr_html_,
//     _repr_png_, _repr_mimebundle_ ...); pyplot figures are sent as PNG at
//     plt.show() and at the end of the cell, then closed.
//   - Top-level await runs on one asyncio loop kept for the kernel's life.
//   - Without stdin, reading it raises EOFError("kiln: this cell has no
//     stdin; send stdin with the cell to use input()") at once. With open
//     stdin, sys.stdin (input(), readline, read, sys.stdin.buffer) asks
//     the agent when it has nothing buffered, after flushing stdout and
//     stderr so that input()'s prompt is out first; end of file is
//     EOFError in input(), as in Python. Only the running cell's stdin
//     asks: a thread left over from an earlier cell reads end of file.
//     os.read(0, n) reads the same stdin (fixed or open) as sys.stdin.
//     getpass.getpass prompts on stderr and reads a line of it; its
//     request says the input is a secret.
//   - Cells are "<cell N>" in tracebacks; a warm-up cell takes no number.
//   - An interrupted cell sends an Error named KeyboardInterrupt, whose
//     traceback shows where the cell stopped, then Done "interrupted".
//     SIGINT while idle is ignored.
//   - sys.exit() ends the cell with an Error named SystemExit, not the
//     kernel.
//   - Check answers as the Python prompt does: an open bracket or block is
//     "incomplete", and so is a cell ending in a compound statement (def,
//     for, if ...) until it ends with a blank line.
//
//go:embed python/kernel.py
var pythonSource string

// Python is the Python kernel (pythonSource) on python3.
func Python() Spec {
	return Spec{
		Language: "python",
		Argv:     []string{"/usr/bin/python3", "-u", "-c", pythonSource},
		Env:      []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "MPLBACKEND=Agg"},
	}
}
