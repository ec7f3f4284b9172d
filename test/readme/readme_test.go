// Package readme_test runs the README's walkthroughs as a user would paste
// them, against a real `kiln serve` that the test starts, and checks what
// the user would look at: the mean, the chart, the history.
package readme_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/test/testkiln"
)

// readmeServer is the address the README's commands use; the test's
// server listens elsewhere, so the commands are pointed at it.
const readmeServer = "http://127.0.0.1:8420"

var kilnBin string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		os.Exit(m.Run()) // the tests skip, saying why
	}
	dir, err := os.MkdirTemp("", "kiln-readme-test")
	if err != nil {
		panic(err)
	}
	kilnBin = filepath.Join(dir, "kiln")
	build := exec.Command("go", "build", "-o", kilnBin, "../../cmd/kiln")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Printf("build kiln: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestServiceWalkthroughs runs the two blocks of "The service, with curl"
// in order: the curl walkthrough, then the same from the CLI.
func TestServiceWalkthroughs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the walkthroughs run cells in the sandboxes of a real kiln serve")
	}
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthroughs need %s, which is not installed (scripts/deps installs it)", tool)
		}
	}
	blocks := shellBlocks(t, "../../README.md", "## The service, with curl")
	if len(blocks) != 2 {
		t.Fatalf("the README's service section has %d command blocks, want 2 (curl, CLI): %q", len(blocks), blocks)
	}
	url, key := startServe(t)
	work := t.TempDir()

	// The curl walkthrough.
	out := runBlock(t, blocks[0], work, url, key, "")
	mean := out.of(t, "df.temp.mean()")
	if !strings.Contains(mean, `"status":"ok"`) || !strings.Contains(mean, "11.0") {
		t.Errorf("the mean of the temperatures: want status ok and 11.0, got\n%s", mean)
	}
	if plot := out.of(t, "savefig"); !strings.Contains(plot, `"status":"ok"`) {
		t.Errorf("the chart cell: want status ok, got\n%s", plot)
	}
	checkPNG(t, filepath.Join(work, "chart.png"))
	var hist struct {
		Executions []struct {
			Seq    int64
			Status string
			Code   string
		}
	}
	if err := json.Unmarshal([]byte(out.of(t, "# the history")), &hist); err != nil || len(hist.Executions) != 2 ||
		!strings.Contains(hist.Executions[0].Code, "df.temp.mean()") || hist.Executions[1].Status != "ok" {
		t.Errorf("the history: want the two cells, ok, got %+v (%v)\n%s", hist, err, out.of(t, "# the history"))
	}
	if sse := out.of(t, "text/event-stream"); !strings.Contains(sse, "event: stdout") || !strings.Contains(sse, "event: done") {
		t.Errorf("the streamed cell: want stdout and done events, got\n%s", sse)
	}

	// The same from the CLI, in the same directory: chart.png is fetched
	// again, so the first one goes.
	os.Remove(filepath.Join(work, "chart.png"))
	out = runBlock(t, blocks[1], work, url, key, "df.temp.max()\n")
	if mean := out.of(t, "df.temp.mean()"); strings.TrimSpace(mean) != "11.0" {
		t.Errorf("kiln exec of the mean: want 11.0, got %q", mean)
	}
	checkPNG(t, filepath.Join(work, "chart.png"))
	if o := out.of(t, "--save-outputs"); !strings.Contains(o, "saved to plots/output-1.png") {
		t.Errorf("kiln exec --save-outputs: want the image's file named, got\n%s", o)
	}
	checkPNG(t, filepath.Join(work, "plots", "output-1.png"))
	if h := out.of(t, "kiln history"); strings.Count(h, " ok ") < 3 || !strings.Contains(h, "read_csv") {
		t.Errorf("kiln history: want the two cells, ok, got\n%s", h)
	}
	if o := out.of(t, "kiln repl"); strings.TrimSpace(o) != "18" {
		t.Errorf("kiln repl on the session, typing df.temp.max(): want 18, got %q", o)
	}
	if k := out.of(t, "--name laptop"); !strings.Contains(k, "kiln_") {
		t.Errorf("kiln key create: want the new key, got\n%s", k)
	}
}

// shellBlocks returns the indented command blocks of the README section
// that starts with heading, each as its lines.
func shellBlocks(t *testing.T, file, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	in, inBlock := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
			inBlock = false
		case !in:
		case strings.HasPrefix(line, "    "):
			if !inBlock {
				blocks = append(blocks, nil)
				inBlock = true
			}
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], strings.TrimPrefix(line, "    "))
		case strings.TrimSpace(line) != "":
			inBlock = false
		}
	}
	return blocks
}

