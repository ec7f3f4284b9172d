package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// DensityOptions choose the density benchmark: idle Python sessions
// opened through the HTTP service, measured at each step.
type DensityOptions struct {
	Steps      []int          // sessions open at each measurement, ascending (e.g. 10, 100, 1000)
	Cells      int            // warm cells timed at each step, each in a random open session
	Workspaces workspace.Kind // the sessions' workspaces ("" is the service's default, disk)
	Log        *slog.Logger   // the service's own log; nil discards it
}

// DensityStep is what the host holds with Open idle Python sessions,
// each after one `1+1`. Per-session figures are the growth over the
// service with no session open, divided by Open.
type DensityStep struct {
	Open      int
	Sandboxes int // sandbox cgroups found

	// The sandboxes' processes (proportional set size, from
	// smaps_rollup), split into the Python kernels and kiln's own
	// (PID 1 and the agent, the spare spawn stage); per session.
	PSS, KernelPSS, KilnPSS int64
	Procs, Threads          float64 // per session
	Cgroup                  int64   // what the sandboxes' cgroups are charged, per session

	// The host: growth of MemAvailable's drop and of the kernel's own
	// memory (/proc/meminfo), per session.
	MemAvailable, Slab, KernelStack, PageTables, Shmem int64
	Mounts                                             float64 // host mount table entries per session

	// While idle, over a second: the CPU the open sandboxes' processes
	// used together (1.0 is one CPU), and the host's context switches.
	IdleCPU         float64
	ContextSwitches float64

	// The service's process (the benchmark's own process, which holds it
	// and the HTTP client): RSS growth per session, and its Go heap and
	// goroutines.
	ServiceRSS        int64
	ServiceHeap       int64
	ServiceGoroutines float64

	Create Stat // POST /v1/sessions for the sessions opened since the last step
	First  Stat // their first `1+1` (starts the kernel)
	Warm   Stat // a warm `1+1` via HTTP in a random open session
	Health Stat // GET /v1/health/live, interleaved with Warm (baseline)
}

// DensityReport holds one DensityStep per step.
type DensityReport struct {
	Opts  DensityOptions
	Base  hostMemory // with the service up and no session open
	Steps []DensityStep
}

// hostMemory is the part of the host that the benchmark watches.
type hostMemory struct {
	meminfo    map[string]int64 // bytes
	mounts     int
	rss        int64 // this process
	heap       int64 // runtime.MemStats.HeapInuse
	goroutines int
}

func readHostMemory() (hostMemory, error) {
	runtime.GC()
	m := hostMemory{meminfo: map[string]int64{}, goroutines: runtime.NumGoroutine()}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return m, err
	}
	for _, k := range []string{"MemAvailable", "Slab", "KernelStack", "PageTables", "Shmem"} {
		if m.meminfo[k], err = kbField(b, k); err != nil {
			return m, err
		}
	}
	if b, err = os.ReadFile("/proc/self/mountinfo"); err != nil {
		return m, err
	}
	m.mounts = strings.Count(string(b), "\n")
	if b, err = os.ReadFile("/proc/self/smaps_rollup"); err != nil {
		return m, err
	}
	if m.rss, err = kbField(b, "Rss"); err != nil {
		return m, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = int64(ms.HeapInuse)
	return m, nil
}

