// Package jupyter is kiln as a Jupyter kernel gateway: the kernel REST
// API of Jupyter Server (kernelspecs, kernels, sessions) and the kernel's
// channels WebSocket, which speaks the Jupyter messaging protocol 5.3 in
// its JSON form. Every kernel is a kiln session of the authenticated
// user, so it has the same limits, queue, audit and history as any other;
// every rule stays in the service, this package only translates.
package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

// ProtocolVersion is the Jupyter messaging protocol spoken on the
// channels.
const ProtocolVersion = "5.3"

// Metadata keys of a kiln session that is a Jupyter kernel.
const (
	MetaKernelSpec = "jupyter.kernelspec"
)

// Config is what the HTTP server lends the gateway.
type Config struct {
	// Authenticate finds the caller of a request from its key, sent as
	// Jupyter clients send it ("Authorization: token KEY", or ?token= on
	// a WebSocket), with the server's rate limits and failure limits.
	Authenticate func(r *http.Request) (Caller, error)
	// Status is the HTTP status of an error (the server's one table).
	Status func(error) int
	Log    *slog.Logger
}

// Gateway serves the Jupyter routes of one service.
type Gateway struct {
	svc *service.Service
	cfg Config
	mux *http.ServeMux

	mu       sync.Mutex
	kernels  map[string]*kernel   // by kiln session id
	sessions map[string]*jsession // Jupyter sessions, by their id

	langOnce sync.Once
	specs    []kernelSpec
}

// New returns the gateway over svc.
func New(svc *service.Service, cfg Config) *Gateway {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{svc: svc, cfg: cfg, mux: http.NewServeMux(), kernels: map[string]*kernel{}, sessions: map[string]*jsession{}}
	g.register()
	return g
}

// Prefixes are the URL path prefixes the gateway serves; the server sends
// everything under them here.
var Prefixes = []string{"/api/", "/kernelspecs/"}

// Owns reports whether path is one of the gateway's.
func Owns(path string) bool {
	if path == "/api" {
		return true
	}
	for _, p := range Prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Caller is an authenticated request's user, and Allow, which charges
// one more request to the rate limits of the user and the key (for
// messages on a socket, which the handshake alone does not count).
type Caller struct {
	User  kiln.User
	Allow func() error
}

type handler func(w http.ResponseWriter, r *http.Request, u kiln.User) error

type ctxKey struct{}

// allowOf is the rate limit of the request's caller.
func allowOf(ctx context.Context) func() error {
	if f, ok := ctx.Value(ctxKey{}).(func() error); ok && f != nil {
		return f
	}
	return func() error { return nil }
}

func (g *Gateway) register() {
	g.public("GET /api", g.apiVersion)
	g.public("GET /api/{$}", g.apiVersion)
	g.handle("GET /api/kernelspecs", g.listSpecs)
	g.handle("GET /api/kernelspecs/{name}", g.getSpec)
	g.handle("GET /kernelspecs/{name}/{path...}", g.specResource)
	g.handle("GET /api/kernels", g.listKernels)
	g.handle("POST /api/kernels", g.startKernel)
	g.handle("GET /api/kernels/{id}", g.getKernel)
	g.handle("DELETE /api/kernels/{id}", g.deleteKernel)
	g.handle("POST /api/kernels/{id}/interrupt", g.interruptKernel)
	g.handle("POST /api/kernels/{id}/restart", g.restartKernel)
	g.handle("GET /api/kernels/{id}/channels", g.channels)
	g.handle("GET /api/sessions", g.listSessions)
	g.handle("POST /api/sessions", g.createSession)
	g.handle("GET /api/sessions/{id}", g.getSession)
	g.handle("PATCH /api/sessions/{id}", g.patchSession)
	g.handle("DELETE /api/sessions/{id}", g.deleteSession)
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.fail(w, r, kiln.Errorf(kiln.NotFound, "no such Jupyter route: %s %s; kiln serves /api/kernelspecs, /api/kernels and /api/sessions", r.Method, trunc(r.URL.Path, 200)))
	})
}

// ServeHTTP routes a Jupyter request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }

func (g *Gateway) handle(pattern string, h handler) {
	g.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, err := g.cfg.Authenticate(r)
		if err == nil {
			err = h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c.Allow)), c.User)
		}
		if err != nil {
			g.fail(w, r, err)
		}
	})
}

func (g *Gateway) public(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
	g.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			g.fail(w, r, err)
		}
	})
}

// fail answers as Jupyter Server does: a JSON object with a message and a
// reason. Internal failures are logged and not shown.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	if g.cfg.Status != nil {
		status = g.cfg.Status(err)
	}
	msg := kiln.Message(err)
	if status >= 500 {
		g.cfg.Log.Error("jupyter request failed", "method", r.Method, "path", trunc(r.URL.Path, 200), "err", err)
		if kind := kiln.KindOf(err); kind == kiln.Internal || kind == "" {
			msg = "internal error; the server's log has the details"
		}
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `token realm="kiln"`)
	}
	writeJSON(w, status, map[string]any{"message": msg, "reason": string(kiln.KindOf(err))})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// maxBody bounds a REST request's JSON body.
const maxBody = 1 << 20

// decode reads a JSON request body into v; an empty body leaves v as is.
func decode(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return kiln.Errorf(kiln.Invalid, "the body must be a JSON object: %s", trunc(err.Error(), 200))
	}
	return nil
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, kiln.Errorf(kiln.TooLarge, "the body is over %s", kiln.FormatBytes(maxBody))
		}
		return nil, kiln.Wrap(kiln.Invalid, err, "could not read the body")
	}
	return b, nil
}

func (g *Gateway) apiVersion(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"version": "kiln"})
}

// kernelID is the Jupyter id of a kiln session: the same 128 bits in the
// UUID form that Jupyter front ends expect (the notebook server routes
// only that form).
func kernelID(sessionID string) string {
	if len(sessionID) != 32 || !isHex(sessionID) {
		return sessionID
	}
	s := sessionID
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// sessionOf is the kiln session id of a kernel id.
func sessionOf(id string) (string, error) {
	s := strings.ToLower(strings.ReplaceAll(id, "-", ""))
	if len(s) != 32 || !isHex(s) {
		return "", kiln.Errorf(kiln.NotFound, "no kernel %q: a kernel id is a UUID", trunc(id, 100))
	}
	return s, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// newUUID is a random UUID (version 4), for message and session ids.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return kernelID(hex.EncodeToString(b))
}

func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// activeKernels lists u's active sessions that are Jupyter kernels.
func (g *Gateway) activeKernels(ctx context.Context, u kiln.User) ([]kiln.Session, error) {
	var all []kiln.Session
	page := store.Page{Limit: 100}
	for {
		ss, next, err := g.svc.ListSessions(ctx, u, store.SessionFilter{Status: kiln.SessionActive}, page)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			if s.Metadata[MetaKernelSpec] != "" {
				all = append(all, s)
			}
		}
		if next == "" || len(all) >= 1000 {
			return all, nil
		}
		page.Cursor = next
	}
}
