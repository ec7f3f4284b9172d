package agent

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/internal/protocol"
)

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"", ".", ""},
		{"/", ".", ""},
		{"a.txt", "a.txt", ""},
		{"/workspace/a/b", "a/b", ""},
		{"a/./b/../c", "a/c", ""},
		{"../etc/passwd", "", "leaves the workspace"},
		{"a/../../x", "", "leaves the workspace"},
		{"/workspace/../etc", "", "leaves the workspace"},
		{"a\x00b", "", "NUL"},
		{strings.Repeat("a", 5000), "", "longer than 4096"},
	} {
		got, msg := cleanPath(tc.in)
		if got != tc.want || (tc.err == "") != (msg == "") || !strings.Contains(msg, tc.err) {
			t.Errorf("cleanPath(%.20q) = %q, %q; want %q, error containing %q", tc.in, got, msg, tc.want, tc.err)
		}
	}
}

func TestValidateExec(t *testing.T) {
	ok := protocol.Exec{Argv: []string{"true"}, TimeoutMs: 1000, OutputBytes: 1000}
	if msg := validateExec(ok); msg != "" {
		t.Fatalf("valid exec refused: %s", msg)
	}
	for _, tc := range []struct {
		name string
		mod  func(*protocol.Exec)
	}{
		{"empty argv", func(e *protocol.Exec) { e.Argv = nil }},
		{"empty program", func(e *protocol.Exec) { e.Argv = []string{""} }},
		{"no timeout", func(e *protocol.Exec) { e.TimeoutMs = 0 }},
		{"no output limit", func(e *protocol.Exec) { e.OutputBytes = -1 }},
		{"NUL in argv", func(e *protocol.Exec) { e.Argv = []string{"a\x00b"} }},
		{"env without =", func(e *protocol.Exec) { e.Env = []string{"FOO"} }},
		{"env without key", func(e *protocol.Exec) { e.Env = []string{"=x"} }},
		{"absolute dir", func(e *protocol.Exec) { e.Dir = "/etc" }},
		{"dir escapes", func(e *protocol.Exec) { e.Dir = "a/../../etc" }},
	} {
		e := ok
		tc.mod(&e)
		if validateExec(e) == "" {
			t.Errorf("%s: accepted %+v", tc.name, e)
		}
	}
}

// TestImports keeps the code that runs inside every sandbox small: it may
// use the standard library, x/sys, Landlock and kiln's own inside packages,
// and nothing that belongs to the service.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	allowed := []string{
		"github.com/kiln-dev/kiln/internal/agent",
		"github.com/kiln-dev/kiln/internal/cgroups",
		"github.com/kiln-dev/kiln/internal/kernelproto",
		"github.com/kiln-dev/kiln/internal/protocol",
		"github.com/kiln-dev/kiln/internal/seccomp",
		"github.com/landlock-lsm/go-landlock/",
		"golang.org/x/sys/",
		"golang.org/x/net/bpf",
		"kernel.org/pub/linux/libs/security/libcap/psx",
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		okay := false
		for _, a := range allowed {
			if pkg == a || strings.HasPrefix(pkg, a) {
				okay = true
			}
		}
		if !okay {
			bad = append(bad, pkg)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("the agent imports packages outside its allowlist: %v", bad)
	}
}

// TestErrorCode: the service tells file errors apart by code, so each errno
// a file operation can meet maps to its class, also when wrapped as the
// os package wraps it.
func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, protocol.ErrNotFound},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EEXIST}, protocol.ErrExists},
		{&os.LinkError{Op: "renameat", Old: "a", New: "b", Err: syscall.ENOTEMPTY}, protocol.ErrNotEmpty},
		{&os.LinkError{Op: "renameat", Old: "a", New: "b", Err: syscall.EISDIR}, protocol.ErrIsDir},
		{&fs.PathError{Op: "mkdirat", Path: "x", Err: syscall.ENOTDIR}, protocol.ErrNotDir},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, protocol.ErrNoSpace},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, protocol.ErrNoSpace},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EFBIG}, protocol.ErrTooLarge},
		{&os.LinkError{Op: "renameat", Old: "a", New: "a/b", Err: syscall.EINVAL}, protocol.ErrInvalid},
		{&fs.PathError{Op: "openat", Path: "x", Err: errors.New("path escapes from parent")}, protocol.ErrInvalid},
		{errExists("target exists"), protocol.ErrExists},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}, protocol.ErrInternal},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("errorCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
