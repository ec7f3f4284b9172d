package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/kiln-dev/kiln/internal/lang"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// workdir makes a temp dir holding files (name → content; a name ending in
// "*" is made executable, without the star).
func workdir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunLanguages(t *testing.T) {
	needRoot(t)
	files := map[string]string{
		"hello.py": "print('hello from python')\n",
		"hello.js": "console.log('hello from javascript')\n",
		"hello.sh": "echo hello from bash\n",
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"python file", []string{"run", "hello.py"}, "", "hello from python\n"},
		{"python -c", []string{"run", "--lang", "python", "-c", "print(1)"}, "", "1\n"},
		{"python stdin", []string{"run", "--lang", "python", "-"}, "print(1)\n", "1\n"},
		{"javascript file", []string{"run", "hello.js"}, "", "hello from javascript\n"},
		{"javascript -c", []string{"run", "--lang", "js", "-c", "console.log(6*7)"}, "", "42\n"},
		{"javascript stdin", []string{"run", "--lang", "js", "-"}, "console.log(6*7)\n", "42\n"},
		{"bash file", []string{"run", "hello.sh"}, "", "hello from bash\n"},
		{"bash -c", []string{"run", "--lang", "bash", "-c", "echo $((6*7))"}, "", "42\n"},
		{"bash stdin", []string{"run", "-l", "bash", "-"}, "echo $((6*7))\n", "42\n"},
	}
	dir := workdir(t, files)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := invocation{dir: dir}
			if tt.stdin != "" {
				inv.stdin = []byte(tt.stdin)
			}
			r := execKiln(t, inv, tt.args...)
			if r.code != 0 || r.stdout != tt.want || r.stderr != "" {
				t.Errorf("kiln %q: exit %d, stdout %q, stderr %q; want exit 0, stdout %q, no stderr",
					tt.args, r.code, r.stdout, r.stderr, tt.want)
			}
		})
	}
}

// TestRunProgramArgs checks the two forms the usage text documents:
// FILE [ARGS...] and -c CODE [-- ARGS...]. Arguments reach the program as
// argv, unsplit and unexpanded, also when they look like flags.
func TestRunProgramArgs(t *testing.T) {
	needRoot(t)
	const printArgs = "import sys; print(sys.argv[1:])"
	dir := workdir(t, map[string]string{"prog.py": printArgs + "\n"})
	tests := []struct {
		name  string
		args  []string
		stdin bool // the program is on stdin
		want  string
	}{
		{"file", []string{"run", "prog.py", "a", "b"}, false, "['a', 'b']\n"},
		{"file, args like flags", []string{"run", "prog.py", "-x", "--timeout", "1s"}, false, "['-x', '--timeout', '1s']\n"},
		{"-c with --", []string{"run", "--lang", "python", "-c", printArgs, "--", "x", "y"}, false, "['x', 'y']\n"},
		{"-c with -- and a flag-like arg", []string{"run", "--lang", "python", "-c", printArgs, "--", "-v"}, false, "['-v']\n"},
		{"stdin code", []string{"run", "--lang", "python", "-", "a", "b"}, true, "['a', 'b']\n"},
		{"no shell in between", []string{"run", "--lang", "bash", "-c", `printf '%s|' "$#" "$@"`, "--", "a b", "$HOME", "*"}, false, "3|a b|$HOME|*|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := invocation{dir: dir}
			if tt.stdin {
				inv.stdin = []byte(printArgs + "\n")
			}
			r := execKiln(t, inv, tt.args...)
			if r.code != 0 || r.stdout != tt.want {
				t.Errorf("kiln %q: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
			}
		})
	}
}

