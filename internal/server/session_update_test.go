package server_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestRenameSession: PATCH /v1/sessions/{id} sets the name that GET and
// the list show, refuses bad names with a 400 saying what is allowed,
// lets only the owner rename, and "" removes the name.
func TestRenameSession(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.admin.RenameSession(ctx, s.ID, "  sales analysis ")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "sales analysis" || got.Metadata["name"] != "sales analysis" {
		t.Errorf("renamed session: name %q, metadata %v; want the trimmed name in both", got.Name, got.Metadata)
	}
	list, err := e.admin.ListSessions(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].Name != "sales analysis" {
		t.Fatalf("the list shows %+v, want the session named sales analysis", list.Sessions)
	}

	for _, bad := range []struct{ name, want string }{
		{strings.Repeat("é", 101), "at most 100"},
		{"tab\there", "control"},
		{"bell\x07", "control"},
	} {
		_, err := e.admin.RenameSession(ctx, s.ID, bad.name)
		p := wantProblem(t, "rename to "+strings.ToValidUTF8(bad.name[:min(len(bad.name), 10)], "?"), err, 400, "invalid")
		if !strings.Contains(p.Detail, bad.want) {
			t.Errorf("rename to a bad name: %q, want it to say %q", p.Detail, bad.want)
		}
	}
	if after, _ := e.admin.Session(ctx, s.ID); after.Name != "sales analysis" {
		t.Errorf("after refused renames the name is %q", after.Name)
	}

	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := client.New(e.url, k.Secret)
	_, err = bob.RenameSession(ctx, s.ID, "mine")
	wantProblem(t, "another user renames", err, 404, "not_found")
	if _, err := e.admin.ShareSession(ctx, s.ID, u.ID, "collaborator"); err != nil {
		t.Fatal(err)
	}
	_, err = bob.RenameSession(ctx, s.ID, "mine")
	wantProblem(t, "a collaborator renames", err, 403, "forbidden")

	got, err = e.admin.RenameSession(ctx, s.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "" || got.Metadata["name"] != "" {
		t.Errorf("after renaming to \"\": name %q, metadata %v; want no name", got.Name, got.Metadata)
	}
}

// TestSessionUse: an active session in GET /v1/sessions carries its use:
// the workspace's bytes grow with a written file, and the idle time left
// is within the session's time-out.
func TestSessionUse(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}, IdleTTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.admin.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if before.Use == nil {
		t.Fatal("an active session has no use")
	}
	if _, err := e.admin.Upload(ctx, s.ID, "big.bin", strings.NewReader(strings.Repeat("x", 300_000)), false); err != nil {
		t.Fatal(err)
	}
	list, err := e.admin.ListSessions(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := list.Sessions[0].Use
	if u == nil {
		t.Fatal("the list has no use for the active session")
	}
	if u.WorkspaceBytes < before.Use.WorkspaceBytes+300_000 {
		t.Errorf("workspace bytes %d after writing 300 kB, %d before", u.WorkspaceBytes, before.Use.WorkspaceBytes)
	}
	if u.IdleSecondsLeft <= 0 || u.IdleSecondsLeft > 600 {
		t.Errorf("idle seconds left %d, want within the 600 s time-out", u.IdleSecondsLeft)
	}
	if err := e.admin.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if ended, _ := e.admin.Session(ctx, s.ID); ended.Use != nil {
		t.Errorf("an ended session has use %+v", ended.Use)
	}
}
