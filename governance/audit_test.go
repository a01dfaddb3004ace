package governance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

var testKey = []byte("k3y-for-tests-0123456789")

// writeLog runs five calls through a gate with a JSONL auditor and returns the log.
func writeLog(t *testing.T, key []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	a, err := governance.NewJSONLAuditor(&buf, governance.JSONLConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGate(t, governance.GateConfig{
		Policy: governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
			if c.Tool == "rm" {
				return governance.Verdict{Action: governance.Deny, Reason: "no"}, nil
			}
			return governance.Verdict{Action: governance.Allow}, nil
		}),
		Auditor: a,
	})
	run := g.NewRun("run-1")
	for _, c := range []governance.Call{
		{Tool: "pay", Args: json.RawMessage(`{"amount": 100, "to": "bob"}`), Effect: governance.Mutating},
		{Tool: "rm", Args: json.RawMessage(`{"path":"/"}`)},
		{Tool: "search", Args: json.RawMessage(`{"q":"line\nbreak \u2028 \"quoted\" \u001b[31m"}`), Effect: governance.ReadOnly},
	} {
		run.Do(context.Background(), c, func(context.Context, governance.Call) ([]byte, error) { return []byte("done"), nil })
	}
	if a.Count() != 5 {
		t.Fatalf("%d records written", a.Count())
	}
	return buf.Bytes()
}

func lines(log []byte) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
}

func join(ls [][]byte) []byte {
	out := bytes.Join(ls, nil)
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

func TestJSONLFormat(t *testing.T) {
	log := writeLog(t, nil)
	ls := lines(log)
	if len(ls) != 5 {
		t.Fatalf("%d lines", len(ls))
	}
	var recs []governance.Record
	for i, l := range ls {
		var r governance.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("line %d is not a JSON record: %v", i+1, err)
		}
		recs = append(recs, r)
		// The documented canonical form: the hash covers the line up to `,"hash":` plus "}".
		body := l[:bytes.LastIndex(l, []byte(`,"hash":"`))]
		sum := sha256.Sum256(append(append([]byte(nil), body...), '}'))
		if hex.EncodeToString(sum[:]) != r.Hash {
			t.Fatalf("line %d: hash is not SHA-256 of the canonical bytes", i+1)
		}
		if i > 0 && r.PrevHash != recs[i-1].Hash {
			t.Fatalf("line %d: prev_hash does not link", i+1)
		}
		if !bytes.HasPrefix(l, []byte(`{"v":1,"chain":"sha256","time":"`)) {
			t.Fatalf("line %d starts %q", i+1, l[:40])
		}
	}
	if recs[0].PrevHash != "" || recs[0].Outcome != "allowed" || recs[1].Outcome != "ok" || recs[2].Outcome != "denied" {
		t.Fatalf("records %+v", recs)
	}
	if string(recs[0].Args) != `{"amount":100,"to":"bob"}` {
		t.Fatalf("args not compacted: %s", recs[0].Args)
	}
	sum := sha256.Sum256([]byte("done"))
	if recs[1].ResultSize != 4 || recs[1].ResultSHA256 != hex.EncodeToString(sum[:]) || recs[1].Time.Location() != time.UTC {
		t.Fatalf("outcome record %+v", recs[1])
	}
	if recs[2].Decision != "deny" || recs[2].DecidedBy != "policy" || recs[2].Reason != "no" || !strings.Contains(recs[2].Error, "denied by policy") {
		t.Fatalf("denied record %+v", recs[2])
	}
	if bytes.Contains(log, []byte("\x1b")) || bytes.Contains(log, []byte("\u2028")) {
		t.Fatal("raw control characters reached the log")
	}
	if rep, err := governance.Verify(bytes.NewReader(log), nil); err != nil || rep.Records != 5 || rep.Keyed || rep.Head != recs[4].Hash {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		var key []byte
		if keyed {
			key = testKey
		}
		log := writeLog(t, key)
		ls := lines(log)
		var rec3 governance.Record
		json.Unmarshal(ls[2], &rec3)

		swap := func(i, j int) [][]byte {
			c := append([][]byte(nil), ls...)
			c[i], c[j] = c[j], c[i]
			return c
		}
		for _, tc := range []struct {
			name     string
			log      []byte
			line     int
			seq      int64
			reason   string
			detected bool // some edits only a key can detect
		}{
			{"edited amount", bytes.Replace(log, []byte(`"amount":100`), []byte(`"amount":900`), 1), 1, 1, "mismatch", true},
			{"edited outcome", bytes.Replace(log, []byte(`"outcome":"denied"`), []byte(`"outcome":"ok"`), 1), 3, 2, "mismatch", true},
			{"removed record", join(append(append([][]byte(nil), ls[:2]...), ls[3:]...)), 3, 3, "removed, inserted or reordered", true},
			{"removed first record", join(ls[1:]), 1, 1, "does not start a chain", true},
			{"inserted copy", join(append(append(append([][]byte(nil), ls[:3]...), ls[1]), ls[3:]...)), 4, 1, "removed, inserted or reordered", true},
			{"reordered", join(swap(2, 3)), 3, 3, "removed, inserted or reordered", true},
			{"truncated last line", log[:len(log)-10], 5, 0, "incomplete", true},
			{"blank line", join(append(append(append([][]byte(nil), ls[:2]...), []byte("\n")), ls[2:]...)), 3, 0, "empty line", true},
			{"garbage", append(append([]byte(nil), log...), "not json\n"...), 6, 0, "malformed", true},
		} {
			t.Run(map[bool]string{false: "sha256/", true: "hmac/"}[keyed]+tc.name, func(t *testing.T) {
				rep, err := governance.Verify(bytes.NewReader(tc.log), key)
				if !errors.Is(err, governance.ErrTampered) {
					t.Fatalf("Verify = %+v, %v; want ErrTampered", rep, err)
				}
				var ve *governance.VerifyError
				if !errors.As(err, &ve) || ve.Line != tc.line || ve.Seq != tc.seq || !strings.Contains(ve.Reason, tc.reason) {
					t.Fatalf("VerifyError = %+v, want line %d seq %d reason ~%q", ve, tc.line, tc.seq, tc.reason)
				}
				if rep.Records != tc.line-1 {
					t.Fatalf("report says %d intact records before line %d", rep.Records, tc.line)
				}
			})
		}
	}
}

