package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// The runtimes image is what a sandbox Pod runs: the Docker backend's
// environment layer (the kiln binary, a small /etc, the mount points) on
// top of a copy of the build host's /usr, so that every runtime the host
// has is in the image and no Pod needs a hostPath. It is built without
// any registry and imported into the node's containerd with ctr, as
// scripts/k8s/up imports its own images.
//
// /usr is gigabytes, so it is split into layers (runtimeLayers), each
// named by a fingerprint of its files' metadata (names, sizes, modes,
// mtimes, ctimes, inodes), which a walk computes in seconds. A layer
// whose fingerprint is in the cache file has a known digest and is not
// read again; a layer whose blob containerd already holds is not sent
// again. So building again unchanged does nothing, a new kiln binary
// sends only the top layer, and an apt upgrade of one runtime sends that
// runtime's layer.

// ImageRepository is the runtimes images' repository. Its registry host
// ends in .local, which no node resolves, so nothing is ever pulled
// from it: Pods use it with imagePullPolicy Never.
const ImageRepository = "kiln.local/sandbox"

// runtimeLayers split the copy of /usr: each is a glob under /usr, and
// every directory it matches is a layer of its own; what no pattern
// matches is the last runtime layer. The big, separately upgraded
// runtimes get their own.
var runtimeLayers = []string{
	"lib/*-linux-gnu", "lib/jvm", "lib/python3", "lib/python3.*", "lib/llvm-*", "lib/gcc", "lib/rustlib",
	"local/go", "local/lib", "local/bin", "bin", "share",
}

// runtimeSkip are trees of /usr that no sandbox runs, left out of the
// image: documentation, translations (sandboxes run in C.UTF-8) and big
// host tools (the browser of the web UI's tests, a cloud SDK).
var runtimeSkip = []string{
	"share/doc", "share/man", "share/info", "share/locale", "lib/chromium", "lib/google-cloud-sdk",
}

// ImageConfig says what goes into the runtimes image and where it goes.
type ImageConfig struct {
	Agent      string // the binary that runs in the Pod (kiln, or a test binary), required
	Usr        string // the tree copied as /usr; default "/usr"
	Containerd string // the node's containerd socket, required to import
	Namespace  string // containerd's namespace of the kubelet's images; default "k8s.io"
	Ctr        string // the ctr binary; default "ctr" on PATH
	// Cache is the file of layer fingerprints and digests; default
	// kiln/k8s-layers.json under the user's cache directory. Without it
	// every build reads all of /usr once to learn the layers' digests.
	Cache string
}

func (c *ImageConfig) defaults() {
	if c.Usr == "" {
		c.Usr = "/usr"
	}
	if c.Namespace == "" {
		c.Namespace = "k8s.io"
	}
	if c.Ctr == "" {
		c.Ctr = "ctr"
	}
	if c.Cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			c.Cache = filepath.Join(d, "kiln", "k8s-layers.json")
		}
	}
}

// BuildImage makes the runtimes image and imports it into the node's
// containerd, unless an image of the same layers is there already. It
// returns the image's reference (its tag names its content) and whether
// it was imported now.
func BuildImage(ctx context.Context, cfg ImageConfig) (ref string, built bool, err error) {
	cfg.defaults()
	if cfg.Containerd == "" {
		return "", false, kiln.Errorf(kiln.Invalid, "the runtimes image needs the node's containerd socket to be imported into")
	}
	img, err := planImage(cfg)
	if err != nil {
		return "", false, err
	}
	ctr := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, cfg.Ctr, append([]string{"--address", cfg.Containerd, "-n", cfg.Namespace}, args...)...)
	}
	if img.known() {
		if err := img.describe(); err != nil {
			return "", false, err
		}
		out, err := ctr("images", "ls", "-q", "name=="+img.ref).Output()
		if err != nil {
			return "", false, kiln.Wrap(kiln.SandboxError, exitErr(err), "cannot list the images of containerd at %s", cfg.Containerd)
		}
		if strings.TrimSpace(string(out)) == img.ref {
			return img.ref, false, nil
		}
	}
	out, err := ctr("content", "ls", "-q").Output()
	if err != nil {
		return "", false, kiln.Wrap(kiln.SandboxError, exitErr(err), "cannot list containerd's content")
	}
	have := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		have[d] = true
	}
	cmd := ctr("images", "import", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", false, err
	}
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Start(); err != nil {
		return "", false, kiln.Wrap(kiln.SandboxError, err, "cannot run %s", cfg.Ctr)
	}
	werr := img.writeOCI(in, have)
	in.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return "", false, kiln.Errorf(kiln.SandboxError, "cannot import the runtimes image: %v %v: %s", werr, err, bytes.TrimSpace(msg.Bytes()))
	}
	img.saveCache(cfg.Cache)
	return img.ref, true, nil
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

