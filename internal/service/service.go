// Package service is kiln as a multi-user service, apart from HTTP: users
// and keys, sessions with their sandboxes and workspaces, the execution
// queue, quotas, the warm pool, idle expiry, recovery after a restart, and
// the audit log. The HTTP server (internal/server) and, later, the MCP
// server are thin adapters over it, so authorization and lifecycle live
// here once.
package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/metrics"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// Config is the service's policy. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	DataDir    string         // workspaces live in DataDir/workspaces
	Workspaces workspace.Kind // what new workspaces are: disk images (the default) or tmpfs

	PoolSize       int           // warm Python sandboxes kept ready; negative disables
	RunPoolSize    int           // per language, sandboxes with a started kernel kept for one-shot runs; 0 disables
	IdleTTL        time.Duration // a session's idle TTL when it asks for none
	MaxIdleTTL     time.Duration // the longest a session may ask for
	IdleCheckEvery time.Duration // how often idle sessions are looked for

	MaxSessionsPerUser       int   // active sessions of one user
	MaxWorkspaceBytesPerUser int64 // the workspace limits of one user's active sessions, together
	CPUSecondsPerDay         int64 // CPU time of one user's cells and runs per UTC day; 0: no budget

	// DefaultLimits fill what a session or run does not ask for (zero
	// fields: kiln's defaults). MaxLimits are the most a non-admin may
	// ask for (zero fields: kiln's own ranges); admins may exceed them.
	DefaultLimits kiln.Limits
	MaxLimits     kiln.Limits

	// The execution queue (see queue.go for the fairness bound). A slot
	// is not a CPU: cgroups share the CPUs, and a sleeping cell holds a
	// slot while using none.
	Concurrency     int // cells and runs at once, all users; default: 8 per CPU, at least 16
	UserConcurrency int // cells and runs at once of one user; default: a quarter of Concurrency, at least 2
	QueueLength     int // cells and runs waiting at most; default: 16 per CPU, at least 64
	UserQueueLength int // cells and runs of one user waiting at most; default: a quarter of QueueLength

	MaxCodeBytes     int64 // a cell's code
	MaxRunFileBytes  int64 // one file returned by a one-shot run
	MaxRunFilesBytes int64 // all files returned by a one-shot run

	// MountRoots are the host folders, set by the administrator (kiln
	// serve --mount-root), under which a session may mount a folder
	// read-only (SessionSpec.Mounts). None: no session may mount.
	MountRoots []string

	// NetworkCeiling is the most a non-admin session's network policy
	// may allow (kiln serve --egress-allow); the zero value is "none",
	// so only admins may open the network. Egress configures the egress
	// proxy every sandbox's traffic goes through (network.go).
	NetworkCeiling kiln.NetworkPolicy
	Egress         egress.Config

	// Environments are the administrator's prebuilt package layers
	// (environments.go), which a session selects by name.
	Environments []EnvironmentDef

	// BuildCacheBytes bounds each user's build caches (buildcache.go):
	// 0 is DefaultBuildCacheBytes, negative turns them off.
	BuildCacheBytes int64

	// Replicas, set with a PostgreSQL store, makes this one of several
	// replicas sharing it (replicas.go); nil (SQLite): the only one.
	// ReplicaAddr is where this replica serves, shown to the others;
	// ReplicaGone is how long a replica may miss heartbeats before its
	// sessions and batches are taken over (default DefaultReplicaGone).
	Replicas    ReplicaStore `json:"-"`
	ReplicaAddr string
	ReplicaGone time.Duration
	// HandoffWait bounds how long a request waits for the live replica
	// holding its session to hand it over (replicas.go; default
	// DefaultHandoffWait), before it is answered that the session is busy.
	HandoffWait time.Duration
}

