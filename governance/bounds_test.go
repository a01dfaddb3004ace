package governance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// stringArgs returns {"s":"xxx…"} of exactly n bytes (n ≥ 8).
func stringArgs(n int) json.RawMessage {
	return json.RawMessage(`{"s":"` + strings.Repeat("x", n-8) + `"}`)
}

// A record keeps at most MaxAuditArgsBytes of arguments; beyond, their size and SHA-256 only. The approver still
// sees them in full.
func TestAuditRecordArgsAreBounded(t *testing.T) {
	aud := &governance.MemoryAuditor{}
	var shown atomic.Int64
	g := mustGate(t, governance.GateConfig{
		Policy: governance.PolicyFunc(needsApproval), Auditor: aud, MaxAuditArgsBytes: 1000,
		Approver: governance.ApproverFunc(func(_ context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
			shown.Store(int64(len(req.DisplayArgs)))
			return governance.Decision{Allow: true}, nil
		}),
	})
	run := g.NewRun("r")
	for _, n := range []int{1000, 1001, 500 << 10} {
		aud.Reset()
		args := stringArgs(n)
		if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Args: args}, newTool().fn); err != nil {
			t.Fatal(err)
		}
		if shown.Load() != int64(n) {
			t.Errorf("%d bytes: the approver was shown %d bytes", n, shown.Load())
		}
		for _, rec := range aud.Records() {
			if n <= 1000 {
				if string(rec.Args) != string(args) || rec.ArgsSize != 0 {
					t.Errorf("%d bytes (at the limit): record args %d bytes, size %d", n, len(rec.Args), rec.ArgsSize)
				}
				continue
			}
			sum := sha256.Sum256(args)
			if rec.Args != nil || rec.ArgsSize != int64(n) || rec.ArgsSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("%d bytes: record keeps %d bytes of args, size %d, sha %q", n, len(rec.Args), rec.ArgsSize, rec.ArgsSHA256)
			}
		}
	}
}

// The attack of a program looping on `_wasmbox.call(b'Tnot_a_tool\n"' + b"x"*(1<<20) + b'"')`: denied calls
// with large arguments. The log's growth is bounded per call (args kept at most 64 KiB) and per run (the flood
// cap), and the log still verifies.
func TestDeniedFloodBoundsTheLog(t *testing.T) {
	var buf bytes.Buffer
	jl, err := governance.NewJSONLAuditor(&buf, governance.JSONLConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGate(t, governance.GateConfig{Auditor: jl, Limits: governance.Limits{MaxToolCalls: 5, MaxDeniedCalls: 20}}) // no policy: all denied
	run := g.NewRun("flood")
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20-2) + `"`) // exactly MaxArgsBytes: valid, denied by the policy
	huge := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)  // one past: invalid
	var floods int
	for i := 0; i < 1000; i++ {
		args := big
		if i%2 == 1 {
			args = huge
		}
		_, err := run.Do(context.Background(), governance.Call{Tool: "not_a_tool", Args: args}, newTool().fn)
		de := asDenied(t, err)
		switch {
		case i < 20 && (errors.Is(err, governance.ErrCallFlood) || run.Flooded() != (i == 19)):
			t.Fatalf("call %d: flooded too early: %v (Flooded %v)", i, err, run.Flooded())
		case i >= 20:
			if !errors.Is(err, governance.ErrCallFlood) || !errors.Is(err, governance.ErrToolLimit) || de.Kind != governance.ErrCallFlood {
				t.Fatalf("call %d: %v, want ErrCallFlood (and ErrToolLimit)", i, err)
			}
			floods++
		}
	}
	if !run.Flooded() || floods != 980 {
		t.Fatalf("Flooded %v, floods %d", run.Flooded(), floods)
	}
	u := run.Usage()
	if u.Denied != 20 || u.Unaudited != 979 {
		t.Errorf("usage %+v", u)
	}
	if jl.Count() != 21 {
		t.Errorf("%d records for 1000 calls, want 21 (20 denials and one flood record)", jl.Count())
	}
	if buf.Len() > 21*(64<<10+8<<10) {
		t.Errorf("log is %d bytes for 21 records", buf.Len())
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
		var rec governance.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if len(line) > 70<<10 || string(rec.Args) != "null" || rec.ArgsSize < 1<<20 {
			t.Errorf("record %d: %d bytes, %d bytes of args, args_size %d", i, len(line), len(rec.Args), rec.ArgsSize)
		}
		if (i%2 == 0 && i < 20) != (rec.ArgsSHA256 != "") { // invalid calls: size only
			t.Errorf("record %d: args_sha256 %q", i, rec.ArgsSHA256)
		}
	}
	if i := bytes.LastIndex(buf.Bytes(), []byte("max_denied_calls")); i < 0 {
		t.Errorf("no flood record")
	}
	if rep, err := governance.Verify(bytes.NewReader(buf.Bytes()), nil); err != nil || rep.Records != 21 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// Arguments of exactly MaxArgsBytes pass; one byte more is refused.
