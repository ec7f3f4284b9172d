package agent

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// Bounds on file operations. The workspace's own size limit bounds the total.
const (
	maxListItems = 10000 // entries in one listing
	maxPathBytes = 4096
)

// fileOp performs one file operation inside the workspace. Paths resolve
// through an os.Root, so neither "..", absolute names nor symlinks planted
// by user code can reach anything outside the workspace.
func (a *Agent) fileOp(id uint64, op protocol.FileOp) {
	a.files.Lock()
	defer a.files.Unlock()
	name, msg := cleanPath(op.Path)
	if msg != "" {
		a.fail(id, protocol.ErrInvalid, msg)
		return
	}
	root, err := os.OpenRoot(a.cfg.Workspace)
	if err != nil {
		a.fail(id, protocol.ErrInternal, "open workspace: "+err.Error())
		return
	}
	defer root.Close()
	res, err := a.doFileOp(id, root, name, op)
	if err != nil {
		label := op.Path
		if op.Op == protocol.FileMove {
			label += " -> " + op.To
		}
		a.fail(id, errorCode(err), describe(label, err))
		return
	}
	a.out.Send(id, protocol.TOK, res)
}

// writeForExec writes one of an exec request's files.
func (a *Agent) writeForExec(op protocol.FileOp) error {
	if op.Op != protocol.FileWrite {
		return errInvalid("only writes may come with an exec")
	}
	name, msg := cleanPath(op.Path)
	if msg != "" {
		return errInvalid(msg)
	}
	a.files.Lock()
	defer a.files.Unlock()
	root, err := os.OpenRoot(a.cfg.Workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = a.writeFile(root, name, op)
	return err
}

func (a *Agent) doFileOp(id uint64, root *os.Root, name string, op protocol.FileOp) (protocol.FileResult, error) {
	switch op.Op {
	case protocol.FileWrite:
		return a.writeFile(root, name, op)
	case protocol.FileRead:
		return protocol.FileResult{}, a.readFile(id, root, name, op)
	case protocol.FileList:
		return listDir(root, name)
	case protocol.FileWalk:
		return protocol.FileResult{Entries: a.snapshot()}, nil
	case protocol.FileStat:
		fi, err := root.Lstat(name)
		if err != nil {
			return protocol.FileResult{}, err
		}
		info := toInfo(name, fi)
		return protocol.FileResult{Info: &info}, nil
	case protocol.FileDelete:
		if name == "." {
			return protocol.FileResult{}, errInvalid("the workspace itself cannot be deleted")
		}
		if op.Recursive {
			return protocol.FileResult{}, root.RemoveAll(name)
		}
		return protocol.FileResult{}, root.Remove(name)
	case protocol.FileMkdir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return protocol.FileResult{}, err
		}
		return protocol.FileResult{}, a.chownNew(root, name)
	case protocol.FileMove:
		return protocol.FileResult{}, a.move(root, name, op)
	}
	return protocol.FileResult{}, errInvalid("unknown file operation " + op.Op)
}

func (a *Agent) writeFile(root *os.Root, name string, op protocol.FileOp) (protocol.FileResult, error) {
	if name == "." {
		return protocol.FileResult{}, errInvalid("a file needs a name")
	}
	if err := a.makeParents(root, name); err != nil {
		return protocol.FileResult{}, err
	}
	mode := fs.FileMode(op.Mode) & 0o777
	if mode == 0 {
		mode = 0o644
	}
	// O_NONBLOCK and no O_TRUNC until the type is known: user code may
	// have put a FIFO or a device-like file here, and opening a FIFO
	// blocks until someone opens the other end.
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if op.Append {
		flags |= os.O_APPEND
	}
	if op.Exclusive {
		if op.Append {
			return protocol.FileResult{}, errInvalid("a write cannot both append and be exclusive")
		}
		// O_EXCL also refuses a planted symlink, dangling or not.
		flags |= os.O_EXCL
	}
	f, err := root.OpenFile(name, flags, mode)
	if err != nil {
		return protocol.FileResult{}, err
	}
	if err := regularOrClose(f); err != nil {
		return protocol.FileResult{}, err
	}
	if !op.Append {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return protocol.FileResult{}, err
		}
	}
	n, err := f.Write(op.Data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return protocol.FileResult{}, err
	}
	uid := a.cfg.UserUID
	if err := root.Lchown(name, uid, uid); err != nil {
		return protocol.FileResult{}, err
	}
	return protocol.FileResult{Written: int64(n)}, nil
}

