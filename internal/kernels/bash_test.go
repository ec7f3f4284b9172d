package kernels

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// shellCell is a cell started with begin and collected with end, so that a
// test can act (interrupt) while it runs and see Done's exit code, which
// cellResult does not keep.
type shellCell struct {
	k                  *localKernel
	id                 string
	outStart, errStart int
	in                 *kerneltest.Stdin // open stdin, or nil
}

type shellResult struct {
	cellResult
	ExitCode *int
	Line     int // Error.Line
}

func begin(k *localKernel, req kernelproto.Execute) *shellCell {
	k.T.Helper()
	return beginInput(k, req, nil)
}

// beginInput starts a cell whose open stdin in serves.
func beginInput(k *localKernel, req kernelproto.Execute, in *kerneltest.Stdin) *shellCell {
	k.T.Helper()
	req.Type, req.Cell = kernelproto.TExecute, k.CellID()
	req.StdinOpen = in != nil
	k.Mu.Lock()
	c := &shellCell{k: k, id: req.Cell, outStart: k.Stdout.Len(), errStart: k.Stderr.Len(), in: in}
	k.Mu.Unlock()
	if in != nil {
		in.Start(k, req.Cell)
	}
	k.Send(req)
	return c
}

// waitOutput waits until the cell's stdout contains s.
func (c *shellCell) waitOutput(s string, timeout time.Duration) {
	c.k.T.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c.k.Mu.Lock()
		out := c.k.Stdout.String()[c.outStart:]
		c.k.Mu.Unlock()
		if strings.Contains(out, s) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.k.T.Fatalf("cell %s: %q never appeared on stdout; stderr: %s", c.id, s, c.k.StderrText())
}

func (c *shellCell) end(timeout time.Duration) shellResult {
	k := c.k
	k.T.Helper()
	var res shellResult
	for {
		line := k.Read(timeout)
		var env kernelproto.Envelope
		mustUnmarshal(k.T, line, &env)
		if env.Cell != c.id {
			k.T.Fatalf("message for cell %q while %q runs: %s", env.Cell, c.id, line)
		}
		if c.in != nil && c.in.Handle(env, line) {
			continue
		}
		switch env.Type {
		case kernelproto.TDisplay, kernelproto.TExecuteResult:
			var d kernelproto.Display
			mustUnmarshal(k.T, line, &d)
			res.Displays = append(res.Displays, d)
		case kernelproto.TError:
			res.Error = new(kernelproto.Error)
			mustUnmarshal(k.T, line, res.Error)
			res.Line = res.Error.Line
		case kernelproto.TDone:
			var d kernelproto.Done
			mustUnmarshal(k.T, line, &d)
			res.Status, res.ExitCode = d.Status, d.ExitCode
			if c.in != nil {
				c.in.Stop()
			}
			k.Drain()
			k.Mu.Lock()
			res.Stdout = k.Stdout.String()[c.outStart:]
			res.Stderr = k.Stderr.String()[c.errStart:]
			k.Mu.Unlock()
			return res
		default:
			k.T.Fatalf("unexpected message during a cell: %s", line)
		}
	}
}

func runShell(k *localKernel, code string) shellResult {
	k.T.Helper()
	return begin(k, kernelproto.Execute{Code: code}).end(30 * time.Second)
}

func startBash(t *testing.T, dir string) *localKernel {
	t.Helper()
	spec := Bash()
	if _, err := os.Stat("/usr/bin/bash"); err != nil {
		t.Skipf("bash not installed: %v", err)
	}
	return startLocal(t, spec, dir)
}

// want checks a cell's status, exit code and stdout.
func (r shellResult) want(t *testing.T, status string, code int, stdout string) {
	t.Helper()
	if r.Status != status || r.ExitCode == nil || *r.ExitCode != code || r.Stdout != stdout {
		got := "none"
		if r.ExitCode != nil {
			got = fmt.Sprint(*r.ExitCode)
		}
		t.Fatalf("got status %q, exit code %s, stdout %q (stderr %q, error %+v); want %q, %d, %q",
			r.Status, got, r.Stdout, r.Stderr, r.Error, status, code, stdout)
	}
}