func TestVerifyKeys(t *testing.T) {
	keyed := writeLog(t, testKey)
	plain := writeLog(t, nil)

	if rep, err := governance.Verify(bytes.NewReader(keyed), testKey); err != nil || rep.Records != 5 || !rep.Keyed {
		t.Fatalf("right key: %+v %v", rep, err)
	}
	_, err := governance.Verify(bytes.NewReader(keyed), []byte("another-key-0123456789"))
	var ve *governance.VerifyError
	if !errors.As(err, &ve) || ve.Line != 1 || !strings.Contains(ve.Reason, "wrong key") {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := governance.Verify(bytes.NewReader(keyed), nil); !errors.Is(err, governance.ErrKeyRequired) || errors.Is(err, governance.ErrTampered) {
		t.Fatalf("no key for a keyed log: %v", err)
	}
	// Someone who rewrites the log as a plain chain (recomputing every hash) is caught when verifying with the key.
	if _, err := governance.Verify(bytes.NewReader(plain), testKey); !errors.As(err, &ve) || ve.Line != 1 || !strings.Contains(ve.Reason, "not HMAC-keyed") {
		t.Fatalf("downgraded log: %v", err)
	}
	// An attacker without the key who edits a record and recomputes the chain with another key fails too.
	forged := rechain(t, bytes.Replace(keyed, []byte(`"amount":100`), []byte(`"amount":900`), 1), []byte("attacker-key-0123456789"))
	if _, err := governance.Verify(bytes.NewReader(forged), testKey); !errors.As(err, &ve) || ve.Line != 1 {
		t.Fatalf("re-chained with another key: %v", err)
	}
	// Without a key, a re-chained log verifies: that is the documented limit of an unkeyed chain.
	if _, err := governance.Verify(bytes.NewReader(rechain(t, bytes.Replace(plain, []byte(`"amount":100`), []byte(`"amount":900`), 1), nil)), nil); err != nil {
		t.Fatalf("re-chained plain log: %v", err)
	}
}

// rechain rewrites a log's records through a fresh auditor (as an attacker with the file would).
func rechain(t *testing.T, log, key []byte) []byte {
	var buf bytes.Buffer
	a, err := governance.NewJSONLAuditor(&buf, governance.JSONLConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines(log) {
		var r governance.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		r.Chain, r.PrevHash, r.Hash = "", "", ""
		if err := a.Record(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestVerifyEmptyLog(t *testing.T) {
	rep, err := governance.Verify(strings.NewReader(""), nil)
	if err != nil || rep.Records != 0 || rep.Head != "" {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestOpenAuditFileContinuesChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for round := 0; round < 3; round++ {
		a, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: testKey, Sync: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round == 0 {
			if _, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: testKey}); err == nil {
				t.Fatal("a second writer could open the same log")
			}
		}
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: a})
		run := g.NewRun("")
		for i := 0; i < 2; i++ {
			if _, err := run.Do(context.Background(), call("search", governance.ReadOnly), newTool().fn); err != nil {
				t.Fatal(err)
			}
		}
		head := a.Head()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Record(context.Background(), governance.Record{}); !errors.Is(err, governance.ErrAudit) {
			t.Fatalf("Record after Close: %v", err)
		}
		f, _ := os.Open(path)
		rep, err := governance.Verify(f, testKey)
		f.Close()
		if err != nil || rep.Records != 4*(round+1) || rep.Head != head {
			t.Fatalf("round %d: %+v %v", round, rep, err)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if _, err := governance.OpenAuditFile(path, governance.JSONLConfig{}); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("reopen without key: %v", err)
	}
	if _, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: []byte("wrong-key-0123456789")}); err == nil {
		t.Fatal("reopen with a wrong key succeeded")
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-5], 0o600)
	if _, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: testKey}); err == nil || !strings.Contains(err.Error(), "complete record") {
		t.Fatalf("reopen a torn log: %v", err)
	}
}

