// Package store opens the durable stores of governance state: SQLite (embedded, pure Go, no server) and
// PostgreSQL (for fleets of replicas). Both implement governance.Store: a transactional key-value store whose
// Update transactions are serialisable, on which governance builds durable tasks, shared budgets and shared
// audit chains.
//
// Here's an example:
//
//	db, err := store.Open(ctx, "sqlite:/var/lib/myapp/tasks.db") // or "postgres://user@host/db"
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	gate, err := governance.NewGate(governance.GateConfig{Policy: policy, Auditor: audit, Store: db})
//
// # Notes
//
// SQLite runs in WAL mode with synchronous=NORMAL: a committed transaction survives the process being killed
// (SIGKILL included); a power loss may lose the last transactions. Writers serialise (one write transaction at
// a time per database, across processes, waiting up to 10 s for the lock); readers do not block them. A DB
// holds one write connection for its life, and its Updates take turns on it. Keep the file on a local file
// system: SQLite's locking over NFS is not reliable.
//
// PostgreSQL transactions run at the SERIALIZABLE isolation level; an Update that conflicts with a concurrent
// one is run again (up to 100 times, with a growing random back-off), so its function must have no effect but
// through its transaction. A server that cannot be reached fails the call with an error wrapping
// governance.ErrStore within the connection timeout (5 s unless the URL sets connect_timeout). An Update sends
// its statements in batches, to spend few round trips: BEGIN with its first read, its Puts and Deletes with its
// COMMIT (or with a Scan, which sees them; a Get of a key it wrote answers from the transaction), so an error of
// a write is Update's, not Put's. Its transactions implement governance.AssumeTx: an assumed value is checked in
// the next batch (at the latest, the COMMIT's).
//
// The schema is one table, wasmbox_kv (keys and values as bytes, ordered by byte order), and wasmbox_meta,
// which records the schema version; Open creates them.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/wasmbox/wasmbox/governance"
)

// SchemaVersion is the version of the tables Open creates.
const SchemaVersion = 1

// maxAttempts bounds the runs of one Update that conflicts with others.
const maxAttempts = 100

// DB is an open store. It is safe for concurrent use.
type DB struct {
	kind string
	w    *sql.DB // write transactions
	r    *sql.DB // read transactions (SQLite: a pool of its own, so that readers never take the write lock)
	q    queries
	// get is prepared once on r: a View binds it to its connection instead of preparing it each time.
	get *sql.Stmt
	// sw runs SQLite's write transactions (nil for PostgreSQL).
	sw *sqliteWriter
}

type queries struct{ get, put, del, scan, scanTo string }

// Open opens the store at u: "sqlite:PATH" or "sqlite:///abs/path" (the file is created if it does not exist,
// mode 0600; its directory must exist), or "postgres://..." / "postgresql://..." (a connection URL of pgx). The
// tables are created if they do not exist.
//
// # Errors
//
// Every error wraps governance.ErrStore and starts with "store: ": an unknown scheme, "sqlite::memory:" (its
// state would not outlive the process: use governance.MemoryStore), a missing directory, a server that cannot
// be reached, a schema of a newer version.
func Open(ctx context.Context, u string) (*DB, error) {
	fail := func(format string, a ...any) (*DB, error) {
		return nil, fmt.Errorf("store: %w: "+format, append([]any{governance.ErrStore}, a...)...)
	}
	switch {
	case strings.HasPrefix(u, "sqlite:"):
		path := strings.TrimPrefix(u, "sqlite:")
		if strings.HasPrefix(path, "//") {
			pu, err := url.Parse(u)
			if err != nil || pu.Host != "" {
				return fail("%q: want sqlite:PATH or sqlite:///absolute/path", u)
			}
			path = pu.Path
		}
		switch {
		case path == "":
			return fail("%q names no file", u)
		case path == ":memory:" || strings.Contains(path, "mode=memory"):
			return fail("%q is in memory: its state would not outlive the process (use governance.MemoryStore)", u)
		case strings.ContainsAny(path, "?#"):
			return fail("%q: options in the path are not accepted", u)
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return fail("%s: the directory %s does not exist", u, filepath.Dir(path))
		}
		if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return fail("%s: %w", u, err)
		} else {
			f.Close()
		}
		return openSQLite(ctx, path)
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return openPostgres(ctx, u)
	}
	return fail("%q: unknown store (want sqlite:PATH or postgres://...)", redact(u))
}

