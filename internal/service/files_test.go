package service

import (
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// FuzzCleanPath: an accepted path is clean, relative and inside the
// workspace; nothing else is accepted.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b.txt", "../x", "/etc/passwd", "a/../../b", "a\x00b", `..\x`, "./a/./b/", "", ".", "a//b", strings.Repeat("a/", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanPath(p, true)
		if err != nil {
			if kiln.KindOf(err) != kiln.Invalid && kiln.KindOf(err) != kiln.TooLarge {
				t.Fatalf("%q: error kind %s", p, kiln.KindOf(err))
			}
			return
		}
		if got == "" {
			return // the workspace root
		}
		if path.IsAbs(got) || got != path.Clean(got) || got == ".." || strings.HasPrefix(got, "../") ||
			strings.ContainsAny(got, "\x00\\") {
			t.Fatalf("%q accepted as %q", p, got)
		}
	})
}

// TestFilesRulesAndAudit: the service, not a front end, checks paths,
// turns the agent's file errors into kiln's kinds and audits every change
// to a workspace, failed ones included.
func TestFilesRulesAndAudit(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 2*time.Minute)
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	f := ts.Files(u, sess.ID)
	defer f.Close()
	if _, err := f.Mkdir(ctx, "../out"); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("Mkdir ../out: %v, want invalid", err)
	}
	fi, created, err := f.Write(ctx, "d/a.txt", strings.NewReader("hello"), false)
	if err != nil || !created || fi.Path != "d/a.txt" || fi.Size != 5 || fi.Type != "file" {
		t.Fatalf("Write d/a.txt: %+v created=%v err=%v", fi, created, err)
	}
	if _, _, err := f.Write(ctx, "d/a.txt", strings.NewReader("x"), false); kiln.KindOf(err) != kiln.Conflict {
		t.Errorf("Write over an existing file without overwrite: %v, want conflict", err)
	}
	var buf strings.Builder
	if err := f.Read(ctx, "d/a.txt", &buf); err != nil || buf.String() != "hello" {
		t.Errorf("Read: %q, %v", buf.String(), err)
	}
	if err := f.Delete(ctx, "d", false); kiln.KindOf(err) != kiln.Conflict || !strings.Contains(kiln.Message(err), "recursive=true") {
		t.Errorf("Delete of a full directory: %v, want conflict naming recursive=true", err)
	}
	if _, err := f.Stat(ctx, "nope"); kiln.KindOf(err) != kiln.NotFound || !strings.Contains(kiln.Message(err), sess.ID) {
		t.Errorf("Stat of a missing file: %v, want not_found naming the session", err)
	}
	if _, err := f.Move(ctx, "d/a.txt", "b.txt", false); err != nil {
		t.Fatal(err)
	}
	entries, _, err := ts.store.ListAudit(ctx, store.AuditFilter{SessionID: sess.ID}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "file.") {
			got = append(got, e.Action+":"+e.Outcome)
		}
	}
	want := []string{"file.write:ok", "file.write:conflict", "file.delete:conflict", "file.move:ok"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit: %v, want %v", got, want)
	}
}
