package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// nobody runs the kernel's server in tests that run as root: PostgreSQL
// refuses to run as root, and in a sandbox it runs as the sandbox's user.
const nobody = 65534

// postgresReady skips the test when the server or the driver is missing.
func postgresReady(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		t.Skip("PostgreSQL 15 is not installed (the Debian package postgresql-15)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import sys; sys.path.append('/usr/lib/python3/dist-packages'); import psycopg2").Run(); err != nil {
		t.Skip("psycopg2 is not installed (the Debian package python3-psycopg2)")
	}
}

// postgresWorkspace makes a workspace the kernel's user can write, and
// stops the server the kernel started there when the test ends (it runs in
// a session of its own, so stopping the kernel leaves it running).
func postgresWorkspace(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		os.Chmod(filepath.Dir(dir), 0o755)
		os.Chown(dir, nobody, nobody)
	}
	t.Cleanup(func() { stopPostgres(t, dir) })
	return dir
}

// postgresArgv is the kernel's command line as the tests run it: as nobody
// when the test runs as root.
func postgresArgv(argv []string) []string {
	if os.Geteuid() != 0 {
		return argv
	}
	return append([]string{"/usr/bin/setpriv", "--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--"}, argv...)
}

func startPostgres(t testing.TB, dir string, env ...string) *localKernel {
	t.Helper()
	postgresReady(t)
	argv, payload := Postgres().Boot()
	return kerneltest.StartBoot(t, postgresArgv(argv), env, payload, dir)
}

// serverPid is the pid in postmaster.pid, or 0.
func serverPid(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, ".kiln/postgres/data/postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	return pid
}

