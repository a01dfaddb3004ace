package governance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

// Tests that mutation testing showed missing: each fails if the guard it names is removed or shifted.

// An audit failure is a denial: it counts against MaxDeniedCalls, so a run whose log is down floods instead of
// retrying without end.
func TestAuditFailureCountsAsDenial(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{},
		Auditor: &governance.MemoryAuditor{Err: errors.New("disk full")}, Limits: governance.Limits{MaxDeniedCalls: 2}})
	run := g.NewRun("r")
	tl := newTool()
	for i := 0; i < 2; i++ {
		if _, err := run.Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrAudit) {
			t.Fatalf("call %d: %v, want ErrAudit", i, err)
		}
	}
	if u := run.Usage(); u.Denied != 2 || !run.Flooded() {
		t.Fatalf("after two audit failures: usage %+v, flooded %v", u, run.Flooded())
	}
	if _, err := run.Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrCallFlood) {
		t.Fatalf("third call: %v, want ErrCallFlood", err)
	}
	if tl.runs.Load() != 0 {
		t.Fatalf("the tool ran %d times without its audit record", tl.runs.Load())
	}
}

// A negative MaxDeniedCalls means 1: the first denial is an ordinary one and floods the run; the next call is
// refused as a flood.
func TestNegativeMaxDeniedCallsIsOne(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Limits: governance.Limits{MaxDeniedCalls: -5}}) // no policy: denied
	run := g.NewRun("r")
	tl := newTool()
	_, err := run.Do(context.Background(), call("x", governance.ReadOnly), tl.fn)
	if err == nil || errors.Is(err, governance.ErrCallFlood) {
		t.Fatalf("first call: %v, want an ordinary denial", err)
	}
	if !run.Flooded() {
		t.Fatal("not flooded after the first denial")
	}
	if _, err := run.Do(context.Background(), call("x", governance.ReadOnly), tl.fn); !errors.Is(err, governance.ErrCallFlood) {
		t.Fatalf("second call: %v, want ErrCallFlood", err)
	}
}

// Tool names: every control byte is refused, at the edges of the ranges too (0x1f, 0x7f, C1 after other
// non-ASCII), while their printable neighbours (space, ~) pass.
func TestToolNameControlEdges(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}})
	tl := newTool()
	for _, name := range []string{"a\x1fb", "a\x7fb", "a\x00", "é\x1fb", "é\u0085b", "\u009b2J"} {
		_, err := g.NewRun("r").Do(context.Background(), call(name, governance.ReadOnly), tl.fn)
		if de := asDenied(t, err); de == nil || !errors.Is(err, governance.ErrInvalidCall) {
			t.Errorf("%q: %v, want ErrInvalidCall", name, err)
		}
	}
	for _, name := range []string{"a b", "a~b", "é b"} {
		if _, err := g.NewRun("r").Do(context.Background(), call(name, governance.ReadOnly), tl.fn); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if tl.runs.Load() != 3 {
		t.Errorf("the tool ran %d times, want 3", tl.runs.Load())
	}
}