func TestMaxArgsBytesBoundary(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, MaxArgsBytes: 100})
	run := g.NewRun("")
	if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Args: stringArgs(100), Effect: governance.ReadOnly}, newTool().fn); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := run.Do(context.Background(), governance.Call{Tool: "t", Args: stringArgs(101), Effect: governance.ReadOnly}, newTool().fn)
	if !errors.Is(err, governance.ErrInvalidCall) {
		t.Fatalf("one past the limit: %v", err)
	}
}

func TestMemoryAuditorBoundedInBytes(t *testing.T) {
	m := &governance.MemoryAuditor{MaxBytes: 1 << 20}
	args := stringArgs(10 << 10)
	for i := int64(1); i <= 1000; i++ {
		if err := m.Record(context.Background(), governance.Record{RunID: "r", Seq: i, Args: args}); err != nil {
			t.Fatal(err)
		}
	}
	recs := m.Records()
	if len(recs) == 0 || len(recs) > 100 || recs[len(recs)-1].Seq != 1000 || m.Dropped() != int64(1000-len(recs)) {
		t.Fatalf("kept %d records (last seq %d), dropped %d", len(recs), recs[len(recs)-1].Seq, m.Dropped())
	}
	// A record that alone takes more than a sixteenth keeps only the size and hash of its arguments.
	m.Record(context.Background(), governance.Record{RunID: "r", Seq: 1001, Args: stringArgs(100 << 10)})
	last := m.Records()[m.Len()-1]
	if last.Seq != 1001 || last.Args != nil || last.ArgsSize != 100<<10 || last.ArgsSHA256 == "" {
		t.Fatalf("large record kept as %d bytes of args, size %d", len(last.Args), last.ArgsSize)
	}
	// The zero value is bounded too.
	var z governance.MemoryAuditor
	big := stringArgs(1 << 20)
	for i := 0; i < 100; i++ {
		z.Record(context.Background(), governance.Record{Args: big})
	}
	total := 0
	for _, r := range z.Records() {
		total += len(r.Args)
	}
	if total > governance.DefaultMemoryAuditorBytes {
		t.Fatalf("zero-value MemoryAuditor keeps %d bytes of arguments", total)
	}
}

