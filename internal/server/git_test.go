package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestGitRoutes: the /git routes make the workspace a repository, list
// a new file as untracked, stage and unstage it, diff a change, stage and commit it as the
// caller, and log it; a path outside the workspace, an empty message and
// a commit with nothing staged are refused saying why, and a viewer
// reads but does not commit.
func TestGitRoutes(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("needs git (Debian's git package)")
	}
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.admin.GitStatus(ctx, s.ID)
	if err != nil || st.Repo {
		t.Fatalf("status of a fresh workspace: %+v, %v; want not a repository", st, err)
	}
	if st, err = e.admin.GitInit(ctx, s.ID); err != nil || !st.Repo || st.Branch != "main" {
		t.Fatalf("init: %+v, %v; want a repository on main", st, err)
	}
	if _, err := e.admin.Upload(ctx, s.ID, "notes.txt", strings.NewReader("one\n"), false); err != nil {
		t.Fatal(err)
	}
	st, err = e.admin.GitStatus(ctx, s.ID)
	if err != nil || len(st.Files) != 1 || st.Files[0].Path != "notes.txt" || st.Files[0].Index != "?" {
		t.Fatalf("status after a new file: %+v, %v; want notes.txt untracked", st, err)
	}
	_, err = e.admin.GitCommit(ctx, s.ID, "nothing staged")
	wantProblem(t, "commit with nothing staged", err, 409, "conflict")
	_, err = e.admin.GitStage(ctx, s.ID, []string{"../etc/passwd"})
	wantProblem(t, "stage a path outside the workspace", err, 400, "invalid")
	st, err = e.admin.GitStage(ctx, s.ID, []string{"notes.txt"})
	if err != nil || len(st.Files) != 1 || st.Files[0].Index != "A" {
		t.Fatalf("status after stage: %+v, %v; want notes.txt added", st, err)
	}
	st, err = e.admin.GitUnstage(ctx, s.ID, []string{"notes.txt"})
	if err != nil || len(st.Files) != 1 || st.Files[0].Index != "?" {
		t.Fatalf("status after unstage: %+v, %v; want notes.txt untracked again", st, err)
	}
	if _, err := e.admin.GitStage(ctx, s.ID, []string{"notes.txt"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.GitCommit(ctx, s.ID, "  ")
	wantProblem(t, "an empty message", err, 400, "invalid")
	c, err := e.admin.GitCommit(ctx, s.ID, "Add notes")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hash) != 40 || c.Subject != "Add notes" || c.Author != "admin" {
		t.Errorf("commit %+v, want a 40-hex hash, the subject, and the caller as author", c)
	}
	if _, err := e.admin.Upload(ctx, s.ID, "notes.txt", strings.NewReader("one\ntwo\n"), true); err != nil {
		t.Fatal(err)
	}
	d, err := e.admin.GitDiff(ctx, s.ID, "notes.txt", false)
	if err != nil || !strings.Contains(d.Diff, "+two") || d.Cut {
		t.Errorf("diff of a changed file: %+v, %v; want +two", d, err)
	}

	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.ShareSession(ctx, s.ID, u.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	viewer, _ := client.New(e.url, k.Secret)
	log, err := viewer.GitLog(ctx, s.ID, 0)
	if err != nil || len(log.Commits) != 1 || log.Commits[0].Hash != c.Hash {
		t.Errorf("a viewer's log: %+v, %v; want the one commit", log, err)
	}
	_, err = viewer.GitStage(ctx, s.ID, []string{"notes.txt"})
	wantProblem(t, "a viewer stages", err, 403, "forbidden")
}

// TestGitRestoreAndBundle: /git/restore brings a file back as it was in a
// commit (a bad commit name is a 400), and /git/bundle starts a
// workspace's repository from an uploaded bundle, once.
func TestGitRestoreAndBundle(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("needs git (Debian's git package)")
	}
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GitInit(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Upload(ctx, s.ID, "notes.txt", strings.NewReader("first\n"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GitStage(ctx, s.ID, []string{"notes.txt"}); err != nil {
		t.Fatal(err)
	}
	c, err := e.admin.GitCommit(ctx, s.ID, "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Upload(ctx, s.ID, "notes.txt", strings.NewReader("overwritten\n"), true); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.GitRestore(ctx, s.ID, "--output=x", "notes.txt")
	wantProblem(t, "restore from an option", err, 400, "invalid")
	if _, err := e.admin.GitRestore(ctx, s.ID, c.Hash[:10], "notes.txt"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if _, err := e.admin.Download(ctx, s.ID, "notes.txt", &b); err != nil || b.String() != "first\n" {
		t.Errorf("notes.txt after the restore: %q, %v; want first", b.String(), err)
	}

	// A bundle made on the host, uploaded to a second session.
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main", "src"}, {"-C", "src", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "from the bundle"},
		{"-C", "src", "bundle", "create", "-q", "../repo.bundle", "HEAD", "main"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	bundle, err := os.Open(filepath.Join(dir, "repo.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	defer bundle.Close()
	s2, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Upload(ctx, s2.ID, "repo.bundle", bundle, false); err != nil {
		t.Fatal(err)
	}
	if st, err := e.admin.GitFromBundle(ctx, s2.ID, "repo.bundle"); err != nil || !st.Repo {
		t.Fatalf("from the bundle: %+v, %v", st, err)
	}
	log, err := e.admin.GitLog(ctx, s2.ID, 5)
	if err != nil || len(log.Commits) != 1 || log.Commits[0].Subject != "from the bundle" {
		t.Errorf("log after the bundle: %+v, %v; want its one commit", log, err)
	}
	_, err = e.admin.GitFromBundle(ctx, s2.ID, "repo.bundle")
	wantProblem(t, "a bundle into a repository", err, 409, "conflict")
}
