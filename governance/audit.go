package governance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Auditor records what the gate decided and what happened. The gate calls Record for every call: once with
// StatusAllowed before an allowed tool runs — and does not run the tool unless that returns nil — then with
// StatusOK or StatusFailed after it ran; denied calls get one record with StatusDenied.
//
// Record must be safe for concurrent use. It must not retain rec.Args after it returns (copy them if it keeps
// records). Its context carries the call's values but is never cancelled, so that the record of a cancelled
// call is still written. A panic in Record counts as an error.
type Auditor interface {
	Record(ctx context.Context, rec Record) error
}

// AuditorFunc adapts a function to the [Auditor] interface.
type AuditorFunc func(ctx context.Context, rec Record) error

// Record calls f(ctx, rec).
func (f AuditorFunc) Record(ctx context.Context, rec Record) error { return f(ctx, rec) }

// Record is one entry of the audit log. Its JSON form (the field names below) is the JSONL line format; see
// [JSONLAuditor] for the canonical bytes and the hash chain.
type Record struct {
	// Version of the record format (RecordVersion). Chain, PrevHash and Hash are set by the JSONLAuditor.
	Version int    `json:"v"`
	Chain   string `json:"chain"`
	// Time is when the record was made, in UTC; written as RFC 3339 with nanoseconds.
	Time   time.Time `json:"time"`
	RunID  string    `json:"run_id"`
	Seq    int64     `json:"seq"`
	Tool   string    `json:"tool"`
	Source Source    `json:"source"`
	// Effect and Cost are resolved (policy markings applied); Effect is never "unspecified" in gate records.
	Effect Effect `json:"effect"`
	Cost   int64  `json:"cost"`
	// Args are the call's arguments after GateConfig.Redact (null when the call had none, when they were
	// invalid, or when they were larger than GateConfig.MaxAuditArgsBytes). They alias the call's memory: copy
	// them to keep them.
	Args json.RawMessage `json:"args"`
	// ArgsSize is the size in bytes of arguments that were not kept (Args is then null): arguments larger
	// than GateConfig.MaxAuditArgsBytes, and those of invalid calls. ArgsSHA256 (lowercase hex) is the
	// SHA-256 of the redacted arguments when they were valid but too large. Both are zero otherwise.
	ArgsSize   int64  `json:"args_size,omitempty"`
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	// Decision is "allow" or "deny"; Reason and DecidedBy come from the gate's [Decision].
	Decision  string `json:"decision"`
	Reason    string `json:"reason"`
	DecidedBy string `json:"decided_by"`
	// Outcome is allowed, ok, failed, abandoned, late or denied (see [Status]).
	Outcome Status `json:"outcome"`
	// Error is the error text of a failed or denied call (at most 4 KiB).
	Error string `json:"error"`
	// Duration is how long the tool ran (outcome records of calls that ran).
	Duration time.Duration `json:"duration_ns"`
	// ResultSize and ResultSHA256 (lowercase hex) describe the tool's result for StatusOK records.
	ResultSize   int64  `json:"result_size"`
	ResultSHA256 string `json:"result_sha256"`
	PrevHash     string `json:"prev_hash"`
	Hash         string `json:"hash"`

	// result is a result whose ResultSHA256 a MemoryAuditor computes when the record is read (see
	// MemoryAuditor.keep); nil in every record any auditor is given or returns.
	result []byte
}

// RecordVersion is the current value of Record.Version.
const RecordVersion = 1

// DiscardAuditor records nothing. A gate must be given an auditor explicitly; this is the explicit way to run
// without an audit log.
type DiscardAuditor struct{}

// Record does nothing.
func (DiscardAuditor) Record(context.Context, Record) error { return nil }