func TestJSONLAuditorConfigErrors(t *testing.T) {
	if _, err := governance.NewJSONLAuditor(&bytes.Buffer{}, governance.JSONLConfig{Key: []byte("short")}); err == nil {
		t.Fatal("short key accepted")
	}
	if _, err := governance.NewJSONLAuditor(&bytes.Buffer{}, governance.JSONLConfig{Sync: true}); err == nil {
		t.Fatal("Sync on a writer without Sync accepted")
	}
	if _, err := governance.NewJSONLAuditor(nil, governance.JSONLConfig{}); err == nil {
		t.Fatal("nil writer accepted")
	}
	a, _ := governance.NewJSONLAuditor(&bytes.Buffer{}, governance.JSONLConfig{})
	if err := a.Record(context.Background(), governance.Record{Args: json.RawMessage(`{bad`)}); !errors.Is(err, governance.ErrAudit) {
		t.Fatalf("invalid args: %v", err)
	}
	// An encoding error writes nothing and is not sticky.
	if err := a.Record(context.Background(), governance.Record{Tool: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestRedactionKeepsSecretsOutOfTheLog(t *testing.T) {
	const secret = "sk-live-SECRET-123"
	var buf bytes.Buffer
	a, _ := governance.NewJSONLAuditor(&buf, governance.JSONLConfig{})
	var shown json.RawMessage
	var toolSaw string
	g := mustGate(t, governance.GateConfig{
		Policy: governance.PolicyFunc(needsApproval),
		Approver: governance.ApproverFunc(func(_ context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
			shown = req.DisplayArgs
			return governance.Decision{Allow: true}, nil
		}),
		Auditor: a,
		Redact: func(tool string, args json.RawMessage) json.RawMessage {
			var m map[string]any
			if json.Unmarshal(args, &m) != nil {
				return nil
			}
			if _, ok := m["api_key"]; ok {
				m["api_key"] = "[REDACTED]"
			}
			out, _ := json.Marshal(m)
			return out
		},
	})
	_, err := g.NewRun("r").Do(context.Background(),
		governance.Call{Tool: "call_api", Args: json.RawMessage(`{"api_key":"` + secret + `","q":1}`)},
		func(_ context.Context, c governance.Call) ([]byte, error) { toolSaw = string(c.Args); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), secret) || strings.Contains(string(shown), secret) {
		t.Fatal("the secret reached the log or the approver's display")
	}
	if !strings.Contains(buf.String(), `"api_key":"[REDACTED]"`) || !strings.Contains(toolSaw, secret) {
		t.Fatalf("log %s / tool saw %s", buf.String(), toolSaw)
	}

	// A hook returning invalid JSON is replaced by a marker, not the raw arguments.
	buf.Reset()
	g = mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: a,
		Redact: func(string, json.RawMessage) json.RawMessage { return json.RawMessage(`{oops`) }})
	g.NewRun("r2").Do(context.Background(), governance.Call{Tool: "call_api", Args: json.RawMessage(`{"api_key":"` + secret + `"}`)}, newTool().fn)
	if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "redaction returned invalid JSON") {
		t.Fatalf("log %s", buf.String())
	}
}

