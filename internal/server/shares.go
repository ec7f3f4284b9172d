package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

// putShare shares the caller's session with a user as viewer or
// collaborator, or changes the share's role: 201 when new, 200 when
// changed.
func (s *Server) putShare(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.ShareRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	sh, created, err := s.svc.ShareSession(r.Context(), c.user, r.PathValue("id"), r.PathValue("user_id"), kiln.Role(req.Role))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, fromShare(sh))
}

func (s *Server) deleteShare(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.svc.RevokeShare(r.Context(), c.user, r.PathValue("id"), r.PathValue("user_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listShares(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := s.svc.Shares(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := client.ShareList{Shares: make([]client.Share, 0, len(list))}
	for _, sh := range list {
		out.Shares = append(out.Shares, fromShare(sh))
	}
	return writeJSON(w, http.StatusOK, out)
}

func fromShare(sh store.Share) client.Share {
	return client.Share{SessionID: sh.SessionID, UserID: sh.UserID, Role: string(sh.Role), Created: sh.Created}
}

// sessionEvents streams, as Server-Sent Events, the cells of every user
// of the session as they run: started, stdout, stderr, display and done,
// each with its execution_id. The stream ends when the client goes, the
// session ends, the caller's share is revoked, or the caller falls too
// far behind (then a last error event says to read the history and
// watch again).
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request, c *call) error {
	events, lagged, stop, err := s.svc.WatchSession(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer stop()
	st := newSSE(w)
	defer st.close()
	st.start() // the client knows it is watching before any cell runs
	text := map[string]func([]byte){}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case e, ok := <-events:
			if !ok {
				if lagged() {
					p := problemFor(kiln.Errorf(kiln.Unavailable, "this stream fell too far behind the session's cells and was closed; read the history and watch again"))
					st.send(client.Event{Type: client.EventError, Error: &p})
				}
				return nil
			}
			sendSessionEvent(st, text, e)
		}
	}
}

// sendSessionEvent writes one event. Stream chunks go through one text
// sink per execution and stream, which holds back an incomplete UTF-8
// character until the next chunk.
func sendSessionEvent(st *sse, text map[string]func([]byte), e service.SessionEvent) {
	send := func(ev client.Event) {
		ev.ExecutionID = e.ExecutionID
		st.send(ev)
	}
	switch e.Type {
	case service.SessionStarted, service.SessionDone:
		x := fromExecution(*e.Execution)
		send(client.Event{Type: e.Type, Execution: &x})
		if e.Type == service.SessionDone {
			delete(text, e.ExecutionID+client.EventStdout)
			delete(text, e.ExecutionID+client.EventStderr)
		}
	case service.SessionStdout, service.SessionStderr:
		key := e.ExecutionID + e.Type
		if text[key] == nil {
			text[key] = eventSink(send).text(e.Type)
		}
		text[key](e.Data)
	case service.SessionDisplay:
		send(client.Event{Type: client.EventDisplay, Output: e.Output})
	}
}
