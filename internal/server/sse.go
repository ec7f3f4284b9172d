package server

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// keepAlive is how often an idle stream gets a comment line, so that
// proxies do not close it during a long, quiet cell.
const keepAlive = 15 * time.Second

// sse writes Server-Sent Events. The first event commits the 200 and the
// headers; until then an error can still be a problem answer.
type sse struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	mu   sync.Mutex
	on   bool
	stop chan struct{}
	once sync.Once
}

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), stop: make(chan struct{})}
}

// start commits the stream and starts the keep-alives.
func (s *sse) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		return
	}
	s.on = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.rc.Flush()
	go s.keepAlive()
}

func (s *sse) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on
}

func (s *sse) keepAlive() {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.w.Write([]byte(": keep-alive\n\n"))
			s.rc.Flush()
			s.mu.Unlock()
		}
	}
}

// send writes one event; a client that went away makes writes fail, and
// the request's context ends the cell.
func (s *sse) send(e client.Event) {
	s.start()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write([]byte("event: " + e.Type + "\ndata: "))
	s.w.Write(b)
	s.w.Write([]byte("\n\n"))
	s.rc.Flush()
}

func (s *sse) close() { s.once.Do(func() { close(s.stop) }) }
