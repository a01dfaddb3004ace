package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/escalate"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// toolCallingBackend plays the container's side of the tool socket: it makes n tool calls through the job's
// handler, as a program in the container would, and records what each got. (The real engine path is
// TestEscalationInContainer; this one checks the budget the handler is wired to.)
type toolCallingBackend struct {
	n       int
	mu      sync.Mutex
	ok      int
	refused []string
}

func (b *toolCallingBackend) Run(ctx context.Context, job escalate.Job) (*escalate.Result, error) {
	if job.Tools == nil {
		return nil, errors.New("toolCallingBackend: the job has no tool handler")
	}
	for i := 0; i < b.n; i++ {
		_, err := job.Tools(ctx, "list_orders", json.RawMessage(`{}`))
		b.mu.Lock()
		var te *escalate.ToolError
		switch {
		case err == nil:
			b.ok++
		case errors.As(err, &te):
			b.refused = append(b.refused, te.Type)
		default:
			b.refused = append(b.refused, err.Error())
		}
		b.mu.Unlock()
	}
	return &escalate.Result{ExitCode: 0, Stdout: "done\n"}, nil
}
func (*toolCallingBackend) Name() string { return "tool-calling" }
func (*toolCallingBackend) Close() error { return nil }

// TestEscalatedCallsShareTheTaskBudget: the tool calls of a program escalated to a container count against the
// task's run, as the sandbox's own calls do. Under MaxToolCalls 3 a task that called one tool and then
// run_in_container has one call left for the container; its other four are refused.
func TestEscalatedCallsShareTheTaskBudget(t *testing.T) {
	gate, aud := refundGate(t, governance.Limits{MaxToolCalls: 3})
	dir, wh := escalationWheelhouse(t)
	backend := &toolCallingBackend{n: 5}
	model := agenttest.New(t, py(`tools.list_orders()
r = run_in_container(code="import wasmbox_tools")
final_answer(r["exit_code"])`))
	a, _ := newAgentCfg(t, model, wasmbox.Config{Gate: gate, Wheelhouse: wh}, agent.WithEscalation(agent.EscalationConfig{
		Backend: backend, Policy: escalate.AllowImages(testEscalationImage), Image: testEscalationImage, WheelhouseDir: dir,
	}))
	res, err := run(t, a, "List the orders, then in a container.")
	if err != nil {
		t.Fatal(err)
	}
	if backend.ok != 1 || len(backend.refused) != 4 {
		t.Fatalf("container calls: %d ok, refused %v; want 1 ok and 4 refused by the task's budget", backend.ok, backend.refused)
	}
	for _, r := range backend.refused {
		if !strings.Contains(r, "ToolLimitExceeded") {
			t.Errorf("refusal %q, want ToolLimitExceeded", r)
		}
	}
	for _, r := range aud.Records() {
		if r.RunID != res.RunID {
			t.Errorf("record %s #%d is of run %q, not the task's %q", r.Tool, r.Seq, r.RunID, res.RunID)
		}
	}
}
