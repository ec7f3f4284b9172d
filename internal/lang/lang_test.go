package lang

import (
	"context"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
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
	if len(infos) != len(All()) {
		t.Fatalf("Detect returned %d languages, want %d", len(infos), len(All()))
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
