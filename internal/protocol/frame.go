package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Version is the protocol version. Bump it on any incompatible change.
const Version = 1

// MaxFrame bounds one frame. Bulk data (file contents, output) travels in
// chunks well below it.
const MaxFrame = 4 << 20

// ChunkSize is the largest data chunk either side puts in one message.
const ChunkSize = 256 << 10

// ErrFrameTooLarge is returned for a frame whose length prefix exceeds MaxFrame.
var ErrFrameTooLarge = errors.New("protocol: frame too large")

// Message is one frame. ID ties events to the request that caused them; ID 0
// is for connection-level messages (hello). Type says what Body holds.
type Message struct {
	ID   uint64          `json:"id"`
	Type string          `json:"t"`
	Body json.RawMessage `json:"b,omitempty"`
}

// Decode unmarshals m.Body into v, refusing unknown fields so that a peer
// speaking another dialect is noticed.
func (m *Message) Decode(v any) error {
	if len(m.Body) == 0 {
		return fmt.Errorf("protocol: %s message has no body", m.Type)
	}
	if err := json.Unmarshal(m.Body, v); err != nil {
		return fmt.Errorf("protocol: decode %s: %w", m.Type, err)
	}
	return nil
}

// Reader reads frames from a stream.
type Reader struct {
	r   *bufio.Reader
	hdr [4]byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Read returns the next message. It returns io.EOF at a clean end of stream
// and io.ErrUnexpectedEOF for a stream cut inside a frame.
func (r *Reader) Read() (*Message, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, MaxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r.r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	m := new(Message)
	if err := json.Unmarshal(buf, m); err != nil {
		return nil, fmt.Errorf("protocol: bad frame: %w", err)
	}
	if m.Type == "" {
		return nil, errors.New("protocol: frame without a type")
	}
	return m, nil
}

// Writer writes frames to a stream. It is safe for concurrent use; each
// message is written whole.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Send encodes body and writes one message.
func (w *Writer) Send(id uint64, typ string, body any) error {
	var raw json.RawMessage
	if body != nil {
		b, err := marshal(body)
		if err != nil {
			return fmt.Errorf("protocol: encode %s: %w", typ, err)
		}
		raw = b
	}
	frame, err := marshal(Message{ID: id, Type: typ, Body: raw})
	if err != nil {
		return fmt.Errorf("protocol: encode %s: %w", typ, err)
	}
	if len(frame) > MaxFrame {
		return fmt.Errorf("%w: %s message of %d bytes", ErrFrameTooLarge, typ, len(frame))
	}
	buf := make([]byte, 4+len(frame))
	binary.BigEndian.PutUint32(buf, uint32(len(frame)))
	copy(buf[4:], frame)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(buf)
	return err
}

// marshal is json.Marshal without HTML escaping: frames carry HTML output
// of cells, and escaping every < and > would only make them larger.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
