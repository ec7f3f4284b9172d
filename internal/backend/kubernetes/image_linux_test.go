package kubernetes

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// fakeUsr makes a small /usr: two runtime-layer trees, a skipped tree,
// a setuid binary, a hard link and a symlink.
func fakeUsr(t *testing.T) (usr, agent string) {
	t.Helper()
	root := t.TempDir()
	usr = filepath.Join(root, "usr")
	write := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(usr, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // past the umask, and setuid
	}
	write("bin/python3", "#!python", 0o755)
	write("bin/sudo", "setuid", 0o4755)
	write("lib/jvm/java/bin/java", "java", 0o755)
	write("lib/python3/dist-packages/m.py", "x = 1", 0o644)
	write("share/doc/readme", "docs", 0o644)
	write("share/misc/magic", "magic", 0o644)
	if err := os.Link(filepath.Join(usr, "bin/python3"), filepath.Join(usr, "bin/python3.11")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("python3", filepath.Join(usr, "bin/python")); err != nil {
		t.Fatal(err)
	}
	agent = filepath.Join(root, "kiln")
	if err := os.WriteFile(agent, []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	return usr, agent
}

// layerFiles lists a layer's tar: name, type and mode, and a hard
// link's target.
func layerFiles(t *testing.T, l *layer) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := l.write(&buf); err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		s := h.Name + " " + string(h.Typeflag) + " " + strings.TrimLeft(os.FileMode(h.Mode).String(), "-")
		if h.Linkname != "" {
			s += " -> " + h.Linkname
		}
		got = append(got, s)
	}
}

// The copy of /usr is split into layers by runtime, leaves out the
// skipped trees, drops setuid bits and keeps hard links as links.
func TestRuntimeLayers(t *testing.T) {
	usr, agent := fakeUsr(t)
	img, err := planImage(ImageConfig{Agent: agent, Usr: usr, Cache: filepath.Join(t.TempDir(), "cache.json")})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, l := range img.layers[:len(img.layers)-1] {
		got = append(got, layerFiles(t, l))
	}
	want := [][]string{
		{"usr/ 5 rwxr-xr-x", "usr/bin/ 5 rwxr-xr-x", "usr/bin/python 2 rwxrwxrwx -> python3", "usr/bin/python3 0 rwxr-xr-x",
			"usr/bin/python3.11 1 rwxr-xr-x -> usr/bin/python3", "usr/bin/sudo 0 rwxr-xr-x"},
		{"usr/ 5 rwxr-xr-x", "usr/lib/ 5 rwxr-xr-x", "usr/lib/jvm/ 5 rwxr-xr-x", "usr/lib/jvm/java/ 5 rwxr-xr-x", "usr/lib/jvm/java/bin/ 5 rwxr-xr-x", "usr/lib/jvm/java/bin/java 0 rwxr-xr-x"},
		{"usr/ 5 rwxr-xr-x", "usr/lib/ 5 rwxr-xr-x", "usr/lib/python3/ 5 rwxr-xr-x", "usr/lib/python3/dist-packages/ 5 rwxr-xr-x", "usr/lib/python3/dist-packages/m.py 0 rw-r--r--"},
		{"usr/ 5 rwxr-xr-x", "usr/share/ 5 rwxr-xr-x", "usr/share/misc/ 5 rwxr-xr-x", "usr/share/misc/magic 0 rw-r--r--"},
		{"usr/ 5 rwxr-xr-x", "usr/lib/ 5 rwxr-xr-x"}, // the rest
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtime layers (-want +got):\n%s", diff)
	}
	if env := img.layers[len(img.layers)-1]; env.data == nil || !bytes.Contains(env.data, []byte("agent")) {
		t.Errorf("the top layer is not the environment layer with the agent")
	}
	checkOCI(t, img, sendImage(t, img, ""))
	if !strings.HasPrefix(img.ref, ImageRepository+":") || len(img.ref) != len(ImageRepository)+21 {
		t.Errorf("ref %q; want %s:<20 hex digits>", img.ref, ImageRepository)
	}
}

// sendImage writes img as BuildImage sends it to containerd, which has
// none of its blobs, and keeps its digests in the cache.
func sendImage(t *testing.T, img *image, cache string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := img.writeOCI(&buf, nil); err != nil {
		t.Fatal(err)
	}
	img.saveCache(cache)
	return buf.Bytes()
}

