package governance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// tool is a ToolFunc that counts its runs.
type tool struct {
	runs   atomic.Int64
	result string
	err    error
}

func (c *tool) fn(ctx context.Context, call governance.Call) ([]byte, error) {
	c.runs.Add(1)
	return []byte(c.result), c.err
}

func newTool() *tool { return &tool{result: `{"ok":true}`} }

func call(name string, effect governance.Effect) governance.Call {
	return governance.Call{Tool: name, Args: json.RawMessage(`{"q":"x"}`), Source: governance.SourcePython, Effect: effect}
}

func mustGate(t testing.TB, cfg governance.GateConfig) *governance.Gate {
	t.Helper()
	if cfg.Auditor == nil {
		cfg.Auditor = &governance.MemoryAuditor{}
	}
	g, err := governance.NewGate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func asDenied(t *testing.T, err error) *governance.DeniedError {
	t.Helper()
	var de *governance.DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DeniedError", err, err)
	}
	return de
}

func TestNewGateRequiresAuditor(t *testing.T) {
	if _, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}}); err == nil {
		t.Fatal("NewGate without an auditor succeeded")
	}
	if _, err := governance.NewGate(governance.GateConfig{Auditor: governance.DiscardAuditor{}}); err != nil {
		t.Fatalf("NewGate with DiscardAuditor: %v", err)
	}
}

func TestZeroConfigDeniesEverything(t *testing.T) {
	g := mustGate(t, governance.GateConfig{})
	tl := newTool()
	_, err := g.NewRun("r").Do(context.Background(), call("search", governance.ReadOnly), tl.fn)
	if !errors.Is(err, governance.ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if tl.runs.Load() != 0 {
		t.Fatal("tool ran under a gate without a policy")
	}
}

func TestMaxToolCallsStopsLoopAtExactlyN(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		want  int64
	}{
		{"zero means 50", 0, governance.DefaultMaxToolCalls},
		{"three", 3, 3},
		{"negative means none", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &governance.MemoryAuditor{}
			g := mustGate(t, governance.GateConfig{
				Policy:  governance.AllowAllPolicy{},
				Limits:  governance.Limits{MaxToolCalls: tc.limit},
				Auditor: audit,
			})
			run := g.NewRun("loop")
			tl := newTool()
			ok := int64(0)
			for i := int64(1); i <= tc.want+10; i++ {
				_, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn)
				if i <= tc.want {
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					ok++
					continue
				}
				if !errors.Is(err, governance.ErrToolLimit) {
					t.Fatalf("call %d: err = %v, want ErrToolLimit", i, err)
				}
				if de := asDenied(t, err); de.Seq != i || de.DecidedBy != "budget" {
					t.Fatalf("call %d: seq %d decided by %q", i, de.Seq, de.DecidedBy)
				}
			}
			if ok != tc.want || tl.runs.Load() != tc.want {
				t.Fatalf("%d calls succeeded and the tool ran %d times, want %d", ok, tl.runs.Load(), tc.want)
			}
			if u := run.Usage(); u.Calls != tc.want+10 {
				t.Fatalf("Usage().Calls = %d, want %d", u.Calls, tc.want+10)
			}
			// Every call is audited: two records per allowed call, one per denied call.
			if n := audit.Len(); n != int(2*tc.want+10) {
				t.Fatalf("%d records, want %d", n, 2*tc.want+10)
			}
		})
	}
}

