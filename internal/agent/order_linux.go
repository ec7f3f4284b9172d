package agent

import (
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

// orderWait bounds each wait for the other path of a kernel's output
// (kernelproto's Ordered output): a mark or a message that does not come
// (user code forged one, or the kernel died between the two) costs this
// much order, never a hang.
const orderWait = 5 * time.Second

// order puts a kernel's pipe output and its ordered channel messages back
// in the order the kernel wrote them. The pumps note each order mark they
// pass and wait there until the follower has forwarded that message; the
// follower waits before message N until both pumps have passed mark N.
type order struct {
	mu      sync.Mutex
	nonce   []byte    // set once, from Ready
	seen    [2]uint64 // the highest mark each pipe has passed
	sent    uint64    // the highest message forwarded
	open    bool      // a cell is followed; between cells nobody waits
	changed chan struct{}
}

func newOrder() *order { return &order{changed: make(chan struct{})} }

// start takes the nonce the kernel's Ready announced, if any; without one
// the kernel's output is taken as it comes.
func (o *order) start(ready []byte) {
	var r kernelproto.Ready
	if json.Unmarshal(ready, &r) != nil {
		return
	}
	nonce, err := hex.DecodeString(r.Order)
	if err != nil || len(nonce) != kernelproto.OrderNonceLen {
		return
	}
	o.mu.Lock()
	o.nonce = nonce
	o.mu.Unlock()
}

// marks returns the nonce of the kernel's order marks, or nil.
func (o *order) marks() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nonce
}

// notify wakes every waiter; o.mu is held.
func (o *order) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// wait waits until ok holds (checked under o.mu), the cell ends, abort is
// closed or orderWait passes.
func (o *order) wait(ok func() bool, abort <-chan struct{}) {
	var timeout <-chan time.Time // made only if the wait is not over at once
	for {
		o.mu.Lock()
		if !o.open || ok() {
			o.mu.Unlock()
			return
		}
		ch := o.changed
		o.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(orderWait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-ch:
		case <-timeout:
			return
		case <-abort:
			return
		}
	}
}

// passed is a pump's: pipe i has passed mark seq. Before the pump passes
// on any output it read after the mark, it calls sentUpTo(seq).
func (o *order) passed(i int, seq uint64) {
	o.mu.Lock()
	if seq > o.seen[i] {
		o.seen[i] = seq
		o.notify()
	}
	o.mu.Unlock()
}

// sentUpTo returns once message seq has been forwarded, so that what a
// pipe holds after its mark goes out after the message.
func (o *order) sentUpTo(seq uint64) {
	o.wait(func() bool { return o.sent >= seq }, nil)
}

// ready says, without waiting, whether both pipes have passed mark seq.
func (o *order) ready(seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.open || o.seen[0] >= seq && o.seen[1] >= seq
}

// before is the follower's, before it forwards message seq: it waits
// until both pipes have passed mark seq.
func (o *order) before(seq uint64, abort <-chan struct{}) {
	o.wait(func() bool { return o.seen[0] >= seq && o.seen[1] >= seq }, abort)
}

// forwarded is the follower's, after it forwarded message seq.
func (o *order) forwarded(seq uint64) {
	o.mu.Lock()
	if seq > o.sent {
		o.sent = seq
		o.notify()
	}
	o.mu.Unlock()
}

// setOpen starts or ends a cell: outside one, no pump waits.
func (o *order) setOpen(open bool) {
	o.mu.Lock()
	o.open = open
	o.notify()
	o.mu.Unlock()
}
