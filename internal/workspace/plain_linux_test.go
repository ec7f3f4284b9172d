package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// Plain workspaces need no root, and no flag can choose them.
func TestPlain(t *testing.T) {
	if _, err := ParseKind("plain"); err == nil {
		t.Fatal(`ParseKind("plain") accepted the test-only kind`)
	}
	d, err := OpenKind(filepath.Join(t.TempDir(), "ws"), Plain)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Create("abc123", 1<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Exists("abc123") || d.Restore("abc123") != nil {
		t.Fatal("a created plain workspace does not exist")
	}
	if err := os.WriteFile(filepath.Join(p, "f"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if used, _, err := d.Usage("abc123"); err != nil || used != 1000 {
		t.Errorf("usage: %d, %v; want 1000", used, err)
	}
	if _, err := d.Create("abc123", 1<<20, 100); err == nil {
		t.Error("created the same workspace twice")
	}
	if err := d.Remove("abc123"); err != nil {
		t.Fatal(err)
	}
	if d.Exists("abc123") {
		t.Error("workspace still there after Remove")
	}
}
