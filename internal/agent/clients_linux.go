package agent

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// ServeClients is the unisolated agent of a sandbox that several kiln
// replicas reach one after another (the Kubernetes backend's Pods, issue
// 15). It serves the protocol to one client at a time, each accepted
// from ln only when trusted passes it, and the sandbox outlives a
// client: when one hangs up, what it had running ends (letGo) and the
// kernels, the files and the processes user code left in the background
// stay for the next. A trusted client that connects while another is
// served takes over at once: a replica connects only once the store has
// made it the session's holder, so the newest client is the one to
// serve, and one whose replica died or was cut off is not waited for.
// It returns when a client asks the agent to shut down, or ln fails.
func ServeClients(ln net.Listener, trusted func(net.Conn) error, cfg Unisolated) error {
	sw := &switchWriter{w: io.Discard}
	a, err := newUnisolated(cfg, sw)
	if err != nil {
		return err
	}
	a.clients = sw
	var mu sync.Mutex
	var cur net.Conn // the client being served
	next := make(chan net.Conn)
	go func() {
		defer close(next)
		refused := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				a.log.Error("accept clients", "err", err)
				return
			}
			if err := trusted(c); err != nil {
				// User code may knock as often as it likes: log a few.
				if refused++; refused <= 10 {
					a.log.Warn("refused a connection", "err", err)
				}
				c.Close()
				continue
			}
			mu.Lock()
			if cur != nil {
				cur.Close() // its serve ends, then this one's begins
			}
			mu.Unlock()
			next <- c
		}
	}()
	for c := range next {
		mu.Lock()
		cur = c
		mu.Unlock()
		sw.set(c)
		if err := a.serve(protocol.NewReader(c)); err != nil {
			a.log.Info("client gone", "err", err)
		}
		c.Close()
		if a.shutdown {
			return nil
		}
	}
	return nil
}

// letGo ends what the client that hung up had running: its execs are
// killed, its terminals hung up and its cells interrupted (the kernel
// killed when one does not stop within stopGrace), and whatever they
// still say goes nowhere. It returns once they have ended, or after a
// bound, so that nothing of theirs reaches the next client (whose
// request ids are drawn apart from this one's besides: agentclient).
func (a *Agent) letGo() {
	a.clients.set(io.Discard)
	a.mu.Lock()
	var execs []*execution
	for _, x := range a.execs {
		execs = append(execs, x)
	}
	var cells []*cellRun
	for _, c := range a.cells {
		cells = append(cells, c)
	}
	var terms []*terminal
	for _, t := range a.terms {
		terms = append(terms, t)
	}
	a.mu.Unlock()
	for _, x := range execs {
		if !x.ended.Load() {
			x.canceled.Store(true)
			a.killCell(x) // its own processes only: the kernels stay
		}
	}
	for _, c := range cells {
		c.stop(protocol.CellInterrupted)
	}
	for _, t := range terms {
		t.hangUp()
	}
	deadline := time.Now().Add(stopGrace + 3*time.Second)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		n := len(a.execs) + len(a.cells) + len(a.terms)
		a.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A file operation in progress finishes before the next client.
	a.files.Lock()
	a.files.Unlock() //nolint:staticcheck // an empty critical section waits for the holder
}

// switchWriter is the agent's output, sent to the current client.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
