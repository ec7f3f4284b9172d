package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestMain(m *testing.M) {
	agent.Dispatch() // TestRunInSandbox makes sandboxes, which re-execute this binary
	os.Exit(m.Run())
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"ok/file.txt", true},
		{"file.txt", true},
		{"a/b/c/d.csv", true},
		{"./x", true},
		{"a/../b", true}, // stays inside
		{"..x", true},    // a name that starts with dots
		{"x..", true},
		{"sp ace", true},
		{"ünïcode.txt", true},
		{strings.Repeat("a", 1024), true},

		{"", false},
		{".", false},
		{"./", false},
		{"a/..", false},
		{"..", false},
		{"../x", false},
		{"a/../../x", false},
		{"/abs", false},
		{"/", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\rb", false},
		{"\xff\xfe", false},
		{strings.Repeat("a", 1025), false},
	}
	for _, tt := range tests {
		err := ValidatePath(tt.path)
		if tt.ok && err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", tt.path, err)
		}
		if !tt.ok {
			if err == nil {
				t.Errorf("ValidatePath(%q) = nil, want an error", tt.path)
			} else if k := kiln.KindOf(err); k != kiln.Invalid {
				t.Errorf("ValidatePath(%q): kind %s, want %s", tt.path, k, kiln.Invalid)
			}
		}
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"ok/file.txt", "../x", "a/../../x", "/abs", "a\x00b", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		// Anything accepted stays below the workspace, judged by a
		// different method: joining it onto a root and checking the prefix.
		const root = "/workspace"
		if j := joinClean(root, p); j == root || !strings.HasPrefix(j, root+"/") {
			t.Errorf("ValidatePath(%q) accepted a path that resolves to %q", p, j)
		}
	})
}

func joinClean(root, p string) string {
	var parts []string
	for _, c := range strings.Split(root+"/"+p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, c)
		}
	}
	return "/" + strings.Join(parts, "/")
}

// TestRunRefusesBadInput: invalid runs fail with the right kind before any
// sandbox is made. The engine has no backend at all, so touching it would
// panic; that is reported as a bug in the ordering.
func TestRunRefusesBadInput(t *testing.T) {
	ok := Run{Language: "python", Code: "print(1)"}
	with := func(f func(*Run)) Run { r := ok; f(&r); return r }
	manyFiles := make([]File, MaxFiles+1)
	for i := range manyFiles {
		manyFiles[i] = File{Path: fmt.Sprintf("f%d", i)}
	}
	tests := []struct {
		name string
		run  Run
		kind kiln.Kind
		want string // in the message
	}{
		{"unknown language", with(func(r *Run) { r.Language = "cobol" }), kiln.Invalid, "bash, c, cpp, fortran, go, java, javascript, php, postgres, python, ruby, rust, sql, typescript"},
		{"no language", with(func(r *Run) { r.Language = "" }), kiln.Invalid, "no language"},
		{"empty code", with(func(r *Run) { r.Code = "" }), kiln.Invalid, "empty"},
		{"blank code", with(func(r *Run) { r.Code = " \n\t\r\n" }), kiln.Invalid, "empty"},
		{"code too large", with(func(r *Run) { r.Code = "#" + strings.Repeat("x", MaxCodeBytes) }), kiln.TooLarge, "1 MiB"},
		{"stdin too large", with(func(r *Run) { r.Stdin = make([]byte, MaxStdinBytes+1) }), kiln.TooLarge, "16 MiB"},
		{"too many args", with(func(r *Run) { r.Args = make([]string, MaxArgs+1) }), kiln.TooLarge, "1025 arguments"},
		{"too many files", with(func(r *Run) { r.Files = manyFiles }), kiln.TooLarge, "1001 files"},
		{"files too large", with(func(r *Run) {
			r.Files = []File{{Path: "a", Data: make([]byte, MaxFilesBytes/2+1)}, {Path: "b", Data: make([]byte, MaxFilesBytes/2)}}
		}), kiln.TooLarge, "64 MiB"},
		{"file leaves the workspace", with(func(r *Run) { r.Files = []File{{Path: "../x"}} }), kiln.Invalid, "leaves the workspace"},
		{"file with an absolute path", with(func(r *Run) { r.Files = []File{{Path: "/etc/passwd"}} }), kiln.Invalid, "relative"},
		{"file without a name", with(func(r *Run) { r.Files = []File{{Path: ""}} }), kiln.Invalid, "name"},
		{"file replaces the program", with(func(r *Run) { r.Files = []File{{Path: "./main.py"}} }), kiln.Invalid, "replace the program"},
		{"memory too small", with(func(r *Run) { r.Limits.MemoryBytes = kiln.KiB }), kiln.Invalid, "memory"},
		{"timeout too long", with(func(r *Run) { r.Limits.Timeout = 100 * time.Hour }), kiln.Invalid, "timeout"},
		{"negative timeout", with(func(r *Run) { r.Limits.Timeout = -time.Second }), kiln.Invalid, "timeout"},
		{"too many pids", with(func(r *Run) { r.Limits.Pids = 100000 }), kiln.Invalid, "pids"},
		{"negative cpu", with(func(r *Run) { r.Limits.CPUMillis = -1000 }), kiln.Invalid, "cpu"},
		{"output too small", with(func(r *Run) { r.Limits.OutputBytes = 10 }), kiln.Invalid, "output"},
	}
	e := New(nil, discard())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			x, err := runNoPanic(t, e, tt.run, &stdout, &stderr)
			if err == nil {
				t.Fatalf("Run succeeded (%+v), want a %s error", x, tt.kind)
			}
			if k := kiln.KindOf(err); k != tt.kind {
				t.Errorf("kind %s, want %s (%v)", k, tt.kind, err)
			}
			if msg := kiln.Message(err); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not mention %q", msg, tt.want)
			}
			if stdout.Len()+stderr.Len() != 0 {
				t.Errorf("wrote output for a refused run: %q %q", stdout.String(), stderr.String())
			}
		})
	}
}