func stopPostgres(t testing.TB, dir string) {
	waitInitdb(dir)
	pid := serverPid(dir)
	if pid <= 0 || syscall.Kill(pid, syscall.SIGQUIT) != nil {
		return
	}
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// waitInitdb waits until no initdb works on the workspace's cluster: it
// runs in a session of its own, so killing a kernel's process group leaves
// it running, and a test that ends before its first query would otherwise
// remove the directory while initdb still writes there. initdb holds
// initdb.lock while it runs, as the kernel does around a template copy.
func waitInitdb(dir string) {
	f, err := os.Open(filepath.Join(dir, ".kiln/postgres/initdb.lock"))
	if err != nil {
		return
	}
	defer f.Close()
	for i := 0; i < 1200; i++ { // a bound: initdb's own time-out is shorter
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pgOK(t *testing.T, k *localKernel, code string) cellResult {
	t.Helper()
	r := k.Exec(code)
	if r.Status != kernelproto.StatusOK {
		t.Fatalf("%q: status %q, error %+v, stderr %q", code, r.Status, r.Error, r.Stderr)
	}
	return r
}

func pgRows(t *testing.T, k *localKernel, query string) [][]any {
	t.Helper()
	r := pgOK(t, k, query)
	if len(r.Displays) != 1 {
		t.Fatalf("%q: %d displays, want 1", query, len(r.Displays))
	}
	return tableOf(t, r.Displays[0]).Rows
}

// TestPostgresState: a table made in one cell is filled in the next and
// read in a third; a result comes as text, HTML and JSON; a transaction
// spans cells.
func TestPostgresState(t *testing.T) {
	dir := postgresWorkspace(t)
	k := startPostgres(t, dir)
	if k.Ready.Language != "postgres" || !strings.HasPrefix(k.Ready.Version, "15.") {
		t.Errorf("ready = %+v", k.Ready)
	}
	pgOK(t, k, "CREATE TABLE t(id serial PRIMARY KEY, name text, score numeric, ok boolean, doc jsonb, ratio float8);")
	r := pgOK(t, k, `INSERT INTO t(name, score, ok, doc, ratio) VALUES ('alice', 9.5, true, '{"a": [1, 2]}', 0.25), ('<b>bob & co</b>', NULL, false, NULL, NULL);
INSERT INTO t(name, score) VALUES ('日本語', 12);`)
	if r.Stdout != "2 rows affected\n1 row affected\n" {
		t.Errorf("stdout = %q, want the rows affected", r.Stdout)
	}
	r = pgOK(t, k, "SELECT * FROM t ORDER BY id")
	d := r.Displays[0]
	want := ` id | name            | score | ok   | doc           | ratio
----+-----------------+-------+------+---------------+-------
  1 | alice           |   9.5 | t    | {"a": [1, 2]} |  0.25
  2 | <b>bob & co</b> |  NULL | f    | NULL          |  NULL
  3 | 日本語          |    12 | NULL | NULL          |  NULL
(3 rows)`
	if got := text(t, d); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	tb := tableOf(t, d)
	wantRows := [][]any{
		{1.0, "alice", "9.5", true, map[string]any{"a": []any{1.0, 2.0}}, 0.25},
		{2.0, "<b>bob & co</b>", nil, false, nil, nil},
		{3.0, "日本語", "12", nil, nil, nil},
	}
	if !cmp.Equal(tb.Columns, []string{"id", "name", "score", "ok", "doc", "ratio"}) || !cmp.Equal(tb.Rows, wantRows) {
		t.Errorf("json = %+v", tb)
	}
	if h := htmlOf(t, d); !strings.Contains(h, "<th>name</th>") || !strings.Contains(h, "&lt;b&gt;bob &amp; co&lt;/b&gt;") ||
		!strings.Contains(h, `<td class="null">NULL</td>`) {
		t.Errorf("html = %s", h)
	}
	// BEGIN in one cell, the change in the next, ROLLBACK in a third.
	pgOK(t, k, "BEGIN;")
	pgOK(t, k, "DELETE FROM t;")
	if got := pgRows(t, k, "SELECT count(*) FROM t"); !cmp.Equal(got, [][]any{{0.0}}) {
		t.Errorf("inside the transaction: %v", got)
	}
	pgOK(t, k, "ROLLBACK;")
	if got := pgRows(t, k, "SELECT count(*) FROM t"); !cmp.Equal(got, [][]any{{3.0}}) {
		t.Errorf("after ROLLBACK: %v", got)
	}
}

// TestPostgresError: an error names the statement, the cell's line and
// PostgreSQL's position; the statements before it stay done.
func TestPostgresError(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	r := k.Exec("CREATE TABLE a(x int);\n-- a comment\nINSERT INTO a VALUES (1);\n\n  SELECT x,\n    nope FROM a;\nINSERT INTO a VALUES (2);")
	if r.Status != kernelproto.StatusError || r.Error == nil {
		t.Fatalf("status %q, error %+v; want an error", r.Status, r.Error)
	}
	e := r.Error
	if e.Name != "UndefinedColumn" || e.Line != 6 || !strings.Contains(e.Message, "statement 3 of 4, line 5, position 15 (line 6)") ||
		!strings.Contains(e.Message, `column "nope" does not exist`) {
		t.Errorf("error = %+v", e)
	}
	tb := strings.Join(e.Traceback, "\n")
	if !strings.Contains(tb, "SELECT x, nope FROM a;") || !strings.Contains(tb, "SQLSTATE 42703") ||
		!strings.Contains(tb, "LINE 6:     nope FROM a;\n            ^") {
		t.Errorf("traceback:\n%s", tb)
	}
	if got := pgRows(t, k, "SELECT x FROM a"); !cmp.Equal(got, [][]any{{1.0}}) {
		t.Errorf("rows = %v, want only the row inserted before the error", got)
	}
	r = k.Exec("SELECT 1;\nSELEC 2;")
	if r.Error == nil || r.Error.Name != "SyntaxError" || r.Error.Line != 2 || !strings.Contains(r.Error.Message, "statement 2 of 2, line 2, position 1") {
		t.Errorf("syntax error = %+v", r.Error)
	}
	r = k.Exec("CREATE TABLE u(x int UNIQUE); INSERT INTO u VALUES (1); INSERT INTO u VALUES (1)")
	if r.Error == nil || r.Error.Name != "UniqueViolation" || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), "DETAIL: Key (x)=(1) already exists.") {
		t.Errorf("error = %+v, want a UniqueViolation with its detail", r.Error)
	}
	r = k.Exec("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$;")
	if r.Status != kernelproto.StatusOK || !strings.Contains(r.Stderr, "NOTICE:  hello 42") {
		t.Errorf("notice: %+v", r)
	}
}

// TestPostgresSplit: semicolons in strings, quoted names, dollar-quoted
// bodies and comments do not end a statement; a last one without runs.
func TestPostgresSplit(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	r := pgOK(t, k, `CREATE TABLE "we;ird"(v text); -- a comment; with a semicolon
/* a block /* nested; */ comment; */
CREATE FUNCTION f(x text) RETURNS text AS $body$
BEGIN
  RETURN 'a;' || x || $$;$$;
END;
$body$ LANGUAGE plpgsql;
INSERT INTO "we;ird" VALUES (f('x;y')), (E'it\'s;');
SELECT v FROM "we;ird" ORDER BY v
-- trailing comment`)
	if len(r.Displays) != 1 {
		t.Fatalf("%d displays", len(r.Displays))
	}
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{"a;x;y;"}, {"it's;"}}) {
		t.Errorf("rows = %v", got)
	}
	for _, code := range []string{"", "  \n-- nothing\n", ";;", "/* only */"} {
		if r := pgOK(t, k, code); len(r.Displays) != 0 || r.Stdout != "" {
			t.Errorf("%q: %+v", code, r)
		}
	}
}

