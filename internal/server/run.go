package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// run is a one-shot run: files in, the result and the files it wrote out.
func (s *Server) run(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.RunRequest
	if err := decode(w, r, s.cfg.MaxRunBytes, &req); err != nil {
		return err
	}
	run := service.RunRequest{Language: req.Language, Code: req.Code, Args: req.Args, Stdin: []byte(req.Stdin), Limits: toLimits(req.Limits), Name: req.FileName, BuildOptions: req.BuildOptions, Test: req.Test, Environment: req.Environment,
		Packages: req.Packages, PackageManager: req.PackageManager}
	if req.Network != nil {
		run.Network = *req.Network
	}
	for _, f := range req.Files {
		run.Files = append(run.Files, service.File{Path: f.Path, Data: f.Content, Mode: f.Mode})
	}
	runFn := s.svc.Run
	if req.Cache {
		runFn = s.svc.RunCached
	}
	res, err := runFn(r.Context(), c.user, run)
	if err != nil {
		return err
	}
	out := client.RunResult{Result: res.Result, Files: make([]client.File, 0, len(res.Files)), Cached: res.Cached}
	if res.Packages != nil {
		p := fromPackages(*res.Packages)
		out.Packages = &p
	}
	for _, f := range res.Files {
		out.Files = append(out.Files, client.File{Path: f.Path, Content: f.Data})
	}
	return writeJSON(w, http.StatusOK, out)
}
