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
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// wsPath checks a workspace path from a URL or a body. The agent resolves
// it again inside the sandbox (os.Root), so this is the first of two
// walls: it gives a clear error instead of a confusing one.
func wsPath(p string, rootOK bool) (string, error) {
	p = strings.TrimSuffix(p, "/")
	if p == "" || p == "." {
		if rootOK {
			return "", nil
		}
		return "", kiln.Errorf(kiln.Invalid, "a path inside the workspace is required, not the workspace itself")
	}
	if strings.ContainsRune(p, '\\') {
		return "", kiln.Errorf(kiln.Invalid, "path %q contains a backslash; use / between names", trunc(p, 200))
	}
	if err := engine.ValidatePath(p); err != nil {
		return "", err
	}
	return path.Clean(p), nil
}

// fileErr turns an agent's file error into a user's; r names the session.
func fileErr(r *http.Request, p string, err error) error {
	if p == "" {
		p = "."
	}
	q := trunc(p, 200)
	switch agentclient.ErrorCode(err) {
	case protocol.ErrNotFound:
		return kiln.Errorf(kiln.NotFound, "no file or directory %q in session %q", q, trunc(r.PathValue("id"), 100))
	case protocol.ErrExists:
		return kiln.Errorf(kiln.Conflict, "%q exists; ask to overwrite it", q)
	case protocol.ErrInvalid:
		return kiln.Wrap(kiln.Invalid, err, "invalid path %q", q)
	case protocol.ErrTooLarge:
		return kiln.Wrap(kiln.TooLarge, err, "%q is too large", q)
	case protocol.ErrNotDir:
		return kiln.Errorf(kiln.Invalid, "%q (or a directory on its way) is not a directory", q)
	case protocol.ErrIsDir:
		return kiln.Errorf(kiln.Invalid, "%q is a directory", q)
	case protocol.ErrNotEmpty:
		return kiln.Errorf(kiln.Conflict, "directory %q is not empty; delete with recursive=true", q)
	case protocol.ErrNoSpace:
		return kiln.Errorf(kiln.TooLarge, "the workspace is full (its size or file count limit); delete files or make a session with a larger workspace")
	}
	var ke *kiln.Error
	if errors.As(err, &ke) {
		return err
	}
	return kiln.Wrap(kiln.SandboxError, err, "file operation on %q failed", q)
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := wsPath(r.PathValue("path"), true)
	if err != nil {
		return err
	}
	stat, err := boolParam(r, "stat", false)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	fi := protocol.FileInfo{Name: ".", Type: "dir"}
	if p != "" {
		if fi, err = ag.Stat(r.Context(), p); err != nil {
			return fileErr(r, p, err)
		}
	}
	dir := path.Dir(p)
	switch {
	case stat:
		return writeJSON(w, http.StatusOK, fromFileInfo(dir, fi))
	case fi.Type == "dir" && r.URL.Query().Get("archive") != "":
		return s.download(w, r, ag, p)
	case fi.Type == "dir":
		entries, err := ag.List(r.Context(), p)
		if err != nil {
			return fileErr(r, p, err)
		}
		out := client.FileList{Path: p, Entries: make([]client.FileInfo, 0, len(entries))}
		for _, e := range entries {
			out.Entries = append(out.Entries, fromFileInfo(p, e))
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
	if _, err := ag.ReadTo(r.Context(), p, w, fi.Size); err != nil {
		return fileErr(r, p, err) // once bytes went out, the client sees a short body
	}
	return nil
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
	p, err := wsPath(r.PathValue("path"), false)
	if err != nil {
		return err
	}
	overwrite, err := boolParam(r, "overwrite", true)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	_, statErr := ag.Stat(r.Context(), p)
	existed := statErr == nil
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	if overwrite {
		_, err = ag.WriteFrom(r.Context(), p, body, 0o644)
	} else {
		_, err = ag.CreateFrom(r.Context(), p, body, 0o644)
	}
	s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.write", map[string]any{"path": p}, err)
	if err != nil {
		return s.uploadErr(r, p, err)
	}
	fi, err := ag.Stat(r.Context(), p)
	if err != nil {
		return fileErr(r, p, err)
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	return writeJSON(w, status, fromFileInfo(path.Dir(p), fi))
}

func (s *Server) uploadErr(r *http.Request, p string, err error) error {
	var big *http.MaxBytesError
	var he *httpError
	if errors.As(err, &he) { // the body came too slowly
		return he
	}
	if errors.As(err, &big) {
		return kiln.Errorf(kiln.TooLarge, "the upload is over the %s allowed", kiln.FormatBytes(s.cfg.MaxUploadBytes))
	}
	return fileErr(r, p, err)
}

// postFiles takes multipart files or an archive into a directory.
func (s *Server) postFiles(w http.ResponseWriter, r *http.Request, c *call) error {
	dir, err := wsPath(r.PathValue("path"), true)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	var written []string
	if x := r.URL.Query().Get("extract"); x != "" {
		sp := s.spool.reader(c.user.ID, body)
		written, err = s.extract(r, ag, dir, x, sp)
		sp.release()
		if isSpoolFull(err) {
			s.svc.Metrics().Rejected("spool")
		}
		s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.extract", map[string]any{"dir": dir, "files": len(written)}, err)
		if err != nil {
			return s.uploadErr(r, dir, err)
		}
	} else if written, err = s.multipart(r, c, ag, dir, body); err != nil {
		s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.write", map[string]any{"dir": dir, "files": len(written)}, err)
		return err
	}
	out := client.Uploaded{Files: make([]client.FileInfo, 0, len(written))}
	for _, p := range written {
		if fi, err := ag.Stat(r.Context(), p); err == nil {
			out.Files = append(out.Files, fromFileInfo(path.Dir(p), fi))
		}
	}
	return writeJSON(w, http.StatusCreated, out)
}

// multipart writes every file part into dir, streaming each.
func (s *Server) multipart(r *http.Request, c *call, ag *agentclient.Client, dir string, body io.Reader) ([]string, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, &httpError{http.StatusUnsupportedMediaType, codeUnsupportedMedia,
			"upload files as multipart/form-data, or an archive with ?extract=zip|tar"}
	}
	mr := multipart.NewReader(body, params["boundary"])
	var written []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return written, s.uploadErr(r, dir, kiln.Wrap(kiln.Invalid, err, "the multipart body is malformed"))
		}
		name := part.FileName()
		if name == "" {
			part.Close()
			continue // a plain form field
		}
		p, err := wsPath(path.Join(dir, name), false)
		if err != nil {
			return written, err
		}
		if _, err := ag.WriteFrom(r.Context(), p, part, 0o644); err != nil {
			return written, s.uploadErr(r, p, err)
		}
		written = append(written, p)
		s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.write", map[string]any{"path": p}, nil)
	}
	if len(written) == 0 {
		return nil, kiln.Errorf(kiln.Invalid, "the multipart body has no file parts (parts with a filename)")
	}
	return written, nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := wsPath(r.PathValue("path"), false)
	if err != nil {
		return err
	}
	recursive, err := boolParam(r, "recursive", false)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	err = ag.Delete(r.Context(), p, recursive)
	s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.delete", map[string]any{"path": p, "recursive": recursive}, err)
	if err != nil {
		return fileErr(r, p, err)
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
	p, err := wsPath(req.Path, false)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	err = ag.Mkdir(r.Context(), p)
	s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.mkdir", map[string]any{"path": p}, err)
	if err != nil {
		return fileErr(r, p, err)
	}
	fi, err := ag.Stat(r.Context(), p)
	if err != nil {
		return fileErr(r, p, err)
	}
	return writeJSON(w, http.StatusCreated, fromFileInfo(path.Dir(p), fi))
}

func (s *Server) move(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.MoveRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	from, err := wsPath(req.From, false)
	if err != nil {
		return err
	}
	to, err := wsPath(req.To, false)
	if err != nil {
		return err
	}
	ag, release, err := s.svc.Workspace(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer release()
	err = ag.Move(r.Context(), from, to, req.Overwrite)
	s.svc.FileChanged(r.Context(), c.user, r.PathValue("id"), "file.move", map[string]any{"from": from, "to": to}, err)
	if err != nil {
		if agentclient.ErrorCode(err) == protocol.ErrExists {
			return fileErr(r, to, err)
		}
		return fileErr(r, from, err)
	}
	fi, err := ag.Stat(r.Context(), to)
	if err != nil {
		return fileErr(r, to, err)
	}
	return writeJSON(w, http.StatusOK, fromFileInfo(path.Dir(to), fi))
}
