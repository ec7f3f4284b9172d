package server

import (
	"context"
	"net/http"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/service"
)

func (s *Server) live(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Ready(r.Context()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// MetricsHandler serves GET /metrics with no key, for a listener of its
// own (kiln serve --metrics-addr): Prometheus then needs no API key, and
// the address can be one that only the monitoring network reaches.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.svc.Metrics().Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, kiln.Errorf(kiln.NotFound, "no route %s %s: this listener serves only GET /metrics", r.Method, trunc(r.URL.Path, 200)))
	})
	return mux
}

// metrics serves Prometheus metrics to admins.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, c *call) error {
	if !c.user.Admin {
		return errAdminOnly
	}
	s.svc.Metrics().Handler().ServeHTTP(w, r)
	return nil
}

func (s *Server) languages(w http.ResponseWriter, r *http.Request, c *call) error {
	s.langOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		py, node, err := service.DefaultPackages(ctx)
		if err != nil {
			s.log.Warn("list the default packages", "err", err)
		}
		for _, info := range lang.Detect(ctx) {
			l := client.Language{Name: info.Name, Aliases: info.Aliases, Kind: string(info.Kind), Version: info.Version,
				Available: info.Found, Problem: info.Problem}
			switch service.ManagerFor(info.Name) {
			case service.ManagerPip:
				l.Packages = packageVersions(py)
			case service.ManagerNPM:
				l.Packages = packageVersions(node)
			}
			s.langList = append(s.langList, l)
		}
	})
	return writeJSON(w, http.StatusOK, s.langList)
}

var errAdminOnly = kiln.Errorf(kiln.Forbidden, "only an admin may read the metrics")
