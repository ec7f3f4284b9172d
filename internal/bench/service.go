package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/stack"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// ServiceOptions choose what the service benchmark measures.
type ServiceOptions struct {
	Runs         int // session creations per kind
	Cells        int // warm cells
	Throughput   int // one-shot runs per throughput measurement
	Concurrency  int // clients at once in the throughput measurement
	IdleSessions int // sessions open at once in the memory measurement
	PoolSize     int // the warm pool's size in the pooled-creation measurement
	RunPoolSize  int // the one-shot pool's size per language; 0 skips its measurement
	// Log receives the service's own log; nil discards it.
	Log *slog.Logger
}

// Stat is a median and a 90th percentile.
type Stat struct{ Median, P90 time.Duration }

func statOf(ds []time.Duration) Stat { return Stat{Median(ds), Percentile(ds, 90)} }

// ServiceReport holds the service figures, measured through the HTTP API
// of an in-process service with a sqlite store.
type ServiceReport struct {
	Opts ServiceOptions

	CreateFresh, CreatePooled Stat // POST /v1/sessions until 201
	FirstFresh, FirstPooled   Stat // the first `1+1` right after the creation
	WarmHTTP                  Stat // a warm `1+1` through POST /v1/sessions/{id}/executions
	WarmEngine                Stat // the same cell at the engine API (baseline)
	Health                    Stat // GET /v1/health/live (baseline)

	RunPerSec, EngineRunPerSec float64 // POST /v1/run; engine.RunCell (baseline)
	QueueFull                  int     // 503 queue_full answers retried

	RunFresh, RunFreshBare Stat           // POST /v1/run without a one-shot pool; bare python3 (baseline)
	RunPool                *RunPoolReport // the one-shot pool's figures, if measured

	// Host memory per idle Python session, in bytes.
	Sandboxes    int   // sandboxes found for the open sessions
	PSS          int64 // the sandboxes' processes' proportional set size
	Cgroup       int64 // what the sandboxes' cgroups are charged
	MemAvailable int64 // the drop of MemAvailable (noisy)
}

