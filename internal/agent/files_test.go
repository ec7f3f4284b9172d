package agent_test

// The file operations tested through real sandboxes: the agent as PID 1,
// the service's client on the other end, user code planting what it likes.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// TestMain lets this test binary play the sandbox's parts: sandboxes
// re-execute the binary that makes them.
func TestMain(m *testing.M) {
	agent.Dispatch()
	os.Exit(m.Run())
}

func newSandbox(t *testing.T, spec native.Spec) *native.Sandbox {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("native.New: %v", err)
	}
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

// sh runs a shell command as the sandbox's user and fails the test unless
// it exits 0.
func sh(t *testing.T, sb *native.Sandbox, script string) string {
	t.Helper()
	var out bytes.Buffer
	info, err := sb.Agent.Exec(context.Background(), protocol.Exec{Argv: []string{"/bin/sh", "-c", script}, TimeoutMs: 10000, OutputBytes: 1 << 20}, &out, &out)
	if err != nil || info.Code != 0 {
		t.Fatalf("sh -c %q: exit %d, %v: %s", script, info.Code, err, out.String())
	}
	return out.String()
}

func write(t *testing.T, a *agentclient.Client, p, data string) {
	t.Helper()
	if err := a.WriteFile(context.Background(), p, []byte(data), 0); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, a *agentclient.Client, p string) string {
	t.Helper()
	data, err := a.ReadFile(context.Background(), p, 1<<20)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(data)
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := agentclient.ErrorCode(err); got != code {
		t.Errorf("%s = %v (code %q), want code %q", what, err, got, code)
	}
}

func TestMove(t *testing.T) {
	sb := newSandbox(t, native.Spec{})
	a := sb.Agent
	ctx := context.Background()

	t.Run("file", func(t *testing.T) {
		write(t, a, "f1", "one")
		if err := a.Move(ctx, "f1", "moved/deep/f1", false); err != nil {
			t.Fatal(err)
		}
		if got := read(t, a, "moved/deep/f1"); got != "one" {
			t.Errorf("moved file holds %q, want one", got)
		}
		_, err := a.Stat(ctx, "f1")
		wantCode(t, "stat of the source after a move", err, protocol.ErrNotFound)
		// The parents the move made belong to the user, like a write's.
		sh(t, sb, "echo x > moved/deep/mine")
	})

	t.Run("dir", func(t *testing.T) {
		write(t, a, "d1/sub/f", "in d1")
		if err := a.Move(ctx, "/workspace/d1", "d2", false); err != nil {
			t.Fatal(err)
		}
		if got := read(t, a, "d2/sub/f"); got != "in d1" {
			t.Errorf("file in the moved dir holds %q", got)
		}
	})

	t.Run("onto existing", func(t *testing.T) {
		write(t, a, "src", "new")
		write(t, a, "dst", "old")
		err := a.Move(ctx, "src", "dst", false)
		wantCode(t, "move onto an existing file without overwrite", err, protocol.ErrExists)
		if err == nil || !strings.Contains(err.Error(), "src -> dst") || !strings.Contains(err.Error(), "exists") {
			t.Errorf("message %q should name both paths and say the target exists", err)
		}
		if read(t, a, "src") != "new" || read(t, a, "dst") != "old" {
			t.Error("a refused move changed a file")
		}
		if err := a.Move(ctx, "src", "dst", true); err != nil {
			t.Fatal(err)
		}
		if got := read(t, a, "dst"); got != "new" {
			t.Errorf("after an overwriting move dst holds %q, want new", got)
		}
		// Without overwrite a symlink is an existing target too, dangling or not.
		sh(t, sb, "ln -s /nowhere dangling")
		write(t, a, "src2", "x")
		wantCode(t, "move onto a dangling symlink", a.Move(ctx, "src2", "dangling", false), protocol.ErrExists)
	})

	t.Run("type clashes", func(t *testing.T) {
		write(t, a, "tc/file", "x")
		write(t, a, "tc/full/inner", "x")
		if err := a.Mkdir(ctx, "tc/dir"); err != nil {
			t.Fatal(err)
		}
		// A directory is never replaced, full, empty, by a file or a dir.
		for _, src := range []string{"tc/file", "tc/dir"} {
			for _, dst := range []string{"tc/full", "tc/dir2"} {
				if err := a.Mkdir(ctx, "tc/dir2"); err != nil {
					t.Fatal(err)
				}
				wantCode(t, "move "+src+" over the directory "+dst, a.Move(ctx, src, dst, true), protocol.ErrIsDir)
			}
		}
		if got := read(t, a, "tc/full/inner"); got != "x" {
			t.Errorf("tc/full/inner holds %q after refused moves", got)
		}
		wantCode(t, "move under a file", a.Move(ctx, "tc/dir", "tc/file/x", false), protocol.ErrNotDir)
		wantCode(t, "move under a file's child", a.Move(ctx, "tc/dir", "tc/file/x/y", false), protocol.ErrNotDir)
		wantCode(t, "move of a missing entry", a.Move(ctx, "tc/nope", "tc/x", false), protocol.ErrNotFound)
	})

	t.Run("into itself", func(t *testing.T) {
		write(t, a, "self/f", "x")
		for _, to := range []string{"self/sub", "self/a/b", "self"} {
			wantCode(t, "move self to "+to, a.Move(ctx, "self", to, true), protocol.ErrInvalid)
		}
		// Through a link inside the workspace only the kernel can tell.
		sh(t, sb, "ln -s self selflink")
		wantCode(t, "move self into itself through a link", a.Move(ctx, "self", "selflink/sub", false), protocol.ErrInvalid)
		wantCode(t, "move the workspace", a.Move(ctx, "/", "x", false), protocol.ErrInvalid)
		wantCode(t, "move onto the workspace", a.Move(ctx, "self", "/workspace", true), protocol.ErrInvalid)
		if got := read(t, a, "self/f"); got != "x" {
			t.Errorf("after refused moves self/f holds %q", got)
		}
	})

	t.Run("out of the workspace", func(t *testing.T) {
		write(t, a, "keep", "secret")
		sh(t, sb, "ln -s /tmp tmplink && ln -s ../../etc up && echo theirs > /tmp/y")
		for _, to := range []string{"../x", "a/../../x", "/workspace/../x", "tmplink/x", "up/x"} {
			if err := a.Move(ctx, "keep", to, true); err == nil {
				t.Errorf("Move(keep, %q) succeeded", to)
			}
		}
		for _, from := range []string{"../etc/passwd", "tmplink/y", "up/hostname"} {
			if err := a.Move(ctx, from, "stolen", false); err == nil {
				t.Errorf("Move(%q, stolen) succeeded", from)
			}
		}
		if out := sh(t, sb, "ls /tmp; cat /workspace/keep"); out != "y\nsecret" {
			t.Errorf("after refused moves /tmp and keep hold %q", out)
		}
		// An absolute name means a name in the workspace, never the host's.
		if err := a.Move(ctx, "keep", "/etc/kiln-move-test", false); err != nil {
			t.Fatal(err)
		}
		if got := read(t, a, "etc/kiln-move-test"); got != "secret" {
			t.Errorf("workspace etc/kiln-move-test holds %q", got)
		}
		if _, err := os.Lstat("/etc/kiln-move-test"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the host's /etc/kiln-move-test: %v", err)
		}
		sh(t, sb, "! test -e /etc/kiln-move-test")
		// A link itself may move inside the workspace; it is not followed.
		if err := a.Move(ctx, "tmplink", "tmplink2", false); err != nil {
			t.Errorf("moving a symlink itself: %v", err)
		}
		if fi, err := a.Stat(ctx, "tmplink2"); err != nil || fi.Type != "symlink" {
			t.Errorf("stat of the moved link = %+v, %v", fi, err)
		}
	})
}

