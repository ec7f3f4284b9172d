package agent

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// stopGrace is how long a kernel has to end a cell after SIGINT before it
// is killed (timeout, cancel, output limit).
const stopGrace = 2 * time.Second

// cellRun is one running cell, reachable by control messages.
type cellRun struct {
	k        *kernel
	output   atomic.Int64
	limit    int64
	stopping atomic.Value // the status to report if the cell is stopped: timeout, output_limit, interrupted
	kill     chan struct{}
	killOnce sync.Once
	asks     chan struct{} // the kernel's stdin requests, answered by serveStdin
	input    *inputWatch   // tells the client when the cell waits for input
}

// stop interrupts the cell, and kills the kernel if it has not ended the
// cell within stopGrace. The first reason given wins.
func (c *cellRun) stop(status string) {
	if c.stopping.CompareAndSwap(nil, status) {
		c.k.interrupt()
		time.AfterFunc(stopGrace, func() { c.killOnce.Do(func() { close(c.kill) }) })
	}
}

// cellID is the id the agent gives the running cell in kernelproto.
const cellID = "c"

// runCell runs a cell; in is its open stdin, or nil.
func (a *Agent) runCell(id uint64, req protocol.Cell, in *stdinQueue) {
	if in != nil {
		defer a.closeStdin(id)
	}
	if req.TimeoutMs <= 0 || req.OutputBytes <= 0 {
		a.fail(id, protocol.ErrInvalid, "timeout_ms and output_bytes must be positive")
		return
	}
	k, started, err := a.takeKernel(req.Kernel)
	if err != nil {
		a.fail(id, codeFor(err), err.Error())
		return
	}
	c := &cellRun{k: k, limit: req.OutputBytes, kill: make(chan struct{}), asks: make(chan struct{}, 64)}
	a.mu.Lock()
	a.cells[id] = c
	a.mu.Unlock()
	done := protocol.CellDone{}
	defer func() {
		a.mu.Lock()
		delete(a.cells, id)
		a.mu.Unlock()
		a.releaseKernel(k, done.KernelLost)
		a.out.Send(id, protocol.TCellDone, done)
	}()
	if started {
		done.Kernel = k.ready
	}
	c.input = a.watchInput(id, k, in, c.forward(a, id, protocol.TStdout), c.forward(a, id, protocol.TStderr))
	before := a.snapshot()
	a.cg.ResetPeak()
	usage0 := a.usage()
	start := time.Now()

	exe := kernelproto.Execute{Type: kernelproto.TExecute, Cell: cellID, Code: req.Code, Stdin: req.Stdin, HasStdin: req.HasStdin, Argv: req.Argv, Warmup: req.Warmup}
	if in != nil {
		exe.Stdin, exe.HasStdin, exe.StdinOpen = "", false, true
	}
	k.order.setOpen(true)
	err = k.send(exe)
	timer := time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() { c.stop(protocol.CellTimeout) })
	if err == nil {
		ended := make(chan struct{})
		served := make(chan struct{})
		go func() {
			defer close(served)
			c.serveStdin(in, ended)
		}()
		done = a.follow(id, c)
		// Any answer the server is sending goes out before the next
		// Execute, so that the kernel drops it between cells.
		close(ended)
		<-served
	} else {
		done = protocol.CellDone{Status: protocol.CellError, KernelLost: true, Reason: "cannot reach the kernel: " + err.Error()}
	}
	timer.Stop()
	k.order.setOpen(false) // every message of the cell is forwarded: no pump waits
	if started {
		done.Kernel = k.ready
	}
	if done.KernelLost {
		k.kill()
	} else {
		a.fence(k)
	}
	usage1 := a.usage()
	done.WallNs = time.Since(start).Nanoseconds()
	done.CPUNs = (usage1.CPUTime - usage0.CPUTime).Nanoseconds()
	done.PeakMemory = usage1.PeakMemoryBytes
	done.OutputBytes = min(c.output.Load(), c.limit)
	done.PidsLimited = usage1.PidsLimitHits > usage0.PidsLimitHits
	if usage1.OOMKills > usage0.OOMKills && done.KernelLost {
		done.Status = protocol.CellMemory
		done.Reason = "the " + k.lang + " kernel was killed and is restarted with the next cell: its state (variables, imports, definitions) is lost"
	}
	done.Artifacts = protocol.Diff(before, a.snapshot())
}