// Service measures kiln's HTTP service end to end: a real service with a
// sqlite store in a temporary data directory, behind an HTTP listener on
// 127.0.0.1, driven through the client package. Its baselines (the
// engine's own figures, an HTTP round trip that does no work) come from
// the same run. It needs root, like the engine.
func Service(ctx context.Context, e *engine.Engine, o ServiceOptions, progress io.Writer) (*ServiceReport, error) {
	if o.Runs < 1 || o.Cells < 1 || o.Throughput < 1 || o.Concurrency < 1 || o.PoolSize < 1 || o.IdleSessions < 0 {
		return nil, errors.New("service benchmark: runs, cells, throughput runs, concurrency and pool size must be at least 1; idle sessions at least 0")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &ServiceReport{Opts: o}
	cpus := runtime.NumCPU()
	lim := kiln.DefaultLimits()
	cfg := service.Config{
		PoolSize:    -1,
		Concurrency: cpus,
		QueueLength: 16 * cpus,
		// Room for the idle sessions of the memory figure, all of one user.
		MaxSessionsPerUser:       o.IdleSessions + 10,
		MaxWorkspaceBytesPerUser: int64(o.IdleSessions+10) * lim.WorkspaceBytes,
	}

	h, err := startService(ctx, e, cfg, o.Log)
	if err != nil {
		return nil, err
	}
	defer h.close()
	if r.CreateFresh, r.FirstFresh, err = h.creations(ctx, o.Runs, nil); err != nil {
		return nil, fmt.Errorf("fresh sessions: %w", err)
	}
	fmt.Fprintln(progress, "service: fresh session creation done")
	if err := r.warmCells(ctx, h, e, o.Cells); err != nil {
		return nil, fmt.Errorf("warm cells: %w", err)
	}
	fmt.Fprintln(progress, "service: warm cells done")
	if err := r.throughput(ctx, h, e, o.Concurrency, o.Throughput); err != nil {
		return nil, fmt.Errorf("run throughput: %w", err)
	}
	fmt.Fprintln(progress, "service: /v1/run throughput done")
	if r.RunFresh, r.RunFreshBare, err = freshRuns(ctx, h, o.Runs); err != nil {
		return nil, fmt.Errorf("fresh one-shot runs: %w", err)
	}
	fmt.Fprintln(progress, "service: /v1/run latency without a one-shot pool done")
	if err := r.idleMemory(ctx, h, o.IdleSessions); err != nil {
		return nil, fmt.Errorf("idle sessions: %w", err)
	}
	fmt.Fprintln(progress, "service: idle session memory done")
	if err := h.close(); err != nil {
		return nil, err
	}

	cfg.PoolSize = o.PoolSize
	if h, err = startService(ctx, e, cfg, o.Log); err != nil {
		return nil, err
	}
	defer h.close()
	if r.CreatePooled, r.FirstPooled, err = h.creations(ctx, o.Runs, h.poolRefilled); err != nil {
		return nil, fmt.Errorf("pooled sessions: %w", err)
	}
	fmt.Fprintln(progress, "service: pooled session creation done")
	if err := h.close(); err != nil || o.RunPoolSize < 1 {
		return r, err
	}

	cfg.PoolSize, cfg.RunPoolSize = -1, o.RunPoolSize
	if h, err = startService(ctx, e, cfg, o.Log); err != nil {
		return nil, err
	}
	defer h.close()
	h.runPool = o.RunPoolSize
	if r.RunPool, err = r.runPool(ctx, h, o.Runs, o.Concurrency, o.Throughput); err != nil {
		return nil, fmt.Errorf("one-shot pool: %w", err)
	}
	fmt.Fprintln(progress, "service: one-shot pool done")
	return r, h.close()
}

// Print writes the service figures.
func (r *ServiceReport) Print(w io.Writer) {
	o := r.Opts
	fmt.Fprintf(w, "service (HTTP API, in-process, sqlite; %d sessions of each kind, %d warm cells)   median       p90\n", o.Runs, o.Cells)
	row := func(what string, s Stat, extra string) {
		fmt.Fprintf(w, "  %-46s %8.2f ms %8.2f ms%s\n", what, ms(s.Median), ms(s.P90), extra)
	}
	row("session create, fresh sandbox", r.CreateFresh, "")
	row(fmt.Sprintf("session create, from the warm pool (size %d)", o.PoolSize), r.CreatePooled, "")
	row("first python 1+1 after create, fresh sandbox", r.FirstFresh, "   (starts the kernel)")
	row("first python 1+1 after create, from the pool", r.FirstPooled, "   (kernel already started)")
	fmt.Fprintf(w, "  %-46s %8.3f ms %8.3f ms   (engine direct %.3f ms, HTTP health %.3f ms)\n",
		"warm python 1+1 via HTTP", ms(r.WarmHTTP.Median), ms(r.WarmHTTP.P90), ms(r.WarmEngine.Median), ms(r.Health.Median))
	fmt.Fprintf(w, "  %-46s %8.1f/s               (engine RunCell %.1f/s; %d runs each, %d queue_full retried)\n",
		fmt.Sprintf("/v1/run throughput at concurrency %d", o.Concurrency), r.RunPerSec, r.EngineRunPerSec, o.Throughput, r.QueueFull)
	fmt.Fprintf(w, "  idle python session, %d open (%d sandboxes found): PSS %.1f MiB each, cgroup %.1f MiB each, MemAvailable drop %.1f MiB each\n",
		o.IdleSessions, r.Sandboxes, mib(r.PSS), mib(r.Cgroup), mib(r.MemAvailable))
	if r.RunPool != nil {
		r.RunPool.Print(w, r.RunFresh, r.RunFreshBare, r.RunPerSec)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// Percentile returns the p-th percentile of ds by nearest rank (0 for
// none): the smallest sample that at least p percent of them do not
// exceed.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(k, 1), len(s))-1]
}

// harness is one service behind a real HTTP listener, with a user's and
// the first admin's clients.
type harness struct {
	dir   string
	url   string
	svc   *service.Service
	hs    *http.Server
	admin string // the admin's key, for /metrics
	user  *client.Client
	hc    *http.Client
	size  int // the pool's size
	// runPool is the one-shot pool's size per language.
	runPool int

	closeOnce sync.Once
	closeErr  error
	cleanup   []func() error // in reverse order
}

func startService(ctx context.Context, e *engine.Engine, cfg service.Config, log *slog.Logger) (_ *harness, err error) {
	dir, err := os.MkdirTemp("", "kiln-bench-")
	if err != nil {
		return nil, err
	}
	h := &harness{dir: dir, size: cfg.PoolSize}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	// The sandboxes' host uids must reach their workspaces below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	h.cleanup = append(h.cleanup, func() error { return removeDataDir(dir) })
	cfg.DataDir = dir
	// The rate limit is the operator's policy, not a cost: lifted here so
	// the benchmark measures the work.
	k, err := stack.New(ctx, stack.Config{Service: cfg, HTTP: server.Config{RatePerSecond: 1e9, RateBurst: 1 << 30}, Engine: e, Log: log})
	if err != nil {
		return nil, err
	}
	h.svc = k.Service
	h.cleanup = append(h.cleanup, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return k.Close(ctx)
	})
	if h.admin, err = h.svc.Bootstrap(ctx); err != nil {
		return nil, err
	}
	srv := k.Server
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h.hs = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go h.hs.Serve(ln)
	h.cleanup = append(h.cleanup, h.hs.Close)
	h.url = "http://" + ln.Addr().String()
	// Enough idle connections for the throughput clients; the default
	// transport keeps 2 per host and would reconnect for the rest.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	h.hc = &http.Client{Transport: tr}
	h.cleanup = append(h.cleanup, func() error { tr.CloseIdleConnections(); return nil })

	admin, err := client.New(h.url, h.admin, client.WithHTTPClient(h.hc))
	if err != nil {
		return nil, err
	}
	u, err := admin.CreateUser(ctx, client.UserRequest{Name: "bench"})
	if err != nil {
		return nil, err
	}
	key, err := admin.CreateKey(ctx, u.ID, "bench")
	if err != nil {
		return nil, err
	}
	if h.user, err = client.New(h.url, key.Secret, client.WithHTTPClient(h.hc)); err != nil {
		return nil, err
	}
	if h.size > 0 {
		if err := h.poolRefilled(ctx); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// close stops the service and removes its data directory with the
// workspaces its sessions left (they outlive a stop on purpose).
func (h *harness) close() error {
	h.closeOnce.Do(func() {
		var errs []error
		for i := len(h.cleanup) - 1; i >= 0; i-- {
			errs = append(errs, h.cleanup[i]())
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// removeDataDir unmounts and removes the workspaces in dir, then dir. A
// workspace that stays mounted keeps dir, so files are never removed
// through a mount.
func removeDataDir(dir string) error {
	wsDir := filepath.Join(dir, "workspaces")
	if _, err := os.Stat(wsDir); err == nil {
		ws, err := workspace.Open(wsDir)
		if err != nil {
			return fmt.Errorf("remove the benchmark's workspaces: %w", err)
		}
		ids, err := ws.List()
		if err != nil {
			return fmt.Errorf("remove the benchmark's workspaces: %w", err)
		}
		for _, id := range ids {
			if err := ws.Remove(id); err != nil {
				return fmt.Errorf("remove the benchmark's workspace %s (left in %s): %w", id, dir, err)
			}
		}
	}
	return os.RemoveAll(dir)
}

// creations times n session creations, each followed by a timed first
// `1+1` and an untimed delete. before, when set, runs untimed before each.
func (h *harness) creations(ctx context.Context, n int, before func(context.Context) error) (create, first Stat, err error) {
	var cs, fs []time.Duration
	for i := 0; i < n; i++ {
		if before != nil {
			if err := before(ctx); err != nil {
				return Stat{}, Stat{}, err
			}
		}
		start := time.Now()
		s, err := h.user.CreateSession(ctx, client.SessionRequest{})
		if err != nil {
			return Stat{}, Stat{}, err
		}
		cs = append(cs, time.Since(start))
		d, err := timed(func() error { return onePlusOne(ctx, h.user, s.ID) })
		if err == nil {
			fs = append(fs, d)
		}
		if derr := h.user.DeleteSession(ctx, s.ID); err == nil {
			err = derr
		}
		if err != nil {
			return Stat{}, Stat{}, err
		}
	}
	return statOf(cs), statOf(fs), nil
}

// poolSettle is how long poolRefilled waits once the pool shows full: the
// pool makes one sandbox beyond its size and holds it until there is room,
// so a full pool may still be building that one.
const poolSettle = 300 * time.Millisecond

// poolRefilled waits until the warm pool is full again, polling the
// admin-only /metrics for kiln_pool_ready, then lets it settle.
func (h *harness) poolRefilled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		n, err := h.poolReady(ctx)
		if err != nil {
			return err
		}
		if n >= h.size {
			return sleep(ctx, poolSettle)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("the warm pool holds %d of %d sandboxes: %w", n, h.size, err)
		}
	}
}

func (h *harness) poolReady(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.admin)
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return metricValue(io.LimitReader(resp.Body, 4<<20), "kiln_pool_ready")
}

// metricValue finds an unlabelled series' value in Prometheus text.
func metricValue(r io.Reader, name string) (int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		return int(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no metric %s", name)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onePlusOne runs `1+1` in session id and checks the answer.
func onePlusOne(ctx context.Context, c *client.Client, id string) error {
	x, err := c.Exec(ctx, id, client.ExecRequest{Code: "1+1"})
	if err != nil {
		return err
	}
	got := ""
	if x.Result != nil {
		for _, o := range x.Result.Outputs {
			if o.Result {
				got = engine.Text(o)
			}
		}
	}
	if x.Status != string(kiln.StatusOK) || got != "2" {
		return fmt.Errorf("cell 1+1: status %s, result %q", x.Status, got)
	}
	return nil
}

// warmCells interleaves a warm cell through HTTP, the same cell at the
// engine API and an HTTP round trip that does nothing.
func (r *ServiceReport) warmCells(ctx context.Context, h *harness, e *engine.Engine, n int) error {
	s, err := h.user.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		return err
	}
	defer h.user.DeleteSession(context.WithoutCancel(ctx), s.ID)
	es, err := e.NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		return err
	}
	defer es.Close(context.WithoutCancel(ctx))
	for i := 0; i < 3; i++ { // the first cell starts the kernels
		if err := onePlusOne(ctx, h.user, s.ID); err != nil {
			return err
		}
		if err := expect(ctx, es, "python", "1+1", "2"); err != nil {
			return err
		}
	}
	var viaHTTP, direct, health []time.Duration
	for i := 0; i < n; i++ {
		d, err := timed(func() error { return onePlusOne(ctx, h.user, s.ID) })
		if err != nil {
			return err
		}
		viaHTTP = append(viaHTTP, d)
		if d, err = timed(func() error { return expect(ctx, es, "python", "1+1", "2") }); err != nil {
			return err
		}
		direct = append(direct, d)
		if d, err = timed(func() error { return h.user.Health(ctx) }); err != nil {
			return err
		}
		health = append(health, d)
	}
	r.WarmHTTP, r.WarmEngine, r.Health = statOf(viaHTTP), statOf(direct), statOf(health)
	return nil
}

// throughput measures POST /v1/run against engine.RunCell at the same
// concurrency, in two alternating halves each so that a change in the
// machine's load hits both.
func (r *ServiceReport) throughput(ctx context.Context, h *harness, e *engine.Engine, conc, total int) error {
	var queueFull atomic.Int64
	viaHTTP := func(ctx context.Context) error {
		for {
			res, err := h.user.Run(ctx, client.RunRequest{Language: "python", Code: program})
			var p *client.Problem
			if errors.As(err, &p) && p.Code == "queue_full" {
				queueFull.Add(1)
				if err := sleep(ctx, 10*time.Millisecond); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if res.Result.Status != kiln.StatusOK || res.Result.Stdout != "1\n" {
				return fmt.Errorf("/v1/run: status %s, stdout %q, stderr %q", res.Result.Status, res.Result.Stdout, res.Result.Stderr)
			}
			return nil
		}
	}
	direct := func(ctx context.Context) error {
		res, err := e.RunCell(ctx, engine.Run{Language: "python", Code: program}, engine.Events{})
		if err != nil {
			return err
		}
		if res.Status != kiln.StatusOK || res.Stdout != "1\n" {
			return fmt.Errorf("RunCell: status %s, stdout %q", res.Status, res.Stdout)
		}
		return nil
	}
	// Warm both paths first.
	if err := concurrently(ctx, conc, conc, viaHTTP); err != nil {
		return err
	}
	if err := concurrently(ctx, conc, conc, direct); err != nil {
		return err
	}
	queueFull.Store(0)
	var tHTTP, tDirect time.Duration
	done := 0
	for half := 0; half < 2; half++ {
		n := total / 2
		if half == 1 {
			n = total - done
		}
		d, err := timed(func() error { return concurrently(ctx, conc, n, viaHTTP) })
		if err != nil {
			return err
		}
		tHTTP += d
		if d, err = timed(func() error { return concurrently(ctx, conc, n, direct) }); err != nil {
			return err
		}
		tDirect += d
		done += n
	}
	r.RunPerSec = float64(total) / tHTTP.Seconds()
	r.EngineRunPerSec = float64(total) / tDirect.Seconds()
	r.QueueFull = int(queueFull.Load())
	return nil
}

// concurrently calls f total times from conc goroutines and returns the
// first error.
func concurrently(ctx context.Context, conc, total int, f func(context.Context) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				if err := f(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// idleMemory opens n Python sessions, each with one cell run, and
// measures what they hold on the host once idle.
func (r *ServiceReport) idleMemory(ctx context.Context, h *harness, n int) error {
	if n <= 0 {
		return nil
	}
	cg, err := cgroups.Detect()
	if err != nil {
		return err
	}
	runtime.GC()
	before, err := memAvailable()
	if err != nil {
		return err
	}
	var ids []string
	defer func() {
		for _, id := range ids {
			h.user.DeleteSession(context.WithoutCancel(ctx), id)
		}
	}()
	for i := 0; i < n; i++ {
		s, err := h.user.CreateSession(ctx, client.SessionRequest{})
		if err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
		ids = append(ids, s.ID)
		if err := onePlusOne(ctx, h.user, s.ID); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	runtime.GC()
	after, err := memAvailable()
	if err != nil {
		return err
	}
	procs, err := sandboxProcs(os.Getpid())
	if err != nil {
		return err
	}
	var pss int64
	groups := map[string]bool{}
	for _, pid := range procs {
		p, err := procPSS(pid)
		if err != nil {
			continue // gone since the listing
		}
		pss += p
		if g, err := sandboxGroup(pid, cg); err == nil {
			groups[g] = true
		}
	}
	var charged int64
	for g := range groups {
		b, err := groupMemory(cg, g)
		if err != nil {
			return err
		}
		charged += b
	}
	r.Sandboxes = len(groups)
	if r.Sandboxes != n {
		return fmt.Errorf("found %d sandbox cgroups for %d open sessions", r.Sandboxes, n)
	}
	r.PSS = pss / int64(n)
	r.Cgroup = charged / int64(n)
	r.MemAvailable = (before - after) / int64(n)
	return nil
}

// firstSandboxUID is the native backend's default first host uid of a
// sandbox; every sandbox process runs at or above it.
const firstSandboxUID = 1_200_000_000

// sandboxProcs lists the processes below root (this process: the
// backend starts each sandbox's PID 1 as its child) that run as a
// sandbox's host uid. Sandboxes of other kiln processes are left out.
func sandboxProcs(root int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	type proc struct{ ppid, uid int }
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // gone
		}
		ppid, uid, err := parseStatus(b)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status: %w", pid, err)
		}
		procs[pid] = proc{ppid, uid}
	}
	var out []int
	for pid, p := range procs {
		if p.uid < firstSandboxUID {
			continue
		}
		// Walk up; the depth bound guards against a pid reused mid-listing
		// making a loop.
		for a, depth := p.ppid, 0; a > 1 && depth < 64; a, depth = procs[a].ppid, depth+1 {
			if a == root {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// parseStatus reads the parent pid and the real uid from /proc/PID/status.
func parseStatus(b []byte) (ppid, uid int, err error) {
	var gotP, gotU bool
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(v))
		switch string(k) {
		case "PPid":
			if len(f) > 0 {
				ppid, err = strconv.Atoi(f[0])
				gotP = err == nil
			}
		case "Uid":
			if len(f) > 0 {
				uid, err = strconv.Atoi(f[0])
				gotU = err == nil
			}
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if !gotP || !gotU {
		return 0, 0, errors.New("no PPid or Uid line")
	}
	return ppid, uid, nil
}

// procPSS is a process's proportional set size in bytes.
func procPSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	return kbField(b, "Pss")
}

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return kbField(b, "MemAvailable")
}

// kbField reads a "Name:   123 kB" line as bytes.
func kbField(b []byte, name string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", name, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", name)
}

// sandboxGroup is the sandbox group (<root group>/<id>, relative to the
// memory hierarchy) that holds process pid.
func sandboxGroup(pid int, cg *cgroups.Host) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	return groupOf(string(b), cg.Version, cg.RootGroup)
}

// groupOf picks the sandbox group out of /proc/PID/cgroup: the memory
// hierarchy's line on cgroup v1, the unified one on v2.
func groupOf(procCgroup string, v cgroups.Version, rootGroup string) (string, error) {
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if v == cgroups.V2 && f[0] != "0" {
			continue
		}
		if v == cgroups.V1 && !containsWord(f[1], "memory") {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(f[2], "/"), "/")
		if len(parts) < 2 || parts[0] != rootGroup {
			return "", fmt.Errorf("cgroup %s is not a sandbox's", f[2])
		}
		return parts[0] + "/" + parts[1], nil
	}
	return "", errors.New("no memory cgroup")
}

func containsWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// groupMemory is what a group is charged: memory.usage_in_bytes on v1
// (hierarchical, so agent/ and user/ included), memory.current on v2.
func groupMemory(cg *cgroups.Host, group string) (int64, error) {
	file := "memory.usage_in_bytes"
	if cg.Version == cgroups.V2 {
		file = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(cg.Mounts.Memory, group, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