// redact hides a password in a URL for messages.
func redact(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		if _, ok := pu.User.Password(); ok {
			pu.User = url.UserPassword(pu.User.Username(), "xxxxx")
			return pu.String()
		}
	}
	return u
}

func openSQLite(ctx context.Context, path string) (*DB, error) {
	dsn := func(lock string) string {
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=" + lock
	}
	w, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("store: sqlite %s: %w: %w", path, governance.ErrStore, err)
	}
	w.SetMaxOpenConns(1) // one writer per process; other processes wait on the file lock
	r, err := sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: sqlite %s: %w: %w", path, governance.ErrStore, err)
	}
	r.SetMaxOpenConns(4)
	d := &DB{kind: "sqlite", w: w, r: r, q: queries{
		get:    "SELECT v FROM wasmbox_kv WHERE k = ?",
		put:    "INSERT INTO wasmbox_kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		del:    "DELETE FROM wasmbox_kv WHERE k = ?",
		scan:   "SELECT k, v FROM wasmbox_kv WHERE k >= ? ORDER BY k LIMIT ?",
		scanTo: "SELECT k, v FROM wasmbox_kv WHERE k >= ? AND k < ? ORDER BY k LIMIT ?",
	}}
	err = d.schema(ctx, []string{
		"CREATE TABLE IF NOT EXISTS wasmbox_kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS wasmbox_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	if d.sw, err = newSQLiteWriter(ctx, w); err != nil {
		d.Close()
		return nil, fmt.Errorf("store: sqlite %s: %w: %w", path, governance.ErrStore, err)
	}
	return d, nil
}

func openPostgres(ctx context.Context, u string) (*DB, error) {
	if !strings.Contains(u, "connect_timeout=") {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "connect_timeout=5"
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		return nil, fmt.Errorf("store: postgres %s: %w: %w", redact(u), governance.ErrStore, err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	d := &DB{kind: "postgres", w: db, r: db, q: queries{
		get:    "SELECT v FROM wasmbox_kv WHERE k = $1",
		put:    "INSERT INTO wasmbox_kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		del:    "DELETE FROM wasmbox_kv WHERE k = $1",
		scan:   "SELECT k, v FROM wasmbox_kv WHERE k >= $1 ORDER BY k LIMIT $2",
		scanTo: "SELECT k, v FROM wasmbox_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3",
	}}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: postgres %s: cannot reach the server: %w: %w", redact(u), governance.ErrStore, err)
	}
	err = d.schema(ctx, []string{
		// Replicas that open a new database at the same moment create it one at a time.
		"SELECT pg_advisory_xact_lock(7305117)",
		"CREATE TABLE IF NOT EXISTS wasmbox_kv (k BYTEA PRIMARY KEY, v BYTEA NOT NULL)",
		"CREATE TABLE IF NOT EXISTS wasmbox_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// prepare prepares the statement of every View's Gets (Update's are prepared by sqliteWriter, or cached by pgx).
func (d *DB) prepare(ctx context.Context) error {
	var err error
	if d.get, err = d.r.PrepareContext(ctx, d.q.get); err != nil {
		return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, err)
	}
	return nil
}

// schema creates the tables and checks the schema version.
func (d *DB) schema(ctx context.Context, stmts []string) error {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: creating the tables: %w: %w", d.kind, governance.ErrStore, err)
	}
	defer tx.Rollback()
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("store: %s: creating the tables: %w: %w", d.kind, governance.ErrStore, err)
		}
	}
	var v string
	err = tx.QueryRowContext(ctx, "SELECT value FROM wasmbox_meta WHERE name = 'schema_version'").Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, "INSERT INTO wasmbox_meta (name, value) VALUES ('schema_version', '"+strconv.Itoa(SchemaVersion)+"')"); err != nil {
			return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, err)
		}
	case err != nil:
		return fmt.Errorf("store: %s: reading the schema version: %w: %w", d.kind, governance.ErrStore, err)
	default:
		if n, _ := strconv.Atoi(v); n != SchemaVersion {
			return fmt.Errorf("store: %s: %w: the store has schema version %q; this wasmbox knows version %d", d.kind, governance.ErrStore, v, SchemaVersion)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, err)
	}
	return d.prepare(ctx)
}

// Kind returns "sqlite" or "postgres".
func (d *DB) Kind() string { return d.kind }

