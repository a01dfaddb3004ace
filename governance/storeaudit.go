package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// StoreAuditor is an [Auditor] that appends to a hash-chained log kept in a [Store]: one chain, however many
// processes write to it, because each record is appended in a transaction that reads the chain's head and
// writes the new head with the record. The records are the lines a [JSONLAuditor] would write (same canonical
// bytes, same hashes, optional HMAC key), so [VerifyStoreChain] checks them with the same rules as [Verify].
//
// Every process of a fleet can give its gate a StoreAuditor on the same chain: the log then holds every call of
// every replica, in one order, with none lost. A record that the store does not take is an error (ErrAudit
// wrapping ErrStore), so the gate does not run the tool.
type StoreAuditor struct {
	store Store
	chain string
	key   []byte
}

// NewStoreAuditor returns an auditor appending to the chain named chain in store. key, if not empty, makes the
// chain HMAC-SHA256 (at least MinKeyBytes); every writer and verifier of the chain must use the same key.
func NewStoreAuditor(store Store, chain string, key []byte) (*StoreAuditor, error) {
	if store == nil {
		return nil, errors.New("governance: NewStoreAuditor: nil store")
	}
	if err := checkChainName(chain); err != nil {
		return nil, fmt.Errorf("governance: NewStoreAuditor: %w", err)
	}
	if len(key) > 0 && len(key) < MinKeyBytes {
		return nil, fmt.Errorf("governance: NewStoreAuditor: HMAC key is %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	return &StoreAuditor{store: store, chain: chain, key: bytes.Clone(key)}, nil
}

// Record appends rec to the chain.
func (a *StoreAuditor) Record(ctx context.Context, rec Record) error {
	err := a.store.Update(ctx, func(tx Tx) error {
		_, err := appendChain(tx, a.chain, a.key, rec)
		return err
	})
	if err != nil && !errors.Is(err, ErrAudit) {
		err = fmt.Errorf("%w: %w", ErrAudit, err)
	}
	return err
}

// Anchor returns the chain's head hash and record count.
func (a *StoreAuditor) Anchor(ctx context.Context) (head string, records int64, err error) {
	err = a.store.View(ctx, func(tx Tx) error {
		h, err := chainHead(tx, a.chain)
		head, records = h.Hash, h.Count
		return err
	})
	return head, records, err
}

// chainState is the head of a chain in a store.
type chainState struct {
	Hash  string `json:"hash"`
	Count int64  `json:"count"`
}

func checkChainName(chain string) error {
	if chain == "" || len(chain) > 200 || strings.ContainsAny(chain, "\x00") {
		return fmt.Errorf("invalid chain name %q (1 to 200 bytes, no NUL)", chain)
	}
	return nil
}

func chainHeadKey(chain string) string { return "a/" + chain + "/h" }

func chainRecordKey(chain string, n int64) string { return fmt.Sprintf("a/%s/r/%012d", chain, n) }

func chainHead(tx Tx, chain string) (chainState, error) {
	var h chainState
	v, ok, err := tx.Get(chainHeadKey(chain))
	if err != nil || !ok {
		return h, err
	}
	if err := json.Unmarshal(v, &h); err != nil {
		return h, fmt.Errorf("%w: chain %q: corrupt head: %w", ErrAudit, chain, err)
	}
	return h, nil
}

// encodeChained returns rec as the line that follows head in a chain (Hash and PrevHash set).
func encodeChained(h chainState, key []byte, rec Record) (Record, []byte, error) {
	var buf bytes.Buffer
	a, err := NewJSONLAuditor(&buf, JSONLConfig{Key: key, PrevHash: h.Hash, PrevCount: h.Count})
	if err != nil {
		return rec, nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	if err := a.encode(&rec); err != nil {
		return rec, nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	rec.PrevHash = h.Hash
	return rec, a.line, nil
}

// appendChain appends rec to chain within tx and returns the record as written (Hash, PrevHash set).
func appendChain(tx Tx, chain string, key []byte, rec Record) (Record, error) {
	h, err := chainHead(tx, chain)
	if err != nil {
		return rec, err
	}
	rec, line, err := encodeChained(h, key, rec)
	if err != nil {
		return rec, err
	}
	n := h.Count + 1
	if err := tx.Put(chainRecordKey(chain, n), line); err != nil {
		return rec, err
	}
	head, _ := json.Marshal(chainState{Hash: rec.Hash, Count: n})
	if err := tx.Put(chainHeadKey(chain), head); err != nil {
		return rec, err
	}
	return rec, nil
}

// VerifyStoreChain verifies the chain named chain in store as [Verify] verifies a JSONL log, and also checks
// that the chain ends where its stored head says (so a record removed from the end is detected). It reads the
// chain in pages; with a key it must be the chain's key.
func VerifyStoreChain(ctx context.Context, store Store, chain string, key []byte) (VerifyReport, error) {
	return verifyChain(ctx, store, chain, key, func(tx Tx) (chainState, error) { return chainHead(tx, chain) })
}

// verifyChain is VerifyStoreChain with the chain's head read by headOf.
func verifyChain(ctx context.Context, store Store, chain string, key []byte, headOf func(Tx) (chainState, error)) (VerifyReport, error) {
	var buf bytes.Buffer
	var head chainState
	err := store.View(ctx, func(tx Tx) error {
		var err error
		if head, err = headOf(tx); err != nil {
			return err
		}
		prefix := "a/" + chain + "/r/"
		after := ""
		var n int64
		for {
			kvs, err := tx.Scan(prefix, after, 0)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				n++
				if kv.Key != chainRecordKey(chain, n) {
					return &VerifyError{Line: int(n), Reason: fmt.Sprintf("record key %q where record %d belongs: a record was removed or inserted", kv.Key, n)}
				}
				buf.Write(kv.Value)
			}
			if len(kvs) < MaxStoreScan {
				return nil
			}
			after = kvs[len(kvs)-1].Key
		}
	})
	if err != nil {
		return VerifyReport{}, err
	}
	rep, err := Verify(&buf, key)
	if err != nil {
		return rep, err
	}
	if int64(rep.Records) != head.Count || rep.Head != head.Hash {
		return rep, &VerifyError{Line: int(rep.Records) + 1, Reason: fmt.Sprintf("the chain holds %d records ending at %q but its head says %d ending at %q: records were removed from the end or the head was edited",
			rep.Records, rep.Head, head.Count, head.Hash)}
	}
	return rep, nil
}

// StoreChainRecords returns the records of chain from position from (1-based), at most limit (ScanLimit).
func StoreChainRecords(ctx context.Context, store Store, chain string, from int64, limit int) ([]Record, error) {
	var out []Record
	err := store.View(ctx, func(tx Tx) error {
		after := ""
		if from > 1 {
			after = chainRecordKey(chain, from-1)
		}
		kvs, err := tx.Scan("a/"+chain+"/r/", after, limit)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			rec, err := parseChainLine(kv.Value)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

func parseChainLine(line []byte) (Record, error) {
	var rec Record
	body, sum, ok := splitHashedLine(bytes.TrimSuffix(line, []byte("\n")))
	if !ok {
		return rec, fmt.Errorf("%w: malformed chain record", ErrTampered)
	}
	if err := decodeStrict(body, &rec); err != nil {
		return rec, fmt.Errorf("%w: malformed chain record: %w", ErrTampered, err)
	}
	rec.Hash = sum
	return rec, nil
}
