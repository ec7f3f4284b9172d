package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/metrics"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
)

// capService is a service with only its policy: enough for the checks
// that run before any sandbox.
func capService(t *testing.T, cfg Config, now func() time.Time) *Service {
	t.Helper()
	cfg = cfg.withDefaults()
	if err := cfg.checkLimitConfig(); err != nil {
		t.Fatal(err)
	}
	zero := func() float64 { return 0 }
	return &Service{cfg: cfg, cpu: newCPUBudget(now, nil), log: slog.New(slog.DiscardHandler), metrics: metrics.New(zero, zero, zero), sessions: map[string]*live{}, starting: map[string]int{}}
}

var (
	someone = kiln.User{ID: "u1", Name: "someone"}
	admin   = kiln.User{ID: "a1", Name: "root", Admin: true}
)

func operatorCaps() Config {
	return Config{
		DefaultLimits: kiln.Limits{MemoryBytes: 256 * kiln.MiB, Timeout: 20 * time.Second},
		MaxLimits: kiln.Limits{MemoryBytes: kiln.GiB, CPUMillis: 2000, Pids: 256, Timeout: time.Minute,
			WorkspaceBytes: kiln.GiB},
		IdleTTL:    time.Hour,
		MaxIdleTTL: 2 * time.Hour,
	}
}

// TestCapsRefuseNonAdminsAboveTheMaximum: each capped limit, asked for
// above its maximum by a non-admin, is a 403 that names the limit and the
// maximum; an admin gets it.
func TestCapsRefuseNonAdminsAboveTheMaximum(t *testing.T) {
	s := capService(t, operatorCaps(), time.Now)
	cases := []struct {
		limits   kiln.Limits
		name     string
		maxShown string
	}{
		{kiln.Limits{MemoryBytes: 16 * kiln.GiB}, "memory_bytes", "1 GiB"},
		{kiln.Limits{CPUMillis: 64000}, "cpu_millis", "2 CPUs"},
		{kiln.Limits{Pids: 4096}, "pids", "256"},
		{kiln.Limits{Timeout: 24 * time.Hour}, "timeout_ms", "1m0s"},
		{kiln.Limits{WorkspaceBytes: 8 * kiln.GiB}, "workspace_bytes", "1 GiB"},
	}
	for _, c := range cases {
		spec := SessionSpec{Limits: c.limits}
		err := s.checkSpec(someone, &spec)
		if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.maxShown) {
			t.Errorf("%s over the maximum: err = %v, want forbidden naming %s and %s", c.name, err, c.name, c.maxShown)
		}
		spec = SessionSpec{Limits: c.limits}
		if err := s.checkSpec(admin, &spec); err != nil {
			t.Errorf("%s over the maximum for an admin: %v, want allowed", c.name, err)
		}
	}
	// A cell's own timeout is capped as well.
	l := newLive(kiln.Session{Languages: []string{"python"}}, "", nil)
	req := kiln.CellRequest{Code: "1", Timeout: 2 * time.Minute}
	if _, err := s.checkCell(l, someone, req); kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), "timeout_ms") {
		t.Errorf("a cell's timeout over the maximum: err = %v, want forbidden naming timeout_ms", err)
	}
	if _, err := s.checkCell(l, admin, req); err != nil {
		t.Errorf("an admin's cell timeout over the maximum: %v", err)
	}
}

// TestCapsDefaultsFillWhatIsNotAskedFor: the operator's defaults apply to
// fields a request leaves out, and a cap under kiln's own default lowers
// the default to it.
func TestCapsDefaultsFillWhatIsNotAskedFor(t *testing.T) {
	cfg := operatorCaps()
	cfg.MaxLimits.Pids = 64 // kiln's default is 128
	s := capService(t, cfg, time.Now)
	spec := SessionSpec{Limits: kiln.Limits{CPUMillis: 500}}
	if err := s.checkSpec(someone, &spec); err != nil {
		t.Fatal(err)
	}
	want := kiln.Limits{MemoryBytes: 256 * kiln.MiB, Timeout: 20 * time.Second, CPUMillis: 500, Pids: 64}
	if spec.Limits != want {
		t.Errorf("limits = %+v, want %+v", spec.Limits, want)
	}
	if spec.IdleTTL != time.Hour {
		t.Errorf("idle TTL = %v, want the default 1h", spec.IdleTTL)
	}
}

