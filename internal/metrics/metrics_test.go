package metrics

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape fetches the handler's text exposition as a map from the series
// as a user sees it (name{labels}, labels sorted by name) to its value.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, body %q", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q, want text/plain", ct)
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// Label values may hold spaces (route patterns do); the value is
		// after the last one.
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}

func constant(v float64) func() float64 { return func() float64 { return v } }

func checkSeries(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for s, w := range want {
		g, ok := got[s]
		if !ok {
			t.Errorf("series %s missing", s)
			continue
		}
		if g != w {
			t.Errorf("%s = %v, want %v", s, g, w)
		}
	}
}

func TestRecordedSeries(t *testing.T) {
	m := New(constant(3), constant(2), constant(1))
	m.Execution("python", "ok", 250*time.Millisecond, 1500*time.Millisecond)
	m.Execution("py", "ok", 0, 500*time.Millisecond) // an alias is the same language
	m.Execution("go", "timeout", 0, 30*time.Second)
	m.SessionCreated(true, 5*time.Millisecond)
	m.SessionCreated(false, 2*time.Second)
	m.SessionCreated(false, time.Second)
	m.SessionEnded("idle")
	m.SessionEnded("deleted")
	m.SessionEnded("deleted")
	m.SandboxFailure("create")
	m.Rejected("queue_full")
	m.Rejected("auth_failures")
	m.HTTP("GET /v1/sessions/{id}", 200, 100*time.Millisecond)
	m.HTTP("GET /v1/sessions/{id}", 404, 100*time.Millisecond)
	m.HTTP("POST /v1/run", 429, time.Millisecond)
	m.SetPoolReady(4)

	checkSeries(t, scrape(t, m), map[string]float64{
		`kiln_executions_total{language="python",status="ok"}`:       2,
		`kiln_executions_total{language="go",status="timeout"}`:      1,
		`kiln_execution_seconds_count{language="python"}`:            2,
		`kiln_execution_seconds_sum{language="python"}`:              2,
		`kiln_execution_seconds_bucket{language="python",le="1"}`:    1,
		`kiln_execution_seconds_bucket{language="python",le="+Inf"}`: 2,
		`kiln_execution_seconds_bucket{language="go",le="10"}`:       0,
		`kiln_execution_seconds_bucket{language="go",le="30"}`:       1,
		`kiln_queue_wait_seconds_count`:                              3,
		`kiln_queue_wait_seconds_sum`:                                0.25,

		`kiln_sessions_created_total{source="pool"}`:       1,
		`kiln_sessions_created_total{source="fresh"}`:      2,
		`kiln_session_create_seconds_sum{source="fresh"}`:  3,
		`kiln_session_create_seconds_count{source="pool"}`: 1,
		`kiln_sessions_ended_total{reason="idle"}`:         1,
		`kiln_sessions_ended_total{reason="deleted"}`:      2,
		`kiln_sessions_ended_total{reason="error"}`:        0, // present before it happens

		`kiln_sandbox_failures_total{stage="create"}`:  1,
		`kiln_sandbox_failures_total{stage="destroy"}`: 0,
		`kiln_rejected_total{reason="queue_full"}`:     1,
		`kiln_rejected_total{reason="rate_limit"}`:     0,
		`kiln_rejected_total{reason="auth_failures"}`:  1,

		`kiln_http_requests_total{code="200",route="GET /v1/sessions/{id}"}`: 1,
		`kiln_http_requests_total{code="404",route="GET /v1/sessions/{id}"}`: 1,
		`kiln_http_requests_total{code="429",route="POST /v1/run"}`:          1,
		`kiln_http_request_seconds_count{route="GET /v1/sessions/{id}"}`:     2,
		`kiln_http_request_seconds_sum{route="GET /v1/sessions/{id}"}`:       0.2,

		`kiln_sessions_active`:    3,
		`kiln_queue_depth`:        2,
		`kiln_executions_running`: 1,
		`kiln_pool_ready`:         4,
	})
}

func TestUnknownLabelValuesAreOther(t *testing.T) {
	m := New(nil, nil, nil)
	m.Execution("cobol", "ok", 0, time.Second)
	m.Execution("python", "exploded", 0, time.Second)
	m.SessionEnded("tired")
	m.SandboxFailure("/var/lib/kiln: disk full")
	m.Rejected("because")
	m.HTTP("", 404, time.Millisecond)
	m.HTTP("GET /v1/health/live", 0, time.Millisecond)

	got := scrape(t, m)
	checkSeries(t, got, map[string]float64{
		`kiln_executions_total{language="other",status="ok"}`:                1,
		`kiln_executions_total{language="python",status="other"}`:            1,
		`kiln_execution_seconds_count{language="other"}`:                     1,
		`kiln_sessions_ended_total{reason="other"}`:                          1,
		`kiln_sandbox_failures_total{stage="other"}`:                         1,
		`kiln_rejected_total{reason="other"}`:                                1,
		`kiln_http_requests_total{code="404",route="unmatched"}`:             1,
		`kiln_http_requests_total{code="other",route="GET /v1/health/live"}`: 1,
	})
	for s := range got {
		for _, leaked := range []string{"cobol", "exploded", "tired", "disk full", "because"} {
			if strings.Contains(s, leaked) {
				t.Errorf("series %s carries the caller's value %q", s, leaked)
			}
		}
	}
}

func TestGaugesReadAtScrape(t *testing.T) {
	sessions := 1.0
	m := New(func() float64 { return sessions }, nil, nil)
	checkSeries(t, scrape(t, m), map[string]float64{"kiln_sessions_active": 1})
	sessions = 7
	checkSeries(t, scrape(t, m), map[string]float64{"kiln_sessions_active": 7})

	// A nil callback leaves its gauge out.
	got := scrape(t, m)
	for _, s := range []string{"kiln_queue_depth", "kiln_executions_running"} {
		if _, ok := got[s]; ok {
			t.Errorf("%s exported without a callback", s)
		}
	}
}

func TestRuntimeCollectors(t *testing.T) {
	want := []string{"go_goroutines", "go_memstats_heap_alloc_bytes"}
	if runtime.GOOS == "linux" { // the process collector reads /proc
		want = append(want, "process_resident_memory_bytes", "process_open_fds")
	}
	got := scrape(t, New(nil, nil, nil))
	for _, s := range want {
		if _, ok := got[s]; !ok {
			t.Errorf("series %s missing", s)
		}
	}
}

// The registry is private: two services in one process (as in tests) do
// not collide, and nothing lands in the global default registry.
func TestPrivateRegistry(t *testing.T) {
	a, b := New(nil, nil, nil), New(nil, nil, nil)
	a.Rejected("quota")
	if got := scrape(t, b)[`kiln_rejected_total{reason="quota"}`]; got != 0 {
		t.Errorf("second registry's kiln_rejected_total{reason=\"quota\"} = %v, want 0", got)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kiln_") {
			t.Errorf("%s registered in the default registry", mf.GetName())
		}
	}
}
