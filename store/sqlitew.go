package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/wasmbox/wasmbox/governance"
)

// sqliteWriter is the one write connection of a SQLite store, held for the store's life, with its statements
// prepared on it once. An Update runs on it through the driver's own interfaces: database/sql's pool, its
// per-transaction goroutine and its per-statement conversions cost more than SQLite's work for the small
// transactions of governed calls. Updates of one process take turns on sem (SQLite allows one writer at a time;
// other processes wait on the file lock, in BEGIN IMMEDIATE).
type sqliteWriter struct {
	sem  chan struct{} // held by the running Update
	conn *sql.Conn
	// The prepared statements, valid on conn (made in the first Update).
	st *sqliteStmts
}

type sqliteStmts struct {
	begin, commit, rollback, get, put, del, scan, scanTo driver.Stmt
}

func newSQLiteWriter(ctx context.Context, db *sql.DB) (*sqliteWriter, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &sqliteWriter{sem: make(chan struct{}, 1), conn: conn}
	return w, nil
}

func (w *sqliteWriter) close() error {
	w.sem <- struct{}{} // wait for a running Update
	defer func() { <-w.sem }()
	err := w.conn.Raw(func(dc any) error {
		if w.st == nil {
			return nil
		}
		var errs []error
		for _, s := range []driver.Stmt{w.st.begin, w.st.commit, w.st.rollback, w.st.get, w.st.put, w.st.del, w.st.scan, w.st.scanTo} {
			errs = append(errs, s.Close())
		}
		w.st = nil
		return errors.Join(errs...)
	})
	return errors.Join(err, w.conn.Close())
}

func (w *sqliteWriter) prepare(ctx context.Context, dc driver.Conn, q *queries) (*sqliteStmts, error) {
	cp, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, errors.New("the sqlite driver does not prepare with a context")
	}
	st := &sqliteStmts{}
	var err error
	prep := func(q string) driver.Stmt {
		if err != nil {
			return nil
		}
		var s driver.Stmt
		s, err = cp.PrepareContext(ctx, q)
		return s
	}
	st.begin, st.commit, st.rollback = prep("BEGIN IMMEDIATE"), prep("COMMIT"), prep("ROLLBACK")
	st.get, st.put, st.del, st.scan, st.scanTo = prep(q.get), prep(q.put), prep(q.del), prep(q.scan), prep(q.scanTo)
	if err != nil {
		return nil, err
	}
	for _, s := range []driver.Stmt{st.begin, st.commit, st.rollback, st.get, st.put, st.del, st.scan, st.scanTo} {
		if _, ok := s.(driver.StmtExecContext); !ok {
			return nil, errors.New("the sqlite driver's statements do not execute with a context")
		}
		if _, ok := s.(driver.StmtQueryContext); !ok {
			return nil, errors.New("the sqlite driver's statements do not query with a context")
		}
	}
	return st, nil
}

// update runs fn in one write transaction.
func (w *sqliteWriter) update(ctx context.Context, d *DB, fn func(tx governance.Tx) error) error {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("store: sqlite: %w: %w", governance.ErrStore, ctx.Err())
	}
	defer func() { <-w.sem }()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: sqlite: %w: %w", governance.ErrStore, err)
	}
	// A panic of fn is raised again after Raw returns: database/sql closes a connection whose Raw panics.
	var panicked any
	err := w.conn.Raw(func(dc any) (err error) {
		if w.st == nil {
			st, err := w.prepare(ctx, dc.(driver.Conn), &d.q)
			if err != nil {
				return fmt.Errorf("store: sqlite: preparing statements: %w: %w", governance.ErrStore, err)
			}
			w.st = st
		}
		st := w.st
		// Only BEGIN IMMEDIATE waits (for another process's write lock, up to the busy timeout): it alone watches
		// ctx. The statements of a transaction run on the database this connection holds the lock of, so they
		// take no goroutine each to watch ctx (the driver starts one per statement with a cancellable context);
		// tx checks ctx before each of them.
		if _, err := st.begin.(driver.StmtExecContext).ExecContext(ctx, nil); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("store: sqlite: begin: %w: %w", governance.ErrStore, err)
		}
		t := &sqliteTx{d: d, st: st, ctx: ctx}
		committed := false
		defer func() {
			t.done = true
			if !committed {
				_, _ = st.rollback.(driver.StmtExecContext).ExecContext(context.Background(), nil)
			}
			if p := recover(); p != nil {
				panicked, err = p, errors.New("store: sqlite: the transaction's function panicked")
			}
		}()
		if err := fn(t); err != nil {
			return err
		}
		committed = true
		if _, err := st.commit.(driver.StmtExecContext).ExecContext(context.Background(), nil); err != nil {
			// A COMMIT that failed may leave the transaction open (SQLITE_BUSY): end it.
			_, _ = st.rollback.(driver.StmtExecContext).ExecContext(context.Background(), nil)
			return fmt.Errorf("store: sqlite: commit: %w: %w", governance.ErrStore, err)
		}
		return nil
	})
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, sql.ErrConnDone) { // the store was closed
		return fmt.Errorf("store: sqlite: %w: %w", governance.ErrStore, err)
	}
	return err
}

