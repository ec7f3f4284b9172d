package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// ExecStream runs a cell like Exec, but streams it: fn is called with
// every Event in order, from started through stdout, stderr and display
// to done, and ExecStream returns the final Execution. An error event (the
// cell could not run) is returned as its *Problem. fn runs on the
// caller's goroutine and may be nil. Cancelling ctx closes the stream;
// whether the cell goes on running is the server's choice, so call
// Interrupt to stop it.
func (c *Client) ExecStream(ctx context.Context, sessionID string, req ExecRequest, fn func(Event)) (*Execution, error) {
	sr, body, err := c.postStream(ctx, route("/v1/sessions/", sessionID, "/executions"), req)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	for {
		ev, err := sr.nextEvent(ctx, "the execution")
		if err != nil {
			return nil, err
		}
		if x, final, err := finish(ev, fn); final {
			return x, err
		}
	}
}

// nextData is the next event's name and data. A stream that ends first
// is an error saying what had not finished (what), or ctx's error.
func (r *sseReader) nextData(ctx context.Context, what string) (name string, data []byte, err error) {
	name, data, err = r.next()
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, fmt.Errorf("kiln client: the event stream ended before %s finished: %w", what, err)
	}
	return name, data, nil
}

// nextEvent is the next Event, its Type taken from the event's name when
// the data does not say it.
func (r *sseReader) nextEvent(ctx context.Context, what string) (Event, error) {
	name, data, err := r.nextData(ctx, what)
	if err != nil {
		return Event{}, err
	}
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, fmt.Errorf("kiln client: a %q event that is not JSON: %w", name, err)
	}
	if ev.Type == "" {
		ev.Type = name
	}
	return ev, nil
}

// finish hands ev to fn and says whether it ends the stream, with the
// stream's outcome.
func finish(ev Event, fn func(Event)) (x *Execution, final bool, err error) {
	if fn != nil {
		fn(ev)
	}
	switch ev.Type {
	case EventDone:
		if ev.Execution == nil {
			return nil, true, errors.New("kiln client: a done event without its execution")
		}
		return ev.Execution, true, nil
	case EventError:
		if ev.Error == nil {
			return nil, true, &Problem{Title: "Execution failed", Code: "internal", Detail: "the execution failed and the server gave no reason"}
		}
		return nil, true, ev.Error
	}
	return nil, false, nil
}

// sseReader reads server-sent events (the text/event-stream format):
// "field: value" lines, an event ending at a blank line, comments
// starting with ":" (the server's keep-alives) skipped.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	// ScanLines also drops the CR of a CRLF line end.
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	return &sseReader{sc: sc}
}

// next returns the next event's name and data; io.EOF when the stream
// ended between events. An event cut off by the end is dropped, as the
// format says, and reported as io.ErrUnexpectedEOF.
func (r *sseReader) next() (name string, data []byte, err error) {
	var buf []byte
	seen := false // a field of this event was read
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if buf == nil {
				name, seen = "", false // an event without data is no event
				continue
			}
			return name, bytes.TrimSuffix(buf, []byte("\n")), nil
		}
		if line[0] == ':' {
			continue
		}
		seen = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if len(buf)+len(value) >= maxEventBytes {
				return "", nil, fmt.Errorf("an event is larger than %d bytes", maxEventBytes)
			}
			buf = append(append(buf, value...), '\n')
		}
		// id and retry matter for reconnecting, which a cell's stream
		// does not do: a cell is not run twice.
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", nil, fmt.Errorf("an event line is longer than %d bytes", maxEventBytes)
		}
		return "", nil, err
	}
	if seen {
		return "", nil, io.ErrUnexpectedEOF
	}
	return "", nil, io.EOF
}

// postStream POSTs v as JSON to path asking for an event stream, and
// returns the stream's reader; the caller closes body.
func (c *Client) postStream(ctx context.Context, path string, v any) (*sseReader, io.Closer, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("kiln client: encode request: %w", err)
	}
	resp, err := c.send(ctx, request{
		method:      http.MethodPost,
		path:        path,
		body:        bytes.NewReader(b),
		contentType: "application/json",
		accept:      "text/event-stream",
	})
	if err != nil {
		return nil, nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("kiln client: asked for an event stream, the server answered %q", resp.Header.Get("Content-Type"))
	}
	return newSSEReader(resp.Body), resp.Body, nil
}
