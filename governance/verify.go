package governance

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// maxLineBytes bounds one line of an audit log (arguments are bounded by GateConfig.MaxArgsBytes; escaping can
// multiply them by six).
const maxLineBytes = 64 << 20

// VerifyReport summarises a verified audit log.
type VerifyReport struct {
	// Records is the number of intact records: all of them when the log is intact, otherwise those before the
	// first bad one.
	Records int
	// Keyed reports whether the records are HMAC-keyed.
	Keyed bool
	// Head is the hash of the last intact record ("" if there is none). Compare it and Records with an anchor
	// kept elsewhere (JSONLAuditor.Anchor) to detect records removed from the end, which a chain alone cannot
	// show.
	Head string
	// Checkpoints counts the closing checkpoint records (JSONLConfig.Checkpoint); Closed reports that the
	// last record is one.
	Checkpoints int
	Closed      bool
}

// VerifyError names the first record of an audit log that fails verification. It wraps ErrTampered.
type VerifyError struct {
	Line   int    // 1-based line number
	Seq    int64  // the record's per-run sequence number; 0 if the line could not be parsed
	RunID  string // the record's run, if it could be parsed
	Reason string
}

func (e *VerifyError) Error() string {
	where := fmt.Sprintf("line %d", e.Line)
	if e.Seq != 0 || e.RunID != "" {
		where += fmt.Sprintf(" (run %q, seq %d)", e.RunID, e.Seq)
	}
	return fmt.Sprintf("%v: %s: %s", ErrTampered, where, e.Reason)
}

// Unwrap returns ErrTampered.
func (e *VerifyError) Unwrap() error { return ErrTampered }

