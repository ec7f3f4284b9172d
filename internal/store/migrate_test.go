package store

import (
	"strings"
	"testing"
)

func TestMigrationVariants(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		ms, err := migrations(dialect)
		if err != nil {
			t.Fatalf("%s: %v", dialect, err)
		}
		if len(ms) != LatestVersion() {
			t.Errorf("%s: %d migrations, want %d", dialect, len(ms), LatestVersion())
		}
		for i, m := range ms {
			if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
				t.Errorf("%s: migration %d is %d_%s (%d bytes)", dialect, i+1, m.version, m.name, len(m.sql))
			}
		}
		// The append-only trigger is written in each dialect's own language.
		got := ms[1].sql
		if want := map[string]string{"sqlite": "RAISE(ABORT", "postgres": "plpgsql"}[dialect]; !strings.Contains(got, want) {
			t.Errorf("%s: migration 2 does not contain %q:\n%s", dialect, want, got)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c := cursor{N: 1234567890123, ID: "abc"}
	got, ok, err := decodeCursor(c.encode())
	if err != nil || !ok || got != c {
		t.Errorf("decodeCursor(encode(%+v)) = %+v, %v, %v", c, got, ok, err)
	}
	if _, ok, err := decodeCursor(""); ok || err != nil {
		t.Errorf("empty cursor = %v, %v; want first page", ok, err)
	}
}
