package server

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, c *call) error {
	stat, err := boolParam(r, "stat", false)
	if err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	fi, err := f.Stat(r.Context(), r.PathValue("path"))
	if err != nil {
		return err
	}
	p := fi.Path
	if p == "." {
		p = "" // the workspace itself
	}
	switch {
	case stat:
		return writeJSON(w, http.StatusOK, fromFileInfo(fi))
	case fi.Type == "dir" && r.URL.Query().Get("archive") != "":
		return s.download(w, r, f, p)
	case fi.Type == "dir":
		entries, err := f.List(r.Context(), p)
		if err != nil {
			return err
		}
		out := client.FileList{Path: p, Entries: make([]client.FileInfo, 0, len(entries))}
		for _, e := range entries {
			out.Entries = append(out.Entries, fromFileInfo(e))
		}
		return writeJSON(w, http.StatusOK, out)
	case fi.Type != "file":
		return kiln.Errorf(kiln.Invalid, "%q is a %s, not a file; only regular files can be downloaded", trunc(p, 200), fi.Type)
	}
	h := w.Header()
	h.Set("Content-Type", contentType(p))
	h.Set("Content-Disposition", disposition(path.Base(p)))
	// User-written HTML or SVG must never run as this origin's page.
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	return f.Read(r.Context(), p, w) // once bytes went out, the client sees a short body
}

// contentType is the type of a file by its extension; unknown types are
// octet-stream so that no browser guesses.
func contentType(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// disposition is an attachment header for a hostile file name: control
// characters go, and non-ASCII names are encoded (RFC 6266 / 2231).
func disposition(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}

// putFile writes the raw body as a file.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request, c *call) error {
	overwrite, err := boolParam(r, "overwrite", true)
	if err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	fi, created, err := f.Write(r.Context(), r.PathValue("path"), body, overwrite)
	if err != nil {
		return s.uploadErr(err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, fromFileInfo(fi))
}

// uploadErr explains an error of the request body; the service returns
// those as they are.
func (s *Server) uploadErr(err error) error {
	var big *http.MaxBytesError
	if errors.As(err, &big) {
		return kiln.Errorf(kiln.TooLarge, "the upload is over the %s allowed", kiln.FormatBytes(s.cfg.MaxUploadBytes))
	}
	return err
}

// postFiles takes multipart files or an archive into a directory.
func (s *Server) postFiles(w http.ResponseWriter, r *http.Request, c *call) error {
	dir, err := service.CleanPath(r.PathValue("path"), true)
	if err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	var written []kiln.FileInfo
	if x := r.URL.Query().Get("extract"); x != "" {
		sp := s.spool.reader(c.user.ID, body)
		written, err = f.Extract(r.Context(), dir, x, sp, s.cfg.MaxUploadBytes)
		sp.release()
		if isSpoolFull(err) {
			s.svc.Metrics().Rejected("spool")
		}
	} else {
		written, err = s.multipart(r, f, dir, body)
	}
	if err != nil {
		return s.uploadErr(err)
	}
	out := client.Uploaded{Files: make([]client.FileInfo, 0, len(written))}
	for _, fi := range written {
		out.Files = append(out.Files, fromFileInfo(fi))
	}
	return writeJSON(w, http.StatusCreated, out)
}

// multipart writes every file part into dir, streaming each.
func (s *Server) multipart(r *http.Request, f *service.Files, dir string, body io.Reader) ([]kiln.FileInfo, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, &httpError{http.StatusUnsupportedMediaType, codeUnsupportedMedia,
			"upload files as multipart/form-data, or an archive with ?extract=zip|tar"}
	}
	mr := multipart.NewReader(body, params["boundary"])
	next := func() (service.Part, bool, error) {
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return service.Part{}, false, nil
			}
			if err != nil {
				return service.Part{}, false, s.uploadErr(kiln.Wrap(kiln.Invalid, err, "the multipart body is malformed"))
			}
			if part.FileName() != "" {
				return service.Part{Name: part.FileName(), Body: part}, true, nil
			}
			part.Close() // a plain form field
		}
	}
	return f.Upload(r.Context(), dir, next)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, c *call) error {
	recursive, err := boolParam(r, "recursive", false)
	if err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	if err := f.Delete(r.Context(), r.PathValue("path"), recursive); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Path string `json:"path"`
	}
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	fi, err := f.Mkdir(r.Context(), req.Path)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, fromFileInfo(fi))
}

func (s *Server) move(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.MoveRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	f := s.svc.Files(c.user, r.PathValue("id"))
	defer f.Close()
	fi, err := f.Move(r.Context(), req.From, req.To, req.Overwrite)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromFileInfo(fi))
}