func TestMaxToolCallsCountsDeniedCalls(t *testing.T) {
	policy := governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
		if c.Tool == "forbidden" {
			return governance.Verdict{Action: governance.Deny, Reason: "no"}, nil
		}
		return governance.Verdict{Action: governance.Allow}, nil
	})
	g := mustGate(t, governance.GateConfig{Policy: policy, Limits: governance.Limits{MaxToolCalls: 3}})
	run := g.NewRun("r")
	tl := newTool()
	for i := 0; i < 3; i++ {
		if _, err := run.Do(context.Background(), call("forbidden", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrDenied) {
			t.Fatalf("err = %v, want ErrDenied", err)
		}
	}
	if _, err := run.Do(context.Background(), call("fine", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrToolLimit) {
		t.Fatalf("err = %v, want ErrToolLimit after 3 denied calls", err)
	}
	if tl.runs.Load() != 0 {
		t.Fatal("tool ran")
	}
}

func TestApprovalTimeoutDenies(t *testing.T) {
	honours := governance.ApproverFunc(func(ctx context.Context, _ governance.ApprovalRequest) (governance.Decision, error) {
		<-ctx.Done()
		return governance.Decision{}, ctx.Err()
	})
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	ignores := governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
		<-stuck // ignores its context entirely
		return governance.Decision{Allow: true}, nil
	})
	for _, tc := range []struct {
		name     string
		approver governance.Approver
	}{{"approver honours ctx", honours}, {"approver ignores ctx", ignores}} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &governance.MemoryAuditor{}
			g := mustGate(t, governance.GateConfig{
				Policy:          governance.PolicyFunc(needsApproval),
				Approver:        tc.approver,
				ApprovalTimeout: 30 * time.Millisecond,
				Auditor:         audit,
			})
			tl := newTool()
			start := time.Now()
			out, err := g.NewRun("r").Do(context.Background(), call("pay", governance.Irreversible), tl.fn)
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("Do took %v", el)
			}
			if !errors.Is(err, governance.ErrApprovalTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrApprovalTimeout and DeadlineExceeded", err)
			}
			if tl.runs.Load() != 0 {
				t.Fatal("tool ran after an approval timeout")
			}
			if de := asDenied(t, err); de.DecidedBy != "gate" || !strings.Contains(de.Reason, "30ms") {
				t.Fatalf("decided by %q, reason %q", de.DecidedBy, de.Reason)
			}
			if out.Status != governance.StatusDenied {
				t.Fatalf("status %q", out.Status)
			}
			recs := audit.Records()
			if len(recs) != 1 || recs[0].Outcome != governance.StatusDenied || recs[0].Decision != "deny" {
				t.Fatalf("records = %+v, want one denial", recs)
			}
		})
	}

	t.Run("call deadline shorter than the approval timeout", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval), Approver: honours})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		tl := newTool()
		_, err := g.NewRun("r").Do(ctx, call("pay", governance.Irreversible), tl.fn)
		if !errors.Is(err, governance.ErrApprovalTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if tl.runs.Load() != 0 {
			t.Fatal("tool ran")
		}
	})

	t.Run("call cancelled while waiting", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval), Approver: honours})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		tl := newTool()
		_, err := g.NewRun("r").Do(ctx, call("pay", governance.Irreversible), tl.fn)
		if !errors.Is(err, context.Canceled) || errors.Is(err, governance.ErrApprovalTimeout) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if tl.runs.Load() != 0 {
			t.Fatal("tool ran")
		}
	})
}

func needsApproval(context.Context, governance.Call) (governance.Verdict, error) {
	return governance.Verdict{Action: governance.NeedsApproval, Reason: "risky"}, nil
}

func TestApproverFailuresDeny(t *testing.T) {
	boom := errors.New("approval service down")
	for _, tc := range []struct {
		name     string
		approver governance.Approver
		cause    error
		by       string
	}{
		{"error", governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
			return governance.Decision{Allow: true}, boom // an error denies even with Allow set
		}), boom, "gate"},
		{"panic", governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
			panic("approver bug")
		}), nil, "gate"},
		{"nil approver", nil, nil, "gate"},
		{"says no", governance.DenyAll{}, nil, "approver:deny_all"},
		{"nil channel", governance.ChanApprover{}, nil, "gate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &governance.MemoryAuditor{}
			g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(needsApproval), Approver: tc.approver, Auditor: audit})
			tl := newTool()
			_, err := g.NewRun("r").Do(context.Background(), call("pay", governance.Irreversible), tl.fn)
			if !errors.Is(err, governance.ErrApprovalDenied) {
				t.Fatalf("err = %v, want ErrApprovalDenied", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("err = %v does not wrap the approver's error", err)
			}
			if tl.runs.Load() != 0 {
				t.Fatal("tool ran")
			}
			de := asDenied(t, err)
			if de.DecidedBy != tc.by || de.Tool != "pay" || de.RunID != "r" || de.Seq != 1 {
				t.Fatalf("DeniedError = %+v", de)
			}
			recs := audit.Records()
			if len(recs) != 1 || recs[0].DecidedBy != tc.by || recs[0].Reason == "" {
				t.Fatalf("records = %+v", recs)
			}
		})
	}
}