func TestRunStdinPassesThrough(t *testing.T) {
	needRoot(t)
	r := execKiln(t, invocation{stdin: []byte("abc")}, "run", "--lang", "python", "-c", "import sys; print(sys.stdin.read())")
	if r.code != 0 || r.stdout != "abc\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0, stdout \"abc\\n\"", r.code, r.stdout, r.stderr)
	}

	// A megabyte of every byte value arrives intact.
	in := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n', '\r'}, 1<<20/6)
	r = execKiln(t, invocation{stdin: in}, "run", "--lang", "python", "-c",
		"import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest()[:16])")
	want := strings.Fields(sha256Line(t, in))
	if got := strings.Fields(r.stdout); r.code != 0 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("program saw %q (exit %d, stderr %q); want %q", r.stdout, r.code, r.stderr, want)
	}

	// /dev/null as stdin: the program reads EOF at once.
	r = execKiln(t, invocation{}, "run", "--lang", "python", "-c", "import sys; print(repr(sys.stdin.read()))")
	if r.code != 0 || r.stdout != "''\n" {
		t.Errorf("with stdin /dev/null: exit %d, stdout %q, stderr %q; want \"''\\n\"", r.code, r.stdout, r.stderr)
	}
}

func sha256Line(t testing.TB, b []byte) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", "import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest()[:16])")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestRunExitStatus(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name       string
		lang, code string
		wantCode   int
		wantStderr []string
	}{
		{"bash exit 3", "bash", "exit 3", 3, nil},
		{"javascript exit 4", "js", "process.exit(4)", 4, nil},
		{"python raise", "python", "raise ValueError('boom')", 1, []string{"Traceback (most recent call last)", "ValueError: boom"}},
		{"killed by SIGKILL", "python", "import os; os.kill(os.getpid(), 9)", 128 + 9, nil},
		{"killed by SIGTERM", "python", "import os; os.kill(os.getpid(), 15)", 128 + 15, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execKiln(t, invocation{}, "run", "--lang", tt.lang, "-c", tt.code)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "kiln:") {
				t.Errorf("kiln added a message to a plain exit:\n%s", r.stderr)
			}
		})
	}
}

// TestRunStreamsOutput reads the first line from kiln's stdout pipe while the
// program still sleeps: output must arrive as it is produced.
func TestRunStreamsOutput(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kilnBin, "run", "--local", "--lang", "python", "-c",
		"import sys, time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')")
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case l := <-lines:
		if l != "first" {
			t.Errorf("first line %q, want \"first\"", l)
		}
		t.Logf("first line after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(1 * time.Second):
		t.Errorf("no output within 1 s although the program printed and flushed at once; output is not streamed")
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("kiln: %v; stderr: %s", err, stderr.String())
	}
	if len(rest) == 0 || rest[len(rest)-1] != "second" {
		t.Errorf("later lines %q, want to end with \"second\"", rest)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("kiln returned after %v, before the program's 2 s sleep ended", d)
	}
}

// TestRunInterrupt: ^C stops the program, destroys the sandbox and exits
// 130 with a word on stderr.
func TestRunInterrupt(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kilnBin, "run", "--local", "--lang", "python", "-c",
		"import time\nprint('ready', flush=True)\ntime.sleep(30)")
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, out)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("kiln did not stop within 20 s of SIGINT")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("kiln took %v to stop after SIGINT", d)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d (%v), want 130", code, err)
	}
	if !strings.Contains(stderr.String(), "cancelled") {
		t.Errorf("stderr does not say the run was cancelled:\n%s", stderr.String())
	}
	checkNoLeftovers(t)
}

