package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// maxWSMessage bounds one client message (a cell's code rides in one).
const maxWSMessage = 4 << 20

// websocket runs cells over one WebSocket: the client sends "execute",
// then any "stdin" and "interrupt" while the cell runs, and receives the
// same events as over SSE. Cells run one after another on a socket; the
// socket keeps the session from going idle while it is open.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	release, err := s.svc.Hold(r.Context(), c.user, id)
	if err != nil {
		return err
	}
	defer release()
	if err := sameOrigin(r); err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered the client
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxWSMessage)
	ws := &wsCell{s: s, c: c, id: id, conn: conn}
	err = ws.serve(r.Context())
	switch {
	case err == nil, errors.Is(err, context.Canceled), websocket.CloseStatus(err) == websocket.StatusNormalClosure,
		websocket.CloseStatus(err) == websocket.StatusGoingAway:
		conn.Close(websocket.StatusNormalClosure, "")
	default:
		conn.Close(websocket.StatusPolicyViolation, trunc(kiln.Message(err), 120))
	}
	return nil
}

// sameOrigin refuses a handshake from a page of another site, as Accept
// would, but as a problem like every other error (Accept's is plain text).
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil // not a browser
	}
	if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	return kiln.Errorf(kiln.Forbidden, "a WebSocket from origin %q is refused: only pages served by this kiln (%s) may open one", trunc(origin, 100), trunc(r.Host, 100))
}

// wsCell is one socket's state: at most one running cell and its stdin.
type wsCell struct {
	s    *Server
	c    *call
	id   string
	conn *websocket.Conn

	wmu     sync.Mutex // one writer at a time
	mu      sync.Mutex
	stdin   *io.PipeWriter // the running cell's, nil between cells
	running sync.WaitGroup
}

func (ws *wsCell) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		ws.running.Wait()
	}()
	for {
		_, data, err := ws.conn.Read(ctx)
		if err != nil {
			return err
		}
		var m client.WSMessage
		if err := json.Unmarshal(data, &m); err != nil {
			ws.fail(kiln.Errorf(kiln.Invalid, "a message must be a JSON object like {\"type\":\"execute\",...}: %s", trunc(err.Error(), 120)))
			continue
		}
		if err := ws.handle(ctx, m); err != nil {
			ws.fail(err)
		}
	}
}

func (ws *wsCell) handle(ctx context.Context, m client.WSMessage) error {
	switch m.Type {
	case "execute":
		if m.Execute == nil {
			return kiln.Errorf(kiln.Invalid, "an execute message needs \"execute\": {\"code\": ...}")
		}
		return ws.execute(ctx, *m.Execute)
	case "stdin":
		ws.mu.Lock()
		in := ws.stdin
		ws.mu.Unlock()
		if in == nil {
			return kiln.Errorf(kiln.Conflict, "no cell is running to take stdin")
		}
		go func() { // the pipe blocks until the cell reads; never block the socket
			if m.Data != "" {
				in.Write([]byte(m.Data))
			}
			if m.EOF {
				in.Close()
			}
		}()
		return nil
	case "interrupt":
		return ws.s.svc.Interrupt(ctx, ws.c.user, ws.id)
	}
	return kiln.Errorf(kiln.Invalid, "unknown message type %q; allowed: execute, stdin, interrupt", trunc(m.Type, 40))
}

func (ws *wsCell) execute(ctx context.Context, req client.ExecRequest) error {
	cell, err := cellRequest(req)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	if ws.stdin != nil {
		ws.mu.Unlock()
		return kiln.Errorf(kiln.Conflict, "a cell is already running on this socket; wait for its done event")
	}
	pr, pw := io.Pipe()
	ws.stdin = pw
	ws.mu.Unlock()
	cell.StdinStream = pr
	ws.running.Add(1)
	go func() {
		defer ws.running.Done()
		sink := eventSink(ws.send)
		err := ws.s.cellPackages(ctx, ws.c, ws.id, req, service.PackageEvents{Stdout: sink.text(client.EventStderr), Stderr: sink.text(client.EventStderr)})
		var e kiln.Execution
		if err == nil {
			e, err = ws.s.svc.Exec(ctx, ws.c.user, ws.id, cell, sink.execEvents(func() {}))
		}
		// The socket takes the next execute as soon as the client has
		// done, so the cell is over before done is sent.
		pr.Close()
		ws.mu.Lock()
		ws.stdin = nil
		ws.mu.Unlock()
		if err != nil {
			ws.fail(err)
			return
		}
		x := fromExecution(e)
		ws.send(client.Event{Type: client.EventDone, Execution: &x})
	}()
	return nil
}

func (ws *wsCell) fail(err error) {
	p := problemFor(err)
	ws.send(client.Event{Type: client.EventError, Error: &p})
}

func (ws *wsCell) send(e client.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	// A client that stops reading must not hold the cell's events
	// forever: after the timeout the socket is given up.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws.wmu.Lock()
	defer ws.wmu.Unlock()
	if err := ws.conn.Write(ctx, websocket.MessageText, b); err != nil {
		ws.conn.CloseNow()
	}
}
