//go:build kubernetes && bench && linux

package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	mobyclient "github.com/moby/moby/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// The native backend's sandboxes re-execute this binary as their agent;
// only the bench build measures native, so only it dispatches.
func TestMain(m *testing.M) {
	agent.Dispatch()
	os.Exit(m.Run())
}

// sideBackend is one backend of the side-by-side figures.
type sideBackend struct {
	name string
	e    *engine.Engine
	// after runs, untimed, once a sandbox of this backend is destroyed:
	// the Kubernetes one waits for the Pod to be gone, so that its CPU
	// request is free before the next sample (the node has 2 CPUs).
	after func(t *testing.T, s *engine.Session)
	// per session: NewSession (the sandbox), its first 1+1 (the kernel's
	// start), both; and warm cells
	create, first, ready, warm []time.Duration
}

// TestBackendsSideBySide is issue 15's "backends side by side": a
// session from nothing to its first `1+1` answered, and a warm `1+1` in
// an existing session, on native, Docker and Kubernetes, through the
// engine API, in one run with the samples interleaved (one of each
// backend in turn), so that the shared machine's noise hits all alike;
// then a session claimed from a ready Kubernetes warm Pod. It logs
// medians, 90th percentiles and ratios to native, and asserts nothing (a
// shared machine's timing is no test). As root, on the test cluster:
// go test -tags 'kubernetes bench' -run TestBackendsSideBySide -v ./internal/backend/kubernetes/
func TestBackendsSideBySide(t *testing.T) {
	const sessions, cells = 7, 100
	if os.Geteuid() != 0 {
		t.Skip("needs root: the native backend's sandboxes map to their own host uids and cgroups")
	}
	nb, err := native.New(native.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Skipf("native backend: %v", err)
	}
	kb := testBackend(t)
	gone := func(t *testing.T, s *engine.Session) { podGone(t, kb, s.Sandbox().ID) }
	bs := []*sideBackend{{name: "native", e: engine.New(nb, nil)}}
	if db := dockerBackend(t); db != nil {
		bs = append(bs, &sideBackend{name: "docker", e: engine.New(db, nil)})
	}
	bs = append(bs, &sideBackend{name: "kubernetes", e: engine.New(kb, nil), after: gone})

	// (a) From nothing to the first `1+1` answered; round -1 warms every
	// path (images, page cache), untimed.
	for i := -1; i < sessions; i++ {
		for _, b := range bs {
			t0 := time.Now()
			s := newSession(t, b.e, engine.SessionSpec{})
			t1 := time.Now()
			onePlusOne(t, s)
			t2 := time.Now()
			closeSession(t, s, b.after)
			if i >= 0 {
				b.create, b.first, b.ready = append(b.create, t1.Sub(t0)), append(b.first, t2.Sub(t1)), append(b.ready, t2.Sub(t0))
			}
		}
	}

	// (b) A warm `1+1`, one open session per backend (one Pod: it holds
	// a whole CPU of the node's two), the cells interleaved.
	open := make([]*engine.Session, len(bs))
	for k, b := range bs {
		open[k] = newSession(t, b.e, engine.SessionSpec{})
		for range 3 { // the kernel's first cells
			onePlusOne(t, open[k])
		}
	}
	for range cells {
		for k, b := range bs {
			t0 := time.Now()
			onePlusOne(t, open[k])
			b.warm = append(b.warm, time.Since(t0))
		}
	}
	for k, b := range bs {
		closeSession(t, open[k], b.after)
	}

	// (c) A session claimed from a ready Kubernetes warm Pod of the
	// default limits, to its first `1+1`; the pool refills, untimed,
	// before each sample. Alone: a warm Pod beside a cold sandbox would
	// take the node's second CPU.
	pool := poolBackend(t, 1, kiln.Limits{})
	pe := engine.New(pool, nil)
	var claimed []time.Duration
	for range sessions {
		warm := waitWarm(t, pool, 1)
		t0 := time.Now()
		s := newSession(t, pe, engine.SessionSpec{})
		onePlusOne(t, s)
		claimed = append(claimed, time.Since(t0))
		if !warm[s.Sandbox().ID] {
			t.Errorf("sandbox %s is no warm Pod (%v): a cold start, not a claim", s.Sandbox().ID, warm)
		}
		closeSession(t, s, func(t *testing.T, s *engine.Session) { podGone(t, pool, s.Sandbox().ID) })
	}
	pool.Close() // deletes the warm Pod

	t.Log("\n" + sideTable(bs, claimed, sessions, cells))
}

