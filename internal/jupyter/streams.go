package jupyter

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// holdPartial is how long an unfinished line of output waits for its
// newline before it is sent anyway.
const holdPartial = 150 * time.Millisecond

// streams turns a cell's stdout and stderr chunks into stream messages.
// A chunk may end inside a UTF-8 character, which waits for its other
// bytes. An unfinished last line waits briefly: when the cell then asks
// for input, that line is the prompt, which Jupyter shows in the
// input_request and not in the output (IPython never prints it).
type streams struct {
	send func(name, text string)

	mu      sync.Mutex
	order   []string          // streams with held text, in the order written
	held    map[string]string // unfinished last line per stream
	partial map[string][]byte // an unfinished UTF-8 character per stream
	timer   *time.Timer
}

func newStreams(send func(name, text string)) *streams {
	return &streams{send: send, held: map[string]string{}, partial: map[string][]byte{}}
}

func (s *streams) write(name string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.partial[name]; len(p) > 0 {
		b = append(p, b...)
		delete(s.partial, name)
	}
	if tail := incompleteTail(b); tail > 0 {
		s.partial[name] = append([]byte(nil), b[len(b)-tail:]...)
		b = b[:len(b)-tail]
	}
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	if text == "" {
		return
	}
	// Another stream's held line comes first: keep the order written.
	for _, other := range s.order {
		if other != name {
			s.flushLocked()
			break
		}
	}
	text = s.held[name] + text
	i := strings.LastIndexByte(text, '\n')
	if i >= 0 {
		s.send(name, text[:i+1])
	}
	rest := text[i+1:]
	s.setHeld(name, rest)
	if rest != "" && s.timer == nil {
		s.timer = time.AfterFunc(holdPartial, s.flush)
	}
}

func (s *streams) setHeld(name, text string) {
	if text == "" {
		delete(s.held, name)
		s.order = remove(s.order, name)
		return
	}
	if _, ok := s.held[name]; !ok {
		s.order = append(s.order, name)
	}
	s.held[name] = text
}

func remove(list []string, v string) []string {
	out := list[:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// dropPrompt removes the prompt from the held output, if it is still
// there, and sends the rest.
func (s *streams) dropPrompt(prompt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prompt != "" {
		for _, name := range s.order {
			if h := s.held[name]; strings.HasSuffix(h, prompt) {
				s.held[name] = strings.TrimSuffix(h, prompt)
				break
			}
		}
	}
	s.flushLocked()
}

// flush sends whatever is held.
func (s *streams) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *streams) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	for _, name := range s.order {
		if h := s.held[name]; h != "" {
			s.send(name, h)
		}
	}
	s.held, s.order = map[string]string{}, nil
}

// stop sends what is held, including a cut UTF-8 character (as U+FFFD).
func (s *streams) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, p := range s.partial {
		s.held[name] += strings.ToValidUTF8(string(p), "\uFFFD")
		if !contains(s.order, name) {
			s.order = append(s.order, name)
		}
	}
	s.partial = map[string][]byte{}
	s.flushLocked()
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// incompleteTail is the length of a UTF-8 character cut at the end of b
// (0 when b ends on a character boundary or with invalid bytes, which
// will not become valid).
func incompleteTail(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a start byte: is its character complete?
			need := 2
			if c >= 0xE0 {
				need = 3
			}
			if c >= 0xF0 {
				need = 4
			}
			if need > n && !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
