package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRunShowsRichOutputs: plain kiln run takes the API's one-shot path,
// so display() works: an image is saved to a file that stdout names, and
// another rich output shows as its text, beside the program's own lines.
func TestRunShowsRichOutputs(t *testing.T) {
	needRoot(t)
	const png = "\\x89PNG\\r\\n\\x1a\\n" + "kiln"
	prog := "class Img:\n    def _repr_png_(self):\n        return b'" + png + "'\n" +
		richProgram + "display(Img())\nprint('after')\n"
	r := execKiln(t, invocation{}, "run", "--lang", "python", "-c", prog)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	// The program's own output and its displays come on two streams, so
	// only each one's order is kept.
	saved := regexp.MustCompile(`(?m)^\[image/png saved to (\S+)\]$`).FindStringSubmatch(r.stdout)
	own := regexp.MustCompile(`(?m)^(?:before|after)\n`)
	if saved == nil || own.ReplaceAllString(r.stdout, "") != "Bold()\n"+saved[0]+"\n" ||
		strings.Join(own.FindAllString(r.stdout, -1), "") != "before\nafter\n" {
		t.Fatalf("stdout %q; want before then after, and Bold() then the image's file", r.stdout)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(saved[1])) })
	if b, err := os.ReadFile(saved[1]); err != nil || !bytes.Equal(b, []byte("\x89PNG\r\n\x1a\nkiln")) {
		t.Errorf("the saved image %s: %q, %v; want the PNG bytes the program displayed", saved[1], b, err)
	}
}

// TestRunSavesOutputs: --save-outputs DIR saves the images as
// DIR/output-N.EXT, as kiln exec does, keeping the files already there.
func TestRunSavesOutputs(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "plots")
	prog := "class Img:\n    def _repr_png_(self):\n        return b'\\x89PNG\\r\\n\\x1a\\nkiln'\ndisplay(Img())\n"
	for n := 1; n <= 2; n++ {
		r := execKiln(t, invocation{}, "run", "--save-outputs", dir, "--lang", "python", "-c", prog)
		name := filepath.Join(dir, fmt.Sprintf("output-%d.png", n))
		if r.code != 0 || r.stdout != "[image/png saved to "+name+"]\n" {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want the image saved as %s", n, r.code, r.stdout, r.stderr, name)
		}
		if b, err := os.ReadFile(name); err != nil || !bytes.Equal(b, []byte("\x89PNG\r\n\x1a\nkiln")) {
			t.Errorf("%s: %q, %v; want the PNG bytes", name, b, err)
		}
	}
	if r := execKiln(t, invocation{}, "run", "--save-outputs", "/proc/version", "--lang", "python", "-c", "1"); r.code != 125 || !strings.Contains(r.stderr, "--save-outputs") {
		t.Errorf("--save-outputs on a file: exit %d, stderr %q; want 125 and a word on the flag", r.code, r.stderr)
	}
}

// TestRunScriptSemantics: on the one-shot path a program still ends as a
// script does: sys.exit's status (and its message, without a traceback),
// arguments in process.argv and in bash's $@ (one word each, a line break
// included).
func TestRunScriptSemantics(t *testing.T) {
	needRoot(t)
	tests := []struct {
		name, lang, code string
		args             []string
		wantCode         int
		wantOut, wantErr string
	}{
		{"sys.exit(3)", "python", "import sys\nprint('x')\nsys.exit(3)", nil, 3, "x\n", ""},
		{"sys.exit()", "python", "import sys\nsys.exit()\nprint('not reached')", nil, 0, "", ""},
		{"sys.exit(message)", "python", "import sys\nsys.exit('bye')", nil, 1, "", "bye\n"},
		{"process.argv", "js", "console.log(JSON.stringify(process.argv.slice(2)))", []string{"a", "b c"}, 0, "[\"a\",\"b c\"]\n", ""},
		{"bash $@", "bash", `printf '[%s]' "$@"`, []string{"one", "two\nlines", "'q'"}, 0, "[one][two\nlines]['q']", ""},
		{"bash's last status", "bash", "echo x\nfalse", nil, 1, "x\n", ""},
	}
	// The arguments come on the code's first line: its line numbers stay.
	lineno := func(args ...string) string {
		return execKiln(t, invocation{}, append([]string{"run", "--lang", "bash", "-c", "\n\necho $LINENO", "--"}, args...)...).stdout
	}
	if with, without := lineno("a", "b"), lineno(); with != without || with == "" {
		t.Errorf("bash's $LINENO on the third line: %q with arguments, %q without; want the same", with, without)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--lang", tt.lang, "-c", tt.code}, tt.args...)
			if len(tt.args) > 0 {
				args = append([]string{"run", "--lang", tt.lang, "-c", tt.code, "--"}, tt.args...)
			}
			r := execKiln(t, invocation{}, args...)
			if r.code != tt.wantCode || r.stdout != tt.wantOut || r.stderr != tt.wantErr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", r.code, r.stdout, r.stderr, tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
}