// TestBashState: the working directory, variables (exported or not),
// functions, aliases and options set in one cell are there in the next.
func TestBashState(t *testing.T) {
	k := startBash(t, "")
	dir := t.TempDir()
	runShell(k, "cd "+dir+"; export X=1; Y=2; declare -A M=([k]=v); f(){ echo hi; }\n"+
		"alias ll='echo aliased'; shopt -s extglob; set -o pipefail").want(t, "ok", 0, "")
	runShell(k, `pwd; echo $X $Y ${M[k]}; f; ll; printenv X; printenv Y || echo unexported
shopt -q extglob && echo extglob; [[ -o pipefail ]] && echo pipefail
x=ab; echo ${x/@(a|b)/-}`).want(t, "ok", 0, dir+"\n1 2 v\nhi\naliased\n1\nunexported\nextglob\npipefail\n-b\n")
}

func TestBashMultiline(t *testing.T) {
	k := startBash(t, "")
	code := `n=0
for i in 1 2 3; do
  n=$((n + i))
done
if ((n == 6)); then
  echo "sum $n"
else
  echo wrong
fi
cat <<EOF
here $n
  indented
EOF
cat <<'RAW'
$n is not expanded
RAW
case $n in
6) echo six ;;
esac`
	runShell(k, code).want(t, "ok", 0, "sum 6\nhere 6\n  indented\n$n is not expanded\nsix\n")
}

// TestBashExitStatus: Done's exit code is the last command's status, and a
// failing cell says so in an Error.
func TestBashExitStatus(t *testing.T) {
	k := startBash(t, "")
	runShell(k, "false; true").want(t, "ok", 0, "")
	r := runShell(k, "echo out; ls /nonexistent-kiln")
	r.want(t, "error", 2, "out\n")
	if r.Error == nil || r.Error.Name != "ExitStatus" || r.Error.Message != "exit status 2" {
		t.Errorf("error = %+v, want ExitStatus: exit status 2", r.Error)
	}
	if !strings.Contains(r.Stderr, "nonexistent-kiln") {
		t.Errorf("stderr %q lacks ls's complaint", r.Stderr)
	}
	r = runShell(k, "sh -c 'kill -KILL $$'")
	r.want(t, "error", 137, "")
	if r.Error == nil || !strings.Contains(r.Error.Message, "SIGKILL") {
		t.Errorf("error = %+v, want a mention of SIGKILL", r.Error)
	}
	runShell(k, "(exit 4)").want(t, "error", 4, "")
	runShell(k, "# only a comment").want(t, "ok", 0, "")
	runShell(k, "").want(t, "ok", 0, "")
}

// TestBashExit: exit stops the cell with its status and the shell lives on.
func TestBashExit(t *testing.T) {
	k := startBash(t, "")
	r := runShell(k, "x=kept\necho a\nexit 3\necho unreachable")
	r.want(t, "error", 3, "a\n")
	if r.Line != 3 {
		t.Errorf("error line = %d, want 3", r.Line)
	}
	// exit stops the cell as an interrupt does; bash's empty line after an
	// interrupt is not the cell's output.
	if r.Stderr != "" {
		t.Errorf("stderr = %q, want nothing", r.Stderr)
	}
	r = runShell(k, "echo $x; echo still-there >&2")
	r.want(t, "ok", 0, "kept\n")
	if r.Stderr != "still-there\n" {
		t.Errorf("stderr after exit: %q", r.Stderr)
	}
	runShell(k, "f() { echo in-f; exit 5; echo unreachable; }\ny=1\nf\necho unreachable").want(t, "error", 5, "in-f\n")
	runShell(k, "false; exit").want(t, "error", 1, "")
	runShell(k, "exit 0; echo unreachable").want(t, "ok", 0, "")
	runShell(k, "exit 256").want(t, "ok", 0, "")
	runShell(k, "exit -1").want(t, "error", 255, "")
	// exit in a subshell ends only the subshell.
	runShell(k, "(exit 7); echo $?; v=$(exit 6; echo no); echo $? $v").want(t, "ok", 0, "7\n6\n")
	runShell(k, "echo $x $y").want(t, "ok", 0, "kept 1\n")
}

