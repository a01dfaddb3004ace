package governance

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The chain algorithms, the value of Record.Chain in a JSONL log.
const (
	ChainSHA256     = "sha256"      // hash = SHA-256(canonical bytes)
	ChainHMACSHA256 = "hmac-sha256" // hash = HMAC-SHA256(key, canonical bytes)
)

// MinKeyBytes is the shortest HMAC key a JSONLAuditor accepts.
const MinKeyBytes = 16

// JSONLConfig configures a [JSONLAuditor]. The zero value writes a plain SHA-256 chain, without fsync, starting
// a new chain.
type JSONLConfig struct {
	// Key, if not empty, makes the chain HMAC-SHA256 with this key (at least MinKeyBytes). Without a key the
	// chain detects corruption and edits by anyone who does not recompute the hashes after the edit; only a
	// key kept away from the log's writers makes the log tamper-evident against someone who can rewrite the
	// file. The auditor keeps its own copy.
	Key []byte
	// Sync calls Sync after every record, so that a record counts as written only once it is on stable
	// storage. It needs a writer with a Sync() error method, such as *os.File.
	Sync bool
	// PrevHash continues an existing chain: the hash of the last record already in the stream. Empty starts a
	// new chain (the first record's prev_hash is ""). OpenAuditFile sets it from the file.
	PrevHash string
	// PrevCount is the number of records already in the stream, for [JSONLAuditor.Anchor] (and the position
	// that a checkpoint records). OpenAuditFile sets it from the file.
	PrevCount int64
	// Checkpoint makes Close write a closing checkpoint record (Outcome "checkpoint", Seq the record's own
	// 1-based position in the log), which needs a Key. [Verify] with the key then refuses a log that contains
	// checkpoints but does not end with one: a tail cut from a closed log is detected without an anchor kept
	// elsewhere, unless the cut falls exactly after an earlier Close. A log being written fails that check
	// until it is closed.
	Checkpoint bool
}

// StatusCheckpoint is the Outcome of a checkpoint record (see JSONLConfig.Checkpoint).
const StatusCheckpoint Status = "checkpoint"

// JSONLAuditor writes an append-only, hash-chained log of JSON lines: one [Record] per line, each written with a
// single Write call. It is safe for concurrent use.
//
// # Canonical bytes and the hash chain
//
// For each record the auditor produces the canonical bytes C: a compact JSON object with exactly these members
// in this order, no insignificant whitespace:
//
//	{"v":1,"chain":C,"time":T,"run_id":S,"seq":N,"tool":S,"source":S,"effect":S,"cost":N,"args":A,
//	 "decision":S,"reason":S,"decided_by":S,"outcome":S,"error":S,"duration_ns":N,"result_size":N,
//	 "result_sha256":S,"prev_hash":H}
//
// The members "args_size":N,"args_sha256":S follow "args" only when the record kept the arguments' size (and
// hash) instead of the arguments themselves (Record.ArgsSize or Record.ArgsSHA256 set); otherwise they are
// absent. T is the time in UTC formatted with time.RFC3339Nano, N are base-10 integers, A is the arguments as
// compact JSON (json.Compact) or null, H is the previous record's hash ("" for the first record of a chain), and
// strings S are JSON strings in which '"', '\\' and the control characters below U+0020 are escaped (\n, \r,
// \t or \u00XX), U+2028 and U+2029 are written \u2028 and \u2029, invalid UTF-8 bytes become \ufffd, and every
// other character is written as itself. The record's hash is the lowercase hex of SHA-256(C), or of
// HMAC-SHA256(key, C) when the chain is "hmac-sha256". The line written is C with its final '}' replaced by
// `,"hash":"<hash>"}` and followed by '\n'.
//
// A verifier therefore never re-encodes anything: it removes the `,"hash":"<64 hex digits>"}` suffix from a
// line, appends '}', and hashes those exact bytes ([Verify] does this). Because each record's C contains the
// previous hash, every hash commits to the whole log up to that record: editing any byte, removing, inserting
// or reordering records breaks the chain at the first affected record. Removing records from the end leaves a
// valid shorter chain; to detect that, keep [JSONLAuditor.Anchor] (the head and the record count) somewhere the
// log's writers cannot change and compare it with [VerifyReport.Head] and [VerifyReport.Records] (`wasmbox
// audit verify --head H --count N`), or, with a key, write closing checkpoints (JSONLConfig.Checkpoint).
//
// # Failures
//
// A write or sync error is sticky: the auditor refuses every later record (the gate then denies every call),
// because a log with a gap or a torn line can no longer be trusted. Open a new log to continue.
type JSONLAuditor struct {
	mu      sync.Mutex
	w       io.Writer
	syncer  interface{ Sync() error }
	closer  io.Closer
	chain   string
	h       hash.Hash
	prev    string
	line    []byte
	compact bytes.Buffer
	sum     [sha256.Size]byte
	n       int64
	prevN   int64
	ckpt    bool
	err     error
}

