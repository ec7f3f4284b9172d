//go:build bench

package replicabench_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to read pg_stat_database

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/store/postgres/pgtest"
	"github.com/kiln-dev/kiln/test/testkiln"
)

var kilnBin string

func TestMain(m *testing.M) { os.Exit(testkiln.Main(m, "replicabench", &kilnBin)) }

const (
	conc     = 8  // clients at once, each its own user
	rounds   = 7  // of each figure with 1 and with 2 replicas, alternating
	runsPer  = 64 // POST /v1/run one-shots per round
	sessPer  = 3  // sessions each client creates per round
	cellsPer = 40 // x += 1 cells per client per round
)

// figures are one round's measurements with some replicas.
type figures struct {
	runs, creates, cells float64       // per second
	cellLatency          time.Duration // median
	// Shares of the machine's CPU (all cores) while the round ran: the
	// postgres processes, the kiln serve processes (not their sandboxes),
	// and everything.
	pg, kiln, busy float64
	// pgConns is the connections PostgreSQL accepted per 100 requests
	// (pg_stat_database.sessions): a kiln serve that opens one for a query
	// pays a backend's start.
	pgConns float64
	load    string // /proc/loadavg's first three at the round's start
}

// requests is what one round sends before its CPU and connections are
// read: the runs, the creates and the cells.
const requests = runsPer + conc*sessPer + conc*(cellsPer+1)

// TestReplicasThroughput runs two kiln serve processes (native backend)
// on one throwaway PostgreSQL and measures, alternating one replica and
// two in the same run, with conc clients spreading their requests
// round-robin over the replicas: POST /v1/run Python one-shots, session
// creates, and warm x += 1 cells (each client in its own session, a
// session's cells going to the replica that holds it). With one replica
// the second runs idle. It prints the medians of rounds and the ratios.
func TestReplicasThroughput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: kiln serve makes sandboxes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dsn := pgtest.Start(t).Database(t) // skips without PostgreSQL
	postmaster := postmasterPid(t, dsn)
	// No pools: every run and session starts its sandbox, so that the
	// figures are the steady cost, not a pool's stock. Rate limits high
	// enough never to answer 429 (they are still counted in PostgreSQL).
	flags := []string{"--db", dsn, "--pool", "0", "--run-pool", "0", "--rate", "1000", "--burst", "1000"}
	a := testkiln.Start(t, testkiln.Options{Bin: kilnBin, Args: flags})
	dataB := t.TempDir()
	os.Chmod(filepath.Dir(dataB), 0o711)
	os.Chmod(dataB, 0o711)
	key, err := os.ReadFile(filepath.Join(a.Data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataB, "admin.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	b := testkiln.Start(t, testkiln.Options{Bin: kilnBin, Data: dataB, Args: flags})
	servers := []*testkiln.Server{a, b}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * conc}}
	admin, err := client.New(a.URL, a.Key, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	cs := make([][]*client.Client, conc) // [client][replica]
	for w := range cs {
		u, err := admin.CreateUser(ctx, client.UserRequest{Name: fmt.Sprintf("bench%d", w)})
		if err != nil {
			t.Fatal(err)
		}
		k, err := admin.CreateKey(ctx, u.ID, "bench")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			c, err := client.New(s.URL, k.Secret, client.WithHTTPClient(hc))
			if err != nil {
				t.Fatal(err)
			}
			cs[w] = append(cs[w], c)
		}
	}
	stats, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	p := probe{postmaster: postmaster, kiln: []int{a.Cmd.Process.Pid, b.Cmd.Process.Pid}, db: stats}
	measure(ctx, t, cs, 2, p) // warms caches on both; not counted
	got := map[int][]figures{}
	for r := range rounds {
		order := []int{1, 2}
		if r%2 == 1 {
			order = []int{2, 1}
		}
		for _, n := range order {
			f := measure(ctx, t, cs, n, p)
			t.Logf("round %d, %d replica(s), load %s: %.1f runs/s, %.1f creates/s, %.1f cells/s (median %.1f ms), CPU postgres %.0f%% kiln %.0f%% machine %.0f%%, %.1f postgres connections per 100 requests",
				r+1, n, f.load, f.runs, f.creates, f.cells, ms(f.cellLatency), 100*f.pg, 100*f.kiln, 100*f.busy, f.pgConns)
			got[n] = append(got[n], f)
		}
	}
	t.Log(table(got))
}

