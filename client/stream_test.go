package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseFrame is one event as the server writes it.
func sseFrame(ev Event) string {
	b, _ := json.Marshal(ev)
	return "event: " + ev.Type + "\ndata: " + string(b) + "\n\n"
}

// writeSplit writes s in pieces of n bytes, flushing each, so that lines
// and events arrive cut across reads.
func writeSplit(w http.ResponseWriter, s string, n int) {
	for len(s) > 0 {
		k := min(n, len(s))
		io.WriteString(w, s[:k])
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
		s = s[k:]
	}
}

func TestExecStream(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	started := &Execution{ID: "e1", SessionID: "s1", Seq: 3, Language: "python", Code: "print('hi')", Status: "running", Started: t0}
	done := *started
	done.Status = "ok"
	// Lists are [] on the wire, never null (kiln.CellResult.MarshalJSON).
	done.Result = &CellResult{Language: "python", Status: "ok", Stdout: "hi\nthere\n", Outputs: []Output{}, Artifacts: []Artifact{}}
	display := &Output{Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"42"`)}}
	events := []Event{
		{Type: EventStarted, Execution: started},
		{Type: EventStdout, Data: "hi\n"},
		{Type: EventDisplay, Output: display},
		{Type: EventStderr, Data: "warn: ünïcode\n"},
		{Type: EventStdout, Data: "there\n"},
		{Type: EventDone, Execution: &done},
	}
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.RequestURI != "/v1/sessions/s1/executions" {
			t.Errorf("request %s %s", r.Method, r.RequestURI)
		}
		if a := r.Header.Get("Accept"); a != "text/event-stream" {
			t.Errorf("Accept %q; want text/event-stream", a)
		}
		if a := r.Header.Get("Authorization"); a != "Bearer "+testKey {
			t.Errorf("Authorization %q", a)
		}
		var req ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Code != "print('hi')" || req.Language != "python" {
			t.Errorf("request body %+v, %v", req, err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		var s strings.Builder
		s.WriteString(": keep-alive\n\n")
		for i, ev := range events {
			f := sseFrame(ev)
			if i == 2 {
				// A client must accept CRLF line ends, a comment
				// inside an event and data over several lines.
				b, _ := json.MarshalIndent(ev, "", " ")
				f = "event: display\r\n: ping\r\ndata: " + strings.ReplaceAll(string(b), "\n", "\r\ndata: ") + "\r\n\r\n"
			}
			s.WriteString(f)
			s.WriteString(":\n\n")
		}
		writeSplit(w, s.String(), 7)
	})
	var got []Event
	x, err := c.ExecStream(ctxT(t), "s1", ExecRequest{Code: "print('hi')", Language: "python"}, func(ev Event) { got = append(got, ev) })
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "events", got, events)
	diff(t, "execution", x, &done)
}

func TestExecStreamErrorEvent(t *testing.T) {
	prob := &Problem{Title: "Unavailable", Status: 503, Code: "unavailable", Detail: "the session's sandbox is gone"}
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFrame(Event{Type: EventStarted, Execution: &Execution{ID: "e1"}})+sseFrame(Event{Type: EventError, Error: prob}))
	})
	n := 0
	x, err := c.ExecStream(ctxT(t), "s1", ExecRequest{Code: "1"}, func(Event) { n++ })
	var p *Problem
	if x != nil || !errors.As(err, &p) {
		t.Fatalf("ExecStream = %v, %v; want the error event's Problem", x, err)
	}
	diff(t, "problem", p, prob)
	if n != 2 {
		t.Errorf("fn called %d times; want 2 (started, error)", n)
	}
}

func TestExecStreamBroken(t *testing.T) {
	tests := []struct {
		name, contentType, body, want string
	}{
		{"ends early", "text/event-stream", sseFrame(Event{Type: EventStdout, Data: "x"}), "unexpected EOF"},
		{"cut inside an event", "text/event-stream", "event: done\ndata: {\"type\":", "unexpected EOF"},
		{"not JSON", "text/event-stream", "event: stdout\ndata: hello\n\n", "not JSON"},
		{"done without execution", "text/event-stream", "data: {\"type\":\"done\"}\n\n", "without its execution"},
		{"not a stream", "application/json", `{"id":"e1"}`, "asked for an event stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			})
			_, err := c.ExecStream(ctxT(t), "s1", ExecRequest{Code: "1"}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want one saying %q", err, tt.want)
			}
		})
	}
}

func TestExecStreamRefused(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(429)
		io.WriteString(w, `{"status":429,"code":"rate_limited","detail":"too many executions"}`)
	})
	_, err := c.ExecStream(ctxT(t), "s1", ExecRequest{Code: "1"}, func(Event) { t.Error("an event from a refused request") })
	var p *Problem
	if !errors.As(err, &p) || p.Code != "rate_limited" || p.RetryAfterSeconds != 2 {
		t.Errorf("err = %#v; want the rate_limited Problem with RetryAfterSeconds 2", err)
	}
}

func TestExecStreamCancel(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFrame(Event{Type: EventStarted, Execution: &Execution{ID: "e1"}}))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	_, err := c.ExecStream(ctx, "s1", ExecRequest{Code: "1"}, func(ev Event) {
		if ev.Type == EventStarted {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want context.Canceled", err)
	}
}

func TestSSEReader(t *testing.T) {
	in := ": comment\n\n" +
		"event: a\ndata: 1\n\n" +
		"data:2\nid: 9\nretry: 100\n\n" + // no event name; no space after the colon
		"event: ignored\n\n" + // no data: no event
		"data\n\n" + // a field without a colon: empty data
		"event: b\ndata: x\ndata:  y\n\n" +
		"event: c\ndata: cut"
	type ev struct{ name, data string }
	var got []ev
	r := newSSEReader(strings.NewReader(in))
	var err error
	for {
		var name string
		var data []byte
		if name, data, err = r.next(); err != nil {
			break
		}
		got = append(got, ev{name, string(data)})
	}
	want := []ev{{"a", "1"}, {"", "2"}, {"", ""}, {"b", "x\n y"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q; want %q", got, want)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut event: err = %v; want io.ErrUnexpectedEOF", err)
	}
	if _, _, err := newSSEReader(strings.NewReader(": only comments\n")).next(); err != io.EOF {
		t.Errorf("an empty stream: err = %v; want io.EOF", err)
	}
}

// FuzzSSEReader: any input ends in a bounded number of events and an
// error, without a panic.
func FuzzSSEReader(f *testing.F) {
	f.Add("event: a\ndata: 1\n\n")
	f.Add(": x\r\ndata:\r\n\r\ndata")
	f.Fuzz(func(t *testing.T, in string) {
		r := newSSEReader(strings.NewReader(in))
		for i := 0; ; i++ {
			if i > len(in) {
				t.Fatalf("more events than bytes in %q", in)
			}
			if _, _, err := r.next(); err != nil {
				return
			}
		}
	})
}
