package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

// Scan's bounds, against governance.MemoryStore as the oracle: after below, equal to, inside and above the
// prefix, keys that extend others by a control byte, multi-byte runes, and limits.
func TestScanBounds(t *testing.T) {
	keys := []string{"a", "b", "b/", "b/1", "b/1\x01", "b/1/x", "b/2", "b/é", "b/\U0010ffff", "b0", "c", "é"}
	prefixes := []string{"", "b", "b/", "b/1", "b/é", "é", "z", "\U0010ffff"}
	afters := []string{"", "a", "b", "b/", "b/0", "b/1", "b/1\x01", "b/z", "b/é", "b0", "c", "\U0010ffff"}
	for name, open := range map[string]func(*testing.T) governance.Store{"sqlite": sqliteStore, "postgres": postgresStore} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, oracle := open(t), new(governance.MemoryStore)
			put := func(tx governance.Tx) error {
				for _, k := range keys {
					if err := tx.Put(k, []byte("v"+k)); err != nil {
						return err
					}
				}
				return nil
			}
			if err := s.Update(ctx, put); err != nil {
				t.Fatal(err)
			}
			if err := oracle.Update(ctx, put); err != nil {
				t.Fatal(err)
			}
			scan := func(s governance.Store, prefix, after string, limit int) string {
				var got string
				err := s.View(ctx, func(tx governance.Tx) error {
					kvs, err := tx.Scan(prefix, after, limit)
					var ks []string
					for _, kv := range kvs {
						if string(kv.Value) != "v"+kv.Key {
							return fmt.Errorf("key %q has value %q", kv.Key, kv.Value)
						}
						ks = append(ks, fmt.Sprintf("%q", kv.Key))
					}
					got = strings.Join(ks, ",")
					return err
				})
				if err != nil {
					t.Fatalf("Scan(%q, %q, %d): %v", prefix, after, limit, err)
				}
				return got
			}
			for _, p := range prefixes {
				for _, a := range afters {
					for _, limit := range []int{0, 1, 2} {
						if got, want := scan(s, p, a, limit), scan(oracle, p, a, limit); got != want {
							t.Errorf("Scan(%q, %q, %d) = [%s]; want [%s]", p, a, limit, got, want)
						}
					}
				}
			}
		})
	}
}
