//go:build kubernetes && linux

package kubernetes

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// run runs a Python cell and returns its stdout, failing on anything but ok.
func run(t *testing.T, s *engine.Session, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, engine.Cell{Language: "python", Code: code}, engine.Events{})
	if err != nil {
		t.Fatalf("cell %q: %v", code, err)
	}
	if res.Status != kiln.StatusOK {
		t.Fatalf("cell %q: %s %+v %s", code, res.Status, res.Error, res.Stderr)
	}
	return res.Stdout
}

// Two backends, as two kiln replicas in two processes would have: the
// second reaches the first's sandbox by id, with the kernel's state, the
// files and background processes intact, after the first let go of it;
// the Pod then carries the second's owner label, so the first's reaping
// leaves it. A connection the first still holds is cut when the second
// connects (the newest of kiln's connections is served).
func TestSharedSandboxAcrossBackends(t *testing.T) {
	a := testBackend(t)
	b := testBackend(t)
	b.SetOwner(t.Name() + " replica b")
	if !b.SharedSandboxes() {
		t.Fatal("the Kubernetes backend does not declare SharedSandboxes")
	}
	ctx := context.Background()
	ea, eb := engine.New(a, nil), engine.New(b, nil)
	sa, err := ea.NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	box := sa.Sandbox()
	t.Cleanup(func() { b.DestroySandbox(context.Background(), box.ID); a.DestroySandbox(context.Background(), box.ID) })
	run(t, sa, "x = 41\nopen('/workspace/note', 'w').write('kept')\nimport subprocess; p = subprocess.Popen(['sleep', '600'])")

	// Handoff: a lets go, b attaches.
	a.Disconnect(box.ID)
	sb, err := eb.AttachSession(ctx, box, engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb, "print(x + 1, open('/workspace/note').read(), p.poll())"); got != "42 kept None\n" {
		t.Errorf("on the second backend: %q; want the kernel's x, the file and the running child: \"42 kept None\"", got)
	}
	p, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(ctx, "kiln-"+box.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels[labelOwner] != b.owner {
		t.Errorf("owner label %q after the second backend took the Pod; want its own %q", p.Labels[labelOwner], b.owner)
	}
	if ids, _ := a.List(ctx); len(ids) != 0 {
		t.Errorf("the first backend still lists %v: its reaping would delete the second's sandbox", ids)
	}

	// Failover: b is cut off mid-cell without letting go (its replica
	// died); a connects again, the cut cell's kernel is interrupted, not
	// lost, and the state is there.
	long := make(chan error, 1)
	go func() {
		_, err := sb.Run(ctx, engine.Cell{Language: "python", Code: "import time\ny = 1\ntime.sleep(300)"}, engine.Events{})
		long <- err
	}()
	time.Sleep(2 * time.Second)
	sa2, err := ea.AttachSession(ctx, box, engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-long: // b's connection was cut: its cell ends with an error or as interrupted
	case <-time.After(30 * time.Second):
		t.Fatal("the second backend's cell still runs 30 s after the first connected again")
	}
	if got := run(t, sa2, "print(x, y)"); got != "41 1\n" {
		t.Errorf("back on the first backend: %q; want \"41 1\"", got)
	}
}

// User code in the sandbox can neither connect to the agent's socket as
// kiln does nor end the agent: kill -9 -1 leaves it serving, and its
// /proc entries are not readable by the sandbox's user.
func TestAgentOutOfUserCodesReach(t *testing.T) {
	b := testBackend(t)
	sb, err := b.CreateSandbox(context.Background(), backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.DestroySandbox(context.Background(), sb.ID) })
	c, err := b.Connect(context.Background(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	sh := func(script string) string {
		t.Helper()
		var out bytes.Buffer
		if _, err := c.Exec(context.Background(), protocol.Exec{Argv: []string{"/bin/bash", "-c", script}, TimeoutMs: 30_000, OutputBytes: 1 << 16}, &out, &out); err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return out.String()
	}
	// The bridge itself, run by user code, is refused: its parent is in
	// the sandbox. The agent says nothing to a refused connection.
	if got := sh("timeout 5 /kiln " + BridgeArg + " </dev/null 2>/dev/null | wc -c"); got != "0\n" {
		t.Errorf("user code's bridge got %q bytes from the agent; want 0 (refused before the hello)", got)
	}
	got := sh("cat /proc/1/environ >/dev/null 2>&1 && echo environ-readable; ls /proc/1/fd >/dev/null 2>&1 && echo fd-readable; kill -9 -1; echo killed")
	if strings.Contains(got, "readable") {
		t.Errorf("user code reads the agent: %q", got)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("after user code's kill -9 -1 the agent does not answer: %v", err)
	}
	if got := sh("echo alive"); got != "alive\n" {
		t.Errorf("after kill -9 -1: %q", got)
	}
}
