package governance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// A Store keeps governance state that must outlive a process and be shared by every process of a fleet: the
// budgets of [StoreBudget], the audit chains of [StoreAuditor], and the durable tasks of [Gate.OpenTask] (their
// journals, pending approvals and decisions). It is a transactional key-value store, nothing more: keys are
// strings, values are bytes, and Update applies a function's reads and writes as one atomic, isolated change.
// Everything governance builds on it (budgets that never overspend across replicas, decisions recorded once,
// one audit chain however many writers) follows from that one property.
//
// The package provides [MemoryStore] (one process, for tests and for programs without a fleet); package
// github.com/wasmbox/wasmbox/store opens SQLite and PostgreSQL stores. Implementations of your own can be
// checked with github.com/wasmbox/wasmbox/governance/storetest.
//
// # Contract
//
//   - Update runs fn in a transaction. If fn returns nil, all of its Puts and Deletes take effect together and
//     become visible to later transactions; if fn returns an error or panics, none do, and Update returns fn's
//     error (wrapped or as it is). Transactions are serialisable: the result is as if they ran one at a time.
//     An implementation may run fn more than once (to retry after a conflict), so fn must have no effect other
//     than through tx.
//   - View runs fn with a read-only transaction that sees one consistent state.
//   - A Tx is valid only during its fn, and only on fn's goroutine.
//   - Keys are at most MaxStoreKeyBytes bytes of valid UTF-8 without NUL; values at most MaxStoreValueBytes.
//   - Scan returns the entries whose keys start with prefix and sort after after (byte order), in key order,
//     at most limit of them (limit ≤ 0 means MaxStoreScan).
//   - Every error of a store that cannot be reached or answer wraps ErrStore, so that callers fail closed on it.
type Store interface {
	Update(ctx context.Context, fn func(tx Tx) error) error
	View(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is one transaction of a [Store].
type Tx interface {
	// Get returns the value of key; ok is false when there is none.
	Get(key string) (value []byte, ok bool, err error)
	// Put sets the value of key.
	Put(key string, value []byte) error
	// Delete removes key (no error if it does not exist).
	Delete(key string) error
	// Scan lists entries by key prefix, in key order, after the key after (exclusive; "" starts at the first).
	Scan(prefix, after string, limit int) ([]KV, error)
}

// KV is one entry of a [Tx.Scan].
type KV struct {
	Key   string
	Value []byte
}

// The bounds of a [Store]'s keys, values and scans.
const (
	MaxStoreKeyBytes   = 512
	MaxStoreValueBytes = 64 << 20
	MaxStoreScan       = 1000
)

var (
	// ErrStore: the store could not be reached, or failed, or refused an operation. Every store error wraps
	// it. A governed call that meets it does not run: with a store, no tool runs ungoverned.
	ErrStore = errors.New("governance: store failed")
	// ErrStoreKey: a key or value outside the bounds of a [Store]. It also satisfies ErrStore.
	ErrStoreKey = fmt.Errorf("%w: invalid key or value", ErrStore)
	// ErrAssumed: a value that a transaction assumed ([AssumeTx]) was not the store's; the transaction had no
	// effect. It is not a failure of the store: the caller runs the transaction again, reading the value.
	ErrAssumed = errors.New("governance: an assumed value was not the store's")
)

// AssumeTx is a [Tx] that can take a value on trust instead of reading it: a store where a read costs a round
// trip (PostgreSQL) implements it, so that a transaction whose caller knows what a key holds (the record it
// last wrote) sends its check with its writes and its COMMIT. Callers check for it with a type assertion.
type AssumeTx interface {
	Tx
	// Assume tells the transaction that key holds value, as a Get would have returned it. If it does not when
	// the transaction commits, Update returns an error wrapping ErrAssumed and nothing of the transaction takes
	// effect; otherwise the transaction is as if it had read key. A Get of key in the transaction returns value.
	Assume(key string, value []byte) error
}

// CheckStoreKey returns an error wrapping ErrStoreKey if key cannot be stored. Store implementations call it.
func CheckStoreKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrStoreKey)
	case len(key) > MaxStoreKeyBytes:
		return fmt.Errorf("%w: key of %d bytes (max %d)", ErrStoreKey, len(key), MaxStoreKeyBytes)
	case strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not UTF-8 without NUL", ErrStoreKey, key)
	}
	return nil
}