// The approval spoof: "amount": 5 repeated 120 times, then "amount": 640. A display shows the first, decoders
// take the last. The gate refuses duplicate keys at any depth before the policy or the approver sees the call.
func TestDuplicateKeysAreRefused(t *testing.T) {
	spoof := `{"order_id":"A-1",` + strings.Repeat(`"amount": 5, `, 120) + `"amount": 640}`
	deep := strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1001)
	for _, c := range []struct {
		args, want string // want: "" allowed, else a substring of the reason
	}{
		{spoof, `duplicate key "amount"`},
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{"a":{"b":1,"c":[{"d":1,"d":2}]}}`, `duplicate key "d"`},
		{`{"amount":5,"Amount":640}`, `differ only in case`},
		{`{"\u0061mount":5,"amount":640}`, `duplicate key "amount"`},
		{`{"k":5,"\u212a":640}`, `differ only in case`}, // KELVIN SIGN folds to k, as encoding/json matches fields
		{deep, "nested deeper than 1000"},
		{`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}`, ""},
		{`{"a":"x:y:z","b":"a:b"}`, ""},
		{`{"a":[],"b":{},"c":[[],{}],"d":null}`, ""},
		{strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000), ""},
		{`{"amount":5}`, ""},
	} {
		asked := false
		g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval),
			Approver: governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
				asked = true
				return governance.Decision{Allow: true}, nil
			})})
		tl := newTool()
		_, err := g.NewRun("").Do(context.Background(), governance.Call{Tool: "issue_refund", Args: json.RawMessage(c.args)}, tl.fn)
		name := c.args
		if len(name) > 60 {
			name = name[:60]
		}
		if c.want == "" {
			if err != nil || tl.runs.Load() != 1 {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, governance.ErrInvalidCall) || !strings.Contains(err.Error(), c.want) || asked || tl.runs.Load() != 0 {
			t.Errorf("%s: err %v (asked %v, ran %d), want ErrInvalidCall with %q", name, err, asked, tl.runs.Load(), c.want)
		}
	}
}

type pauser struct {
	paused           atomic.Bool
	pauses, resumes  atomic.Int64
	pausedAtApproval atomic.Bool
}

func (p *pauser) PauseDeadline() func() {
	p.pauses.Add(1)
	p.paused.Store(true)
	return func() { p.paused.Store(false); p.resumes.Add(1) }
}

// The deadline pauses while a human approves, and only then; the wait is still bounded by ApprovalTimeout and
// by the caller's context.
func TestDeadlinePauserDuringApproval(t *testing.T) {
	p := &pauser{}
	var toolSawPause atomic.Bool
	answer := make(chan bool, 1)
	g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval), ApprovalTimeout: 200 * time.Millisecond,
		Approver: governance.ApproverFunc(func(ctx context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
			p.pausedAtApproval.Store(p.paused.Load())
			select {
			case a := <-answer:
				return governance.Decision{Allow: a}, nil
			case <-ctx.Done():
				return governance.Decision{}, ctx.Err()
			}
		})})
	tl := func(context.Context, governance.Call) ([]byte, error) {
		toolSawPause.Store(p.paused.Load())
		return []byte(`1`), nil
	}
	ctx := governance.WithDeadlinePauser(context.Background(), p)

	answer <- true
	if _, err := g.NewRun("").Do(ctx, governance.Call{Tool: "refund"}, tl); err != nil {
		t.Fatal(err)
	}
	if !p.pausedAtApproval.Load() || toolSawPause.Load() || p.pauses.Load() != 1 || p.resumes.Load() != 1 || p.paused.Load() {
		t.Fatalf("paused at approval %v, during the tool %v, pauses %d, resumes %d", p.pausedAtApproval.Load(), toolSawPause.Load(), p.pauses.Load(), p.resumes.Load())
	}

	// Nobody answers: the approval timeout ends the wait, and the clock runs again.
	start := time.Now()
	_, err := g.NewRun("").Do(ctx, governance.Call{Tool: "refund"}, tl)
	if !errors.Is(err, governance.ErrApprovalTimeout) || time.Since(start) > 5*time.Second || p.resumes.Load() != 2 || p.paused.Load() {
		t.Fatalf("%v after %s; resumes %d", err, time.Since(start), p.resumes.Load())
	}

	// The caller cancels during the wait.
	g2 := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval), ApprovalTimeout: time.Hour,
		Approver: governance.ApproverFunc(func(ctx context.Context, _ governance.ApprovalRequest) (governance.Decision, error) {
			<-ctx.Done()
			return governance.Decision{}, ctx.Err()
		})})
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	_, err = g2.NewRun("").Do(cctx, governance.Call{Tool: "refund"}, tl)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second || p.resumes.Load() != 3 || p.paused.Load() {
		t.Fatalf("%v after %s; resumes %d", err, time.Since(start), p.resumes.Load())
	}
}

// syncAuditor is a MemoryAuditor that signals each record's outcome.
type syncAuditor struct {
	governance.MemoryAuditor
	mu     sync.Mutex
	closed bool
	seen   chan governance.Status
}

func (a *syncAuditor) Record(ctx context.Context, rec governance.Record) error {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	defer func() { a.seen <- rec.Outcome }()
	if closed {
		return errors.New("closed")
	}
	return a.MemoryAuditor.Record(ctx, rec)
}

// A tool that ignores its context cannot hold a call past the deadline: the gate returns within the grace, the
// call is audited as abandoned, and the tool's late result is discarded and audited as late.
func TestToolIgnoringContextIsAbandoned(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		aud := &syncAuditor{seen: make(chan governance.Status, 10)}
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, ToolGrace: 50 * time.Millisecond})
		release := make(chan struct{})
		ran := make(chan struct{})
		sleepy := func(context.Context, governance.Call) ([]byte, error) {
			close(ran)
			select { // ignores ctx: "sleeps" 6 s unless released
			case <-release:
			case <-time.After(6 * time.Second):
			}
			return []byte(`{"refunded":640}`), nil
		}
		cause := errors.New("the program's time is up")
		ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
		start := time.Now()
		out, err := g.NewRun("r").Do(ctx, governance.Call{Tool: "slow", Effect: governance.ReadOnly}, sleepy)
		took := time.Since(start)
		cancel()
		var te *governance.ToolError
		if !errors.As(err, &te) || !te.Abandoned || !errors.Is(err, governance.ErrToolAbandoned) || !errors.Is(err, governance.ErrToolFailed) ||
			!errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, cause) {
			t.Fatalf("err %v (%T)", err, err)
		}
		if took > 3*time.Second || out.Status != governance.StatusAbandoned || out.Result != nil {
			t.Fatalf("returned after %s with %+v", took, out)
		}
		<-ran
		for _, want := range []governance.Status{governance.StatusAllowed, governance.StatusAbandoned} {
			if got := <-aud.seen; got != want {
				t.Fatalf("record %s, want %s", got, want)
			}
		}
		if closeFirst {
			aud.mu.Lock()
			aud.closed = true
			aud.mu.Unlock()
		}
		close(release)
		select {
		case got := <-aud.seen:
			if got != governance.StatusLate {
				t.Fatalf("record %s, want late", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no late record")
		}
		if recs := aud.Records(); !closeFirst && (len(recs) != 3 || recs[2].ResultSize != int64(len(`{"refunded":640}`)) || recs[2].Seq != recs[1].Seq) {
			t.Fatalf("records %+v", recs)
		}
	}
}

// A tool that honours its context and returns within the grace is not abandoned.
func TestToolReturningWithinGraceIsNotAbandoned(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, ToolGrace: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out, err := g.NewRun("").Do(ctx, governance.Call{Tool: "t", Effect: governance.ReadOnly}, func(ctx context.Context, _ governance.Call) ([]byte, error) {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		return []byte(`"late but in grace"`), nil
	})
	if err != nil || out.Status != governance.StatusOK || string(out.Result) != `"late but in grace"` {
		t.Fatalf("%+v %v", out, err)
	}
}

// The terminal approver never shows part of the arguments without saying so, and never approves what it could
// not show; padding is compacted away rather than counted against the limit.
func TestTerminalApproverNeverApprovesUnseenArguments(t *testing.T) {
	out := &syncBuffer{}
	ta := &governance.TerminalApprover{In: strings.NewReader("y\ny\n"), Out: out, MaxArgsBytes: 100}
	long := `{"note":"` + strings.Repeat("n", 200) + `","amount":640}`
	d, err := ta.Approve(context.Background(), approvalRequest("issue_refund", long))
	if err != nil || d.Allow || !strings.Contains(d.Reason, "not shown") {
		t.Fatalf("long arguments: %+v %v", d, err)
	}
	q := out.String()
	hidden := len(long) - 100
	if !strings.Contains(q, strconv.Itoa(hidden)+" MORE BYTES NOT SHOWN") || strings.Contains(q, "Approve?") || strings.Contains(q, "640") {
		t.Fatalf("question:\n%s", q)
	}
	// The "y" typed is still there for the next question, whose padded arguments fit once compacted.
	out = &syncBuffer{}
	ta.Out = out
	padded := "{\"amount\":" + strings.Repeat(" ", 500) + "5}"
	d, err = ta.Approve(context.Background(), approvalRequest("issue_refund", padded))
	if err != nil || !d.Allow || !strings.Contains(out.String(), `args:   {"amount":5}`) {
		t.Fatalf("padded arguments: %+v %v\n%s", d, err, out.String())
	}
}

// A log keeps its anchor (head and record count) across reopening; a keyed auditor refuses to continue an unkeyed
// log and the reverse, since either would silently change what the chain proves.
func TestAnchorAndChainKindOnReopen(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/plain.jsonl"
	key := []byte("0123456789abcdef0123")
	var head string
	for i := 0; i < 2; i++ {
		a, err := governance.OpenAuditFile(path, governance.JSONLConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			if err := a.Record(context.Background(), governance.Record{RunID: "r", Seq: int64(j + 1), Outcome: governance.StatusOK}); err != nil {
				t.Fatal(err)
			}
		}
		var n int64
		head, n = a.Anchor()
		if n != int64(3*(i+1)) || head != a.Head() {
			t.Fatalf("open %d: anchor %s %d", i, head, n)
		}
		a.Close()
	}
	if _, err := governance.OpenAuditFile(path, governance.JSONLConfig{Key: key}); err == nil || !strings.Contains(err.Error(), "not HMAC-keyed") {
		t.Fatalf("keyed auditor continued an unkeyed log: %v", err)
	}
	kpath := dir + "/keyed.jsonl"
	ka, err := governance.OpenAuditFile(kpath, governance.JSONLConfig{Key: key, Checkpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	ka.Record(context.Background(), governance.Record{RunID: "r", Seq: 1, Outcome: governance.StatusOK})
	if err := ka.Record(context.Background(), governance.Record{Seq: 2, Outcome: governance.StatusCheckpoint}); !errors.Is(err, governance.ErrAudit) {
		t.Fatalf("a caller wrote a checkpoint: %v", err)
	}
	if err := ka.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := governance.OpenAuditFile(kpath, governance.JSONLConfig{}); err == nil || !strings.Contains(err.Error(), "HMAC-keyed") {
		t.Fatalf("unkeyed auditor continued a keyed log: %v", err)
	}
	if _, err := governance.NewJSONLAuditor(&bytes.Buffer{}, governance.JSONLConfig{Checkpoint: true}); err == nil {
		t.Fatal("unkeyed checkpoints accepted")
	}
}
