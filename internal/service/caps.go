package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// limitField is one per-session limit as the API names it, for the
// operator's defaults and caps.
type limitField struct {
	name   string // the API's field name
	get    func(*kiln.Limits) *int64
	format func(int64) string
}

func plain(v int64) string  { return fmt.Sprint(v) }
func cpus(v int64) string   { return fmt.Sprintf("%g CPUs (%d millicpus)", float64(v)/1000, v) }
func millis(v int64) string { return time.Duration(v).String() }

// limitFields is every field of kiln.Limits; a table, so that a reviewer
// sees what the caps cover in one place.
var limitFields = []limitField{
	{"timeout_ms", func(l *kiln.Limits) *int64 { return (*int64)(&l.Timeout) }, millis},
	{"memory_bytes", func(l *kiln.Limits) *int64 { return &l.MemoryBytes }, kiln.FormatBytes},
	{"cpu_millis", func(l *kiln.Limits) *int64 { return &l.CPUMillis }, cpus},
	{"pids", func(l *kiln.Limits) *int64 { return &l.Pids }, plain},
	{"workspace_bytes", func(l *kiln.Limits) *int64 { return &l.WorkspaceBytes }, kiln.FormatBytes},
	{"output_bytes", func(l *kiln.Limits) *int64 { return &l.OutputBytes }, kiln.FormatBytes},
	{"file_size_bytes", func(l *kiln.Limits) *int64 { return &l.FileSizeBytes }, kiln.FormatBytes},
	{"open_files", func(l *kiln.Limits) *int64 { return &l.OpenFiles }, plain},
	{"tmp_bytes", func(l *kiln.Limits) *int64 { return &l.TmpBytes }, kiln.FormatBytes},
	{"inodes", func(l *kiln.Limits) *int64 { return &l.Inodes }, plain},
}

// adminMaxIdleTTL is how long an admin may ask a session to idle, past
// the operator's MaxIdleTTL.
const adminMaxIdleTTL = 30 * 24 * time.Hour

// checkLimitConfig fills the defaults that the caps imply and refuses a
// configuration whose defaults exceed its maximums. A cap below kiln's
// built-in default lowers the default to the cap, so that a user who asks
// for nothing is never refused.
func (c *Config) checkLimitConfig() error {
	if err := c.DefaultLimits.Validate(); err != nil {
		return fmt.Errorf("default limits: %w", err)
	}
	if err := c.MaxLimits.Validate(); err != nil {
		return fmt.Errorf("maximum limits: %w", err)
	}
	builtin := kiln.DefaultLimits()
	for _, f := range limitFields {
		d, m := f.get(&c.DefaultLimits), *f.get(&c.MaxLimits)
		if m == 0 {
			continue
		}
		if *d == 0 && *f.get(&builtin) > m {
			*d = m
		}
		if *d > m {
			return kiln.Errorf(kiln.Invalid, "the default %s (%s) is over its maximum (%s)", f.name, f.format(*d), f.format(m))
		}
	}
	if c.IdleTTL > c.MaxIdleTTL {
		return kiln.Errorf(kiln.Invalid, "the default idle TTL (%v) is over its maximum (%v)", c.IdleTTL, c.MaxIdleTTL)
	}
	return nil
}

// capLimits refuses, for a non-admin, any limit above the operator's
// maximum, naming the limit and the maximum; admins may exceed them
// (within kiln's own ranges, which Validate checks). Then it fills the
// fields not asked for with the operator's defaults.
func (s *Service) capLimits(u kiln.User, l kiln.Limits) (kiln.Limits, error) {
	for _, f := range limitFields {
		v, m := *f.get(&l), *f.get(&s.cfg.MaxLimits)
		if !u.Admin && m > 0 && v > m {
			return l, kiln.Errorf(kiln.Forbidden, "%s %s is over this server's maximum of %s; ask for at most that (only an admin may ask for more)",
				f.name, f.format(v), f.format(m))
		}
	}
	for _, f := range limitFields {
		if p := f.get(&l); *p == 0 {
			*p = *f.get(&s.cfg.DefaultLimits)
		}
	}
	return l, nil
}

// checkIdleTTL applies the idle TTL's cap: MaxIdleTTL for users, a month
// for admins.
func (s *Service) checkIdleTTL(u kiln.User, ttl time.Duration) error {
	if ttl < time.Second {
		return kiln.Errorf(kiln.Invalid, "idle TTL %v is under the minimum of 1s", ttl)
	}
	if ceiling := max(adminMaxIdleTTL, s.cfg.MaxIdleTTL); u.Admin && ttl > ceiling {
		return kiln.Errorf(kiln.Invalid, "idle TTL %v is over the most even an admin may ask for, %v", ttl, ceiling)
	}
	if !u.Admin && ttl > s.cfg.MaxIdleTTL {
		return kiln.Errorf(kiln.Forbidden, "idle_ttl_seconds %d is over this server's maximum of %d (%v); ask for at most that (only an admin may ask for more)",
			int64(ttl/time.Second), int64(s.cfg.MaxIdleTTL/time.Second), s.cfg.MaxIdleTTL)
	}
	return nil
}

// cpuBudget counts each user's CPU time per UTC day, cells and one-shot
// runs together. The store keeps the count (store.Usage), so a restart
// does not start the day again; a cache saves a read per cell.
type cpuBudget struct {
	now   func() time.Time
	store store.Usage // nil: memory only (tests)
	// shared: other replicas charge the same store (replicas.go), so
	// every check reads it and the cache is not trusted.
	shared bool

	mu   sync.Mutex
	day  string
	used map[string]time.Duration // users whose count for day is known
}