// follow relays the kernel's messages for the running cell until it ends.
func (a *Agent) follow(id uint64, c *cellRun) protocol.CellDone {
	k := c.k
	b := streamBatch{c: c}
	defer b.flush()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	for {
		var lingered <-chan time.Time
		if b.seq > 0 {
			lingered = linger.C
		}
		select {
		case <-lingered:
			b.flush() // nothing more came within batchLinger
		case line, ok := <-k.lines:
			if !ok {
				b.flush()
				st := k.waitStatus()
				return protocol.CellDone{Status: protocol.CellError, KernelLost: true, Reason: describeExit(k.lang, st), ExitCode: exitCode(st)}
			}
			var env kernelproto.Envelope
			if json.Unmarshal(line, &env) != nil {
				continue // a broken line; the kernel's problem, not the cell's
			}
			if b.add(env, line) {
				if b.fresh {
					b.fresh = false
					linger.Reset(batchLinger) // at most this late
				}
				continue
			}
			b.flush()
			if env.Seq > 0 {
				// what the pipes held before this message goes first
				k.order.before(env.Seq, c.kill)
			}
			a.relay(id, c, env, line)
			if env.Seq > 0 {
				k.order.forwarded(env.Seq)
			}
			if env.Type == kernelproto.TDone {
				var d kernelproto.Done
				json.Unmarshal(line, &d)
				return cellStatus(c, d)
			}
		case <-c.kill:
			status, _ := c.stopping.Load().(string)
			return protocol.CellDone{Status: status, KernelLost: true,
				Reason: "the " + k.lang + " kernel did not stop the cell within " + stopGrace.String() + " and was restarted: its state (variables, imports, definitions) is lost"}
		}
	}
}

// streamBatch joins numbered Stream messages of one stream that come one
// right after another, and whose marks both pipes have passed already (no
// pipe output lies between them), into one event: a print loop sends a
// message per line, and an event per line would cost the client far more
// than the pipe's reads of up to 32 KiB did.
type streamBatch struct {
	c     *cellRun
	name  int
	data  []byte
	seq   uint64
	fresh bool // a batch was started: its linger starts
}

// A batch goes out at streamBatchMax bytes, or batchLinger after it
// started: a print loop's lines come some microseconds apart, and a
// millisecond is nothing to a reader.
const (
	streamBatchMax = 256 << 10
	batchLinger    = time.Millisecond
)

// add takes a numbered Stream into the batch, flushing the batch first
// when the two cannot join; it says false for any other message.
func (b *streamBatch) add(env kernelproto.Envelope, line []byte) bool {
	if env.Type != kernelproto.TStream || env.Seq == 0 {
		return false
	}
	var m kernelproto.Stream
	if json.Unmarshal(line, &m) != nil {
		return true // a broken stream message: dropped
	}
	name := 0
	if m.Name == "stderr" {
		name = 1
	}
	o := b.c.k.order
	if b.seq > 0 && (name != b.name || len(b.data)+len(m.Data) > streamBatchMax || !o.ready(env.Seq)) {
		b.flush()
	}
	if b.seq == 0 {
		o.before(env.Seq, b.c.kill) // what the pipes held before it goes first
		b.name, b.fresh = name, true
	}
	b.data = append(b.data, m.Data...)
	b.seq = env.Seq
	return true
}

// flush forwards the batch, counted against the limit as pipe output is,
// and lets the pipes go on past its marks.
func (b *streamBatch) flush() {
	if b.seq == 0 {
		return
	}
	if len(b.data) > 0 {
		b.c.input.sinks[b.name](b.data)
	}
	b.c.k.order.forwarded(b.seq)
	b.data, b.seq = nil, 0
}

