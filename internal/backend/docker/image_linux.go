package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The environment image holds the kiln binary, a small /etc and the
// mount points; /usr is not copied but bind-mounted read-only from the
// host when a container starts (as the native backend does): the image
// stays a few tens of MB instead of gigabytes, every runtime the host
// has is there, and its tag changes only when the binary or /etc does.
// The cost: the image runs only on the host that built it.

// Repository is the image repository of environment images.
const Repository = "kiln-env"

// UID is the user of every process in a container: a host uid that no
// account uses (there is no user namespace under Docker by default, so
// uid 1000 would be a real host user), below the native backend's slots.
const UID = 1_199_000_000

// etcEntries are host /etc entries copied into the image, the same list
// as the native backend's read-only binds: none holds secrets.
var etcEntries = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "mime.types", "protocols", "services", "fonts",
	"python3", "python3.11", "matplotlibrc", "bash.bashrc", "profile", "inputrc",
	"java-17-openjdk", "xdg", "magic", "php",
}

// epoch is every entry's mtime, so that the same inputs make the same
// tarball and so the same tag.
var epoch = time.Unix(0, 0)

// BuildImage makes the environment image whose entrypoint is the binary
// at agentPath (kiln itself, or a test binary) and imports it into the
// engine, unless an image with the same inputs is there already. It
// returns the image's reference and whether it was built now.
func (b *Backend) BuildImage(ctx context.Context, agentPath string) (ref string, built bool, err error) {
	layer, err := imageTar(agentPath, "/etc")
	if err != nil {
		return "", false, err
	}
	sum := sha256.Sum256(layer)
	ref = Repository + ":" + hex.EncodeToString(sum[:])[:20]
	if _, err := b.cli.ImageInspect(ctx, ref); err == nil {
		return ref, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", false, kiln.Wrap(kiln.SandboxError, err, "cannot inspect the environment image")
	}
	rc, err := b.cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`ENTRYPOINT ["/kiln"]`, `LABEL ` + labelBackend + `=docker`}})
	if err != nil {
		return "", false, kiln.Wrap(kiln.SandboxError, err, "cannot import the image into the engine")
	}
	defer rc.Close()
	msg, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	if bytes.Contains(msg, []byte(`"error"`)) {
		return "", false, kiln.Errorf(kiln.SandboxError, "the engine refused the image: %s", bytes.TrimSpace(msg))
	}
	return ref, true, nil
}

// EnvironmentLayer is the environment image's layer as a tar (the agent
// binary at agentPath, the host's /etc entries, the mount points), for a
// backend that builds its own image around it: the Kubernetes backend's
// adds the runtimes under it.
func EnvironmentLayer(agentPath string) ([]byte, error) { return imageTar(agentPath, "/etc") }

// imageTar is the image's only layer: deterministic (sorted, fixed
// times and owners) so that its hash names its inputs.
func imageTar(agentPath, hostEtc string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: epoch})
	}
	link := func(name, target string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "cannot read the agent binary")
	}
	steps := []func() error{
		// Readable: gVisor's loader reads the binary as the container's
		// user (0711 fails with "failed to load /kiln: permission
		// denied"). The agent makes itself undumpable as PID 1, before any
		// user code exists (protectPID1).
		func() error { return file("kiln", 0o755, agent) },
		func() error { return dir("usr", 0o755, 0) }, // the mount point of the host's /usr
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("workspace", 0o700, UID) },
		func() error { return dir("etc", 0o755, 0) },
	}
	// The merged-/usr links, as on the host.
	for _, l := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if target, err := os.Readlink(filepath.Join("/", l)); err == nil && strings.HasPrefix(target, "usr/") {
			steps = append(steps, func() error { return link(l, target) })
		}
	}
	for _, f := range etcFiles() {
		steps = append(steps, func() error { return file("etc/"+f[0], 0o644, []byte(f[1])) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, e := range etcEntries {
		if err := copyTree(tw, hostEtc, e, seen); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func etcFiles() [][2]string {
	return [][2]string{
		{"passwd", "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n" +
			fmt.Sprintf("user:x:%d:%d:kiln user:/workspace:/bin/bash\n", UID, UID) +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{"group", fmt.Sprintf("root:x:0:\nuser:x:%d:\nnogroup:x:65534:\n", UID)},
		{"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"},
	}
}

// copyTree adds hostEtc/rel (a file, link or directory, walked without
// following links) under etc/; a missing entry is skipped. Parent
// directories of a nested entry (ssl/certs) are added first.
func copyTree(tw *tar.Writer, hostEtc, rel string, seen map[string]bool) error {
	root := filepath.Join(hostEtc, rel)
	if _, err := os.Lstat(root); err != nil {
		return nil
	}
	if parent := filepath.Dir(rel); parent != "." && !seen[parent] {
		seen[parent] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/" + parent + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skipped, as on native
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		name := "etc/" + strings.TrimPrefix(p, hostEtc+"/")
		h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: epoch}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				continue
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return nil
}
