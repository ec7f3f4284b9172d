package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// sharedEnv is a session of owner's shared with collab (collaborator)
// and viewer, a stranger it is not shared with, and revoked, whose share
// was revoked.
type sharedEnv struct {
	e                                        *env
	session                                  string
	owner, collab, viewer, stranger, revoked *client.Client
	ownerID, collabID, viewerID, strangerID  string
	revokedID                                string
	keys                                     map[*client.Client]string // for raw requests
}

// mk makes a non-admin user; its client, id and key.
func (s *sharedEnv) mk(t *testing.T, name string) (*client.Client, string) {
	t.Helper()
	ctx := ctxT(t)
	u, err := s.e.admin.CreateUser(ctx, client.UserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.e.admin.CreateKey(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.e.url, k.Secret)
	if err != nil {
		t.Fatal(err)
	}
	s.keys[c] = k.Secret
	return c, u.ID
}

func newShared(t *testing.T, opts options) *sharedEnv {
	t.Helper()
	e := newEnv(t, opts)
	ctx := ctxT(t)
	s := &sharedEnv{e: e, keys: map[*client.Client]string{}}
	s.owner, s.ownerID = s.mk(t, "owner")
	s.collab, s.collabID = s.mk(t, "collab")
	s.viewer, s.viewerID = s.mk(t, "viewer")
	s.stranger, s.strangerID = s.mk(t, "stranger")
	s.revoked, s.revokedID = s.mk(t, "revoked")
	sess, err := s.owner.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s.session = sess.ID
	for id, role := range map[string]string{s.collabID: "collaborator", s.viewerID: "viewer", s.revokedID: "collaborator"} {
		sh, err := s.owner.ShareSession(ctx, s.session, id, role)
		if err != nil || sh.Role != role || sh.UserID != id {
			t.Fatalf("share as %s: %+v, %v", role, sh, err)
		}
	}
	if err := s.owner.RevokeShare(ctx, s.session, s.revokedID); err != nil {
		t.Fatal(err)
	}
	return s
}

// events opens the session's event stream as c and returns its status
// and, for a 200, a reader of its events.
func (s *sharedEnv) events(t *testing.T, ctx context.Context, c *client.Client) (int, *bufio.Reader, io.Closer) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.e.url+"/v1/sessions/"+s.session+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.keys[c])
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, bufio.NewReader(resp.Body), resp.Body
}