func TestApprovalAllows(t *testing.T) {
	audit := &governance.MemoryAuditor{}
	var got governance.ApprovalRequest
	g := mustGate(t, governance.GateConfig{
		Policy: governance.PolicyFunc(needsApproval),
		Approver: governance.ApproverFunc(func(_ context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
			got = req
			return governance.Decision{Allow: true, Reason: "looks fine", DecidedBy: "approver:alice"}, nil
		}),
		Auditor: audit,
	})
	tl := newTool()
	out, err := g.NewRun("r").Do(context.Background(), call("pay", governance.Irreversible), tl.fn)
	if err != nil || tl.runs.Load() != 1 {
		t.Fatalf("err = %v, runs = %d", err, tl.runs.Load())
	}
	if got.Reason != "risky" || got.Call.Seq != 1 || got.Deadline.IsZero() || string(got.DisplayArgs) != `{"q":"x"}` {
		t.Fatalf("approval request = %+v", got)
	}
	if out.Decision.DecidedBy != "approver:alice" {
		t.Fatalf("decision = %+v", out.Decision)
	}
	for _, r := range audit.Records() {
		if r.DecidedBy != "approver:alice" || r.Reason != "looks fine" {
			t.Fatalf("record = %+v", r)
		}
	}
}

func TestBudgetCheckedBeforeCall(t *testing.T) {
	t.Run("per-tool cap", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Limits: governance.Limits{ToolCaps: map[string]int64{"search": 2, "never": 0}}})
		run := g.NewRun("r")
		tl := newTool()
		for i := 0; i < 2; i++ {
			if _, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"search", "never"} {
			_, err := run.Do(context.Background(), call(name, governance.ReadOnly), tl.fn)
			if !errors.Is(err, governance.ErrBudgetExceeded) {
				t.Fatalf("%s: err = %v, want ErrBudgetExceeded", name, err)
			}
		}
		if tl.runs.Load() != 2 {
			t.Fatalf("tool ran %d times, want 2", tl.runs.Load())
		}
		if _, err := run.Do(context.Background(), call("other", governance.ReadOnly), tl.fn); err != nil {
			t.Fatalf("uncapped tool: %v", err)
		}
	})

	t.Run("cost units", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Limits: governance.Limits{MaxCostUnits: 10}})
		run := g.NewRun("r")
		tl := newTool()
		c := call("search", governance.ReadOnly)
		c.Cost = 3
		for i := 0; i < 3; i++ {
			if _, err := run.Do(context.Background(), c, tl.fn); err != nil {
				t.Fatal(err)
			}
		}
		_, err := run.Do(context.Background(), c, tl.fn) // 9 + 3 > 10
		if !errors.Is(err, governance.ErrBudgetExceeded) {
			t.Fatalf("err = %v", err)
		}
		if tl.runs.Load() != 3 || run.Usage().CostUnits != 9 {
			t.Fatalf("runs %d, usage %+v", tl.runs.Load(), run.Usage())
		}
		c.Cost = 1 // still fits
		if _, err := run.Do(context.Background(), c, tl.fn); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("policy cost marking", func(t *testing.T) {
		policy := governance.PolicyFunc(func(context.Context, governance.Call) (governance.Verdict, error) {
			return governance.Verdict{Action: governance.Allow, Cost: 6}, nil
		})
		g := mustGate(t, governance.GateConfig{Policy: policy, Limits: governance.Limits{MaxCostUnits: 10}})
		run := g.NewRun("r")
		tl := newTool()
		if out, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); err != nil || out.Call.Cost != 6 {
			t.Fatalf("err %v cost %d", err, out.Call.Cost)
		}
		if _, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrBudgetExceeded) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("custom budget refuses before the call", func(t *testing.T) {
		var settled []governance.CallReport
		var mu sync.Mutex
		spent := 0
		g := mustGate(t, governance.GateConfig{
			Policy: governance.AllowAllPolicy{},
			NewBudget: func(runID string) governance.Budget {
				return governance.BudgetFunc(func(_ context.Context, c governance.Call) (func(governance.CallReport), error) {
					mu.Lock()
					defer mu.Unlock()
					if spent >= 1 {
						return nil, errors.New("tenant out of credit")
					}
					spent++
					return func(r governance.CallReport) { mu.Lock(); settled = append(settled, r); mu.Unlock() }, nil
				})
			},
		})
		run := g.NewRun("r")
		tl := newTool()
		if _, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); err != nil {
			t.Fatal(err)
		}
		_, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn)
		if !errors.Is(err, governance.ErrBudgetExceeded) || !strings.Contains(err.Error(), "tenant out of credit") {
			t.Fatalf("err = %v", err)
		}
		if tl.runs.Load() != 1 {
			t.Fatalf("tool ran %d times", tl.runs.Load())
		}
		if len(settled) != 1 || !settled[0].Ran || settled[0].ResultSize != len(tl.result) {
			t.Fatalf("settled = %+v", settled)
		}
	})

	t.Run("refund when approval denies", func(t *testing.T) {
		var refunds atomic.Int64
		g := mustGate(t, governance.GateConfig{
			Policy:   governance.PolicyFunc(needsApproval),
			Approver: governance.DenyAll{},
			Limits:   governance.Limits{ToolCaps: map[string]int64{"pay": 1}, MaxIrreversible: 1},
			NewBudget: func(string) governance.Budget {
				return governance.BudgetFunc(func(context.Context, governance.Call) (func(governance.CallReport), error) {
					return func(r governance.CallReport) {
						if !r.Ran {
							refunds.Add(1)
						}
					}, nil
				})
			},
		})
		run := g.NewRun("r")
		tl := newTool()
		for i := 0; i < 3; i++ {
			// Each denial refunds, so the cap of 1 is never reached: the error stays ErrApprovalDenied.
			if _, err := run.Do(context.Background(), call("pay", governance.Irreversible), tl.fn); !errors.Is(err, governance.ErrApprovalDenied) {
				t.Fatalf("call %d: err = %v", i, err)
			}
		}
		if refunds.Load() != 3 || run.Usage().Irreversible != 0 || run.Usage().PerTool["pay"] != 0 {
			t.Fatalf("refunds %d, usage %+v", refunds.Load(), run.Usage())
		}
	})

	t.Run("budget before approval", func(t *testing.T) {
		asked := atomic.Int64{}
		g := mustGate(t, governance.GateConfig{
			Policy: governance.PolicyFunc(needsApproval),
			Approver: governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
				asked.Add(1)
				return governance.Decision{Allow: true}, nil
			}),
			Limits: governance.Limits{ToolCaps: map[string]int64{"pay": 1}},
		})
		run := g.NewRun("r")
		tl := newTool()
		run.Do(context.Background(), call("pay", governance.Irreversible), tl.fn)
		if _, err := run.Do(context.Background(), call("pay", governance.Irreversible), tl.fn); !errors.Is(err, governance.ErrBudgetExceeded) {
			t.Fatalf("err = %v", err)
		}
		if asked.Load() != 1 {
			t.Fatalf("approver asked %d times; an over-budget call must not reach the approver", asked.Load())
		}
	})
}