// Density opens idle Python sessions through kiln's HTTP service (the
// harness of Service: an in-process service with a sqlite store behind a
// loopback listener) up to each step, and measures at each what the host
// holds per session and how a warm cell in a random session fares. Every
// session is deleted at the end, also on error. It needs root.
func Density(ctx context.Context, e *engine.Engine, o DensityOptions, progress io.Writer) (_ *DensityReport, err error) {
	if len(o.Steps) == 0 || o.Cells < 1 || !sort.IntsAreSorted(o.Steps) || o.Steps[0] < 1 {
		return nil, errors.New("density benchmark: steps must be ascending and at least 1, cells at least 1")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cg, err := cgroups.Detect()
	if err != nil {
		return nil, err
	}
	top := o.Steps[len(o.Steps)-1]
	lim := kiln.DefaultLimits()
	cfg := service.Config{
		Workspaces:               o.Workspaces,
		PoolSize:                 -1,
		IdleTTL:                  24 * time.Hour,
		MaxSessionsPerUser:       top + 10,
		MaxWorkspaceBytesPerUser: int64(top+10) * lim.WorkspaceBytes,
	}
	h, err := startService(ctx, e, cfg, o.Log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := h.close(); err == nil {
			err = cerr
		}
	}()
	r := &DensityReport{Opts: o}
	// The first session's kernel start warms the page cache and the
	// service's first-use state; it is not counted.
	if err := h.warmUp(ctx); err != nil {
		return nil, err
	}
	if r.Base, err = readHostMemory(); err != nil {
		return nil, err
	}
	var ids []string
	defer func() { h.deleteAll(context.WithoutCancel(ctx), ids, progress) }()
	for _, n := range o.Steps {
		var cs, fs []time.Duration
		for len(ids) < n {
			id, c, f, err := h.openIdle(ctx)
			if id != "" {
				ids = append(ids, id)
			}
			if err != nil {
				return nil, fmt.Errorf("session %d: %w", len(ids)+1, err)
			}
			cs, fs = append(cs, c), append(fs, f)
			if len(ids)%100 == 0 {
				fmt.Fprintf(progress, "density: %d sessions open\n", len(ids))
			}
		}
		st, err := r.measure(ctx, h, cg, ids, o.Cells)
		if err != nil {
			return nil, fmt.Errorf("%d sessions: %w", n, err)
		}
		st.Create, st.First = statOf(cs), statOf(fs)
		r.Steps = append(r.Steps, st)
		fmt.Fprintf(progress, "density: %d sessions measured\n", n)
	}
	return r, nil
}

// warmUp opens, uses and deletes one session.
func (h *harness) warmUp(ctx context.Context) error {
	id, _, _, err := h.openIdle(ctx)
	if id != "" {
		if derr := h.user.DeleteSession(ctx, id); err == nil {
			err = derr
		}
	}
	return err
}

// openIdle creates a session and runs its first `1+1`, timing both.
func (h *harness) openIdle(ctx context.Context) (id string, create, first time.Duration, err error) {
	start := time.Now()
	s, err := h.user.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		return "", 0, 0, err
	}
	create = time.Since(start)
	first, err = timed(func() error { return onePlusOne(ctx, h.user, s.ID) })
	return s.ID, create, first, err
}

// deleteAll deletes the sessions, a few at a time, and says how many
// could not be.
func (h *harness) deleteAll(ctx context.Context, ids []string, progress io.Writer) {
	var mu sync.Mutex
	failed := 0
	work := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := h.user.DeleteSession(ctx, id); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if failed > 0 {
		fmt.Fprintf(progress, "density: %d of %d sessions could not be deleted (the service's close removes them)\n", failed, len(ids))
	}
}

