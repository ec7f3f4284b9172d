package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// maxTermMessage bounds one client frame: keystrokes or a paste arrive in
// pieces well under it, and a control frame is a few bytes.
const maxTermMessage = 64 << 10

// termControl is a text frame of the terminal socket: from the client
// "resize" (rows, cols) or "input" (data, for clients that cannot send
// binary frames); from the server "exit" (code, signal) before it closes.
type termControl struct {
	Type   string `json:"type"`
	Rows   int    `json:"rows,omitempty"`
	Cols   int    `json:"cols,omitempty"`
	Data   string `json:"data,omitempty"`
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// terminal is GET /v1/sessions/{id}/terminal?rows=R&cols=C: a WebSocket to
// a shell on a pty in the session's sandbox. Binary frames carry the
// terminal's bytes both ways; text frames are JSON control messages. The
// session's owner and collaborators may open one (a viewer may not: a
// shell runs commands). Closing the socket hangs the terminal up; the
// session stays.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request, c *call) error {
	rows, err := termDim(r, "rows", 24)
	if err != nil {
		return err
	}
	cols, err := termDim(r, "cols", 80)
	if err != nil {
		return err
	}
	if err := sameOrigin(r); err != nil {
		return err
	}
	term, err := s.svc.OpenTerminal(r.Context(), c.user, r.PathValue("id"), rows, cols)
	if err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		term.Close()
		go drainTerminal(term)
		return nil // Accept has answered the client
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxTermMessage)
	ctx := r.Context()
	out := make(chan struct{})
	go func() {
		defer close(out)
		termOutput(ctx, conn, term)
		// The shell ended: the close handshake also ends termInput's read.
		// (Cancelling its context instead would drop the connection.)
		conn.Close(websocket.StatusNormalClosure, "the terminal ended")
	}()
	err = termInput(ctx, conn, term)
	term.Close()
	<-out
	switch {
	case err == nil, errors.Is(err, context.Canceled), websocket.CloseStatus(err) == websocket.StatusNormalClosure,
		websocket.CloseStatus(err) == websocket.StatusGoingAway:
		conn.Close(websocket.StatusNormalClosure, "")
	default:
		conn.Close(websocket.StatusPolicyViolation, trunc(kiln.Message(err), 120))
	}
	return nil
}

func termDim(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > service.MaxTermSize {
		return 0, kiln.Errorf(kiln.Invalid, "%s=%q: must be a number from 1 to %d", name, trunc(v, 20), service.MaxTermSize)
	}
	return n, nil
}

// termOutput sends the terminal's output as binary frames until the shell
// ends, then an exit frame. A client that stops reading stops the shell
// (flow control runs back to the sandbox), never the server.
func termOutput(ctx context.Context, conn *websocket.Conn, term *service.Terminal) {
	buf := make([]byte, 32<<10)
	for {
		n, err := term.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				term.Close()
				drainTerminal(term)
				return
			}
		}
		if err != nil {
			if code, sig, ok := term.Exit(); ok {
				msg, _ := json.Marshal(termControl{Type: "exit", Code: &code, Signal: sig})
				conn.Write(ctx, websocket.MessageText, msg)
			}
			return
		}
	}
}

// drainTerminal reads a closed terminal to its end, which releases it.
func drainTerminal(term *service.Terminal) {
	buf := make([]byte, 32<<10)
	for {
		if _, err := term.Read(buf); err != nil {
			return
		}
	}
}

// termInput passes the client's frames to the terminal until the socket
// closes.
func termInput(ctx context.Context, conn *websocket.Conn, term *service.Terminal) error {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageBinary {
			if _, err := term.Write(data); err != nil {
				return err
			}
			continue
		}
		var m termControl
		if err := json.Unmarshal(data, &m); err != nil {
			return kiln.Errorf(kiln.Invalid, "a text frame must be JSON like {\"type\":\"resize\",\"rows\":24,\"cols\":80}: %s", trunc(err.Error(), 80))
		}
		switch m.Type {
		case "resize":
			if err := term.Resize(m.Rows, m.Cols); err != nil {
				return err
			}
		case "input":
			if _, err := term.Write([]byte(m.Data)); err != nil {
				return err
			}
		default:
			return kiln.Errorf(kiln.Invalid, "text frame type %q is not one of: resize, input", trunc(m.Type, 40))
		}
	}
}
