package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The key of the image's inputs changes when the binary or an /etc entry
// does, and only then.
func TestInputsKey(t *testing.T) {
	dir := t.TempDir()
	agentPath, etc := filepath.Join(dir, "kiln"), filepath.Join(dir, "etc")
	os.Mkdir(etc, 0o755)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(agentPath, []byte("agent v1"), 0o755))
	must(os.WriteFile(filepath.Join(etc, "ld.so.cache"), []byte("cache"), 0o644))
	key := func() string {
		t.Helper()
		k, err := inputsKey(agentPath, etc)
		must(err)
		return k
	}
	k1 := key()
	if k2 := key(); k2 != k1 {
		t.Fatalf("the same inputs gave two keys: %s, %s", k1, k2)
	}
	later := time.Now().Add(time.Minute)
	must(os.Chtimes(agentPath, later, later))
	k2 := key()
	if k2 == k1 {
		t.Error("a rebuilt agent binary (new mtime) kept the key")
	}
	must(os.WriteFile(filepath.Join(etc, "ld.so.cache"), []byte("cache, changed"), 0o644))
	if k3 := key(); k3 == k2 {
		t.Error("a changed /etc entry kept the key")
	}
	must(os.Mkdir(filepath.Join(etc, "php"), 0o755))
	if k4 := key(); k4 == k1 || k4 == k2 {
		t.Error("a new /etc entry kept the key")
	}
}

// FindImage gives BuildImage's tag, remembers it, and does not trust a
// remembered tag the engine does not have.
func TestFindImage(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ref, built, err := b.FindImage(ctx, exe)
	if err != nil || ref != testImage || built {
		t.Fatalf("FindImage: %s, built %v, %v; want %s, already there", ref, built, err, testImage)
	}
	dir, _ := b.socketDir()
	key, err := inputsKey(exe, "/etc")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := readCached(dir, key); !ok || got != ref {
		t.Fatalf("remembered %q (%v); want %s", got, ok, ref)
	}
	writeCached(dir, key, Repository+":gone0000000000000000")
	ref, _, err = b.FindImage(ctx, exe)
	if err != nil || ref != testImage {
		t.Fatalf("with a remembered tag the engine lacks: %s, %v; want %s", ref, err, testImage)
	}
	if got, _ := readCached(dir, key); got != testImage {
		t.Errorf("the stale tag was kept: %q", got)
	}
}

// Sockets and remembered tags go only in a directory nobody else could
// have written.
func TestOwnDir(t *testing.T) {
	dir := t.TempDir()
	own, open := filepath.Join(dir, "own"), filepath.Join(dir, "open")
	os.Mkdir(own, 0o700)
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if !ownDir(own) {
		t.Error("a 0700 directory of this user's was refused")
	}
	if ownDir(open) {
		t.Error("a directory anyone may write was accepted")
	}
	if ownDir(filepath.Join(dir, "missing")) {
		t.Error("a missing directory was accepted")
	}
}
