// Package server is kiln's HTTP API: a thin adapter that decodes
// requests, authenticates them, applies rate limits and body limits, calls
// the service, and encodes answers and errors (application/problem+json,
// from one table). The routes are in client/doc.go and the OpenAPI
// document.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/jupyter"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/server/openapi"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

// Config is the HTTP side's policy; zero fields take DefaultConfig's.
type Config struct {
	RatePerSecond float64 // requests per second per API key, and per user, sustained
	RateBurst     int     // requests per API key, and per user, at once
	// AuthFailuresPerMinute and AuthFailureBurst limit failed
	// authentications per client address (the TCP peer: behind a proxy,
	// the proxy's).
	AuthFailuresPerMinute float64
	AuthFailureBurst      int
	// BodyGrace and BodyMinRate bound the time to read a request body:
	// after BodyGrace, it must have come at BodyMinRate bytes a second.
	BodyGrace      time.Duration
	BodyMinRate    int64
	MaxJSONBytes   int64 // a JSON request body
	MaxRunBytes    int64 // a one-shot run's body (its files ride in it)
	MaxUploadBytes int64 // one upload (also bounded by the workspace's size)
	// MaxSpoolBytesPerUser and MaxSpoolBytes bound the archive uploads
	// being received at once (spooled to a temporary file), per user and
	// in total.
	MaxSpoolBytesPerUser int64
	MaxSpoolBytes        int64
}

// DefaultConfig is the HTTP policy on the embedded defaults.
func DefaultConfig() Config {
	return Config{RatePerSecond: 50, RateBurst: 100, AuthFailuresPerMinute: 30, AuthFailureBurst: 10,
		BodyGrace: 30 * time.Second, BodyMinRate: 4 * kiln.KiB,
		MaxJSONBytes: 4 * kiln.MiB, MaxRunBytes: 96 * kiln.MiB, MaxUploadBytes: kiln.GiB,
		MaxSpoolBytesPerUser: kiln.GiB, MaxSpoolBytes: 4 * kiln.GiB}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.RatePerSecond <= 0 {
		c.RatePerSecond = d.RatePerSecond
	}
	if c.RateBurst <= 0 {
		c.RateBurst = d.RateBurst
	}
	if c.AuthFailuresPerMinute <= 0 {
		c.AuthFailuresPerMinute = d.AuthFailuresPerMinute
	}
	if c.AuthFailureBurst <= 0 {
		c.AuthFailureBurst = d.AuthFailureBurst
	}
	if c.BodyGrace <= 0 {
		c.BodyGrace = d.BodyGrace
	}
	if c.BodyMinRate <= 0 {
		c.BodyMinRate = d.BodyMinRate
	}
	if c.MaxJSONBytes <= 0 {
		c.MaxJSONBytes = d.MaxJSONBytes
	}
	if c.MaxRunBytes <= 0 {
		c.MaxRunBytes = d.MaxRunBytes
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = d.MaxUploadBytes
	}
	if c.MaxSpoolBytesPerUser <= 0 {
		c.MaxSpoolBytesPerUser = d.MaxSpoolBytesPerUser
	}
	if c.MaxSpoolBytes <= 0 {
		c.MaxSpoolBytes = d.MaxSpoolBytes
	}
	return c
}

// Server serves the API of one service.
type Server struct {
	svc    *service.Service
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	limits *rateLimits
	fails  authFailures

	errSlowBody *httpError
	spool       *spoolBudget
	routes      []string
	// UI, when set, serves everything outside /v1 and /metrics (the web
	// notebook).
	UI http.Handler

	ui uiSessions // the web notebook's sign-ins (cookie.go)

	langOnce sync.Once // languages are detected once: each takes a runtime start
	langList []client.Language
}

// New returns the API of svc.
func New(svc *service.Service, cfg Config, log *slog.Logger) *Server {
	cfg = cfg.withDefaults()
	s := &Server{svc: svc, cfg: cfg, log: log, mux: http.NewServeMux(), limits: newRateLimits(cfg.RatePerSecond, cfg.RateBurst),
		fails: newAuthFailures(cfg.AuthFailuresPerMinute, cfg.AuthFailureBurst), errSlowBody: slowBodyError(cfg.BodyGrace, cfg.BodyMinRate),
		spool: newSpoolBudget(cfg.MaxSpoolBytesPerUser, cfg.MaxSpoolBytes)}
	// Replicas on one PostgreSQL share the request rate limits.
	if shared, ok := svc.Config().Replicas.(SharedRate); ok {
		s.limits.shared = shared
	}
	s.register()
	return s
}

