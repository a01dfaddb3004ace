package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// An agent's durable task pauses at the refund that needs approval; another "process" (a new agent over the
// same store, with a model that has only the turns still to come) resumes it: the model's earlier replies and
// the lookup come from the task's records, the refund runs once, and the task answers.
func TestAgentTaskPausesAndResumes(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	newGate := func() *governance.Gate {
		g, err := governance.NewGate(governance.GateConfig{Policy: governance.EffectPolicy{}, Auditor: governance.DiscardAuditor{}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	step1 := py(`o = get_order(order_id="A-1001")
print("amount", o["amount"])`)
	step2 := py(`print(issue_refund(order_id="A-1001", amount=5.0))`)
	step3 := py(`final_answer("refunded")`)

	gate := newGate()
	model := agenttest.New(t, step1, step2)
	a, s := newAgentCfg(t, model, wasmbox.Config{Gate: gate, Deterministic: true})
	res, err := a.StartTask(ctx, nil, "Refund 5 on A-1001.", wasmbox.TaskOptions{ID: "agent-1"})
	if !errors.Is(err, wasmbox.ErrPaused) || res.Stop != agent.StopPaused || res.Paused == nil || res.Paused.Tool != "issue_refund" {
		t.Fatalf("StartTask = %v (stop %q, paused %+v); want a pause at issue_refund", err, res.Stop, res.Paused)
	}
	if len(s.refunds) != 0 || model.Calls() != 2 {
		t.Fatalf("before the decision: %d refunds, %d model turns", len(s.refunds), model.Calls())
	}
	// Still waiting: the resume says so and asks the model nothing.
	b0model := agenttest.New(t)
	b0, _ := newAgentCfg(t, b0model, wasmbox.Config{Gate: newGate(), Deterministic: true})
	if res, err := b0.ResumeTask(ctx, "agent-1", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrPaused) || res.Paused == nil {
		t.Fatalf("ResumeTask before a decision = %v", err)
	}
	if err := gate.Decide(ctx, "agent-1", res.Paused.Seq, governance.TaskDecision{Allow: true, DecidedBy: "approver:test"}); err != nil {
		t.Fatal(err)
	}
	bmodel := agenttest.New(t, step3) // only the turn the first process never reached
	b, bs := newAgentCfg(t, bmodel, wasmbox.Config{Gate: newGate(), Deterministic: true})
	res, err = b.ResumeTask(ctx, "agent-1", wasmbox.TaskOptions{})
	if err != nil {
		t.Fatalf("ResumeTask: %v", err)
	}
	if res.Answer != "refunded" || res.TaskID != "agent-1" || len(bs.refunds) != 1 || bmodel.Calls() != 1 {
		t.Fatalf("resumed: answer %v, %d refunds, %d new model turns; want refunded, 1, 1", res.Answer, len(bs.refunds), bmodel.Calls())
	}
	info, err := gate.TaskInfo(ctx, "agent-1")
	if err != nil || info.State != governance.TaskDone {
		t.Fatalf("TaskInfo = %+v, %v", info, err)
	}
	if _, err := gate.VerifyTask(ctx, "agent-1"); err != nil {
		t.Fatal(err)
	}
	// Another configuration of the agent cannot resume an agent's task.
	c, _ := newAgentCfg(t, agenttest.New(t), wasmbox.Config{Gate: newGate(), Deterministic: true}, agent.WithInstructions("be terse"))
	if _, err := c.ResumeTask(ctx, "agent-1", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTaskEnded) && !errors.Is(err, governance.ErrTaskMismatch) {
		t.Fatalf("ResumeTask by another agent configuration = %v", err)
	}
}