func TestExclusiveWrite(t *testing.T) {
	sb := newSandbox(t, native.Spec{})
	a := sb.Agent
	ctx := context.Background()
	if _, err := a.CreateFrom(ctx, "new/f", strings.NewReader("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := a.CreateFrom(ctx, "new/f", strings.NewReader("second"), 0)
	wantCode(t, "exclusive write over a file", err, protocol.ErrExists)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("errors.Is(%v, fs.ErrExist) = false", err)
	}
	if got := read(t, a, "new/f"); got != "first" {
		t.Errorf("after a refused exclusive write the file holds %q", got)
	}
	sh(t, sb, "ln -s /tmp/target planted")
	_, err = a.CreateFrom(ctx, "planted", strings.NewReader("x"), 0)
	wantCode(t, "exclusive write over a dangling symlink", err, protocol.ErrExists)
	sh(t, sb, "! test -e /tmp/target")
	// Streaming: several chunks, and the later ones append to the new file.
	big := bytes.Repeat([]byte("abcdefgh"), protocol.ChunkSize/4)
	if n, err := a.CreateFrom(ctx, "big", bytes.NewReader(big), 0); err != nil || n != int64(len(big)) {
		t.Fatalf("CreateFrom(big) = %d, %v", n, err)
	}
	var back bytes.Buffer
	if n, err := a.ReadTo(ctx, "big", &back, int64(len(big))+1); err != nil || n != int64(len(big)) || !bytes.Equal(back.Bytes(), big) {
		t.Errorf("ReadTo(big) = %d, %v; content equal: %v", n, err, bytes.Equal(back.Bytes(), big))
	}
}

func TestFileErrorCodes(t *testing.T) {
	sb := newSandbox(t, native.Spec{Limits: kiln.Limits{WorkspaceBytes: 2 * kiln.MiB, TmpBytes: 2 * kiln.MiB}})
	a := sb.Agent
	ctx := context.Background()
	var sink bytes.Buffer
	_, err := a.ReadTo(ctx, "missing", &sink, 10)
	wantCode(t, "read of a missing file", err, protocol.ErrNotFound)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", err)
	}
	write(t, a, "file", "x")
	wantCode(t, "write under a file", a.WriteFile(ctx, "file/x", []byte("x"), 0), protocol.ErrNotDir)
	_, err = a.List(ctx, "file")
	wantCode(t, "list of a file", err, protocol.ErrNotDir)
	wantCode(t, "write under a file's child", a.WriteFile(ctx, "file/x/y", []byte("x"), 0), protocol.ErrNotDir)
	write(t, a, "dir/f", "x")
	wantCode(t, "delete of a full dir", a.Delete(ctx, "dir", false), protocol.ErrNotEmpty)
	_, err = a.ReadTo(ctx, "dir", &sink, 10)
	wantCode(t, "read of a directory", err, protocol.ErrInvalid)

	// The workspace is 2 MiB: filling it says so in a way the service can
	// tell from any other failure.
	_, err = a.WriteFrom(ctx, "fill", io.LimitReader(zeros{}, 3<<20), 0)
	wantCode(t, "write past a full workspace", err, protocol.ErrNoSpace)
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("message %v should say no space left", err)
	}
	wantCode(t, "a small write into the full workspace", a.WriteFile(ctx, "more", make([]byte, 64<<10), 0), protocol.ErrNoSpace)
	// Once the space is back, writes work again.
	if err := a.Delete(ctx, "fill", false); err != nil {
		t.Fatal(err)
	}
	write(t, a, "after", "ok")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