// measure runs one round of the three figures on the first n replicas.
func measure(ctx context.Context, t *testing.T, cs [][]*client.Client, n int, p probe) figures {
	f := figures{load: loadavg()}
	before := p.sample(t)
	var next atomic.Int64
	f.runs = rate(t, runsPer, func(w int) error {
		for k := int(next.Add(1) - 1); k < runsPer; k = int(next.Add(1) - 1) {
			r, err := cs[w][k%n].Run(ctx, client.RunRequest{Language: "python", Code: "print(1)"})
			if err != nil {
				return err
			}
			if r.Result.Status != "ok" || r.Result.Stdout != "1\n" {
				return fmt.Errorf("run: status %s, stdout %q, want ok and 1", r.Result.Status, r.Result.Stdout)
			}
		}
		return nil
	})
	// Client w's session j is on replica (w+j)%n: its first sessions, the
	// ones that run cells, are spread evenly.
	ids := make([][]string, len(cs))
	f.creates = rate(t, len(cs)*sessPer, func(w int) error {
		for j := range sessPer {
			s, err := cs[w][(w+j)%n].CreateSession(ctx, client.SessionRequest{})
			if err != nil {
				return err
			}
			ids[w] = append(ids[w], s.ID)
		}
		return nil
	})
	cell := func(w int, code string) (time.Duration, error) {
		start := time.Now()
		x, err := cs[w][w%n].Exec(ctx, ids[w][0], client.ExecRequest{Code: code})
		if err == nil && x.Status != "ok" {
			err = fmt.Errorf("cell %q: status %s", code, x.Status)
		}
		return time.Since(start), err
	}
	rate(t, len(cs), func(w int) error { _, err := cell(w, "x = 0"); return err })
	lat := make([][]time.Duration, len(cs))
	f.cells = rate(t, len(cs)*cellsPer, func(w int) error {
		for range cellsPer {
			d, err := cell(w, "x += 1")
			if err != nil {
				return err
			}
			lat[w] = append(lat[w], d)
		}
		return nil
	})
	f.cellLatency = median(slices.Concat(lat...))
	after := p.sample(t)
	total := after.total - before.total
	f.pg, f.kiln, f.busy = (after.pg-before.pg)/total, (after.kiln-before.kiln)/total, (after.busy-before.busy)/total
	f.pgConns = 100 * (after.conns - before.conns) / requests
	rate(t, len(cs), func(w int) error {
		for j, id := range ids[w] {
			if err := cs[w][(w+j)%n].DeleteSession(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	return f
}

// rate runs work(0..conc-1) at once, fails the test on an error, and
// returns total per second of the whole.
func rate(t *testing.T, total int, work func(w int) error) float64 {
	t.Helper()
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- work(w) }()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return float64(total) / d.Seconds()
}

// table prints the medians of rounds side by side, with 2/1 ratios.
func table(got map[int][]figures) string {
	one, two := got[1], got[2]
	var sb strings.Builder
	fmt.Fprintf(&sb, "medians of %d rounds, %d clients at once, native backend, one PostgreSQL:\n", rounds, conc)
	fmt.Fprintf(&sb, "  %-34s %10s %10s %6s\n", "", "1 replica", "2 replicas", "2/1")
	row := func(name string, pick func(figures) float64) {
		m1, m2 := median(mapf(one, pick)), median(mapf(two, pick))
		fmt.Fprintf(&sb, "  %-34s %10.1f %10.1f %6.2f\n", name, m1, m2, m2/m1)
	}
	row("POST /v1/run python, runs/s", func(f figures) float64 { return f.runs })
	row("session creates/s", func(f figures) float64 { return f.creates })
	row("warm x += 1 cells/s", func(f figures) float64 { return f.cells })
	row("cell latency, median ms", func(f figures) float64 { return ms(f.cellLatency) })
	row("postgres CPU, % of machine", func(f figures) float64 { return 100 * f.pg })
	row("kiln serve CPU, % of machine", func(f figures) float64 { return 100 * f.kiln })
	row("machine busy, %", func(f figures) float64 { return 100 * f.busy })
	row("postgres connections/100 requests", func(f figures) float64 { return f.pgConns })
	return sb.String()
}

func mapf(fs []figures, pick func(figures) float64) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = pick(f)
	}
	return out
}

func median[T cmp.Ordered](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// probe reads CPU time, in clock ticks, from /proc.
type probe struct {
	postmaster int   // PostgreSQL's; its backends are its children
	kiln       []int // the kiln serve processes
	db         *sql.DB
}

type cpuSample struct{ pg, kiln, busy, total, conns float64 }

func (p probe) sample(t *testing.T) cpuSample {
	var s cpuSample
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) < 15 {
			continue
		}
		own := f[11] + f[12]           // utime, stime
		if int(f[1]) == p.postmaster { // ppid: each backend is its own process group
			s.pg += own
		}
		if pid == p.postmaster {
			s.pg += own + f[13] + f[14] // and its children that have exited
		}
		if slices.Contains(p.kiln, pid) {
			s.kiln += own
		}
	}
	// Counted as each backend starts; a backend reports at most once a
	// second, so a round's count may lag by that.
	if err := p.db.QueryRow(`SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.conns); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	// cpu user nice system idle iowait irq softirq steal ...
	for i, v := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:] {
		if i >= 8 {
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		s.total += x
		if i != 3 && i != 4 {
			s.busy += x
		}
	}
	return s
}

// procStat is /proc/PID/stat's fields after the command's name, from
// field 3 (state) on, as numbers; nil when the process is gone.
func procStat(pid int) []float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return nil
	}
	var out []float64
	for _, v := range strings.Fields(string(b[i+1:])) {
		x, _ := strconv.ParseFloat(v, 64)
		out = append(out, x)
	}
	return out
}

// postmasterPid reads PostgreSQL's pid from postmaster.pid in the data
// directory below the DSN's socket directory (pgtest's layout).
func postmasterPid(t *testing.T, dsn string) int {
	for _, kv := range strings.Fields(dsn) {
		if dir, ok := strings.CutPrefix(kv, "host="); ok {
			b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no host= in the DSN %q", dsn)
	return 0
}
