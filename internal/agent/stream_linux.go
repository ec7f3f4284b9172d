package agent

import (
	"bytes"
	"crypto/rand"
	"os"
	"sync"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

// strayMax bounds output a kernel writes between cells (a background
// thread's prints); it is handed to the next cell.
const strayMax = 64 << 10

// stream pumps one of a kernel's output pipes and attributes what it reads
// to the cell that is running. The agent keeps a write end of the pipe: when
// a cell's kernel says Done it has flushed, so a marker the agent writes
// then lands after all of the cell's output, and everything before the
// marker belongs to the cell. No sleeping, no guessing.
type stream struct {
	r *os.File // read end
	w *os.File // the agent's write end, for markers

	mu     sync.Mutex
	sink   func([]byte) // the running cell's forwarder; nil between cells
	marker []byte       // the marker awaited, or nil
	seen   chan struct{}
	carry  []byte // held back: could be the start of the marker
	stray  []byte
	closed chan struct{}

	// The kernel's order (kernelproto's Ordered output); idx says which
	// pipe this is. Only the pump touches ocarry.
	order  *order
	idx    int
	ocarry []byte // held back: could be the start of an order mark
	owed   uint64 // the last mark passed, whose message output after it waits for
}

func newStream(r, w *os.File, o *order, idx int) *stream {
	s := &stream{r: r, w: w, closed: make(chan struct{}), order: o, idx: idx}
	go s.pump()
	return s
}

func (s *stream) pump() {
	defer close(s.closed)
	buf := make([]byte, 32<<10)
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			s.take(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// take strips the kernel's order marks from p, waiting at each until the
// follower has forwarded its message (never holding s.mu meanwhile), and
// passes the rest on.
func (s *stream) take(p []byte) {
	nonce := s.order.marks()
	if nonce == nil {
		s.takeData(p)
		return
	}
	data := append(s.ocarry, p...)
	s.ocarry = nil
	for {
		before, seq, after, found, keep := kernelproto.OrderSplit(nonce, data)
		if len(before) > 0 && s.owed > 0 {
			// output after a mark waits for the mark's message; marks
			// with nothing after them (Python-level output alone) cost
			// the pump no wait
			s.order.sentUpTo(s.owed)
			s.owed = 0
		}
		s.takeData(before)
		if !found {
			if keep > 0 {
				s.ocarry = append([]byte(nil), data[len(data)-keep:]...)
			}
			return
		}
		s.order.passed(s.idx, seq)
		s.owed = max(s.owed, seq)
		data = after
	}
}

// takeData attributes p, up to the agent's own fence marker.
func (s *stream) takeData(p []byte) {
	if len(p) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(s.carry, p...)
	s.carry = nil
	if s.marker != nil {
		if i := bytes.Index(data, s.marker); i >= 0 {
			s.emit(data[:i])
			data = data[i+len(s.marker):]
			s.marker, s.sink = nil, nil
			close(s.seen)
		} else {
			keep := min(len(s.marker)-1, len(data))
			s.carry = append([]byte(nil), data[len(data)-keep:]...)
			data = data[:len(data)-keep]
		}
	}
	s.emit(data)
}

// emit forwards to the running cell, or keeps a bounded amount for the next.
func (s *stream) emit(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.sink != nil {
		s.sink(p)
		return
	}
	if room := strayMax - len(s.stray); room > 0 {
		s.stray = append(s.stray, p[:min(room, len(p))]...)
	}
}

// attach starts attributing output to sink, first handing it whatever was
// written between cells.
func (s *stream) attach(sink func([]byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = sink
	if len(s.stray) > 0 {
		sink(s.stray)
		s.stray = nil
	}
}

// fence writes a fresh marker and returns a channel closed once the pump
// has passed it, i.e. once everything written before now has been
// attributed. The sink is detached at the marker.
func (s *stream) fence() (<-chan struct{}, error) {
	m := make([]byte, 24)
	rand.Read(m)
	if nonce := s.order.marks(); nonce != nil {
		// take holds back a tail that could start an order mark until more
		// comes, and nothing comes after a fence: a marker ending in the
		// nonce's first byte (1 in 256) would wait out its timeout, 5 s.
		// Without that byte no tail of the marker can start a mark.
		for i := range m {
			if m[i] == nonce[0] {
				m[i] ^= 0xff
			}
		}
	}
	seen := make(chan struct{})
	s.mu.Lock()
	s.marker, s.seen = m, seen
	s.mu.Unlock()
	if _, err := s.w.Write(m); err != nil {
		return nil, err
	}
	return seen, nil
}

// detach stops attribution without a marker (the kernel is gone).
func (s *stream) detach() {
	s.mu.Lock()
	s.sink, s.marker, s.carry = nil, nil, nil
	s.mu.Unlock()
}

func (s *stream) close() {
	s.w.Close()
	s.r.Close()
}