// move renames an entry inside the workspace. Both names resolve through
// root, so neither can lead out of it; a symlink as the source is renamed
// itself, never followed. The checks before the rename give clear
// messages; the kernel still refuses what they miss (a directory moved
// into itself by a path through a symlink: EINVAL).
//
// The target is looked up first: a directory is never replaced, anything
// else only with Overwrite. User code running at
// the same moment could create it in between and then lose it to the
// rename; that stays inside the workspace, and the service's own requests
// are serialised by a.files.
func (a *Agent) move(root *os.Root, from string, op protocol.FileOp) error {
	to, msg := cleanPath(op.To)
	switch {
	case msg != "":
		return errInvalid("target " + msg)
	case from == ".":
		return errInvalid("the workspace itself cannot be moved")
	case to == ".":
		return errInvalid("the workspace itself cannot be a move's target")
	case to == from:
		return errInvalid("source and target are the same")
	case strings.HasPrefix(to, from+"/"):
		return errInvalid("a directory cannot be moved into itself")
	}
	if _, err := root.Lstat(from); err != nil {
		return err
	}
	switch fi, err := root.Lstat(to); {
	case err == nil && fi.IsDir():
		// os.Root.Rename never replaces a directory, and neither does a
		// move: a whole tree is not lost to a flag.
		return &codedError{protocol.ErrIsDir, "target is a directory, which a move never replaces"}
	case err == nil && !op.Overwrite:
		return errExists("target exists")
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := a.makeParents(root, to); err != nil {
		return err
	}
	return root.Rename(from, to)
}

// makeParents creates the directories above name and gives them to the
// user.
func (a *Agent) makeParents(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	err := root.MkdirAll(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		// MkdirAll found something that is not a directory where the last
		// parent should be; "exists" would mislead.
		return &codedError{protocol.ErrNotDir, path.Base(dir) + " is not a directory"}
	}
	if err != nil {
		return err
	}
	return a.chownNew(root, dir)
}

// chownNew gives dir and its parents inside the workspace to the user, so
// that user code can write in directories the service created.
func (a *Agent) chownNew(root *os.Root, dir string) error {
	uid := a.cfg.UserUID
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if err := root.Lchown(d, uid, uid); err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) readFile(id uint64, root *os.Root, name string, op protocol.FileOp) error {
	limit := op.Limit
	if limit <= 0 || limit > protocol.MaxRead {
		limit = protocol.MaxRead
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	if err := regularOrClose(f); err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if op.Offset < 0 {
		return errInvalid("offset may not be negative")
	}
	r := io.LimitReader(io.NewSectionReader(f, op.Offset, fi.Size()-op.Offset), limit)
	buf := make([]byte, protocol.ChunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := a.out.Send(id, protocol.TData, protocol.Data{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func listDir(root *os.Root, name string) (protocol.FileResult, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		return protocol.FileResult{}, &codedError{protocol.ErrNotDir, "not a directory"}
	}
	if err != nil {
		return protocol.FileResult{}, err
	}
	defer f.Close()
	ents, err := f.ReadDir(maxListItems + 1)
	if err != nil && err != io.EOF {
		return protocol.FileResult{}, err
	}
	if len(ents) > maxListItems {
		return protocol.FileResult{}, errTooLarge("directory has more than 10000 entries")
	}
	res := protocol.FileResult{Entries: make([]protocol.FileInfo, 0, len(ents))}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		res.Entries = append(res.Entries, toInfo(e.Name(), fi))
	}
	return res, nil
}

// regularOrClose refuses, and closes, anything but a regular file.
func regularOrClose(f *os.File) error {
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errInvalid("not a regular file")
	}
	if err != nil {
		f.Close()
	}
	return err
}

func toInfo(name string, fi fs.FileInfo) protocol.FileInfo {
	t := "other"
	switch {
	case fi.Mode().IsRegular():
		t = "file"
	case fi.IsDir():
		t = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	}
	return protocol.FileInfo{
		Name: path.Base(name), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Type: t, ModTime: fi.ModTime().UnixNano(),
	}
}

// cleanPath turns a client path into a name relative to the workspace. It
// refuses rather than repairs anything odd.
func cleanPath(p string) (string, string) {
	switch {
	case len(p) > maxPathBytes:
		return "", "path is longer than 4096 bytes"
	case strings.IndexByte(p, 0) >= 0:
		return "", "path contains a NUL byte"
	}
	p = strings.TrimPrefix(p, "/workspace")
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return ".", ""
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", "path leaves the workspace"
	}
	return c, ""
}

type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }
func errInvalid(msg string) error   { return &codedError{protocol.ErrInvalid, msg} }
func errTooLarge(msg string) error  { return &codedError{protocol.ErrTooLarge, msg} }
func errExists(msg string) error    { return &codedError{protocol.ErrExists, msg} }

// errnoCodes classes the errnos a file operation can meet, so that the
// service can answer "not found" or "conflict" or "full" rather than
// "internal". The table is the contract; protocol lists the codes.
var errnoCodes = map[syscall.Errno]string{
	syscall.ENOENT:       protocol.ErrNotFound,
	syscall.EEXIST:       protocol.ErrExists,
	syscall.ENOTEMPTY:    protocol.ErrNotEmpty,
	syscall.ENOTDIR:      protocol.ErrNotDir,
	syscall.EISDIR:       protocol.ErrIsDir,
	syscall.ENOSPC:       protocol.ErrNoSpace,
	syscall.EDQUOT:       protocol.ErrNoSpace,
	syscall.EFBIG:        protocol.ErrTooLarge,
	syscall.ENAMETOOLONG: protocol.ErrInvalid,
	syscall.ELOOP:        protocol.ErrInvalid,
	syscall.EINVAL:       protocol.ErrInvalid, // rename of a directory into itself, by a path the string check missed
}

func errorCode(err error) string {
	var ce *codedError
	var errno syscall.Errno
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &errno) && errnoCodes[errno] != "":
		return errnoCodes[errno]
	case errors.Is(err, fs.ErrNotExist):
		return protocol.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		return protocol.ErrExists
	case strings.Contains(err.Error(), "path escapes"):
		// os.Root's error for a name that leads out; it has no exported value.
		return protocol.ErrInvalid
	}
	return protocol.ErrInternal
}

// describe makes a message that names the client's path, never a path of
// the sandbox that the client did not give.
func describe(p string, err error) string {
	var ce *codedError
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &ce):
		return p + ": " + ce.msg
	case errors.As(err, &pe):
		return p + ": " + pe.Err.Error()
	case errors.As(err, &le):
		return p + ": " + le.Err.Error()
	}
	return p + ": " + err.Error()
}
