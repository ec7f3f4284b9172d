package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// listEnvironments answers the administrator's environments, built or
// not, with what each holds: any user may select one.
func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request, c *call) error {
	list := s.svc.Environments(r.Context())
	out := make([]client.Environment, 0, len(list))
	for _, e := range list {
		out = append(out, fromEnvironment(e))
	}
	return writeJSON(w, http.StatusOK, out)
}

// buildEnvironment builds an environment (admins): 201 when it built
// one, 200 when the layer was there already.
func (s *Server) buildEnvironment(w http.ResponseWriter, r *http.Request, c *call) error {
	env, built, err := s.svc.BuildEnvironment(r.Context(), c.user, r.PathValue("name"), service.PackageEvents{})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if built {
		status = http.StatusCreated
	}
	return writeJSON(w, status, client.EnvironmentBuild{Environment: fromEnvironment(env), Built: built})
}

func fromEnvironment(e service.Environment) client.Environment {
	out := client.Environment{Name: e.Name, Pip: e.Pip, NPM: e.NPM, Built: e.Built, Hash: e.Hash}
	if !e.At.IsZero() {
		at := e.At
		out.BuiltAt = &at
	}
	for _, p := range e.Python {
		out.Python = append(out.Python, client.InstalledPackage(p))
	}
	for _, p := range e.Node {
		out.Node = append(out.Node, client.InstalledPackage(p))
	}
	return out
}
