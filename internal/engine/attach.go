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

// Disconnecter is implemented by a backend whose connection to a sandbox
// can end while the sandbox goes on, for another kiln replica to connect
// to (the Kubernetes backend).
type Disconnecter interface {
	Disconnect(id string)
}

// LetGo ends this engine's connection to the session's sandbox and
// leaves the sandbox running, for the replica the session was handed to
// (AttachSession there). On a backend that is no Disconnecter it does
// nothing: the connection stays, idle, until the sandbox is destroyed.
func (s *Session) LetGo() {
	if d, ok := s.sb.b.(Disconnecter); ok {
		d.Disconnect(s.sb.ID)
	}
}
