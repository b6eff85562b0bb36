// Package pgtest starts a real PostgreSQL server for tests (the
// accounting sink's): Debian's postgresql package's initdb and postgres,
// in a temporary directory, listening on a Unix socket only (no TCP
// port, so tests never collide), run as the postgres user when the test
// runs as root (PostgreSQL refuses root). The server can be stopped and
// started again on the same data, as an outage would.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one PostgreSQL server of a test.
type Server struct {
	// DSN connects to it (host is the socket's directory).
	DSN string

	t     testing.TB
	bin   string
	dir   string
	cred  *syscall.Credential
	cmd   *exec.Cmd
	log   *os.File
	ended chan error
}

// binDir finds PostgreSQL's server programs: Debian keeps them out of
// PATH, under /usr/lib/postgresql/VERSION/bin.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// Start makes a new database cluster and starts its server; t.Cleanup
// stops it and deletes its files. The test is skipped when PostgreSQL's
// server programs are not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binDir()
	if bin == "" {
		t.Skip("PostgreSQL's server programs are not installed (no /usr/lib/postgresql/*/bin/postgres): the PostgreSQL tests are skipped; scripts/install-deps.sh installs Debian's postgresql package")
	}
	// A Unix socket's path is limited to 107 bytes: not t.TempDir(),
	// whose name grows with the test's.
	dir, err := os.MkdirTemp("", "corral-pg")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir, DSN: fmt.Sprintf("host=%s user=corral dbname=postgres sslmode=disable", dir)}
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		s.cred = postgresUser(t)
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	initdb := s.command("initdb", "-D", s.data(), "-U", "corral", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out.String())
	}
	s.Start()
	return s
}

// postgresUser is the account the server runs as when the test runs as
// root.
func postgresUser(t testing.TB) *syscall.Credential {
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("running as root and there is no postgres user to run PostgreSQL as (%v): install Debian's postgresql package (scripts/install-deps.sh)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// Start starts the server (again) and waits until it takes connections.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("pgtest: the server runs already")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	// No TCP (listen_addresses empty): the socket in the directory only.
	// fsync off: the tests stop the server cleanly, never the machine.
	cmd := s.command("postgres", "-D", s.data(), "-k", s.dir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=20")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("starting postgres: %v", err)
	}
	s.cmd, s.log, s.ended = cmd, logf, make(chan error, 1)
	go func() { s.ended <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return
		}
		select {
		case err := <-s.ended:
			s.ended <- err
			s.t.Fatalf("postgres exited while starting: %v\n%s", err, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("postgres took no connection within 30 s: %v\n%s", err, s.Log())
		}
	}
}

// Stop stops the server (a fast shutdown: open transactions are rolled
// back, connections closed) and waits until it exited; a stopped server
// is left as it is.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.ended:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.ended
	}
	s.log.Close()
	s.cmd = nil
}

// Log returns what the server logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

// Connect opens a connection to the server for the test's own queries.
func (s *Server) Connect(ctx context.Context) *pgx.Conn {
	s.t.Helper()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		s.t.Fatalf("connecting to the test's PostgreSQL: %v", err)
	}
	s.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
