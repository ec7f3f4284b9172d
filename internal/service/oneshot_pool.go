package service

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// runPoolLanguages are the languages whose one-shot runs start from a
// ready interpreter: the REPL languages agents run most.
var runPoolLanguages = []string{"python", "javascript"}

// runPool keeps, per language, sandboxes whose kernel has started and
// waits for code, for one-shot runs (POST /v1/run). Each sandbox serves
// exactly one run and is destroyed after it, as a fresh one would be: it
// is made with the limits a run gets when it asks for none, has a tmpfs
// workspace, and its kernel has run only the warm-up cell, which executes
// nothing of its own (kernelproto.Execute.Warmup) and imports nothing
// ahead, so the user's code sees the same interpreter state as in a fresh
// sandbox (TestRunPoolSameAsFresh).
type runPool struct {
	limits kiln.Limits
	pools  map[string]*pool
	taken  atomic.Int64 // runs that started from a ready sandbox

	mu        sync.Mutex
	closed    bool           // close has begun: sandboxes go at once
	teardowns sync.WaitGroup // one-shot sandboxes being destroyed
}

func newRunPool(s *Service, size int) *runPool {
	rp := &runPool{pools: map[string]*pool{}}
	if size <= 0 {
		return rp
	}
	// The limits of a run that asks for none: the defaults, as capLimits
	// fills them in for every user.
	lim, err := s.capLimits(kiln.User{Admin: true}, kiln.Limits{})
	if err != nil {
		return rp
	}
	rp.limits = lim
	for _, l := range runPoolLanguages {
		if lg, err := lang.Lookup(l); err != nil || lg.Available() != nil {
			continue // not installed here: its runs fail as before, with the reason
		}
		rp.pools[l] = startPool(size, func() (*pooled, error) { return s.makeRunPooled(l, lim) },
			func(pd *pooled) { pd.sess.Close(context.Background()); pd.net.close() },
			func(int) {},
			func(err error) {
				s.metrics.SandboxFailure("pool")
				s.log.Error("one-shot pool: could not make a sandbox", "language", l, "err", err)
			})
	}
	return rp
}

// take hands over a ready sandbox for p, or nil when p does not fit the
// pool (other limits, another language) or none is ready; the caller then
// makes a fresh one, as before the pool. refill, always safe to call,
// lets the pool make the next sandbox: the caller calls it once the run
// has its result.
func (rp *runPool) take(p engine.PreparedRun) (pd *pooled, refill func()) {
	pl := rp.pools[p.Language()]
	if pl == nil || p.Limits() != rp.limits {
		return nil, func() {}
	}
	pd, release := pl.takeDeferred()
	if pd == nil {
		return nil, func() {}
	}
	rp.taken.Add(1)
	return pd, release
}

// closeLater destroys a one-shot run's sandbox, pooled or not, after the
// answer has gone: its teardown (killing its processes, removing its
// cgroups and mounts) is not the caller's to wait for. close waits for
// it; once close has begun, the sandbox goes at once.
func (rp *runPool) closeLater(sess *engine.Session, n *netSession) {
	rp.mu.Lock()
	if rp.closed {
		rp.mu.Unlock()
		sess.Close(context.Background())
		n.close()
		return
	}
	rp.teardowns.Add(1)
	rp.mu.Unlock()
	go func() {
		defer rp.teardowns.Done()
		sess.Close(context.Background())
		n.close()
	}()
}

func (rp *runPool) close(ctx context.Context) {
	rp.mu.Lock()
	rp.closed = true
	rp.mu.Unlock()
	for _, p := range rp.pools {
		p.close(ctx)
	}
	rp.teardowns.Wait()
}

// makeRunPooled makes a sandbox as a one-shot run's (engine.RunPrepared)
// and starts its kernel with a warm-up cell.
func (s *Service) makeRunPooled(language string, lim kiln.Limits) (*pooled, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := s.nets.openNet("", "", kiln.NetworkPolicy{})
	if err != nil {
		return nil, err
	}
	sess, err := s.engine.NewSession(ctx, engine.SessionSpec{Limits: lim, Mounts: s.sandboxMounts(nil), EgressSocket: n.socket()})
	if err != nil {
		n.close()
		return nil, err
	}
	res, err := sess.Run(ctx, engine.Cell{Language: language, Code: warmupCode[language], Warmup: true}, engine.Events{})
	if err == nil && res.Status != kiln.StatusOK {
		err = kiln.Errorf(kiln.SandboxError, "the %s warm-up cell ended %s", language, res.Status)
	}
	if err != nil {
		sess.Close(context.Background())
		n.close()
		return nil, err
	}
	return &pooled{sess: sess, net: n}, nil
}

// warmupCode is what a warm-up cell carries; the kernel does not run it.
var warmupCode = map[string]string{"python": "pass", "javascript": ";"}

// RunPoolReady is how many sandboxes of the language wait in the one-shot
// pool, for kiln bench to wait (untimed) until the pool has refilled.
func (s *Service) RunPoolReady(language string) int {
	if p := s.runs.pools[language]; p != nil {
		return len(p.ready)
	}
	return 0
}
