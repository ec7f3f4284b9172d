package kubernetes

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// warmPool keeps Pods ready ahead of CreateSandbox (Options.WarmPods):
// each started, with its agent reached and its isolation checked, so that
// a claim costs a ping instead of a Pod's start. Each of its workers
// makes one sandbox and offers it until a claim takes it, then makes the
// next: the pool refills by itself and never holds more than its size.
type warmPool struct {
	b     *Backend
	lim   kiln.Limits // the warm Pods' limits, with defaults: claims must ask for these
	ready chan warm   // unbuffered: a worker holds its sandbox until a claim takes it
	mu    sync.Mutex
	ids   map[string]bool // Pods that are the pool's, being made or ready: not sandboxes yet
	wg    sync.WaitGroup
	// offered counts workers holding a ready sandbox (tests and figures)
	offered atomic.Int32
}

type warm struct {
	id string
	c  *agentclient.Client
}

// fillPool starts the warm pool, once, with the first Reap or
// CreateSandbox: after SetOwner, whose label its Pods carry, and after
// kiln serve's start has reaped a previous kiln's Pods.
func (b *Backend) fillPool() {
	if b.opt.WarmPods <= 0 {
		return
	}
	b.poolOnce.Do(func() {
		p := &warmPool{b: b, lim: b.opt.WarmLimits.WithDefaults(), ready: make(chan warm), ids: map[string]bool{}}
		p.wg.Add(b.opt.WarmPods)
		b.mu.Lock()
		b.pool = p
		b.mu.Unlock()
		for range b.opt.WarmPods {
			go p.work()
		}
	})
}

// thePool is the warm pool once it started, else nil.
func (b *Backend) thePool() *warmPool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pool
}

// claim takes a ready sandbox whose agent still answers, or returns ""
// when the pool has none for these limits (then the caller starts one).
func (p *warmPool) claim(ctx context.Context, lim kiln.Limits) (string, *agentclient.Client) {
	if p == nil || lim != p.lim {
		return "", nil
	}
	for {
		select {
		case w := <-p.ready:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := w.c.Ping(pctx)
			cancel()
			p.forget(w.id)
			if err == nil {
				return w.id, w.c
			}
			// its Pod went (deleted, evicted) while it waited
			w.c.Close()
			go p.b.remove(context.Background(), w.id)
		default:
			return "", nil
		}
	}
}

// work makes a sandbox, offers it until claimed, and again, until the
// backend is closed; a failed start backs off up to a minute.
func (p *warmPool) work() {
	defer p.wg.Done()
	backoff := time.Second
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-p.b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		id := newID()
		p.mu.Lock()
		p.ids[id] = true
		p.mu.Unlock()
		_, c, err := p.b.start(ctx, id, p.lim, nil, "", nil)
		if err != nil {
			cancel()
			p.forget(id)
			select {
			case <-p.b.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
			continue
		}
		backoff = time.Second
		p.offered.Add(1)
		select {
		case p.ready <- warm{id, c}:
			p.offered.Add(-1)
			cancel()
		case <-p.b.stop:
			p.offered.Add(-1)
			cancel()
			c.Close()
			p.b.remove(context.Background(), id)
			p.forget(id)
			return
		}
	}
}

func (p *warmPool) forget(id string) {
	p.mu.Lock()
	delete(p.ids, id)
	p.mu.Unlock()
}

// has says whether the Pod of id is the pool's (List and Reap leave it).
func (p *warmPool) has(id string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[id]
}

// wait waits for the workers to end after Close, their Pods deleted.
func (p *warmPool) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
