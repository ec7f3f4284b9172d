package engine

import (
	"context"

	"github.com/kiln-dev/kiln/internal/backend"
)

// AttachSession is a session on a running sandbox that this engine did
// not make: one another kiln replica made and let go of (a handoff),
// described by box as that replica's Sandbox gave it. The backend's
// Connect must reach it; its kernels keep their state, and kernel
// command lines are sent again with each language's next cell (the
// agent keeps a running kernel when it gets one).
func (e *Engine) AttachSession(ctx context.Context, box backend.Sandbox, spec SessionSpec) (*Session, error) {
	c, err := e.backend.Connect(ctx, box.ID)
	if err != nil {
		return nil, err
	}
	sb := &sandbox{Sandbox: box, Agent: c, b: e.backend}
	return &Session{sb: sb, lim: spec.Limits.WithDefaults(), env: spec.Env, closed: make(chan struct{}), told: map[string]bool{}}, nil
}

// Sandbox describes the session's sandbox, for AttachSession elsewhere.
func (s *Session) Sandbox() backend.Sandbox { return s.sb.Sandbox }
