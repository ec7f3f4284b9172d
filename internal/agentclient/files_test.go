package agentclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// memAgent is a small real implementation of the agent's write and read
// operations over a map, enough to check what the client sends.
type memAgent struct {
	mu    sync.Mutex
	files map[string][]byte
	ops   []protocol.FileOp // every write, without its data
}

func (a *memAgent) handle(w *protocol.Writer, m *protocol.Message) {
	var op protocol.FileOp
	if m.Decode(&op) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch op.Op {
	case protocol.FileWrite:
		meta := op
		meta.Data = nil
		a.ops = append(a.ops, meta)
		if _, ok := a.files[op.Path]; ok && op.Exclusive {
			w.Send(m.ID, protocol.TError, protocol.Error{Code: protocol.ErrExists, Message: op.Path + ": file exists"})
			return
		}
		if !op.Append {
			a.files[op.Path] = nil
		}
		a.files[op.Path] = append(a.files[op.Path], op.Data...)
	case protocol.FileRead:
		data, ok := a.files[op.Path]
		if !ok {
			w.Send(m.ID, protocol.TError, protocol.Error{Code: protocol.ErrNotFound, Message: op.Path + ": no such file or directory"})
			return
		}
		data = data[min(op.Offset, int64(len(data))):]
		data = data[:min(op.Limit, int64(len(data)))]
		for len(data) > 0 {
			n := min(len(data), 1000) // small chunks: several per request
			w.Send(m.ID, protocol.TData, protocol.Data{Data: data[:n]})
			data = data[n:]
		}
	}
	w.Send(m.ID, protocol.TOK, protocol.FileResult{})
}

func newMemAgent(t *testing.T) (*Client, *memAgent) {
	a := &memAgent{files: map[string][]byte{}}
	return fakeAgent(t, protocol.Version, a.handle), a
}

func TestWriteFromChunks(t *testing.T) {
	c, a := newMemAgent(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), (2*protocol.ChunkSize+100)/10)
	// A reader that returns a short read first must still give full chunks.
	n, err := c.WriteFrom(ctx, "f", io.MultiReader(bytes.NewReader(data[:7]), bytes.NewReader(data[7:])), 0o600)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("WriteFrom = %d, %v; want %d", n, err, len(data))
	}
	if !bytes.Equal(a.files["f"], data) {
		t.Errorf("agent holds %d bytes, want the %d written", len(a.files["f"]), len(data))
	}
	if len(a.ops) != 3 || a.ops[0].Append || !a.ops[1].Append || !a.ops[2].Append || a.ops[0].Mode != 0o600 {
		t.Errorf("writes = %+v; want one create and two appends", a.ops)
	}
}

func TestWriteFromEmptyCreates(t *testing.T) {
	c, a := newMemAgent(t)
	if n, err := c.WriteFrom(context.Background(), "empty", strings.NewReader(""), 0); err != nil || n != 0 {
		t.Fatalf("WriteFrom(empty) = %d, %v", n, err)
	}
	if _, ok := a.files["empty"]; !ok || len(a.ops) != 1 {
		t.Errorf("an empty reader made no file: ops %+v", a.ops)
	}
}

func TestCreateFromExclusive(t *testing.T) {
	c, a := newMemAgent(t)
	ctx := context.Background()
	big := make([]byte, protocol.ChunkSize+1)
	if _, err := c.CreateFrom(ctx, "new", bytes.NewReader(big), 0); err != nil {
		t.Fatal(err)
	}
	// Only the first chunk is exclusive: the rest append to the file it made.
	if len(a.ops) != 2 || !a.ops[0].Exclusive || a.ops[1].Exclusive || !a.ops[1].Append {
		t.Errorf("writes = %+v; want an exclusive create then a plain append", a.ops)
	}
	_, err := c.CreateFrom(ctx, "new", strings.NewReader("again"), 0)
	if ErrorCode(err) != protocol.ErrExists || !errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CreateFrom over an existing file = %v (code %q), want code exists and fs.ErrExist", err, ErrorCode(err))
	}
	if len(a.files["new"]) != len(big) {
		t.Errorf("the refused create changed the file: %d bytes", len(a.files["new"]))
	}
}

func TestReadToStreams(t *testing.T) {
	c, a := newMemAgent(t)
	ctx := context.Background()
	a.files["f"] = bytes.Repeat([]byte("x"), 5000)
	var buf bytes.Buffer
	if n, err := c.ReadTo(ctx, "f", &buf, 1<<20); err != nil || n != 5000 || buf.Len() != 5000 {
		t.Errorf("ReadTo = %d, %v, %d bytes in w; want 5000", n, err, buf.Len())
	}
	buf.Reset()
	if n, err := c.ReadTo(ctx, "f", &buf, 1234); err != nil || n != 1234 || buf.Len() != 1234 {
		t.Errorf("ReadTo with limit 1234 = %d, %v, %d bytes in w", n, err, buf.Len())
	}
	if _, err := c.ReadTo(ctx, "f", &buf, 0); err == nil {
		t.Error("ReadTo with limit 0 succeeded; an unbounded read must be refused")
	}
	_, err := c.ReadTo(ctx, "missing", &buf, 10)
	if ErrorCode(err) != protocol.ErrNotFound || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadTo of a missing file = %v, want code not_found and fs.ErrNotExist", err)
	}
	// A writer's error ends the read and comes back as it is.
	stop := errors.New("writer full")
	n, err := c.ReadTo(ctx, "f", &failAfter{n: 2000, err: stop}, 1<<20)
	if !errors.Is(err, stop) || ErrorCode(err) != "" || n > 3000 {
		t.Errorf("ReadTo into a failing writer = %d, %v; want the writer's error after at most 3000 bytes", n, err)
	}
}

// failAfter accepts n bytes and then fails, as a full disk or a closed
// HTTP response would.
type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return len(p), nil
}

func TestMoveSendsTarget(t *testing.T) {
	got := make(chan protocol.FileOp, 1)
	c := fakeAgent(t, protocol.Version, func(w *protocol.Writer, m *protocol.Message) {
		var op protocol.FileOp
		m.Decode(&op)
		got <- op
		w.Send(m.ID, protocol.TError, protocol.Error{Code: protocol.ErrExists, Message: "a -> b: target exists"})
	})
	err := c.Move(context.Background(), "a", "b", false)
	if op := <-got; op.Op != protocol.FileMove || op.Path != "a" || op.To != "b" || op.Overwrite {
		t.Errorf("Move sent %+v", op)
	}
	if ErrorCode(err) != protocol.ErrExists {
		t.Errorf("Move = %v, want code exists", err)
	}
}
