package server

import (
	"io"
	"net/http"
	"path"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/archive"
)

func (s *Server) download(w http.ResponseWriter, r *http.Request, ag *agentclient.Client, dir string) error {
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
	return archive.Pack(r.Context(), ag, dir, format, w, archive.PackLimits{})
}

// extract unpacks an uploaded archive into dir.
func (s *Server) extract(r *http.Request, ag *agentclient.Client, dir, format string, body io.Reader) ([]string, error) {
	f, err := archive.ParseFormat(format)
	if err != nil {
		return nil, err
	}
	return archive.Unpack(r.Context(), ag, dir, f, body, archive.UnpackLimits{MaxArchiveBytes: s.cfg.MaxUploadBytes})
}