func TestCapsIdleTTL(t *testing.T) {
	s := capService(t, operatorCaps(), time.Now)
	spec := SessionSpec{IdleTTL: 3 * time.Hour}
	if err := s.checkSpec(someone, &spec); kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), "idle_ttl_seconds") || !strings.Contains(err.Error(), "7200") {
		t.Errorf("idle TTL over the maximum: err = %v, want forbidden naming idle_ttl_seconds and 7200", err)
	}
	spec = SessionSpec{IdleTTL: 3 * time.Hour}
	if err := s.checkSpec(admin, &spec); err != nil {
		t.Errorf("an admin's idle TTL over the maximum: %v", err)
	}
}

func TestCapsConfigRefusesDefaultOverMaximum(t *testing.T) {
	cfg := Config{DefaultLimits: kiln.Limits{MemoryBytes: 2 * kiln.GiB}, MaxLimits: kiln.Limits{MemoryBytes: kiln.GiB}}.withDefaults()
	err := cfg.checkLimitConfig()
	if err == nil || !strings.Contains(err.Error(), "memory_bytes") {
		t.Errorf("default over maximum: err = %v, want one naming memory_bytes", err)
	}
}

// TestCPUBudgetPerDay: past the day's CPU-seconds the next cell is a
// quota_exceeded that says when it renews; the next UTC day it runs.
func TestCPUBudgetPerDay(t *testing.T) {
	now := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	cfg := operatorCaps()
	cfg.CPUSecondsPerDay = 10
	s := capService(t, cfg, func() time.Time { return now })
	ctx := context.Background()
	if err := s.checkBudget(ctx, someone); err != nil {
		t.Fatal(err)
	}
	s.chargeCPU(ctx, someone, 9*time.Second)
	if err := s.checkBudget(ctx, someone); err != nil {
		t.Fatalf("9 of 10 CPU-seconds used: %v", err)
	}
	s.chargeCPU(ctx, someone, 2*time.Second)
	err := s.checkBudget(ctx, someone)
	if kiln.KindOf(err) != kiln.QuotaExceeded || !strings.Contains(err.Error(), "10") || !strings.Contains(err.Error(), "2026-03-02T00:00:00Z") {
		t.Fatalf("11 of 10 CPU-seconds used: err = %v, want quota_exceeded naming the budget and when it renews", err)
	}
	if err := s.checkBudget(ctx, admin); err != nil {
		t.Errorf("another user is not charged for someone's CPU: %v", err)
	}
	u, err := s.usageOf(ctx, someone)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds != (Quota{Used: 11, Limit: 10}) || !u.Renews.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("usage: cpu %+v renews %v", u.CPUSeconds, u.Renews)
	}
	if u.MaxLimits.MemoryBytes != kiln.GiB || u.DefaultLimits.MemoryBytes != 256*kiln.MiB || u.Sessions.Limit != int64(s.cfg.MaxSessionsPerUser) {
		t.Errorf("usage limits: %+v", u)
	}
	now = now.Add(2 * time.Hour)
	if err := s.checkBudget(ctx, someone); err != nil {
		t.Errorf("the next UTC day: %v", err)
	}
}

// TestCPUBudgetSurvivesARestart: the day's count is in the store, so a
// new service on the same store (a restart) still refuses the user.
func TestCPUBudgetSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u := kiln.User{Name: "spender"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	cfg := operatorCaps()
	cfg.CPUSecondsPerDay = 10
	now := func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) }
	before := capService(t, cfg, now)
	before.cpu = newCPUBudget(now, st)
	before.chargeCPU(ctx, u, 6*time.Second)
	before.chargeCPU(ctx, u, 6*time.Second)
	if err := before.checkBudget(ctx, u); kiln.KindOf(err) != kiln.QuotaExceeded {
		t.Fatalf("12 of 10 CPU-seconds: err = %v, want quota_exceeded", err)
	}
	after := capService(t, cfg, now)
	after.cpu = newCPUBudget(now, st)
	if err := after.checkBudget(ctx, u); kiln.KindOf(err) != kiln.QuotaExceeded {
		t.Errorf("after a restart: err = %v, want quota_exceeded", err)
	}
	usage, err := after.usageOf(ctx, u)
	if err != nil || usage.CPUSeconds.Used != 12 {
		t.Errorf("after a restart: usage %+v, err %v; want 12 CPU-seconds used", usage.CPUSeconds, err)
	}
}