func TestMemoryAuditorLimit(t *testing.T) {
	m := &governance.MemoryAuditor{Limit: 3}
	for i := 1; i <= 10; i++ {
		m.Record(context.Background(), governance.Record{RunID: []string{"a", "b"}[i%2], Seq: int64(i)})
	}
	recs := m.Records()
	if len(recs) != 3 || recs[0].Seq != 8 || recs[2].Seq != 10 || m.Len() != 3 {
		t.Fatalf("records %+v", recs)
	}
	if b := m.RunRecords("b"); len(b) != 1 || b[0].Seq != 9 {
		t.Fatalf("run b: %+v", b)
	}
	args := json.RawMessage(`{"a":1}`)
	m.Record(context.Background(), governance.Record{Args: args})
	args[2] = 'X'
	if r := m.Records(); string(r[len(r)-1].Args) != `{"a":1}` {
		t.Fatal("MemoryAuditor kept a reference to the caller's args")
	}
}

func TestMultiAuditorFailsIfAnyFails(t *testing.T) {
	good := &governance.MemoryAuditor{}
	bad := &governance.MemoryAuditor{Err: errors.New("down")}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.MultiAuditor(good, bad)})
	tl := newTool()
	if _, err := g.NewRun("r").Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrAudit) || tl.runs.Load() != 0 {
		t.Fatalf("err %v runs %d", err, tl.runs.Load())
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(writeLogForFuzz(f), false)
	f.Add([]byte("{}\n"), true)
	f.Add([]byte(`{"v":1,"chain":"sha256","prev_hash":"","hash":"`+strings.Repeat("0", 64)+`"}`+"\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, keyed bool) {
		var key []byte
		if keyed {
			key = testKey
		}
		rep, err := governance.Verify(bytes.NewReader(data), key)
		if err == nil && rep.Records > bytes.Count(data, []byte("\n")) {
			t.Fatalf("%d records from %d lines", rep.Records, bytes.Count(data, []byte("\n")))
		}
	})
}

func writeLogForFuzz(f *testing.F) []byte {
	var buf bytes.Buffer
	a, _ := governance.NewJSONLAuditor(&buf, governance.JSONLConfig{})
	for i := 0; i < 3; i++ {
		a.Record(context.Background(), governance.Record{Seq: int64(i + 1), Tool: "t", Args: json.RawMessage(`{"a":1}`)})
	}
	return buf.Bytes()
}