// call is what a handler knows about its request once authenticated.
type call struct {
	user kiln.User
	key  store.APIKey
}

type handler func(w http.ResponseWriter, r *http.Request, c *call) error

// Routes are the patterns served, for the OpenAPI test.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

func (s *Server) register() {
	s.public("GET /v1/health/live", s.live)
	s.public("GET /v1/health/ready", s.ready)
	s.public("GET /v1/openapi.json", serveOpenAPI)
	s.handle("GET /metrics", s.metrics)
	s.handle("GET /v1/languages", s.languages)
	s.handle("GET /v1/environments", s.listEnvironments)               // environments.go
	s.handle("POST /v1/environments/{name}/build", s.buildEnvironment) // admin
	s.handle("POST /v1/run", s.run)
	s.handle("POST /v1/batches", s.createBatch) // batches.go
	s.handle("GET /v1/batches/{id}", s.getBatch)
	s.handle("GET /v1/batches/{id}/items", s.batchItems)
	s.handle("POST /v1/sessions", s.createSession)
	s.handle("GET /v1/sessions", s.listSessions)
	s.handle("GET /v1/sessions/{id}", s.getSession)
	s.handle("DELETE /v1/sessions/{id}", s.deleteSession)
	s.handle("PATCH /v1/sessions/{id}", s.updateSession) // session_update.go
	s.handle("POST /v1/sessions/{id}/interrupt", s.interrupt)
	s.handle("POST /v1/sessions/{id}/restart", s.restart)
	s.handle("PUT /v1/sessions/{id}/network", s.setNetwork)        // network.go
	s.handle("POST /v1/sessions/{id}/packages", s.installPackages) // packages.go
	s.handle("POST /v1/sessions/{id}/executions", s.exec)
	s.handle("GET /v1/sessions/{id}/executions", s.history)
	s.handle("GET /v1/sessions/{id}/ws", s.websocket)
	s.handle("GET /v1/sessions/{id}/terminal", s.terminal)     // terminal.go
	s.handle("GET /v1/sessions/{id}/events", s.sessionEvents)  // shares.go
	s.handle("GET /v1/sessions/{id}/export", s.exportNotebook) // export.go
	s.handle("POST /v1/sessions/{id}/complete", s.complete)    // editor.go
	s.handle("POST /v1/sessions/{id}/format", s.format)
	s.handle("GET /v1/sessions/{id}/git/status", s.gitStatus) // git.go
	s.handle("POST /v1/sessions/{id}/git/init", s.gitInit)
	s.handle("GET /v1/sessions/{id}/git/diff", s.gitDiff)
	s.handle("POST /v1/sessions/{id}/git/stage", s.gitStage)
	s.handle("POST /v1/sessions/{id}/git/unstage", s.gitUnstage)
	s.handle("POST /v1/sessions/{id}/git/commit", s.gitCommit)
	s.handle("GET /v1/sessions/{id}/git/log", s.gitLog)
	s.handle("POST /v1/sessions/{id}/git/restore", s.gitRestore)
	s.handle("POST /v1/sessions/{id}/git/bundle", s.gitFromBundle)
	s.handle("GET /v1/sessions/{id}/shares", s.listShares)
	s.handle("PUT /v1/sessions/{id}/shares/{user_id}", s.putShare)
	s.handle("DELETE /v1/sessions/{id}/shares/{user_id}", s.deleteShare)
	s.handle("GET /v1/executions/{id}", s.execution)
	s.handle("GET /v1/sessions/{id}/files", s.getFile)
	s.handle("GET /v1/sessions/{id}/files/{path...}", s.getFile)
	s.handle("PUT /v1/sessions/{id}/files/{path...}", s.putFile)
	s.handle("POST /v1/sessions/{id}/files/{path...}", s.postFiles)
	s.handle("DELETE /v1/sessions/{id}/files/{path...}", s.deleteFile)
	s.handle("POST /v1/sessions/{id}/mkdir", s.mkdir)
	s.handle("POST /v1/sessions/{id}/move", s.move)
	s.handle("POST /v1/users", s.createUser)
	s.handle("GET /v1/users", s.users)
	s.handle("GET /v1/users/{id}", s.user)
	s.handle("GET /v1/users/{id}/usage", s.usage)
	s.handle("POST /v1/users/{id}/keys", s.createKey)
	s.handle("GET /v1/users/{id}/keys", s.keys)
	s.handle("DELETE /v1/users/{id}/keys/{key}", s.revokeKey)
	s.handle("GET /v1/audit", s.audit)
	s.handle("GET /v1/tools", s.listTools)
	s.handle("POST /v1/tools/call", s.callTool)
	// MCP over streamable HTTP, authenticated in mcpHandler (tools.go).
	s.mux.Handle("/mcp", s.mcpHandler())
	// The Jupyter kernel gateway (jupyter.go), authenticated there.
	gw := s.jupyterGateway()
	for _, p := range jupyter.Prefixes {
		s.mux.Handle(p, gw)
	}
	s.mux.Handle("/api", gw)
	s.mux.HandleFunc("GET /{$}", s.serveUI) // the web notebook (ui.go)
	s.mux.HandleFunc("GET /assets/", s.serveUI)
	s.mux.HandleFunc("GET /ui/frame.html", serveFrame)
	s.mux.HandleFunc("POST /ui/signin", s.signIn)
	s.mux.HandleFunc("POST /ui/signout", s.signOut)
	s.mux.HandleFunc("/v1/", s.noRoute)
	s.mux.HandleFunc("/metrics", s.noRoute) // another method than GET
}

