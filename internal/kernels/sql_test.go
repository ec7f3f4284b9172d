package kernels

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

func startSQL(t *testing.T, dir string, env ...string) *localKernel {
	t.Helper()
	spec := SQL()
	spec.Env = append(spec.Env, env...)
	return startLocal(t, spec, dir)
}

// sqlTable is a Display's application/json.
type sqlTable struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

func tableOf(t *testing.T, d kernelproto.Display) sqlTable {
	t.Helper()
	var tb sqlTable
	raw, ok := d.Data["application/json"]
	if !ok {
		t.Fatalf("display without application/json: %v", d.Data)
	}
	mustUnmarshal(t, raw, &tb)
	return tb
}

func htmlOf(t *testing.T, d kernelproto.Display) string {
	t.Helper()
	var s string
	mustUnmarshal(t, d.Data["text/html"], &s)
	return s
}

func sqlOK(t *testing.T, k *localKernel, code string) cellResult {
	t.Helper()
	r := k.Exec(code)
	if r.Status != kernelproto.StatusOK {
		t.Fatalf("%q: status %q, error %+v, stderr %q", code, r.Status, r.Error, r.Stderr)
	}
	return r
}

// TestSQLDisplay: a result comes as an aligned text table, an HTML table
// and JSON; DML reports the rows it changed.
func TestSQLDisplay(t *testing.T) {
	k := startSQL(t, "")
	if k.Ready.Language != "sql" || !strings.HasPrefix(k.Ready.Version, "3.") {
		t.Errorf("ready = %+v", k.Ready)
	}
	r := sqlOK(t, k, `CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB);
INSERT INTO t(name, score, data) VALUES ('alice', 9.5, x'0102'), ('<b>bob & co</b>', NULL, NULL), ('日本語', 12, NULL);
SELECT * FROM t ORDER BY id;
SELECT name FROM t WHERE 0`)
	if r.Stdout != "3 rows affected\n" {
		t.Errorf("stdout = %q, want the rows affected", r.Stdout)
	}
	if len(r.Displays) != 2 {
		t.Fatalf("got %d displays, want 2: %+v", len(r.Displays), r.Displays)
	}
	d := r.Displays[0]
	wantText := ` id | name            | score | data
----+-----------------+-------+---------
  1 | alice           |   9.5 | x'0102'
  2 | <b>bob & co</b> |  NULL | NULL
  3 | 日本語          |  12.0 | NULL
(3 rows)`
	if got := text(t, d); got != wantText {
		t.Errorf("text/plain:\n%s\nwant:\n%s", got, wantText)
	}
	wantJSON := sqlTable{
		Columns: []string{"id", "name", "score", "data"},
		Rows: [][]any{
			{1.0, "alice", 9.5, map[string]any{"base64": "AQI="}},
			{2.0, "<b>bob & co</b>", nil, nil},
			{3.0, "日本語", 12.0, nil},
		},
	}
	if diff := cmp.Diff(wantJSON, tableOf(t, d)); diff != "" {
		t.Errorf("application/json (-want +got):\n%s", diff)
	}
	h := htmlOf(t, d)
	for _, s := range []string{"<table", "<thead><tr><th>id</th><th>name</th><th>score</th><th>data</th></tr></thead>", "<tbody>",
		"<td>&lt;b&gt;bob &amp; co&lt;/b&gt;</td>", `<td class="null">NULL</td>`, "</tbody></table>"} {
		if !strings.Contains(h, s) {
			t.Errorf("text/html lacks %q:\n%s", s, h)
		}
	}
	if strings.Contains(h, "<b>bob") {
		t.Errorf("text/html does not escape values:\n%s", h)
	}
	if string(d.Metadata["rows"]) != "3" || string(d.Metadata["statement"]) != "3" || string(d.Metadata["line"]) != "3" {
		t.Errorf("metadata = %s, want 3 rows from statement 3 at line 3", d.Metadata)
	}
	// A query without rows still shows its columns.
	if got, want := text(t, r.Displays[1]), " name\n------\n(0 rows)"; got != want {
		t.Errorf("empty result:\n%s\nwant:\n%s", got, want)
	}
	r = sqlOK(t, k, "UPDATE t SET score = 0 WHERE id > 1; DELETE FROM t WHERE id = 3; CREATE INDEX i ON t(name)")
	if r.Stdout != "2 rows affected\n1 row affected\n" || len(r.Displays) != 0 {
		t.Errorf("stdout = %q, displays %d", r.Stdout, len(r.Displays))
	}
}