// checkOCI reads the OCI layout tar as containerd's importer does (every
// blob by the digest of its bytes, whatever its name): the index names
// the image, and every layer the manifest lists, with the config's diff
// IDs, is in the tar.
func checkOCI(t *testing.T, img *image, tarball []byte) {
	t.Helper()
	blobs := map[digest.Digest][]byte{}
	var index []byte
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Name == "index.json" {
			index = data
		}
		blobs[digest.FromBytes(data)] = data
	}
	var idx ocispec.Index
	var m ocispec.Manifest
	var cfg ocispec.Image
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", index, err)
	}
	if got := idx.Manifests[0].Annotations["io.containerd.image.name"]; got != img.ref {
		t.Errorf("the index names %q; want %q", got, img.ref)
	}
	if err := json.Unmarshal(blobs[idx.Manifests[0].Digest], &m); err != nil {
		t.Fatalf("the manifest: %v", err)
	}
	if err := json.Unmarshal(blobs[m.Config.Digest], &cfg); err != nil {
		t.Fatalf("the config: %v", err)
	}
	if len(m.Layers) != len(img.layers) || len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("%d layers in the manifest, %d diff IDs; want %d", len(m.Layers), len(cfg.RootFS.DiffIDs), len(img.layers))
	}
	for i, l := range m.Layers {
		if b, ok := blobs[l.Digest]; !ok || int64(len(b)) != l.Size || cfg.RootFS.DiffIDs[i] != l.Digest {
			t.Errorf("layer %d (%s, %d bytes): in the tar %v, diff ID %s", i, l.Digest, l.Size, ok, cfg.RootFS.DiffIDs[i])
		}
	}
}

// The tag names the content: once sent, planning again unchanged knows
// every digest from the cache and gives the same image without sending;
// a changed runtime changes its own layer only; a stale cache never
// gives a wrong image.
func TestRuntimeImageTag(t *testing.T) {
	usr, agent := fakeUsr(t)
	cfg := ImageConfig{Agent: agent, Usr: usr, Cache: filepath.Join(t.TempDir(), "cache.json")}
	plan := func() *image {
		t.Helper()
		img, err := planImage(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	first := plan()
	if first.known() {
		t.Fatal("a cold plan knows its digests without reading /usr")
	}
	sendImage(t, first, cfg.Cache)
	again := plan()
	if !again.known() {
		t.Fatal("unchanged and sent once: the plan does not know every digest from the cache")
	}
	if err := again.describe(); err != nil || again.ref != first.ref {
		t.Errorf("unchanged: %s, then %s (%v)", first.ref, again.ref, err)
	}
	time.Sleep(10 * time.Millisecond) // a new ctime
	if err := os.WriteFile(filepath.Join(usr, "lib/python3/dist-packages/m.py"), []byte("x = 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := plan()
	checkOCI(t, changed, sendImage(t, changed, cfg.Cache))
	if changed.ref == first.ref {
		t.Fatalf("a changed file kept the tag %s", first.ref)
	}
	for i := range first.layers {
		same := first.layers[i].digest == changed.layers[i].digest
		if want := i != 2; same != want { // layer 2 is lib/python3
			t.Errorf("layer %d unchanged = %v; want %v", i, same, want)
		}
	}
	// Written as planned: the layer's bytes match its digest.
	var buf bytes.Buffer
	l := changed.layers[2]
	if err := verify(l, &buf, l.write); err != nil {
		t.Errorf("writing the planned layer: %v", err)
	}
	// A file changed behind the cache's back (same size, no new plan):
	// writing refuses rather than sending a layer whose digest is wrong.
	os.WriteFile(filepath.Join(usr, "lib/python3/dist-packages/m.py"), []byte("x = 3"), 0o644)
	if err := verify(l, io.Discard, l.write); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("a layer written from changed files: %v; want an error that says they changed", err)
	}
}

// A bad /usr or a missing agent is an error that says what is wrong.
func TestRuntimeImageBadInput(t *testing.T) {
	_, agent := fakeUsr(t)
	for _, tc := range []struct {
		cfg  ImageConfig
		want string
	}{
		{ImageConfig{Agent: agent, Usr: "/nonexistent/usr"}, "not a directory"},
		{ImageConfig{Agent: agent, Usr: agent}, "not a directory"},
		{ImageConfig{Usr: "/usr"}, "agent binary"},
	} {
		_, err := planImage(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an error with %q", tc.cfg, err, tc.want)
		}
	}
	if _, _, err := BuildImage(t.Context(), ImageConfig{Agent: agent}); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("no containerd socket: %v; want Invalid", err)
	}
}
