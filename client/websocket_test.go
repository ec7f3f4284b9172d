package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/coder/websocket"
)

// wsCell is the server side of one cell over the WebSocket: it answers
// execute with started, echoes stdin as stdout, and ends with done when
// stdin closes (status ok) or on interrupt (status interrupted). It keeps
// the library's default read limit, as a server would.
func wsCell(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/s1/ws" {
			t.Errorf("path %q", r.URL.Path)
		}
		if a := r.Header.Get("Authorization"); a != "Bearer "+testKey {
			t.Errorf("Authorization %q", a)
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		send := func(ev Event) {
			b, _ := json.Marshal(ev)
			if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
				t.Errorf("server write: %v", err)
			}
		}
		read := func() (m WSMessage) {
			_, b, err := conn.Read(ctx)
			if err != nil {
				t.Errorf("server read: %v", err)
				return WSMessage{Type: "broken"}
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("a message that is not JSON: %q", b)
			}
			return m
		}
		m := read()
		if m.Type != "execute" || m.Execute == nil || m.Execute.Code != "import sys; print(sys.stdin.read())" {
			t.Errorf("first message %+v; want execute with the code", m)
			return
		}
		x := &Execution{ID: "e1", SessionID: "s1", Status: "running"}
		send(Event{Type: EventStarted, Execution: x})
		var stdin strings.Builder
		for {
			switch m := read(); m.Type {
			case "stdin":
				stdin.WriteString(m.Data)
				if m.EOF {
					send(Event{Type: EventStdout, Data: stdin.String()})
					done := *x
					done.Status = "ok"
					send(Event{Type: EventDone, Execution: &done})
					conn.Close(websocket.StatusNormalClosure, "")
					return
				}
			case "interrupt":
				done := *x
				done.Status = "interrupted"
				send(Event{Type: EventDone, Execution: &done})
				conn.Close(websocket.StatusNormalClosure, "")
				return
			default:
				t.Errorf("unexpected message %+v", m)
				return
			}
		}
	}
}

func TestExecWSStdin(t *testing.T) {
	c := testServer(t, wsCell(t))
	ctx := ctxT(t)
	s, err := c.ExecWS(ctx, "s1", ExecRequest{Code: "import sys; print(sys.stdin.read())"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Longer than many messages, with characters of every width, read a
	// few bytes at a time so characters are cut between reads.
	input := strings.Repeat("ascii é € 😀 \x00\n", 3000)
	errc := make(chan error, 1)
	go func() { errc <- s.CopyStdin(ctx, iotest.HalfReader(strings.NewReader(input))) }()
	var types []string
	var stdout string
	for {
		ev, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == EventStdout {
			stdout += ev.Data
		}
		if ev.Type == EventDone && ev.Execution.Status != "ok" {
			t.Errorf("done with status %q", ev.Execution.Status)
		}
	}
	if err := <-errc; err != nil {
		t.Errorf("CopyStdin: %v", err)
	}
	diff(t, "event types", types, []string{EventStarted, EventStdout, EventDone})
	if stdout != input {
		t.Errorf("the cell's stdin came back with %d bytes, differing; sent %d", len(stdout), len(input))
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the server closed: %v", err)
	}
}

func TestExecWSInterrupt(t *testing.T) {
	c := testServer(t, wsCell(t))
	ctx := ctxT(t)
	s, err := c.ExecWS(ctx, "s1", ExecRequest{Code: "import sys; print(sys.stdin.read())"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Recv(ctx); err != nil || ev.Type != EventStarted {
		t.Fatalf("first event %+v, %v; want started", ev, err)
	}
	if err := s.Stdin(ctx, []byte("partial")); err != nil {
		t.Fatal(err)
	}
	if err := s.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []string
	x, err := s.Wait(ctx, func(ev Event) { seen = append(seen, ev.Type) })
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != "interrupted" {
		t.Errorf("status %q; want interrupted", x.Status)
	}
	diff(t, "events after started", seen, []string{EventDone})
}

func TestExecWSEndsEarly(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conn.Read(r.Context())
		conn.Close(websocket.StatusNormalClosure, "")
	})
	ctx := ctxT(t)
	s, err := c.ExecWS(ctx, "s1", ExecRequest{Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recv(ctx); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream closed before done: err = %v; want io.ErrUnexpectedEOF", err)
	}
}

func TestExecWSRefused(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		io.WriteString(w, `{"status":404,"code":"not_found","detail":"no session s9"}`)
	})
	_, err := c.ExecWS(ctxT(t), "s9", ExecRequest{Code: "1"})
	var p *Problem
	if !errors.As(err, &p) || p.Code != "not_found" || p.Detail != "no session s9" {
		t.Errorf("err = %v; want the not_found Problem", err)
	}
}

func TestChunkEnd(t *testing.T) {
	for _, tt := range []struct {
		p    string
		want int
	}{
		{"short", 5},
		{strings.Repeat("a", stdinChunk+10), stdinChunk},
		{strings.Repeat("a", stdinChunk-1) + "€€", stdinChunk - 1}, // € is 3 bytes: cut before it
		{strings.Repeat("a", stdinChunk) + "€", stdinChunk},
		{strings.Repeat("\x80", stdinChunk+10), stdinChunk}, // not UTF-8: cut anywhere
	} {
		if got := chunkEnd([]byte(tt.p)); got != tt.want {
			t.Errorf("chunkEnd(%d bytes ending %q) = %d; want %d", len(tt.p), tt.p[len(tt.p)-4:], got, tt.want)
		}
	}
}

func TestExecWSContext(t *testing.T) {
	// The dial honours ctx.
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.ExecWS(ctx, "s1", ExecRequest{Code: "1"}); err == nil {
		t.Error("ExecWS with a cancelled context: no error")
	}
}