func TestIrreversibleCap(t *testing.T) {
	g := mustGate(t, governance.GateConfig{
		Policy:   governance.AllowAllPolicy{},
		Approver: governance.AllowAll{},
		Limits:   governance.Limits{MaxIrreversible: 2},
	})
	run := g.NewRun("r")
	tl := newTool()
	do := func(e governance.Effect) error {
		_, err := run.Do(context.Background(), call("act", e), tl.fn)
		return err
	}
	if err := do(governance.Irreversible); err != nil {
		t.Fatal(err)
	}
	if err := do(governance.EffectUnspecified); err != nil { // unmarked counts as irreversible
		t.Fatal(err)
	}
	if err := do(governance.ReadOnly); err != nil { // does not count
		t.Fatal(err)
	}
	if err := do(governance.Mutating); err != nil {
		t.Fatal(err)
	}
	for _, e := range []governance.Effect{governance.Irreversible, governance.EffectUnspecified} {
		if err := do(e); !errors.Is(err, governance.ErrBudgetExceeded) {
			t.Fatalf("%v: err = %v, want ErrBudgetExceeded", e, err)
		}
	}
	if tl.runs.Load() != 4 || run.Usage().Irreversible != 2 {
		t.Fatalf("runs %d, usage %+v", tl.runs.Load(), run.Usage())
	}

	none := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Limits: governance.Limits{MaxIrreversible: -1}})
	if _, err := none.NewRun("r").Do(context.Background(), call("act", governance.Irreversible), tl.fn); !errors.Is(err, governance.ErrBudgetExceeded) {
		t.Fatalf("MaxIrreversible -1: err = %v", err)
	}
}

