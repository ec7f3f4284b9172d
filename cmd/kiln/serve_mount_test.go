package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestServeMountRoot: --mount-root takes absolute folders, kept as their
// real paths, and refuses anything else.
func TestServeMountRoot(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	f, err := parseServe([]string{"--mount-root", dir, "--mount-root", link}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if !slices.Equal(f.svc.MountRoots, []string{real, real}) {
		t.Errorf("roots %q; want %q twice", f.svc.MountRoots, real)
	}
	for _, bad := range []string{"relative", "/", filepath.Join(dir, "missing"), "/etc/hostname"} {
		if _, err := parseServe([]string{"--mount-root", bad}, io.Discard); err == nil {
			t.Errorf("--mount-root %s: accepted; want an error", bad)
		}
	}
}