// image is a planned runtimes image: each layer's size, and its digest
// once known (from the cache, or as it is sent); config, manifest and
// ref once every digest is (describe).
type image struct {
	layers   []*layer // bottom first; the last is the environment layer
	config   []byte
	manifest []byte
	ref      string
}

// layer is one layer: a list of host files, or the bytes of the
// environment layer.
type layer struct {
	root    string        // the host directory names are relative to (/usr's parent)
	entries []entry       // in tar order
	data    []byte        // the environment layer, already made
	fp      string        // the fingerprint of a runtime layer
	digest  digest.Digest // "" until known: from the cache, or once it is sent
	size    int64
}

type entry struct {
	name string // in the layer: usr/...
	fi   fs.FileInfo
	link string // a symlink's target
}

// planImage walks /usr into layers and learns each layer's size, and its
// digest when the cache has its fingerprint. A layer not in the cache is
// not read here: its size comes from its metadata (a tar of zeros), its
// digest from the one read that sends it (writeOCI), so a cold build
// reads /usr once.
func planImage(cfg ImageConfig) (*image, error) {
	if cfg.Agent == "" {
		return nil, kiln.Errorf(kiln.Invalid, "the runtimes image needs the agent binary")
	}
	groups, err := splitUsr(cfg.Usr)
	if err != nil {
		return nil, err
	}
	cache := loadCache(cfg.Cache)
	img := &image{}
	for _, entries := range groups {
		l := &layer{root: filepath.Dir(cfg.Usr), entries: entries}
		l.fp = l.fingerprint()
		if c, ok := cache[l.fp]; ok {
			l.digest, l.size = c.Digest, c.Size
		} else {
			n := &countWriter{w: io.Discard}
			if err := l.writeFrom(n, zeros{}); err != nil {
				return nil, err
			}
			l.size = n.n
		}
		img.layers = append(img.layers, l)
	}
	env, err := docker.EnvironmentLayer(cfg.Agent)
	if err != nil {
		return nil, err
	}
	img.layers = append(img.layers, &layer{data: env, digest: digest.FromBytes(env), size: int64(len(env))})
	return img, nil
}

// known says whether every layer's digest is known, and so the tag.
func (img *image) known() bool {
	for _, l := range img.layers {
		if l.digest == "" {
			return false
		}
	}
	return true
}

// saveCache keeps the runtime layers' digests by fingerprint.
func (img *image) saveCache(path string) {
	m := map[string]cached{}
	for _, l := range img.layers {
		if l.fp != "" && l.digest != "" {
			m[l.fp] = cached{l.digest, l.size}
		}
	}
	saveCache(path, m)
}

// zeros reads as endless zero bytes: a layer's tar made from it has the
// real one's size without reading a file.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// describe makes the config and manifest of the layers, and the
// reference: its tag is the manifest's digest, so it names every byte.
func (img *image) describe() error {
	cfg := ocispec.Image{
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			Entrypoint: []string{"/kiln"},
			WorkingDir: "/workspace",
			Env:        baseEnv(),
			Labels:     map[string]string{labelBackend: "kubernetes"},
		},
		RootFS: ocispec.RootFS{Type: "layers"},
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest}
	for _, l := range img.layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.digest) // uncompressed: the diff ID is the digest
		m.Layers = append(m.Layers, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: l.digest, Size: l.size})
	}
	var err error
	if img.config, err = json.Marshal(cfg); err != nil {
		return err
	}
	m.Config = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(img.config), Size: int64(len(img.config))}
	if img.manifest, err = json.Marshal(m); err != nil {
		return err
	}
	img.ref = ImageRepository + ":" + digest.FromBytes(img.manifest).Encoded()[:20]
	return nil
}