// TestBashErrexit: set -e stops the cell at the failing command, stays set,
// and never ends the shell.
func TestBashErrexit(t *testing.T) {
	k := startBash(t, "")
	r := runShell(k, "x=1\nset -e\nfalse\necho unreachable")
	r.want(t, "error", 1, "")
	if r.Line != 3 {
		t.Errorf("error line = %d, want 3", r.Line)
	}
	r = runShell(k, "echo $x; [[ $- == *e* ]] && echo errexit; echo still-there >&2")
	r.want(t, "ok", 0, "1\nerrexit\n")
	if r.Stderr != "still-there\n" {
		t.Errorf("stderr after set -e stopped a cell: %q", r.Stderr)
	}
	runShell(k, "false\necho unreachable").want(t, "error", 1, "")
	runShell(k, "f() { echo in-f; false; echo unreachable; }\necho before\nf").want(t, "error", 1, "before\nin-f\n")
	runShell(k, "if false; then :; fi; false || echo tolerated; x=2").want(t, "ok", 0, "tolerated\n")
	runShell(k, "set +e; false; echo on; (false); echo $?").want(t, "ok", 0, "on\n1\n")
	runShell(k, "echo $x").want(t, "ok", 0, "2\n")
}

// TestBashShellReplaced: when the shell really ends, a new one starts and
// the cell says so. If the old one could save its state (it ends through
// bash's exit path), the new one has it.
func TestBashShellReplaced(t *testing.T) {
	k := startBash(t, "")
	dir := t.TempDir()
	runShell(k, "x=1; declare -A m=([k]=v); f() { echo in-f; }; alias ll='echo aliased'; cd "+dir+"; umask 027; set -eu").want(t, "ok", 0, "")
	// Under set -e, an expansion error ends bash itself.
	r := runShell(k, "echo before; echo $undefined_kiln; echo unreachable")
	r.want(t, "error", 1, "before\n")
	if r.Error == nil || r.Error.Name != "ShellExited" || !strings.Contains(r.Error.Message, "old one's variables") {
		t.Errorf("error = %+v, want ShellExited with the state kept", r.Error)
	}
	runShell(k, "echo $x ${m[k]} $-; f; ll; pwd; umask").want(t, "ok", 0, "1 v ehiuBEs\nin-f\naliased\n"+dir+"\n0027\n")
	runShell(k, "set +eu; y=2")
	r = runShell(k, "echo bye; builtin exit 4")
	r.want(t, "error", 4, "bye\n")
	if r.Error == nil || r.Error.Name != "ShellExited" {
		t.Errorf("error = %+v, want ShellExited", r.Error)
	}
	runShell(k, "echo $x $y").want(t, "ok", 0, "1 2\n")
	// exec of a program and a signal leave no state behind.
	r = runShell(k, "exec true")
	r.want(t, "ok", 0, "")
	if !strings.Contains(r.Stderr, "were reset") {
		t.Errorf("stderr %q does not say the shell was reset", r.Stderr)
	}
	runShell(k, "echo \"x=${x-}\"; pwd").want(t, "ok", 0, "x=\n"+k.Cmd.Dir+"\n")
	r = runShell(k, "x=3; kill -KILL $$")
	r.want(t, "error", 137, "")
	if r.Error == nil || r.Error.Name != "ShellExited" || !strings.Contains(r.Error.Message, "SIGKILL") {
		t.Errorf("error = %+v, want ShellExited naming SIGKILL", r.Error)
	}
	runShell(k, "echo alive ${x-}").want(t, "ok", 0, "alive\n")
	// The shell dying between cells is noticed at the next one.
	runShell(k, "x=4; (sleep 0.2; kill -KILL $$) &>/dev/null &")
	time.Sleep(500 * time.Millisecond)
	r = runShell(k, "echo ${x-unset}")
	r.want(t, "ok", 0, "unset\n")
	if !strings.Contains(r.Stderr, "between cells") {
		t.Errorf("stderr %q does not say the shell exited between cells", r.Stderr)
	}
}