// TestSQLError: the first error stops the cell and names the statement and
// its line; earlier statements stay done.
func TestSQLError(t *testing.T) {
	k := startSQL(t, "")
	r := k.Exec("CREATE TABLE a(x);\n-- a comment\nINSERT INTO a VALUES (1);\n\n  SELECT nope\n  FROM a;\nINSERT INTO a VALUES (2);")
	if r.Status != kernelproto.StatusError || r.Error == nil {
		t.Fatalf("status %q, error %+v; want an error", r.Status, r.Error)
	}
	e := r.Error
	if e.Name != "OperationalError" || e.Line != 5 || !strings.Contains(e.Message, "statement 3 of 4") ||
		!strings.Contains(e.Message, "line 5") || !strings.Contains(e.Message, "no such column: nope") {
		t.Errorf("error = %+v", e)
	}
	if len(e.Traceback) == 0 || !strings.Contains(e.Traceback[0], "SELECT nope FROM a;") {
		t.Errorf("traceback %q does not show the statement", e.Traceback)
	}
	r = sqlOK(t, k, "SELECT x FROM a")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{1.0}}) {
		t.Errorf("rows = %v, want only the row inserted before the error", got)
	}
	r = k.Exec("INSERT INTO a VALUES (3); SELECT * FROM nowhere; SELECT 1")
	if r.Error == nil || r.Error.Line != 1 || !strings.Contains(r.Error.Message, "statement 2 of 3") || len(r.Displays) != 0 {
		t.Errorf("error %+v, %d displays", r.Error, len(r.Displays))
	}
	r = k.Exec("CREATE TABLE u(x UNIQUE); INSERT INTO u VALUES (1); INSERT INTO u VALUES (1)")
	if r.Error == nil || r.Error.Name != "IntegrityError" || !strings.Contains(r.Error.Message, "UNIQUE") {
		t.Errorf("error = %+v, want an IntegrityError", r.Error)
	}
}

// TestSQLSplit: semicolons in strings, identifiers, comments and trigger
// bodies do not end a statement; a last statement without one runs.
func TestSQLSplit(t *testing.T) {
	k := startSQL(t, "")
	r := sqlOK(t, k, `CREATE TABLE "we;ird"(v TEXT); -- a comment; with a semicolon
CREATE TABLE log(v TEXT);
/* a block comment; */
CREATE TRIGGER tr AFTER INSERT ON "we;ird" BEGIN
  INSERT INTO log VALUES ('a;' || new.v);
  INSERT INTO log VALUES ('b;');
END;
INSERT INTO "we;ird" VALUES ('x;y');
SELECT v FROM log ORDER BY v
-- trailing comment`)
	if len(r.Displays) != 1 {
		t.Fatalf("%d displays", len(r.Displays))
	}
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{"a;x;y"}, {"b;"}}) {
		t.Errorf("rows = %v", got)
	}
	for _, code := range []string{"", "  \n-- nothing\n", ";;", "/* only */"} {
		if r := sqlOK(t, k, code); len(r.Displays) != 0 || r.Stdout != "" {
			t.Errorf("%q: %+v", code, r)
		}
	}
}