// TestShareRights is the table of every session endpoint against every
// role: the owner may do everything; a collaborator reads, runs cells,
// writes files, interrupts and restarts, but neither deletes nor shares
// (403); a viewer only reads (403 for the rest); a stranger and a user
// whose share was revoked get 404 for everything, as for a session that
// does not exist.
func TestShareRights(t *testing.T) {
	s := newShared(t, options{})
	ctx := ctxT(t)
	first, err := s.owner.Exec(ctx, s.session, client.ExecRequest{Code: "print('first')"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"owner", "collaborator", "viewer", "stranger", "revoked"} {
		for _, name := range []string{"del-", "mv-"} {
			if _, err := s.owner.Upload(ctx, s.session, name+tag+".txt", strings.NewReader("x"), true); err != nil {
				t.Fatal(err)
			}
		}
	}
	const (
		viewer = iota // a viewer may
		collab        // a collaborator may
		owner         // only the owner may
	)
	ops := []struct {
		name string
		need int
		do   func(c *client.Client, tag string) error
	}{
		{"get session", viewer, func(c *client.Client, _ string) error { _, err := c.Session(ctx, s.session); return err }},
		{"history", viewer, func(c *client.Client, _ string) error { _, err := c.History(ctx, s.session, 0, ""); return err }},
		{"get execution", viewer, func(c *client.Client, _ string) error { _, err := c.Execution(ctx, first.ID); return err }},
		{"list files", viewer, func(c *client.Client, _ string) error { _, err := c.ListFiles(ctx, s.session, ""); return err }},
		{"stat file", viewer, func(c *client.Client, _ string) error { _, err := c.Stat(ctx, s.session, "del-owner.txt"); return err }},
		{"download file", viewer, func(c *client.Client, _ string) error {
			_, err := c.Download(ctx, s.session, "mv-owner.txt", io.Discard)
			return err
		}},
		{"download archive", viewer, func(c *client.Client, _ string) error {
			return c.DownloadArchive(ctx, s.session, "", "zip", io.Discard)
		}},
		{"exec", collab, func(c *client.Client, _ string) error {
			_, err := c.Exec(ctx, s.session, client.ExecRequest{Code: "print(2)"})
			return err
		}},
		{"exec stream", collab, func(c *client.Client, _ string) error {
			_, err := c.ExecStream(ctx, s.session, client.ExecRequest{Code: "print(3)"}, func(client.Event) {})
			return err
		}},
		{"exec websocket", collab, func(c *client.Client, _ string) error {
			st, err := c.ExecWS(ctx, s.session, client.ExecRequest{Code: "print(4)"})
			if err != nil {
				return err
			}
			defer st.Close()
			for {
				ev, err := st.Recv(ctx)
				if err != nil {
					return err
				}
				if ev.Type == client.EventDone {
					return nil
				}
				if ev.Type == client.EventError {
					return ev.Error
				}
			}
		}},
		{"upload", collab, func(c *client.Client, tag string) error {
			_, err := c.Upload(ctx, s.session, "up-"+tag+".txt", strings.NewReader("y"), true)
			return err
		}},
		{"upload multipart", collab, func(c *client.Client, tag string) error {
			_, err := c.UploadMultipart(ctx, s.session, "", []client.File{{Path: "mp-" + tag + ".txt", Content: []byte("z")}})
			return err
		}},
		{"mkdir", collab, func(c *client.Client, tag string) error { _, err := c.Mkdir(ctx, s.session, "dir-"+tag); return err }},
		{"move", collab, func(c *client.Client, tag string) error {
			_, err := c.Move(ctx, s.session, client.MoveRequest{From: "mv-" + tag + ".txt", To: "moved-" + tag + ".txt"})
			return err
		}},
		{"delete file", collab, func(c *client.Client, tag string) error {
			return c.DeleteFile(ctx, s.session, "del-"+tag+".txt", false)
		}},
		{"interrupt", collab, func(c *client.Client, _ string) error { return c.Interrupt(ctx, s.session) }},
		{"restart", collab, func(c *client.Client, _ string) error { return c.Restart(ctx, s.session, "") }},
		{"list shares", owner, func(c *client.Client, _ string) error { _, err := c.Shares(ctx, s.session); return err }},
		{"share", owner, func(c *client.Client, _ string) error {
			_, err := c.ShareSession(ctx, s.session, s.viewerID, "viewer")
			return err
		}},
		{"revoke share", owner, func(c *client.Client, _ string) error {
			// Revoking a share that does not exist is a 404 for the owner
			// too; the rights are told apart by the 403 before it.
			err := c.RevokeShare(ctx, s.session, s.strangerID)
			if p, ok := err.(*client.Problem); ok && p.Status == http.StatusNotFound && c == s.owner {
				return nil
			}
			return err
		}},
	}
	roles := []struct {
		name string
		c    *client.Client
		rank int // -1: no share
	}{
		{"owner", s.owner, owner}, {"collaborator", s.collab, collab}, {"viewer", s.viewer, viewer},
		{"stranger", s.stranger, -1}, {"revoked", s.revoked, -1},
	}
	for _, op := range ops {
		for _, r := range roles {
			err := op.do(r.c, r.name)
			what := op.name + " as " + r.name
			switch {
			case r.rank >= op.need:
				if err != nil {
					t.Errorf("%s: %v, want allowed", what, err)
				}
			case r.rank < 0:
				if err == nil {
					t.Errorf("%s: allowed, want 404", what)
				} else {
					wantProblem(t, what, err, http.StatusNotFound, "not_found")
				}
			default:
				if err == nil {
					t.Errorf("%s: allowed, want 403", what)
				} else {
					wantProblem(t, what, err, http.StatusForbidden, "forbidden")
				}
			}
		}
	}

	// The event stream: every user of the session may watch, nobody else.
	for _, r := range []struct {
		name string
		c    *client.Client
		want int
	}{{"owner", s.owner, 200}, {"collaborator", s.collab, 200}, {"viewer", s.viewer, 200}, {"stranger", s.stranger, 404}, {"revoked", s.revoked, 404}} {
		sctx, cancel := context.WithCancel(ctx)
		status, _, body := s.events(t, sctx, r.c)
		cancel()
		body.Close()
		if status != r.want {
			t.Errorf("events as %s: %d, want %d", r.name, status, r.want)
		}
	}

	// Listing: the shared users see the session with their role; the
	// others do not see it.
	for _, r := range []struct {
		c    *client.Client
		role string
	}{{s.owner, "owner"}, {s.collab, "collaborator"}, {s.viewer, "viewer"}, {s.stranger, ""}, {s.revoked, ""}} {
		list, err := r.c.ListSessions(ctx, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, x := range list.Sessions {
			if x.ID == s.session {
				got = x.Role
				if x.OwnerID != s.ownerID {
					t.Errorf("listed session's owner_id = %q, want %q", x.OwnerID, s.ownerID)
				}
			}
		}
		if got != r.role {
			t.Errorf("role in the list = %q, want %q", got, r.role)
		}
	}

	// Deleting: 404 for those without a share, 403 for shared users,
	// then the owner deletes; a viewer still reads the history.
	for _, c := range []*client.Client{s.stranger, s.revoked} {
		wantProblem(t, "delete without a share", c.DeleteSession(ctx, s.session), http.StatusNotFound, "not_found")
	}
	for _, c := range []*client.Client{s.collab, s.viewer} {
		wantProblem(t, "delete as a shared user", c.DeleteSession(ctx, s.session), http.StatusForbidden, "forbidden")
	}
	if err := s.owner.DeleteSession(ctx, s.session); err != nil {
		t.Fatal(err)
	}
	if h, err := s.viewer.History(ctx, s.session, 0, ""); err != nil || len(h.Executions) == 0 {
		t.Errorf("the viewer's history of the ended session: %v, %v", h, err)
	}
}

// TestShareRevokedAtOnce: right after the owner revokes, the next request
// of the former collaborator is a 404, and the open event stream ends.
func TestShareRevokedAtOnce(t *testing.T) {
	s := newShared(t, options{})
	ctx := ctxT(t)
	if _, err := s.collab.Exec(ctx, s.session, client.ExecRequest{Code: "print(1)"}); err != nil {
		t.Fatal(err)
	}
	status, stream, body := s.events(t, ctx, s.collab)
	defer body.Close()
	if status != 200 {
		t.Fatalf("events: %d", status)
	}
	if err := s.owner.RevokeShare(ctx, s.session, s.collabID); err != nil {
		t.Fatal(err)
	}
	_, err := s.collab.Exec(ctx, s.session, client.ExecRequest{Code: "print(2)"})
	wantProblem(t, "exec right after revoke", err, http.StatusNotFound, "not_found")
	_, err = s.collab.Session(ctx, s.session)
	wantProblem(t, "get right after revoke", err, http.StatusNotFound, "not_found")
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, stream); done <- err }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("the revoked user's event stream is still open")
	}
	// Sharing again gives the rights back.
	if _, err := s.owner.ShareSession(ctx, s.session, s.collabID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.collab.Session(ctx, s.session); err != nil {
		t.Errorf("get after sharing again: %v", err)
	}
}

