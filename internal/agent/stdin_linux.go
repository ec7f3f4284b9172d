package agent

import (
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// stdinLost is what a reader learns when input overflowed the queue.
var stdinLost = fmt.Sprintf("kiln: more than %d MiB of stdin was sent before the program read it; the rest was dropped and stdin is closed", protocol.MaxPendingStdin>>20)

// stdinQueue holds the input of an exec or cell with open stdin that has
// arrived (TStdin) but not been read yet, up to protocol.MaxPendingStdin
// bytes. Input past that is dropped and the queue ends there, marked lost.
type stdinQueue struct {
	mu   sync.Mutex
	data []byte
	eof  bool // no more input will be added
	lost bool // input was dropped; implies eof
	more chan struct{}
}

func newStdinQueue(initial []byte) *stdinQueue {
	q := &stdinQueue{more: make(chan struct{}, 1)}
	q.put(initial, false)
	return q
}

// put adds input, and closes the queue if eof.
func (q *stdinQueue) put(p []byte, eof bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.eof {
		return
	}
	if len(q.data)+len(p) > protocol.MaxPendingStdin {
		q.lost, q.eof = true, true
	} else {
		q.data = append(q.data, p...)
		q.eof = eof
	}
	select {
	case q.more <- struct{}{}:
	default:
	}
}

// take waits until there is input or the queue is closed, and returns at
// most max bytes of it; once the queue is empty and closed it returns
// eof, and lost if input was dropped. ok is false if stop closed first.
func (q *stdinQueue) take(max int, stop <-chan struct{}) (p []byte, eof, lost, ok bool) {
	for {
		q.mu.Lock()
		if len(q.data) > 0 {
			n := min(max, len(q.data))
			p = append([]byte(nil), q.data[:n]...)
			q.data = q.data[n:]
			if len(q.data) == 0 {
				q.data = nil // let a large backlog go
			}
			q.mu.Unlock()
			return p, false, false, true
		}
		eof, lost = q.eof, q.lost
		q.mu.Unlock()
		if eof {
			return nil, true, lost, true
		}
		select {
		case <-q.more:
		case <-stop:
			return nil, false, false, false
		}
	}
}

// idle reports whether the queue is empty and open: a read would wait.
func (q *stdinQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.data) == 0 && !q.eof
}

// openStdin registers the queue of request id's open stdin, before the
// request starts, so that input sent right after the request is kept.
// It returns false if the id is taken.
func (a *Agent) openStdin(id uint64, initial []byte) (*stdinQueue, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.stdins[id]; dup {
		return nil, false
	}
	q := newStdinQueue(initial)
	a.stdins[id] = q
	return q, true
}

func (a *Agent) closeStdin(id uint64) {
	a.mu.Lock()
	delete(a.stdins, id)
	a.mu.Unlock()
}

// stdin handles a TStdin message: input for a running exec or cell. Input
// for a request that has ended or has no open stdin is dropped.
func (a *Agent) stdin(m *protocol.Message) {
	var in protocol.Stdin
	if m.Decode(&in) != nil {
		return
	}
	a.mu.Lock()
	q := a.stdins[m.ID]
	a.mu.Unlock()
	if q != nil {
		q.put(in.Data, in.EOF)
	}
}