// TestSQLPersistence: data stays between cells, between kernels on the same
// workspace, and KILN_SQL_DB names another file.
func TestSQLPersistence(t *testing.T) {
	dir := t.TempDir()
	k := startSQL(t, dir)
	sqlOK(t, k, "CREATE TABLE p(x); INSERT INTO p VALUES (1)")
	sqlOK(t, k, "INSERT INTO p VALUES (2)")
	r := sqlOK(t, k, "SELECT sum(x) FROM p")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{3.0}}) {
		t.Errorf("rows = %v", got)
	}
	k.Stop()
	if _, err := os.Stat(filepath.Join(dir, "kiln.db")); err != nil {
		t.Errorf("no kiln.db in the workspace: %v", err)
	}
	k2 := startSQL(t, dir)
	r = sqlOK(t, k2, "SELECT x FROM p ORDER BY x")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{1.0}, {2.0}}) {
		t.Errorf("after a restart rows = %v", got)
	}
	// An explicit transaction spans cells until COMMIT or ROLLBACK.
	sqlOK(t, k2, "BEGIN; INSERT INTO p VALUES (3)")
	sqlOK(t, k2, "ROLLBACK")
	r = sqlOK(t, k2, "SELECT count(*) FROM p")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{2.0}}) {
		t.Errorf("after rollback rows = %v", got)
	}

	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	k3 := startSQL(t, dir, "KILN_SQL_DB=sub/other.db")
	sqlOK(t, k3, "CREATE TABLE o(x)")
	if _, err := os.Stat(filepath.Join(dir, "sub", "other.db")); err != nil {
		t.Errorf("KILN_SQL_DB not used: %v", err)
	}
	if r := k3.Exec("SELECT * FROM p"); r.Status != kernelproto.StatusError {
		t.Errorf("the other database has table p: %+v", r)
	}
	k4 := startSQL(t, dir, "KILN_SQL_DB=missing-dir/x.db")
	if r := k4.Exec("SELECT 1"); r.Status != kernelproto.StatusError || r.Error == nil || !strings.Contains(r.Error.Message, "x.db") {
		t.Errorf("a database that cannot open: %+v", r)
	}
}

// TestSQLInterrupt: SIGINT stops a long query; the session goes on.
func TestSQLInterrupt(t *testing.T) {
	k := startSQL(t, "")
	sqlOK(t, k, "CREATE TABLE kept(x); INSERT INTO kept VALUES (42)")
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "long",
		Code: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) SELECT count(*) FROM c"})
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	k.Interrupt()
	var done kernelproto.Done
	for done.Type != kernelproto.TDone {
		line := k.Read(5 * time.Second)
		var env kernelproto.Envelope
		mustUnmarshal(t, line, &env)
		if env.Type != kernelproto.TDone {
			t.Fatalf("unexpected %s", line)
		}
		mustUnmarshal(t, line, &done)
	}
	t.Logf("interrupted in %v", time.Since(start))
	if done.Status != kernelproto.StatusInterrupted || done.Cell != "long" {
		t.Errorf("done = %+v, want interrupted", done)
	}
	r := sqlOK(t, k, "SELECT x FROM kept")
	if got := tableOf(t, r.Displays[0]).Rows; !cmp.Equal(got, [][]any{{42.0}}) {
		t.Errorf("rows = %v", got)
	}
	// An interrupt sent right after the request still stops the cell.
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "early",
		Code: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) SELECT count(*) FROM c"})
	k.Interrupt()
	mustUnmarshal(t, k.Read(5*time.Second), &done)
	if done.Status != kernelproto.StatusInterrupted || done.Cell != "early" {
		t.Errorf("done = %+v, want interrupted", done)
	}
	// Between cells an interrupt is ignored.
	k.Interrupt()
	time.Sleep(50 * time.Millisecond)
	sqlOK(t, k, "SELECT 1")
}

