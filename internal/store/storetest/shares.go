package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// testShares: a share shows the session to its user with the role, an
// update changes the role, a revoked share is gone for the next query,
// and only the owner manages shares. Executions and audit rows keep the
// actor next to the owner who is charged.
func testShares(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b, c := newUser(t, s, "a"), newUser(t, s, "b"), newUser(t, s, "c")
	ss := newSession(t, s, a.ID, base, map[string]string{"k": "v"})
	other := newSession(t, s, b.ID, at(5), nil)

	sh := store.Share{SessionID: ss.ID, UserID: b.ID, Role: kiln.RoleViewer}
	created, err := s.PutShare(ctx, a.ID, &sh, 2)
	if err != nil || !created || sh.OwnerID != a.ID {
		t.Fatalf("PutShare = %v, %v, owner %q; want created by %q", created, err, sh.OwnerID, a.ID)
	}
	got, err := s.Share(ctx, ss.ID, b.ID)
	if err != nil || got.Role != kiln.RoleViewer || got.OwnerID != a.ID {
		t.Errorf("Share = %+v, %v; want viewer of a's session", got, err)
	}
	// b lists its own session and a's, with the role of the share.
	list, _, err := s.ListSessions(ctx, b.ID, store.SessionFilter{}, store.Page{})
	must(t, "list", err)
	roles := map[string]kiln.Role{}
	for _, x := range list {
		roles[x.ID] = x.Role
	}
	if len(list) != 2 || roles[ss.ID] != kiln.RoleViewer || roles[other.ID] != "" {
		t.Errorf("b's sessions = %v; want its own (role \"\") and a's (viewer)", roles)
	}
	if list, _, _ := s.ListSessions(ctx, b.ID, store.SessionFilter{Metadata: map[string]string{"k": "v"}}, store.Page{}); len(list) != 1 || list[0].ID != ss.ID {
		t.Errorf("b's sessions with k=v = %d, want a's shared one", len(list))
	}
	if list, _, _ := s.ListSessions(ctx, c.ID, store.SessionFilter{}, store.Page{}); len(list) != 0 {
		t.Errorf("c (no share) lists %d sessions, want 0", len(list))
	}

	// An update keeps one share and changes its role.
	sh = store.Share{SessionID: ss.ID, UserID: b.ID, Role: kiln.RoleCollaborator}
	if created, err := s.PutShare(ctx, a.ID, &sh, 2); err != nil || created || sh.Role != kiln.RoleCollaborator {
		t.Errorf("second PutShare = %v, %v, %+v; want the role changed, not created", created, err, sh)
	}
	// Only the owner shares; the user must exist; at most max shares.
	_, err = s.PutShare(ctx, b.ID, &store.Share{SessionID: ss.ID, UserID: c.ID, Role: kiln.RoleViewer}, 2)
	wantErr(t, "b shares a's session", err, store.ErrNotFound)
	_, err = s.PutShare(ctx, a.ID, &store.Share{SessionID: ss.ID, UserID: "nobody", Role: kiln.RoleViewer}, 2)
	if kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("share with no such user: %v, want not found", err)
	}
	_, err = s.PutShare(ctx, a.ID, &store.Share{SessionID: ss.ID, UserID: c.ID, Role: kiln.RoleViewer}, 1)
	if kiln.KindOf(err) != kiln.QuotaExceeded {
		t.Errorf("share past the limit: %v, want quota exceeded", err)
	}
	if shares, err := s.ListShares(ctx, a.ID, ss.ID); err != nil || len(shares) != 1 || shares[0].UserID != b.ID {
		t.Errorf("ListShares = %+v, %v; want b's", shares, err)
	}
	_, err = s.ListShares(ctx, b.ID, ss.ID)
	wantErr(t, "b lists a's shares", err, store.ErrNotFound)

	// Executions: the owner is charged, the actor kept; a shared user
	// reads them, another does not.
	e := store.Execution{SessionID: ss.ID, UserID: a.ID, Actor: b.ID, Language: "python", Code: "1+1"}
	must(t, "create execution", s.CreateExecution(ctx, &e))
	if x, err := s.SharedExecution(ctx, b.ID, e.ID); err != nil || x.Actor != b.ID || x.UserID != a.ID {
		t.Errorf("SharedExecution = %+v, %v; want actor b, user a", x, err)
	}
	_, err = s.SharedExecution(ctx, c.ID, e.ID)
	wantErr(t, "c reads an execution of a session not shared with it", err, store.ErrNotFound)
	audit := store.AuditEntry{UserID: a.ID, Actor: b.ID, Action: "execution", SessionID: ss.ID, Detail: json.RawMessage(`{}`)}
	must(t, "audit", s.AppendAudit(ctx, &audit))
	if got, _, err := s.ListAudit(ctx, store.AuditFilter{SessionID: ss.ID}, store.Page{}); err != nil || len(got) != 1 || got[0].Actor != b.ID || got[0].UserID != a.ID {
		t.Errorf("audit = %+v, %v; want one row charged to a, acted by b", got, err)
	}
	must(t, "audit", s.AppendAudit(ctx, &store.AuditEntry{UserID: a.ID, Actor: a.ID, Action: "session.share", SessionID: ss.ID}))
	if got, _, err := s.ListAudit(ctx, store.AuditFilter{Actor: b.ID}, store.Page{}); err != nil || len(got) != 1 || got[0].ID != audit.ID {
		t.Errorf("audit by actor b = %+v, %v; want b's one row", got, err)
	}

	// Revoked: gone at once, for everything.
	wantErr(t, "b revokes its own share of a's session", s.DeleteShare(ctx, b.ID, ss.ID, b.ID), store.ErrNotFound)
	must(t, "revoke", s.DeleteShare(ctx, a.ID, ss.ID, b.ID))
	_, err = s.Share(ctx, ss.ID, b.ID)
	wantErr(t, "share after revoke", err, store.ErrNotFound)
	_, err = s.SharedExecution(ctx, b.ID, e.ID)
	wantErr(t, "execution after revoke", err, store.ErrNotFound)
	if list, _, _ := s.ListSessions(ctx, b.ID, store.SessionFilter{}, store.Page{}); len(list) != 1 {
		t.Errorf("b lists %d sessions after revoke, want only its own", len(list))
	}
	wantErr(t, "revoke twice", s.DeleteShare(ctx, a.ID, ss.ID, b.ID), store.ErrNotFound)
}