// CheckStoreValue returns an error wrapping ErrStoreKey if value cannot be stored.
func CheckStoreValue(value []byte) error {
	if len(value) > MaxStoreValueBytes {
		return fmt.Errorf("%w: value of %d bytes (max %d)", ErrStoreKey, len(value), MaxStoreValueBytes)
	}
	return nil
}

// ScanLimit is the number of entries a Scan with limit returns at most.
func ScanLimit(limit int) int {
	if limit <= 0 || limit > MaxStoreScan {
		return MaxStoreScan
	}
	return limit
}

// MemoryStore is a [Store] in the memory of one process. Its zero value is an empty store, ready to use. It is
// what tests and single-process programs use; its state ends with the process.
type MemoryStore struct {
	mu   sync.RWMutex
	data map[string][]byte
	// Fail, when set, is called at the start of every transaction; an error it returns fails the transaction
	// (wrapped in ErrStore). Tests use it to take the store away.
	Fail func() error
}

// Update implements Store.
func (m *MemoryStore) Update(ctx context.Context, fn func(tx Tx) error) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tx := &memTx{m: m, writes: map[string][]byte{}}
	defer func() { tx.done = true }()
	if err := fn(tx); err != nil {
		return err
	}
	if m.data == nil {
		m.data = map[string][]byte{}
	}
	for k, v := range tx.writes {
		if v == nil {
			delete(m.data, k)
		} else {
			m.data[k] = v
		}
	}
	return nil
}

// View implements Store.
func (m *MemoryStore) View(ctx context.Context, fn func(tx Tx) error) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	tx := &memTx{m: m, readOnly: true}
	defer func() { tx.done = true }()
	return fn(tx)
}

func (m *MemoryStore) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	if m.Fail != nil {
		if err := m.Fail(); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	return nil
}

// Len returns the number of keys in the store.
func (m *MemoryStore) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.data)
}

type memTx struct {
	m        *MemoryStore
	writes   map[string][]byte // nil value: deleted
	readOnly bool
	done     bool
}

var errTxDone = fmt.Errorf("%w: transaction used after its function returned", ErrStore)

func (t *memTx) Get(key string) ([]byte, bool, error) {
	if t.done {
		return nil, false, errTxDone
	}
	if err := CheckStoreKey(key); err != nil {
		return nil, false, err
	}
	if v, ok := t.writes[key]; ok {
		return bytes.Clone(v), v != nil, nil
	}
	v, ok := t.m.data[key]
	return bytes.Clone(v), ok, nil
}

func (t *memTx) Put(key string, value []byte) error {
	if t.done {
		return errTxDone
	}
	if t.readOnly {
		return fmt.Errorf("%w: Put in a View", ErrStore)
	}
	if err := CheckStoreKey(key); err != nil {
		return err
	}
	if err := CheckStoreValue(value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	t.writes[key] = bytes.Clone(value)
	return nil
}

func (t *memTx) Delete(key string) error {
	if t.done {
		return errTxDone
	}
	if t.readOnly {
		return fmt.Errorf("%w: Delete in a View", ErrStore)
	}
	if err := CheckStoreKey(key); err != nil {
		return err
	}
	t.writes[key] = nil
	return nil
}

func (t *memTx) Scan(prefix, after string, limit int) ([]KV, error) {
	if t.done {
		return nil, errTxDone
	}
	limit = ScanLimit(limit)
	var keys []string
	seen := map[string]bool{}
	consider := func(k string) {
		if strings.HasPrefix(k, prefix) && k > after && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for k, v := range t.writes {
		if v != nil {
			consider(k)
		} else {
			seen[k] = true // deleted in this transaction
		}
	}
	for k := range t.m.data {
		consider(k)
	}
	slices.Sort(keys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]KV, len(keys))
	for i, k := range keys {
		v, _, _ := t.Get(k)
		out[i] = KV{Key: k, Value: v}
	}
	return out, nil
}
