package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/wasmbox/wasmbox/governance"
)

// pgUpdate runs fn once in a SERIALIZABLE transaction on a connection of the pool, with pgx's own API
// (database/sql's Conn.Raw), so that its statements travel in few round trips: BEGIN goes with the first read,
// Puts and Deletes wait in the transaction (its Gets see them) and go with the COMMIT, or before a Scan. A
// governed call's transaction (one Get, then Puts) is two round trips instead of six.
func (d *DB) pgUpdate(ctx context.Context, fn func(tx governance.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: postgres: %w: %w", governance.ErrStore, err)
	}
	c, err := d.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: postgres: begin: %w: %w", governance.ErrStore, err)
	}
	defer c.Close()
	// A panic of fn is raised again after Raw returns: database/sql closes a connection whose Raw panics.
	var panicked any
	err = c.Raw(func(dc any) (err error) {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: postgres: %w: the driver's connection is a %T", governance.ErrStore, dc)
		}
		t := &pgTx{d: d, c: sc.Conn(), ctx: ctx, writes: map[string][]byte{}}
		committed := false
		defer func() {
			t.done = true
			if t.begun && !committed {
				// A connection left in the transaction (this failed) is discarded by the pool (stdlib's
				// ResetSession), so the ROLLBACK is a courtesy.
				_, _ = t.c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
			if p := recover(); p != nil {
				panicked, err = p, errors.New("store: postgres: the transaction's function panicked")
			}
		}()
		if err := fn(t); err != nil {
			return err
		}
		err = t.commit()
		committed = err == nil
		return err
	})
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, sql.ErrConnDone) { // the store was closed
		return fmt.Errorf("store: postgres: %w: %w", governance.ErrStore, err)
	}
	return err
}

// pgTx is a write transaction of pgUpdate.
type pgTx struct {
	d     *DB
	c     *pgx.Conn
	ctx   context.Context
	begun bool // BEGIN was sent
	done  bool
	// writes are the Puts and Deletes (nil value) not sent yet, in the order of their first write.
	writes map[string][]byte
	order  []string
	// assumed are the values of Assume; checks the keys whose check was not sent yet.
	assumed map[string][]byte
	checks  []string
}

// pgCheck fails (division by zero) unless key $1 holds $2: a check of Assume, in the transaction's batch.
const pgCheck = "SELECT 1 / (SELECT count(*) FROM wasmbox_kv WHERE k = $1 AND v = $2)"

const pgBegin = "BEGIN ISOLATION LEVEL SERIALIZABLE"

func (t *pgTx) wrap(op string, err error) error {
	return fmt.Errorf("store: postgres: %s: %w: %w", op, governance.ErrStore, err)
}

func (t *pgTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	return governance.CheckStoreKey(key)
}

// batch starts a batch with BEGIN if it was not sent, the checks and the writes not sent yet; n counts the
// statements, of which the checks come after the BEGIN.
func (t *pgTx) batch() (b *pgx.Batch, n int) {
	b = &pgx.Batch{}
	if !t.begun {
		b.Queue(pgBegin)
	}
	for _, k := range t.checks {
		b.Queue(pgCheck, []byte(k), t.assumed[k])
	}
	for _, k := range t.order {
		if v := t.writes[k]; v != nil {
			b.Queue(t.d.q.put, []byte(k), v)
		} else {
			b.Queue(t.d.q.del, []byte(k))
		}
	}
	return b, b.Len()
}

// sent reads the results of the n statements that batch queued and marks them sent.
func (t *pgTx) sent(br pgx.BatchResults, n int) error {
	begin := 0
	if !t.begun {
		begin = 1
	}
	t.begun = true // whatever happens now, the server may be in the transaction
	for i := range n {
		if _, err := br.Exec(); err != nil {
			var pe *pgconn.PgError
			if i >= begin && i < begin+len(t.checks) && errors.As(err, &pe) && pe.Code == "22012" {
				return fmt.Errorf("store: postgres: %w: %s", governance.ErrAssumed, t.checks[i-begin])
			}
			return err
		}
	}
	t.checks = t.checks[:0]
	clear(t.writes)
	t.order = t.order[:0]
	return nil
}