// dockerBackend is the Docker backend on an image of this test binary,
// or nil, logged, when no engine answers. The image is removed at the end.
func dockerBackend(t *testing.T) *docker.Backend {
	ctx := context.Background()
	db, err := docker.New(ctx)
	if err != nil {
		t.Logf("Docker left out: %v", err)
		return nil
	}
	t.Cleanup(func() { db.Close() })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ref, built, err := db.BuildImage(ctx, exe)
	if err != nil {
		t.Fatalf("the Docker image of this test binary: %v", err)
	}
	if built {
		t.Cleanup(func() {
			cli, err := mobyclient.New(mobyclient.FromEnv)
			if err != nil {
				return
			}
			defer cli.Close()
			if _, err := cli.ImageRemove(context.Background(), ref, mobyclient.ImageRemoveOptions{Force: true}); err != nil {
				t.Logf("removing %s: %v", ref, err)
			}
		})
	}
	db.SetImage(ref)
	db.SetOwner(t.Name())
	return db
}

func newSession(t *testing.T, e *engine.Engine, spec engine.SessionSpec) *engine.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := e.NewSession(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// A failed test destroys what it still holds; closeSession has
	// destroyed the rest.
	t.Cleanup(func() {
		if !closedSessions[s] {
			s.Close(context.Background())
		}
	})
	return s
}

// closedSessions are those closeSession destroyed.
var closedSessions = map[*engine.Session]bool{}

// onePlusOne runs the cell `1+1` and checks that its value is 2.
func onePlusOne(t *testing.T, s *engine.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, engine.Cell{Language: "python", Code: "1+1"}, engine.Events{})
	if err != nil {
		t.Fatalf("1+1: %v", err)
	}
	got := ""
	for _, o := range res.Outputs {
		if o.Result {
			got = engine.Text(o)
		}
	}
	if res.Status != kiln.StatusOK || got != "2" {
		t.Fatalf("1+1: status %s, value %q, stderr %q; want ok, 2", res.Status, got, res.Stderr)
	}
}

func closeSession(t *testing.T, s *engine.Session, after func(*testing.T, *engine.Session)) {
	t.Helper()
	closedSessions[s] = true
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("destroying the sandbox: %v", err)
	}
	if after != nil {
		after(t, s)
	}
}

// podGone waits until the sandbox's Pod no longer exists.
func podGone(t *testing.T, b *Backend, id string) {
	t.Helper()
	pods := b.cs.CoreV1().Pods(b.opt.Namespace)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, err := pods.Get(context.Background(), "kiln-"+id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pod kiln-%s still there 2 min after its deletion (%v)", id, err)
		}
	}
}

// sideTable is the figures as a table: median and p90 per backend, and
// each median's ratio to native's.
func sideTable(bs []*sideBackend, claimed []time.Duration, sessions, cells int) string {
	var w strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	fmt.Fprintf(&w, "%-44s %-12s %12s %12s %10s\n", "figure (engine API)", "backend", "median", "p90", "/ native")
	row := func(what, name string, ds []time.Duration, native time.Duration) {
		m := median(ds)
		fmt.Fprintf(&w, "%-44s %-12s %12s %12s %9.2fx\n", what, name, ms(m), ms(percentile(ds, 90)), float64(m)/float64(native))
	}
	for _, b := range bs {
		row(fmt.Sprintf("session + first 1+1 (%d each)", sessions), b.name, b.ready, median(bs[0].ready))
	}
	for _, b := range bs {
		row("  of which NewSession (the sandbox)", b.name, b.create, median(bs[0].create))
	}
	for _, b := range bs {
		row("  of which the first 1+1 (kernel start)", b.name, b.first, median(bs[0].first))
	}
	for _, b := range bs {
		row(fmt.Sprintf("warm 1+1 (%d each)", cells), b.name, b.warm, median(bs[0].warm))
	}
	row(fmt.Sprintf("session + first 1+1, warm Pod (%d)", len(claimed)), "kubernetes", claimed, median(bs[0].ready))
	fmt.Fprintln(&w, "(the warm Pod's ratio is to native's session from nothing: the engine has no pool of its own)")
	return w.String()
}

// median and percentile are internal/bench's (nearest rank), without
// importing the service into this binary, which is also the Pod's agent.
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(k, 1), len(s))-1]
}