// outputs are what each command of a block printed on stdout.
type outputs struct {
	lines []string
	out   []string
}

// of is the output of the first command that contains part.
func (o outputs) of(t *testing.T, part string) string {
	t.Helper()
	for i, l := range o.lines {
		if strings.Contains(l, part) {
			return o.out[i]
		}
	}
	t.Fatalf("no command of the block contains %q: %q", part, o.lines)
	return ""
}

var markRE = regexp.MustCompile(`(?m)^@@readme (\d+)@@\n`)

// runBlock runs a block's commands in one bash, as pasted into a
// terminal, but stopping at the first that fails. The README's address
// is replaced by the test server's, and the environment holds only what
// the README says a user has: KEY, and kiln on PATH.
func runBlock(t *testing.T, lines []string, dir, url, key, stdin string) outputs {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -eE -o pipefail\ntrap 'echo \"the README command that failed: $cmd\" >&2' ERR\n")
	for i, l := range lines {
		l = strings.ReplaceAll(l, readmeServer, url)
		quoted := "'" + strings.ReplaceAll(l, "'", `'\''`) + "'"
		fmt.Fprintf(&script, "cmd=%s\nprintf '\\n@@readme %d@@\\n'\n%s\n", quoted, i, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin) // what the user types into a REPL the block starts
	home := t.TempDir()                  // no client config of the machine's user
	cmd.Env = []string{
		"PATH=" + filepath.Dir(kilnBin) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home, "LANG=C.UTF-8",
	}
	if url != "" {
		cmd.Env = append(cmd.Env, "KEY="+key, "KILN_SERVER="+url)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README block failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	o := outputs{lines: lines, out: make([]string, len(lines))}
	s := stdout.String()
	marks := markRE.FindAllStringSubmatchIndex(s, -1)
	if len(marks) != len(lines) {
		t.Fatalf("ran %d of the block's %d commands:\n%s", len(marks), len(lines), s)
	}
	for i, m := range marks {
		end := len(s)
		if i+1 < len(marks) {
			end = marks[i+1][0] - 1 // the newline printed before the next mark
		}
		o.out[i] = s[m[1]:max(end, m[1])]
	}
	return o
}

// checkPNG requires file to be a PNG image of a real chart's size.
func checkPNG(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Errorf("the chart: %v", err)
		return
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("the chart %s is not a PNG: %v", file, err)
		return
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("the chart is %dx%d pixels; want a real chart", b.Dx(), b.Dy())
	}
}

// startServe runs kiln serve on a fresh data directory and returns its URL
// and admin key; it is stopped when the test ends.
func startServe(t *testing.T) (url, key string) {
	t.Helper()
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin})
	return s.URL, s.Key
}

// TestLocalWalkthrough runs the block of "Using it locally" as pasted,
// without a terminal (so kiln repl reads no cells and leaves), except
// kiln bench, which takes minutes and has tests of its own.
func TestLocalWalkthrough(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: kiln run makes sandboxes")
	}
	var lines []string
	for _, b := range shellBlocks(t, "../../README.md", "## Using it locally") {
		for _, l := range b {
			if !strings.HasPrefix(l, "kiln bench") {
				lines = append(lines, l)
			}
		}
	}
	out := runBlock(t, lines, t.TempDir(), "", "", "")
	for _, c := range []struct{ cmd, want string }{
		{"kiln run hello.py", "hello from a sandbox\n"},
		{"-c 'print(1)'", "1\n"},
		{"kiln run --lang js -", "42\n"},
		{"--file data.csv analyse.py", "2 cities\n"},
		{"kiln run main.c", "hello from C\n"},
	} {
		if got := out.of(t, c.cmd); got != c.want {
			t.Errorf("%s printed %q, want %q", c.cmd, got, c.want)
		}
	}
	for _, c := range []struct{ cmd, want string }{
		{"kiln languages", "python"},
		{"kiln doctor", "Verdict: this host can run kiln sandboxes."},
	} {
		for i, l := range out.lines {
			if strings.HasPrefix(l, c.cmd) && !strings.Contains(out.out[i], c.want) {
				t.Errorf("%s does not say %q:\n%s", c.cmd, c.want, out.out[i])
			}
		}
	}
}