// NewJSONLAuditor returns an auditor that writes to w. The caller keeps ownership of w (Close does not close it).
func NewJSONLAuditor(w io.Writer, cfg JSONLConfig) (*JSONLAuditor, error) {
	if w == nil {
		return nil, errors.New("governance: NewJSONLAuditor: nil writer")
	}
	a := &JSONLAuditor{w: w, chain: ChainSHA256, h: sha256.New(), prev: cfg.PrevHash, prevN: cfg.PrevCount, ckpt: cfg.Checkpoint}
	switch {
	case cfg.Checkpoint && len(cfg.Key) == 0:
		return nil, errors.New("governance: NewJSONLAuditor: Checkpoint needs a Key (an unkeyed checkpoint can be forged)")
	case cfg.PrevCount < 0 || (cfg.PrevCount > 0 && cfg.PrevHash == ""):
		return nil, fmt.Errorf("governance: NewJSONLAuditor: PrevCount %d does not fit PrevHash %q", cfg.PrevCount, cfg.PrevHash)
	}
	if len(cfg.Key) > 0 {
		if len(cfg.Key) < MinKeyBytes {
			return nil, fmt.Errorf("governance: NewJSONLAuditor: HMAC key is %d bytes, want at least %d", len(cfg.Key), MinKeyBytes)
		}
		a.chain = ChainHMACSHA256
		a.h = hmac.New(sha256.New, bytes.Clone(cfg.Key))
	}
	if cfg.PrevHash != "" && !isHexHash(cfg.PrevHash) {
		return nil, fmt.Errorf("governance: NewJSONLAuditor: PrevHash %q is not 64 lowercase hex digits", cfg.PrevHash)
	}
	if cfg.Sync {
		s, ok := w.(interface{ Sync() error })
		if !ok {
			return nil, fmt.Errorf("governance: NewJSONLAuditor: Sync requested but %T has no Sync method", w)
		}
		a.syncer = s
	}
	return a, nil
}

// OpenAuditFile opens (creating it with mode 0600 if needed) a JSONL audit log for appending with O_APPEND,
// takes an exclusive advisory lock on it where the platform supports it (one writer per file: two would fork
// the chain), and continues the chain from its last record. It fails if the file does not end with a complete
// record, or if its last record's chain kind or key does not match cfg. Close the auditor to release the file.
func OpenAuditFile(path string, cfg JSONLConfig) (*JSONLAuditor, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("governance: open audit log: %w", err)
	}
	a, err := openAuditFile(f, cfg)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("governance: open audit log %s: %w", path, err)
	}
	return a, nil
}