func TestAuditSinkFailureToolDoesNotRun(t *testing.T) {
	sinkErr := errors.New("disk full")
	t.Run("failing auditor", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{Err: sinkErr}})
		tl := newTool()
		out, err := g.NewRun("r").Do(context.Background(), call("search", governance.ReadOnly), tl.fn)
		if !errors.Is(err, governance.ErrAudit) || !errors.Is(err, sinkErr) {
			t.Fatalf("err = %v, want ErrAudit wrapping the sink error", err)
		}
		if tl.runs.Load() != 0 {
			t.Fatal("tool ran although its allowed record was not written")
		}
		if out.Status != governance.StatusDenied || out.AuditErr == nil {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("panicking auditor", func(t *testing.T) {
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.AuditorFunc(func(context.Context, governance.Record) error {
			panic("auditor bug")
		})})
		tl := newTool()
		if _, err := g.NewRun("r").Do(context.Background(), call("search", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrAudit) {
			t.Fatalf("err = %v", err)
		}
		if tl.runs.Load() != 0 {
			t.Fatal("tool ran")
		}
	})
	t.Run("failing JSONL writer is sticky", func(t *testing.T) {
		w := &flakyWriter{failAfter: 1}
		a, err := governance.NewJSONLAuditor(w, governance.JSONLConfig{})
		if err != nil {
			t.Fatal(err)
		}
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: a})
		run := g.NewRun("r")
		tl := newTool()
		// Record 1 (allowed) succeeds, record 2 (outcome) fails: the call ran, its result is returned.
		out, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn)
		if err != nil || out.AuditErr == nil || !errors.Is(out.AuditErr, governance.ErrAudit) {
			t.Fatalf("err %v, AuditErr %v", err, out.AuditErr)
		}
		// From now on nothing runs, even though the writer would work again.
		w.failAfter = 100
		if _, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrAudit) {
			t.Fatalf("err = %v, want ErrAudit after a failed write", err)
		}
		if tl.runs.Load() != 1 {
			t.Fatalf("tool ran %d times", tl.runs.Load())
		}
	})
}

type flakyWriter struct {
	n, failAfter int
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n > w.failAfter {
		return 0, errors.New("I/O error")
	}
	return len(p), nil
}