// sqliteTx is a write transaction on the sqliteWriter's connection.
type sqliteTx struct {
	d    *DB
	st   *sqliteStmts
	ctx  context.Context
	done bool
	args [2]driver.NamedValue
}

var noCancel = context.Background()

func (t *sqliteTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	if err := t.ctx.Err(); err != nil {
		return fmt.Errorf("store: sqlite: %w: %w", governance.ErrStore, err)
	}
	return governance.CheckStoreKey(key)
}

func (t *sqliteTx) wrap(op string, err error) error {
	return fmt.Errorf("store: sqlite: %s: %w: %w", op, governance.ErrStore, err)
}

func (t *sqliteTx) nv(vs ...any) []driver.NamedValue {
	a := t.args[:0]
	for i, v := range vs {
		a = append(a, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return a
}

func (t *sqliteTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	rows, err := t.st.get.(driver.StmtQueryContext).QueryContext(noCancel, t.nv([]byte(key)))
	if err != nil {
		return nil, false, t.wrap("get", err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	switch err := rows.Next(dest); {
	case err == io.EOF:
		return nil, false, nil
	case err != nil:
		return nil, false, t.wrap("get", err)
	}
	v, err := blob(dest[0])
	if err != nil {
		return nil, false, t.wrap("get", err)
	}
	return v, true, nil
}

// blob is a BLOB column's value (SQLite returns nil for an empty one).
func blob(v driver.Value) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case nil:
		return []byte{}, nil
	case string:
		return []byte(b), nil
	}
	return nil, fmt.Errorf("a value of type %T where bytes were stored", v)
}

func (t *sqliteTx) Put(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	if err := governance.CheckStoreValue(value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	if _, err := t.st.put.(driver.StmtExecContext).ExecContext(noCancel, t.nv([]byte(key), value)); err != nil {
		return t.wrap("put", err)
	}
	return nil
}

func (t *sqliteTx) Delete(key string) error {
	if err := t.check(key); err != nil {
		return err
	}
	if _, err := t.st.del.(driver.StmtExecContext).ExecContext(noCancel, t.nv([]byte(key))); err != nil {
		return t.wrap("delete", err)
	}
	return nil
}

func (t *sqliteTx) Scan(prefix, after string, limit int) ([]governance.KV, error) {
	if t.done {
		return nil, errTxDone
	}
	if err := t.ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: sqlite: %w: %w", governance.ErrStore, err)
	}
	limit = governance.ScanLimit(limit)
	lower := scanLower(prefix, after)
	var rows driver.Rows
	var err error
	if upper, ok := prefixEnd([]byte(prefix)); ok {
		rows, err = t.st.scanTo.(driver.StmtQueryContext).QueryContext(noCancel,
			[]driver.NamedValue{{Ordinal: 1, Value: lower}, {Ordinal: 2, Value: upper}, {Ordinal: 3, Value: int64(limit)}})
	} else {
		rows, err = t.st.scan.(driver.StmtQueryContext).QueryContext(noCancel,
			[]driver.NamedValue{{Ordinal: 1, Value: lower}, {Ordinal: 2, Value: int64(limit)}})
	}
	if err != nil {
		return nil, t.wrap("scan", err)
	}
	defer rows.Close()
	var out []governance.KV
	dest := make([]driver.Value, 2)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, t.wrap("scan", err)
		}
		k, err := blob(dest[0])
		if err != nil {
			return nil, t.wrap("scan", err)
		}
		v, err := blob(dest[1])
		if err != nil {
			return nil, t.wrap("scan", err)
		}
		out = append(out, governance.KV{Key: string(k), Value: v})
	}
	return out, nil
}
