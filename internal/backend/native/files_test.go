package native

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/protocol"
)

func TestFileOperations(t *testing.T) {
	sb := newSandbox(t, Spec{})
	ctx := context.Background()
	a := sb.Agent

	big := strings.Repeat("0123456789", 100_000) // 1 MB: several chunks
	if err := a.WriteFile(ctx, "data/big.txt", []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := a.ReadFile(ctx, "/workspace/data/big.txt", 2<<20)
	if err != nil || string(got) != big {
		t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(big))
	}
	if got, err := a.ReadFile(ctx, "data/big.txt", 10); err != nil || string(got) != "0123456789" {
		t.Errorf("read with limit 10 = %q, %v", got, err)
	}
	fi, err := a.Stat(ctx, "data/big.txt")
	if err != nil || fi.Size != int64(len(big)) || fi.Mode != 0o600 || fi.Type != "file" {
		t.Errorf("stat = %+v, %v", fi, err)
	}
	if err := a.Mkdir(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	// User code can write where the service made directories.
	if out, info := run(t, sb, "/bin/sh", "-c", "echo x > a/b/c/mine && stat -c %U data/big.txt a/b/c"); info.Code != 0 || out != "user\nuser\n" {
		t.Errorf("user code in service-made dirs: %q exit %d", out, info.Code)
	}
	ents, err := a.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name+":"+e.Type)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "a:dir data:dir" {
		t.Errorf("list = %v", names)
	}
	if err := a.Delete(ctx, "a", false); err == nil {
		t.Error("non-recursive delete of a non-empty dir succeeded")
	}
	if err := a.Delete(ctx, "a", true); err != nil {
		t.Error(err)
	}
	if _, err := a.Stat(ctx, "a"); remoteCode(err) != protocol.ErrNotFound {
		t.Errorf("stat after delete = %v, want not_found", err)
	}
	if err := a.Delete(ctx, "/", true); remoteCode(err) != protocol.ErrInvalid {
		t.Errorf("deleting the workspace itself = %v, want invalid", err)
	}
}

// TestFileOpsContainSymlinks plants symlinks from user code that point out
// of the workspace and checks that no file operation follows them out.
func TestFileOpsContainSymlinks(t *testing.T) {
	sb := newSandbox(t, Spec{})
	ctx := context.Background()
	a := sb.Agent
	plant := "ln -s /etc/passwd pw && ln -s /proc/1 agentproc && ln -s /tmp tmpdir && ln -s ../../etc up && ln -s /proc/self/mem mem"
	if out, info := run(t, sb, "/bin/sh", "-c", plant); info.Code != 0 {
		t.Fatalf("planting symlinks: %q", out)
	}
	for _, p := range []string{"pw", "agentproc/environ", "tmpdir/x", "up/passwd", "mem", "../etc/passwd", "/workspace/../etc/passwd"} {
		if data, err := a.ReadFile(ctx, p, 1<<20); err == nil {
			t.Errorf("ReadFile(%q) followed a link out of the workspace: %q", p, data)
		}
		if err := a.WriteFile(ctx, p, []byte("pwned"), 0); err == nil {
			t.Errorf("WriteFile(%q) followed a link out of the workspace", p)
		}
	}
	if err := a.Mkdir(ctx, "tmpdir/sub"); err == nil {
		t.Error("Mkdir through a symlinked directory succeeded")
	}
	if out, _ := run(t, sb, "/bin/sh", "-c", "ls /tmp; cat /etc/passwd | head -1"); strings.Contains(out, "pwned") || strings.Contains(out, "sub") {
		t.Errorf("something was written outside the workspace: %q", out)
	}
	// Stat and delete act on the link itself.
	if fi, err := a.Stat(ctx, "pw"); err != nil || fi.Type != "symlink" {
		t.Errorf("stat of a symlink = %+v, %v", fi, err)
	}
	if err := a.Delete(ctx, "tmpdir", false); err != nil {
		t.Errorf("deleting a symlink: %v", err)
	}
}

func TestFileBadInput(t *testing.T) {
	sb := newSandbox(t, Spec{Limits: smallDisk()})
	ctx := context.Background()
	a := sb.Agent
	for _, p := range []string{"a\x00b", strings.Repeat("x/", 3000)} {
		if err := a.WriteFile(ctx, p, []byte("x"), 0); remoteCode(err) != protocol.ErrInvalid {
			t.Errorf("WriteFile(%.20q) = %v, want invalid", p, err)
		}
	}
	if err := a.WriteFile(ctx, "", []byte("x"), 0); err == nil {
		t.Error("WriteFile with no name succeeded")
	}
	// The workspace is 2 MiB: a 3 MiB file does not fit and says so.
	err := a.WriteFile(ctx, "big", make([]byte, 3<<20), 0)
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("WriteFile over the workspace size = %v, want no space left", err)
	}
	if _, err := a.ReadFile(ctx, "nope", 10); remoteCode(err) != protocol.ErrNotFound {
		t.Errorf("ReadFile of a missing file = %v, want not_found", err)
	}
	if err := a.Mkdir(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadFile(ctx, "d", 10); remoteCode(err) != protocol.ErrInvalid {
		t.Errorf("ReadFile of a directory = %v, want invalid", err)
	}
}

func remoteCode(err error) string {
	var re *agentclient.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}
