// Package pgtest gives tests a real PostgreSQL: the server named by WASMBOX_TEST_POSTGRES (a URL to a server
// where the tests may create databases; .ci/postgres.sh starts one), or else a private server that this package
// starts from Debian's PostgreSQL binaries (initdb in a temporary directory, loopback, stopped when the test
// binary ends: call Main from TestMain). Without either, tests skip, except when CI=true, where they fail:
// CI must really run them.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Server is a private PostgreSQL server in a temporary directory, listening on 127.0.0.1.
type Server struct {
	bin    string
	dir    string
	port   int
	asUser func(*exec.Cmd) // runs a command as the server's user (postgres when this process is root)
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
	mu         sync.Mutex
	started    []*Server
)

// Main runs the tests and then stops every private server this package started.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	for _, s := range started {
		_ = s.Stop()
		_ = os.RemoveAll(s.dir)
	}
	mu.Unlock()
	os.Exit(code)
}

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("pgtest: no PostgreSQL, and CI must run these tests: %s", why)
	}
	tb.Skipf("pgtest: no PostgreSQL (%s): install Debian's postgresql package, or set WASMBOX_TEST_POSTGRES to a server URL", why)
}

// binDir finds the newest installed PostgreSQL's bin directory.
func binDir() (string, error) {
	if d := os.Getenv("WASMBOX_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_ctl")
}

// NewServer starts a private server for tb (stopped and removed at tb's end).
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := startServer()
	if err != nil {
		unavailable(tb, err.Error())
	}
	tb.Cleanup(func() { _ = s.Stop(); _ = os.RemoveAll(s.dir) })
	return s
}

func startServer() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wasmbox-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if s.asUser, err = serverUser(dir); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := s.cmd("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	mu.Lock()
	started = append(started, s)
	mu.Unlock()
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(s.bin, name), args...)
	c.Dir = s.dir
	if s.asUser != nil {
		s.asUser(c)
	}
	return c
}

// Start starts the server (again) on its port.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", s.port, s.dir)
	if out, err := s.cmd("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	return nil
}

// Stop stops the server (fast shutdown: clients are disconnected).
func (s *Server) Stop() error {
	if out, err := s.cmd("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// BaseURL is the URL of the server's postgres database.
func (s *Server) BaseURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// URL returns the URL of a new, empty database for tb on the test server, dropped at tb's end.
func URL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("WASMBOX_TEST_POSTGRES")
	if base == "" {
		sharedOnce.Do(func() { shared, sharedErr = startServer() })
		if sharedErr != nil {
			unavailable(tb, sharedErr.Error())
		}
		base = shared.BaseURL()
	}
	return NewDatabase(tb, base)
}

// NewDatabase creates a new database on the server at base and returns its URL; it is dropped at tb's end.
func NewDatabase(tb testing.TB, base string) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "wasmbox_test_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: CREATE DATABASE on %s: %v", base, err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