func TestPanickingToolBecomesError(t *testing.T) {
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit})
	run := g.NewRun("r")
	panicky := func(context.Context, governance.Call) ([]byte, error) { panic("index out of range in tool") }
	out, err := run.Do(context.Background(), call("crashy", governance.ReadOnly), panicky)
	if !errors.Is(err, governance.ErrToolPanic) || !errors.Is(err, governance.ErrToolFailed) {
		t.Fatalf("err = %v, want ErrToolPanic", err)
	}
	var te *governance.ToolError
	if !errors.As(err, &te) || te.Tool != "crashy" || te.Panic != "index out of range in tool" || len(te.Stack) == 0 || te.Seq != 1 {
		t.Fatalf("ToolError = %+v", te)
	}
	if !strings.HasPrefix(err.Error(), `governance: tool "crashy" panicked: index out of range`) {
		t.Fatalf("message %q", err.Error())
	}
	if out.Status != governance.StatusFailed {
		t.Fatalf("status %q", out.Status)
	}
	var nilMap map[string]int
	_, err = run.Do(context.Background(), call("crashy2", governance.ReadOnly), func(context.Context, governance.Call) ([]byte, error) {
		nilMap["x"] = 1 // a runtime error panic
		return nil, nil
	})
	if !errors.Is(err, governance.ErrToolPanic) || !errors.As(err, &te) || te.Err == nil {
		t.Fatalf("runtime panic: err = %v", err)
	}
	// The gate keeps working.
	tl := newTool()
	if out, err := run.Do(context.Background(), call("search", governance.ReadOnly), tl.fn); err != nil || string(out.Result) != tl.result {
		t.Fatalf("after a panic: %v", err)
	}
	recs := audit.RunRecords("r")
	if len(recs) != 6 || recs[1].Outcome != governance.StatusFailed || !strings.Contains(recs[1].Error, "panicked") {
		t.Fatalf("records = %+v", recs)
	}
}

func TestToolErrorKeepsMessage(t *testing.T) {
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit})
	cause := fmt.Errorf("mailbox %q is full", "bob")
	tl := &tool{err: cause}
	_, err := g.NewRun("r").Do(context.Background(), call("send", governance.ReadOnly), tl.fn)
	if !errors.Is(err, governance.ErrToolFailed) || errors.Is(err, governance.ErrToolPanic) || !errors.Is(err, cause) {
		t.Fatalf("err = %v", err)
	}
	if want := `governance: tool "send" failed: mailbox "bob" is full`; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	if recs := audit.Records(); recs[1].Error != err.Error() || recs[1].Outcome != governance.StatusFailed {
		t.Fatalf("record %+v", recs[1])
	}

	// A tool that fails because a deadline passed still satisfies errors.Is(err, context.DeadlineExceeded).
	_, err = g.NewRun("r2").Do(context.Background(), call("slow", governance.ReadOnly), func(ctx context.Context, _ governance.Call) ([]byte, error) {
		return nil, fmt.Errorf("upstream: %w", context.DeadlineExceeded)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, governance.ErrToolFailed) {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelledContextDoesNotRunTool(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl := newTool()
	_, err := g.NewRun("r").Do(ctx, call("search", governance.ReadOnly), tl.fn)
	if !errors.Is(err, context.Canceled) || tl.runs.Load() != 0 {
		t.Fatalf("err = %v, runs = %d", err, tl.runs.Load())
	}
	if !strings.HasPrefix(err.Error(), "governance: ") {
		t.Fatalf("message %q lacks the prefix", err)
	}
}

func TestInvalidCallsAreDenied(t *testing.T) {
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit, MaxArgsBytes: 64})
	tl := newTool()
	for _, tc := range []struct {
		name string
		c    governance.Call
		fn   governance.ToolFunc
	}{
		{"empty tool", governance.Call{}, tl.fn},
		{"invalid JSON", governance.Call{Tool: "t", Args: json.RawMessage(`{"a":`)}, tl.fn},
		{"huge args", governance.Call{Tool: "t", Args: json.RawMessage(`"` + strings.Repeat("a", 100) + `"`)}, tl.fn},
		{"unknown source", governance.Call{Tool: "t", Source: "browser"}, tl.fn},
		{"negative cost", governance.Call{Tool: "t", Cost: -1}, tl.fn},
		{"control chars", governance.Call{Tool: "t\x1b[2J"}, tl.fn},
		{"invalid UTF-8", governance.Call{Tool: "t\xff"}, tl.fn},
		{"long name", governance.Call{Tool: strings.Repeat("n", 300)}, tl.fn},
		{"invalid effect", governance.Call{Tool: "t", Effect: 9}, tl.fn},
		{"nil tool", governance.Call{Tool: "t"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit.Reset()
			_, err := g.NewRun("r").Do(context.Background(), tc.c, tc.fn)
			if !errors.Is(err, governance.ErrInvalidCall) {
				t.Fatalf("err = %v, want ErrInvalidCall", err)
			}
			recs := audit.Records()
			if len(recs) != 1 || recs[0].Outcome != governance.StatusDenied || recs[0].Args != nil {
				t.Fatalf("records = %+v", recs)
			}
		})
	}
	if tl.runs.Load() != 0 {
		t.Fatal("tool ran")
	}
}