// noRoute answers what no route of the API takes: 405 with Allow when the
// path has routes for other methods, else 404, both as problems.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, r, s.log, &httpError{http.StatusMethodNotAllowed, codeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", trunc(r.Method, 20), trunc(r.URL.Path, 200), strings.Join(allow, ", "))})
		return
	}
	writeError(w, r, s.log, kiln.Errorf(kiln.NotFound, "no such API route: %s %s (see /v1/openapi.json)", r.Method, trunc(r.URL.Path, 200)))
}

// allowed lists the methods that have a route for r's path, for a 405:
// the catch-all above would otherwise answer a wrong method with 404.
func (s *Server) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/v1/" && pattern != "/metrics" {
			allow = append(allow, m)
		}
	}
	return allow
}

// handle serves an authenticated, rate-limited route.
func (s *Server) handle(pattern string, h handler) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		noteRoute(w, r)
		c, err := s.authenticate(r)
		if err == nil {
			noteUser(w, c.user.ID)
			err = checkScope(r, c.key)
		}
		if err == nil {
			err = s.limits.allow(c.user.ID, c.key.ID)
			if err != nil {
				s.svc.Metrics().Rejected("rate_limit")
			}
		}
		if err == nil {
			err = h(w, r, c)
		}
		if err != nil {
			writeError(w, r, s.log, namedNotFound(r, s.storeOutage(r, err)))
		}
	})
}

// namedNotFound gives the store's bare "not found" the name of what the
// route looked for, so that a user knows which id was wrong. Another
// user's record reads the same as a missing one.
func namedNotFound(r *http.Request, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	id := trunc(r.PathValue("id"), 100)
	switch p := r.Pattern; {
	case strings.Contains(p, "/v1/users/{id}/keys/{key}"):
		return kiln.Wrap(kiln.NotFound, err, "no key %q of user %q (or it is already revoked)", trunc(r.PathValue("key"), 100), id)
	case strings.Contains(p, "/v1/users/{id}"):
		return kiln.Wrap(kiln.NotFound, err, "no user %q", id)
	case strings.Contains(p, "/v1/sessions/{id}"):
		return kiln.Wrap(kiln.NotFound, err, "no session %q", id)
	case strings.Contains(p, "/v1/executions/{id}"):
		return kiln.Wrap(kiln.NotFound, err, "no execution %q", id)
	}
	return err
}