// TestPostgresInterrupt: SIGINT (a timeout or cancel) cancels the running
// query; the server and the connection stay, and so does the data.
func TestPostgresInterrupt(t *testing.T) {
	dir := postgresWorkspace(t)
	k := startPostgres(t, dir)
	pgOK(t, k, "CREATE TABLE kept(x int); INSERT INTO kept VALUES (42)")
	pid := serverPid(dir)
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "long", Code: "SELECT 1;\nSELECT pg_sleep(60);"})
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	k.Interrupt()
	var done kernelproto.Done
	for done.Type != kernelproto.TDone {
		line := k.Read(10 * time.Second)
		var env kernelproto.Envelope
		mustUnmarshal(t, line, &env)
		if env.Type == kernelproto.TDone {
			mustUnmarshal(t, line, &done)
		}
	}
	t.Logf("cancelled in %v", time.Since(start))
	if done.Status != kernelproto.StatusInterrupted || done.Cell != "long" {
		t.Errorf("done = %+v, want interrupted", done)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the cancel took %v", time.Since(start))
	}
	if got := pgRows(t, k, "SELECT x FROM kept"); !cmp.Equal(got, [][]any{{42.0}}) {
		t.Errorf("rows = %v", got)
	}
	if now := serverPid(dir); now != pid || pid == 0 {
		t.Errorf("the server changed: pid %d, then %d", pid, now)
	}
	// Between cells an interrupt is ignored.
	k.Interrupt()
	time.Sleep(50 * time.Millisecond)
	pgOK(t, k, "SELECT 1")
}