func TestRunAssignsIdentity(t *testing.T) {
	audit := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit})
	run := g.NewRun("")
	if !strings.HasPrefix(run.ID(), "run-") {
		t.Fatalf("generated id %q", run.ID())
	}
	var seen []int64
	forged := call("search", governance.ReadOnly)
	forged.RunID, forged.Seq = "someone-else", 999
	for i := 0; i < 3; i++ {
		out, err := run.Do(context.Background(), forged, func(_ context.Context, c governance.Call) ([]byte, error) {
			seen = append(seen, c.Seq)
			if c.RunID != run.ID() {
				t.Errorf("tool saw run %q", c.RunID)
			}
			return nil, nil
		})
		if err != nil || out.Call.RunID != run.ID() {
			t.Fatal(err, out.Call.RunID)
		}
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("seqs %v", seen)
	}
	if len(audit.RunRecords("someone-else")) != 0 || len(audit.RunRecords(run.ID())) != 6 {
		t.Fatal("records carry a forged run id")
	}
}

func TestPanicsInPluggablePartsDoNotCrash(t *testing.T) {
	tl := newTool()
	g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(func(context.Context, governance.Call) (governance.Verdict, error) {
		panic("policy bug")
	})})
	if _, err := g.NewRun("r").Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrDenied) {
		t.Fatalf("panicking policy: %v", err)
	}
	g = mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, NewBudget: func(string) governance.Budget {
		return governance.BudgetFunc(func(context.Context, governance.Call) (func(governance.CallReport), error) { panic("budget bug") })
	}})
	if _, err := g.NewRun("r").Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrBudgetExceeded) {
		t.Fatalf("panicking budget: %v", err)
	}
	audit := &governance.MemoryAuditor{}
	g = mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit, Redact: func(string, json.RawMessage) json.RawMessage {
		panic("redactor bug")
	}})
	if _, err := g.NewRun("r").Do(context.Background(), call("x", governance.ReadOnly), tl.fn); err != nil {
		t.Fatalf("panicking redactor: %v", err)
	}
	if recs := audit.Records(); string(recs[0].Args) != `"[redaction failed]"` {
		t.Fatalf("args logged as %s", recs[0].Args)
	}
	if tl.runs.Load() != 1 {
		t.Fatalf("runs = %d", tl.runs.Load())
	}
}

