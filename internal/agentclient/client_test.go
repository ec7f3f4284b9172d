package agentclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// fakeAgent speaks the protocol on one end of a pipe. handle is called for
// every request after the hello.
func fakeAgent(t *testing.T, version int, handle func(w *protocol.Writer, m *protocol.Message)) *Client {
	t.Helper()
	a, b := net.Pipe()
	go func() {
		w := protocol.NewWriter(b)
		r := protocol.NewReader(b)
		w.Send(0, protocol.THello, protocol.Hello{Version: version})
		if _, err := r.Read(); err != nil {
			return
		}
		for {
			m, err := r.Read()
			if err != nil {
				b.Close()
				return
			}
			if m.Type == protocol.TStdin {
				// In order, as the agent takes a stream's chunks.
				handle(w, m)
				continue
			}
			go handle(w, m)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := Dial(ctx, a)
	if err != nil {
		if version == protocol.Version {
			t.Fatalf("Dial: %v", err)
		}
		return nil
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDialRefusesOtherVersion(t *testing.T) {
	a, b := net.Pipe()
	go protocol.NewWriter(b).Send(0, protocol.THello, protocol.Hello{Version: protocol.Version + 1})
	_, err := Dial(context.Background(), a)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("protocol")) {
		t.Errorf("Dial = %v, want a protocol version error", err)
	}
}

func TestExecStreamsAndRoutes(t *testing.T) {
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		if m.Type != protocol.TExec {
			return
		}
		var req protocol.Exec
		m.Decode(&req)
		w.Send(m.ID, protocol.TStarted, protocol.Started{Pid: 2})
		w.Send(m.ID, protocol.TStdout, protocol.Data{Data: []byte(req.Argv[0])})
		w.Send(m.ID, protocol.TStderr, protocol.Data{Data: []byte("err")})
		w.Send(m.ID, protocol.TExit, protocol.ExitInfo{Code: len(req.Argv[0])})
	})
	// Two execs at once must each get their own events.
	type res struct {
		out  string
		code int
		err  error
	}
	results := make(chan res, 2)
	for _, arg := range []string{"one", "three"} {
		go func() {
			var out, errb bytes.Buffer
			info, err := c.Exec(context.Background(), protocol.Exec{Argv: []string{arg}}, &out, &errb)
			results <- res{out.String() + "|" + errb.String(), info.Code, err}
		}()
	}
	for i := 0; i < 2; i++ {
		r := <-results
		if r.err != nil || (r.out != "one|err" || r.code != 3) && (r.out != "three|err" || r.code != 5) {
			t.Errorf("exec result %+v", r)
		}
	}
}

func TestExecCancelSendsCancel(t *testing.T) {
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		if m.Type == protocol.TCancel {
			w.Send(m.ID, protocol.TExit, protocol.ExitInfo{Code: -1, Signal: "SIGKILL", Canceled: true})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	info, err := c.Exec(ctx, protocol.Exec{Argv: []string{"sleep"}}, nil, nil)
	if err != nil || !info.Canceled {
		t.Errorf("Exec after cancel = %+v, %v; want a canceled exit", info, err)
	}
}

func TestBrokenConnectionFailsPending(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		w := protocol.NewWriter(b)
		w.Send(0, protocol.THello, protocol.Hello{Version: protocol.Version})
		r := protocol.NewReader(b)
		r.Read() // hello
		r.Read() // the exec
		b.Close()
	}()
	c, err := Dial(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), protocol.Exec{Argv: []string{"x"}}, nil, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Exec on a broken connection = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Exec hung on a broken connection")
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after break = %v, want ErrClosed", err)
	}
}

// An agent that sends more data than asked for is refused, not believed.
func TestReadFileBounded(t *testing.T) {
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		w.Send(m.ID, protocol.TData, protocol.Data{Data: make([]byte, 100)})
		w.Send(m.ID, protocol.TOK, protocol.FileResult{})
	})
	if _, err := c.ReadFile(context.Background(), "f", 10); err == nil {
		t.Error("ReadFile accepted 100 bytes when 10 were asked for")
	}
}

// An abandoned request must not block events for other requests.
func TestAbandonedRequestDoesNotBlock(t *testing.T) {
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		if m.Type == protocol.TExec {
			for i := 0; i < 500; i++ {
				w.Send(m.ID, protocol.TStdout, protocol.Data{Data: []byte("x")})
			}
			return
		}
		w.Send(m.ID, protocol.TOK, protocol.FileResult{})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	c.Exec(ctx, protocol.Exec{Argv: []string{"flood"}}, nil, nil)
	cancel()
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer pcancel()
	if err := c.Ping(pctx); err != nil {
		t.Errorf("Ping after an abandoned flood = %v", err)
	}
}

// TestCellStdin: a cell's stdin stream goes to the agent under the cell's
// id, in order, then EOF; a reader that blocks does not delay the cell's
// end, and nothing is sent for it once the cell is over.
func TestCellStdin(t *testing.T) {
	type stdinMsg struct {
		id   uint64
		body protocol.Stdin
	}
	stdins := make(chan stdinMsg, 16)
	cells := make(chan uint64, 2)
	release := make(chan uint64, 2)
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		switch m.Type {
		case protocol.TCell:
			var req protocol.Cell
			m.Decode(&req)
			if !req.StdinOpen {
				w.Send(m.ID, protocol.TError, protocol.Error{Code: protocol.ErrInvalid, Message: "stdin not open"})
				return
			}
			cells <- m.ID
			<-release
			w.Send(m.ID, protocol.TCellDone, protocol.CellDone{Status: protocol.CellOK})
		case protocol.TStdin:
			var in protocol.Stdin
			m.Decode(&in)
			stdins <- stdinMsg{m.ID, in}
		}
	})

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := c.CellStdin(context.Background(), protocol.Cell{Code: "x"}, pr, CellEvents{})
		done <- err
	}()
	id := <-cells
	pw.Write([]byte("one\n"))
	pw.Write([]byte("two\n"))
	pw.Close()
	var got []byte
	for eof := false; !eof; {
		select {
		case m := <-stdins:
			if m.id != id {
				t.Fatalf("stdin for request %d, want the cell's %d", m.id, id)
			}
			got = append(got, m.body.Data...)
			eof = m.body.EOF
		case <-time.After(5 * time.Second):
			t.Fatalf("no EOF after %q", got)
		}
	}
	if string(got) != "one\ntwo\n" {
		t.Errorf("stdin sent %q, want %q", got, "one\ntwo\n")
	}
	release <- id
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A reader that has not returned when the cell ends.
	pr, pw = io.Pipe()
	go func() {
		_, err := c.CellStdin(context.Background(), protocol.Cell{Code: "y"}, pr, CellEvents{})
		done <- err
	}()
	release <- <-cells
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CellStdin waited for its reader after the cell ended")
	}
	go pw.Write([]byte("too late\n"))
	select {
	case m := <-stdins:
		t.Errorf("stdin sent after the cell ended: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
}
