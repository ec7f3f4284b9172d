package kernels

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// The kernels' open stdin (kernelproto's pull): the test plays the agent
// with kerneltest.Stdin and types only once the kernel has asked.

// whenAsked writes each input once the kernel has sent one more stdin
// request (and, if prompt is not "", once stdout shows it), then closes
// stdin if close is set. It runs beside the cell.
func whenAsked(k *localKernel, in *kerneltest.Stdin, prompt string, close bool, inputs ...string) {
	start := stdoutLen(k)
	go func() {
		for i, s := range inputs {
			if !waitFor(func() bool { return in.Asked() > i }) {
				return
			}
			if prompt != "" && !waitFor(func() bool { return strings.Count(stdoutSince(k, start), prompt) > i }) {
				return
			}
			in.Write(s)
		}
		if close {
			waitFor(func() bool { return in.Asked() > len(inputs) })
			in.Close()
		}
	}()
}

func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

func stdoutLen(k *localKernel) int {
	k.Mu.Lock()
	defer k.Mu.Unlock()
	return k.Stdout.Len()
}

func stdoutSince(k *localKernel, start int) string {
	k.Mu.Lock()
	defer k.Mu.Unlock()
	return k.Stdout.String()[start:]
}

func TestPythonOpenStdin(t *testing.T) {
	k := startPython(t)
	run := func(code string, in *kerneltest.Stdin) cellResult {
		t.Helper()
		return k.ExecInput(kernelproto.Execute{Code: code}, in, 20*time.Second)
	}

	// The prompt is on stdout before the kernel asks; the answer comes after.
	in := kerneltest.NewStdin()
	whenAsked(k, in, "name? ", false, "ada\n")
	r := run(`name = input("name? "); print("hi", name)`, in)
	if r.Status != kernelproto.StatusOK || r.Stdout != "name? hi ada\n" {
		t.Errorf("input(): status %q stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}

	// Two inputs, a readline, and a read to the end, in one cell.
	in = kerneltest.NewStdin()
	whenAsked(k, in, "", true, "one\n", "two\n", "three\n", "four\nfive")
	r = run("import sys\na = input('a? ')\nb = input('b? ')\nc = sys.stdin.readline()\nrest = sys.stdin.read()\nprint([a, b, c, rest])", in)
	if want := "a? b? ['one', 'two', 'three\\n', 'four\\nfive']\n"; r.Status != kernelproto.StatusOK || r.Stdout != want {
		t.Errorf("several reads: status %q stdout %q, want %q; error %+v", r.Status, r.Stdout, want, r.Error)
	}

	// End of file is Python's EOFError.
	in = kerneltest.NewStdin()
	in.Close()
	r = run("input('x? ')", in)
	if r.Status != kernelproto.StatusError || r.Error == nil || r.Error.Name != "EOFError" {
		t.Errorf("input() at end of file: status %q error %+v", r.Status, r.Error)
	}

	// Bytes pass as they are.
	in = kerneltest.NewStdin()
	in.Write("\xff\x00é")
	in.Close()
	if got := text(t, run("import sys; sys.stdin.buffer.read()", in).Results[0]); got != `b'\xff\x00\xc3\xa9'` {
		t.Errorf("binary stdin: %s", got)
	}

	// A cell that never reads does not ask.
	in = kerneltest.NewStdin()
	in.Write("unread\n")
	if r := run("1 + 1", in); r.Status != kernelproto.StatusOK || in.Asked() != 0 {
		t.Errorf("a cell that does not read: status %q, %d requests", r.Status, in.Asked())
	}

	// An interrupt while input() waits stops the cell; the state stays.
	in = kerneltest.NewStdin()
	go func() {
		if waitFor(func() bool { return in.Asked() > 0 }) {
			time.Sleep(50 * time.Millisecond)
			k.Interrupt()
		}
	}()
	r = run("kept = 42\ninput('waiting? ')", in)
	if r.Status != kernelproto.StatusInterrupted || r.Error == nil || r.Error.Name != "KeyboardInterrupt" {
		t.Errorf("interrupt in input(): status %q error %+v", r.Status, r.Error)
	}
	if got := pyValue(k, "kept"); got != "42" {
		t.Errorf("state after the interrupt: kept = %s", got)
	}

	// Another thread may read while the cell runs.
	in = kerneltest.NewStdin()
	whenAsked(k, in, "", false, "from a thread\n")
	r = run("import threading\ngot = []\nt = threading.Thread(target=lambda: got.append(input()))\nt.start(); t.join(10)\ngot", in)
	if r.Status != kernelproto.StatusOK || len(r.Results) != 1 || text(t, r.Results[0]) != "['from a thread']" {
		t.Errorf("input() in a thread: status %q results %+v error %+v", r.Status, r.Results, r.Error)
	}

	// A thread still reading when its cell ends gets end of file and lets
	// go of the channel: the kernel goes on.
	in = kerneltest.NewStdin()
	r = run("late = []\nt = threading.Thread(target=lambda: late.append(sys.stdin.readline()))\nt.start()\nimport time; time.sleep(0.2)", in)
	if r.Status != kernelproto.StatusOK {
		t.Errorf("a cell leaving a reading thread: status %q error %+v", r.Status, r.Error)
	}
	if got := pyValue(k, "t.join(5); late"); got != "['']" {
		t.Errorf("the left-over reader got %s, want ['']", got)
	}
	if got := pyValue(k, "6 * 7"); got != "42" {
		t.Errorf("after the left-over reader: %s", got)
	}
}

func TestBashOpenStdin(t *testing.T) {
	k := startBash(t, "")

	// read waits for a line typed after the prompt.
	in := kerneltest.NewStdin()
	c := beginInput(k, kernelproto.Execute{Code: `printf 'name? '; read -r name; echo "hi $name"`}, in)
	afterOutput(k, c, in, "name? ", "ada\n")
	c.end(10*time.Second).want(t, "ok", 0, "name? hi ada\n")

	// Two reads, then a program reading to the end of file.
	in = kerneltest.NewStdin()
	c = beginInput(k, kernelproto.Execute{Code: `echo go; read -r a; echo "a=$a"; read -r b; echo "b=$b"; wc -l`}, in)
	afterOutput(k, c, in, "go\n", "one\n", "a=one\n", "two\nthree\nfour\n", "b=two\n", "")
	c.end(10*time.Second).want(t, "ok", 0, "go\na=one\nb=two\n2\n")

	// End of file at once: read fails.
	in = kerneltest.NewStdin()
	in.Close()
	beginInput(k, kernelproto.Execute{Code: `read -r x || echo eof`}, in).end(10*time.Second).want(t, "ok", 0, "eof\n")

	// A cell that never reads ends as usual, whatever waits.
	in = kerneltest.NewStdin()
	in.Write("unread\n")
	beginInput(k, kernelproto.Execute{Code: `echo ignored`}, in).end(10*time.Second).want(t, "ok", 0, "ignored\n")

	// More than a pipe holds passes through, in order.
	in = kerneltest.NewStdin()
	big := strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB
	in.Write(big)
	in.Close()
	beginInput(k, kernelproto.Execute{Code: `md5sum | cut -c1-32`}, in).end(20*time.Second).want(t, "ok", 0, md5hex(big)+"\n")

	// An interrupt while read waits stops the cell; the shell's state stays.
	in = kerneltest.NewStdin()
	c = beginInput(k, kernelproto.Execute{Code: "kept=42; echo waiting; read -r x; echo not reached"}, in)
	go func() {
		if waitFor(func() bool { return strings.Contains(stdoutSince(k, c.outStart), "waiting\n") }) {
			time.Sleep(100 * time.Millisecond)
			k.Interrupt()
		}
	}()
	r := c.end(10 * time.Second)
	if r.Status != "interrupted" || strings.Contains(r.Stdout, "not reached") {
		t.Errorf("interrupt in read: status %q stdout %q", r.Status, r.Stdout)
	}
	runShell(k, `echo "kept=$kept"`).want(t, "ok", 0, "kept=42\n")
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// afterOutput types beside a running shell cell: steps are pairs of the
// output to wait for and the input to write then ("" closes stdin).
func afterOutput(k *localKernel, c *shellCell, in *kerneltest.Stdin, steps ...string) {
	go func() {
		for i := 0; i+1 < len(steps); i += 2 {
			if !waitFor(func() bool { return strings.Contains(stdoutSince(k, c.outStart), steps[i]) }) {
				return
			}
			if steps[i+1] == "" {
				in.Close()
			} else {
				in.Write(steps[i+1])
			}
		}
	}()
}

func TestJavaScriptOpenStdin(t *testing.T) {
	k := startJS(t)
	run := func(code string, in *kerneltest.Stdin) cellResult {
		t.Helper()
		return k.ExecInput(kernelproto.Execute{Code: code}, in, 20*time.Second)
	}
	const ask = "const rl = require('readline').createInterface({input: process.stdin, output: process.stdout});\n" +
		"const q = (p) => new Promise((resolve) => rl.question(p, resolve));\n"

	// rl.question's prompt is on stdout before the kernel asks.
	in := kerneltest.NewStdin()
	whenAsked(k, in, "name? ", false, "ada\n")
	r := run(ask+"const name = await q('name? ');\nrl.close();\nconsole.log('hi', name);", in)
	if r.Status != kernelproto.StatusOK || r.Stdout != "name? hi ada\n" {
		t.Errorf("rl.question: status %q stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}

	// Lines typed one at a time, then the end of input.
	in = kerneltest.NewStdin()
	whenAsked(k, in, "", true, "one\n", "two\n")
	r = run("const lines = []; for await (const l of require('readline').createInterface({input: process.stdin})) lines.push(l); lines", in)
	if r.Status != kernelproto.StatusOK || len(r.Results) != 1 || text(t, r.Results[0]) != "[ 'one', 'two' ]" {
		t.Errorf("lines to the end: status %q results %+v error %+v", r.Status, r.Results, r.Error)
	}

	// A cell that never reads does not ask.
	in = kerneltest.NewStdin()
	in.Write("unread\n")
	if r := run("1 + 1", in); r.Status != kernelproto.StatusOK || in.Asked() != 0 {
		t.Errorf("a cell that does not read: status %q, %d requests", r.Status, in.Asked())
	}

	// An interrupt while the cell waits for input stops it; state stays.
	in = kerneltest.NewStdin()
	go func() {
		if waitFor(func() bool { return in.Asked() > 0 }) {
			time.Sleep(50 * time.Millisecond)
			k.Interrupt()
		}
	}()
	r = run("var kept = 42;\n"+ask+"await q('waiting? ');", in)
	if r.Status != kernelproto.StatusInterrupted {
		t.Errorf("interrupt while waiting for input: status %q error %+v", r.Status, r.Error)
	}
	if got := result(t, k, "kept"); got != "42" {
		t.Errorf("state after the interrupt: kept = %s", got)
	}
}

func TestTypeScriptOpenStdin(t *testing.T) {
	k := startTS(t)
	in := kerneltest.NewStdin()
	whenAsked(k, in, "name? ", false, "ada\n")
	r := k.ExecInput(kernelproto.Execute{Code: "import * as readline from 'readline/promises';\n" +
		"const rl = readline.createInterface({input: process.stdin, output: process.stdout});\n" +
		"const name: string = await rl.question('name? ');\nrl.close();\nconsole.log('hi', name);"}, in, 30*time.Second)
	if r.Status != kernelproto.StatusOK || r.Stdout != "name? hi ada\n" {
		t.Errorf("rl.question: status %q stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
}

// TestPythonRawStdin: os.read(0, n) and sys.stdin.buffer read the cell's
// stdin, fixed or open, and end of file ends it; the next cell's stdin is
// its own.
func TestPythonRawStdin(t *testing.T) {
	k := startPython(t)
	r := k.ExecWith(kernelproto.Execute{Code: "import os, sys\nprint(os.read(0, 3), sys.stdin.buffer.read(), os.read(0, 5), os.read(sys.stdin.fileno(), 5))", Stdin: "abcdef\n", HasStdin: true}, time.Minute)
	if r.Status != "ok" || r.Stdout != "b'abc' b'def\\n' b'' b''\n" {
		t.Errorf("fixed stdin: status %s, stdout %q, error %+v", r.Status, r.Stdout, r.Error)
	}
	in := kerneltest.NewStdin()
	whenAsked(k, in, "", true, "hé", "llo\n")
	r = k.ExecInput(kernelproto.Execute{Code: "import os\nb = b''\nwhile c := os.read(0, 64):\n    b += c\nprint(b.decode())"}, in, time.Minute)
	if r.Status != "ok" || r.Stdout != "héllo\n\n" {
		t.Errorf("open stdin: status %s, stdout %q, error %+v", r.Status, r.Stdout, r.Error)
	}
	r = k.ExecWith(kernelproto.Execute{Code: "print(os.read(0, 10))", Stdin: "x", HasStdin: true}, time.Minute)
	if r.Stdout != "b'x'\n" {
		t.Errorf("the next cell's stdin: %q, %+v", r.Stdout, r.Error)
	}
	if r = k.Exec("print(os.read(0, 10))"); r.Stdout != "b''\n" {
		t.Errorf("a cell without stdin: %q, %+v", r.Stdout, r.Error)
	}
	// A read of open stdin that waits is interrupted, and the kernel lives.
	in = kerneltest.NewStdin()
	go func() {
		waitFor(func() bool { return in.Asked() > 0 })
		k.Interrupt()
	}()
	r = k.ExecInput(kernelproto.Execute{Code: "os.read(0, 10)"}, in, time.Minute)
	if r.Status != "interrupted" {
		t.Errorf("interrupting os.read(0): status %s, error %+v", r.Status, r.Error)
	}
	if r = k.Exec("1 + 1"); r.Status != "ok" {
		t.Errorf("after the interrupt: %+v", r)
	}
}

// TestJavaScriptRawStdin: fs.readSync(0) and fs.readFileSync(0) read the
// cell's stdin, fixed or open, as process.stdin does.
func TestJavaScriptRawStdin(t *testing.T) {
	k := startJS(t)
	r := k.ExecWith(kernelproto.Execute{Code: "const fs = require('fs'); const b = Buffer.alloc(3);\n" +
		"console.log(fs.readSync(0, b), b.toString(), JSON.stringify(fs.readFileSync(0, 'utf8')), fs.readFileSync('/dev/stdin').length)",
		Stdin: "abcdef\nxyz\n", HasStdin: true}, time.Minute)
	if r.Status != "ok" || r.Stdout != "3 abc \"def\\nxyz\\n\" 0\n" {
		t.Errorf("fixed stdin: status %s, stdout %q, error %+v", r.Status, r.Stdout, r.Error)
	}
	in := kerneltest.NewStdin()
	whenAsked(k, in, "", true, "hé", "llo\n")
	r = k.ExecInput(kernelproto.Execute{Code: "console.log(JSON.stringify(require('fs').readFileSync(0, 'utf8')))"}, in, time.Minute)
	if r.Status != "ok" || r.Stdout != "\"héllo\\n\"\n" {
		t.Errorf("open stdin: status %s, stdout %q, error %+v", r.Status, r.Stdout, r.Error)
	}
	if r = k.Exec("console.log(require('fs').readFileSync(0).length)"); r.Stdout != "0\n" {
		t.Errorf("a cell without stdin: %q, %+v", r.Stdout, r.Error)
	}
	in = kerneltest.NewStdin()
	go func() {
		waitFor(func() bool { return in.Asked() > 0 })
		k.Interrupt()
	}()
	r = k.ExecInput(kernelproto.Execute{Code: "require('fs').readFileSync(0)"}, in, time.Minute)
	if r.Status != "interrupted" {
		t.Errorf("interrupting readFileSync(0): status %s, error %+v", r.Status, r.Error)
	}
	if r = k.Exec("1 + 1"); r.Status != "ok" {
		t.Errorf("after the interrupt: %+v", r)
	}
}

// TestPythonGetpass: getpass.getpass prompts on stderr, reads a line of
// the cell's stdin without warning about echo, and its request says that
// the input is a secret.
func TestPythonGetpass(t *testing.T) {
	k := startPython(t)
	in := kerneltest.NewStdin()
	whenAsked(k, in, "", false, "ada\n", "hunter2\n")
	r := k.ExecInput(kernelproto.Execute{Code: "import getpass\nname = input('Name: ')\npw = getpass.getpass('Secret: ')\nprint(len(pw))"}, in, time.Minute)
	if r.Status != "ok" || r.Stdout != "Name: 7\n" || r.Stderr != "Secret: " {
		t.Errorf("getpass: status %s stdout %q stderr %q error %+v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
	reqs := in.Requests()
	if len(reqs) < 2 || reqs[0].Password || !reqs[len(reqs)-1].Password {
		t.Errorf("requests %+v: want input()'s without password, getpass's with", reqs)
	}
}

// TestBashReadWaits: bash asks ahead, so its read builtin tells the agent
// when it is about to wait on open stdin (stdin_wait), read -s as a
// secret; a read of a file or a poll (-t 0) does not.
func TestBashReadWaits(t *testing.T) {
	k := startBash(t, "")
	in := kerneltest.NewStdin()
	c := beginInput(k, kernelproto.Execute{Code: "read x < /dev/null; read -t 0 y\nread -r -p 'Name: ' n\nread -s -p 'Pw: ' p\necho \"$n ${#p}\""}, in)
	go func() {
		for i, answer := range []string{"ada\n", "pw\n"} {
			if !waitFor(func() bool { return len(in.Waits()) > i }) {
				break
			}
			in.Write(answer)
		}
		in.Close() // a read that was not announced ends the cell
	}()
	r := c.end(60 * time.Second)
	r.want(t, "ok", 0, "ada 2\n")
	if r.Stderr != "Name: Pw: " {
		t.Errorf("stderr = %q, want the two prompts", r.Stderr)
	}
	if w := in.Waits(); len(w) != 2 || w[0].Password || !w[1].Password {
		t.Errorf("waits %+v: want two, the second a password", w)
	}
}
