package compat

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// The postgres language's cases beside the shared ones: a transaction
// that spans cells, and a CSV loaded with \copy from the workspace. They
// run after "state", in the same session, on both sides.
func init() {
	cases = append(cases,
		compatCase{
			name: "transaction-begin",
			code: map[string]string{"postgres": "BEGIN;\nINSERT INTO state VALUES (1000);"},
			want: func(t *testing.T, l string, o outcome) {
				if o.status != "ok" || o.stdout != "1 row affected\n" {
					t.Errorf("%+v", o)
				}
			},
		},
		compatCase{
			name: "transaction-end",
			code: map[string]string{"postgres": "SELECT count(*) AS inside FROM state;\nROLLBACK;\nSELECT count(*) AS after FROM state;"},
			want: func(t *testing.T, l string, o outcome) {
				if !strings.Contains(o.displays, " inside\n--------\n      2\n") || !strings.Contains(o.displays, " after\n-------\n     1\n") {
					t.Errorf("the transaction did not span the cells: %q", o.displays)
				}
			},
		},
		compatCase{
			name:   "copy-csv",
			upload: map[string]string{"cities.csv": "id,city\n1,Oslo\n2,\"Lima, Peru\"\n"},
			code: map[string]string{"postgres": "CREATE TABLE cities(id int, city text);\n" +
				"\\copy cities FROM 'cities.csv' WITH (FORMAT csv, HEADER)\nSELECT city FROM cities ORDER BY id;"},
			want: func(t *testing.T, l string, o outcome) {
				if o.stdout != "2 rows copied\n" || !strings.Contains(o.displays, "Lima, Peru") {
					t.Errorf("%+v", o)
				}
			},
		},
		compatCase{
			name: "describe",
			code: map[string]string{"postgres": "\\d cities"},
			want: func(t *testing.T, l string, o outcome) {
				if !strings.Contains(o.stdout, `Table "cities"`) || !strings.Contains(o.displays, " city   | text") {
					t.Errorf("%+v", o)
				}
			},
		},
	)
}

