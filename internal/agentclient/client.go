// Package agentclient is the service's side of the agent connection: it
// multiplexes requests over one protocol stream and routes the events that
// come back to the request that caused them.
//
// Everything the agent sends is treated as untrusted: frames are bounded by
// the protocol reader, and streamed data is bounded by the caller's writers.
package agentclient

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// pending is one request waiting for events. gone is closed when the caller
// stops listening, so the read loop never blocks on an abandoned request.
type pending struct {
	ch   chan *protocol.Message
	gone chan struct{}
}

// ErrClosed is returned for requests on a closed or broken connection.
var ErrClosed = errors.New("agent connection closed")

// ErrRefused is an agent's answer, instead of its hello, when it cannot
// serve; the error carries its reason.
var ErrRefused = errors.New("the agent refused the connection")

// RemoteError is an error the agent reported for a request.
type RemoteError struct {
	Code    string
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Client is a connection to one agent. It is safe for concurrent use.
type Client struct {
	conn io.ReadWriteCloser
	out  *protocol.Writer
	next atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*pending
	err     error // set once the read loop stops
	done    chan struct{}

	cellsMu sync.Mutex
	cells   map[uint64]bool // running cells, for InterruptCells
}

// Dial performs the hello exchange on conn and starts routing events.
func Dial(ctx context.Context, conn io.ReadWriteCloser) (*Client, error) {
	in := protocol.NewReader(conn)
	out := protocol.NewWriter(conn)
	hello := make(chan error, 1)
	go func() {
		m, err := in.Read()
		if err != nil {
			hello <- fmt.Errorf("agent hello: %w", err)
			return
		}
		var e protocol.Error
		if m.Type == protocol.TError && m.Decode(&e) == nil {
			// an agent that cannot serve says why, instead of its hello
			hello <- fmt.Errorf("%w: %s", ErrRefused, e.Message)
			return
		}
		var h protocol.Hello
		if m.Type != protocol.THello || m.Decode(&h) != nil {
			hello <- fmt.Errorf("agent sent %q before hello", m.Type)
			return
		}
		if h.Version != protocol.Version {
			hello <- fmt.Errorf("agent speaks protocol %d, service speaks %d", h.Version, protocol.Version)
			return
		}
		hello <- out.Send(0, protocol.THello, protocol.Hello{Version: protocol.Version})
	}()
	select {
	case err := <-hello:
		if err != nil {
			conn.Close()
			return nil, err
		}
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("agent hello: %w", ctx.Err())
	}
	c := &Client{conn: conn, out: out, pending: map[uint64]*pending{}, done: make(chan struct{}), cells: map[uint64]bool{}}
	c.next.Store(firstID())
	go c.readLoop(in)
	return c, nil
}

func (c *Client) readLoop(in *protocol.Reader) {
	var err error
	for {
		var m *protocol.Message
		m, err = in.Read()
		if err != nil {
			break
		}
		c.mu.Lock()
		p := c.pending[m.ID]
		c.mu.Unlock()
		if p != nil {
			// A slow consumer slows the connection rather than losing events.
			select {
			case p.ch <- m:
			case <-p.gone:
			case <-c.done:
				return
			}
		}
	}
	c.mu.Lock()
	c.err = err
	for id, p := range c.pending {
		close(p.ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// Close closes the connection; pending requests fail with ErrClosed.
func (c *Client) Close() error {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	return c.conn.Close()
}

// request sends a request and returns the channel its events arrive on.
func (c *Client) request(typ string, body any) (uint64, chan *protocol.Message, error) {
	id := c.next.Add(1)
	p := &pending{ch: make(chan *protocol.Message, 64), gone: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, nil, ErrClosed
	}
	c.pending[id] = p
	c.mu.Unlock()
	if err := c.out.Send(id, typ, body); err != nil {
		c.forget(id)
		return 0, nil, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return id, p.ch, nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	if p := c.pending[id]; p != nil {
		close(p.gone)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	id, ch, err := c.request(protocol.TPing, nil)
	if err != nil {
		return err
	}
	defer c.forget(id)
	_, err = c.final(ctx, ch, nil)
	return err
}

// Shutdown asks the agent to kill everything and exit.
func (c *Client) Shutdown(ctx context.Context) error {
	id, ch, err := c.request(protocol.TShutdown, nil)
	if err != nil {
		return err
	}
	defer c.forget(id)
	_, err = c.final(ctx, ch, nil)
	return err
}

// final waits for the ok or error that ends a request, passing other
// events to each.
func (c *Client) final(ctx context.Context, ch chan *protocol.Message, each func(*protocol.Message) error) (*protocol.Message, error) {
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return nil, ErrClosed
			}
			switch m.Type {
			case protocol.TOK:
				return m, nil
			case protocol.TError:
				return nil, remoteError(m)
			}
			if each != nil {
				if err := each(m); err != nil {
					return nil, err
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func remoteError(m *protocol.Message) error {
	var e protocol.Error
	if err := m.Decode(&e); err != nil {
		return err
	}
	return &RemoteError{Code: e.Code, Message: e.Message}
}

// firstID is where a client's request ids start: at random, far from 0,
// so that an agent serving one client after another (agent.ServeClients)
// never takes what a previous client's request still sends for this
// one's. Below 2^52, it leaves the counter nearly all of its range.
func firstID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])>>12 + 1
}