// Assume implements governance.AssumeTx: the check goes with the next batch (the COMMIT's, for a transaction
// that reads nothing else), before the writes.
func (t *pgTx) Assume(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	if v, ok := t.writes[key]; ok {
		if v == nil || !bytes.Equal(v, value) {
			return fmt.Errorf("store: postgres: %w: %s (written in the transaction)", governance.ErrAssumed, key)
		}
		return nil
	}
	if t.assumed == nil {
		t.assumed = map[string][]byte{}
	}
	if _, ok := t.assumed[key]; !ok {
		t.checks = append(t.checks, key)
	}
	t.assumed[key] = bytes.Clone(value)
	return nil
}

func (t *pgTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	if v, ok := t.writes[key]; ok {
		return slices.Clone(v), v != nil, nil
	}
	if v, ok := t.assumed[key]; ok {
		return slices.Clone(v), true, nil
	}
	var v []byte
	var err error
	if !t.begun || len(t.checks) > 0 {
		// BEGIN travels with the first read, and so do the checks of Assume and the writes not sent yet.
		b, n := t.batch()
		b.Queue(t.d.q.get, []byte(key))
		br := t.c.SendBatch(t.ctx, b)
		if err = t.sent(br, n); err == nil {
			err = br.QueryRow().Scan(&v)
		}
		err = errors.Join(err, closeBatch(br, err))
	} else {
		err = t.c.QueryRow(t.ctx, t.d.q.get, []byte(key)).Scan(&v)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case errors.Is(err, governance.ErrAssumed):
		return nil, false, err
	case err != nil:
		return nil, false, t.wrap("get", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// closeBatch closes br, reporting its error only if there was none before.
func closeBatch(br pgx.BatchResults, before error) error {
	err := br.Close()
	if before != nil {
		return nil
	}
	return err
}

func (t *pgTx) write(key string, value []byte) {
	if _, ok := t.writes[key]; !ok {
		t.order = append(t.order, key)
	}
	t.writes[key] = value
}

func (t *pgTx) Put(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	if err := governance.CheckStoreValue(value); err != nil {
		return err
	}
	t.write(key, append([]byte{}, value...)) // never nil: nil is a Delete
	return nil
}

func (t *pgTx) Delete(key string) error {
	if err := t.check(key); err != nil {
		return err
	}
	t.write(key, nil)
	return nil
}

func (t *pgTx) Scan(prefix, after string, limit int) ([]governance.KV, error) {
	if t.done {
		return nil, errTxDone
	}
	limit = governance.ScanLimit(limit)
	// The writes not sent yet go first (one round trip with the scan), so that the scan sees them.
	b, n := t.batch()
	lower := scanLower(prefix, after)
	if upper, ok := prefixEnd([]byte(prefix)); ok {
		b.Queue(t.d.q.scanTo, lower, upper, limit)
	} else {
		b.Queue(t.d.q.scan, lower, limit)
	}
	br := t.c.SendBatch(t.ctx, b)
	var out []governance.KV
	err := t.sent(br, n)
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			for rows.Next() {
				var k, v []byte
				if err = rows.Scan(&k, &v); err != nil {
					break
				}
				if v == nil {
					v = []byte{}
				}
				out = append(out, governance.KV{Key: string(k), Value: v})
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
	}
	if err = errors.Join(err, closeBatch(br, err)); err != nil {
		if errors.Is(err, governance.ErrAssumed) {
			return nil, err
		}
		return nil, t.wrap("scan", err)
	}
	return out, nil
}

// commit sends the writes not sent yet with the COMMIT (and the BEGIN, when nothing was read).
func (t *pgTx) commit() error {
	if !t.begun && len(t.order) == 0 && len(t.checks) == 0 {
		return nil // nothing read, nothing written
	}
	b, n := t.batch()
	b.Queue("COMMIT")
	br := t.c.SendBatch(t.ctx, b)
	err := t.sent(br, n)
	if err == nil {
		var tag []byte
		ct, e := br.Exec()
		tag, err = []byte(ct.String()), e
		// The COMMIT of a transaction that failed is a ROLLBACK, without error.
		if err == nil && string(tag) != "COMMIT" {
			err = fmt.Errorf("the transaction was rolled back (%s)", tag)
		}
	}
	if err = errors.Join(err, closeBatch(br, err)); err != nil {
		if errors.Is(err, governance.ErrAssumed) {
			return err
		}
		return t.wrap("commit", err)
	}
	t.begun = false // committed: nothing to roll back
	return nil
}