// hostArgv is the command line of the host side's kernel: as nobody for
// postgres when the test runs as root (PostgreSQL refuses root; in the
// sandbox it runs as the sandbox's user), with the server it starts
// stopped when the test ends (it runs in a session of its own).
func hostArgv(t *testing.T, language string, argv []string, dir string) []string {
	if language != "postgres" || os.Geteuid() != 0 {
		return argv
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chown(dir, 65534, 65534)
	t.Cleanup(func() { stopHostPostgres(dir) })
	return append([]string{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, argv...)
}

func stopHostPostgres(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, ".kiln/postgres/data/postmaster.pid"))
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if pid <= 0 || syscall.Kill(pid, syscall.SIGQUIT) != nil {
		return
	}
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// postgresEngine is an engine on the native backend, or a skip.
func postgresEngine(t *testing.T) *engine.Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		t.Skip("PostgreSQL 15 is not installed (the Debian package postgresql-15)")
	}
	if _, err := os.Stat("/usr/lib/python3/dist-packages/psycopg2"); err != nil {
		t.Skip("psycopg2 is not installed (the Debian package python3-psycopg2)")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(b, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func pgSession(t *testing.T, e *engine.Engine, lim kiln.Limits) *engine.Session {
	t.Helper()
	s, err := e.NewSession(context.Background(), engine.SessionSpec{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func pgRun(t *testing.T, s *engine.Session, language, code string, timeout time.Duration) kiln.CellResult {
	t.Helper()
	r, err := s.Run(context.Background(), engine.Cell{Language: language, Code: code, Timeout: timeout}, engine.Events{})
	if err != nil {
		t.Fatalf("%q: %v", code, err)
	}
	return r
}

func pgOK(t *testing.T, s *engine.Session, language, code string) kiln.CellResult {
	t.Helper()
	r := pgRun(t, s, language, code, 0)
	if r.Status != kiln.StatusOK {
		t.Fatalf("%q: %s %+v %q %s", code, r.Status, r.Error, r.Stderr, r.Notice)
	}
	return r
}

func pgText(r kiln.CellResult) string {
	var b strings.Builder
	for _, o := range r.Outputs {
		b.WriteString(engine.Text(o) + "\n")
	}
	return b.String()
}

// TestPostgresFirstQuery reports the time from a new session's first
// postgres cell (the kernel's start, the cluster's copy or initdb and the
// server's start in the sandbox) to its answer: the median of five
// sessions.
func TestPostgresFirstQuery(t *testing.T) {
	e := postgresEngine(t)
	var times []time.Duration
	for i := 0; i < 5; i++ {
		s := pgSession(t, e, kiln.Limits{})
		pgOK(t, s, "bash", "true") // the sandbox is up: time only the database
		start := time.Now()
		pgOK(t, s, "postgres", "SELECT 1;")
		times = append(times, time.Since(start))
		s.Close(context.Background())
	}
	slices.Sort(times)
	t.Logf("time to the first query (the kernel, the cluster: a copy of the template or initdb, the server's start, SELECT 1): median %v of %v", times[len(times)/2], times)
}

// TestPostgresSandbox: what only a sandboxed session shows. A timeout
// cancels the query and keeps the server; a restart of the kernel keeps
// the data (it is in the workspace); server-side COPY reads a workspace
// file; a Python cell reaches the same database through the socket.
func TestPostgresSandbox(t *testing.T) {
	e := postgresEngine(t)
	s := pgSession(t, e, kiln.Limits{})
	pgOK(t, s, "postgres", "CREATE TABLE kept(x int); INSERT INTO kept VALUES (42);")
	started := pgText(pgOK(t, s, "postgres", "SELECT pg_postmaster_start_time() AS started;"))

	t.Run("timeout", func(t *testing.T) {
		begin := time.Now()
		r := pgRun(t, s, "postgres", "SELECT pg_sleep(60);", time.Second)
		if r.Status != kiln.StatusTimeout || time.Since(begin) > 10*time.Second {
			t.Errorf("pg_sleep(60) with a 1 s timeout: %s after %v (%s)", r.Status, time.Since(begin), r.Notice)
		}
		if got := pgText(pgOK(t, s, "postgres", "SELECT x FROM kept;")); !strings.Contains(got, "42") {
			t.Errorf("after the timeout: %q", got)
		}
		if now := pgText(pgOK(t, s, "postgres", "SELECT pg_postmaster_start_time() AS started;")); now != started {
			t.Errorf("the server was started again: %q, then %q", started, now)
		}
	})

	t.Run("restart", func(t *testing.T) {
		if err := s.Restart(context.Background(), "postgres"); err != nil {
			t.Fatal(err)
		}
		if got := pgText(pgOK(t, s, "postgres", "SELECT x FROM kept;")); !strings.Contains(got, "42") {
			t.Errorf("after a restart the table is gone: %q", got)
		}
	})

	t.Run("copy", func(t *testing.T) {
		if err := s.Agent().WriteFile(context.Background(), "people.csv", []byte("name,age\nada,36\ngrace,45\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := pgOK(t, s, "postgres", "CREATE TABLE people(name text, age int);\nCOPY people FROM '/workspace/people.csv' WITH (FORMAT csv, HEADER);\nSELECT sum(age) AS total FROM people;")
		if r.Stdout != "2 rows affected\n" || !strings.Contains(pgText(r), "81") {
			t.Errorf("server-side COPY: %q %q", r.Stdout, pgText(r))
		}
	})

	t.Run("python", func(t *testing.T) {
		r := pgOK(t, s, "python", `import psycopg2, pandas
conn = psycopg2.connect(host="/workspace/.kiln/postgres", dbname="postgres")
cur = conn.cursor()
cur.execute("SELECT x FROM kept")
print(cur.fetchall())
import warnings
warnings.simplefilter("ignore")  # pandas prefers SQLAlchemy to a DBAPI connection
print(pandas.read_sql("SELECT name, age FROM people ORDER BY age", conn).to_csv(index=False), end="")`)
		if r.Stdout != "[(42,)]\nname,age\nada,36\ngrace,45\n" {
			t.Errorf("python: %q %q", r.Stdout, r.Stderr)
		}
		r = pgOK(t, s, "bash", "psql -X -At -h /workspace/.kiln/postgres -d postgres -c 'SELECT count(*) FROM people'")
		if r.Stdout != "2\n" {
			t.Errorf("psql: %q %q", r.Stdout, r.Stderr)
		}
	})
}

// TestPostgresDiskLimit: the data directory is in the workspace, so the
// database counts against its size. A table that grows past a small limit
// fails with an error that says so, and the server goes on. A workspace
// so full that PostgreSQL cannot write its WAL stops the server (it
// cannot run without); the error says why, the session goes on, and once
// files are deleted the next cell starts the server again on intact data.
func TestPostgresDiskLimit(t *testing.T) {
	e := postgresEngine(t)
	s := pgSession(t, e, kiln.Limits{WorkspaceBytes: 64 * kiln.MiB})
	pgOK(t, s, "postgres", "CREATE TABLE small(x int); INSERT INTO small SELECT generate_series(1, 50000);")
	r := pgRun(t, s, "postgres", "CREATE TABLE big AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 100000) g;", time.Minute)
	// DiskFull (SQLSTATE 53100): "No space left on device", or "wrote only
	// 4096 of 8192 bytes" when the last page fits in part.
	if r.Status != kiln.StatusError || r.Error == nil || r.Error.Name != "DiskFull" || !strings.Contains(r.Error.Message, "disk limit") {
		t.Fatalf("filling the workspace: %s %+v %q", r.Status, r.Error, r.Notice)
	}
	t.Logf("a table past the limit: %s", r.Error.Message)
	if got := pgText(pgOK(t, s, "postgres", "SELECT count(*) FROM small;")); !strings.Contains(got, "50000") {
		t.Errorf("after the full disk: %q", got)
	}

	// Leave about 1.5 MB, less than an UPDATE of every row writes to the WAL.
	pgOK(t, s, "bash", "fallocate -l $(( $(df -B1 --output=avail /workspace | tail -1) - 1500000 )) /workspace/filler")
	var failed bool
	for i := 0; i < 5 && !failed; i++ {
		r = pgRun(t, s, "postgres", "UPDATE small SET x = x + 1;", time.Minute)
		if r.Status == kiln.StatusError {
			failed = true
			if r.Error == nil || !strings.Contains(r.Error.Message, "No space left on device") || !strings.Contains(r.Error.Message, "disk limit") {
				t.Errorf("a full WAL: %+v", r.Error)
			}
			t.Logf("a full WAL: %s", r.Error.Message)
		}
	}
	if !failed {
		t.Fatal("the UPDATEs never ran out of space")
	}
	if r := pgOK(t, s, "bash", "rm /workspace/filler && echo freed"); r.Stdout != "freed\n" {
		t.Errorf("bash after the full disk: %q", r.Stdout)
	}
	if got := pgText(pgOK(t, s, "postgres", "SELECT count(*) FROM small;")); !strings.Contains(got, "50000") {
		t.Errorf("after space was freed: %q", got)
	}
}