// Verify reads a JSONL audit log written by [JSONLAuditor] and checks every record: its format, its hash (an
// HMAC with key, when key is not empty), and that its prev_hash is the previous record's hash (the first
// record's must be ""). It stops at the first bad record and returns a *VerifyError (wrapping ErrTampered)
// naming it, with a report of the intact records before it. An empty log is intact.
//
// With a key, every record must be HMAC-keyed (a plain record is a downgrade and fails); without a key, an
// HMAC-keyed record gives an error wrapping ErrKeyRequired. A wrong key fails at the first record.
// Read errors are returned as they are. Records removed from the end of the log cannot be detected by the chain
// itself: compare the report's Head and Records with an anchor kept elsewhere ([JSONLAuditor.Anchor]). A keyed
// log written with closing checkpoints (JSONLConfig.Checkpoint) must end with one: otherwise Verify returns a
// *VerifyError naming the line after the last, with every record counted as intact (records were cut from the
// end, or the log is still being written). A checkpoint must be HMAC-keyed and its Seq must be its own line
// number.
func Verify(r io.Reader, key []byte) (VerifyReport, error) {
	var rep VerifyReport
	br := bufio.NewReaderSize(r, 64<<10)
	var h hash.Hash
	if len(key) > 0 {
		rep.Keyed = true
		h = newChainHash(ChainHMACSHA256, key)
	} else {
		h = newChainHash(ChainSHA256, nil)
	}
	prev := ""
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err == io.EOF && len(line) == 0 {
			if rep.Checkpoints > 0 && !rep.Closed {
				return rep, &VerifyError{Line: lineNo, Reason: "the log does not end with a closing checkpoint although it has " +
					strconv.Itoa(rep.Checkpoints) + ": records were cut from the end, or the log is still open"}
			}
			return rep, nil
		}
		bad := func(seq int64, run, reason string) (VerifyReport, error) {
			return rep, &VerifyError{Line: lineNo, Seq: seq, RunID: run, Reason: reason}
		}
		switch {
		case errors.Is(err, errLineTooLong):
			return bad(0, "", "line too long")
		case err == io.EOF:
			return bad(0, "", "incomplete last line (no newline: torn write or truncated log)")
		case err != nil:
			return rep, fmt.Errorf("governance: reading audit log: %w", err)
		}
		line = line[:len(line)-1] // drop '\n'
		if len(line) == 0 {
			return bad(0, "", "empty line")
		}
		body, sum, ok := splitHashedLine(line)
		if !ok {
			return bad(0, "", `missing or malformed "hash" member at the end of the line`)
		}
		var rec Record
		if err := decodeStrict(body, &rec); err != nil {
			return bad(0, "", "not a valid record: "+err.Error())
		}
		switch {
		case rec.Version != RecordVersion:
			return bad(rec.Seq, rec.RunID, fmt.Sprintf("unsupported record version %d", rec.Version))
		case rec.Hash != "":
			return bad(rec.Seq, rec.RunID, `"hash" member inside the hashed part`)
		case rec.Chain == ChainHMACSHA256 && !rep.Keyed:
			return rep, fmt.Errorf("%w (line %d)", ErrKeyRequired, lineNo)
		case rec.Chain == ChainSHA256 && rep.Keyed:
			return bad(rec.Seq, rec.RunID, "record is not HMAC-keyed but the log is verified with a key (downgraded chain?)")
		case rec.Chain != ChainSHA256 && rec.Chain != ChainHMACSHA256:
			return bad(rec.Seq, rec.RunID, fmt.Sprintf("unknown chain algorithm %q", rec.Chain))
		}
		if !checkHash(h, body, sum) {
			reason := "hash mismatch: record edited"
			if rep.Keyed {
				reason = "HMAC mismatch: record edited, or wrong key"
			}
			return bad(rec.Seq, rec.RunID, reason)
		}
		if rec.PrevHash != prev {
			if lineNo == 1 {
				return bad(rec.Seq, rec.RunID, "first record does not start a chain (records removed from the start?)")
			}
			return bad(rec.Seq, rec.RunID, "prev_hash does not match the previous record: a record was removed, inserted or reordered")
		}
		rep.Closed = rec.Outcome == StatusCheckpoint
		if rep.Closed {
			switch {
			case !rep.Keyed:
				return bad(rec.Seq, rec.RunID, "checkpoint record in an unkeyed log (anyone could have written it)")
			case rec.Seq != int64(lineNo):
				return bad(rec.Seq, rec.RunID, fmt.Sprintf("checkpoint says it is record %d but is record %d: records were removed or inserted", rec.Seq, lineNo))
			}
			rep.Checkpoints++
		}
		prev = sum
		rep.Records++
		rep.Head = sum
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line including its '\n'; at EOF it returns what it has and io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLineBytes {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}

const hashSuffixLen = len(`,"hash":"`) + 2*sha256.Size + len(`"}`)

// splitHashedLine splits a line (without '\n') into the canonical bytes without their final '}' and the hash.
func splitHashedLine(line []byte) (body []byte, sum string, ok bool) {
	if len(line) < hashSuffixLen+2 || line[0] != '{' {
		return nil, "", false
	}
	suffix := line[len(line)-hashSuffixLen:]
	if !bytes.HasPrefix(suffix, []byte(`,"hash":"`)) || !bytes.HasSuffix(suffix, []byte(`"}`)) {
		return nil, "", false
	}
	sum = string(suffix[len(`,"hash":"`) : len(suffix)-2])
	if !isHexHash(sum) {
		return nil, "", false
	}
	return line[:len(line)-hashSuffixLen], sum, true
}

func isHexHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// decodeStrict decodes body+"}" into rec, rejecting unknown members and trailing data.
func decodeStrict(body []byte, rec *Record) error {
	doc := make([]byte, 0, len(body)+1)
	doc = append(append(doc, body...), '}')
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func newChainHash(chain string, key []byte) hash.Hash {
	if chain == ChainHMACSHA256 {
		return hmac.New(sha256.New, key)
	}
	return sha256.New()
}

// checkHash reports whether the chain hash of body+"}" is the hex sum.
func checkHash(h hash.Hash, body []byte, sum string) bool {
	want, err := hex.DecodeString(sum)
	if err != nil {
		return false
	}
	h.Reset()
	h.Write(body)
	h.Write(closeBrace)
	return hmac.Equal(h.Sum(nil), want)
}
