package service

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// TestDiskWorkspaceSurvivesReboot drives the default (disk) workspaces
// through a session's life: the size limit holds (no_space), the files
// survive the service stopping and the machine "rebooting" (the mount
// and loop device gone, as after a reboot), and deleting the session
// leaves no mount, loop device or file behind.
func TestDiskWorkspaceSurvivesReboot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make sandboxes and loop devices")
	}
	ctx := ctxT(t, 3*time.Minute)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	start := func() *Service {
		t.Helper()
		b, err := native.New(native.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(ctx, Config{DataDir: dir, PoolSize: -1}, st, engine.New(b, log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := start()
	t.Cleanup(func() { // before TempDir's, which cannot remove a mount
		svc.Close(context.Background())
		if ws, err := workspace.Open(filepath.Join(dir, "workspaces")); err == nil {
			ids, _ := ws.List()
			for _, id := range ids {
				ws.Remove(id)
			}
		}
	})
	if k := svc.Config().Workspaces; k != workspace.Disk {
		t.Errorf("default workspaces = %q, want disk", k)
	}
	u := kiln.User{Name: "alice"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess, err := svc.CreateSession(ctx, u, SessionSpec{Limits: kiln.Limits{WorkspaceBytes: 4 * kiln.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	wsDir := filepath.Join(dir, "workspaces")
	img, path := filepath.Join(wsDir, sess.ID+".img"), filepath.Join(wsDir, sess.ID)
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("the session's workspace has no disk image: %v", err)
	}

	withAgent := func(f func(*agentclient.Client)) {
		t.Helper()
		agent, release, err := svc.Workspace(ctx, u, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		f(agent)
	}
	withAgent(func(a *agentclient.Client) {
		if err := a.WriteFile(ctx, "keep.txt", []byte("still here"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := a.WriteFile(ctx, "big", make([]byte, 8*kiln.MiB), 0o644)
		if code := agentclient.ErrorCode(err); code != protocol.ErrNoSpace {
			t.Errorf("writing 8 MiB into a 4 MiB workspace = %v (code %q), want %s", err, code, protocol.ErrNoSpace)
		}
		a.Delete(ctx, "big", false)
	})

	// Stop the service, then take the mount away as a reboot would.
	svc.Close(ctx)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	waitLoopsGone(t, img)

	svc = start()
	got, err := svc.Session(ctx, u, sess.ID)
	if err != nil || got.Status != kiln.SessionActive {
		t.Fatalf("after the reboot the session is %+v, %v; want it active\n%s", got, err, logs)
	}
	withAgent(func(a *agentclient.Client) {
		b, err := a.ReadFile(ctx, "keep.txt", 1<<10)
		if err != nil || string(b) != "still here" {
			t.Errorf("after the reboot keep.txt = %q, %v; want the file written before", b, err)
		}
	})

	if err := svc.DeleteSession(ctx, u, sess.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, img} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after the session ended: %v", p, err)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), path) {
		t.Errorf("the workspace is still mounted after the session ended")
	}
	waitLoopsGone(t, img)
}

// waitLoopsGone waits for the loop devices backed by img to clear
// themselves, which they do a little after their last unmount.
func waitLoopsGone(t *testing.T, img string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		var held []string
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
				held = append(held, f)
			}
		}
		if len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices still hold %s: %v", img, held)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTmpfsWorkspaceLostSaysWhy: with tmpfs workspaces, a "reboot" (the
// mount gone) ends the session with a reason that says what was lost and
// why, and leaves nothing behind.
func TestTmpfsWorkspaceLostSaysWhy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make sandboxes")
	}
	ctx := ctxT(t, 2*time.Minute)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() *Service {
		t.Helper()
		b, err := native.New(native.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(ctx, Config{DataDir: dir, PoolSize: -1, Workspaces: workspace.Tmpfs}, st, engine.New(b, log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := start()
	t.Cleanup(func() { svc.Close(context.Background()) })
	u := kiln.User{Name: "bob"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess, err := svc.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "workspaces", sess.ID)
	svc.Close(ctx)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	svc = start()
	got, err := svc.Session(ctx, u, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != kiln.SessionEnded || !strings.Contains(got.EndReason, "tmpfs") || !strings.Contains(got.EndReason, "systemd") {
		t.Errorf("after the reboot: status %s, reason %q; want ended, saying the tmpfs workspace was lost and when that happens", got.Status, got.EndReason)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lost workspace's directory is left: %v", err)
	}
}
