package native

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Read-only mounts of project code (Spec.Mounts). The source is resolved
// on the host before the sandbox starts, and the sandbox's boot opens the
// resolved path again refusing every symlink (mountProject in package
// boot), so what is bound is the directory that was checked. Inside the
// mount, a symlink is resolved by the sandbox's processes in the sandbox's
// own root: a link to /etc/shadow or to ../../.. shows what the sandbox
// already sees, never the host's file.

// ResolveMount resolves a host directory to mount. With roots (the
// directories an administrator allowed), source must lie under one of
// them: it is resolved beneath that root, following a symlink only while
// it stays inside the root, so a source that is, or passes through, a
// symlink out of the root is refused. Without roots (the local CLI, whose
// caller owns the host), any directory is resolved. The result is the
// directory's real path.
func ResolveMount(roots []string, source string) (string, error) {
	if source == "" || strings.ContainsAny(source, "\x00\n") {
		return "", kiln.Errorf(kiln.Invalid, "the mount source %q is not a path", source)
	}
	abs, err := filepath.Abs(source)
	if err != nil {
		return "", kiln.Wrap(kiln.Invalid, err, "the mount source %s cannot be used", source)
	}
	if len(roots) == 0 {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return "", kiln.Wrap(kiln.Invalid, err, "the mount source %s cannot be used: %v", source, errors.Unwrap(err))
		}
		return real, checkDir(real, source)
	}
	for _, root := range roots {
		rel, err := filepath.Rel(filepath.Clean(root), abs)
		if err != nil || !(rel == "." || filepath.IsLocal(rel)) {
			continue
		}
		real, err := beneath(root, rel)
		if err != nil {
			return "", kiln.Wrap(kiln.Invalid, err, "the mount source %s cannot be used: %v (only folders inside %s, without a symlink that leads out of it, can be mounted)", source, err, root)
		}
		return real, checkDir(real, source)
	}
	return "", kiln.Errorf(kiln.Forbidden, "%s is not under a folder the administrator allowed for mounts (%s)", source, strings.Join(roots, ", "))
}

// beneath opens rel inside root, with no symlink or ".." that leaves it,
// and returns the real path of what it opened.
func beneath(root, rel string) (string, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open the allowed root: %w", err)
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.EXDEV) {
			return "", errors.New("it leads out of the allowed folder")
		}
		return "", err
	}
	defer unix.Close(fd)
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
}

func checkDir(real, source string) error {
	fi, err := os.Stat(real)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "the mount source %s cannot be used", source)
	}
	if !fi.IsDir() {
		return kiln.Errorf(kiln.Invalid, "the mount source %s is not a directory", source)
	}
	return nil
}

// checkMounts validates a spec's mounts and fills in default targets.
func checkMounts(ms []Mount) ([]protocol.Mount, error) {
	// One more than a user may ask for: the service's environments
	// directory, which every sandbox of a server with environments has.
	if len(ms) > MaxMounts+1 {
		return nil, kiln.Errorf(kiln.TooLarge, "%d mounts given; the limit is %d", len(ms), MaxMounts)
	}
	var out []protocol.Mount
	for _, m := range ms {
		if !filepath.IsAbs(m.Source) || strings.ContainsAny(m.Source, "\x00\n") {
			return nil, kiln.Errorf(kiln.Invalid, "the mount source %q is not an absolute path", m.Source)
		}
		if real, err := filepath.EvalSymlinks(m.Source); err != nil || real != filepath.Clean(m.Source) {
			return nil, kiln.Errorf(kiln.Invalid, "the mount source %s is not a real path (resolve it with ResolveMount)", m.Source)
		}
		t := m.Target
		if t == "" {
			t = "/mnt/" + filepath.Base(m.Source)
		}
		if err := checkTarget(t); err != nil {
			return nil, err
		}
		for _, o := range out {
			if o.Target == t || strings.HasPrefix(t, o.Target+"/") || strings.HasPrefix(o.Target, t+"/") {
				return nil, kiln.Errorf(kiln.Invalid, "the mount targets %s and %s overlap", o.Target, t)
			}
		}
		out = append(out, protocol.Mount{Source: filepath.Clean(m.Source), Target: t})
	}
	return out, nil
}

// checkTarget accepts /project and folders below /mnt or /project: places
// that hold nothing of the sandbox's own.
func checkTarget(t string) error {
	ok := path.IsAbs(t) && path.Clean(t) == t && len(t) <= 256 && !strings.ContainsAny(t, "\x00\n\\") &&
		(t == "/project" || strings.HasPrefix(t, "/project/") || strings.HasPrefix(t, "/mnt/"))
	if !ok {
		return kiln.Errorf(kiln.Invalid, "the mount target %q must be /project or a clean absolute path below /mnt or /project", t)
	}
	return nil
}
