package jupyter

import (
	"context"
	"net/http"
	"sort"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// jsession is a Jupyter session: a notebook (or console) bound to a
// kernel. Jupyter Server keeps them in memory, and so does kiln: they
// are names over kernels, which are kiln sessions and outlive a restart.
type jsession struct {
	ID     string
	Owner  string
	Path   string
	Name   string
	Type   string
	Kernel string // kernel id
}

// maxSessions bounds the Jupyter sessions one user keeps.
const maxSessions = 256

type sessionRequest struct {
	Path   *string `json:"path"`
	Name   *string `json:"name"`
	Type   *string `json:"type"`
	Kernel *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"kernel"`
	Notebook *struct {
		Path string `json:"path"`
	} `json:"notebook"` // the older form of path
}

func (g *Gateway) sessionModel(ctx context.Context, u kiln.User, s jsession) (map[string]any, bool) {
	k, err := g.kernel(ctx, u, s.Kernel)
	if err != nil {
		return nil, false
	}
	rec, err := g.svc.Session(ctx, u, k.session)
	if err != nil {
		return nil, false
	}
	return map[string]any{"id": s.ID, "path": s.Path, "name": s.Name, "type": s.Type, "kernel": g.model(rec),
		"notebook": map[string]string{"path": s.Path, "name": s.Name}}, true
}

// userSessions lists u's Jupyter sessions whose kernel is alive; those
// whose kernel ended go.
func (g *Gateway) userSessions(ctx context.Context, u kiln.User) []map[string]any {
	g.mu.Lock()
	var mine []jsession
	for _, s := range g.sessions {
		if s.Owner == u.ID {
			mine = append(mine, *s)
		}
	}
	g.mu.Unlock()
	sort.Slice(mine, func(i, j int) bool { return mine[i].ID < mine[j].ID })
	out := []map[string]any{}
	for _, s := range mine {
		if m, ok := g.sessionModel(ctx, u, s); ok {
			out = append(out, m)
		} else {
			g.mu.Lock()
			delete(g.sessions, s.ID)
			g.mu.Unlock()
		}
	}
	return out
}

func (g *Gateway) listSessions(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	return writeJSON(w, http.StatusOK, g.userSessions(r.Context(), u))
}

func (g *Gateway) createSession(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	var req sessionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s := jsession{ID: newUUID(), Owner: u.ID, Type: "notebook"}
	req.apply(&s)
	g.mu.Lock()
	n := 0
	for _, o := range g.sessions {
		if o.Owner == u.ID {
			n++
		}
	}
	g.mu.Unlock()
	if n >= maxSessions {
		g.userSessions(r.Context(), u) // drops those whose kernel ended
		g.mu.Lock()
		n = 0
		for _, o := range g.sessions {
			if o.Owner == u.ID {
				n++
			}
		}
		g.mu.Unlock()
		if n >= maxSessions {
			return kiln.Errorf(kiln.QuotaExceeded, "you have %d Jupyter sessions, the most allowed; delete one first", n)
		}
	}
	if err := g.bindKernel(r.Context(), u, &s, req); err != nil {
		return err
	}
	g.mu.Lock()
	g.sessions[s.ID] = &s
	g.mu.Unlock()
	m, ok := g.sessionModel(r.Context(), u, s)
	if !ok {
		return kiln.Errorf(kiln.Conflict, "the session's kernel ended as it was made")
	}
	w.Header().Set("Location", "/api/sessions/"+s.ID)
	return writeJSON(w, http.StatusCreated, m)
}

func (req sessionRequest) apply(s *jsession) {
	if req.Notebook != nil {
		s.Path = req.Notebook.Path
	}
	if req.Path != nil {
		s.Path = *req.Path
	}
	if req.Name != nil {
		s.Name = *req.Name
	}
	if req.Type != nil {
		s.Type = *req.Type
	}
	s.Path, s.Name, s.Type = trunc(s.Path, 4096), trunc(s.Name, 1024), trunc(s.Type, 64)
}

// bindKernel gives s the kernel the request names: an existing one of
// u's by id, or a new one of a kernelspec.
func (g *Gateway) bindKernel(ctx context.Context, u kiln.User, s *jsession, req sessionRequest) error {
	switch {
	case req.Kernel != nil && req.Kernel.ID != "":
		k, err := g.kernel(ctx, u, req.Kernel.ID)
		if err != nil {
			return err
		}
		s.Kernel = k.id
	case req.Kernel != nil || s.Kernel == "":
		name := ""
		if req.Kernel != nil {
			name = req.Kernel.Name
		}
		rec, err := g.newKernel(ctx, u, name)
		if err != nil {
			return err
		}
		s.Kernel = kernelID(rec.ID)
	}
	return nil
}

func (g *Gateway) ownSession(u kiln.User, id string) (jsession, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[id]
	if s == nil || s.Owner != u.ID {
		return jsession{}, kiln.Errorf(kiln.NotFound, "no session %q", trunc(id, 100))
	}
	return *s, nil
}

func (g *Gateway) getSession(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	s, err := g.ownSession(u, r.PathValue("id"))
	if err != nil {
		return err
	}
	m, ok := g.sessionModel(r.Context(), u, s)
	if !ok {
		g.mu.Lock()
		delete(g.sessions, s.ID)
		g.mu.Unlock()
		return kiln.Errorf(kiln.NotFound, "no session %q: its kernel has ended", trunc(s.ID, 100))
	}
	return writeJSON(w, http.StatusOK, m)
}

func (g *Gateway) patchSession(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	s, err := g.ownSession(u, r.PathValue("id"))
	if err != nil {
		return err
	}
	var req sessionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	req.apply(&s)
	if req.Kernel != nil {
		if err := g.bindKernel(r.Context(), u, &s, req); err != nil {
			return err
		}
	}
	g.mu.Lock()
	if g.sessions[s.ID] != nil {
		g.sessions[s.ID] = &s
	}
	g.mu.Unlock()
	m, ok := g.sessionModel(r.Context(), u, s)
	if !ok {
		return kiln.Errorf(kiln.NotFound, "no session %q: its kernel has ended", trunc(s.ID, 100))
	}
	return writeJSON(w, http.StatusOK, m)
}

// deleteSession ends the session and its kernel, as Jupyter Server does.
func (g *Gateway) deleteSession(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	s, err := g.ownSession(u, r.PathValue("id"))
	if err != nil {
		return err
	}
	g.mu.Lock()
	delete(g.sessions, s.ID)
	g.mu.Unlock()
	if k, err := g.kernel(r.Context(), u, s.Kernel); err == nil {
		if err := g.shutdown(r.Context(), k); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// dropSessions forgets the Jupyter sessions of a kernel that was shut
// down.
func (g *Gateway) dropSessions(kernelID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, s := range g.sessions {
		if s.Kernel == kernelID {
			delete(g.sessions, id)
		}
	}
}
