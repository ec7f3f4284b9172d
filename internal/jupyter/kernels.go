package jupyter

import (
	"context"
	"net/http"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// kernel is the gateway's state of one kiln session used as a Jupyter
// kernel: the execution counter, the open channels, and the shell
// requests waiting their turn. The session itself (sandbox, limits,
// history) is the service's.
type kernel struct {
	g       *Gateway
	session string // kiln session id
	id      string // Jupyter kernel id
	owner   kiln.User
	spec    kernelSpec
	jsess   string // the kernel side's Jupyter session id, in its headers

	ctx    context.Context // lives as long as the kernel; cancels its cells
	cancel context.CancelFunc

	mu          sync.Mutex
	conns       map[*conn]struct{}
	count       int     // execution_count of the last counted execute_request
	queue       []inMsg // shell requests, handled in order
	queuedBytes int
	running     bool      // a goroutine drains the queue
	busy        bool      // a shell request is being handled
	input       *stdinFor // the running execute's stdin, when it allows input
}

// stdinFor is where a running execute_request takes input_reply values:
// a writer goroutine feeds them to the cell's stdin in order, and a
// reply that finds maxPendingInput waiting is dropped (a client that
// floods replies gets no more goroutines or memory than that).
type stdinFor struct {
	conn    *conn
	pending chan string
	close   func()
}

const maxPendingInput = 16

// kernel finds u's kernel by its Jupyter id. Another user's session, an
// ended one or one that is not a kernel are all "no kernel".
func (g *Gateway) kernel(ctx context.Context, u kiln.User, id string) (*kernel, error) {
	sid, err := sessionOf(id)
	if err != nil {
		return nil, err
	}
	rec, err := g.svc.Session(ctx, u, sid)
	if err != nil || rec.Status != kiln.SessionActive || rec.UserID != u.ID || rec.Metadata[MetaKernelSpec] == "" {
		g.forget(sid)
		if err != nil && kiln.KindOf(err) != kiln.NotFound && kiln.KindOf(err) != "" {
			return nil, err
		}
		return nil, kiln.Errorf(kiln.NotFound, "no kernel %q", trunc(id, 100))
	}
	return g.kernelFor(u, rec)
}

// kernelFor returns the gateway's state of an active kernel session,
// made on first use (also after a restart of kiln, whose sessions
// survive it).
func (g *Gateway) kernelFor(u kiln.User, rec kiln.Session) (*kernel, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if k := g.kernels[rec.ID]; k != nil {
		return k, nil
	}
	spec, err := g.spec(rec.Metadata[MetaKernelSpec])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kernel{g: g, session: rec.ID, id: kernelID(rec.ID), owner: u, spec: spec, jsess: newUUID(),
		ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}}
	g.kernels[rec.ID] = k
	return k, nil
}

// forget drops the state of a kernel whose session is gone, closing its
// channels.
func (g *Gateway) forget(sid string) {
	g.mu.Lock()
	k := g.kernels[sid]
	delete(g.kernels, sid)
	g.mu.Unlock()
	if k != nil {
		k.cancel()
		k.closeConns("the kernel was shut down")
	}
}

// prune forgets the state of u's kernels whose sessions ended without the
// gateway (idle expiry, DELETE /v1/sessions/{id}), so that it does not
// pile up; front ends list kernels often.
func (g *Gateway) prune(u kiln.User, active map[string]bool) {
	g.mu.Lock()
	var gone []string
	for sid, k := range g.kernels {
		if k.owner.ID == u.ID && !active[sid] {
			gone = append(gone, sid)
		}
	}
	g.mu.Unlock()
	for _, sid := range gone {
		g.forget(sid)
	}
}

// kernelModel is the REST form of a kernel.
type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

func (g *Gateway) model(rec kiln.Session) kernelModel {
	m := kernelModel{ID: kernelID(rec.ID), Name: rec.Metadata[MetaKernelSpec], LastActivity: isoTime(rec.LastActive), ExecutionState: "idle"}
	g.mu.Lock()
	k := g.kernels[rec.ID]
	g.mu.Unlock()
	if k != nil {
		k.mu.Lock()
		m.Connections = len(k.conns)
		if k.busy {
			m.ExecutionState = "busy"
		}
		k.mu.Unlock()
	}
	return m
}

func (g *Gateway) listKernels(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	recs, err := g.activeKernels(r.Context(), u)
	if err != nil {
		return err
	}
	out := []kernelModel{}
	active := map[string]bool{}
	for _, rec := range recs {
		out = append(out, g.model(rec))
		active[rec.ID] = true
	}
	g.prune(u, active)
	return writeJSON(w, http.StatusOK, out)
}

// startRequest is POST /api/kernels' body. The environment a front end
// sends (KERNEL_* variables of the notebook server) is not passed into
// the sandbox: a kernel's environment is kiln's.
type startRequest struct {
	Name string            `json:"name"`
	Path string            `json:"path"`
	Env  map[string]string `json:"env"`
}

func (g *Gateway) startKernel(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	var req startRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	rec, err := g.newKernel(r.Context(), u, req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/kernels/"+kernelID(rec.ID))
	return writeJSON(w, http.StatusCreated, g.model(rec))
}

// newKernel makes a kiln session of u for a kernelspec ("" for the
// default): the service's caps, budgets, pool and audit apply.
func (g *Gateway) newKernel(ctx context.Context, u kiln.User, name string) (kiln.Session, error) {
	if name == "" {
		name = g.defaultSpec()
	}
	spec, err := g.spec(name)
	if err != nil {
		return kiln.Session{}, err
	}
	return g.svc.CreateSession(ctx, u, service.SessionSpec{Languages: []string{spec.Language},
		Metadata: map[string]string{MetaKernelSpec: spec.Name}})
}

func (g *Gateway) getKernel(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	k, err := g.kernel(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return err
	}
	rec, err := g.svc.Session(r.Context(), u, k.session)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, g.model(rec))
}

func (g *Gateway) deleteKernel(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	k, err := g.kernel(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := g.shutdown(r.Context(), k); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// shutdown ends the kernel's session (its sandbox goes; its history
// stays) and closes its channels.
func (g *Gateway) shutdown(ctx context.Context, k *kernel) error {
	k.broadcastStatus("dead", nil)
	err := g.svc.DeleteSession(ctx, k.owner, k.session)
	g.forget(k.session)
	g.dropSessions(k.id)
	return err
}

func (g *Gateway) interruptKernel(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	k, err := g.kernel(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := g.svc.Interrupt(r.Context(), u, k.session); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (g *Gateway) restartKernel(w http.ResponseWriter, r *http.Request, u kiln.User) error {
	k, err := g.kernel(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := k.restart(r.Context()); err != nil {
		return err
	}
	rec, err := g.svc.Session(r.Context(), u, k.session)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, g.model(rec))
}

// restart stops the running cell, starts the kernel afresh (the
// workspace's files stay) and counts executions from one again, as a new
// kernel process would.
func (k *kernel) restart(ctx context.Context) error {
	k.broadcastStatus("restarting", nil)
	k.g.svc.Interrupt(ctx, k.owner, k.session) // nothing may be running: no error to report
	if err := k.g.svc.Restart(ctx, k.owner, k.session, ""); err != nil {
		return err
	}
	k.mu.Lock()
	k.count = 0
	k.mu.Unlock()
	k.broadcastStatus("starting", nil)
	k.broadcastStatus("idle", nil)
	return nil
}