// public serves a route that needs no key.
func (s *Server) public(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		noteRoute(w, r)
		if err := h(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// authenticate finds the caller by its key. A client address that has
// failed too often is refused first, without looking at its key.
func (s *Server) authenticate(r *http.Request) (*call, error) {
	auth := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(auth, " ")
	if auth == "" { // the web notebook's session cookie (cookie.go)
		var err error
		if key, ok, err = s.cookieKey(r); err != nil {
			return nil, err
		}
		scheme = "Bearer"
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, kiln.Errorf(kiln.Unauthenticated, "send an API key as \"Authorization: Bearer KEY\"")
	}
	addr := clientAddr(r)
	if err := s.fails.check(addr); err != nil {
		s.svc.Metrics().Rejected("auth_failures")
		return nil, err
	}
	u, k, err := s.svc.Authenticate(r.Context(), strings.TrimSpace(key))
	if err != nil {
		if kiln.KindOf(err) == kiln.Unauthenticated {
			s.fails.failed(addr)
		}
		return nil, err
	}
	return &call{user: u, key: k}, nil
}

// checkScope refuses a scoped key outside its scope.
func checkScope(r *http.Request, k store.APIKey) error {
	if k.Scope == store.ScopeMetrics && r.Pattern != "GET /metrics" {
		return kiln.Errorf(kiln.Forbidden, "this API key has scope %q: it may only read GET /metrics", k.Scope)
	}
	return nil
}

// clientAddr is the peer's IP address, without the port. A forwarded
// header is not trusted: anyone can send one.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// ServeHTTP gives every request an id, a panic guard, security headers,
// metrics and a log line, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := rand.Text()[:16]
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	rec.Header().Set("X-Request-Id", id)
	rec.Header().Set("X-Content-Type-Options", "nosniff")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("handler panic", "request_id", id, "panic", v)
			if !rec.wrote {
				writeError(rec, r, s.log, kiln.Errorf(kiln.Internal, "internal error"))
			}
		}
		route := rec.route
		if route == "" {
			route = "other"
		}
		d := time.Since(start)
		s.svc.Metrics().HTTP(route, rec.status, d)
		s.accessLog(r, rec, route, d)
	}()
	s.boundBody(w, r)
	if err := cleanURLPath(r.URL.Path); err != nil {
		writeError(rec, r, s.log, err)
		return
	}
	if s.UI != nil && !strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != "/metrics" && r.URL.Path != "/mcp" && !jupyter.Owns(r.URL.Path) {
		s.UI.ServeHTTP(rec, r)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// recorder remembers the status for metrics and logs; it passes on
// Flush (SSE) and Unwrap (WebSocket hijacking via ResponseController).
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	route  string // the mux pattern that served the request
	user   string // the authenticated user's id
}

// Access log attribute keys.
const (
	logRequestID = "request_id"
	logMethod    = "method"
	logRoute     = "route"
	logStatus    = "status"
	logDuration  = "duration_ms"
	logUser      = "user"
)

// accessLog writes one line per request at info level (health checks at
// debug, as a load balancer asks every few seconds). The route is the
// pattern, never the URL, which can carry file names.
func (s *Server) accessLog(r *http.Request, rec *recorder, route string, d time.Duration) {
	level := slog.LevelInfo
	if strings.HasPrefix(route, "GET /v1/health/") {
		level = slog.LevelDebug
	}
	s.log.LogAttrs(r.Context(), level, "request", slog.String(logRequestID, requestID(r)), slog.String(logMethod, r.Method),
		slog.String(logRoute, route), slog.Int(logStatus, rec.status), slog.Float64(logDuration, float64(d.Microseconds())/1000),
		slog.String(logUser, rec.user))
}

// noteUser tells ServeHTTP's recorder who the caller is, for the log.
func noteUser(w http.ResponseWriter, id string) {
	if rec, ok := w.(*recorder); ok {
		rec.user = id
	}
}

// noteRoute tells ServeHTTP's recorder which pattern matched, so that the
// mux is not asked a second time for metrics.
func noteRoute(w http.ResponseWriter, r *http.Request) {
	if rec, ok := w.(*recorder); ok {
		rec.route = r.Pattern
	}
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	r.wrote = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// cleanURLPath refuses an API path with a ".", ".." or empty segment.
// Go's mux would answer those with a redirect to the cleaned path, and a
// client that follows it sends its body (an upload, a delete) to another
// route than the one it named.
func cleanURLPath(p string) error {
	if !strings.HasPrefix(p, "/v1/") {
		return nil
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return kiln.Errorf(kiln.Invalid, "the URL path %q has a %q segment; name a file by its path inside the workspace, without . or .. segments", trunc(p, 200), seg)
		case seg == "" && i < len(segs)-1: // a trailing slash is fine
			return kiln.Errorf(kiln.Invalid, "the URL path %q has an empty segment (//); a file's path is relative to the workspace", trunc(p, 200))
		}
	}
	return nil
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapi.JSON())
	return err
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