// Close closes the store's connections.
func (d *DB) Close() error {
	var err error
	if d.sw != nil {
		err = d.sw.close()
	}
	err = errors.Join(err, d.w.Close())
	if d.r != d.w {
		err = errors.Join(err, d.r.Close())
	}
	return err
}

// Update implements governance.Store.
func (d *DB) Update(ctx context.Context, fn func(tx governance.Tx) error) error {
	if d.sw != nil {
		return d.sw.update(ctx, d, fn)
	}
	for attempt := 1; ; attempt++ {
		err := d.pgUpdate(ctx, fn)
		if err == nil || !retryable(err) || attempt >= maxAttempts || ctx.Err() != nil {
			return err
		}
		// A growing, random back-off: conflicting replicas spread out instead of colliding again.
		backoff := time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(time.Millisecond) + 1))
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, ctx.Err())
		}
	}
}

// View implements governance.Store.
func (d *DB) View(ctx context.Context, fn func(tx governance.Tx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if d.kind == "postgres" {
		opts.Isolation = sql.LevelRepeatableRead
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, err)
	}
	stx, err := d.r.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w: %w", d.kind, governance.ErrStore, err)
	}
	t := &viewTx{d: d, tx: stx, ctx: ctx}
	defer func() {
		t.done = true
		_ = stx.Rollback()
	}()
	if err := fn(t); err != nil {
		return err
	}
	t.done = true
	if err := stx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("store: %s: %w: %w", d.kind, governance.ErrStore, err)
	}
	return nil
}

// retryable reports whether err is a conflict with a concurrent transaction, after which the whole
// transaction may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505": // serialization_failure, deadlock_detected, unique_violation
			return true
		}
	}
	return false
}

// viewTx is a View's read-only transaction, on database/sql.
type viewTx struct {
	d    *DB
	tx   *sql.Tx
	ctx  context.Context
	done bool
	// get is DB.get bound to this transaction, made on first use.
	get *sql.Stmt
}

var errTxDone = fmt.Errorf("store: %w: transaction used after its function returned", governance.ErrStore)

func (t *viewTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	return governance.CheckStoreKey(key)
}

func (t *viewTx) wrap(op string, err error) error {
	return fmt.Errorf("store: %s: %s: %w: %w", t.d.kind, op, governance.ErrStore, err)
}

func (t *viewTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	var v []byte
	if t.get == nil {
		t.get = t.tx.StmtContext(t.ctx, t.d.get)
	}
	err := t.get.QueryRowContext(t.ctx, []byte(key)).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, t.wrap("get", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

func (t *viewTx) Put(key string, value []byte) error {
	if t.done {
		return errTxDone
	}
	return fmt.Errorf("store: %w: Put in a View", governance.ErrStore)
}

func (t *viewTx) Delete(key string) error {
	if t.done {
		return errTxDone
	}
	return fmt.Errorf("store: %w: Delete in a View", governance.ErrStore)
}

func (t *viewTx) Scan(prefix, after string, limit int) ([]governance.KV, error) {
	if t.done {
		return nil, errTxDone
	}
	limit = governance.ScanLimit(limit)
	var rows *sql.Rows
	var err error
	lower := scanLower(prefix, after)
	if upper, ok := prefixEnd([]byte(prefix)); ok {
		rows, err = t.tx.QueryContext(t.ctx, t.d.q.scanTo, lower, upper, limit)
	} else {
		rows, err = t.tx.QueryContext(t.ctx, t.d.q.scan, lower, limit)
	}
	if err != nil {
		return nil, t.wrap("scan", err)
	}
	defer rows.Close()
	var out []governance.KV
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, t.wrap("scan", err)
		}
		if v == nil {
			v = []byte{}
		}
		out = append(out, governance.KV{Key: string(k), Value: v})
	}
	if err := rows.Err(); err != nil {
		return nil, t.wrap("scan", err)
	}
	return out, nil
}

// scanLower is the one lower bound of a Scan, so that the index seeks to it (k > after is k >= after+"\x00" in
// byte order). With two, SQLite seeks by one and filters by the other: a prefix scan with after "" read every
// key before the prefix.
func scanLower(prefix, after string) []byte {
	if after >= prefix {
		return append([]byte(after), 0)
	}
	return []byte(prefix)
}

// prefixEnd returns the smallest byte string greater than every string that starts with p; ok is false when
// there is none (p empty or all 0xff).
func prefixEnd(p []byte) ([]byte, bool) {
	end := []byte(string(p))
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1], true
		}
	}
	return nil, false
}
