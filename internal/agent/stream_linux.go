package agent

import (
	"bytes"
	"crypto/rand"
	"os"
	"sync"
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
}

func newStream(r, w *os.File) *stream {
	s := &stream{r: r, w: w, closed: make(chan struct{})}
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

func (s *stream) take(p []byte) {
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
