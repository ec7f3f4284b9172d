package agent

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// inputWatch tells the client when a cell with open stdin waits for input
// (protocol.TInputRequest), with the prompt: the cell's output after its
// last newline or its last read. It sits between the kernel's output
// streams and the cell's forwarders, keeping that tail of each.
type inputWatch struct {
	a     *Agent
	id    uint64
	k     *kernel
	in    *stdinQueue // the cell's open stdin, or nil
	sinks [2]func([]byte)

	mu    sync.Mutex
	tails [2][]byte // stdout's, stderr's
	last  int       // which was written last
}

// watchInput attaches the cell's forwarders to the kernel's streams
// through a new watch.
func (a *Agent) watchInput(id uint64, k *kernel, in *stdinQueue, stdout, stderr func([]byte)) *inputWatch {
	w := &inputWatch{a: a, id: id, k: k, in: in}
	for i, sink := range []func([]byte){stdout, stderr} {
		w.sinks[i] = func(p []byte) {
			w.note(i, p)
			sink(p)
		}
	}
	k.out.attach(w.sinks[0])
	k.err.attach(w.sinks[1])
	return w
}

func (w *inputWatch) note(i int, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = i
	t := w.tails[i]
	if j := bytes.LastIndexByte(p, '\n'); j >= 0 {
		t, p = t[:0], p[j+1:]
	}
	if len(p) >= protocol.MaxPrompt {
		t = append(t[:0], p[len(p)-protocol.MaxPrompt:]...)
	} else {
		if over := len(t) + len(p) - protocol.MaxPrompt; over > 0 {
			t = append(t[:0], t[over:]...)
		}
		t = append(t, p...)
	}
	w.tails[i] = t
}

// prompt is the tail of the stream written last, or of the other if that
// one ends in a newline, as valid UTF-8. The tails start again: the next
// prompt is what the cell writes after this read.
func (w *inputWatch) prompt() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tails[w.last]
	if len(t) == 0 {
		t = w.tails[1-w.last]
	}
	t = append([]byte(nil), t...)
	w.tails[0], w.tails[1] = w.tails[0][:0], w.tails[1][:0]
	for len(t) > 0 && !utf8.FullRune(t) { // cut in the middle of a character
		t = t[1:]
	}
	return string(bytes.ToValidUTF8(t, []byte("\uFFFD")))
}

// request handles the kernel's stdin request: one that is not Ahead means
// the code reads, and if no input is queued the client is told, once the
// output written before the request (the prompt) has gone out. The event
// counts against the cell's output limit (charge), as all it sends does.
// A StdinWait is handled the same way.
func (w *inputWatch) request(line []byte, charge func(int64) bool) {
	var r kernelproto.StdinRequest // or a StdinWait, which has no Ahead
	if w.in == nil || json.Unmarshal(line, &r) != nil || r.Ahead {
		return
	}
	w.sync()
	ev := protocol.InputRequest{Prompt: w.prompt(), Password: r.Password}
	if !w.in.idle() {
		return // input typed ahead answers this read
	}
	if charge(int64(len(ev.Prompt)) + 32) {
		w.a.out.Send(w.id, protocol.TInputRequest, ev)
	}
}

// sync waits until everything the kernel wrote before now has been
// attributed to the cell. A fence detaches the forwarder at its marker;
// it is attached again at once, and what came after the marker meanwhile
// is handed to it first.
func (w *inputWatch) sync() {
	for i, s := range []*stream{w.k.out, w.k.err} {
		seen, err := s.fence()
		if err == nil {
			select {
			case <-seen:
			case <-time.After(5 * time.Second):
				s.detach()
			}
		}
		s.attach(w.sinks[i])
	}
}
