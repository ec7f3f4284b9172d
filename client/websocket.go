package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// stdinChunk bounds the stdin text of one message. JSON escaping makes a
// chunk at most six times longer, so every message the client sends stays
// under the 32 KiB a WebSocket library reads by default.
const stdinChunk = 4 << 10

// Stream is one cell running over a session's WebSocket
// (GET /v1/sessions/{id}/ws). Recv reads its events; Stdin, CloseStdin,
// CopyStdin and Interrupt talk to it while it runs. Recv must be called
// from one goroutine at a time; the other methods may be called from any
// goroutine, also while Recv waits. Close the stream when done.
type Stream struct {
	conn  *websocket.Conn
	ended bool // the done or error event was received
}

// ExecWS starts a cell over the session's WebSocket and returns its
// stream. ctx bounds the handshake and the execute message only; each
// method of the stream takes its own. Unlike ExecStream, the cell's stdin
// is open: send it with Stdin or CopyStdin and end it with CloseStdin.
// A refused handshake (a bad key, an unknown session) is a *Problem.
func (c *Client) ExecWS(ctx context.Context, sessionID string, req ExecRequest) (*Stream, error) {
	h := http.Header{}
	c.authorize(h, false)
	u := c.endpoint(route("/v1/sessions/", sessionID, "/ws"), nil)
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 && resp.Body != nil {
			return nil, problemFrom(resp)
		}
		return nil, fmt.Errorf("kiln client: %w", err)
	}
	conn.SetReadLimit(maxEventBytes)
	s := &Stream{conn: conn}
	if err := s.send(ctx, WSMessage{Type: "execute", Execute: &req}); err != nil {
		conn.CloseNow()
		return nil, err
	}
	return s, nil
}

// Recv returns the next event. After the done or error event it returns
// io.EOF; a stream that ends before either is io.ErrUnexpectedEOF.
// Cancelling ctx closes the connection (a property of the WebSocket
// library), so use a context that lives as long as the stream.
func (s *Stream) Recv(ctx context.Context) (Event, error) {
	if s.ended {
		return Event{}, io.EOF
	}
	_, b, err := s.conn.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Event{}, ctx.Err()
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure {
			err = io.ErrUnexpectedEOF
		}
		return Event{}, fmt.Errorf("kiln client: the stream ended before the execution finished: %w", err)
	}
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return Event{}, fmt.Errorf("kiln client: a stream message that is not an event: %w", err)
	}
	s.ended = ev.Type == EventDone || ev.Type == EventError
	return ev, nil
}

// Wait receives the remaining events, calling fn (which may be nil) with
// each, and returns the final Execution, as ExecStream does.
func (s *Stream) Wait(ctx context.Context, fn func(Event)) (*Execution, error) {
	for {
		ev, err := s.Recv(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("kiln client: the stream already ended")
			}
			return nil, err
		}
		if x, final, err := finish(ev, fn); final {
			return x, err
		}
	}
}

// Stdin sends text to the cell's stdin. Invalid UTF-8 is replaced by
// U+FFFD: stdin travels as JSON strings. Long text goes in several
// messages, each cut at a character boundary.
func (s *Stream) Stdin(ctx context.Context, text []byte) error {
	for len(text) > 0 {
		n := chunkEnd(text)
		if err := s.send(ctx, WSMessage{Type: "stdin", Data: string(text[:n])}); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

// chunkEnd is where the first message's part of p ends: at most
// stdinChunk bytes, not inside a UTF-8 sequence.
func chunkEnd(p []byte) int {
	if len(p) <= stdinChunk {
		return len(p)
	}
	n := stdinChunk
	for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(p[n]); i++ {
		n--
	}
	if n == 0 || !utf8.RuneStart(p[n]) {
		return stdinChunk // not UTF-8 here anyway
	}
	return n
}

// CloseStdin ends the cell's stdin: its next read sees end of file.
func (s *Stream) CloseStdin(ctx context.Context) error {
	return s.send(ctx, WSMessage{Type: "stdin", EOF: true})
}

// CopyStdin sends everything r yields as the cell's stdin, then closes it.
func (s *Stream) CopyStdin(ctx context.Context, r io.Reader) error {
	buf := make([]byte, stdinChunk)
	carry := 0 // bytes of a character cut by the previous read
	for {
		n, err := r.Read(buf[carry:])
		n += carry
		send := n
		if err == nil {
			// Keep an incomplete character for the next read.
			for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
				if utf8.RuneStart(buf[i]) {
					if !utf8.FullRune(buf[i:n]) {
						send = i
					}
					break
				}
			}
		}
		if send > 0 {
			if err := s.Stdin(ctx, buf[:send]); err != nil {
				return err
			}
		}
		carry = copy(buf, buf[send:n])
		if errors.Is(err, io.EOF) {
			return s.CloseStdin(ctx)
		}
		if err != nil {
			return fmt.Errorf("kiln client: read stdin: %w", err)
		}
	}
}

// Interrupt stops the running cell; the kernel keeps its state when it can.
// The stream then ends with the cell's done event (status interrupted).
func (s *Stream) Interrupt(ctx context.Context) error {
	return s.send(ctx, WSMessage{Type: "interrupt"})
}

// Close closes the connection. A cell still running is the server's to
// stop or finish.
func (s *Stream) Close() error {
	err := s.conn.Close(websocket.StatusNormalClosure, "")
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("kiln client: %w", err)
	}
	return nil
}

func (s *Stream) send(ctx context.Context, m WSMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("kiln client: encode message: %w", err)
	}
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("kiln client: send %s: %w", m.Type, err)
	}
	return nil
}
