package server

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// cellRequest is the one cell request type from a client's; the service
// validates it.
func cellRequest(req client.ExecRequest) (kiln.CellRequest, error) {
	if req.TimeoutMS < 0 {
		return kiln.CellRequest{}, kiln.Errorf(kiln.Invalid, "timeout_ms must not be negative")
	}
	return kiln.CellRequest{Language: req.Language, Code: req.Code, Stdin: req.Stdin,
		Timeout: millis(req.TimeoutMS), Args: req.Args, Name: req.FileName, Entry: req.Entry, BuildOptions: req.BuildOptions, Test: req.Test}, nil
}

// millis is ms milliseconds as a Duration, saturated so that a huge
// value stays huge (and is refused as out of range) instead of wrapping
// around to a small, valid-looking one.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// exec runs a cell: the answer is the finished execution, or with
// "Accept: text/event-stream" a stream of events as the cell runs.
func (s *Server) exec(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.ExecRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	cell, err := cellRequest(req)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return s.execSSE(w, r, c, id, req, cell)
	}
	if err := s.cellPackages(r.Context(), c, id, req, service.PackageEvents{}); err != nil {
		return err
	}
	e, err := s.svc.Exec(r.Context(), c.user, id, cell, service.ExecEvents{})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromExecution(e))
}

// execSSE streams the cell as Server-Sent Events. Errors before the cell
// starts are ordinary problem answers; after that they are an error event.
func (s *Server) execSSE(w http.ResponseWriter, r *http.Request, c *call, id string, req client.ExecRequest, cell kiln.CellRequest) error {
	st := newSSE(w)
	defer st.close()
	ev := eventSink(func(e client.Event) { st.send(e) })
	// The packages' install streams its output as the cell's stderr, as
	// a notebook's "pip install" cell would.
	err := s.cellPackages(r.Context(), c, id, req, service.PackageEvents{Stdout: ev.text(client.EventStderr), Stderr: ev.text(client.EventStderr)})
	var e kiln.Execution
	if err == nil {
		e, err = s.svc.Exec(r.Context(), c.user, id, cell, ev.execEvents(st.start))
	}
	if err != nil {
		if !st.started() {
			return err
		}
		p := problemFor(err)
		st.send(client.Event{Type: client.EventError, Error: &p})
		return nil
	}
	x := fromExecution(e)
	st.send(client.Event{Type: client.EventDone, Execution: &x})
	return nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := page(r)
	if err != nil {
		return err
	}
	list, next, err := s.svc.History(r.Context(), c.user, r.PathValue("id"), p)
	if err != nil {
		return err
	}
	out := client.ExecutionList{Executions: make([]client.Execution, 0, len(list)), NextCursor: next}
	for _, e := range list {
		out.Executions = append(out.Executions, fromExecution(e))
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) execution(w http.ResponseWriter, r *http.Request, c *call) error {
	e, err := s.svc.Execution(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromExecution(e))
}