func TestConcurrentRunsHaveSeparateBudgets(t *testing.T) {
	const runs, workers, perWorker, limit = 8, 3, 15, 25
	var logBuf strings.Builder
	audit, err := governance.NewJSONLAuditor(&logBuf, governance.JSONLConfig{Key: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	mem := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{
		Policy:   governance.AllowAllPolicy{},
		Approver: governance.AllowAll{},
		Limits:   governance.Limits{MaxToolCalls: limit, ToolCaps: map[string]int64{"capped": 5}, MaxCostUnits: 1000},
		Auditor:  governance.MultiAuditor(audit, mem),
	})
	var wg sync.WaitGroup
	ran := make([]atomic.Int64, runs)
	for r := 0; r < runs; r++ {
		run := g.NewRun(fmt.Sprintf("run-%d", r))
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWorker; i++ {
					name := "search"
					if i%2 == 0 {
						name = "capped"
					}
					c := call(name, governance.Effect(1+i%3))
					c.Cost = 1
					run.Do(context.Background(), c, func(context.Context, governance.Call) ([]byte, error) {
						ran[r].Add(1)
						return []byte("r"), nil
					})
				}
			}()
		}
	}
	wg.Wait()
	total := 0
	for r := range ran {
		n := ran[r].Load()
		// 45 attempts, 25 pass the cap; of those, "capped" calls beyond 5 are refused by the per-tool cap.
		if n > limit || n < limit-15 {
			t.Errorf("run %d: tool ran %d times, want at most %d", r, n, limit)
		}
		recs := mem.RunRecords(fmt.Sprintf("run-%d", r))
		allowed := 0
		capped := 0
		for _, rec := range recs {
			if rec.Outcome == governance.StatusOK {
				allowed++
				if rec.Tool == "capped" {
					capped++
				}
			}
		}
		limited := 0
		for _, rec := range recs {
			if rec.Outcome == governance.StatusDenied && strings.HasPrefix(rec.Error, governance.ErrToolLimit.Error()) {
				limited++
			}
		}
		if limited != workers*perWorker-limit {
			t.Errorf("run %d: %d calls stopped by max_tool_calls, want exactly %d", r, limited, workers*perWorker-limit)
		}
		if int64(allowed) != n || capped > 5 {
			t.Errorf("run %d: %d ok records (%d capped) for %d runs", r, allowed, capped, n)
		}
		if len(recs) != workers*perWorker+int(n) {
			t.Errorf("run %d: %d records, want %d", r, len(recs), workers*perWorker+int(n))
		}
		total += len(recs)
	}
	rep, err := governance.Verify(strings.NewReader(logBuf.String()), []byte("0123456789abcdef"))
	if err != nil || rep.Records != total {
		t.Fatalf("Verify: %v, %d records, want %d", err, rep.Records, total)
	}
}

// The two records of a call and its Outcome tell one consistent story of time: the outcome record comes after
// the "allowed" one by at least the tool's duration, which is at least how long the tool really ran, on the
// caller's goroutine and on the run's worker alike.
func TestCallTimesAreConsistent(t *testing.T) {
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		audit := &governance.MemoryAuditor{}
		g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit})
		before := time.Now()
		out, err := g.NewRun("r").Do(ctx, call("nap", governance.ReadOnly), func(context.Context, governance.Call) ([]byte, error) {
			time.Sleep(20 * time.Millisecond)
			return []byte(`1`), nil
		})
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		recs := audit.Records()
		if len(recs) != 2 {
			t.Fatalf("%d records", len(recs))
		}
		allowed, done := recs[0], recs[1]
		if out.Duration < 20*time.Millisecond || done.Duration != out.Duration {
			t.Fatalf("Outcome.Duration %v, record's %v; the tool slept 20ms", out.Duration, done.Duration)
		}
		if allowed.Time.Before(before.Add(-time.Second)) || done.Time.After(after.Add(time.Second)) {
			t.Fatalf("record times %v, %v outside the call [%v, %v]", allowed.Time, done.Time, before, after)
		}
		if gap := done.Time.Sub(allowed.Time); gap < out.Duration {
			t.Fatalf("outcome record %v after the allowed one, less than the tool's %v", gap, out.Duration)
		}
		if done.Time.Location() != time.UTC || allowed.Time.Location() != time.UTC {
			t.Fatalf("record times not in UTC: %v, %v", allowed.Time, done.Time)
		}
	}
}

// unhashableCtx is a context whose type cannot be compared: comparing two of them in interfaces panics.
type unhashableCtx struct {
	context.Context
	tags []string
}

// The gate keeps the audit context of the last call's context to reuse it; a context of a type that cannot be
// compared must still work, call after call, and each call's records must carry its own context's values.
func TestAuditContextOfUncomparableContext(t *testing.T) {
	type key struct{}
	var seen []any
	aud := governance.AuditorFunc(func(ctx context.Context, rec governance.Record) error {
		seen = append(seen, ctx.Value(key{}))
		return nil
	})
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud})
	run := g.NewRun("")
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		ctx := unhashableCtx{Context: context.WithValue(parent, key{}, i), tags: []string{"t"}}
		if _, err := run.Do(ctx, call("x", governance.ReadOnly), newTool().fn); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(seen) != "[0 0 1 1 2 2]" {
		t.Fatalf("the records saw the values %v, want each call's own twice", seen)
	}
}
