package service

import (
	"context"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// live is an active session in this process: its record, its sandbox
// (made on first use after a restart) and what keeps it from being idle.
type live struct {
	rec  kiln.Session // fixed at creation: id, user, languages, limits, TTL
	path string       // the workspace on the host

	cells chan struct{} // one cell at a time, in arrival order

	mu         sync.Mutex
	sess       *engine.Session // nil until needed
	mounts     []backend.Mount // the session's read-only mounts, for its next sandbox
	buildCache string          // the user's build caches on the host, for its next sandbox; "" for none
	envLayer   string          // its environment's layer in the sandbox, linked in each new one
	net        *netSession     // the egress proxy session of its sandboxes (network.go)
	nets       *netPlane       // where a resumed session opens one
	policy     kiln.NetworkPolicy
	notice     string // told with the next cell, then cleared
	busy       int    // running cells, open streams, file operations
	cellsAhead int    // cells waiting for this session's running one
	lastActive time.Time
	ended      bool
	endReason  string // why it ended, for a cell that was running then
	noted      string // the sandbox last noted in the store (noteSandboxes)
}

func newLive(rec kiln.Session, path string, sess *engine.Session) *live {
	return &live{rec: rec, path: path, sess: sess, cells: make(chan struct{}, 1), lastActive: rec.LastActive}
}

// sandbox returns the session's sandbox, making one on the workspace if
// the session has none (after a restart).
func (l *live) sandbox(ctx context.Context, eng *engine.Engine) (*engine.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended && l.endReason == reasonMoved {
		return nil, errMoved // replicas_handoff.go
	}
	if l.ended {
		return nil, errEnded
	}
	if l.sess != nil {
		return l.sess, nil
	}
	n, err := l.netOfLocked()
	if err != nil {
		return nil, err
	}
	sess, err := eng.NewSession(ctx, engine.SessionSpec{Limits: l.rec.Limits, HostDir: l.path, Mounts: l.mounts, EgressSocket: n.socket(), BuildCache: l.buildCache, Resources: l.rec.Resources})
	if err != nil {
		return nil, err
	}
	if l.envLayer != "" {
		if err := linkEnvironment(ctx, sess, l.envLayer); err != nil {
			sess.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	l.sess = sess
	return sess, nil
}

var errEnded = &kiln.Error{Kind: kiln.Conflict, Message: "the session has ended"}

// hold marks the session busy (not idle) until the returned func runs.
func (l *live) hold() func() {
	l.mu.Lock()
	l.busy++
	l.lastActive = time.Now()
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.busy--
			l.lastActive = time.Now()
			l.mu.Unlock()
		})
	}
}

// idleSince says when the session last did anything, and false when it
// is doing something now.
func (l *live) idleSince() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastActive, l.busy == 0
}

// takeNotice returns the pending notice once.
func (l *live) takeNotice() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.notice
	l.notice = ""
	return n
}

// lockCells waits for the session's turn to run a cell. queued, when
// not nil, is told the cell's place among the session's waiting cells
// when it has to wait.
func (l *live) lockCells(ctx context.Context, queued func(position int)) error {
	select {
	case l.cells <- struct{}{}:
		return nil
	default:
	}
	l.mu.Lock()
	l.cellsAhead++
	position := l.cellsAhead
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.cellsAhead--
		l.mu.Unlock()
	}()
	if queued != nil {
		queued(position)
	}
	select {
	case l.cells <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *live) unlockCells() { <-l.cells }

// end marks the session ended for reason and destroys its sandbox; the
// workspace is the caller's to remove.
func (l *live) end(ctx context.Context, reason string) {
	l.mu.Lock()
	l.ended = true
	l.endReason = reason
	n := l.net
	l.mu.Unlock()
	l.closeSandbox(ctx)
	n.close()
}

// endedFor says why the session ended, "" while it is active.
func (l *live) endedFor() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		return ""
	}
	return l.endReason
}

// closeSandbox destroys the sandbox, if any, leaving the workspace.
func (l *live) closeSandbox(ctx context.Context) {
	l.mu.Lock()
	sess := l.sess
	l.sess = nil
	l.mu.Unlock()
	if sess != nil {
		sess.Interrupt()
		sess.Close(ctx)
	}
}

// dropSandbox forgets a sandbox that broke, so that the next use makes a
// new one on the same workspace.
func (l *live) dropSandbox(ctx context.Context, broken *engine.Session, why string) {
	l.mu.Lock()
	if l.sess != broken {
		l.mu.Unlock()
		return
	}
	l.sess = nil
	l.notice = why
	l.mu.Unlock()
	broken.Close(ctx)
}