// writeOCI writes the image as an OCI layout tar, leaving out the blobs
// containerd has (have: its digests): ctr import takes them from its
// store. A layer whose digest is not known yet learns it as it is sent;
// the config, manifest and index, which name the digests, come last.
// (containerd's importer names every blob by the digest of its bytes,
// whatever its path in the tar, so a layer sent before its digest is
// known goes under its fingerprint.)
func (img *image) writeOCI(w io.Writer, have map[string]bool) error {
	tw := tar.NewWriter(w)
	blob := func(name string, size int64, write func(io.Writer) error) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "blobs/sha256/" + name, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		return write(tw)
	}
	bytesOf := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	for _, l := range img.layers {
		if l.digest != "" && have[l.digest.String()] {
			continue
		}
		write := l.write
		if l.data != nil {
			write = bytesOf(l.data)
		}
		name := l.fp
		if l.digest != "" {
			name = l.digest.Encoded()
		}
		if err := blob(name, l.size, func(w io.Writer) error { return verify(l, w, write) }); err != nil {
			return fmt.Errorf("layer %s: %w", name[:12], err)
		}
	}
	if err := img.describe(); err != nil {
		return err
	}
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(img.manifest), Size: int64(len(img.manifest)),
		Annotations: map[string]string{"io.containerd.image.name": img.ref, ocispec.AnnotationRefName: strings.TrimPrefix(img.ref, ImageRepository+":")}}
	index, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{md}})
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	steps := []func() error{
		func() error {
			return blob(digest.FromBytes(img.config).Encoded(), int64(len(img.config)), bytesOf(img.config))
		},
		func() error { return blob(md.Digest.Encoded(), md.Size, bytesOf(img.manifest)) },
		func() error { return file(tw, ocispec.ImageLayoutFile, layout) },
		func() error { return file(tw, "index.json", index) },
		tw.Close,
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// verify writes the layer and checks that it is the one planned (its
// size, and its digest when known; an unknown one is learnt here): a file
// that changed since (or a stale cache) is an error, not a wrong image.
func verify(l *layer, w io.Writer, write func(io.Writer) error) error {
	h := sha256.New()
	n := &countWriter{w: io.MultiWriter(w, h)}
	if err := write(n); err != nil {
		return err
	}
	got := digest.NewDigest(digest.SHA256, h)
	if n.n != l.size || l.digest != "" && got != l.digest {
		return fmt.Errorf("files under /usr changed while the image was built (%d bytes, planned %d; or another digest than the cache's): build again", n.n, l.size)
	}
	l.digest = got
	return nil
}

func file(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// splitUsr walks usr (without following links) into the runtime layers'
// entry lists: one per directory a runtimeLayers pattern matches, then
// the rest; runtimeSkip trees are left out. Each list starts with the
// directories above its root, so every layer stands alone.
func splitUsr(usr string) ([][]entry, error) {
	if fi, err := os.Stat(usr); err != nil || !fi.IsDir() {
		return nil, kiln.Errorf(kiln.Invalid, "the runtimes image copies %s, which is not a directory", usr)
	}
	parent := filepath.Dir(usr)
	skip := map[string]bool{}
	for _, s := range runtimeSkip {
		skip[filepath.Join(usr, s)] = true
	}
	var roots []string
	for _, pat := range runtimeLayers {
		matches, _ := filepath.Glob(filepath.Join(usr, pat))
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && fi.IsDir() && !skip[m] && !slices.Contains(roots, m) {
				roots = append(roots, m)
			}
		}
	}
	slices.Sort(roots)
	own := map[string]bool{}
	for _, r := range roots {
		own[r] = true
	}
	var groups [][]entry
	for _, r := range append(roots, usr) {
		var es []entry
		// the directories above r, up to and including usr
		for d := filepath.Dir(r); r != usr && strings.HasPrefix(d+"/", usr+"/"); d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err != nil {
				return nil, err
			}
			es = append([]entry{{name: rel(parent, d) + "/", fi: fi}}, es...)
		}
		err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: left out, as the native backend's bind would show it
			}
			if p != r && d.IsDir() && (own[p] || skip[p]) {
				return filepath.SkipDir
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			e := entry{name: rel(parent, p), fi: fi}
			switch {
			case fi.IsDir():
				e.name += "/"
			case fi.Mode()&fs.ModeSymlink != 0:
				if e.link, err = os.Readlink(p); err != nil {
					return nil
				}
			case !fi.Mode().IsRegular():
				return nil // devices, sockets, fifos: none belongs in an image
			}
			es = append(es, e)
			return nil
		})
		if err != nil {
			return nil, err
		}
		groups = append(groups, es)
	}
	return groups, nil
}