// TestShareChargesOwner: a collaborator's cell is the owner's: in the
// owner's history with the collaborator as actor, in the audit log
// charged to the owner with the actor, and against the owner's CPU
// budget (the owner's next cell is refused; the collaborator's own
// session is not).
func TestShareChargesOwner(t *testing.T) {
	s := newShared(t, options{svc: service.Config{CPUSecondsPerDay: 1}})
	ctx := ctxT(t)
	x, err := s.collab.Exec(ctx, s.session, client.ExecRequest{Code: "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass\nprint('burnt')"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("the collaborator's cell: %v %+v", err, x)
	}
	if x.Actor != s.collabID {
		t.Errorf("execution actor = %q, want the collaborator %q", x.Actor, s.collabID)
	}
	h, err := s.owner.History(ctx, s.session, 0, "")
	if err != nil || len(h.Executions) != 1 || h.Executions[0].Actor != s.collabID {
		t.Fatalf("owner's history: %+v, %v", h, err)
	}
	audit, err := s.e.admin.Audit(ctx, client.AuditOptions{Session: s.session})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, a := range audit.Entries {
		if a.Action == "execution" {
			found = true
			if a.UserID != s.ownerID || a.Actor != s.collabID {
				t.Errorf("audit row of the cell: user %q actor %q, want user %q (owner) actor %q", a.UserID, a.Actor, s.ownerID, s.collabID)
			}
		}
		if a.Action == "session.share" && (a.UserID != s.ownerID || a.Actor != s.ownerID) {
			t.Errorf("audit row of the share: %+v", a)
		}
	}
	if !found {
		t.Errorf("no execution in the session's audit: %+v", audit.Entries)
	}
	byActor, err := s.e.admin.Audit(ctx, client.AuditOptions{Actor: s.collabID})
	if err != nil {
		t.Fatal(err)
	}
	if len(byActor.Entries) != 1 || byActor.Entries[0].Action != "execution" || byActor.Entries[0].UserID != s.ownerID {
		t.Errorf("the audit of what the collaborator did: %+v; want its cell, charged to the owner", byActor.Entries)
	}
	ou, err := s.owner.Usage(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	cu, err := s.collab.Usage(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	if ou.CPUSecondsToday.Used < 1 || cu.CPUSecondsToday.Used != 0 {
		t.Errorf("CPU seconds today: owner %d, collaborator %d; want the owner charged", ou.CPUSecondsToday.Used, cu.CPUSecondsToday.Used)
	}
	_, err = s.owner.Exec(ctx, s.session, client.ExecRequest{Code: "print(1)"})
	wantProblem(t, "the owner past the budget", err, http.StatusTooManyRequests, "quota_exceeded")
	_, err = s.collab.Exec(ctx, s.session, client.ExecRequest{Code: "print(1)"})
	p := wantProblem(t, "the collaborator in the owner's spent session", err, http.StatusTooManyRequests, "quota_exceeded")
	if !strings.Contains(p.Detail, "owner") {
		t.Errorf("the problem does not say whose budget: %q", p.Detail)
	}
	own, err := s.collab.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.collab.Exec(ctx, own.ID, client.ExecRequest{Code: "print(1)"}); err != nil {
		t.Errorf("the collaborator's own session: %v", err)
	}
}

// TestShareEvents: the owner's session event stream (client.WatchSession)
// shows the cell a collaborator runs: started (with the actor), its
// output, done; after the owner deletes the session the stream ends.
func TestShareEvents(t *testing.T) {
	s := newShared(t, options{})
	ctx := ctxT(t)
	events := make(chan client.Event, 100)
	watched := make(chan error, 1)
	go func() { watched <- s.owner.WatchSession(ctx, s.session, func(ev client.Event) { events <- ev }) }()
	// The watcher may open after a cell has started: run cells until one
	// is seen whole, from started to done.
	seen := map[string][]client.Event{}
	var x *client.Execution
	for i := 0; i < 10 && x == nil; i++ {
		e, err := s.collab.Exec(ctx, s.session, client.ExecRequest{Code: "print('from collab')"})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				seen[ev.ExecutionID] = append(seen[ev.ExecutionID], ev)
				if ev.Type == "done" && ev.ExecutionID == e.ID {
					break wait
				}
			case <-deadline:
				break wait
			}
		}
		if evs := seen[e.ID]; len(evs) > 0 && evs[0].Type == "started" && evs[len(evs)-1].Type == "done" {
			x = e
		}
	}
	if x == nil {
		t.Fatalf("the watcher never saw a whole cell of the collaborator's: %v", seen)
	}
	var got []string
	var out bytes.Buffer
	for _, ev := range seen[x.ID] {
		got = append(got, ev.Type)
		switch ev.Type {
		case "started":
			if ev.Execution == nil || ev.Execution.Actor != s.collabID {
				t.Errorf("started: %+v, want the collaborator as actor", ev.Execution)
			}
		case "stdout":
			out.WriteString(ev.Data)
		case "done":
			if ev.Execution == nil || ev.Execution.Result == nil || ev.Execution.Status != "ok" {
				t.Errorf("done: %+v", ev.Execution)
			}
		}
	}
	if out.String() != "from collab\n" {
		t.Errorf("events %v with stdout %q, want %q", got, out.String(), "from collab\n")
	}
	if err := s.owner.DeleteSession(ctx, s.session); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watched:
		if err != nil {
			t.Errorf("WatchSession after the session ended: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the event stream is still open after the session ended")
	}
}

// TestShareRevokedWhileQueued: a collaborator's cell that waits behind
// the owner's running cell does not run once the share is revoked in the
// meantime: it ends with 404 and is not in the history.
func TestShareRevokedWhileQueued(t *testing.T) {
	s := newShared(t, options{})
	ctx := ctxT(t)
	owner := make(chan error, 1)
	go func() {
		_, err := s.owner.Exec(ctx, s.session, client.ExecRequest{Code: "import time\ntime.sleep(3)"})
		owner <- err
	}()
	for {
		h, err := s.owner.History(ctx, s.session, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Executions) == 1 && h.Executions[0].Status == "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	queued := make(chan struct{})
	collab := make(chan error, 1)
	go func() {
		var once bool
		_, err := s.collab.ExecStream(ctx, s.session, client.ExecRequest{Code: "print('should not run')"}, func(ev client.Event) {
			if ev.Type == client.EventQueued && !once {
				once = true
				close(queued)
			}
		})
		collab <- err
	}()
	select {
	case <-queued:
	case err := <-collab:
		t.Fatalf("the collaborator's cell ended before it was queued: %v", err)
	}
	if err := s.owner.RevokeShare(ctx, s.session, s.collabID); err != nil {
		t.Fatal(err)
	}
	if err := <-owner; err != nil {
		t.Fatal(err)
	}
	err := <-collab
	if err == nil {
		t.Fatal("the queued cell ran after the share was revoked")
	}
	wantProblem(t, "the queued cell after the revoke", err, http.StatusNotFound, "not_found")
	h, err := s.owner.History(ctx, s.session, 0, "")
	if err != nil || len(h.Executions) != 1 {
		t.Errorf("history after the revoke: %+v, %v; want only the owner's cell", h, err)
	}
}

// TestShareRoleAndBadInput: a role change takes effect on the next
// request both ways (PUT again answers 200, a new share 201); a bad role,
// sharing with oneself and an unknown user are 400, 400 and 404 with a
// message that says what is wrong.
func TestShareRoleAndBadInput(t *testing.T) {
	s := newShared(t, options{})
	ctx := ctxT(t)
	run := func() error {
		_, err := s.viewer.Exec(ctx, s.session, client.ExecRequest{Code: "print(1)"})
		return err
	}
	wantProblem(t, "a viewer runs a cell", run(), http.StatusForbidden, "forbidden")
	put := func(c *client.Client, user, role string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "PUT", s.e.url+"/v1/sessions/"+s.session+"/shares/"+user, strings.NewReader(`{"role":"`+role+`"}`))
		req.Header.Set("Authorization", "Bearer "+s.keys[c])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := put(s.owner, s.viewerID, "collaborator"); err != nil || code != http.StatusOK {
		t.Fatalf("changing the role: %d, %v; want 200", code, err)
	}
	if err := run(); err != nil {
		t.Errorf("after the change to collaborator: %v", err)
	}
	if code, err := put(s.owner, s.strangerID, "viewer"); err != nil || code != http.StatusCreated {
		t.Fatalf("a new share: %d, %v; want 201", code, err)
	}
	if _, err := s.owner.ShareSession(ctx, s.session, s.viewerID, "viewer"); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "after the change back to viewer", run(), http.StatusForbidden, "forbidden")

	_, err := s.owner.ShareSession(ctx, s.session, s.viewerID, "admin")
	if p := wantProblem(t, "role admin", err, http.StatusBadRequest, "invalid"); !strings.Contains(p.Detail, "viewer, collaborator") {
		t.Errorf("the problem does not say which roles exist: %q", p.Detail)
	}
	_, err = s.owner.ShareSession(ctx, s.session, s.ownerID, "viewer")
	wantProblem(t, "sharing with oneself", err, http.StatusBadRequest, "invalid")
	_, err = s.owner.ShareSession(ctx, s.session, "nobody", "viewer")
	if p := wantProblem(t, "an unknown user", err, http.StatusNotFound, "not_found"); !strings.Contains(p.Detail, "no user") {
		t.Errorf("the problem does not name the user: %q", p.Detail)
	}
	shares, err := s.owner.Shares(ctx, s.session)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, sh := range shares.Shares {
		roles[sh.UserID] = sh.Role
	}
	want := map[string]string{s.collabID: "collaborator", s.viewerID: "viewer", s.strangerID: "viewer"}
	if fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Errorf("shares = %v, want %v", roles, want)
	}
}