// TestRunLimits: a limit that stops a program is named on stderr in plain
// words, and kiln returns promptly.
func TestRunLimits(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name       string
		args       []string
		wantStderr string // a substring
		golden     bool   // stderr is exactly testdata/limits/<name>.golden
		wantCode   int    // -1: not checked (see below)
		within     time.Duration
	}{
		{"time", []string{"--timeout", "1s", "--lang", "python", "-c", "while True: pass"},
			"kiln: time limit reached", true, 124, 3 * time.Second},
		{"memory", []string{"--memory", "64M", "--lang", "python", "-c", "b = bytearray(300 * 1024 * 1024)\nprint(len(b))"},
			"kiln: memory limit reached", true, 137, 10 * time.Second},
		{"output", []string{"--output", "1K", "--lang", "python", "-c", "while True: print('x' * 100)"},
			"kiln: output limit reached", true, 137, 10 * time.Second},
		// Threads count against the pids limit: the program fails to start
		// one, and kiln names the limit.
		{"pids", []string{"--pids", "16", "--lang", "python", "-c", "import threading, time\nfor i in range(64): threading.Thread(target=time.sleep, args=(3,)).start()"},
			"kiln: process limit reached: the program tried to run more than 16 processes", false, 1, 10 * time.Second},
		// A fork bomb left in the background: the script's shell ends at
		// once and the sandbox goes with the bomb in it, promptly. Whether
		// the bomb reached the limit before that is a race, so only "not
		// kiln's failure" and no leftovers are checked.
		{"pids, background bomb", []string{"--pids", "16", "--lang", "bash", "-c", ":(){ :|:& };:"},
			"", false, -1, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execKiln(t, invocation{}, append([]string{"run"}, tt.args...)...)
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, r.stderr)
			}
			if tt.golden {
				golden(t, "limits/"+tt.name, r.stderr)
			}
			if tt.wantCode >= 0 && r.code != tt.wantCode {
				t.Errorf("exit %d, want %d", r.code, tt.wantCode)
			}
			if r.code == 125 {
				t.Errorf("exit 125 (kiln's own failure) for a program that hit a limit; stderr:\n%s", r.stderr)
			}
			if r.elapsed > tt.within {
				t.Errorf("took %v, want under %v", r.elapsed, tt.within)
			}
			if tt.name == "output" && (len(r.stdout) == 0 || len(r.stdout) > 1024) {
				t.Errorf("stdout has %d bytes with --output 1K, want 1 to 1024", len(r.stdout))
			}
			checkNoLeftovers(t)
		})
	}
}

func TestRunFiles(t *testing.T) {
	needRoot(t)
	dir := workdir(t, map[string]string{
		"data.csv":  "a,b\n1,2\n",
		"tool.sh*":  "#!/bin/sh\necho tool ran\n",
		"notes.txt": "notes\n",
		"analyse.py": "import csv\n" +
			"rows = list(csv.reader(open('data.csv')))\n" +
			"print(len(rows), rows[1])\n",
	})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"README form", []string{"--timeout", "5s", "--memory", "256M", "--file", "data.csv", "analyse.py"}, "2 ['1', '2']\n"},
		{"LOCAL:DEST into a subdirectory", []string{"--file", "data.csv:in/sub/d.csv", "--lang", "bash", "-c", "cat in/sub/d.csv"}, "a,b\n1,2\n"},
		{"repeated, short form", []string{"-f", "data.csv", "-f", "notes.txt:n.txt", "--lang", "bash", "-c", "cat data.csv n.txt"}, "a,b\n1,2\nnotes\n"},
		{"executable stays executable", []string{"--file", "tool.sh", "--lang", "bash", "-c", "./tool.sh"}, "tool ran\n"},
		{"a relative path is kept", []string{"--file", "in/deep.txt", "--lang", "bash", "-c", "cat in/deep.txt"}, "deep\n"},
	}
	if err := os.Mkdir(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in/deep.txt"), []byte("deep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execKiln(t, invocation{dir: dir}, append([]string{"run"}, tt.args...)...)
			if r.code != 0 || r.stdout != tt.want {
				t.Errorf("kiln %q: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
			}
		})
	}
}

// TestRunCodeAtLimit: a program of exactly MaxCodeBytes runs; one byte more
// is refused (in TestRunBadInput).
func TestRunCodeAtLimit(t *testing.T) {
	needRoot(t)
	code := "print('at the limit')\n#"
	code += strings.Repeat("x", 1<<20-len(code)-1) + "\n"
	dir := workdir(t, map[string]string{"max.py": code})
	r := execKiln(t, invocation{dir: dir}, "run", "max.py")
	if r.code != 0 || r.stdout != "at the limit\n" {
		t.Errorf("a 1 MiB program: exit %d, stdout %q, stderr %q; want it to run", r.code, r.stdout, r.stderr)
	}
}

