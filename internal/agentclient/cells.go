package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// CellEvents receive a cell's events as they arrive; any may be nil.
// They are called from one goroutine, in order.
type CellEvents struct {
	Stdout  func([]byte)
	Stderr  func([]byte)
	Display func(kernelproto.Display, bool) // true for the cell's execute_result
	Error   func(kernelproto.Error)
	Input   func(protocol.InputRequest) // the cell waits for open stdin
}

// Cell runs a cell in a kernel and returns how it ended. Cancelling ctx
// interrupts the cell; a kernel that does not stop in time is killed.
func (c *Client) Cell(ctx context.Context, req protocol.Cell, ev CellEvents) (protocol.CellDone, error) {
	return c.cell(ctx, req, nil, ev)
}

// CellStdin runs a cell as Cell does, with open stdin read from in while
// the cell runs (req.StdinOpen is set). in is read on a goroutine of its
// own, in chunks sent as they come; its end (io.EOF, or any other error)
// closes the cell's stdin. The kernel takes the input as the cell's code
// reads it, and what the cell has not read when it ends is dropped. When
// the cell ends, forwarding stops: a Read still blocked then is left to
// return whenever it does, and its data is dropped, so in never delays the
// end of the cell. Input the cell has not asked for yet waits in the
// agent, up to protocol.MaxPendingStdin bytes.
func (c *Client) CellStdin(ctx context.Context, req protocol.Cell, in io.Reader, ev CellEvents) (protocol.CellDone, error) {
	req.StdinOpen = true
	return c.cell(ctx, req, in, ev)
}

func (c *Client) cell(ctx context.Context, req protocol.Cell, in io.Reader, ev CellEvents) (protocol.CellDone, error) {
	id, ch, err := c.request(protocol.TCell, req)
	if err != nil {
		return protocol.CellDone{}, err
	}
	defer c.forget(id)
	if in != nil {
		ended := make(chan struct{})
		defer close(ended)
		go c.feedStdin(id, in, ended)
	}
	c.cellsMu.Lock()
	c.cells[id] = true
	c.cellsMu.Unlock()
	defer func() {
		c.cellsMu.Lock()
		delete(c.cells, id)
		c.cellsMu.Unlock()
	}()
	var res protocol.CellDone
	err = c.follow(ctx, id, ch, func(m *protocol.Message) (done bool, err error) {
		done, res, err = handleCellEvent(m, ev)
		return done, err
	})
	return res, err
}

func handleCellEvent(m *protocol.Message, ev CellEvents) (bool, protocol.CellDone, error) {
	var res protocol.CellDone
	switch m.Type {
	case protocol.TStdout, protocol.TStderr:
		var d protocol.Data
		if err := m.Decode(&d); err != nil {
			return true, res, err
		}
		f := ev.Stdout
		if m.Type == protocol.TStderr {
			f = ev.Stderr
		}
		if f != nil {
			f(d.Data)
		}
	case protocol.TDisplay:
		var d kernelproto.Display
		if err := m.Decode(&d); err != nil {
			return true, res, err
		}
		if ev.Display != nil {
			ev.Display(d, d.Type == kernelproto.TExecuteResult)
		}
	case protocol.TCellError:
		var e kernelproto.Error
		if err := m.Decode(&e); err != nil {
			return true, res, err
		}
		if ev.Error != nil {
			ev.Error(e)
		}
	case protocol.TInputRequest:
		var r protocol.InputRequest
		if err := m.Decode(&r); err != nil {
			return true, res, err
		}
		if ev.Input != nil {
			ev.Input(r)
		}
	case protocol.TCellDone:
		err := m.Decode(&res)
		return true, res, err
	case protocol.TError:
		return true, res, remoteError(m)
	default:
		return true, res, fmt.Errorf("unexpected %q event during a cell", m.Type)
	}
	return false, res, nil
}

// InterruptCells sends SIGINT to the kernels of every cell this client is
// running. Kernels keep their state and end the cell as interrupted.
func (c *Client) InterruptCells() error {
	c.cellsMu.Lock()
	ids := make([]uint64, 0, len(c.cells))
	for id := range c.cells {
		ids = append(ids, id)
	}
	c.cellsMu.Unlock()
	for _, id := range ids {
		if err := c.out.Send(id, protocol.TSignal, protocol.Signal{Name: "SIGINT"}); err != nil {
			return err
		}
	}
	return nil
}

// Restart kills the kernel of language ("" for all); the next cell starts a
// fresh one. Workspace files are kept.
func (c *Client) Restart(ctx context.Context, language string) error {
	id, ch, err := c.request(protocol.TRestart, protocol.Restart{Language: language})
	if err != nil {
		return err
	}
	defer c.forget(id)
	_, err = c.final(ctx, ch, nil)
	return err
}

// Complete asks a kernel for completions at q.Cursor.
func (c *Client) Complete(ctx context.Context, q protocol.KernelQuery) (kernelproto.Completion, error) {
	var out kernelproto.Completion
	err := c.query(ctx, protocol.TComplete, q, &out)
	return out, err
}

// Check asks a kernel whether q.Code is complete and valid, without running it.
func (c *Client) Check(ctx context.Context, q protocol.KernelQuery) (kernelproto.CheckResult, error) {
	var out kernelproto.CheckResult
	err := c.query(ctx, protocol.TCheck, q, &out)
	return out, err
}

func (c *Client) query(ctx context.Context, typ string, q protocol.KernelQuery, out any) error {
	id, ch, err := c.request(typ, q)
	if err != nil {
		return err
	}
	defer c.forget(id)
	m, err := c.final(ctx, ch, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(m.Body, out)
}
