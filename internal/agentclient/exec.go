package agentclient

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// cancelGrace is how long Exec waits for the exit event after asking the
// agent to cancel, before it gives up on the agent.
const cancelGrace = 5 * time.Second

// Exec runs req and copies its output to stdout and stderr as it arrives.
// Cancelling ctx kills the process tree; the exit info then says Canceled.
// A nil error means the process ran and ended; how it ended is in the info.
func (c *Client) Exec(ctx context.Context, req protocol.Exec, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	return c.exec(ctx, req, nil, stdout, stderr)
}

// ExecStdin runs req as Exec does, with stdin read from in while the
// process runs (req.StdinOpen is set; req.Stdin, if any, comes first). in
// is read on a goroutine of its own, in chunks written to the process's
// stdin as they come; its end (io.EOF, or any other error) closes that
// stdin. When the process ends, forwarding stops: a Read still blocked then
// is left to return whenever it does, and its data is dropped, so in never
// delays the end of the exec. Input the process has not read yet waits in
// the agent, up to protocol.MaxPendingStdin bytes; past that the process
// gets end of file and a note on stderr.
func (c *Client) ExecStdin(ctx context.Context, req protocol.Exec, in io.Reader, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	req.StdinOpen = true
	return c.exec(ctx, req, in, stdout, stderr)
}

func (c *Client) exec(ctx context.Context, req protocol.Exec, in io.Reader, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	id, ch, err := c.request(protocol.TExec, req)
	if err != nil {
		return protocol.ExitInfo{}, err
	}
	defer c.forget(id)
	if in != nil {
		ended := make(chan struct{})
		defer close(ended)
		go c.feedStdin(id, in, ended)
	}
	var info protocol.ExitInfo
	err = c.follow(ctx, id, ch, func(m *protocol.Message) (done bool, err error) {
		done, info, err = handleExecEvent(m, stdout, stderr)
		return done, err
	})
	return info, err
}

// follow passes a running request's events to handle until it says the
// request is done. Cancelling ctx asks the agent to cancel the request
// and waits cancelGrace for it to end.
func (c *Client) follow(ctx context.Context, id uint64, ch <-chan *protocol.Message, handle func(*protocol.Message) (bool, error)) error {
	var deadline <-chan time.Time
	cancel := ctx.Done()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return ErrClosed
			}
			if done, err := handle(m); done || err != nil {
				return err
			}
		case <-cancel:
			cancel = nil
			if err := c.out.Send(id, protocol.TCancel, nil); err != nil {
				return fmt.Errorf("%w: %v", ErrClosed, err)
			}
			deadline = time.After(cancelGrace)
		case <-deadline:
			return fmt.Errorf("agent did not end the request within %v of cancel", cancelGrace)
		}
	}
}

func handleExecEvent(m *protocol.Message, stdout, stderr io.Writer) (bool, protocol.ExitInfo, error) {
	var info protocol.ExitInfo
	switch m.Type {
	case protocol.TStdout, protocol.TStderr:
		var d protocol.Data
		if err := m.Decode(&d); err != nil {
			return true, info, err
		}
		w := stdout
		if m.Type == protocol.TStderr {
			w = stderr
		}
		if w != nil {
			w.Write(d.Data) // a failing writer must not stop the exec
		}
	case protocol.TStarted:
	case protocol.TExit:
		err := m.Decode(&info)
		return true, info, err
	case protocol.TError:
		return true, info, remoteError(m)
	default:
		return true, info, fmt.Errorf("unexpected %q event during exec", m.Type)
	}
	return false, info, nil
}

// SendStdin sends more input to the running exec or cell of request id,
// one started with open stdin (protocol.Exec.StdinOpen,
// protocol.Cell.StdinOpen); eof closes its stdin. ExecStdin and CellStdin
// use it; it is safe to call concurrently with everything else.
func (c *Client) SendStdin(id uint64, data []byte, eof bool) error {
	return c.out.Send(id, protocol.TStdin, protocol.Stdin{Data: data, EOF: eof})
}

// stdinChunk is how much of a stdin stream one TStdin message carries at
// most; an interactive reader returns much less, a line at a time.
const stdinChunk = 64 << 10

// feedStdin sends what in returns to request id until in ends (then EOF)
// or ended is closed. It never waits for ended: a Read that blocks past
// the end of the request only keeps this goroutine, which then sends
// nothing.
func (c *Client) feedStdin(id uint64, in io.Reader, ended <-chan struct{}) {
	buf := make([]byte, stdinChunk)
	for {
		n, err := in.Read(buf)
		select {
		case <-ended:
			return
		default:
		}
		if n > 0 {
			if c.SendStdin(id, buf[:n], false) != nil {
				return
			}
		}
		if err != nil {
			c.SendStdin(id, nil, true)
			return
		}
	}
}
