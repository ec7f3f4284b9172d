package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/lang"
)

// TestLanguagesListsTheRegistry: kiln languages has one row per language
// of the registry, in its order, each with the registry's kind, and no
// other row; a runtime missing on this host changes the row, not the list.
func TestLanguagesListsTheRegistry(t *testing.T) {
	var out bytes.Buffer
	if err := languagesCmd(context.Background(), &out); err != nil {
		if _, ok := err.(exitError); !ok {
			t.Fatalf("kiln languages: %v", err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "LANGUAGE") {
		t.Fatalf("no header:\n%s", out.String())
	}
	var names []string
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("short row %q", line)
		}
		names = append(names, f[0])
		if l, err := lang.Lookup(f[0]); err != nil || string(l.Kind) != f[1] {
			t.Errorf("row %q: the registry says %v (%v)", line, l, err)
		}
	}
	if want := lang.Names(); !slices.Equal(names, want) {
		t.Errorf("kiln languages lists %q, want the registry's %q", names, want)
	}
}