// TestMemoryAuditorKeepsTheNewest holds MemoryAuditor (a ring that wraps and grows) to the plain model of what it
// keeps: every record in order, then the oldest dropped while over Limit or MaxBytes, the newest always kept.
func TestMemoryAuditorKeepsTheNewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		m := &governance.MemoryAuditor{Limit: rng.IntN(40), MaxBytes: []int64{-1, 4 << 10, 16 << 10}[rng.IntN(3)]}
		var model []governance.Record
		var dropped int64
		cost := func(r governance.Record) int64 { return 256 + int64(len(r.Args)+len(r.RunID)+len(r.ArgsSHA256)) }
		for i := range 300 {
			rec := governance.Record{RunID: []string{"a", "b", "c"}[rng.IntN(3)], Seq: int64(i)}
			if rng.IntN(2) == 0 {
				rec.Args = json.RawMessage(`"` + strings.Repeat("x", rng.IntN(200)) + `"`)
			}
			if err := m.Record(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			if m.MaxBytes > 0 && cost(rec) > m.MaxBytes/16 && len(rec.Args) > 0 {
				sum := sha256.Sum256(rec.Args)
				rec.Args, rec.ArgsSize, rec.ArgsSHA256 = nil, int64(len(rec.Args)), hex.EncodeToString(sum[:])
			}
			model = append(model, rec)
			for {
				var size int64
				for _, r := range model {
					size += cost(r)
				}
				if len(model) <= 1 || !((m.Limit > 0 && len(model) > m.Limit) || (m.MaxBytes > 0 && size > m.MaxBytes)) {
					break
				}
				model, dropped = model[1:], dropped+1
			}
			if rng.IntN(10) > 0 {
				continue
			}
			got := m.Records()
			if len(got) != len(model) || m.Len() != len(model) || m.Dropped() != dropped {
				t.Fatalf("round %d after %d: kept %d (Len %d, dropped %d), want %d (dropped %d)", round, i, len(got), m.Len(), m.Dropped(), len(model), dropped)
			}
			for k := range got {
				if got[k].Seq != model[k].Seq || string(got[k].Args) != string(model[k].Args) || got[k].ArgsSHA256 != model[k].ArgsSHA256 {
					t.Fatalf("round %d after %d: record %d is seq %d %s, want seq %d %s", round, i, k, got[k].Seq, got[k].Args, model[k].Seq, model[k].Args)
				}
			}
			var want []int64
			for _, r := range model {
				if r.RunID == "b" {
					want = append(want, r.Seq)
				}
			}
			var have []int64
			for _, r := range m.RunRecords("b") {
				have = append(have, r.Seq)
			}
			if !slices.Equal(have, want) {
				t.Fatalf("round %d after %d: run b has %v, want %v", round, i, have, want)
			}
		}
	}
}

// The "allowed" and outcome records of a call share one copy of the arguments, which is still a copy.
func TestMemoryAuditorSharesEqualArgs(t *testing.T) {
	m := &governance.MemoryAuditor{}
	args := json.RawMessage(`{"a":1}`)
	m.Record(context.Background(), governance.Record{Seq: 1, Args: args})
	m.Record(context.Background(), governance.Record{Seq: 2, Args: args})
	args[2] = 'X'
	m.Record(context.Background(), governance.Record{Seq: 3, Args: args})
	r := m.Records()
	if string(r[0].Args) != `{"a":1}` || string(r[1].Args) != `{"a":1}` || string(r[2].Args) != `{"X":1}` {
		t.Fatalf("args kept: %s %s %s", r[0].Args, r[1].Args, r[2].Args)
	}
	if &r[0].Args[0] != &r[1].Args[0] || &r[1].Args[0] == &r[2].Args[0] {
		t.Fatal("equal arguments are not shared, or different ones are")
	}
}
