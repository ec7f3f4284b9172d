package lang

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestPostgresVersionNamesTheDriver: the postgres language needs the
// server and the kernel's driver; its version probe runs both, so kiln
// doctor and kiln languages show a host that lacks psycopg2.
func TestPostgresVersionNamesTheDriver(t *testing.T) {
	if _, err := os.Stat("/usr/lib/python3/dist-packages/psycopg2"); err != nil {
		t.Skip("psycopg2 is not installed (the Debian package python3-psycopg2)")
	}
	l, err := Lookup("postgresql")
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.DetectVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "PostgreSQL 15.") || !strings.Contains(v, "with psycopg2 2.") {
		t.Errorf("version %q, want PostgreSQL's and psycopg2's", v)
	}
}