// measure takes one step's figures with the sessions ids open.
func (r *DensityReport) measure(ctx context.Context, h *harness, cg *cgroups.Host, ids []string, cells int) (DensityStep, error) {
	n := len(ids)
	st := DensityStep{Open: n}
	// Let the last session's kernel and agent settle into idleness.
	if err := sleep(ctx, 2*time.Second); err != nil {
		return st, err
	}
	mem, err := readHostMemory()
	if err != nil {
		return st, err
	}
	per := func(after, before int64) int64 { return (after - before) / int64(n) }
	st.MemAvailable = per(r.Base.meminfo["MemAvailable"], mem.meminfo["MemAvailable"])
	st.Slab = per(mem.meminfo["Slab"], r.Base.meminfo["Slab"])
	st.KernelStack = per(mem.meminfo["KernelStack"], r.Base.meminfo["KernelStack"])
	st.PageTables = per(mem.meminfo["PageTables"], r.Base.meminfo["PageTables"])
	st.Shmem = per(mem.meminfo["Shmem"], r.Base.meminfo["Shmem"])
	st.Mounts = float64(mem.mounts-r.Base.mounts) / float64(n)
	st.ServiceRSS = per(mem.rss, r.Base.rss)
	st.ServiceHeap = per(mem.heap, r.Base.heap)
	st.ServiceGoroutines = float64(mem.goroutines-r.Base.goroutines) / float64(n)

	procs, err := sandboxProcs(os.Getpid())
	if err != nil {
		return st, err
	}
	if st.IdleCPU, st.ContextSwitches, err = idleCPU(ctx, procs); err != nil {
		return st, err
	}
	groups := map[string]bool{}
	var threads int
	for _, pid := range procs {
		p, err := procPSS(pid)
		if err != nil {
			continue // gone since the listing
		}
		if isKernel(pid) {
			st.KernelPSS += p
		} else {
			st.KilnPSS += p
		}
		threads += procThreads(pid)
		if g, err := sandboxGroup(pid, cg); err == nil {
			groups[g] = true
		}
	}
	for g := range groups {
		b, err := groupMemory(cg, g)
		if err != nil {
			return st, err
		}
		st.Cgroup += b
	}
	st.Sandboxes = len(groups)
	if st.Sandboxes != n {
		return st, fmt.Errorf("found %d sandbox cgroups for %d open sessions", st.Sandboxes, n)
	}
	st.KernelPSS, st.KilnPSS, st.Cgroup = st.KernelPSS/int64(n), st.KilnPSS/int64(n), st.Cgroup/int64(n)
	st.PSS = st.KernelPSS + st.KilnPSS // the parts, each rounded, add up
	st.Procs, st.Threads = float64(len(procs))/float64(n), float64(threads)/float64(n)

	// Warm cells in random sessions, interleaved with a round trip that
	// does no work.
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	var warm, health []time.Duration
	for range cells {
		id := ids[rng.IntN(n)]
		d, err := timed(func() error { return onePlusOne(ctx, h.user, id) })
		if err != nil {
			return st, err
		}
		warm = append(warm, d)
		if d, err = timed(func() error { return h.user.Health(ctx) }); err != nil {
			return st, err
		}
		health = append(health, d)
	}
	st.Warm, st.Health = statOf(warm), statOf(health)
	return st, nil
}

// idleCPU is the CPU procs use together over a second (1.0: one CPU),
// and the host's context switches in it.
func idleCPU(ctx context.Context, procs []int) (cpu, switches float64, err error) {
	const window = time.Second
	t0, c0 := procsCPU(procs), hostContextSwitches()
	if err := sleep(ctx, window); err != nil {
		return 0, 0, err
	}
	t1, c1 := procsCPU(procs), hostContextSwitches()
	return (t1 - t0).Seconds() / window.Seconds(), float64(c1-c0) / window.Seconds(), nil
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// Linux architecture kiln runs on).
const clockTick = 100

// procsCPU is the user and system time procs have used, those gone
// since the listing left out.
func procsCPU(procs []int) time.Duration {
	var ticks int64
	for _, pid := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the line.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		var u, s int64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &s)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTick
}

// hostContextSwitches is /proc/stat's ctxt.
func hostContextSwitches() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ctxt "); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// isKernel tells a Python kernel's process from kiln's own (the kiln
// binary: PID 1 with the agent, the spare spawn stage).
func isKernel(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.HasPrefix(string(b), "python")
}

// procThreads is a process's thread count (0 if it is gone).
func procThreads(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	n, err := kbLessField(b, "Threads")
	if err != nil {
		return 0
	}
	return int(n)
}