func TestBashStdin(t *testing.T) {
	k := startBash(t, "")
	r := begin(k, kernelproto.Execute{Code: "cat; echo done", Stdin: "a\nb\n", HasStdin: true}).end(10 * time.Second)
	r.want(t, "ok", 0, "a\nb\ndone\n")
	r = begin(k, kernelproto.Execute{Code: "read -r l1; read -r l2; echo \"<$l1|$l2>\"", Stdin: "one\ntwo", HasStdin: true}).end(10 * time.Second)
	r.want(t, "ok", 0, "<one|two>\n")
	// Without stdin, reads see end of file at once.
	start := time.Now()
	r = begin(k, kernelproto.Execute{Code: "cat; read x || echo eof; echo \"x=$x\""}).end(10 * time.Second)
	r.want(t, "ok", 0, "eof\nx=\n")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("reading an empty stdin took %v", d)
	}
	// exec <file in a cell does not take the shell's command input away.
	runShell(k, "echo data > in.txt; exec <in.txt; read l; echo $l").want(t, "ok", 0, "data\n")
	runShell(k, "echo still").want(t, "ok", 0, "still\n")
}

func TestBashInterrupt(t *testing.T) {
	k := startBash(t, "")
	for _, code := range []string{
		"x=42; echo started; sleep 100; echo unreachable",
		"echo started; while true; do :; done",
		"f() { while :; do sleep 0.01; done; }; echo started; f; echo unreachable",
		"echo started; for i in $(seq 1000000); do :; done; echo unreachable",
	} {
		c := begin(k, kernelproto.Execute{Code: code})
		c.waitOutput("started", 10*time.Second)
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		k.Interrupt()
		r := c.end(5 * time.Second)
		t.Logf("%q: interrupted in %v", code, time.Since(start))
		r.want(t, "interrupted", 130, "started\n")
		runShell(k, "echo $x").want(t, "ok", 0, "42\n")
	}
	// An interrupt just after the request, before the cell is under way,
	// still stops it.
	c := begin(k, kernelproto.Execute{Code: "sleep 100"})
	k.Interrupt()
	if r := c.end(10 * time.Second); r.Status != "interrupted" {
		t.Errorf("early interrupt: status %q, want interrupted", r.Status)
	}
	// Interrupts between cells are ignored.
	k.Interrupt()
	time.Sleep(50 * time.Millisecond)
	runShell(k, "echo $x").want(t, "ok", 0, "42\n")
	// Background jobs survive an interrupt, as in a script.
	runShell(k, "sleep 100 & bg=$!")
	c = begin(k, kernelproto.Execute{Code: "echo started; sleep 100"})
	c.waitOutput("started", 10*time.Second)
	k.Interrupt()
	c.end(5 * time.Second)
	runShell(k, "kill -0 $bg && echo bg-alive; kill $bg").want(t, "ok", 0, "bg-alive\n")
}

func TestBashSyntaxError(t *testing.T) {
	k := startBash(t, "")
	r := runShell(k, "echo ran\nif then fi")
	r.want(t, "error", 2, "")
	if r.Error == nil || r.Error.Name != "SyntaxError" || r.Line != 2 || !strings.Contains(r.Error.Message, "`then'") {
		t.Fatalf("error = %+v, want a SyntaxError at line 2 naming `then'", r.Error)
	}
	r = runShell(k, "for i in 1 2; do\necho $i\n")
	if r.Error == nil || r.Error.Name != "SyntaxError" || !strings.Contains(r.Error.Message, "end of file") {
		t.Fatalf("error = %+v, want a SyntaxError about the end of file", r.Error)
	}
	runShell(k, "echo fine").want(t, "ok", 0, "fine\n")
}

