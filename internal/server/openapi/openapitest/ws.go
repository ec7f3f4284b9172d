package openapitest

import (
	"encoding/binary"
	"net"
	"net/http"
	"sync"
)

// wsConn watches the WebSocket frames both ways (RFC 6455, section 5.2)
// and validates each complete text message. Frames after the handshake's
// response are parsed; the 101 answer itself is skipped.
type wsConn struct {
	net.Conn
	c              *Checker
	r              *http.Request
	server, client any // schemas of each side's messages

	mu        sync.Mutex
	in, out   frames
	pending   []byte // what the server's reader held at the hijack
	handshake bool   // the 101 answer has been written
}

func (w *wsConn) Read(p []byte) (int, error) {
	w.mu.Lock()
	if len(w.pending) > 0 { // already seen by Hijack
		n := copy(p, w.pending)
		w.pending = w.pending[n:]
		w.mu.Unlock()
		return n, nil
	}
	w.mu.Unlock()
	n, err := w.Conn.Read(p)
	w.mu.Lock()
	w.in.feed(p[:n], w.message(true))
	w.mu.Unlock()
	return n, err
}

func (w *wsConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	b := p[:n]
	if !w.handshake {
		// net/http usually writes the 101 answer before the hijack; if it
		// comes through here, frames follow its empty line.
		w.out.head = append(w.out.head, b...)
		if len(w.out.head) < 5 {
			return n, err
		}
		if string(w.out.head[:5]) != "HTTP/" {
			w.handshake, b = true, w.out.head
		} else if i := indexCRLF2(w.out.head); i < 0 {
			return n, err
		} else {
			w.handshake, b = true, w.out.head[i+4:]
		}
	}
	w.out.feed(b, w.message(false))
	return n, err
}

func indexCRLF2(b []byte) int {
	for i := 0; i+3 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' && b[i+2] == '\r' && b[i+3] == '\n' {
			return i
		}
	}
	return -1
}

// message validates one complete text message from the client or server.
func (w *wsConn) message(fromClient bool) func([]byte) {
	return func(data []byte) {
		schema, who := w.server, "a server message"
		if fromClient {
			schema, who = w.client, "a client message"
		}
		if schema != nil {
			w.c.validate(w.r, who, schema, data)
		}
	}
}

// frames reassembles one direction's frames into messages.
type frames struct {
	mask bool // the client's frames are masked
	head []byte
	buf  []byte
	msg  []byte // a fragmented text message so far
	text bool
}

func (f *frames) feed(b []byte, onText func([]byte)) {
	f.buf = append(f.buf, b...)
	for {
		n, fin, opcode, payload := f.next()
		if n == 0 {
			return
		}
		f.buf = f.buf[n:]
		switch opcode {
		case 1: // text
			f.msg, f.text = append([]byte(nil), payload...), true
		case 0: // continuation
			f.msg = append(f.msg, payload...)
		default:
			continue // binary, close, ping, pong
		}
		if fin && f.text {
			onText(f.msg)
			f.msg, f.text = nil, false
		}
	}
}

// next parses one frame at the start of buf; n is 0 while it is incomplete.
func (f *frames) next() (n int, fin bool, opcode byte, payload []byte) {
	b := f.buf
	if len(b) < 2 {
		return 0, false, 0, nil
	}
	fin, opcode = b[0]&0x80 != 0, b[0]&0x0f
	masked := b[1]&0x80 != 0
	length, h := uint64(b[1]&0x7f), 2
	switch length {
	case 126:
		if len(b) < 4 {
			return 0, false, 0, nil
		}
		length, h = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, false, 0, nil
		}
		length, h = binary.BigEndian.Uint64(b[2:]), 10
	}
	var key []byte
	if masked {
		if len(b) < h+4 {
			return 0, false, 0, nil
		}
		key, h = b[h:h+4], h+4
	}
	if uint64(len(b)-h) < length {
		return 0, false, 0, nil
	}
	payload = append([]byte(nil), b[h:h+int(length)]...)
	for i := range payload {
		if masked {
			payload[i] ^= key[i%4]
		}
	}
	return h + int(length), fin, opcode, payload
}
