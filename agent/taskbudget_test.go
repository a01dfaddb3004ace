package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// refundGate allows everything, approves everything, and allows one irreversible call per run.
func refundGate(t *testing.T, limits governance.Limits) (*governance.Gate, *governance.MemoryAuditor) {
	t.Helper()
	aud := &governance.MemoryAuditor{}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.EffectPolicy{}, Approver: governance.AllowAll{},
		Auditor: aud, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return g, aud
}

// refundStep refunds one order and prints what happened, as a model that refunds one order per step would.
func refundStep(id string) string {
	return py(`try:
    issue_refund(order_id="` + id + `", amount=5.0)
    print("refunded ` + id + `")
except tools.ToolDenied as e:
    print("refused ` + id + `:", type(e).__name__)`)
}

// One Run is one task: a model that refunds in three steps under MaxIrreversible 1 issues exactly one refund,
// and every record of the task carries the Run's id with one sequence.
func TestRunSharesOneBudget(t *testing.T) {
	gate, aud := refundGate(t, governance.Limits{MaxIrreversible: 1})
	model := agenttest.New(t, refundStep("A-1001"), refundStep("A-1002"), refundStep("A-1003"), py(`final_answer("done")`))
	var eventRuns []string
	a, s := newAgentCfg(t, model, wasmbox.Config{Gate: gate}, agent.WithEventHandler(func(e agent.Event) {
		if e.Kind == agent.EventToolCall {
			eventRuns = append(eventRuns, e.RunID)
		}
	}))
	res, err := run(t, a, "Refund 5 on A-1001, A-1002 and A-1003, one per program.")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.refunds) != 1 {
		t.Fatalf("%d refunds under MaxIrreversible 1 in one task: %v", len(s.refunds), s.refunds)
	}
	if got := res.Steps[1].Stdout + res.Steps[2].Stdout; got != "refused A-1002: BudgetExceeded\nrefused A-1003: BudgetExceeded\n" {
		t.Errorf("steps 2 and 3 printed %q", got)
	}
	if res.RunID == "" || res.Stop != agent.StopAnswered {
		t.Errorf("run id %q, stop %q", res.RunID, res.Stop)
	}
	var seqs []int64
	for _, r := range aud.Records() {
		if r.RunID != res.RunID {
			t.Errorf("record %s #%d is of run %q, not the task's run %q", r.Tool, r.Seq, r.RunID, res.RunID)
		}
		if r.Outcome != governance.StatusAllowed {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Errorf("final records have sequence numbers %v, want [1 2 3]", seqs)
	}
	if len(eventRuns) != 3 || eventRuns[0] != res.RunID || eventRuns[2] != res.RunID {
		t.Errorf("tool-call events carry run ids %v, want %s", eventRuns, res.RunID)
	}
}

// A caller can span several Runs (one conversation) with one run; without it every Run starts afresh.
func TestWithGovernanceRunSpansRuns(t *testing.T) {
	gate, _ := refundGate(t, governance.Limits{MaxIrreversible: 1})
	task := gate.NewRun("conversation-1")
	model := agenttest.New(t, refundStep("A-1001"), py(`final_answer(1)`), refundStep("A-1002"), py(`final_answer(2)`))
	a, s := newAgentCfg(t, model, wasmbox.Config{Gate: gate}, agent.WithGovernanceRun(task))
	for range 2 {
		res, err := run(t, a, "Refund the next order.")
		if err != nil {
			t.Fatal(err)
		}
		if res.RunID != "conversation-1" {
			t.Errorf("run id %q", res.RunID)
		}
	}
	if len(s.refunds) != 1 {
		t.Fatalf("%d refunds over two Runs of one governance run under MaxIrreversible 1", len(s.refunds))
	}
	if u := task.Usage(); u.Calls != 2 || u.Irreversible != 1 {
		t.Errorf("usage %+v", u)
	}

	// Two Runs without the option are two tasks.
	model = agenttest.New(t, refundStep("A-1001"), py(`final_answer(1)`), refundStep("A-1002"), py(`final_answer(2)`))
	a, s = newAgentCfg(t, model, wasmbox.Config{Gate: gate})
	r1, _ := run(t, a, "Refund the next order.")
	r2, _ := run(t, a, "Refund the next order.")
	if len(s.refunds) != 2 || r1.RunID == r2.RunID {
		t.Errorf("%d refunds, run ids %q %q", len(s.refunds), r1.RunID, r2.RunID)
	}
}

