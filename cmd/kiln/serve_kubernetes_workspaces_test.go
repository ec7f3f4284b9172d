package main

import (
	"io"
	"testing"

	"github.com/kiln-dev/kiln/internal/workspace"
)

// With --backend kubernetes a session's workspace is its Pod's emptyDir,
// so kiln serve keeps plain directories on its own host: nothing mounted,
// no root-owned data directory, and so a non-root kiln Pod
// (deploy/kubernetes; TestDeployKustomize runs one). Other backends keep
// the flag's kind.
func TestServeKubernetesPlainWorkspaces(t *testing.T) {
	for _, c := range []struct {
		args []string
		want workspace.Kind
	}{
		{[]string{"--backend", "kubernetes"}, workspace.Plain},
		{[]string{"--backend", "kubernetes", "--workspaces", "tmpfs"}, workspace.Plain},
		{nil, workspace.Disk},
		{[]string{"--workspaces", "tmpfs"}, workspace.Tmpfs},
	} {
		f, err := parseServe(append(c.args, "--data", t.TempDir()), io.Discard)
		if err != nil {
			t.Fatalf("parseServe %q: %v", c.args, err)
		}
		if f.svc.Workspaces != c.want {
			t.Errorf("kiln serve %q: workspaces %q; want %q", c.args, f.svc.Workspaces, c.want)
		}
	}
}

// kiln serve takes the PostgreSQL DSN from $KILN_DB when --db is not
// given, so that a Pod gets it from a Secret without putting its password
// on the command line (deploy/kubernetes); --db wins.
func TestServeDBFromEnv(t *testing.T) {
	t.Setenv("KILN_DB", "postgres://kiln:secret@db:5432/kiln")
	f, err := parseServe([]string{"--data", t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.db != "postgres://kiln:secret@db:5432/kiln" {
		t.Errorf("with $KILN_DB and no --db, the DSN is %q", f.db)
	}
	f, err = parseServe([]string{"--data", t.TempDir(), "--db", "postgres://other@db/kiln"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.db != "postgres://other@db/kiln" {
		t.Errorf("--db and $KILN_DB: the DSN is %q; want --db's", f.db)
	}
}