// relay passes one message of the running cell's kernel on to the client.
func (a *Agent) relay(id uint64, c *cellRun, env kernelproto.Envelope, line []byte) {
	switch env.Type {
	case kernelproto.TStream:
		var m kernelproto.Stream
		if json.Unmarshal(line, &m) == nil && len(m.Data) > 0 {
			i := 0
			if m.Name == "stderr" {
				i = 1
			}
			c.input.sinks[i](m.Data) // counted against the limit as pipe output is
		}
	case kernelproto.TDisplay, kernelproto.TExecuteResult:
		if c.charge(int64(len(line))) {
			a.out.Send(id, protocol.TDisplay, json.RawMessage(line))
		}
	case kernelproto.TError:
		if c.charge(int64(len(line))) {
			a.out.Send(id, protocol.TCellError, json.RawMessage(line))
		}
	case tOverlong:
		var o overlong
		json.Unmarshal(line, &o)
		if c.charge(o.Size) {
			c.forward(a, id, protocol.TStderr)([]byte(fmt.Sprintf("\nkiln: a message of %s from the kernel was dropped: one display may be at most %s\n",
				mib(o.Size), mib(lineCap))))
		}
	case kernelproto.TStdinWait:
		c.input.request(line, c.charge)
	case kernelproto.TStdinRequest:
		c.input.request(line, c.charge)
		select {
		case c.asks <- struct{}{}:
		default: // more requests than a kernel that waits for answers makes
		}
	}
}

// serveStdin answers the kernel's stdin requests for the running cell, one
// at a time and in order, each once there is input, until ended is closed.
// A cell without open stdin (in is nil) gets end of file at once.
func (c *cellRun) serveStdin(in *stdinQueue, ended <-chan struct{}) {
	for {
		select {
		case <-c.asks:
		case <-ended:
			return
		}
		ans := kernelproto.Stdin{Type: kernelproto.TStdin, Cell: cellID, EOF: true}
		if in != nil {
			p, eof, lost, ok := in.take(kernelproto.MaxStdinChunk, ended)
			if !ok {
				return
			}
			ans.Data, ans.EOF = p, eof
			if lost {
				ans.Error = stdinLost
			}
		}
		if c.k.send(ans) != nil {
			return
		}
	}
}

// cellStatus maps the kernel's Done to the result's status; a stop the
// agent asked for (timeout, output limit) names its reason.
func cellStatus(c *cellRun, d kernelproto.Done) protocol.CellDone {
	out := protocol.CellDone{Status: d.Status, ExitCode: d.ExitCode}
	// Output past the limit was dropped, so the cell's result is cut short
	// even when its code got to the end before the interrupt.
	if s, _ := c.stopping.Load().(string); s == protocol.CellOutput || s != "" && d.Status != kernelproto.StatusOK {
		out.Status = s
	}
	switch out.Status {
	case protocol.CellOK, protocol.CellError, protocol.CellInterrupted, protocol.CellTimeout, protocol.CellOutput:
	default:
		out.Status = protocol.CellError
	}
	return out
}

// charge counts n bytes of a display or error against the cell's output
// limit. It reports whether they fit; if not, the message is dropped and
// the cell stopped.
func (c *cellRun) charge(n int64) bool {
	if c.output.Add(n) > c.limit {
		c.stop(protocol.CellOutput)
		return false
	}
	return true
}

// forward sends a cell's output as events, up to the cell's limit; past it
// the cell is stopped.
func (c *cellRun) forward(a *Agent, id uint64, typ string) func([]byte) {
	return func(p []byte) {
		total := c.output.Add(int64(len(p)))
		keep := len(p)
		if total > c.limit {
			keep = max(0, len(p)-int(total-c.limit))
			c.stop(protocol.CellOutput)
		}
		if keep > 0 {
			a.out.Send(id, typ, protocol.Data{Data: p[:keep]})
		}
	}
}

// fence waits until all of the cell's output has been attributed.
func (a *Agent) fence(k *kernel) {
	for _, s := range []*stream{k.out, k.err} {
		seen, err := s.fence()
		if err != nil {
			s.detach()
			continue
		}
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			s.detach()
		}
	}
}

// interruptCell handles Signal(SIGINT) and Cancel for a running cell.
func (a *Agent) controlCell(m *protocol.Message) bool {
	a.mu.Lock()
	c := a.cells[m.ID]
	a.mu.Unlock()
	if c == nil {
		return false
	}
	switch m.Type {
	case protocol.TCancel:
		c.stop(protocol.CellInterrupted)
	case protocol.TSignal:
		c.k.interrupt() // the kernel answers Done "interrupted"; nothing is killed
	}
	return true
}

// mib formats n bytes in MiB, for a note in a cell's output.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
