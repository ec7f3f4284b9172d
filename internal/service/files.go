package service

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/archive"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
	"github.com/kiln-dev/kiln/internal/store"
)

// Workspace gives access to u's session's workspace (or a shared one's,
// as a collaborator). Every file operation
// goes through the session's agent, inside the sandbox, so a symlink that
// user code planted can only point inside that same sandbox. The session
// counts as busy (not idle) until release is called. Front ends use Files,
// which holds the rules (paths, errors, audit); this is for tests.
func (s *Service) Workspace(ctx context.Context, u kiln.User, sessionID string) (_ *agentclient.Client, release func(), _ error) {
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		return nil, nil, err
	}
	return s.workspace(ctx, a.l)
}

// workspace reaches the session's agent and holds the session busy.
func (s *Service) workspace(ctx context.Context, l *live) (_ *agentclient.Client, release func(), _ error) {
	release = l.hold()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		release()
		return nil, nil, err
	}
	return sess.Agent(), release, nil
}

// Hold keeps u's session (or one shared with u as a collaborator) from
// being idle until release is called, for a stream that runs cells and is
// open without a cell running. A viewer runs nothing, so it may not hold
// the owner's session open either. Each cell is checked again.
func (s *Service) Hold(ctx context.Context, u kiln.User, sessionID string) (release func(), _ error) {
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		return nil, err
	}
	return a.l.hold(), nil
}

// Files is one user's access to one session's workspace, for the length
// of one request. It owns every file rule, so that each front end (HTTP,
// MCP, notebook) gets the same: path checks, one mapping from the agent's
// error codes to kiln's kinds, and an audit entry for every change. Close
// it when done; until then the session is busy, not idle.
type Files struct {
	svc     *Service
	user    kiln.User
	session string

	ag      *agentclient.Client // nil until the first operation
	release func()
	access  access // set by the first operation: the owner, charged, and u's role
}

// Files is u's access to the workspace of u's session sessionID. The
// session is looked up on the first operation, after that operation's
// paths are checked, so a bad path is reported as such.
func (s *Service) Files(u kiln.User, sessionID string) *Files {
	return &Files{svc: s, user: u, session: sessionID}
}

// open reaches the session's agent once per Files, and checks each time
// that the user's role allows need: reads need a viewer, changes a
// collaborator (shares.go).
func (f *Files) open(ctx context.Context, need kiln.Role) error {
	if f.ag == nil {
		a, err := f.svc.liveAs(ctx, f.user, f.session, kiln.RoleViewer)
		if err != nil {
			return err
		}
		if !a.role.Allows(need) {
			return forbidden(a.role, need)
		}
		ag, release, err := f.svc.workspace(ctx, a.l)
		if err != nil {
			return err
		}
		f.ag, f.release, f.access = ag, release, a
	}
	if !f.access.role.Allows(need) {
		return forbidden(f.access.role, need)
	}
	return nil
}

// Close lets the session go idle again.
func (f *Files) Close() {
	if f.release != nil {
		f.release()
		f.ag, f.release = nil, nil
	}
}

