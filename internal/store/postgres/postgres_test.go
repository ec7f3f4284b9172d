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
// listening only on a unix socket there. PostgreSQL refuses to run as root,
// so as root it runs as the postgres (else nobody) user.
func startServer() (dsn string, stop func(), err error) {
	for _, p := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(pgBin, p)); err != nil {
			return "", nil, err
		}
	}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("running as root and no postgres or nobody user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return "", nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	command := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(pgBin, name), args...)
		cmd.Dir = dir
		cmd.Env = []string{"LANG=C", "LC_ALL=C", "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := command(ctx, "initdb", "-D", data, "-U", "kiln", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		cleanup()
		return "", nil, err
	}
	srv := command(context.Background(), "postgres", "-D", data, "-k", dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		logf.Close()
		cleanup()
		return "", nil, fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	stop = func() {
		srv.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-exited
		}
		logf.Close()
		cleanup()
	}
	dsn = "host=" + dir + " user=kiln dbname=postgres sslmode=disable"
	for deadline := time.Now().Add(30 * time.Second); ; {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			err = db.PingContext(ctx)
			db.Close()
		}
		if err == nil {
			return dsn, stop, nil
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logf.Name())
			stop()
			return "", nil, fmt.Errorf("postgres exited: %v: %s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("postgres did not accept connections: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freshDSN creates an empty schema and returns a DSN whose search_path is
// that schema, so every test has its own database objects on one server.
func freshDSN(t *testing.T) string {
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