func openAuditFile(f *os.File, cfg JSONLConfig) (*JSONLAuditor, error) {
	if err := lockFile(f); err != nil {
		return nil, fmt.Errorf("file is in use by another writer: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > 0 {
		line, err := lastLine(f, st.Size())
		if err != nil {
			return nil, err
		}
		body, sum, ok := splitHashedLine(line)
		if !ok {
			return nil, errors.New("last record has no valid hash")
		}
		var rec Record
		if err := decodeStrict(body, &rec); err != nil {
			return nil, fmt.Errorf("last record: %w", err)
		}
		keyed := len(cfg.Key) > 0
		switch {
		case rec.Chain == ChainHMACSHA256 && !keyed:
			return nil, errors.New("the log is HMAC-keyed but no key was given")
		case rec.Chain == ChainSHA256 && keyed:
			return nil, errors.New("the log is not HMAC-keyed but a key was given")
		case rec.Chain != ChainSHA256 && rec.Chain != ChainHMACSHA256:
			return nil, fmt.Errorf("last record has unknown chain %q", rec.Chain)
		}
		if !checkHash(newChainHash(rec.Chain, cfg.Key), body, sum) {
			return nil, errors.New("last record's hash does not match (wrong key, or the record was edited)")
		}
		if cfg.PrevHash != "" && cfg.PrevHash != sum {
			return nil, errors.New("JSONLConfig.PrevHash differs from the file's last hash")
		}
		n, err := countLines(f, st.Size())
		if err != nil {
			return nil, err
		}
		if cfg.PrevCount != 0 && cfg.PrevCount != n {
			return nil, errors.New("JSONLConfig.PrevCount differs from the file's record count")
		}
		cfg.PrevHash, cfg.PrevCount = sum, n
	}
	a, err := NewJSONLAuditor(f, cfg)
	if err != nil {
		return nil, err
	}
	a.closer = f
	return a, nil
}

// countLines returns the number of '\n' in the first size bytes of f.
func countLines(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for off := int64(0); off < size; {
		k, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		off += int64(k)
		if err != nil && !(errors.Is(err, io.EOF) && off >= size) {
			return 0, err
		}
	}
	return n, nil
}

// lastLine returns the last line of f (without its '\n'), which must end with '\n'.
func lastLine(f *os.File, size int64) ([]byte, error) {
	const chunk = 64 << 10
	var tail []byte
	for off := size; off > 0; {
		n := int64(chunk)
		if n > off {
			n = off
		}
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		tail = append(buf, tail...)
		if tail[len(tail)-1] != '\n' {
			return nil, errors.New("the log does not end with a complete record (torn write?)")
		}
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			return tail[i+1 : len(tail)-1], nil
		}
		if len(tail) > maxLineBytes {
			return nil, errors.New("last record is too long")
		}
	}
	return tail[:len(tail)-1], nil
}

// Record appends rec as one line. It sets Version, Chain, PrevHash and Hash itself (rec.Version must be 0 or
// RecordVersion); rec.Args must be valid JSON or empty.
func (a *JSONLAuditor) Record(_ context.Context, rec Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return fmt.Errorf("%w: log unusable after an earlier failure: %w", ErrAudit, a.err)
	}
	if rec.Outcome == StatusCheckpoint {
		return fmt.Errorf("%w: checkpoint records are written by the auditor only", ErrAudit)
	}
	return a.writeLocked(rec)
}

// writeLocked appends rec; a.mu is held.
func (a *JSONLAuditor) writeLocked(rec Record) error {
	if err := a.encode(&rec); err != nil {
		return fmt.Errorf("%w: %w", ErrAudit, err)
	}
	n, err := a.w.Write(a.line)
	if err == nil && n < len(a.line) {
		err = io.ErrShortWrite
	}
	if err == nil && a.syncer != nil {
		err = a.syncer.Sync()
	}
	if err != nil {
		a.err = err
		return fmt.Errorf("%w: %w", ErrAudit, err)
	}
	a.prev = rec.Hash
	a.n++
	return nil
}