// MultiAuditor records to every auditor in turn and fails if any fails (so with the gate, a call runs only if
// every log has its "allowed" record). Later auditors are still called after an earlier one failed.
func MultiAuditor(auditors ...Auditor) Auditor {
	as := append([]Auditor(nil), auditors...)
	return AuditorFunc(func(ctx context.Context, rec Record) error {
		var errs []error
		for _, a := range as {
			if err := a.Record(ctx, rec); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// DefaultMemoryAuditorBytes bounds what a [MemoryAuditor] keeps when its MaxBytes is zero.
const DefaultMemoryAuditorBytes = 32 << 20

// memRecordOverhead is what a kept record costs besides its variable-length fields.
const memRecordOverhead = 256

// MemoryAuditor keeps records in memory, for tests, benchmarks and for showing a run's calls. It copies the
// arguments it keeps. For a gate's own records it also copies a small result (at most 1 KiB) and computes the
// record's ResultSHA256 when the record is first read (Records, RunRecords), off the call's path; the copy
// counts toward MaxBytes. The zero value is ready to use and keeps the most recent records that fit in
// DefaultMemoryAuditorBytes (32 MiB).
type MemoryAuditor struct {
	// Limit, if positive, keeps only the last Limit records (older ones are dropped), bounding memory. Set it
	// before first use.
	Limit int
	// MaxBytes bounds the memory the kept records hold, counted as the bytes of their arguments and strings
	// plus 256 per record: when a new record does not fit, the oldest records are dropped (see Dropped). A
	// record that alone is larger than a sixteenth of MaxBytes keeps only its arguments' size and SHA-256
	// (Record.ArgsSize and Record.ArgsSHA256; Args is nil). Zero means DefaultMemoryAuditorBytes (32 MiB); a
	// negative value means no bound. Set it before first use.
	MaxBytes int64
	// Err, if set, is returned by every Record call (and nothing is kept): a failing sink for tests.
	Err error

	mu sync.Mutex
	// ring holds the kept records, oldest first from ring[head], n of them, wrapping around at its end: dropping
	// the oldest copies nothing.
	ring    []Record
	head, n int
	size    int64 // the cost of the kept records
	dropped int64
	// lastArgs is the copy of the arguments of the last record that had any: records are never modified, so
	// a record with the same arguments shares it.
	lastArgs json.RawMessage
	// arena is the chunk that small copies of arguments and results go into (own).
	arena []byte
}

// recordCost is what rec costs a MemoryAuditor.
func recordCost(rec *Record) int64 {
	return memRecordOverhead + int64(len(rec.Args)+len(rec.Chain)+len(rec.RunID)+len(rec.Tool)+len(rec.Source)+
		len(rec.Decision)+len(rec.Reason)+len(rec.DecidedBy)+len(rec.Outcome)+len(rec.Error)+len(rec.ResultSHA256)+
		len(rec.ArgsSHA256)+len(rec.PrevHash)+len(rec.Hash)+pendingCost(rec))
}

// pendingCost is what a result whose digest is still to be computed costs: its bytes and the digest to come.
func pendingCost(rec *Record) int {
	if rec.result == nil {
		return 0
	}
	return len(rec.result) + 2*sha256.Size
}

// Record keeps a copy of rec, dropping the oldest records beyond Limit and MaxBytes.
func (m *MemoryAuditor) Record(_ context.Context, rec Record) error {
	rec.result = nil
	return m.keep(&rec, nil)
}

// The bounds of the bytes a MemoryAuditor copies into its arena (one allocation per chunk rather than one per
// record): larger pieces get their own allocation.
const (
	memArenaChunk    = 64 << 10
	memArenaMaxPiece = 4 << 10
)

// maxDeferredResult is the largest result whose SHA-256 the gate leaves to its MemoryAuditor (keep): copying a
// small result costs a few nanoseconds where hashing it costs about a hundred, and the digest of a record is
// only needed when the record is read. Larger results are hashed at once, so that the auditor never holds a
// large result for its digest's sake.
const maxDeferredResult = 1 << 10

// keep is Record for the gate's own records, without the copy through the interface: it copies *rec into the
// ring (rec is not modified). With result not nil (at most maxDeferredResult bytes), rec describes a tool's
// result whose digest is still to be computed: the auditor keeps a copy of result and sets ResultSize now and
// ResultSHA256 when the record is first read (Records, RunRecords), from the bytes as they were when the call
// ended.
func (m *MemoryAuditor) keep(rec *Record, result []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return fmt.Errorf("%w: %w", ErrAudit, m.Err)
	}
	maxBytes := m.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMemoryAuditorBytes
	}
	cost := recordCost(rec) - int64(pendingCost(rec))
	if result != nil {
		cost += int64(len(result)) + 2*sha256.Size
	}
	args := rec.Args
	var argsSize int64
	var argsSum string
	if maxBytes > 0 && cost > maxBytes/16 && len(args) > 0 {
		sum := sha256.Sum256(args)
		cost -= int64(len(args))
		argsSize, argsSum, args = int64(len(args)), hex.EncodeToString(sum[:]), nil
		cost += int64(len(argsSum))
	}
	if args != nil {
		// A call's "allowed" and outcome records carry the same arguments: they share one copy.
		if m.lastArgs != nil && bytes.Equal(m.lastArgs, args) {
			args = m.lastArgs
		} else {
			args = m.own(args)
			m.lastArgs = args
		}
	}
	if m.n == len(m.ring) {
		grown := make([]Record, max(16, 2*len(m.ring)))
		m.kept(grown[:0])
		m.ring, m.head = grown, 0
	}
	i := m.head + m.n
	if i >= len(m.ring) {
		i -= len(m.ring)
	}
	slot := &m.ring[i]
	*slot = *rec
	slot.Args = args
	if argsSum != "" {
		slot.ArgsSize, slot.ArgsSHA256 = argsSize, argsSum
	}
	slot.result = nil
	if result != nil {
		slot.ResultSize, slot.ResultSHA256, slot.result = int64(len(result)), "", m.own(result)
	}
	m.n++
	m.size += cost
	for m.n > 1 && ((m.Limit > 0 && m.n > m.Limit) || (maxBytes > 0 && m.size > maxBytes)) {
		m.size -= recordCost(&m.ring[m.head])
		m.ring[m.head] = Record{}
		if m.head++; m.head == len(m.ring) {
			m.head = 0
		}
		m.n--
		m.dropped++
	}
	return nil
}

// own returns a copy of b: small pieces share chunks of one arena (a chunk lives as long as a kept record, or a
// record returned by Records, points into it), larger ones get their own allocation. The copy's capacity ends
// with it, so that appending to it never overwrites the next piece.
func (m *MemoryAuditor) own(b []byte) []byte {
	if len(b) > memArenaMaxPiece {
		return bytes.Clone(b)
	}
	if cap(m.arena)-len(m.arena) < len(b) {
		m.arena = make([]byte, 0, memArenaChunk)
	}
	n := len(m.arena)
	m.arena = append(m.arena, b...)
	return m.arena[n:len(m.arena):len(m.arena)]
}

// settle computes the digest of rec's result if it is still to be computed (keep).
func (m *MemoryAuditor) settle(rec *Record) {
	if rec.result == nil {
		return
	}
	sum := sha256.Sum256(rec.result)
	m.size -= int64(len(rec.result))
	rec.ResultSHA256, rec.result = hex.EncodeToString(sum[:]), nil
}

// settleAll computes every digest still to be computed.
func (m *MemoryAuditor) settleAll() {
	for _, part := range m.parts() {
		for i := range part {
			m.settle(&part[i])
		}
	}
}

// parts returns the kept records, oldest first, as the two runs of the ring they occupy.
func (m *MemoryAuditor) parts() [2][]Record {
	end := m.head + m.n
	if end <= len(m.ring) {
		return [2][]Record{m.ring[m.head:end], nil}
	}
	return [2][]Record{m.ring[m.head:], m.ring[:end-len(m.ring)]}
}

// kept appends the kept records, oldest first, to dst.
func (m *MemoryAuditor) kept(dst []Record) []Record {
	p := m.parts()
	return append(append(dst, p[0]...), p[1]...)
}

// Records returns a copy of the records kept, oldest first. Their Args are the auditor's own copies, which
// records may share: read them, do not modify them.
func (m *MemoryAuditor) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleAll()
	return m.kept(make([]Record, 0, m.n))
}

// RunRecords returns a copy of the records of one run, oldest first.
func (m *MemoryAuditor) RunRecords(runID string) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, part := range m.parts() {
		for i := range part {
			if part[i].RunID == runID {
				m.settle(&part[i])
				out = append(out, part[i])
			}
		}
	}
	return out
}

// Len returns the number of records kept.
func (m *MemoryAuditor) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// Dropped returns the number of records dropped so far to respect Limit and MaxBytes.
func (m *MemoryAuditor) Dropped() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// Reset drops every record (and resets Dropped).
func (m *MemoryAuditor) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ring, m.head, m.n, m.size, m.dropped, m.lastArgs, m.arena = nil, 0, 0, 0, 0, nil, nil
}
