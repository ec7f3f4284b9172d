package programs

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// BuildArea is where builds live inside a sandbox: on its private /tmp,
// outside the workspace, so that a build never writes, lists, archives or
// charges to the quota anything of the user's. An Execer whose programs see
// another place (a runner on the host, in tests) says where with a method
// BuildArea() string.
//
//	<area>/src/<hash>/<name>   a cell's code, under the name its compiler needs
//	<area>/build/<key>/        a build's products; "ok" marks a complete one
//	<area>/go/                 Go's build cache and GOPATH
const BuildArea = "/tmp/.kiln"

// The file operations of an Execer reach only the workspace, so the build
// area is handled by small programs, through the same execs as a build.
const (
	tarBin = "/usr/bin/tar"
	catBin = "/usr/bin/cat"
	lsBin  = "/usr/bin/ls"
	rmBin  = "/usr/bin/rm"
	cpBin  = "/usr/bin/cp"
)

// areaExec runs a helper of the build area with small fixed limits. ok is
// false when it ran and failed.
func areaExec(ctx context.Context, ex Execer, argv []string, stdin []byte, stdout io.Writer) (bool, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	info, err := ex.Exec(ctx, protocol.Exec{Argv: argv, Stdin: stdin, TimeoutMs: 60_000, OutputBytes: maxCompileLog + 1<<16}, stdout, io.Discard)
	if err != nil {
		return false, sandboxErr(ctx, err, "%s in the build area", path.Base(argv[0]))
	}
	return info.Code == 0 && info.Signal == "" && !info.TimedOut, nil
}

// areaWrite writes files (absolute paths; a name ending in "/" is a
// directory) in one exec of tar, which makes the directories above them.
func areaWrite(ctx context.Context, ex Execer, files map[string][]byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		h := &tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ok, err := areaExec(ctx, ex, []string{tarBin, "-x", "-f", "-", "-C", "/", "-m", "--no-same-owner"}, buf.Bytes(), nil)
	if err == nil && !ok {
		return kiln.Errorf(kiln.Invalid, "cannot write the build in the sandbox's /tmp: is /tmp full? (its size is the tmp limit)")
	}
	return err
}

// areaRead returns a file of the build area; ok is false when it is missing.
func areaRead(ctx context.Context, ex Execer, name string) (data []byte, ok bool, err error) {
	out := &boundedBuffer{max: maxCompileLog}
	ok, err = areaExec(ctx, ex, []string{catBin, "--", name}, nil, out)
	return []byte(out.String()), ok, err
}

// areaRemove deletes paths of the build area, best effort.
func areaRemove(ctx context.Context, ex Execer, paths ...string) {
	areaExec(ctx, ex, append([]string{rmBin, "-rf", "--"}, paths...), nil, nil)
}

// renamer passes a program's output on with the build area's path of its
// source replaced by the source's name, as the user knows it: an
// interpreter's traceback, a Go panic then name main.rb or sol.go as on the
// host. The end of a write that could begin the path is held back until
// the next write or Flush.
type renamer struct {
	w        io.Writer
	old, new []byte
	held     []byte
}

func (r *renamer) Write(p []byte) (int, error) {
	buf := bytes.ReplaceAll(append(r.held, p...), r.old, r.new)
	keep := 0
	for k := min(len(r.old)-1, len(buf)); k > 0; k-- {
		if bytes.HasPrefix(r.old, buf[len(buf)-k:]) {
			keep = k
			break
		}
	}
	r.held = append(r.held[:0], buf[len(buf)-keep:]...)
	if out := buf[:len(buf)-keep]; len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Flush writes what was held back.
func (r *renamer) Flush() {
	if len(r.held) > 0 {
		r.w.Write(r.held)
		r.held = r.held[:0]
	}
}