func newCPUBudget(now func() time.Time, st store.Usage) *cpuBudget {
	return &cpuBudget{now: now, store: st, used: map[string]time.Duration{}}
}

// roll starts a new day's count when the UTC date changed, and returns
// the day and when it ends; b.mu is held.
func (b *cpuBudget) roll() (string, time.Time) {
	now := b.now().UTC()
	if day := now.Format(time.DateOnly); day != b.day {
		b.day, b.used = day, map[string]time.Duration{}
	}
	y, m, d := now.Date()
	return b.day, time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// load reads the user's count for the day from the store, once; b.mu is
// held.
func (b *cpuBudget) load(ctx context.Context, user, day string) (time.Duration, error) {
	if used, ok := b.used[user]; (ok && !b.shared) || b.store == nil {
		return used, nil
	}
	used, err := b.store.CPU(ctx, user, day)
	if err != nil {
		return 0, err
	}
	b.used[user] = used
	return used, nil
}

func (b *cpuBudget) charge(ctx context.Context, user string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	day, _ := b.roll()
	if b.store != nil {
		if err := b.store.AddCPU(ctx, user, day, d); err != nil {
			delete(b.used, user) // read it again next time
			return err
		}
		if _, ok := b.used[user]; !ok {
			_, err := b.load(ctx, user, day) // the store's count has d
			return err
		}
	}
	b.used[user] += d
	return nil
}

// currentDay is the UTC day a charge made now counts for.
func (b *cpuBudget) currentDay() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	day, _ := b.roll()
	return day
}

// counted brings the cache up to date with d that the store has already
// added to the user's day (store.FinishCell). A user not cached is read
// from the store next time, with d in it.
func (b *cpuBudget) counted(user, day string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, _ := b.roll(); cur != day {
		return
	}
	if _, ok := b.used[user]; ok {
		b.used[user] += d
	}
}

// today is the user's CPU time today and when the count starts again.
func (b *cpuBudget) today(ctx context.Context, user string) (time.Duration, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	day, renews := b.roll()
	used, err := b.load(ctx, user, day)
	return used, renews, err
}

// chargeCPU adds a finished cell's or run's CPU time to u's day; a store
// failure is logged, not returned, because the work has happened.
func (s *Service) chargeCPU(ctx context.Context, u kiln.User, d time.Duration) {
	if err := s.cpu.charge(context.WithoutCancel(ctx), u.ID, d); err != nil {
		s.log.Error("record cpu usage", "user", u.ID, "err", err)
	}
}

// checkBudget refuses a cell or run when the user has used the day's CPU
// budget. A cell that runs over it finishes; the next one is refused.
func (s *Service) checkBudget(ctx context.Context, u kiln.User) error {
	limit := time.Duration(s.cfg.CPUSecondsPerDay) * time.Second
	if limit <= 0 {
		return nil
	}
	used, renews, err := s.cpu.today(ctx, u.ID)
	if err != nil {
		return err
	}
	if used < limit {
		return nil
	}
	s.metrics.Rejected("quota")
	return kiln.Errorf(kiln.QuotaExceeded, "you have used %.1f CPU-seconds today, your daily budget of %d; it renews at %s (GET /v1/users/me/usage shows it)",
		used.Seconds(), s.cfg.CPUSecondsPerDay, renews.Format(time.RFC3339))
}

// Quota is one budget: how much is used and the most allowed (0: no
// limit).
type Quota struct {
	Used, Limit int64
}

// UserUsage is what a user has used of the budgets, and the limits a
// session may ask for.
type UserUsage struct {
	UserID         string
	Sessions       Quota // active sessions
	WorkspaceBytes Quota // the active sessions' workspace limits together
	CPUSeconds     Quota // CPU-seconds today (UTC), cells and runs
	Renews         time.Time
	DefaultLimits  kiln.Limits // what a session gets when it asks for nothing
	MaxLimits      kiln.Limits // the most a session may ask for (zero fields: kiln's own ranges); not for admins
	MaxIdleTTL     time.Duration
}

// Usage reports a user's budgets: the caller's own ("me"), or anyone's
// for an admin.
func (s *Service) Usage(ctx context.Context, caller kiln.User, id string) (UserUsage, error) {
	id, err := s.subject(caller, id)
	if err != nil {
		return UserUsage{}, err
	}
	u, err := s.store.User(ctx, id)
	if err != nil {
		return UserUsage{}, err
	}
	return s.usageOf(ctx, u)
}

func (s *Service) usageOf(ctx context.Context, u kiln.User) (UserUsage, error) {
	n, bytes := s.activeOf(u.ID)
	cpu, renews, err := s.cpu.today(ctx, u.ID)
	if err != nil {
		return UserUsage{}, err
	}
	out := UserUsage{UserID: u.ID,
		Sessions:       Quota{int64(n), int64(s.cfg.MaxSessionsPerUser)},
		WorkspaceBytes: Quota{bytes, s.cfg.MaxWorkspaceBytesPerUser},
		CPUSeconds:     Quota{int64(cpu / time.Second), s.cfg.CPUSecondsPerDay},
		Renews:         renews, DefaultLimits: s.cfg.DefaultLimits.WithDefaults(), MaxLimits: s.cfg.MaxLimits, MaxIdleTTL: s.cfg.MaxIdleTTL}
	if u.Admin {
		out.MaxLimits, out.MaxIdleTTL = kiln.Limits{}, max(adminMaxIdleTTL, s.cfg.MaxIdleTTL)
	}
	return out, nil
}