// TestPostgresRestart: the data directory is in the workspace, so a new
// kernel (a restart) finds the table; so does one whose server was killed
// and left its postmaster.pid behind.
func TestPostgresRestart(t *testing.T) {
	dir := postgresWorkspace(t)
	k := startPostgres(t, dir)
	pgOK(t, k, "CREATE TABLE survives(x int); INSERT INTO survives VALUES (7)")
	k.Stop()
	if _, err := os.Stat(filepath.Join(dir, ".kiln/postgres/data/PG_VERSION")); err != nil {
		t.Fatalf("no data directory in the workspace: %v", err)
	}
	k = startPostgres(t, dir)
	if got := pgRows(t, k, "SELECT x FROM survives"); !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("after a kernel restart: %v", got)
	}
	k.Stop()
	pid := serverPid(dir)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// The backends outlive a killed postmaster for a moment; the new one
	// waits until they are gone (or the start fails and says why).
	k = startPostgres(t, dir)
	if got := pgRows(t, k, "SELECT x FROM survives"); !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("after the server was killed: %v", got)
	}
	// A sandbox made after kiln restarted finds the old postmaster.pid,
	// whose pid may be another process's there, of the same user (which
	// postgres takes for a running server): the kernel starts the server
	// all the same.
	k.Stop()
	stopPostgres(t, dir)
	sleep := postgresArgv([]string{"/usr/bin/sleep", "60"})
	sleeper := exec.Command(sleep[0], sleep[1:]...)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	pidFile := filepath.Join(dir, ".kiln/postgres/data/postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(pidFile, nobody, nobody)
	k = startPostgres(t, dir)
	if got := pgRows(t, k, "SELECT x FROM survives"); !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("with a stale postmaster.pid: %v", got)
	}
	// A server stopped between cells: the next cell starts it again.
	before := serverPid(dir)
	stopPostgres(t, dir)
	if got := pgRows(t, k, "SELECT x FROM survives"); !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("after the server stopped: %v", got)
	}
	if now := serverPid(dir); now == before || now == 0 {
		t.Errorf("server pid %d, then %d: not started again", before, now)
	}
	// One stopped while a statement runs: the statement fails and says so,
	// the next cell reconnects.
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "lost", Code: "SELECT pg_sleep(30)"})
	time.Sleep(300 * time.Millisecond)
	stopPostgres(t, dir)
	var e kernelproto.Error
	for e.Type != kernelproto.TError {
		mustUnmarshal(t, k.Read(10*time.Second), &e)
	}
	if !strings.Contains(e.Message, "next cell reconnects") {
		t.Errorf("a server lost mid-statement: %+v", e)
	}
	k.Read(10 * time.Second) // done
	if got := pgRows(t, k, "SELECT x FROM survives"); !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("after a reconnect: %v", got)
	}
}

// TestPostgresInterruptStart: an interrupt while the first cell waits for
// initdb and the server ends the cell; the start goes on, and the next cell
// gets the server.
func TestPostgresInterruptStart(t *testing.T) {
	dir := postgresWorkspace(t)
	k := startPostgres(t, dir)
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "first", Code: "SELECT 1;"})
	k.Interrupt()
	var done kernelproto.Done
	mustUnmarshal(t, k.Read(10*time.Second), &done)
	if done.Type != kernelproto.TDone || done.Status != kernelproto.StatusInterrupted {
		t.Errorf("done = %+v, want interrupted", done)
	}
	if got := pgRows(t, k, "SELECT 2 AS two"); !cmp.Equal(got, [][]any{{2.0}}) {
		t.Errorf("rows = %v", got)
	}
}

