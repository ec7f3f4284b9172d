package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// pool keeps sandboxes with a Python kernel started, each on its own
// workspace, so that a new session takes one instead of waiting for a
// sandbox and a kernel. A pooled sandbox serves exactly one session: it is
// handed over, never returned.
//
// The pool holds at most size sandboxes at any moment, counting the one
// being made: a place (a token in room) is taken before a sandbox is made
// and given back only when a session takes it, so --pool N means N
// sandboxes, as the kiln_pool_ready metric says.
type pool struct {
	size  int
	ready chan *pooled
	room  chan struct{} // one token per sandbox made or being made
	stop  chan struct{}
	done  sync.WaitGroup

	// make, discard and setReady are the Service's; tests pass fakes.
	make     func() (*pooled, error)
	discard  func(*pooled)
	setReady func(int)
	failed   func(error)
}

type pooled struct {
	id   string // becomes the session's id
	path string
	sess *engine.Session
	net  *netSession // policy "none" until a session takes it
}

func newPool(s *Service, size int) *pool {
	return startPool(size, func() (*pooled, error) { return s.makePooled() }, s.discardPooled, s.metrics.SetPoolReady,
		func(err error) {
			s.metrics.SandboxFailure("pool")
			s.log.Error("warm pool: could not make a sandbox", "err", err)
		})
}

func startPool(size int, mk func() (*pooled, error), discard func(*pooled), setReady func(int), failed func(error)) *pool {
	p := &pool{size: size, ready: make(chan *pooled, max(size, 1)), room: make(chan struct{}, max(size, 1)),
		stop: make(chan struct{}), make: mk, discard: discard, setReady: setReady, failed: failed}
	if size > 0 {
		p.done.Add(1)
		go p.fill()
	}
	return p
}

// eligible says whether a pooled sandbox fits the spec: the operator's
// default limits (pooled ones have them) and Python among the languages.
func (p *pool) eligible(spec SessionSpec, defaults kiln.Limits) bool {
	return p.size > 0 && spec.Limits == defaults && slices.Contains(spec.Languages, "python")
}

// take hands a ready sandbox to use, if there is one, and reports whether
// there was. use runs before the pool starts making the next one.
func (p *pool) take(use func(*pooled)) bool {
	pd, release := p.takeDeferred()
	if pd == nil {
		return false
	}
	use(pd)
	release() // the sandbox is the session's now: make the next
	return true
}

// takeDeferred hands a ready sandbox, or nil, and a release that lets the
// pool make the next one. A one-shot run releases when it has answered,
// so that the refill's new processes do not share the CPUs with the run
// they would only slow down.
func (p *pool) takeDeferred() (*pooled, func()) {
	select {
	case pd := <-p.ready:
		p.setReady(len(p.ready))
		var once sync.Once
		return pd, func() { once.Do(func() { <-p.room }) }
	default:
		return nil, nil
	}
}

// fill keeps the pool full until stop. A failure to make a sandbox is
// retried with a growing pause, so a broken host does not spin.
func (p *pool) fill() {
	defer p.done.Done()
	pause := 100 * time.Millisecond
	for {
		select {
		case p.room <- struct{}{}:
		case <-p.stop:
			return
		}
		pd, err := p.make()
		if err != nil {
			<-p.room
			p.failed(err)
			select {
			case <-time.After(pause):
				pause = min(2*pause, 30*time.Second)
				continue
			case <-p.stop:
				return
			}
		}
		pause = 100 * time.Millisecond
		// There is room in ready: it holds fewer than the tokens taken.
		p.ready <- pd
		p.setReady(len(p.ready))
	}
}

// makePooled builds one pooled sandbox and starts its Python kernel by
// running an empty cell.
func (s *Service) makePooled() (*pooled, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lim := s.cfg.DefaultLimits.WithDefaults()
	id := store.NewID()
	path, err := s.ws.Create(id, lim.WorkspaceBytes, lim.Inodes)
	if err != nil {
		return nil, err
	}
	n, err := s.nets.openNet(id, "", kiln.NetworkPolicy{})
	if err != nil {
		s.ws.Remove(id)
		return nil, err
	}
	sess, err := s.engine.NewSession(ctx, engine.SessionSpec{Limits: s.cfg.DefaultLimits, HostDir: path, Mounts: s.sandboxMounts(nil), EgressSocket: n.socket()})
	if err != nil {
		n.close()
		s.ws.Remove(id)
		return nil, err
	}
	pd := &pooled{id: id, path: path, sess: sess, net: n}
	res, err := sess.Run(ctx, engine.Cell{Language: "python", Code: "pass", Warmup: true}, engine.Events{})
	if err == nil && res.Status != kiln.StatusOK {
		err = kiln.Errorf(kiln.SandboxError, "the warm-up cell ended %s", res.Status)
	}
	if err != nil {
		s.discardPooled(pd)
		return nil, err
	}
	return pd, nil
}

func (s *Service) discardPooled(pd *pooled) {
	pd.sess.Close(context.Background())
	pd.net.close()
	s.ws.Remove(pd.id)
}

// close stops filling and destroys the ready sandboxes.
func (p *pool) close(ctx context.Context) {
	close(p.stop)
	p.done.Wait()
	for {
		select {
		case pd := <-p.ready:
			p.discard(pd)
			p.setReady(len(p.ready))
		default:
			return
		}
	}
}
