package agentclient

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// Terminal is an open terminal in the sandbox (protocol.TTermOpen). Read
// returns what it prints; each Read returns output credit to the agent,
// so a reader that stops reading stops the terminal, never this
// connection's other requests.
type Terminal struct {
	c    *Client
	id   uint64
	ch   chan *protocol.Message
	Pid  int
	rest []byte

	once sync.Once
	mu   sync.Mutex
	exit *protocol.ExitInfo
	err  error
}

// OpenTerminal starts a shell on a pseudo-terminal of rows by cols.
func (c *Client) OpenTerminal(ctx context.Context, req protocol.TermOpen) (*Terminal, error) {
	id, ch, err := c.request(protocol.TTermOpen, req)
	if err != nil {
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			c.forget(id)
			return nil, ErrClosed
		}
		switch m.Type {
		case protocol.TStarted:
			var s protocol.Started
			m.Decode(&s)
			return &Terminal{c: c, id: id, ch: ch, Pid: s.Pid}, nil
		case protocol.TError:
			c.forget(id)
			return nil, remoteError(m)
		}
		c.forget(id)
		return nil, errors.New("agent answered a terminal with " + m.Type)
	case <-ctx.Done():
		c.out.Send(id, protocol.TTermClose, nil)
		c.forget(id)
		return nil, ctx.Err()
	}
}

// Read returns the terminal's output; io.EOF once its shell has exited
// (Exit then says how).
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.rest) == 0 {
		m, ok := <-t.ch
		if !ok {
			return 0, ErrClosed
		}
		switch m.Type {
		case protocol.TTermOutput:
			var d protocol.Data
			if err := m.Decode(&d); err != nil {
				return 0, err
			}
			t.rest = d.Data
			// Credit goes back once the bytes are in the caller's hands.
			t.c.out.Send(t.id, protocol.TTermAck, protocol.TermAck{Bytes: int64(len(d.Data)), Chunks: 1})
		case protocol.TExit:
			var info protocol.ExitInfo
			err := m.Decode(&info)
			t.mu.Lock()
			t.exit, t.err = &info, err
			t.mu.Unlock()
			t.c.forget(t.id)
			return 0, io.EOF
		case protocol.TError:
			t.c.forget(t.id)
			return 0, remoteError(m)
		}
	}
	n := copy(p, t.rest)
	t.rest = t.rest[n:]
	return n, nil
}

// Write sends keystrokes, in chunks the protocol carries.
func (t *Terminal) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += protocol.ChunkSize {
		end := min(off+protocol.ChunkSize, len(p))
		if err := t.c.out.Send(t.id, protocol.TTermInput, protocol.Data{Data: p[off:end]}); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// Resize changes the terminal's size; its foreground programs get SIGWINCH.
func (t *Terminal) Resize(rows, cols uint16) error {
	return t.c.out.Send(t.id, protocol.TTermResize, protocol.TermSize{Rows: rows, Cols: cols})
}

// Close hangs the terminal up: the agent kills its processes and its
// exit follows on Read. Safe to call more than once.
func (t *Terminal) Close() error {
	var err error
	t.once.Do(func() { err = t.c.out.Send(t.id, protocol.TTermClose, nil) })
	return err
}

// Exit is how the shell ended, once Read has returned io.EOF.
func (t *Terminal) Exit() (*protocol.ExitInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exit, t.err
}
