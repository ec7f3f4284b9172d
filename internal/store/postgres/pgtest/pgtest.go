//go:build linux

package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Bin is where Debian's postgresql-15 package installs the server.
const Bin = "/usr/lib/postgresql/15/bin"

// Server is a running throwaway PostgreSQL.
type Server struct {
	dir, data, DSN string
	cred           *syscall.Credential
	srv            *exec.Cmd
	exited         chan error
}

// Start runs initdb and postgres (as the postgres, else nobody, user when
// root: PostgreSQL refuses root) and stops it when t ends. It skips t
// with the reason when there is no PostgreSQL: KILN_TEST_POSTGRES_DSN
// names one to use instead.
func Start(t testing.TB) *Server {
	t.Helper()
	if dsn := os.Getenv("KILN_TEST_POSTGRES_DSN"); dsn != "" {
		return &Server{DSN: dsn}
	}
	for _, p := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(Bin, p)); err != nil {
			t.Skipf("no PostgreSQL: set KILN_TEST_POSTGRES_DSN or install postgresql-15 (%v)", err)
		}
	}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), DSN: "host=" + dir + " user=kiln dbname=postgres sslmode=disable"}
	t.Cleanup(s.remove)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			t.Fatalf("running as root and no postgres or nobody user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.command(ctx, "initdb", "-D", s.data, "-U", "kiln", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(Bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"LANG=C", "LC_ALL=C", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return cmd
}

func (s *Server) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.srv = s.command(context.Background(), "postgres", "-D", s.data, "-k", s.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	s.srv.Stdout, s.srv.Stderr = logf, logf
	if err := s.srv.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.exited = make(chan error, 1)
	go func(srv *exec.Cmd, exited chan error) { exited <- srv.Wait() }(s.srv, s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("pgx", s.DSN)
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			log, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("postgres exited: %v: %s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections: %w", err)
		}
	}
}

// Database creates an empty database and returns its DSN.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	if s.dir == "" {
		t.Skip("KILN_TEST_POSTGRES_DSN: this test makes its own databases; leave the variable unset to start a server")
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "kiln_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	return "host=" + s.dir + " user=kiln dbname=" + name + " sslmode=disable"
}

// remove stops postgres and deletes its data.
func (s *Server) remove() {
	if s.srv != nil {
		s.srv.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.srv.Process.Kill()
			<-s.exited
		}
		s.srv = nil
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