// CleanPath checks a workspace path from a client. The agent resolves it
// again inside the sandbox (os.Root), so this is the first of two walls:
// it gives a clear error instead of a confusing one. rootOK allows the
// workspace itself, returned as "".
func CleanPath(p string, rootOK bool) (string, error) {
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

// Stat describes p; "" is the workspace itself.
func (f *Files) Stat(ctx context.Context, p string) (kiln.FileInfo, error) {
	p, err := CleanPath(p, true)
	if err != nil {
		return kiln.FileInfo{}, err
	}
	if err := f.open(ctx, kiln.RoleViewer); err != nil {
		return kiln.FileInfo{}, err
	}
	if p == "" {
		return kiln.FileInfo{Path: ".", Name: ".", Type: "dir"}, nil
	}
	fi, err := f.ag.Stat(ctx, p)
	if err != nil {
		return kiln.FileInfo{}, f.err(p, err)
	}
	return fileInfo(path.Dir(p), fi), nil
}

// List lists the directory p; "" is the workspace itself.
func (f *Files) List(ctx context.Context, p string) ([]kiln.FileInfo, error) {
	p, err := CleanPath(p, true)
	if err != nil {
		return nil, err
	}
	if err := f.open(ctx, kiln.RoleViewer); err != nil {
		return nil, err
	}
	entries, err := f.ag.List(ctx, p)
	if err != nil {
		return nil, f.err(p, err)
	}
	out := make([]kiln.FileInfo, 0, len(entries))
	for _, e := range entries {
		out = append(out, fileInfo(p, e))
	}
	return out, nil
}

// Read copies the regular file p into w. Once bytes went to w, an error
// leaves w holding a short copy.
func (f *Files) Read(ctx context.Context, p string, w io.Writer) error {
	fi, err := f.Stat(ctx, p)
	if err != nil {
		return err
	}
	if fi.Type != "file" {
		return kiln.Errorf(kiln.Invalid, "%q is a %s, not a file; only regular files can be downloaded", trunc(fi.Path, 200), fi.Type)
	}
	if _, err := f.ag.ReadTo(ctx, fi.Path, w, fi.Size); err != nil {
		return f.err(fi.Path, err)
	}
	return nil
}

// Write writes what r gives as the file p: replacing it when overwrite,
// refusing when it exists otherwise. created says whether p is new. An
// error from r is returned as it is, for the caller to explain.
func (f *Files) Write(ctx context.Context, p string, r io.Reader, overwrite bool) (_ kiln.FileInfo, created bool, _ error) {
	p, err := CleanPath(p, false)
	if err != nil {
		return kiln.FileInfo{}, false, err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return kiln.FileInfo{}, false, err
	}
	_, statErr := f.ag.Stat(ctx, p)
	src := &source{r: r}
	if overwrite {
		_, err = f.ag.WriteFrom(ctx, p, src, 0o644)
	} else {
		_, err = f.ag.CreateFrom(ctx, p, src, 0o644)
	}
	err = f.srcErr(src, p, err)
	f.audit(ctx, "file.write", map[string]any{"path": p}, err)
	if err != nil {
		return kiln.FileInfo{}, false, err
	}
	fi, err := f.Stat(ctx, p)
	return fi, statErr != nil, err
}

// Part is one file of an upload: its name under the upload's directory
// and its bytes.
type Part struct {
	Name string
	Body io.Reader
}

// Upload writes each part that next gives into dir, replacing files of
// the same names, until next says there are no more (ok false). An error
// from next or from a part's body is returned as it is.
func (f *Files) Upload(ctx context.Context, dir string, next func() (_ Part, ok bool, _ error)) ([]kiln.FileInfo, error) {
	dir, err := CleanPath(dir, true)
	if err != nil {
		return nil, err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return nil, err
	}
	var written []string
	err = f.upload(ctx, dir, next, &written)
	if err != nil {
		f.audit(ctx, "file.write", map[string]any{"dir": dir, "files": len(written)}, err)
		return nil, err
	}
	if len(written) == 0 {
		return nil, kiln.Errorf(kiln.Invalid, "the multipart body has no file parts (parts with a filename)")
	}
	return f.stats(ctx, written), nil
}

func (f *Files) upload(ctx context.Context, dir string, next func() (Part, bool, error), written *[]string) error {
	for {
		part, ok, err := next()
		if err != nil || !ok {
			return err
		}
		p, err := CleanPath(path.Join(dir, part.Name), false)
		if err != nil {
			return err
		}
		src := &source{r: part.Body}
		_, err = f.ag.WriteFrom(ctx, p, src, 0o644)
		if err = f.srcErr(src, p, err); err != nil {
			return err
		}
		*written = append(*written, p)
		f.audit(ctx, "file.write", map[string]any{"path": p}, nil)
	}
}

// Extract unpacks an archive of the given format ("zip", "tar", "tar.gz")
// into dir. maxBytes bounds the archive (0: archive's own default).
func (f *Files) Extract(ctx context.Context, dir, format string, r io.Reader, maxBytes int64) ([]kiln.FileInfo, error) {
	dir, err := CleanPath(dir, true)
	if err != nil {
		return nil, err
	}
	fm, err := archive.ParseFormat(format)
	if err != nil {
		return nil, err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return nil, err
	}
	src := &source{r: r}
	written, err := archive.Unpack(ctx, f.ag, dir, fm, src, archive.UnpackLimits{MaxArchiveBytes: maxBytes})
	err = f.srcErr(src, dir, err)
	f.audit(ctx, "file.extract", map[string]any{"dir": dir, "files": len(written)}, err)
	if err != nil {
		return nil, err
	}
	return f.stats(ctx, written), nil
}

// Pack writes the directory dir into w as an archive of format (already
// parsed with archive.ParseFormat).
func (f *Files) Pack(ctx context.Context, dir string, format archive.Format, w io.Writer) error {
	dir, err := CleanPath(dir, true)
	if err != nil {
		return err
	}
	if err := f.open(ctx, kiln.RoleViewer); err != nil {
		return err
	}
	return archive.Pack(ctx, f.ag, dir, format, w, archive.PackLimits{})
}

// Delete deletes p; a directory that is not empty only when recursive.
func (f *Files) Delete(ctx context.Context, p string, recursive bool) error {
	p, err := CleanPath(p, false)
	if err != nil {
		return err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return err
	}
	err = f.ag.Delete(ctx, p, recursive)
	if err != nil {
		err = f.err(p, err)
	}
	f.audit(ctx, "file.delete", map[string]any{"path": p, "recursive": recursive}, err)
	return err
}

// Mkdir makes the directory p and its parents.
func (f *Files) Mkdir(ctx context.Context, p string) (kiln.FileInfo, error) {
	p, err := CleanPath(p, false)
	if err != nil {
		return kiln.FileInfo{}, err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return kiln.FileInfo{}, err
	}
	err = f.ag.Mkdir(ctx, p)
	if err != nil {
		err = f.err(p, err)
	}
	f.audit(ctx, "file.mkdir", map[string]any{"path": p}, err)
	if err != nil {
		return kiln.FileInfo{}, err
	}
	return f.Stat(ctx, p)
}

// Move renames from to to, replacing an existing to only when overwrite.
func (f *Files) Move(ctx context.Context, from, to string, overwrite bool) (kiln.FileInfo, error) {
	from, err := CleanPath(from, false)
	if err != nil {
		return kiln.FileInfo{}, err
	}
	if to, err = CleanPath(to, false); err != nil {
		return kiln.FileInfo{}, err
	}
	if err := f.open(ctx, kiln.RoleCollaborator); err != nil {
		return kiln.FileInfo{}, err
	}
	err = f.ag.Move(ctx, from, to, overwrite)
	if err != nil {
		named := from
		if agentclient.ErrorCode(err) == protocol.ErrExists {
			named = to
		}
		err = f.err(named, err)
	}
	f.audit(ctx, "file.move", map[string]any{"from": from, "to": to}, err)
	if err != nil {
		return kiln.FileInfo{}, err
	}
	return f.Stat(ctx, to)
}

// stats describes the files just written; one that is gone already is
// left out.
func (f *Files) stats(ctx context.Context, paths []string) []kiln.FileInfo {
	out := make([]kiln.FileInfo, 0, len(paths))
	for _, p := range paths {
		if fi, err := f.ag.Stat(ctx, p); err == nil {
			out = append(out, fileInfo(path.Dir(p), fi))
		}
	}
	return out
}

// audit records a change to the workspace: action is file.write,
// file.delete, file.mkdir, file.move or file.extract.
func (f *Files) audit(ctx context.Context, action string, detail map[string]any, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(kiln.KindOf(err))
	}
	f.svc.audit(ctx, store.AuditEntry{UserID: f.access.owner.ID, Actor: f.user.ID, Action: action, SessionID: f.session, Outcome: outcome, Detail: jsonDetail(detail)})
}

// source remembers the error of the caller's reader, so that it goes back
// to the caller as it is (the caller knows what a body too large or too
// slow means) instead of as a failed file operation.
type source struct {
	r   io.Reader
	err error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

func (f *Files) srcErr(src *source, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case src.err != nil:
		return src.err
	}
	return f.err(p, err)
}

// err is the one mapping from the agent's file error codes to kiln's
// error kinds, with a message that names p.
func (f *Files) err(p string, err error) error {
	if p == "" {
		p = "."
	}
	q := trunc(p, 200)
	switch agentclient.ErrorCode(err) {
	case protocol.ErrNotFound:
		return kiln.Errorf(kiln.NotFound, "no file or directory %q in session %q", q, trunc(f.session, 100))
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

func fileInfo(dir string, fi protocol.FileInfo) kiln.FileInfo {
	p := fi.Name
	if dir != "" && dir != "." {
		p = dir + "/" + fi.Name
	}
	return kiln.FileInfo{Path: p, Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: fi.Mode, ModTime: time.Unix(0, fi.ModTime).UTC()}
}
