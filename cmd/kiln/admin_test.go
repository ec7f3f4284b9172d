package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
)

// TestAdminKey: kiln admin key makes a working key for an admin in the
// data directory's database, which keeps everything it had.
func TestAdminKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "kiln.db")
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	admin := store.User{Name: "root-admin", Admin: true}
	bob := store.User{Name: "bob"}
	for _, u := range []*store.User{&admin, &bob} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	sess := store.Session{UserID: bob.ID, Languages: []string{"python"}}
	if err := st.CreateSession(ctx, &sess); err != nil {
		t.Fatal(err)
	}
	st.Close() // kiln serve may run meanwhile; here it does not

	r := runCLI(t, "", "admin", "key", "--data", dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, service.KeyPrefix) || !strings.Contains(r.stderr, "root-admin") {
		t.Fatalf("kiln admin key: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	secret := strings.TrimSpace(r.stdout)

	st, err = sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := st.APIKeyByHash(ctx, store.HashKey(secret))
	if err != nil || k.UserID != admin.ID {
		t.Fatalf("the printed key: %+v, %v; want a key of %s", k, err, admin.ID)
	}
	if _, err := st.Session(ctx, bob.ID, sess.ID); err != nil {
		t.Errorf("bob's session after kiln admin key: %v", err)
	}
	audit, _, err := st.ListAudit(ctx, store.AuditFilter{}, store.Page{})
	if err != nil || len(audit) != 1 || audit[0].Action != "key.create" || !strings.Contains(string(audit[0].Detail), `"by":"host"`) {
		t.Errorf("audit = %+v, %v; want the key's creation by the host", audit, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "key", "--data", dir, "--user", "bob"}, `user "bob" is not an admin`},
		{[]string{"admin", "key", "--data", dir, "--user", "nobody"}, `no user named "nobody"`},
		{[]string{"admin", "key", "--data", t.TempDir()}, "no kiln database at"},
		{[]string{"admin"}, "Usage: kiln admin key"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("kiln %v: exit %d, stdout %q, stderr %q; want a failure saying %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestAdminKeyMakesAnAdmin: on a database with no admin, kiln admin key
// makes one.
func TestAdminKeyMakesAnAdmin(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := runCLI(t, "", "admin", "key", "--data", dir, "--name", "recovery")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	k, err := st.APIKeyByHash(ctx, store.HashKey(strings.TrimSpace(r.stdout)))
	if err != nil || k.Name != "recovery" {
		t.Fatalf("key %+v, %v", k, err)
	}
	u, err := st.User(ctx, k.UserID)
	if err != nil || !u.Admin || u.Name != "admin" {
		t.Errorf("the key's user: %+v, %v; want a new admin", u, err)
	}
}