// encode builds the line for rec in a.line and sets rec.Hash.
func (a *JSONLAuditor) encode(rec *Record) error {
	if rec.Version != 0 && rec.Version != RecordVersion {
		return fmt.Errorf("unsupported record version %d", rec.Version)
	}
	if int(rec.Effect) >= len(effectNames) {
		return fmt.Errorf("invalid effect %d", int(rec.Effect))
	}
	b := a.line[:0]
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, RecordVersion, 10)
	b = append(b, `,"chain":`...)
	b = appendJSONString(b, a.chain)
	b = append(b, `,"time":"`...)
	b = rec.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","run_id":`...)
	b = appendJSONString(b, rec.RunID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, rec.Seq, 10)
	b = append(b, `,"tool":`...)
	b = appendJSONString(b, rec.Tool)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, string(rec.Source))
	b = append(b, `,"effect":`...)
	b = appendJSONString(b, rec.Effect.String())
	b = append(b, `,"cost":`...)
	b = strconv.AppendInt(b, rec.Cost, 10)
	b = append(b, `,"args":`...)
	if len(rec.Args) == 0 {
		b = append(b, "null"...)
	} else {
		a.compact.Reset()
		if err := json.Compact(&a.compact, rec.Args); err != nil {
			return fmt.Errorf("record args: %w", err)
		}
		b = append(b, a.compact.Bytes()...)
	}
	if rec.ArgsSize != 0 || rec.ArgsSHA256 != "" {
		b = append(b, `,"args_size":`...)
		b = strconv.AppendInt(b, rec.ArgsSize, 10)
		b = append(b, `,"args_sha256":`...)
		b = appendJSONString(b, rec.ArgsSHA256)
	}
	b = append(b, `,"decision":`...)
	b = appendJSONString(b, rec.Decision)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, rec.Reason)
	b = append(b, `,"decided_by":`...)
	b = appendJSONString(b, rec.DecidedBy)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(rec.Outcome))
	b = append(b, `,"error":`...)
	b = appendJSONString(b, rec.Error)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(rec.Duration), 10)
	b = append(b, `,"result_size":`...)
	b = strconv.AppendInt(b, rec.ResultSize, 10)
	b = append(b, `,"result_sha256":`...)
	b = appendJSONString(b, rec.ResultSHA256)
	b = append(b, `,"prev_hash":`...)
	b = appendJSONString(b, a.prev)
	// b is C without its final '}'.
	a.h.Reset()
	a.h.Write(b)
	a.h.Write(closeBrace)
	sum := a.h.Sum(a.sum[:0])
	b = append(b, `,"hash":"`...)
	start := len(b)
	b = hex.AppendEncode(b, sum)
	rec.Hash = string(b[start:])
	b = append(b, "\"}\n"...)
	a.line = b
	return nil
}

var closeBrace = []byte{'}'}

// Head returns the hash of the last record written (or the chain's starting PrevHash).
func (a *JSONLAuditor) Head() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prev
}

// Count returns the number of records this auditor has written.
func (a *JSONLAuditor) Count() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Anchor returns the log's head (the hash of its last record) and its number of records, those already in the
// file when it was opened included (JSONLConfig.PrevCount). Keep them where the log's writers cannot change
// them, and check the log later with `wasmbox audit verify --head HEAD --count N`: records cut from the end,
// which the chain alone cannot show, are then detected.
func (a *JSONLAuditor) Anchor() (head string, records int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prev, a.prevN + a.n
}

// Close writes the closing checkpoint (with JSONLConfig.Checkpoint), refuses further records, and closes the
// file if the auditor opened it (OpenAuditFile). It returns the checkpoint's error, if any, else the file's.
func (a *JSONLAuditor) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var cerr error
	if a.err == nil && a.ckpt {
		cerr = a.writeLocked(Record{Time: time.Now().UTC(), Seq: a.prevN + a.n + 1, Outcome: StatusCheckpoint, Decision: "checkpoint",
			DecidedBy: "audit", Reason: "closing checkpoint: " + strconv.FormatInt(a.prevN+a.n+1, 10) + " records"})
	}
	if a.err == nil {
		a.err = errors.New("auditor closed")
	}
	if a.closer != nil {
		c := a.closer
		a.closer = nil
		if err := c.Close(); cerr == nil {
			cerr = err
		}
	}
	return cerr
}

// appendJSONString appends s as a JSON string, escaping as documented on JSONLAuditor.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
