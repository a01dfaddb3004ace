package wasmbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// A Session's Execs share one governance run: MaxToolCalls 2 allows exactly two lookups over three Execs, all
// under one run id with sequence numbers 1, 2, 3 (the third denied).
func TestSessionSharesOneBudget(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	g, aud := gate(t, governance.GateConfig{Limits: governance.Limits{MaxToolCalls: 2}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	ctx := context.Background()
	se, err := sb.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	var runIDs []string
	for i := range 3 {
		res, err := se.Exec(ctx, `import tools
try:
    tools.get_order("A-1"); print("ok")
except tools.ToolLimitExceeded:
    print("limit")`)
		if err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		want := "ok\n"
		if i == 2 {
			want = "limit\n"
		}
		if res.Stdout != want {
			t.Fatalf("exec %d printed %q, want %q", i, res.Stdout, want)
		}
		runIDs = append(runIDs, res.RunID)
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("the tool ran %d times under MaxToolCalls 2, want 2", n)
	}
	if runIDs[0] != runIDs[1] || runIDs[1] != runIDs[2] || runIDs[0] != se.GovernanceRun().ID() {
		t.Fatalf("run ids differ across Execs of one Session: %v (session %s)", runIDs, se.GovernanceRun().ID())
	}
	var seqs []int64
	for _, r := range aud.Records() {
		if r.Outcome != governance.StatusAllowed {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("final audit records have sequence numbers %v, want [1 2 3]", seqs)
	}
}

// A caller can give several programs one run explicitly: two fresh Runs share MaxIrreversible 1.
func TestProgramGovernanceSpansRuns(t *testing.T) {
	reg, _, refunds := toolSet(t)
	g, _ := gate(t, governance.GateConfig{Limits: governance.Limits{MaxIrreversible: 1}, Approver: governance.AllowAll{}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	task := sb.Gate().NewRun("")
	for range 2 {
		if _, err := sb.RunProgram(context.Background(), wasmbox.Program{Governance: task, Code: `import tools
try:
    tools.issue_refund("A-1", 5)
except tools.BudgetExceeded:
    pass`}); err != nil {
			t.Fatal(err)
		}
	}
	if n := refunds.Load(); n != 1 {
		t.Fatalf("%d refunds under MaxIrreversible 1 across one task's programs, want 1", n)
	}
}

// A run of another gate would escape this Sandbox's policy and audit log: it is refused before anything runs.
func TestProgramGovernanceFromAnotherGateRefused(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	mine, _ := gate(t, governance.GateConfig{})
	other, _ := gate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: mine})
	_, err := sb.RunProgram(context.Background(), wasmbox.Program{Governance: other.NewRun(""), Code: "import tools\ntools.get_order('A-1')"})
	if !errors.Is(err, wasmbox.ErrInvalidConfig) || lookups.Load() != 0 {
		t.Fatalf("err %v, %d lookups; want ErrInvalidConfig and no call", err, lookups.Load())
	}
}