// TestPostgresDescribe: \d lists relations, \d NAME a table's columns and
// indexes; unknown names and commands are errors that say what exists.
func TestPostgresDescribe(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	pgOK(t, k, "CREATE TABLE people(id serial PRIMARY KEY, name text NOT NULL, age int CHECK (age >= 0)); CREATE VIEW adults AS SELECT * FROM people WHERE age >= 18;")
	r := pgOK(t, k, `\d`)
	var names []string
	for _, row := range tableOf(t, r.Displays[0]).Rows {
		names = append(names, row[1].(string)+" "+row[2].(string))
	}
	sort.Strings(names)
	if !cmp.Equal(names, []string{"adults view", "people table", "people_id_seq sequence"}) {
		t.Errorf(`\d = %v`, names)
	}
	r = pgOK(t, k, "\\dt\n\\d people")
	if len(r.Displays) != 4 {
		t.Fatalf("%d displays, want 4 (\\dt, columns, indexes, constraints)", len(r.Displays))
	}
	if got := tableOf(t, r.Displays[0]).Rows; len(got) != 1 || got[0][1] != "people" {
		t.Errorf(`\dt = %v`, got)
	}
	if !strings.Contains(r.Stdout, `Table "people"`) {
		t.Errorf("stdout %q", r.Stdout)
	}
	want := [][]any{
		{"id", "integer", "not null", "nextval('people_id_seq'::regclass)"},
		{"name", "text", "not null", ""},
		{"age", "integer", "", ""},
	}
	if got := tableOf(t, r.Displays[1]).Rows; !cmp.Equal(got, want) {
		t.Errorf(`\d people columns = %v`, got)
	}
	if got := text(t, r.Displays[2]); !strings.Contains(got, "people_pkey") || !strings.Contains(got, "USING btree (id)") {
		t.Errorf(`\d people indexes = %s`, got)
	}
	if got := text(t, r.Displays[3]); !strings.Contains(got, "CHECK (age >= 0)") {
		t.Errorf(`\d people constraints = %s`, got)
	}
	r = k.Exec("SELECT 1;\n\\d nowhere")
	if r.Error == nil || r.Error.Line != 2 || !strings.Contains(r.Error.Message, "did not find any relation named nowhere") {
		t.Errorf("unknown relation: %+v", r.Error)
	}
	r = k.Exec(`\x`)
	if r.Error == nil || !strings.Contains(r.Error.Message, `unknown meta-command \x`) || !strings.Contains(r.Error.Message, `\copy`) {
		t.Errorf("unknown command: %+v", r.Error)
	}
}