func TestBashCheck(t *testing.T) {
	k := startBash(t, "")
	for _, tc := range []struct {
		code, status string
		line         int
	}{
		{"echo hi", "complete", 0},
		{"", "complete", 0},
		{"for i in 1; do echo $i; done\n", "complete", 0},
		{"if true; then", "incomplete", 0},
		{"if true; then\n  echo a\n", "incomplete", 0},
		{"echo 'open", "incomplete", 0},
		{"echo \"open", "incomplete", 0},
		{"f() {", "incomplete", 0},
		{"echo a |", "incomplete", 0},
		{"cat <<EOF\nhi", "incomplete", 0},
		{"echo a \\", "incomplete", 0},
		{"echo $(ls", "incomplete", 0},
		{"if then fi", "invalid", 1},
		{"echo ok\nfi", "invalid", 2},
		{"echo )", "invalid", 1},
	} {
		var got kernelproto.CheckResult
		mustUnmarshal(t, k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "k", Code: tc.code}), &got)
		if got.Type != kernelproto.TCheckResult || got.Status != tc.status || got.Line != tc.line {
			t.Errorf("check %q = %+v, want %s at line %d", tc.code, got, tc.status, tc.line)
		}
	}
}

func TestBashComplete(t *testing.T) {
	k := startBash(t, "")
	runShell(k, "kiln_func_abc() { :; }; KILN_VAR_XYZ=1; mkdir kiln_dir; touch kiln_file.txt; alias kiln_alias=ls").want(t, "ok", 0, "")
	for _, tc := range []struct {
		code    string
		want    string
		start   int
		notWant string
	}{
		{"kiln_fu", "kiln_func_abc", 0, ""},
		{"kiln_al", "kiln_alias", 0, ""},
		{"ech", "echo", 0, ""},
		{"ls; kiln_f", "kiln_func_abc", 4, "kiln_file.txt"},
		{"echo $KILN_V", "KILN_VAR_XYZ", 6, ""},
		{"echo ${KILN_V", "KILN_VAR_XYZ", 7, ""},
		{"cat kiln_fi", "kiln_file.txt", 4, ""},
		{"cat kiln_d", "kiln_dir/", 4, ""},
		{"echo $__kiln", "", 6, "__kiln_running"},
		{"__kiln_be", "", 0, "__kiln_begin"},
	} {
		var got kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "k", Code: tc.code, Cursor: len([]rune(tc.code))}), &got)
		has := func(s string) bool {
			for _, m := range got.Matches {
				if m == s {
					return true
				}
			}
			return false
		}
		if (tc.want != "" && !has(tc.want)) || (tc.notWant != "" && has(tc.notWant)) || got.CursorStart != tc.start || got.CursorEnd != len([]rune(tc.code)) {
			t.Errorf("complete %q = %+v; want %q in matches, %q not, replacing from %d", tc.code, got, tc.want, tc.notWant, tc.start)
		}
	}
	// The cursor counts code points and need not be at the end.
	var got kernelproto.Completion
	mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "k", Code: "echo é; kiln_fu; ls", Cursor: 15}), &got)
	if got.CursorStart != 8 || got.CursorEnd != 15 || len(got.Matches) != 1 || got.Matches[0] != "kiln_func_abc" {
		t.Errorf("completion in the middle = %+v", got)
	}
	// Completion does not disturb the session.
	runShell(k, "echo $KILN_VAR_XYZ").want(t, "ok", 0, "1\n")
}

