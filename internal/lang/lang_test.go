package lang

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kernels"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/programs"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"python", "python"}, {"Python3", "python"}, {"py", "python"},
		{"js", "javascript"}, {"node", "javascript"}, {"sh", "bash"}, {" bash ", "bash"},
	} {
		l, err := Lookup(tc.in)
		if err != nil || l.Name != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tc.in, l, err, tc.want)
		}
	}
}

func TestLookupUnknownListsSupported(t *testing.T) {
	_, err := Lookup("cobol")
	if kiln.KindOf(err) != kiln.Invalid {
		t.Fatalf("kind = %v, want invalid", kiln.KindOf(err))
	}
	for _, name := range Names() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not list %s", err, name)
		}
	}
}

func TestByExt(t *testing.T) {
	if l, err := ByExt("hello.py"); err != nil || l.Name != "python" {
		t.Errorf("ByExt(hello.py) = %v, %v", l, err)
	}
	if _, err := ByExt("hello.txt"); err == nil {
		t.Error("ByExt(hello.txt) succeeded, want an error")
	}
	// Every extension of the registry counts, and an exact match wins over
	// one that ignores case (.C is C++, .c is C).
	for file, want := range map[string]string{"a.cc": "cpp", "b.C": "cpp", "c.c": "c", "d.F90": "fortran", "e.for": "fortran", "f.PY": "python"} {
		if l, err := ByExt(file); err != nil || l.Name != want {
			t.Errorf("ByExt(%s) = %v, %v; want %s", file, l, err, want)
		}
	}
}

// TestRegistryComplete: every language says its kind, its kernel (REPL) or
// its toolchain (program), its extensions, its runtime, its version probe and what to
// install; no two claim a name, an alias or an extension.
func TestRegistryComplete(t *testing.T) {
	for _, p := range checkRegistry(table) {
		t.Error(p)
	}
}

// TestRegistryCheckFindsGaps: the check above fails for each kind of gap.
func TestRegistryCheckFindsGaps(t *testing.T) {
	good := Language{Name: "cobol", Kind: Program, Ext: ".cob", Binary: "/usr/bin/cobc", Version: []string{"--version"}, Package: "gnucobol", Toolchain: programs.C}
	if p := good.Check(); len(p) != 0 {
		t.Fatalf("a complete entry has problems: %q", p)
	}
	for _, tc := range []struct {
		name  string
		spoil func(*Language)
		want  string
	}{
		{"no kernel", func(l *Language) { l.Kind = REPL }, "needs a kernel"},
		{"toolchain on a REPL language", func(l *Language) { l.Kind, l.Kernel = REPL, kernels.Python }, "not a toolchain"},
		{"no toolchain", func(l *Language) { l.Toolchain = nil }, "needs a toolchain"},
		{"toolchain without steps", func(l *Language) { l.Toolchain = &programs.Toolchain{} }, "lacks a build"},
		{"kernel of another language", func(l *Language) { l.Kind, l.Kernel = REPL, kernels.Python }, `"python"`},
		{"kernel on a program", func(l *Language) { l.Kernel = kernels.Python }, "not a kernel"},
		{"one-shot program", func(l *Language) { l.RunsOneShot = true }, "one-shot"},
		{"no extension", func(l *Language) { l.Ext = "" }, "extension"},
		{"bad extension", func(l *Language) { l.OtherExts = []string{"cbl"} }, `"cbl"`},
		{"no version probe", func(l *Language) { l.Version = nil }, "version probe"},
		{"relative binary", func(l *Language) { l.Binary = "cobc" }, "absolute"},
		{"no install hint", func(l *Language) { l.Package = "" }, "install hint"},
		{"no kind", func(l *Language) { l.Kind = "" }, "kind"},
	} {
		l := good
		tc.spoil(&l)
		if p := strings.Join(l.Check(), "; "); !strings.Contains(p, tc.want) {
			t.Errorf("%s: problems %q, want one with %q", tc.name, p, tc.want)
		}
	}
	dup := append(All(), Language{Name: "pythonic", Aliases: []string{"py"}, Kind: Program, Ext: ".py", Binary: "/usr/bin/x", Version: []string{"-v"}, Package: "x"})
	p := strings.Join(checkRegistry(dup), "; ")
	for _, want := range []string{`name "py" is python's`, `extension ".py" is python's`} {
		if !strings.Contains(p, want) {
			t.Errorf("a duplicate alias and extension: problems %q, want one with %q", p, want)
		}
	}
}

func TestBinariesInSandboxRoot(t *testing.T) {
	// The sandbox sees the host's /usr only, so a runtime elsewhere (a
	// version manager in /root, /opt) would be invisible inside.
	for _, l := range All() {
		if !strings.HasPrefix(l.Binary, "/usr/") {
			t.Errorf("%s runtime %s is outside /usr", l.Name, l.Binary)
		}
	}
}

func TestMissingRuntimeSaysWhatToInstall(t *testing.T) {
	l := Language{Name: "cobol", Binary: "/nonexistent/cobc", Package: "the Debian package gnucobol", Version: []string{"--version"}}
	_, err := l.DetectVersion(context.Background())
	if kiln.KindOf(err) != kiln.Unsupported || !strings.Contains(err.Error(), "gnucobol") || !strings.Contains(err.Error(), "/nonexistent/cobc") {
		t.Errorf("DetectVersion of a missing runtime = %v", err)
	}
}

func TestDetectListsEveryLanguage(t *testing.T) {
	infos := Detect(context.Background())
	var got []string
	for _, info := range infos {
		got = append(got, info.Name)
	}
	if want := Names(); !slices.Equal(got, want) {
		t.Fatalf("Detect lists %q, want the registry's %q", got, want)
	}
	for _, info := range infos {
		if info.Found == (info.Problem != "") {
			t.Errorf("%s: found %v but problem %q", info.Name, info.Found, info.Problem)
		}
		if info.Found && info.Version == "" {
			t.Errorf("%s: found without a version", info.Name)
		}
	}
}
