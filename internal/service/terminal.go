package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store"
)

// MaxTermSize bounds a terminal's rows and columns.
const MaxTermSize = 1000

// Terminal is an interactive shell on a pseudo-terminal in a session's
// sandbox (the agent's terminal_linux.go): as confined as a cell, as the
// sandbox's user, in the workspace. Read its output, Write keystrokes,
// Resize it, and Close it when done; the session counts as busy while it
// is open, and the terminal ends with the session.
type Terminal struct {
	svc     *Service
	t       *agentclient.Terminal
	release func()
	entry   store.AuditEntry
	opened  time.Time
	once    sync.Once
}

// OpenTerminal opens a terminal in u's session sessionID, or one shared
// with u as a collaborator: a shell runs anything a cell can, so a viewer
// may not open one.
func (s *Service) OpenTerminal(ctx context.Context, u kiln.User, sessionID string, rows, cols int) (*Terminal, error) {
	if rows < 1 || rows > MaxTermSize || cols < 1 || cols > MaxTermSize {
		return nil, kiln.Errorf(kiln.Invalid, "terminal size %dx%d: rows and cols must be between 1 and %d", rows, cols, MaxTermSize)
	}
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		if errors.Is(err, errEnded) {
			return nil, err
		}
		var ke *kiln.Error
		if errors.As(err, &ke) && ke.Kind == kiln.Forbidden {
			return nil, kiln.Errorf(kiln.Forbidden, "the session is shared with you as %s: a terminal runs commands, which needs the collaborator role", a.role)
		}
		return nil, err
	}
	ag, release, err := s.workspace(ctx, a.l)
	if err != nil {
		return nil, err
	}
	entry := store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "terminal.open", SessionID: sessionID}
	t, err := ag.OpenTerminal(ctx, protocol.TermOpen{TermSize: protocol.TermSize{Rows: uint16(rows), Cols: uint16(cols)}})
	if err != nil {
		release()
		err = terminalError(err)
		entry.Outcome = string(kiln.KindOf(err))
		s.audit(ctx, entry)
		return nil, err
	}
	entry.Outcome = "ok"
	entry.Detail = jsonDetail(map[string]any{"pid": t.Pid})
	s.audit(ctx, entry)
	return &Terminal{svc: s, t: t, release: release, entry: entry, opened: time.Now()}, nil
}

func terminalError(err error) error {
	var re *agentclient.RemoteError
	switch {
	case errors.As(err, &re) && re.Code == protocol.ErrBusy:
		return kiln.Errorf(kiln.Conflict, "%s", re.Message)
	case errors.As(err, &re) && re.Code == protocol.ErrInvalid:
		return kiln.Errorf(kiln.Invalid, "%s", re.Message)
	case errors.Is(err, agentclient.ErrClosed):
		return errEnded
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return kiln.Errorf(kiln.SandboxError, "terminal: %v", err)
}

// Read returns the terminal's output, io.EOF once its shell has exited,
// or an error once the session has ended. Output waits in the sandbox
// until it is read (the shell blocks), so a slow reader costs no memory.
// Read until it fails, after Close too: the end of the stream lets the
// session go idle and records the close. One goroutine reads.
func (t *Terminal) Read(p []byte) (int, error) {
	n, err := t.t.Read(p)
	if err != nil {
		t.finish()
	}
	return n, err
}

// Write sends keystrokes.
func (t *Terminal) Write(p []byte) (int, error) { return t.t.Write(p) }

// Resize changes the terminal's size.
func (t *Terminal) Resize(rows, cols int) error {
	if rows < 1 || rows > MaxTermSize || cols < 1 || cols > MaxTermSize {
		return kiln.Errorf(kiln.Invalid, "terminal size %dx%d: rows and cols must be between 1 and %d", rows, cols, MaxTermSize)
	}
	return t.t.Resize(uint16(rows), uint16(cols))
}

// Close hangs the terminal up: the agent kills its processes, and Read
// then returns io.EOF. It never waits.
func (t *Terminal) Close() { t.t.Close() }

// finish lets the session go idle and records the close, once.
func (t *Terminal) finish() {
	t.once.Do(func() {
		t.release()
		e := t.entry
		e.Action = "terminal.close"
		detail := map[string]any{"seconds": int(time.Since(t.opened).Seconds())}
		if info, _ := t.t.Exit(); info != nil {
			detail["exit_code"] = info.Code
			if info.Signal != "" {
				detail["signal"] = info.Signal
			}
		}
		e.Detail = jsonDetail(detail)
		t.svc.audit(context.Background(), e)
	})
}

// Exit is how the shell ended, once Read has returned io.EOF: its exit
// code, or -1 and the signal that killed it. ok is false before that.
func (t *Terminal) Exit() (code int, signal string, ok bool) {
	info, _ := t.t.Exit()
	if info == nil {
		return 0, "", false
	}
	return info.Code, info.Signal, true
}