// TestBashStrictOptions: set -euo pipefail, which make any failing command
// fatal, do not end the shell in the kernel's own requests.
func TestBashStrictOptions(t *testing.T) {
	k := startBash(t, "")
	runShell(k, "x=1; set -euo pipefail").want(t, "ok", 0, "")
	for _, code := range []string{"zzz_no_such", "cat /nonexistent/", "echo $zzz_no", "echo ${zzz_no"} {
		var got kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "k", Code: code, Cursor: len(code)}), &got)
		if len(got.Matches) != 0 {
			t.Errorf("complete %q = %v", code, got.Matches)
		}
	}
	runShell(k, "echo $x").want(t, "ok", 0, "1\n")
	runShell(k, "false | true; echo unreachable").want(t, "error", 1, "")
	runShell(k, "echo $x $-").want(t, "ok", 0, "1 ehiuBEs\n")
}

// TestBashDescriptors: user commands see only stdin, stdout and stderr: not
// the agent's channel nor the kernel's pipes to the shell.
func TestBashDescriptors(t *testing.T) {
	k := startBash(t, "")
	// The listing is of a child's fds, made by the shell once the child
	// sleeps (past its start-up, which opens files for a moment), so that
	// neither the glob's descriptor nor a passing one is in it.
	list := `p=$!; for i in {1..200}; do [[ $(</proc/$p/wchan) == *sleep* ]] && break; sleep 0.01; done
cd /proc/$p/fd && echo *; cd - >/dev/null; kill $p; wait $p || :`
	runShell(k, "sleep 5 &"+list).want(t, "ok", 0, "0 1 2\n")
	runShell(k, "(sleep 5) &"+list).want(t, "ok", 0, "0 1 2\n")
	runShell(k, "sleep 5 2>&1 &"+list).want(t, "ok", 0, "0 1 2\n")
}

// TestBashXtrace: set -x traces the user's commands, not the kernel's. (The
// cell runs in eval, so bash doubles PS4's first character: "++ echo a".)
func TestBashXtrace(t *testing.T) {
	k := startBash(t, "")
	for _, tc := range []struct{ code, stdout, trace string }{
		{"set -x; echo a", "a\n", "++ echo a\n"},
		{"echo b", "b\n", "++ echo b\n"},
		{"false; echo c", "c\n", "++ false\n++ echo c\n"}, // no trace of the kernel's ERR trap
		{"set +x; echo d", "d\n", "++ set +x\n"},
		{"echo e", "e\n", ""},
	} {
		r := runShell(k, tc.code)
		r.want(t, "ok", 0, tc.stdout)
		if r.Stderr != tc.trace {
			t.Errorf("%q: stderr = %q, want %q", tc.code, r.Stderr, tc.trace)
		}
	}
	r := runShell(k, "set -u; echo $undefined_kiln")
	if r.Status != "error" || !strings.Contains(r.Stderr, "unbound variable") {
		t.Errorf("set -u: %+v", r)
	}
	runShell(k, "echo after").want(t, "ok", 0, "after\n")
	r = runShell(k, "set -v; echo v")
	r.want(t, "ok", 0, "v\n")
	r = runShell(k, "echo w")
	r.want(t, "ok", 0, "w\n")
	if strings.Contains(r.Stderr, "kiln") {
		t.Errorf("set -v shows the kernel's commands: %q", r.Stderr)
	}
}

func TestBashLargeCell(t *testing.T) {
	k := startBash(t, "")
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("x=$((x + 1)) # a comment to make the line longer, longer, longer\n")
	}
	b.WriteString("echo $x\n")
	start := time.Now()
	runShell(k, b.String()).want(t, "ok", 0, "5000\n")
	t.Logf("%d-byte cell in %v", b.Len(), time.Since(start))
	runShell(k, "printf '%s' \"$(printf 'é%.0s' {1..3})\"").want(t, "ok", 0, "ééé")
}

// TestBashTiming logs the start-up and per-cell round trip.
func TestBashTiming(t *testing.T) {
	start := time.Now()
	k := startBash(t, "")
	t.Logf("ready in %v (%s)", time.Since(start), k.Ready.Version)
	if k.Ready.Language != "bash" || !strings.HasPrefix(k.Ready.Version, "5.") {
		t.Errorf("ready = %+v", k.Ready)
	}
	t.Logf("trivial cell round trip: %v", roundTrip(k, "true", 50))
}