// DefaultConfig is the policy on the embedded defaults.
func DefaultConfig() Config {
	return Config{
		Workspaces:               workspace.Disk,
		PoolSize:                 2,
		IdleTTL:                  time.Hour,
		MaxIdleTTL:               7 * 24 * time.Hour,
		IdleCheckEvery:           10 * time.Second,
		MaxSessionsPerUser:       20,
		MaxWorkspaceBytesPerUser: 8 * kiln.GiB,
		Concurrency:              max(16, 8*runtime.NumCPU()),
		QueueLength:              max(64, 16*runtime.NumCPU()),
		MaxCodeBytes:             engine.MaxCodeBytes,
		MaxRunFileBytes:          8 * kiln.MiB,
		MaxRunFilesBytes:         32 * kiln.MiB,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Workspaces == "" {
		c.Workspaces = d.Workspaces
	}
	if c.PoolSize == 0 {
		c.PoolSize = d.PoolSize
	}
	if c.PoolSize < 0 {
		c.PoolSize = 0
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	setDur(&c.IdleTTL, d.IdleTTL)
	setDur(&c.MaxIdleTTL, d.MaxIdleTTL)
	setDur(&c.IdleCheckEvery, d.IdleCheckEvery)
	setDur(&c.ReplicaGone, DefaultReplicaGone)
	setDur(&c.HandoffWait, DefaultHandoffWait)
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&c.MaxSessionsPerUser, d.MaxSessionsPerUser)
	setInt(&c.Concurrency, d.Concurrency)
	setInt(&c.UserConcurrency, max(2, c.Concurrency/4))
	c.UserConcurrency = min(c.UserConcurrency, c.Concurrency)
	setInt(&c.QueueLength, d.QueueLength)
	setInt(&c.UserQueueLength, max(1, c.QueueLength/4))
	c.UserQueueLength = min(c.UserQueueLength, c.QueueLength)
	set64 := func(p *int64, v int64) {
		if *p <= 0 {
			*p = v
		}
	}
	set64(&c.MaxWorkspaceBytesPerUser, d.MaxWorkspaceBytesPerUser)
	set64(&c.MaxCodeBytes, d.MaxCodeBytes)
	set64(&c.MaxRunFileBytes, d.MaxRunFileBytes)
	set64(&c.MaxRunFilesBytes, d.MaxRunFilesBytes)
	return c
}

// Service is kiln's service core. Its methods take the calling user and
// answer store.ErrNotFound for anything of another user's.
type Service struct {
	envs    *environments // environments.go
	caches  buildCaches   // buildcache.go
	cfg     Config
	store   Store
	engine  *engine.Engine
	ws      *workspace.Dir
	log     *slog.Logger
	metrics *metrics.Metrics

	queue *queue
	pool  *pool
	runs  *runPool
	nets  *netPlane // the egress proxy and its sessions (network.go)
	users userCache // for Authenticate (users.go)
	cpu   *cpuBudget

	batches  batchRunner // batches.go
	watchers watchers    // open event streams of sessions (shares.go)

	mu       sync.Mutex
	sessions map[string]*live // active sessions by id (with replicas: those this one holds)
	replica  string           // this replica's id; empty without replicas (replicas.go)
	starting map[string]int   // sessions being created, per user (quota)
	handoff  handoffState     // sessions handed between replicas (replicas_handoff.go)
	slots    heldSlots        // this replica's slots of the per-user cap across replicas (replicas_slots.go)

	stop chan struct{}
	done sync.WaitGroup
}

// New starts the service: it recovers the sessions of a previous run,
// removes what that run left behind, and starts the pool and idle expiry.
// Close stops it.
func New(ctx context.Context, cfg Config, st Store, eng *engine.Engine, log *slog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.checkLimitConfig(); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		return nil, errors.New("service: no data directory")
	}
	ws, err := workspace.OpenKind(filepath.Join(cfg.DataDir, "workspaces"), cfg.Workspaces)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg, store: st, engine: eng, ws: ws, log: log,
		queue:    newQueue(cfg.Concurrency, cfg.UserConcurrency, cfg.QueueLength, cfg.UserQueueLength),
		cpu:      newCPUBudget(time.Now, st),
		sessions: map[string]*live{},
		starting: map[string]int{},
		stop:     make(chan struct{}),
	}
	s.metrics = metrics.New(
		func() float64 { return float64(s.activeCount()) },
		func() float64 { return float64(s.queue.depth()) },
		func() float64 { return float64(s.queue.busy()) },
	)
	if s.nets, err = newNetPlane(cfg.DataDir, cfg.Egress, s.audit, log); err != nil {
		return nil, err
	}
	if err := s.openEnvironments(); err != nil {
		s.nets.close()
		return nil, err
	}
	s.cpu.shared = cfg.Replicas != nil
	if cfg.Replicas != nil {
		s.queue.shared = s.userSlot
	}
	if err := s.joinReplicas(ctx); err != nil {
		s.nets.close()
		return nil, err
	}
	if err := s.recover(ctx); err != nil {
		s.nets.close()
		return nil, err
	}
	s.batches.init()
	s.pool = newPool(s, cfg.PoolSize)
	s.runs = newRunPool(s, cfg.RunPoolSize)
	s.done.Add(1)
	go s.expireIdle()
	if s.cfg.Replicas != nil {
		s.done.Add(1)
		go s.heartbeat()
		s.serveHandoffs()
	}
	// Batches resume last: their items run on everything above.
	if err := s.resumeBatches(ctx); err != nil {
		s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// Metrics are the service's Prometheus metrics.
func (s *Service) Metrics() *metrics.Metrics { return s.metrics }

// Config is the policy in force, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Close stops the service. Active sessions stay active in the store with
// their workspaces; their sandboxes go, and the next start resumes them
// with fresh kernels.
func (s *Service) Close(ctx context.Context) error {
	close(s.stop)
	s.batches.cancel() // the batches' pending items resume at the next start
	s.pool.close(ctx)
	s.runs.close(ctx)
	s.done.Wait()
	s.mu.Lock()
	all := make([]*live, 0, len(s.sessions))
	for _, l := range s.sessions {
		all = append(all, l)
	}
	s.mu.Unlock()
	if s.handoffs() {
		s.leaveSandboxes(ctx, all) // replicas_sandboxes.go
		s.nets.close()
		return nil
	}
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.closeSandbox(ctx)
		}()
	}
	wg.Wait()
	s.nets.close()
	return nil
}

// stopping says whether Close has begun.
func (s *Service) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Ready reports whether the service can take work: the store answers.
func (s *Service) Ready(ctx context.Context) error {
	_, _, err := s.store.ListUsers(ctx, store.Page{Limit: 1})
	if err != nil {
		return kiln.Wrap(kiln.Unavailable, err, "the store does not answer")
	}
	return nil
}

func (s *Service) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// audit appends to the log; a failure is logged, not returned, because
// the action it records has already happened.
func (s *Service) audit(ctx context.Context, e store.AuditEntry) {
	if err := s.store.AppendAudit(context.WithoutCancel(ctx), &e); err != nil {
		s.log.Error("audit append failed", "action", e.Action, "err", err)
	}
}