// The Toolkit's direct calls and the tool calls of the code it executes count against one run: under
// MaxToolCalls 4, list_files, execute (one call, plus two from its code) use up the budget.
func TestToolkitSharesOneBudget(t *testing.T) {
	gate, aud := refundGate(t, governance.Limits{MaxToolCalls: 4, MaxIrreversible: 1})
	k := newToolkit(t, gate)
	call(t, k, "list_files", "")
	got := call(t, k, "execute", `for i in ("A-1001", "A-1002"):
    try:
        issue_refund(order_id=i, amount=1.0); print("refunded", i)
    except tools.ToolDenied as e:
        print("refused", i, type(e).__name__)`)
	if !strings.Contains(got, "refunded A-1001\nrefused A-1002 BudgetExceeded\n") {
		t.Errorf("execute: %q", got)
	}
	if got := call(t, k, "list_files", ""); !strings.Contains(got, "ToolLimitExceeded") {
		t.Errorf("fifth call under MaxToolCalls 4: %q", got)
	}
	for _, r := range aud.Records() {
		if r.RunID != k.GovernanceRun().ID() {
			t.Errorf("record %s #%d is of run %q, not the Toolkit's", r.Tool, r.Seq, r.RunID)
		}
	}
	if k.GovernanceRun() != k.Session().GovernanceRun() {
		t.Errorf("the Toolkit's run is not its session's")
	}
}

// A Toolkit and an agent Run given one run share its budget (code-action programs and sandbox tools alike).
func TestToolkitAndRunShareBudget(t *testing.T) {
	gate, _ := refundGate(t, governance.Limits{MaxIrreversible: 1})
	task := gate.NewRun("")
	model := agenttest.New(t, refundStep("A-1001"), py(`final_answer(1)`))
	a, s := newAgentCfg(t, model, wasmbox.Config{Gate: gate}, agent.WithGovernanceRun(task))
	if _, err := run(t, a, "Refund."); err != nil {
		t.Fatal(err)
	}
	k, err := a.NewToolkit(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	if k.GovernanceRun() != task {
		t.Fatalf("the agent's Toolkit does not use WithGovernanceRun's run")
	}
	got := call(t, k, "execute", `issue_refund(order_id="A-1002", amount=1.0)`)
	if !strings.Contains(got, "BudgetExceeded") || len(s.refunds) != 1 {
		t.Errorf("refunds %v; execute: %q", s.refunds, got)
	}
}

// The tool-call budget of the whole Run stops a model that never answers: once max_tool_calls is reached the
// model is told so and gets one last step; the strict scripted model fails the test if asked again.
func TestRunStopsAtToolBudget(t *testing.T) {
	gate, _ := refundGate(t, governance.Limits{MaxToolCalls: 5})
	loop := "for _ in range(3):\n    list_orders()\nprint('step', %d)"
	model := agenttest.New(t,
		py(strings.Replace(loop, "%d", "1", 1)),
		py(strings.Replace(loop, "%d", "2", 1)), // the fifth call is the last; the sixth is refused
		py("print(get_order(order_id='A-1001'))"),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Gate: gate})
	res, err := run(t, a, "Keep looking.")
	if !errors.Is(err, agent.ErrToolBudget) || !errors.Is(err, wasmbox.ErrToolLimit) || res.Stop != agent.StopToolBudget {
		t.Fatalf("error %v, stop %q", err, res.Stop)
	}
	if !strings.Contains(res.Steps[1].Observation, "used up its tool calls") {
		t.Errorf("the model was not told:\n%s", res.Steps[1].Observation)
	}
	ran := 0
	for _, c := range res.ToolCalls {
		if c.Status == "ok" {
			ran++
		}
	}
	if ran != 5 || len(res.Steps) != 3 {
		t.Errorf("%d tool calls ran over %d steps, want 5 over 3", ran, len(res.Steps))
	}
}

// The step after the budget ran out may still answer.
func TestToolBudgetLastChanceAnswers(t *testing.T) {
	gate, _ := refundGate(t, governance.Limits{MaxToolCalls: 1})
	model := agenttest.New(t,
		py("ids = list_orders()\nn = len(list_orders())"),
		py("final_answer(len(ids))"),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Gate: gate})
	res, err := run(t, a, "Count.")
	if err != nil || res.Answer != 4.0 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
}

// The budget survives a restarted interpreter: after a program is killed at its time limit the agent starts a
// new session, and the task's run goes on.
func TestRunBudgetSurvivesRestart(t *testing.T) {
	gate, aud := refundGate(t, governance.Limits{MaxIrreversible: 1})
	model := agenttest.New(t, refundStep("A-1001"),
		py("while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"), // swallows the interrupt: killed
		refundStep("A-1002"), py(`final_answer("done")`))
	a, s := newAgentCfg(t, model, wasmbox.Config{Gate: gate, Timeout: time.Second})
	res, err := run(t, a, "Refund A-1001 and A-1002.")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Steps[1].Observation, "interpreter was restarted") {
		t.Fatalf("no restart:\n%s", res.Steps[1].Observation)
	}
	if len(s.refunds) != 1 || res.Steps[2].Stdout != "refused A-1002: BudgetExceeded\n" {
		t.Fatalf("refunds %v; step 3 printed %q", s.refunds, res.Steps[2].Stdout)
	}
	for _, r := range aud.Records() {
		if r.RunID != res.RunID {
			t.Errorf("record of run %q in the task of run %q", r.RunID, res.RunID)
		}
	}
}
