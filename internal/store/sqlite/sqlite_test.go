package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/store/storetest"
)

func open(t testing.TB, path string) *store.DB {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, filepath.Join(t.TempDir(), "kiln.db"))
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestPersistsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := open(t, path)
	u := store.User{Name: "alice"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	ss := store.Session{UserID: u.ID, Metadata: map[string]string{"conversation": "c1"}}
	if err := s.CreateSession(ctx, &ss); err != nil {
		t.Fatal(err)
	}
	e := store.Execution{SessionID: ss.ID, UserID: u.ID, Language: "python", Code: "1+1"}
	if err := s.CreateExecution(ctx, &e); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v != store.LatestVersion() {
		t.Errorf("version after reopen = %d, %v; want %d", v, err, store.LatestVersion())
	}
	got, err := s.Execution(ctx, u.ID, e.ID)
	if err != nil || got.Code != "1+1" || got.Seq != 1 {
		t.Errorf("execution after reopen = %+v, %v", got, err)
	}
	list, _, err := s.ListSessions(ctx, u.ID, store.SessionFilter{Metadata: map[string]string{"conversation": "c1"}}, store.Page{})
	if err != nil || len(list) != 1 || list[0].ID != ss.ID {
		t.Errorf("sessions after reopen = %+v, %v", list, err)
	}
	e2 := store.Execution{SessionID: ss.ID, UserID: u.ID, Language: "python", Code: "2"}
	if err := s.CreateExecution(ctx, &e2); err != nil || e2.Seq != 2 {
		t.Errorf("next execution after reopen: seq %d, %v; want 2", e2.Seq, err)
	}
}

// TestConcurrentStart opens one new file from several handles at once, as
// two processes starting together would: each migration is applied once.
func TestConcurrentStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	storetest.ConcurrentStart(t, func(ctx context.Context) (*store.DB, error) { return sqlite.Open(ctx, path) })
}

func TestPragmas(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	db := s.SQL()
	db.SetMaxOpenConns(3) // check settings hold on every connection, not only the first
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
		// NORMAL: in WAL mode a commit is not synced, a checkpoint is. A
		// power cut can lose the last commits, never corrupt the file; a
		// crash of kiln alone loses nothing.
		{"synchronous", "1"},
	} {
		for range 3 {
			var got string
			if err := db.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
			}
		}
	}
}

func TestFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := open(t, path)
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("database file mode = %v, want 0600", perm)
	}
}