// TestPostgresCopy: a CSV in the workspace loads with \copy (a path
// relative to the workspace) and with server-side COPY (an absolute path:
// the server runs as the sandbox's user); \copy writes one back.
func TestPostgresCopy(t *testing.T) {
	dir := postgresWorkspace(t)
	csv := "id,city\n1,Oslo\n2,\"Lima, Peru\"\n3,Kyiv\n"
	if err := os.WriteFile(filepath.Join(dir, "cities.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	k := startPostgres(t, dir)
	pgOK(t, k, "CREATE TABLE cities(id int, city text);")
	r := pgOK(t, k, `\copy cities FROM 'cities.csv' WITH (FORMAT csv, HEADER)`)
	if r.Stdout != "3 rows copied\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
	r = pgOK(t, k, "COPY cities FROM '"+filepath.Join(dir, "cities.csv")+"' WITH (FORMAT csv, HEADER);")
	if r.Stdout != "3 rows affected\n" {
		t.Errorf("server-side COPY: stdout %q", r.Stdout)
	}
	if got := pgRows(t, k, "SELECT city, count(*) FROM cities GROUP BY city ORDER BY city"); !cmp.Equal(got, [][]any{{"Kyiv", 2.0}, {"Lima, Peru", 2.0}, {"Oslo", 2.0}}) {
		t.Errorf("rows = %v", got)
	}
	pgOK(t, k, `\copy (SELECT DISTINCT id, city FROM cities ORDER BY id) TO 'out.csv' WITH (FORMAT csv, HEADER)`)
	if b, err := os.ReadFile(filepath.Join(dir, "out.csv")); err != nil || string(b) != csv {
		t.Errorf("out.csv = %q, %v", b, err)
	}
	r = k.Exec(`\copy cities FROM 'missing.csv' WITH (FORMAT csv)`)
	if r.Error == nil || !strings.Contains(r.Error.Message, "missing.csv") {
		t.Errorf("a missing file: %+v", r.Error)
	}
}

// TestPostgresOtherClients: psql, as another program of the session would,
// reaches the same database on the socket in .kiln/postgres.
func TestPostgresOtherClients(t *testing.T) {
	dir := postgresWorkspace(t)
	k := startPostgres(t, dir)
	pgOK(t, k, "CREATE TABLE shared(x int); INSERT INTO shared VALUES (5)")
	argv := postgresArgv([]string{"/usr/bin/psql", "-X", "-At", "-c", "SELECT x * 2 FROM shared"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PGHOST=" + filepath.Join(dir, ".kiln/postgres"), "PGDATABASE=postgres"}
	cmd.Dir = dir // psql runs as nobody, who may not enter the test's own directory (a clone in a 0700 mktemp -d)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "10\n" {
		t.Errorf("psql: %q, %v", out, err)
	}
}

// TestPostgresCheck: a cell is complete when its last statement ends with
// ";" (or is a meta-command), as psql waits for.
func TestPostgresCheck(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	for code, want := range map[string]string{
		"SELECT 1;": "complete", "SELECT 1": "incomplete", "SELECT ';": "incomplete", `\d`: "complete",
		"SELECT $$;": "incomplete", "": "complete", "SELECT 1; -- done": "complete", "/* ; ": "complete",
	} {
		k.Send(kernelproto.Check{Type: kernelproto.TCheck, Cell: "k", Code: code})
		var res kernelproto.CheckResult
		mustUnmarshal(t, k.Read(10*time.Second), &res)
		if res.Status != want {
			t.Errorf("check %q = %q, want %q", code, res.Status, want)
		}
	}
}

// BenchmarkPostgresFirstQuery is the time from a kernel's start on a new
// workspace (initdb, the server's start) to the first query's answer.
func BenchmarkPostgresFirstQuery(b *testing.B) {
	for i := 0; i < b.N; i++ {
		dir := postgresWorkspace(b)
		start := time.Now()
		k := startPostgres(b, dir)
		r := k.Exec("SELECT 1")
		if r.Status != kernelproto.StatusOK {
			b.Fatalf("first query: %+v", r)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/first-query")
		k.Stop()
		stopPostgres(b, dir)
	}
}

// TestPostgresComplete offers table and column names from the database
// and keywords in the case they were typed in.
func TestPostgresComplete(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	pgOK(t, k, "CREATE TABLE customers(customer_id int, customer_name text);")
	for _, tc := range []struct {
		code  string
		want  []string
		start int
	}{
		{"SELECT * FROM cust", []string{"customer_id", "customer_name", "customers"}, 14},
		{"SELECT customers.customer_n", []string{"customer_name"}, 17},
		{"SEL", []string{"SELECT"}, 0},
		{"sel", []string{"select"}, 0},
		{"SELECT * FROM ", nil, 14},
	} {
		var got kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "k", Code: tc.code, Cursor: len([]rune(tc.code))}), &got)
		if !cmp.Equal(got.Matches, tc.want, cmpopts.EquateEmpty()) || got.CursorStart != tc.start || got.CursorEnd != len([]rune(tc.code)) {
			t.Errorf("complete %q = %+v, want %q from %d", tc.code, got, tc.want, tc.start)
		}
	}
}

// TestPostgresTemplate: with a template cluster whose superuser is the
// kernel's user (scripts/deps makes one for the sandbox's user), a new
// workspace gets a copy of it instead of an initdb; with one of another
// user, initdb runs.
func TestPostgresTemplate(t *testing.T) {
	postgresReady(t)
	tpl := postgresWorkspace(t) // nobody may write it; initdb runs as nobody
	user := "nobody"
	if os.Geteuid() != 0 {
		user = os.Getenv("USER")
	}
	argv := postgresArgv([]string{"/usr/lib/postgresql/15/bin/initdb", "-D", filepath.Join(tpl, "data"), "-U", user, "-A", "trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions", "--wal-segsize=1"})
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	out, err := exec.Command("/usr/lib/postgresql/15/bin/pg_controldata", filepath.Join(tpl, "data")).Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(strings.SplitN(strings.SplitN(string(out), "Database system identifier:", 2)[1], "\n", 2)[0])
	systemID := func(k *localKernel) any {
		return pgRows(t, k, "SELECT system_identifier::text FROM pg_control_system()")[0][0]
	}

	os.WriteFile(filepath.Join(tpl, "data.user"), []byte(user+"\n"), 0o644)
	k := startPostgres(t, postgresWorkspace(t), "KILN_POSTGRES_TEMPLATE="+filepath.Join(tpl, "data"))
	if got := systemID(k); got != id {
		t.Errorf("system identifier %v, want the template's %s", got, id)
	}
	pgOK(t, k, "CREATE TABLE mine(x int)")

	os.WriteFile(filepath.Join(tpl, "data.user"), []byte("someone-else\n"), 0o644)
	k = startPostgres(t, postgresWorkspace(t), "KILN_POSTGRES_TEMPLATE="+filepath.Join(tpl, "data"))
	if got := systemID(k); got == id {
		t.Errorf("another user's template was copied")
	}
}

// TestPostgresBigResult: a query runs through a cursor, so a result of
// millions of rows shows its first rows without the kernel fetching the
// rest; statements a cursor cannot hold run as they are, and an error
// leaves a transaction as it would without the cursor.
func TestPostgresBigResult(t *testing.T) {
	k := startPostgres(t, postgresWorkspace(t))
	r := pgOK(t, k, "SELECT g, md5(g::text) AS h FROM generate_series(1, 3000000) g;")
	if len(r.Displays) != 1 {
		t.Fatalf("%d displays", len(r.Displays))
	}
	if got := len(tableOf(t, r.Displays[0]).Rows); got != 10000 || !strings.Contains(text(t, r.Displays[0]), "(first 10000 rows shown; the result has more)") {
		t.Errorf("%d rows shown; text ends %q", got, text(t, r.Displays[0])[len(text(t, r.Displays[0]))-60:])
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(k.Cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			if kb, _ := strconv.Atoi(f[1]); kb > 100<<10 {
				t.Errorf("the kernel's peak memory is %d kB: it fetched the whole result", kb)
			}
		}
	}

	r = pgOK(t, k, "SELECT 7 AS a INTO newt;\nWITH d AS (DELETE FROM newt RETURNING a) SELECT sum(a) AS deleted FROM d;")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{7.0}}) {
		t.Errorf("SELECT INTO, then a data-modifying WITH: %v (stdout %q)", got, r.Stdout)
	}

	r = k.Exec("SELECT 1 / 0;")
	if r.Error == nil || r.Error.Name != "DivisionByZero" {
		t.Errorf("1 / 0: %+v", r.Error)
	}
	pgOK(t, k, "SELECT 1;") // no transaction was left open
	pgOK(t, k, "BEGIN;")
	if r := k.Exec("SELECT 1 / 0;"); r.Error == nil || r.Error.Name != "DivisionByZero" {
		t.Errorf("1 / 0 in a transaction: %+v", r.Error)
	}
	if r := k.Exec("SELECT 1;"); r.Error == nil || r.Error.Name != "InFailedSqlTransaction" {
		t.Errorf("after an error the transaction must be aborted, as in psql: %+v", r.Error)
	}
	pgOK(t, k, "ROLLBACK;")
	pgOK(t, k, "SELECT 1;")
}

// TestPostgresInterruptCopy: an interrupt cancels a \copy too; nothing of
// it stays and the next cell runs.
func TestPostgresInterruptCopy(t *testing.T) {
	dir := postgresWorkspace(t)
	var b strings.Builder
	for i := 0; i < 3000000; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString(",some text to load\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "big.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	k := startPostgres(t, dir)
	pgOK(t, k, "CREATE TABLE big(id int, s text);")
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "copy", Code: `\copy big FROM 'big.csv' WITH (FORMAT csv)`})
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	k.Interrupt()
	var done kernelproto.Done
	for done.Type != kernelproto.TDone {
		mustUnmarshal(t, k.Read(10*time.Second), &done)
	}
	if done.Status != kernelproto.StatusInterrupted || time.Since(start) > 5*time.Second {
		t.Errorf("done = %+v after %v, want interrupted at once", done, time.Since(start))
	}
	if got := pgRows(t, k, "SELECT count(*) FROM big"); !cmp.Equal(got, [][]any{{0.0}}) {
		t.Errorf("rows after the cancelled copy: %v", got)
	}
}