func rel(parent, p string) string {
	r, _ := filepath.Rel(parent, p)
	return filepath.ToSlash(r)
}

// fingerprint names the layer by its files' metadata. ctime is in it:
// any write to a file changes its ctime, and nothing sets it back.
func (l *layer) fingerprint() string {
	h := sha256.New()
	for _, e := range l.entries {
		st, _ := e.fi.Sys().(*syscall.Stat_t)
		var ino, ct int64
		if st != nil {
			ino, ct = int64(st.Ino), st.Ctim.Nano()
		}
		fmt.Fprintf(h, "%q %o %d %d %d %d %q\n", e.name, e.fi.Mode(), e.fi.Size(), e.fi.ModTime().UnixNano(), ct, ino, e.link)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// write writes the layer's tar: owners root, setuid and setgid bits
// dropped (no Pod may gain privileges anyway), mtimes kept to the second
// (Python checks its .pyc caches against them), hard links kept as links.
func (l *layer) write(w io.Writer) error { return l.writeFrom(w, nil) }

// writeFrom writes the layer with every file's bytes read from content,
// or from the file itself when content is nil.
func (l *layer) writeFrom(w io.Writer, content io.Reader) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	first := map[inode]string{}
	for _, e := range l.entries {
		h := &tar.Header{Name: e.name, Mode: int64(e.fi.Mode().Perm()), ModTime: e.fi.ModTime().Truncate(time.Second)}
		switch {
		case e.fi.IsDir():
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			st, _ := e.fi.Sys().(*syscall.Stat_t)
			if st != nil && st.Nlink > 1 {
				id := inode{st.Dev, st.Ino}
				if target, ok := first[id]; ok {
					h.Typeflag, h.Linkname = tar.TypeLink, target
					break
				}
				first[id] = e.name
			}
			h.Typeflag, h.Size = tar.TypeReg, e.fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			var err error
			if content != nil {
				_, err = io.CopyN(tw, content, h.Size)
			} else {
				err = copyFile(tw, filepath.Join(l.root, e.name), h.Size)
			}
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// copyFile copies exactly size bytes of the file: one that shrank or
// grew since the walk is an error (verify names it), not a broken tar.
func copyFile(w io.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, %d when listed", path, n, size)
	}
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// cached is a layer's digest and size, kept by fingerprint.
type cached struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

func loadCache(path string) map[string]cached {
	m := map[string]cached{}
	if path == "" {
		return m
	}
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &m) // a damaged cache is an empty one
	}
	return m
}

// saveCache keeps this build's layers only: the file stays as small as
// the image. A failure to save costs a read of /usr next time, no more.
func saveCache(path string, m map[string]cached) {
	if path == "" {
		return
	}
	data, _ := json.Marshal(m)
	if os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		tmp := path + ".tmp"
		if os.WriteFile(tmp, data, 0o600) == nil {
			os.Rename(tmp, path)
		}
	}
}
