package server

import (
	"net/http"
	"path"

	"github.com/kiln-dev/kiln/internal/archive"
	"github.com/kiln-dev/kiln/internal/service"
)

func (s *Server) download(w http.ResponseWriter, r *http.Request, f *service.Files, dir string) error {
	format, err := archive.ParseFormat(r.URL.Query().Get("archive"))
	if err != nil {
		return err
	}
	name := path.Base(dir)
	if dir == "" {
		name = "workspace"
	}
	ext, ct := ".zip", "application/zip"
	switch format {
	case archive.Tar:
		ext, ct = ".tar", "application/x-tar"
	case archive.TarGz:
		ext, ct = ".tar.gz", "application/gzip"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", disposition(name+ext))
	return f.Pack(r.Context(), dir, format, w)
}
