package governance

import (
	"context"
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
	// Args are the call's arguments after GateConfig.Redact (null when the call had none or they were
	// invalid). They alias the call's memory: copy them to keep them.
	Args json.RawMessage `json:"args"`
	// Decision is "allow" or "deny"; Reason and DecidedBy come from the gate's [Decision].
	Decision  string `json:"decision"`
	Reason    string `json:"reason"`
	DecidedBy string `json:"decided_by"`
	// Outcome is allowed, ok, failed or denied.
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

// MemoryAuditor keeps records in memory, for tests, benchmarks and for showing a run's calls. It copies the
// arguments it keeps. The zero value is ready to use and keeps every record.
type MemoryAuditor struct {
	// Limit, if positive, keeps only the last Limit records (older ones are dropped), bounding memory. Set it
	// before first use.
	Limit int
	// Err, if set, is returned by every Record call (and nothing is kept): a failing sink for tests.
	Err error

	mu   sync.Mutex
	recs []Record // with a Limit, a ring whose oldest record is at head once full
	head int
}

// Record keeps a copy of rec.
func (m *MemoryAuditor) Record(_ context.Context, rec Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return fmt.Errorf("%w: %w", ErrAudit, m.Err)
	}
	if rec.Args != nil {
		rec.Args = append(json.RawMessage(nil), rec.Args...)
	}
	if m.Limit <= 0 || len(m.recs) < m.Limit {
		if m.head != 0 { // Limit was raised (or removed) after the ring filled up
			m.recs, m.head = m.ordered(), 0
		}
		m.recs = append(m.recs, rec)
		return nil
	}
	if len(m.recs) > m.Limit { // Limit was lowered
		m.recs, m.head = m.ordered()[len(m.recs)-m.Limit:], 0
	}
	m.recs[m.head] = rec
	m.head = (m.head + 1) % len(m.recs)
	return nil
}

// ordered returns a new slice of the records kept, oldest first.
func (m *MemoryAuditor) ordered() []Record {
	out := make([]Record, 0, len(m.recs))
	out = append(out, m.recs[m.head:]...)
	return append(out, m.recs[:m.head]...)
}

// Records returns a copy of the records kept, oldest first.
func (m *MemoryAuditor) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ordered()
}

// RunRecords returns a copy of the records of one run, oldest first.
func (m *MemoryAuditor) RunRecords(runID string) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, part := range [2][]Record{m.recs[m.head:], m.recs[:m.head]} {
		for _, r := range part {
			if r.RunID == runID {
				out = append(out, r)
			}
		}
	}
	return out
}

// Len returns the number of records kept.
func (m *MemoryAuditor) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Reset drops every record.
func (m *MemoryAuditor) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs, m.head = nil, 0
}