// TestRunBadInput: every mistake gets one line on stderr that says what was
// wrong, exit 125 (2 for usage errors), no panic and no hang.
func TestRunBadInput(t *testing.T) {
	over := strings.Repeat("#", 1<<20+1)
	dir := workdir(t, map[string]string{
		"big.py":   over,
		"blank.py": "  \n\t\n",
		"prog.py":  "print(1)\n",
		"prog.txt": "print(1)\n",
		"data.csv": "a,b\n",
	})
	langs := strings.Join(lang.Names(), ", ")
	tests := []struct {
		name  string
		args  []string
		stdin string
		root  bool     // reaches the engine's validation, which comes after the root check
		want  []string // substrings of the one line
	}{
		{"unknown-language", []string{"--lang", "cobol", "-c", "x"}, "", true, []string{`"cobol"`, langs}},
		{"empty-code-flag", []string{"--lang", "python", "-c", ""}, "", true, []string{"empty"}},
		{"empty-code-file", []string{"blank.py"}, "", true, []string{"empty"}},
		{"empty-code-stdin", []string{"--lang", "python", "-"}, " \n", true, []string{"empty"}},
		{"code-too-large-file", []string{"big.py"}, "", false, []string{"big.py", "1 MiB"}},
		{"code-too-large-stdin", []string{"--lang", "python", "-"}, over, false, []string{"stdin", "1 MiB"}},
		{"stdin-too-large", []string{"prog.py"}, strings.Repeat("x", 16<<20+1), false, []string{"stdin", "16 MiB"}},
		{"memory-too-small", []string{"--memory", "1K", "prog.py"}, "", true, []string{"memory", "1 KiB", "32 MiB"}},
		{"timeout-too-long", []string{"--timeout", "100h", "prog.py"}, "", true, []string{"timeout", "24h"}},
		{"timeout-negative", []string{"--timeout", "-1s", "prog.py"}, "", true, []string{"timeout"}},
		{"pids-too-many", []string{"--pids", "100000", "prog.py"}, "", true, []string{"pids", "100000", "4096"}},
		{"cpus-too-few", []string{"--cpus", "0.01", "prog.py"}, "", true, []string{"cpu"}},
		{"build-option-refused", []string{"--build-opt", "-fplugin=/tmp/p.so", "--lang", "c", "-c", "int main(void){return 0;}"}, "", true, []string{"-fplugin=/tmp/p.so", "not allowed", "-lNAME"}},
		{"build-option-for-python", []string{"--build-opt", "-O2", "prog.py"}, "", true, []string{"python", "no build options"}},
		// Values that truncate to 0 must not silently become the default.
		{"cpus-rounds-to-zero", []string{"--cpus", "0.0001", "prog.py"}, "", true, []string{"cpu"}},
		{"memory-rounds-to-zero", []string{"--memory", "0.5", "prog.py"}, "", true, []string{"memory"}},
		{"cpus-nan", []string{"--cpus", "nan", "prog.py"}, "", true, []string{"cpu"}},
		{"cpus-huge", []string{"--cpus", "1e30", "prog.py"}, "", true, []string{"cpu"}},
		{"missing-program-file", []string{"missing.py"}, "", false, []string{"missing.py"}},
		{"unknown-extension", []string{"prog.txt"}, "", false, []string{"prog.txt", "--lang", langs}},
		{"c-without-lang", []string{"-c", "print(1)"}, "", false, []string{"--lang", langs}},
		{"stdin-without-lang", []string{"-"}, "print(1)\n", false, []string{"--lang", langs}},
		{"file-missing", []string{"--file", "nope.csv", "prog.py"}, "", false, []string{"nope.csv"}},
		{"file-dotdot", []string{"--file", "data.csv:../x.csv", "prog.py"}, "", true, []string{"../x.csv", "leaves the workspace"}},
		{"file-dotdot-inner", []string{"--file", "data.csv:a/../../x.csv", "prog.py"}, "", true, []string{"leaves the workspace"}},
		{"file-absolute", []string{"--file", "data.csv:/etc/x.csv", "prog.py"}, "", true, []string{"/etc/x.csv", "relative"}},
		{"file-replaces-program", []string{"--file", "data.csv:main.py", "prog.py"}, "", true, []string{"main.py"}},
		{"file-same-destination", []string{"--file", "data.csv", "--file", "prog.txt:data.csv", "prog.py"}, "", false, []string{"data.csv", "prog.txt:data.csv", "LOCAL:DEST"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			inv := invocation{dir: dir}
			if tt.stdin != "" {
				inv.stdin = []byte(tt.stdin)
			}
			r := execKiln(t, inv, append([]string{"run"}, tt.args...)...)
			if r.code != 125 {
				t.Errorf("exit %d, want 125", r.code)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(r.stderr, "kiln: ") || !strings.HasSuffix(r.stderr, "\n") {
				t.Fatalf("stderr should be one line starting with \"kiln: \"; got:\n%s", r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("message %q does not mention %q", lines[0], w)
				}
			}
			if strings.Contains(lines[0], "9223372036854775808") {
				t.Errorf("message %q shows an overflowed number, not what was typed", lines[0])
			}
			golden(t, "errors/"+tt.name, r.stderr)
		})
	}
}

// TestUsageErrors: mistakes in the command line itself exit 2 and say what
// was wrong on the first line of stderr, followed by the usage.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings of the first line
	}{
		{"no-arguments", nil, []string{"kiln runs untrusted code"}},
		{"run-no-arguments", []string{"run"}, []string{"kiln run: nothing to run"}},
		{"repl-no-arguments", []string{"repl"}, []string{"kiln repl: give one language"}},
		{"unknown-command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"unknown-flag", []string{"run", "--frob", "--lang", "python", "-c", "print(1)"}, []string{"-frob"}},
		{"bad-memory-value", []string{"run", "--memory", "lots", "--lang", "python", "-c", "print(1)"}, []string{`"lots"`, "-memory", "not a size"}},
		{"memory-nan", []string{"run", "--memory", "nan", "--lang", "python", "-c", "print(1)"}, []string{`"nan"`, "-memory", "not a size"}},
		{"bad-timeout-value", []string{"run", "--timeout", "soon", "--lang", "python", "-c", "print(1)"}, []string{`"soon"`, "-timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := execKiln(t, invocation{}, tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", r.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			first, rest, _ := strings.Cut(r.stderr, "\n")
			for _, w := range tt.want {
				if !strings.Contains(first, w) {
					t.Errorf("first line of stderr %q does not mention %q", first, w)
				}
			}
			if !strings.Contains(rest, "Usage") {
				t.Errorf("no usage after the error line:\n%s", r.stderr)
			}
			golden(t, "usage/"+tt.name, first+"\n")
		})
	}
}

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"65536", 65536},
		{"64k", 64 * kiln.KiB},
		{"64K", 64 * kiln.KiB},
		{"64KB", 64 * kiln.KiB},
		{"64KiB", 64 * kiln.KiB},
		{"512M", 512 * kiln.MiB},
		{"1G", kiln.GiB},
		{"1.5GiB", 3 * kiln.GiB / 2},
		{" 256m ", 256 * kiln.MiB},
	}
	for _, tt := range good {
		if got, err := parseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "lots", "M", "-1M", "1T", "inf", "Inf", "nan", "NaN", "1e300"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestRunCompiled: compiled programs as their users expect on the host: the
// file keeps its name, headers beside it are found, tests beside an empty
// main run, warnings stay off the program's stderr, a link error names the
// user's file.
func TestRunCompiled(t *testing.T) {
	needRoot(t)
	dir := workdir(t, map[string]string{
		"test.java": "public class HelloWorld {\n    public static void main(String[] args) {\n        System.out.println(\"hello\");\n    }\n}\n",
		"warn.c":    "#include <stdio.h>\nint main(void) {\n  int unused;\n  fprintf(stderr, \"own\\n\");\n  return 0;\n}\n",
		"link.c":    "int f(void);\nint main(void) { return f(); }\n",
		"md5.cpp":   "#include <iostream>\n#include \"openssl/md5.h\"\nint main() { std::cout << DIGEST << '\\n'; }\n",
		"hash.cpp":  "#include <openssl/md5.h>\n#include <cstdio>\nint main() { unsigned char d[16]; MD5((const unsigned char *)\"abc\", 3, d); for (auto c : d) std::printf(\"%02x\", c); std::printf(\"\\n\"); }\n",
		"sol.rs":    "fn add(a: i32, b: i32) -> i32 { a - b }\n\nfn main() {}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 4);\n}\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "openssl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "openssl/md5.h"), []byte("#define DIGEST \"d41d8cd9\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, lang string
		args       []string
		code       int    // want this exit status
		stdout     string // and this stdout, if not ""
		stderr     string // and this stderr exactly, if not "-"
		notStderr  string // stderr must not contain this, if not ""
	}{
		{"java file named otherwise than its class", "java", []string{"test.java"}, 0, "hello\n", "", ""},
		{"warnings stay off the program's stderr", "c", []string{"warn.c"}, 0, "", "own\n", ""},
		{"a header beside the program", "cpp", []string{"--file", "openssl/md5.h", "md5.cpp"}, 0, "d41d8cd9\n", "", ""},
		{"OpenSSL's MD5 links with --build-opt -lcrypto", "cpp", []string{"--build-opt", "-std=c++17 -Wno-deprecated-declarations", "--build-opt", "-lcrypto", "hash.cpp"}, 0, "900150983cd24fb0d6963f7d28e17f72\n", "", ""},
		{"a wrong solution in #[test]", "rust", []string{"sol.rs"}, 101, "", "-", ""},
		{"a link error names the user's file", "c", []string{"link.c"}, 1, "", "-", "main.c"},
		{"a file named main.c beside -c code", "c", []string{"--file", "link.c:main.c", "--lang", "c", "-c", "#include <stdio.h>\nint main(void) { puts(\"code\"); return 0; }"}, 0, "code\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l, _ := lang.Lookup(tt.lang); l.Available() != nil {
				t.Skip(kiln.Message(l.Available()))
			}
			r := execKiln(t, invocation{dir: dir}, append([]string{"run"}, tt.args...)...)
			if r.code != tt.code || (tt.stdout != "" && r.stdout != tt.stdout) || (tt.stderr != "-" && r.stderr != tt.stderr) ||
				(tt.notStderr != "" && strings.Contains(r.stderr, tt.notStderr)) {
				t.Errorf("kiln run %q: exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q (not containing %q)",
					tt.args, r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr, tt.notStderr)
			}
		})
	}
}