// TestSQLTruncate: a huge result shows its first rows and says so.
func TestSQLTruncate(t *testing.T) {
	k := startSQL(t, "")
	r := sqlOK(t, k, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x FROM c")
	d := r.Displays[0]
	if n := len(tableOf(t, d).Rows); n != 10000 {
		t.Errorf("%d rows shown, want 10000", n)
	}
	if string(d.Metadata["truncated"]) != "true" || string(d.Metadata["rows"]) != "10000" {
		t.Errorf("metadata = %s", d.Metadata)
	}
	if !strings.HasSuffix(text(t, d), "(first 10000 rows shown; the result has more)") {
		t.Errorf("text/plain does not say it is cut: %q", text(t, d)[len(text(t, d))-80:])
	}
	// Wide values are cut by size, long before 10,000 rows.
	r = sqlOK(t, k, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x, randomblob(100000) AS b FROM c")
	d = r.Displays[0]
	if n := len(tableOf(t, d).Rows); n == 0 || n >= 1000 {
		t.Errorf("%d wide rows shown", n)
	}
	if b, _ := json.Marshal(d); len(b) > 16<<20 {
		t.Errorf("a %d-byte display", len(b))
	}
}

func TestSQLCheck(t *testing.T) {
	k := startSQL(t, "")
	for code, want := range map[string]string{
		"SELECT 1;":         "complete",
		"":                  "complete",
		"-- just a comment": "complete",
		"SELECT 1":          "incomplete",
		"SELECT 'a;":        "incomplete",
		"CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1;": "incomplete",
		"SELECT 1; SELECT 2;":                                "complete",
	} {
		var got kernelproto.CheckResult
		mustUnmarshal(t, k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "k", Code: code}), &got)
		if got.Type != kernelproto.TCheckResult || got.Status != want {
			t.Errorf("check %q = %+v, want %s", code, got, want)
		}
	}
}

func TestSQLComplete(t *testing.T) {
	k := startSQL(t, "")
	sqlOK(t, k, "CREATE TABLE customers(customer_id, customer_name); CREATE VIEW cview AS SELECT 1 AS one")
	for _, tc := range []struct {
		code  string
		want  []string
		start int
	}{
		{"SELECT * FROM cust", []string{"customers"}, 14},
		{"SELECT customer_", []string{"customer_id", "customer_name"}, 7},
		{"SELECT customers.customer_n", []string{"customer_name"}, 17},
		{"SELECT * FROM cv", []string{"cview"}, 14},
		{"SELECT * FROM ", []string{"customers", "cview"}, 14},
		{"SEL", []string{"SELECT"}, 0},
		{"sel", []string{"select"}, 0},
	} {
		var got kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "k", Code: tc.code, Cursor: len([]rune(tc.code))}), &got)
		if !cmp.Equal(got.Matches, tc.want) || got.CursorStart != tc.start || got.CursorEnd != len([]rune(tc.code)) {
			t.Errorf("complete %q = %+v, want %q from %d", tc.code, got, tc.want, tc.start)
		}
	}
}

// TestSQLTiming logs the start-up and per-cell round trip.
func TestSQLTiming(t *testing.T) {
	start := time.Now()
	k := startSQL(t, "")
	t.Logf("ready in %v (SQLite %s)", time.Since(start), k.Ready.Version)
	sqlOK(t, k, "CREATE TABLE x(a)")
	t.Logf("trivial cell round trip: %v (SELECT 1: %v)", roundTrip(k, "INSERT INTO x VALUES (1)", 50), roundTrip(k, "SELECT 1", 50))
}

// TestSQLArgv: the kernel travels on the command line, where one argument
// may not exceed 128 KiB (MAX_ARG_STRLEN).
func TestSQLArgv(t *testing.T) {
	spec := SQL()
	if spec.Language != "sql" || len(spec.Argv) < 2 || spec.Argv[0] != "/usr/bin/python3" {
		t.Fatalf("spec = %+v", spec)
	}
	for i, a := range spec.Argv {
		if len(a) > 100<<10 {
			t.Errorf("argv[%d] is %d bytes", i, len(a))
		}
	}
}
