package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/governance/storetest"
	"github.com/wasmbox/wasmbox/internal/pgtest"
	"github.com/wasmbox/wasmbox/store"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		replicaMain()
		return
	}
	pgtest.Main(m)
}

func openT(t *testing.T, u string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sqliteStore(t *testing.T) governance.Store {
	return openT(t, "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
}

func postgresStore(t *testing.T) governance.Store { return openT(t, pgtest.URL(t)) }

func TestSQLiteContract(t *testing.T)     { storetest.Run(t, sqliteStore) }
func TestPostgresContract(t *testing.T)   { storetest.Run(t, postgresStore) }
func TestSQLiteGovernance(t *testing.T)   { storetest.RunGovernance(t, sqliteStore) }
func TestPostgresGovernance(t *testing.T) { storetest.RunGovernance(t, postgresStore) }

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"mysql://x", "unknown store"},
		{"sqlite::memory:", "in memory"},
		{"sqlite:file::memory:?mode=memory", "in memory"},
		{"sqlite:/no/such/dir/x.db", "does not exist"},
		{"sqlite:", "names no file"},
		{"postgres://u:secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "cannot reach"},
	} {
		start := time.Now()
		_, err := store.Open(ctx, c.url)
		if !errors.Is(err, governance.ErrStore) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("Open(%q) = %v; want ErrStore saying %q", c.url, err, c.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", c.url, err)
		}
		if time.Since(start) > 15*time.Second {
			t.Errorf("Open(%q) took %v", c.url, time.Since(start))
		}
	}
}

// A SQLite store is a file that outlives its process: reopened, it has what was committed.
func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db := openT(t, "sqlite:"+path)
	if err := db.Update(context.Background(), func(tx governance.Tx) error { return tx.Put("k", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the store file: %v, mode %v; want 0600", err, fi.Mode())
	}
	db2 := openT(t, "sqlite:///"+strings.TrimPrefix(path, "/"))
	err := db2.View(context.Background(), func(tx governance.Tx) error {
		v, ok, err := tx.Get("k")
		if err != nil || !ok || string(v) != "v" {
			t.Fatalf("after reopening: %q %v %v", v, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The PostgreSQL server goes away mid-run: calls fail closed with ErrStore, quickly, and the same DB works again
// once the server is back.
func TestPostgresServerGoesAway(t *testing.T) {
	srv := pgtest.NewServer(t)
	u := pgtest.NewDatabase(t, srv.BaseURL())
	db := openT(t, u)
	ctx := context.Background()
	put := func() error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return db.Update(ctx, func(tx governance.Tx) error { return tx.Put("k", []byte("v")) })
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	// A governed call of a task whose store goes away: the tool does not run.
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	task, err := g.NewTask(ctx, governance.TaskOptions{ID: "away"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := put(); !errors.Is(err, governance.ErrStore) {
		t.Fatalf("Update with the server stopped = %v; want ErrStore", err)
	}
	ran := false
	_, err = task.Run().Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, governance.ErrStore) || ran || task.Run().Halted() == nil {
		t.Fatalf("a governed call with the server stopped = %v (ran %v); want ErrStore, not run, the run halted", err, ran)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("failing took %v", d)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := put()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not work again after the server came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func openB(tb testing.TB, u string) (*store.DB, error) {
	db, err := store.Open(context.Background(), u)
	if err == nil {
		tb.Cleanup(func() { db.Close() })
	}
	return db, err
}

// An Update of a closed store fails with ErrStore (SQLite's writes run on a connection of their own, which Close
// closes).
func TestUpdateAfterClose(t *testing.T) {
	for name, u := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "c.db") },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(context.Background(), u(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(context.Background(), func(tx governance.Tx) error { return tx.Put("k", []byte("v")) }); err != nil {
				t.Fatal(err)
			}
			db.Close()
			err = db.Update(context.Background(), func(tx governance.Tx) error { return tx.Put("k", []byte("w")) })
			if !errors.Is(err, governance.ErrStore) || !strings.HasPrefix(err.Error(), "store: ") {
				t.Fatalf("Update after Close = %v; want an error wrapping ErrStore", err)
			}
		})
	}
}
