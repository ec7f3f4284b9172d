package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// installPackages installs packages into a session: the answer is the
// result, or with "Accept: text/event-stream" a stream of the install's
// output (stdout, stderr) ending with done (its packages) or error.
func (s *Server) installPackages(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.PackageRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	preq := service.PackageRequest{Manager: req.Manager, Packages: req.Packages, Requirements: req.Requirements}
	id := r.PathValue("id")
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		res, err := s.svc.InstallPackages(r.Context(), c.user, id, preq, service.PackageEvents{})
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, fromPackages(res))
	}
	st := newSSE(w)
	defer st.close()
	send := eventSink(func(e client.Event) { st.send(e) })
	res, err := s.svc.InstallPackages(r.Context(), c.user, id, preq, service.PackageEvents{
		Queued: func(p service.Place) {
			send(client.Event{Type: client.EventQueued, Position: p.Position, Reason: p.Reason})
		},
		Started: func() { send(client.Event{Type: client.EventStarted}) },
		Stdout:  send.text(client.EventStdout),
		Stderr:  send.text(client.EventStderr),
	})
	if err != nil {
		if !st.started() {
			return err
		}
		p := problemFor(err)
		st.send(client.Event{Type: client.EventError, Error: &p})
		return nil
	}
	out := fromPackages(res)
	st.send(client.Event{Type: client.EventDone, Packages: &out})
	return nil
}

func fromPackages(res service.PackageResult) client.PackageResult {
	out := client.PackageResult{Manager: res.Manager, Packages: make([]client.InstalledPackage, 0, len(res.Packages)),
		WallMS: float64(res.Wall.Microseconds()) / 1000, Egress: res.Egress}
	for _, p := range res.Packages {
		out.Packages = append(out.Packages, client.InstalledPackage(p))
	}
	return out
}

// cellPackages installs an execute request's packages before its cell,
// with the manager of the cell's language (the session's first when the
// cell names none). Nothing is installed for an empty list.
func (s *Server) cellPackages(ctx context.Context, c *call, sessionID string, req client.ExecRequest, ev service.PackageEvents) error {
	if len(req.Packages) == 0 {
		return nil
	}
	language := req.Language
	if language == "" {
		sess, err := s.svc.Session(ctx, c.user, sessionID)
		if err != nil {
			return err
		}
		if len(sess.Languages) > 0 {
			language = sess.Languages[0]
		}
	}
	m := service.ManagerFor(language)
	if m == "" {
		return kiln.Errorf(kiln.Invalid, "packages can be installed for Python (pip) and JavaScript or TypeScript (npm), not for %q", language)
	}
	_, err := s.svc.InstallPackages(ctx, c.user, sessionID, service.PackageRequest{Manager: m, Packages: req.Packages}, ev)
	return err
}

func packageVersions(list []service.PackageVersion) []client.PackageVersion {
	out := make([]client.PackageVersion, 0, len(list))
	for _, p := range list {
		out = append(out, client.PackageVersion(p))
	}
	return out
}