func runNoPanic(t *testing.T, e *Engine, r Run, stdout, stderr io.Writer) (x kiln.Exit, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Run touched the backend for an invalid run (panic: %v); validation must come first", p)
		}
	}()
	return e.Run(context.Background(), r, stdout, stderr)
}

func TestDescribe(t *testing.T) {
	lim := kiln.Limits{Timeout: 1500 * time.Millisecond, MemoryBytes: 64 * kiln.MiB, Pids: 16, OutputBytes: kiln.KiB}
	tests := []struct {
		name string
		x    kiln.Exit
		lim  kiln.Limits
		want []string
	}{
		{"nothing hit", kiln.Exit{Code: 1}, lim, nil},
		{"time", kiln.Exit{Limits: []kiln.LimitHit{kiln.HitTime}}, lim,
			[]string{"kiln: time limit reached: the program ran longer than 1.5s and was stopped"}},
		{"memory", kiln.Exit{Limits: []kiln.LimitHit{kiln.HitMemory}}, lim,
			[]string{"kiln: memory limit reached: the program needed more than 64 MiB and was killed"}},
		{"pids", kiln.Exit{Limits: []kiln.LimitHit{kiln.HitPids}}, lim,
			[]string{"kiln: process limit reached: the program tried to run more than 16 processes or threads at once"}},
		{"output", kiln.Exit{Limits: []kiln.LimitHit{kiln.HitOutput}}, lim,
			[]string{"kiln: output limit reached: the program wrote more than 1 KiB; the output was truncated and the program stopped"}},
		{"defaults when no limits were given", kiln.Exit{Limits: []kiln.LimitHit{kiln.HitTime, kiln.HitMemory, kiln.HitPids, kiln.HitOutput}}, kiln.Limits{},
			[]string{
				"kiln: time limit reached: the program ran longer than 30s and was stopped",
				"kiln: memory limit reached: the program needed more than 512 MiB and was killed",
				"kiln: process limit reached: the program tried to run more than 128 processes or threads at once",
				"kiln: output limit reached: the program wrote more than 1 MiB; the output was truncated and the program stopped",
			}},
		{"cancelled", kiln.Exit{Canceled: true, Signal: "SIGKILL"}, lim, []string{"kiln: the run was cancelled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Describe(tt.x, tt.lim)); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunInSandbox is the valid path through the engine, for contrast with
// the refusals above: program, files, args and stdin all arrive.
func TestRunInSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	x, err := New(b, discard()).Run(context.Background(), Run{
		Language: "python",
		Code:     "import sys\nprint(open('in/data.txt').read(), sys.argv[1:], sys.stdin.read())\nsys.exit(3)",
		Args:     []string{"a", "b c"},
		Stdin:    []byte("from stdin"),
		Files:    []File{{Path: "in/data.txt", Data: []byte("data")}},
		Limits:   kiln.Limits{Timeout: 10 * time.Second},
	}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if want := "data ['a', 'b c'] from stdin\n"; stdout.String() != want || x.Code != 3 || len(x.Limits) != 0 {
		t.Errorf("stdout %q, exit %+v, stderr %q; want %q, code 3, no limits hit", stdout.String(), x, stderr.String(), want)
	}
}

// Run is the fast path for script languages; the others go through
// RunCell, and Run says so before any sandbox is made.
func TestRunPointsToRunCell(t *testing.T) {
	e := New(nil, nil)
	_, err := e.Run(context.Background(), Run{Language: "c", Code: "int main(){}"}, io.Discard, io.Discard)
	if kiln.KindOf(err) != kiln.Unsupported || !strings.Contains(err.Error(), "RunCell") {
		t.Errorf("Run(c) = %v, want an unsupported error naming RunCell", err)
	}
}

// The native backend is the engine's backend.
var _ Backend = (*native.Backend)(nil)
