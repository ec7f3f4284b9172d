package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/postgres"
	"github.com/kiln-dev/kiln/internal/store/storetest"
)

// pgBin is where Debian's postgresql-15 package installs the server.
const pgBin = "/usr/lib/postgresql/15/bin"

// server is the PostgreSQL the tests use: KILN_TEST_POSTGRES_DSN if set,
// else a throwaway server started by TestMain; skip says why there is none.
var server struct {
	dsn  string
	skip string
}

func TestMain(m *testing.M) {
	stop := func() {}
	if dsn := os.Getenv("KILN_TEST_POSTGRES_DSN"); dsn != "" {
		server.dsn = dsn
	} else {
		var err error
		server.dsn, stop, err = startServer()
		if err != nil {
			server.skip = "no PostgreSQL: set KILN_TEST_POSTGRES_DSN or install postgresql-15 (" + err.Error() + ")"
		}
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// startServer runs initdb and postgres in a new temporary directory,
// listening only on a unix socket there.
func startServer() (dsn string, stop func(), err error) {
	pg, err := newPG()
	if err != nil {
		return "", nil, err
	}
	if err := pg.start(); err != nil {
		pg.remove()
		return "", nil, err
	}
	return pg.dsn, pg.remove, nil
}

// pgServer is a throwaway PostgreSQL that can be stopped and started
// again on the same data, as an outage would. PostgreSQL refuses to run
// as root, so as root it runs as the postgres (else nobody) user.
type pgServer struct {
	dir, data, dsn string
	cred           *syscall.Credential
	srv            *exec.Cmd
	exited         chan error
	logf           *os.File
}

// newPG makes the data directory (initdb).
func newPG() (*pgServer, error) {
	for _, p := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(pgBin, p)); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		return nil, err
	}
	pg := &pgServer{dir: dir, data: filepath.Join(dir, "data"), dsn: "host=" + dir + " user=kiln dbname=postgres sslmode=disable"}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			pg.remove()
			return nil, fmt.Errorf("running as root and no postgres or nobody user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			pg.remove()
			return nil, err
		}
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := pg.command(ctx, "initdb", "-D", pg.data, "-U", "kiln", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		pg.remove()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	return pg, nil
}

func (pg *pgServer) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(pgBin, name), args...)
	cmd.Dir = pg.dir
	cmd.Env = []string{"LANG=C", "LC_ALL=C", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred, Setpgid: true}
	return cmd
}

// start runs postgres and waits until it accepts connections.
func (pg *pgServer) start() error {
	logf, err := os.OpenFile(filepath.Join(pg.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	pg.logf = logf
	pg.srv = pg.command(context.Background(), "postgres", "-D", pg.data, "-k", pg.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	pg.srv.Stdout, pg.srv.Stderr = logf, logf
	if err := pg.srv.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	pg.exited = make(chan error, 1)
	go func(srv *exec.Cmd, exited chan error) { exited <- srv.Wait() }(pg.srv, pg.exited)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		db, err := sql.Open("pgx", pg.dsn)
		if err == nil {
			err = db.PingContext(ctx)
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case err := <-pg.exited:
			pg.exited <- err
			log, _ := os.ReadFile(logf.Name())
			pg.halt()
			return fmt.Errorf("postgres exited: %v: %s", err, log)
		case <-ctx.Done():
			pg.halt()
			return fmt.Errorf("postgres did not accept connections: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// halt stops postgres (a fast shutdown) and keeps its data.
func (pg *pgServer) halt() {
	if pg.srv == nil {
		return
	}
	pg.srv.Process.Signal(syscall.SIGINT)
	select {
	case <-pg.exited:
	case <-time.After(30 * time.Second):
		pg.srv.Process.Kill()
		<-pg.exited
	}
	pg.logf.Close()
	pg.srv = nil
}

// remove stops postgres and deletes its data.
func (pg *pgServer) remove() {
	pg.halt()
	os.RemoveAll(pg.dir)
}

// freshDSN creates an empty schema and returns a DSN whose search_path is
// that schema, so every test has its own database objects on one server.
func freshDSN(t testing.TB) string {
	t.Helper()
	if server.skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(server.skip + "; CI must run this suite against PostgreSQL")
		}
		t.Skip(server.skip)
	}
	schema := "kiln_test_" + hex.EncodeToString(randBytes(6))
	admin, err := sql.Open("pgx", server.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", server.dsn)
		if err != nil {
			return
		}
		defer admin.Close()
		admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	return withSearchPath(server.dsn, schema)
}

func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func open(t *testing.T, dsn string) *store.DB {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, freshDSN(t)) })
}

// TestConcurrentStart migrates one new schema from several connections at
// once, as replicas starting together would: each migration applies once.
func TestConcurrentStart(t *testing.T) {
	dsn := freshDSN(t)
	storetest.ConcurrentStart(t, func(ctx context.Context) (*store.DB, error) { return postgres.Open(ctx, dsn) })
}

// Concurrent requests reuse connections: 8 at once, over and over, close
// none for want of idle room (database/sql's default of 2 closed about
// one in four).
func TestConnectionsReused(t *testing.T) {
	s := open(t, freshDSN(t))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := s.SQL().Exec(`SELECT pg_sleep(0.001)`); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := s.SQL().Stats(); st.MaxIdleClosed > 0 || st.OpenConnections > 8 {
		t.Errorf("after 400 queries 8 at once: %d connections closed for want of idle room, %d open; want 0 closed, at most 8 open", st.MaxIdleClosed, st.OpenConnections)
	}
}

func TestTruncateRefused(t *testing.T) {
	s := open(t, freshDSN(t))
	if _, err := s.SQL().Exec(`TRUNCATE audit_log`); err == nil {
		t.Error("TRUNCATE audit_log succeeded, want the trigger to refuse it")
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "host="+t.TempDir()+" user=kiln sslmode=disable")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open on a missing server = %v, want a connection error", err)
	}
}

// TestOutageAndRecovery: while PostgreSQL is down, calls fail at once
// (no hang); when it is back, the same store serves again without being
// reopened, and what was committed before the outage is there.
func TestOutageAndRecovery(t *testing.T) {
	if server.skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(server.skip + "; CI must run this suite against PostgreSQL")
		}
		t.Skip(server.skip)
	}
	pg, err := newPG()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.remove()
	if err := pg.start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := open(t, pg.dsn)
	before := store.User{Name: "before"}
	if err := s.CreateUser(ctx, &before); err != nil {
		t.Fatal(err)
	}

	pg.halt()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := s.User(tctx, before.ID); err == nil || tctx.Err() != nil {
		t.Fatalf("a read while the database is down: %v (context %v), want an error at once", err, tctx.Err())
	}
	if err := s.CreateUser(tctx, &store.User{Name: "during"}); err == nil {
		t.Fatal("a write while the database is down succeeded")
	}

	if err := pg.start(); err != nil {
		t.Fatal(err)
	}
	// database/sql drops the dead connections; at most one call may still
	// meet one.
	var u store.User
	for i := 0; i < 3; i++ {
		if u, err = s.User(ctx, before.ID); err == nil {
			break
		}
	}
	if err != nil || u.Name != "before" {
		t.Fatalf("after the database came back: %+v, %v; want the user made before the outage", u, err)
	}
	after := store.User{Name: "after"}
	if err := s.CreateUser(ctx, &after); err != nil {
		t.Errorf("a write after the database came back: %v", err)
	}
}
