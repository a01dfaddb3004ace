// Package storetest checks that a governance.Store keeps its contract, the way testing/fstest checks an fs.FS:
// call [Run] from a test of your own implementation.
//
// Here's an example:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) governance.Store { return openFreshStore(t) })
//	}
//
// Every subtest opens a store of its own with open, which must return an empty store.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// Run checks the store contract of governance.Store on stores made by open.
func Run(t *testing.T, open func(t *testing.T) governance.Store) {
	ctx := context.Background()
	t.Run("GetPutDelete", func(t *testing.T) {
		s := open(t)
		mustUpdate(t, s, func(tx governance.Tx) error {
			if _, ok, err := tx.Get("absent"); err != nil || ok {
				return fmt.Errorf("Get(absent) = ok %v, %v; want not found", ok, err)
			}
			if err := tx.Put("a", []byte("1")); err != nil {
				return err
			}
			if v, ok, err := tx.Get("a"); err != nil || !ok || string(v) != "1" {
				return fmt.Errorf("Get(a) in the writing transaction = %q, %v, %v", v, ok, err)
			}
			return tx.Put("empty", nil)
		})
		mustView(t, s, func(tx governance.Tx) error {
			if v, ok, err := tx.Get("a"); err != nil || !ok || string(v) != "1" {
				return fmt.Errorf("Get(a) = %q, %v, %v; want \"1\"", v, ok, err)
			}
			if v, ok, err := tx.Get("empty"); err != nil || !ok || len(v) != 0 {
				return fmt.Errorf("Get(empty) = %q, %v, %v; want an empty value that exists", v, ok, err)
			}
			return nil
		})
		mustUpdate(t, s, func(tx governance.Tx) error {
			if err := tx.Delete("a"); err != nil {
				return err
			}
			if _, ok, err := tx.Get("a"); err != nil || ok {
				return fmt.Errorf("Get(a) after Delete in the same transaction = ok %v, %v", ok, err)
			}
			return tx.Delete("never-there")
		})
		mustView(t, s, func(tx governance.Tx) error {
			if _, ok, err := tx.Get("a"); err != nil || ok {
				return fmt.Errorf("Get(a) after Delete = ok %v, %v", ok, err)
			}
			return nil
		})
	})

	t.Run("Assume", func(t *testing.T) { testAssume(t, open(t)) })
	t.Run("BinaryValues", func(t *testing.T) {
		s := open(t)
		val := make([]byte, 1<<20)
		for i := range val {
			val[i] = byte(i * 7)
		}
		val[0], val[1] = 0, 0xff
		mustUpdate(t, s, func(tx governance.Tx) error { return tx.Put("bin", val) })
		mustView(t, s, func(tx governance.Tx) error {
			v, ok, err := tx.Get("bin")
			if err != nil || !ok || !bytes.Equal(v, val) {
				return fmt.Errorf("a 1 MiB binary value did not round-trip (ok %v, %d bytes, %v)", ok, len(v), err)
			}
			return nil
		})
	})

	t.Run("UnicodeKeys", func(t *testing.T) {
		s := open(t)
		keys := []string{"k/é", "k/日本", "k/\u202e", "k/ "}
		mustUpdate(t, s, func(tx governance.Tx) error {
			for i, k := range keys {
				if err := tx.Put(k, []byte(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			return nil
		})
		mustView(t, s, func(tx governance.Tx) error {
			for i, k := range keys {
				if v, ok, err := tx.Get(k); err != nil || !ok || string(v) != strconv.Itoa(i) {
					return fmt.Errorf("Get(%q) = %q, %v, %v", k, v, ok, err)
				}
			}
			return nil
		})
	})

	t.Run("RollbackOnError", func(t *testing.T) {
		s := open(t)
		mustUpdate(t, s, func(tx governance.Tx) error { return tx.Put("kept", []byte("before")) })
		boom := errors.New("boom")
		err := s.Update(ctx, func(tx governance.Tx) error {
			if err := tx.Put("kept", []byte("after")); err != nil {
				return err
			}
			if err := tx.Put("new", []byte("x")); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update returned %v; want the function's error", err)
		}
		mustView(t, s, func(tx governance.Tx) error {
			if v, _, _ := tx.Get("kept"); string(v) != "before" {
				return fmt.Errorf("a failed transaction's Put took effect: kept = %q", v)
			}
			if _, ok, _ := tx.Get("new"); ok {
				return errors.New("a failed transaction's Put of a new key took effect")
			}
			return nil
		})
	})

	t.Run("RollbackOnPanic", func(t *testing.T) {
		s := open(t)
		func() {
			defer func() { _ = recover() }()
			_ = s.Update(ctx, func(tx governance.Tx) error {
				_ = tx.Put("p", []byte("x"))
				panic("in the transaction")
			})
		}()
		mustView(t, s, func(tx governance.Tx) error {
			if _, ok, _ := tx.Get("p"); ok {
				return errors.New("a panicking transaction's Put took effect")
			}
			return nil
		})
		// The store still works after the panic.
		mustUpdate(t, s, func(tx governance.Tx) error { return tx.Put("p2", []byte("y")) })
	})

	t.Run("Scan", func(t *testing.T) {
		s := open(t)
		mustUpdate(t, s, func(tx governance.Tx) error {
			for _, k := range []string{"b/3", "a/1", "b/1", "b/2", "c/1", "b"} {
				if err := tx.Put(k, []byte("v"+k)); err != nil {
					return err
				}
			}
			return nil
		})
		keys := func(kvs []governance.KV) string {
			var ks []string
			for _, kv := range kvs {
				if string(kv.Value) != "v"+kv.Key {
					ks = append(ks, kv.Key+"=WRONG:"+string(kv.Value))
					continue
				}
				ks = append(ks, kv.Key)
			}
			return strings.Join(ks, ",")
		}
		mustView(t, s, func(tx governance.Tx) error {
			for _, c := range []struct {
				prefix, after string
				limit         int
				want          string
			}{
				{"b/", "", 0, "b/1,b/2,b/3"},
				{"b/", "b/1", 0, "b/2,b/3"},
				{"b/", "", 2, "b/1,b/2"},
				{"b/", "b/3", 0, ""},
				{"", "", 0, "a/1,b,b/1,b/2,b/3,c/1"},
				{"z", "", 0, ""},
			} {
				kvs, err := tx.Scan(c.prefix, c.after, c.limit)
				if err != nil {
					return err
				}
				if got := keys(kvs); got != c.want {
					return fmt.Errorf("Scan(%q, %q, %d) = %s; want %s", c.prefix, c.after, c.limit, got, c.want)
				}
			}
			return nil
		})
		// A transaction's scan sees its own writes and deletes.
		mustUpdate(t, s, func(tx governance.Tx) error {
			if err := tx.Put("b/0", []byte("vb/0")); err != nil {
				return err
			}
			if err := tx.Delete("b/2"); err != nil {
				return err
			}
			kvs, err := tx.Scan("b/", "", 0)
			if err != nil {
				return err
			}
			if got := keys(kvs); got != "b/0,b/1,b/3" {
				return fmt.Errorf("Scan in a writing transaction = %s; want b/0,b/1,b/3", got)
			}
			return nil
		})
		// Prefixes with characters that SQL LIKE treats specially are literal.
		mustUpdate(t, s, func(tx governance.Tx) error {
			for _, k := range []string{"l%x", "l_y", "lab", `l\z`} {
				if err := tx.Put(k, []byte("v"+k)); err != nil {
					return err
				}
			}
			return nil
		})
		mustView(t, s, func(tx governance.Tx) error {
			for prefix, want := range map[string]string{"l%": "l%x", "l_": "l_y", `l\`: `l\z`} {
				kvs, err := tx.Scan(prefix, "", 0)
				if err != nil {
					return err
				}
				if got := keys(kvs); got != want {
					return fmt.Errorf("Scan(%q) = %s; want %s (the prefix must be literal)", prefix, got, want)
				}
			}
			return nil
		})
		// The limit is bounded.
		mustUpdate(t, s, func(tx governance.Tx) error {
			for i := range governance.MaxStoreScan + 5 {
				if err := tx.Put(fmt.Sprintf("many/%05d", i), []byte("v")); err != nil {
					return err
				}
			}
			return nil
		})
		mustView(t, s, func(tx governance.Tx) error {
			kvs, err := tx.Scan("many/", "", 1<<30)
			if err != nil {
				return err
			}
			if len(kvs) != governance.MaxStoreScan {
				return fmt.Errorf("Scan with a huge limit returned %d entries; want MaxStoreScan (%d)", len(kvs), governance.MaxStoreScan)
			}
			return nil
		})
	})

	t.Run("Bounds", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"", strings.Repeat("k", governance.MaxStoreKeyBytes+1), "a\x00b", "bad\xff"} {
			err := s.Update(ctx, func(tx governance.Tx) error { return tx.Put(k, []byte("v")) })
			if !errors.Is(err, governance.ErrStoreKey) || !errors.Is(err, governance.ErrStore) {
				t.Errorf("Put(%q) = %v; want ErrStoreKey", k, err)
			}
		}
		err := s.Update(ctx, func(tx governance.Tx) error {
			return tx.Put("big", make([]byte, governance.MaxStoreValueBytes+1))
		})
		if !errors.Is(err, governance.ErrStoreKey) {
			t.Errorf("Put of a value over MaxStoreValueBytes = %v; want ErrStoreKey", err)
		}
	})

	t.Run("ViewIsReadOnly", func(t *testing.T) {
		s := open(t)
		err := s.View(ctx, func(tx governance.Tx) error { return tx.Put("x", []byte("y")) })
		if err == nil {
			t.Fatal("Put in a View succeeded")
		}
		mustView(t, s, func(tx governance.Tx) error {
			if _, ok, _ := tx.Get("x"); ok {
				return errors.New("a View's Put took effect")
			}
			return nil
		})
	})

	t.Run("TxAfterReturn", func(t *testing.T) {
		s := open(t)
		var kept governance.Tx
		mustUpdate(t, s, func(tx governance.Tx) error { kept = tx; return nil })
		if err := kept.Put("late", []byte("x")); err == nil {
			t.Error("Put on a transaction after its function returned succeeded")
		}
		mustView(t, s, func(tx governance.Tx) error {
			if _, ok, _ := tx.Get("late"); ok {
				return errors.New("a Put after the transaction ended took effect")
			}
			return nil
		})
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := s.Update(cctx, func(tx governance.Tx) error { return tx.Put("c", []byte("x")) })
		if err == nil {
			t.Fatal("Update with a cancelled context succeeded")
		}
		if !errors.Is(err, governance.ErrStore) && !errors.Is(err, context.Canceled) {
			t.Errorf("Update with a cancelled context = %v; want ErrStore or context.Canceled", err)
		}
		mustView(t, s, func(tx governance.Tx) error {
			if _, ok, _ := tx.Get("c"); ok {
				return errors.New("an Update with a cancelled context took effect")
			}
			return nil
		})
	})

	t.Run("ConcurrentIncrements", func(t *testing.T) {
		// Serialisable read-modify-write: no lost update under contention.
		s := open(t)
		const workers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range each {
					if err := s.Update(ctx, func(tx governance.Tx) error { return increment(tx, "counter") }); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("concurrent Update: %v", err)
		}
		mustView(t, s, func(tx governance.Tx) error {
			v, _, err := tx.Get("counter")
			if err != nil {
				return err
			}
			if string(v) != strconv.Itoa(workers*each) {
				return fmt.Errorf("counter = %s after %d concurrent increments: updates were lost", v, workers*each)
			}
			return nil
		})
	})

	t.Run("ConcurrentInsertOnce", func(t *testing.T) {
		// Many transactions create the same absent key if it is absent: exactly one wins.
		s := open(t)
		const workers = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range workers {
			wg.Go(func() {
				created := false
				err := s.Update(ctx, func(tx governance.Tx) error {
					created = false
					if _, ok, err := tx.Get("once"); err != nil || ok {
						return err
					}
					created = true
					return tx.Put("once", []byte(strconv.Itoa(i)))
				})
				if err != nil {
					t.Errorf("Update: %v", err)
				}
				if created {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d transactions created the same key; want exactly 1", won)
		}
	})

	t.Run("ConsistentView", func(t *testing.T) {
		// Writers change two keys together; a View never sees one without the other.
		s := open(t)
		mustUpdate(t, s, func(tx governance.Tx) error {
			if err := tx.Put("x", []byte("0")); err != nil {
				return err
			}
			return tx.Put("y", []byte("0"))
		})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.Update(ctx, func(tx governance.Tx) error {
					if err := tx.Put("x", []byte(strconv.Itoa(i))); err != nil {
						return err
					}
					return tx.Put("y", []byte(strconv.Itoa(i)))
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) {
			mustView(t, s, func(tx governance.Tx) error {
				x, _, err := tx.Get("x")
				if err != nil {
					return err
				}
				y, _, err := tx.Get("y")
				if err != nil {
					return err
				}
				if !bytes.Equal(x, y) {
					return fmt.Errorf("a View saw x=%s and y=%s, written together", x, y)
				}
				return nil
			})
		}
		close(stop)
		wg.Wait()
	})
}

// increment adds one to the decimal counter at key.
func increment(tx governance.Tx, key string) error {
	v, _, err := tx.Get(key)
	if err != nil {
		return err
	}
	n := 0
	if len(v) > 0 {
		if n, err = strconv.Atoi(string(v)); err != nil {
			return err
		}
	}
	return tx.Put(key, []byte(strconv.Itoa(n+1)))
}

// testAssume checks governance.AssumeTx, for a store whose Update transactions implement it: a right
// assumption commits with the transaction, a wrong one fails it (ErrAssumed) with no effect, and a Get of an
// assumed key returns the assumed value.
func testAssume(t *testing.T, s governance.Store) {
	ctx := context.Background()
	mustUpdate(t, s, func(tx governance.Tx) error { return tx.Put("rec", []byte("v1")) })
	var implemented bool
	mustUpdate(t, s, func(tx governance.Tx) error {
		atx, ok := tx.(governance.AssumeTx)
		if implemented = ok; !ok {
			return nil
		}
		if err := atx.Assume("rec", []byte("v1")); err != nil {
			return err
		}
		if v, ok, err := tx.Get("rec"); err != nil || !ok || string(v) != "v1" {
			return fmt.Errorf("Get of an assumed key = %q, %v, %v; want v1", v, ok, err)
		}
		if err := tx.Put("rec", []byte("v2")); err != nil {
			return err
		}
		return tx.Put("other", []byte("o1"))
	})
	if !implemented {
		t.Skip("the store's transactions do not implement governance.AssumeTx")
	}
	for _, wrong := range [][]byte{[]byte("v1"), []byte("v2x"), {}} {
		err := s.Update(ctx, func(tx governance.Tx) error {
			if err := tx.(governance.AssumeTx).Assume("rec", wrong); err != nil {
				return err
			}
			if err := tx.Put("rec", []byte("v3")); err != nil {
				return err
			}
			return tx.Put("other", []byte("o2"))
		})
		if !errors.Is(err, governance.ErrAssumed) {
			t.Fatalf("Update assuming rec is %q (it is v2) = %v; want ErrAssumed", wrong, err)
		}
	}
	// An assumption about a key that does not exist is wrong too.
	err := s.Update(ctx, func(tx governance.Tx) error {
		if err := tx.(governance.AssumeTx).Assume("missing", []byte("x")); err != nil {
			return err
		}
		return tx.Put("other", []byte("o3"))
	})
	if !errors.Is(err, governance.ErrAssumed) {
		t.Fatalf("Update assuming a missing key = %v; want ErrAssumed", err)
	}
	mustView(t, s, func(tx governance.Tx) error {
		for k, want := range map[string]string{"rec": "v2", "other": "o1"} {
			if v, _, err := tx.Get(k); err != nil || string(v) != want {
				return fmt.Errorf("%s = %q, %v after failed assumptions; want %q (the right one's write)", k, v, err, want)
			}
		}
		return nil
	})
	// The store works after a failed assumption, and an assumption checked before a Scan holds too.
	mustUpdate(t, s, func(tx governance.Tx) error {
		if err := tx.(governance.AssumeTx).Assume("rec", []byte("v2")); err != nil {
			return err
		}
		if _, err := tx.Scan("o", "", 0); err != nil {
			return err
		}
		return tx.Put("rec", []byte("v4"))
	})
}

func mustUpdate(t *testing.T, s governance.Store, fn func(tx governance.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func mustView(t *testing.T, s governance.Store, fn func(tx governance.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}
