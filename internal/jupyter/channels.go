package jupyter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// maxMessage bounds one message from a client (a cell's code rides in
// one; the service bounds the code again).
const maxMessage = 16 << 20

// maxQueued and maxQueuedBytes bound the shell requests of one kernel
// waiting their turn (a notebook's "run all" sends every cell at once).
const (
	maxQueued      = 1024
	maxQueuedBytes = 64 << 20
)

// maxControl bounds the control requests of one socket waiting their
// turn; they are handled one at a time.
const maxControl = 8

// header is a Jupyter message header.
type header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// inMsg is a message from a client, its header kept verbatim to be
// echoed as the parent_header of every message it causes.
type inMsg struct {
	conn    *conn
	size    int             // bytes on the wire, for the queue's bound
	Channel string          `json:"channel"`
	Header  json.RawMessage `json:"header"`
	Content json.RawMessage `json:"content"`
	hdr     header
}

// outMsg is a message to a client, in the JSON form of the kernel
// WebSocket (Jupyter Server's "legacy" protocol): the channel beside the
// message, and msg_id and msg_type repeated at the top as Jupyter
// Server's own deserializer leaves them.
type outMsg struct {
	Channel      string          `json:"channel"`
	Header       header          `json:"header"`
	MsgID        string          `json:"msg_id"`
	MsgType      string          `json:"msg_type"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     map[string]any  `json:"metadata"`
	Content      any             `json:"content"`
	Buffers      []any           `json:"buffers"`
}

var emptyParent = json.RawMessage("{}")

// message makes a message of the kernel in reply to parent (nil: none).
func (k *kernel) message(channel, msgType string, parent *inMsg, content any) outMsg {
	h := header{MsgID: newUUID(), Session: k.jsess, Username: k.owner.Name, Date: isoTime(time.Now()), MsgType: msgType, Version: ProtocolVersion}
	p := emptyParent
	if parent != nil {
		p = parent.Header
	}
	return outMsg{Channel: channel, Header: h, MsgID: h.MsgID, MsgType: msgType, ParentHeader: p, Metadata: map[string]any{}, Content: content, Buffers: []any{}}
}

// conn is one open channels WebSocket of a kernel.
type conn struct {
	k       *kernel
	ws      *websocket.Conn
	wmu     sync.Mutex
	done    chan struct{}
	once    sync.Once
	v1      bool         // the binary v1 protocol, else JSON
	allow   func() error // the caller's rate limit
	control chan inMsg   // control requests, handled in order
}

func (g *Gateway) channels(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	k, err := g.kernel(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return err
	}
	release, err := g.svc.Hold(r.Context(), u, k.session)
	if err != nil {
		return err
	}
	defer release()
	// Accept refuses a page of another origin (a browser's cross-site
	// WebSocket); the notebook server's gateway client sends none.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		return nil // Accept has answered
	}
	ws.SetReadLimit(maxMessage)
	c := &conn{k: k, ws: ws, v1: ws.Subprotocol() == SubprotocolV1, done: make(chan struct{}), allow: allowOf(r.Context()), control: make(chan inMsg, maxControl)}
	k.attach(c)
	defer k.detach(c)
	go c.serveControl()
	err = c.serve(r.Context())
	switch {
	case err == nil, errors.Is(err, context.Canceled), websocket.CloseStatus(err) == websocket.StatusNormalClosure,
		websocket.CloseStatus(err) == websocket.StatusGoingAway:
		ws.Close(websocket.StatusNormalClosure, "")
	case websocket.CloseStatus(err) != -1:
	default:
		ws.Close(websocket.StatusPolicyViolation, trunc(kiln.Message(err), 120))
	}
	return nil
}

func (k *kernel) attach(c *conn) {
	k.mu.Lock()
	k.conns[c] = struct{}{}
	k.mu.Unlock()
}

// detach forgets a closed connection; a running cell waiting for input
// from it gets end of file (Python's input() raises EOFError).
func (k *kernel) detach(c *conn) {
	c.once.Do(func() { close(c.done) })
	k.mu.Lock()
	delete(k.conns, c)
	in := k.input
	if in != nil && in.conn == c {
		k.input = nil
	}
	k.mu.Unlock()
	if in != nil && in.conn == c {
		in.close()
	}
}

func (k *kernel) closeConns(why string) {
	k.mu.Lock()
	conns := make([]*conn, 0, len(k.conns))
	for c := range k.conns {
		conns = append(conns, c)
	}
	k.mu.Unlock()
	for _, c := range conns {
		c.ws.Close(websocket.StatusNormalClosure, why)
	}
}

func (c *conn) serve(ctx context.Context) error {
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return err
		}
		var m inMsg
		if c.v1 {
			m, err = parseV1(data)
		} else {
			m, err = parseMessage(typ, data)
		}
		if err != nil {
			return err
		}
		m.conn, m.size = c, len(data)
		c.k.dispatch(m)
	}
}

// parseMessage reads a client's message: JSON text, or the binary form
// of the same protocol (a count of parts, their offsets, the JSON
// message, then binary buffers, which kiln's kernels do not take).
func parseMessage(typ websocket.MessageType, data []byte) (inMsg, error) {
	if typ == websocket.MessageBinary {
		if len(data) < 8 {
			return inMsg{}, kiln.Errorf(kiln.Invalid, "a binary message is too short")
		}
		n := binary.BigEndian.Uint32(data)
		if n < 1 || uint64(len(data)) < 4*(uint64(n)+1) {
			return inMsg{}, kiln.Errorf(kiln.Invalid, "a binary message's offsets do not fit in it")
		}
		start := binary.BigEndian.Uint32(data[4:])
		end := uint32(len(data))
		if n > 1 {
			end = binary.BigEndian.Uint32(data[8:])
		}
		if start > end || end > uint32(len(data)) {
			return inMsg{}, kiln.Errorf(kiln.Invalid, "a binary message's offsets do not fit in it")
		}
		data = data[start:end]
	}
	var m inMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return inMsg{}, kiln.Errorf(kiln.Invalid, "a message must be a Jupyter message, a JSON object with channel, header, parent_header, metadata and content: %s", trunc(err.Error(), 80))
	}
	return checkMessage(m)
}

// checkMessage checks a message's header and fills in what may be left
// out.
func checkMessage(m inMsg) (inMsg, error) {
	if len(m.Header) == 0 || json.Unmarshal(m.Header, &m.hdr) != nil || m.hdr.MsgType == "" || m.hdr.MsgID == "" {
		return inMsg{}, kiln.Errorf(kiln.Invalid, "a message needs a header with msg_id and msg_type")
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		m.Content = json.RawMessage("{}")
	}
	if m.Channel == "" {
		m.Channel = "shell"
	}
	return m, nil
}

// send writes one message to this connection. A client that stops
// reading is given up after a while rather than holding the kernel.
func (c *conn) send(m outMsg) {
	typ := websocket.MessageText
	b, err := json.Marshal(m)
	if c.v1 {
		typ = websocket.MessageBinary
		b, err = encodeV1(m)
	}
	if err != nil {
		c.k.g.cfg.Log.Error("jupyter: encode message", "type", m.MsgType, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.Write(ctx, typ, b); err != nil {
		c.ws.CloseNow()
	}
}

// broadcast sends an iopub message to every open connection, as a
// kernel's IOPub socket publishes to every subscriber.
func (k *kernel) broadcast(m outMsg) {
	k.mu.Lock()
	conns := make([]*conn, 0, len(k.conns))
	for c := range k.conns {
		conns = append(conns, c)
	}
	k.mu.Unlock()
	for _, c := range conns {
		c.send(m)
	}
}

func (k *kernel) broadcastStatus(state string, parent *inMsg) {
	k.broadcast(k.message("iopub", "status", parent, map[string]string{"execution_state": state}))
}

// reply answers a request on its channel, to the connection it came on.
func (k *kernel) reply(req *inMsg, msgType string, content any) {
	req.conn.send(k.message(req.Channel, msgType, req, content))
}

// dispatch handles a message as it arrives. Control requests are
// answered at once; shell requests wait their turn, one at a time, as a
// kernel's shell socket serves them; stdin replies go to the running
// cell.
func (k *kernel) dispatch(m inMsg) {
	switch m.Channel {
	case "control":
		select {
		case m.conn.control <- m:
		default:
			m.conn.replyError(&m, "QueueFull", "this socket has "+itoa(maxControl)+" control requests waiting; wait for their replies")
		}
	case "stdin":
		k.stdinReply(&m)
	case "shell":
		k.mu.Lock()
		if len(k.queue) >= maxQueued || k.queuedBytes+m.size > maxQueuedBytes {
			k.mu.Unlock()
			m.conn.replyError(&m, "QueueFull", "this kernel has "+itoa(maxQueued)+" requests or "+kiln.FormatBytes(maxQueuedBytes)+" waiting; wait for their replies")
			return
		}
		k.queue = append(k.queue, m)
		k.queuedBytes += m.size
		if !k.running {
			k.running = true
			go k.drain()
		}
		k.mu.Unlock()
	default:
		k.g.cfg.Log.Debug("jupyter: message on an unknown channel dropped", "channel", trunc(m.Channel, 40))
	}
}

// drain handles queued shell requests in order until none is left.
func (k *kernel) drain() {
	for {
		k.mu.Lock()
		if len(k.queue) == 0 {
			k.running, k.busy = false, false
			k.mu.Unlock()
			return
		}
		m := k.queue[0]
		k.queue = k.queue[1:]
		k.queuedBytes -= m.size
		k.busy = true
		k.mu.Unlock()
		k.broadcastStatus("busy", &m)
		failed := k.shell(&m)
		if failed {
			k.abortQueued()
		}
		k.broadcastStatus("idle", &m)
	}
}

// abortQueued answers the execute requests that were waiting when one
// failed with stop_on_error: they do not run, as in IPython.
func (k *kernel) abortQueued() {
	k.mu.Lock()
	var aborted []inMsg
	keep := k.queue[:0]
	for _, m := range k.queue {
		if m.hdr.MsgType == "execute_request" {
			aborted = append(aborted, m)
			k.queuedBytes -= m.size
		} else {
			keep = append(keep, m)
		}
	}
	k.queue = keep
	k.mu.Unlock()
	for i := range aborted {
		m := &aborted[i]
		k.broadcastStatus("busy", m)
		k.reply(m, "execute_reply", map[string]any{"status": "aborted", "execution_count": nil, "user_expressions": map[string]any{}, "payload": []any{}})
		k.broadcastStatus("idle", m)
	}
}

func replyType(req string) string {
	if n := len(req) - len("_request"); n > 0 && req[n:] == "_request" {
		return req[:n] + "_reply"
	}
	return req + "_reply"
}

func errorContent(ename, evalue string) map[string]any {
	return map[string]any{"status": "error", "ename": ename, "evalue": evalue, "traceback": []string{ename + ": " + evalue}}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// serveControl handles the socket's control requests one at a time,
// until the socket closes. Interrupt and shutdown act on the session, so
// each counts against the caller's rate limit, as the REST routes do.
func (c *conn) serveControl() {
	for {
		select {
		case <-c.done:
			return
		case m := <-c.control:
			if t := m.hdr.MsgType; t == "interrupt_request" || t == "shutdown_request" {
				if err := c.allow(); err != nil {
					c.replyError(&m, "RateLimited", kiln.Message(err))
					continue
				}
			}
			c.k.control(&m)
		}
	}
}

// replyError answers a request that was refused before it ran; a message
// that is no request gets no answer, as a kernel gives none.
func (c *conn) replyError(m *inMsg, ename, evalue string) {
	if strings.HasSuffix(m.hdr.MsgType, "_request") {
		c.k.reply(m, replyType(m.hdr.MsgType), errorContent(ename, evalue))
	}
}