// roundTrip is the mean time from sending a cell to reading its Done
// (without the harness's wait for the output pipes).
func roundTrip(k *localKernel, code string, n int) time.Duration {
	k.T.Helper()
	start := time.Now()
	for i := 0; i < n; i++ {
		id := k.CellID()
		k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: id, Code: code})
		for {
			var d kernelproto.Done
			mustUnmarshal(k.T, k.Read(10*time.Second), &d)
			if d.Type == kernelproto.TDone {
				if d.Status != kernelproto.StatusOK {
					k.T.Fatalf("%q: status %q", code, d.Status)
				}
				break
			}
		}
	}
	return time.Since(start) / time.Duration(n)
}

// TestBashArgv: the kernel travels on the command line, where one argument
// may not exceed 128 KiB (MAX_ARG_STRLEN).
func TestBashArgv(t *testing.T) {
	spec := Bash()
	if spec.Language != "bash" || len(spec.Argv) < 2 || spec.Argv[0] != "/usr/bin/python3" {
		t.Fatalf("spec = %+v", spec)
	}
	for i, a := range spec.Argv {
		if len(a) > 100<<10 {
			t.Errorf("argv[%d] is %d bytes", i, len(a))
		}
	}
}

// TestBashReadPrompt: read -p prints its prompt on stderr though stdin is
// not a terminal, and only then reads; without -p nothing is printed.
func TestBashReadPrompt(t *testing.T) {
	k := startBash(t, "")
	r := begin(k, kernelproto.Execute{Code: "read -r -p 'Name: ' n; echo \"hi $n\"\nread m; echo \"[$m]\"", Stdin: "bob\nx\n", HasStdin: true}).end(30 * time.Second)
	r.want(t, "ok", 0, "hi bob\n[x]\n")
	if r.Stderr != "Name: " {
		t.Errorf("stderr = %q, want the prompt %q", r.Stderr, "Name: ")
	}
	// The prompt is out before the read waits.
	in := kerneltest.NewStdin()
	c := beginInput(k, kernelproto.Execute{Code: "read -p 'Age? ' a; echo \"age $a\""}, in)
	if !waitFor(func() bool { return strings.Contains(k.StderrText(), "Age? ") }) {
		t.Errorf("the prompt did not come before the read; stderr %q", k.StderrText())
	}
	in.Write("42\n")
	c.end(30*time.Second).want(t, "ok", 0, "age 42\n")
}

// TestBashStderrExact: a cell's stderr is what it wrote, also when exit,
// set -e or an interrupt stops it (bash's empty line after an interrupt
// is not the cell's).
func TestBashStderrExact(t *testing.T) {
	k := startBash(t, "")
	for _, tc := range []struct {
		code, status string
		exit         int
	}{
		{"echo err >&2", "ok", 0},
		{"echo err >&2; exit 3", "error", 3},
		{"set -e; echo err >&2; false", "error", 1},
		{"set +e; echo err >&2; exec 2>/dev/null; echo hidden >&2", "ok", 0},
		{"echo err >&2", "ok", 0},
	} {
		r := runShell(k, tc.code)
		r.want(t, tc.status, tc.exit, "")
		if r.Stderr != "err\n" {
			t.Errorf("%q: stderr = %q, want %q", tc.code, r.Stderr, "err\n")
		}
	}
	c := begin(k, kernelproto.Execute{Code: "echo err >&2; echo started; sleep 30"})
	c.waitOutput("started", 10*time.Second)
	k.Interrupt()
	if r := c.end(30 * time.Second); r.Status != "interrupted" || r.Stderr != "err\n" {
		t.Errorf("interrupted cell: status %s, stderr %q, want %q", r.Status, r.Stderr, "err\n")
	}
}