// kbLessField reads a "Name:\t123" line.
func kbLessField(b []byte, name string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			var n int64
			_, err := fmt.Sscan(strings.TrimSpace(v), &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("no %s line", name)
}

// Print writes the density figures, one column per step.
func (r *DensityReport) Print(w io.Writer) {
	fmt.Fprintf(w, "density: idle python sessions via HTTP (each after one 1+1; workspaces %s); per session unless said\n", orDefault(string(r.Opts.Workspaces), "disk"))
	fmt.Fprintf(w, "  %-44s", "sessions open")
	for _, s := range r.Steps {
		fmt.Fprintf(w, " %12d", s.Open)
	}
	fmt.Fprintln(w)
	row := func(what string, f func(DensityStep) string) {
		fmt.Fprintf(w, "  %-44s", what)
		for _, s := range r.Steps {
			fmt.Fprintf(w, " %12s", f(s))
		}
		fmt.Fprintln(w)
	}
	mb := func(f func(DensityStep) int64) func(DensityStep) string {
		return func(s DensityStep) string { return fmt.Sprintf("%.2f MiB", mib(f(s))) }
	}
	kb := func(f func(DensityStep) int64) func(DensityStep) string {
		return func(s DensityStep) string { return fmt.Sprintf("%.0f KiB", float64(f(s))/1024) }
	}
	num := func(f func(DensityStep) float64) func(DensityStep) string {
		return func(s DensityStep) string { return fmt.Sprintf("%.2f", f(s)) }
	}
	dur := func(f func(DensityStep) Stat) func(DensityStep) string {
		return func(s DensityStep) string { return fmt.Sprintf("%.3f ms", ms(f(s).Median)) }
	}
	row("sandbox processes, PSS", mb(func(s DensityStep) int64 { return s.PSS }))
	row("  of which the python kernel", mb(func(s DensityStep) int64 { return s.KernelPSS }))
	row("  of which kiln's (PID 1/agent, spare spawn)", mb(func(s DensityStep) int64 { return s.KilnPSS }))
	row("sandbox cgroup charge", mb(func(s DensityStep) int64 { return s.Cgroup }))
	row("MemAvailable drop", mb(func(s DensityStep) int64 { return s.MemAvailable }))
	row("  kernel slab", kb(func(s DensityStep) int64 { return s.Slab }))
	row("  kernel stacks", kb(func(s DensityStep) int64 { return s.KernelStack }))
	row("  page tables", kb(func(s DensityStep) int64 { return s.PageTables }))
	row("  shmem (tmpfs)", kb(func(s DensityStep) int64 { return s.Shmem }))
	row("service process RSS growth", kb(func(s DensityStep) int64 { return s.ServiceRSS }))
	row("  Go heap in use growth", kb(func(s DensityStep) int64 { return s.ServiceHeap }))
	row("  goroutines", num(func(s DensityStep) float64 { return s.ServiceGoroutines }))
	row("sandbox processes", num(func(s DensityStep) float64 { return s.Procs }))
	row("  threads", num(func(s DensityStep) float64 { return s.Threads }))
	row("host mounts", num(func(s DensityStep) float64 { return s.Mounts }))
	row("idle: all sandboxes' CPU (1.0 = one CPU)", func(s DensityStep) string { return fmt.Sprintf("%.3f", s.IdleCPU) })
	row("idle: host context switches per second", func(s DensityStep) string { return fmt.Sprintf("%.0f", s.ContextSwitches) })
	row("session create (median, this step's)", dur(func(s DensityStep) Stat { return s.Create }))
	row("its first 1+1 (median, this step's)", dur(func(s DensityStep) Stat { return s.First }))
	row("warm 1+1 via HTTP, random session, median", dur(func(s DensityStep) Stat { return s.Warm }))
	row("  p90", func(s DensityStep) string { return fmt.Sprintf("%.3f ms", ms(s.Warm.P90)) })
	if len(r.Steps) > 0 {
		base := r.Steps[0].Warm.Median
		row(fmt.Sprintf("  ratio to %d open", r.Steps[0].Open), func(s DensityStep) string {
			return fmt.Sprintf("%.2fx", float64(s.Warm.Median)/float64(base))
		})
	}
	row("GET /v1/health/live (baseline)", dur(func(s DensityStep) Stat { return s.Health }))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