// TestShareQueueChargesOwner: with one cell at a time per user, a
// collaborator's cell in the owner's session waits for the owner's slot
// (queued, reason "user") while the owner runs a cell elsewhere; the
// collaborator's own session does not wait.
func TestShareQueueChargesOwner(t *testing.T) {
	s := newShared(t, options{svc: service.Config{UserConcurrency: 1}})
	ctx := ctxT(t)
	other, err := s.owner.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	owner := make(chan error, 1)
	go func() {
		_, err := s.owner.Exec(ctx, other.ID, client.ExecRequest{Code: "import time\ntime.sleep(60)"})
		owner <- err
	}()
	for {
		h, err := s.owner.History(ctx, other.ID, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Executions) == 1 && h.Executions[0].Status == "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	own, err := s.collab.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ownQueued bool
	if _, err := s.collab.ExecStream(ctx, own.ID, client.ExecRequest{Code: "print(1)"}, func(ev client.Event) {
		ownQueued = ownQueued || ev.Type == client.EventQueued
	}); err != nil || ownQueued {
		t.Errorf("the collaborator's own session: %v, queued %v; want it to run at once", err, ownQueued)
	}
	var reason string
	if _, err := s.collab.ExecStream(ctx, s.session, client.ExecRequest{Code: "print(2)"}, func(ev client.Event) {
		if ev.Type == client.EventQueued && reason == "" {
			reason = ev.Reason
			// The owner's slot frees when its cell stops.
			go s.owner.Interrupt(ctx, other.ID)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if reason != "user" {
		t.Errorf("the collaborator's cell in the owner's session was queued for %q, want %q (the owner's slot)", reason, "user")
	}
	s.owner.Interrupt(ctx, other.ID)
	if err := <-owner; err != nil {
		t.Fatal(err)
	}
}