// TestRunStats: --stats works for every language and, for a program
// language, reports the build and the run apart, with the build's warnings.
func TestRunStats(t *testing.T) {
	needRoot(t)
	hello := map[string]string{
		"hello.py":   "print('hi')\n",
		"hello.js":   "console.log('hi')\n",
		"hello.sh":   "echo hi\n",
		"hello.c":    "#include <stdio.h>\nint main(void) { int unused; puts(\"hi\"); return 0; }\n",
		"hello.cpp":  "#include <iostream>\nint main() { std::cout << \"hi\\n\"; }\n",
		"hello.go":   "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n",
		"Hello.java": "public class Hello { public static void main(String[] a) { System.out.println(\"hi\"); } }\n",
		"hello.rs":   "fn main() { println!(\"hi\"); }\n",
		"hello.rb":   "puts 'hi'\n",
		"hello.php":  "<?php echo \"hi\\n\";\n",
		"hello.f90":  "program hello\n  print '(a)', 'hi'\nend program hello\n",
	}
	dir := workdir(t, hello)
	run := regexp.MustCompile(`(?m)^kiln: (run: )?exit 0; wall [0-9.]+ ms, cpu [0-9.]+ ms, peak memory [0-9.]+ MiB$`)
	build := regexp.MustCompile(`(?m)^kiln: build: wall [0-9.]+ ms, cpu [0-9.]+ ms, peak memory [0-9.]+ MiB$`)
	for file := range hello {
		t.Run(file, func(t *testing.T) {
			l, err := lang.ByExt(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Available(); err != nil {
				t.Skip(kiln.Message(err))
			}
			r := execKiln(t, invocation{dir: dir}, "run", "--stats", file)
			if r.code != 0 || r.stdout != "hi\n" || !run.MatchString(r.stderr) {
				t.Fatalf("kiln run --stats %s: exit %d, stdout %q, stderr:\n%s\nwant hi and a line of stats", file, r.code, r.stdout, r.stderr)
			}
			if l.Kind == lang.Program && (!build.MatchString(r.stderr) || !strings.Contains(r.stderr, "kiln: run: ")) {
				t.Errorf("kiln run --stats %s: stderr:\n%s\nwant the build and the run apart", file, r.stderr)
			}
			if file == "hello.c" && !strings.Contains(r.stderr, "kiln: hello.c:2: warning: unused variable") {
				t.Errorf("kiln run --stats hello.c: stderr:\n%s\nwant the compiler's warning", r.stderr)
			}
		})
	}
}

// TestRunMount: --mount shows a local folder read-only: a program imports
// the project's code from it and cannot write into it.
func TestRunMount(t *testing.T) {
	needRoot(t)
	dir := workdir(t, map[string]string{
		"check.py": "import sys\nsys.path.insert(0, '/project')\nimport lib\nprint(lib.VALUE)\n" +
			"try:\n    open('/project/new.txt', 'w')\nexcept OSError as e:\n    print('refused', e.errno)\n",
	})
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "lib.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The sandbox's user reads the folder as others do.
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := execKiln(t, invocation{dir: dir}, "run", "--mount", "proj:/project", "check.py")
	if r.code != 0 || r.stdout != "42\nrefused 30\n" {
		t.Errorf("kiln run --mount proj:/project check.py: exit %d, stdout %q, stderr %q; want 42 and a write refused with EROFS (30)", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(proj, "new.txt")); err == nil {
		t.Errorf("a file was written through the mount")
	}
	r = execKiln(t, invocation{dir: dir}, "run", "--mount", "proj:/etc", "check.py")
	if r.code == 0 || !strings.Contains(r.stderr, "/etc") || !strings.Contains(r.stderr, "/project") {
		t.Errorf("--mount proj:/etc: exit %d, stderr %q; want an error naming the target and what is allowed", r.code, r.stderr)
	}
}

// TestRunTestFiles: kiln run runs a pytest file with pytest and a
// node --test file with node (by their names, or --test), and --json
// lists each test.
func TestRunTestFiles(t *testing.T) {
	needRoot(t)
	if exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run() != nil {
		t.Skip("needs pytest: Debian's python3-pytest, which scripts/deps installs")
	}
	dir := workdir(t, map[string]string{
		"test_sol.py": "def test_good():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 1 + 1 == 3\n",
		"checks.js":   "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 1, 2));\n",
	})
	if r := execKiln(t, invocation{dir: dir}, "run", "test_sol.py"); r.code != 1 || !strings.Contains(r.stdout, "1 failed, 1 passed") {
		t.Errorf("kiln run test_sol.py: exit %d, stdout %q, stderr %q; want pytest's summary and exit 1", r.code, r.stdout, r.stderr)
	}
	r := execKiln(t, invocation{dir: dir}, "run", "--json", "test_sol.py")
	var res kiln.CellResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Tests == nil || res.Tests.Passed != 1 || res.Tests.Failed != 1 {
		t.Errorf("kiln run --json test_sol.py: %v, %q; want tests with one passed and one failed", err, r.stdout)
	}
	if r := execKiln(t, invocation{dir: dir}, "run", "--test", "checks.js"); r.code != 0 || !strings.Contains(r.stdout, "ok 1 - adds") {
		t.Errorf("kiln run --test checks.js: exit %d, stdout %q, stderr %q; want node's TAP report", r.code, r.stdout, r.stderr)
	}
}
