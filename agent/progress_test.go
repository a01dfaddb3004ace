package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// A model that only writes prose gets one nudge, then the Run stops: the strict model fails the test if it is
// asked a third time.
func TestNoCodeStopsSoon(t *testing.T) {
	model := agenttest.New(t, "The total is probably 1218.5.", "As I said, it is 1218.5.")
	a, _ := newAgent(t, model)
	res, err := run(t, a, "What is the total amount of every EU order?")
	if !errors.Is(err, agent.ErrNoProgress) || !errors.Is(err, agent.ErrNoCode) || res.Stop != agent.StopNoCode {
		t.Fatalf("error %v, stop %q", err, res.Stop)
	}
	if len(res.Steps) != 2 || res.Answer != nil || model.Calls() != 2 {
		t.Errorf("%d steps, %d model calls, answer %v", len(res.Steps), model.Calls(), res.Answer)
	}
	if !strings.Contains(err.Error(), "2 replies in a row had no Python code") {
		t.Errorf("error %q", err)
	}

	// WithMaxNoCode(1): no nudge at all.
	model = agenttest.New(t, "Prose.")
	a, _ = newAgent(t, model, agent.WithMaxNoCode(1))
	if res, err = run(t, a, "Compute."); !errors.Is(err, agent.ErrNoProgress) || len(res.Steps) != 1 {
		t.Errorf("error %v, steps %d", err, len(res.Steps))
	}
}

// The no-code count is of replies in a row: code in between resets it.
func TestNoCodeCountsInARow(t *testing.T) {
	model := agenttest.New(t, "Hmm.", py("ids = list_orders()"), "Let me think.", py("final_answer(len(ids))"))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Count the orders.")
	if err != nil || res.Answer != 4.0 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
}

// A model that retries a refused call over and over is stopped: the third identical step ends the Run.
func TestRepeatingProgramsStop(t *testing.T) {
	retry := `r = issue_refund(order_id="A-1001", amount=%s)`
	model := agenttest.New(t,
		py(strings.Replace(retry, "%s", "5.0", 1)),
		py(strings.Replace(retry, "%s", "5.0", 1)+"\nprint(r)"), // other code, same refused call and no output
		py(strings.Replace(retry, "%s", "5", 1)),                // same again
	)
	a, s := newAgent(t, model) // the default gate refuses issue_refund
	res, err := run(t, a, "Refund 5 on A-1001.")
	if !errors.Is(err, agent.ErrNoProgress) || res.Stop != agent.StopRepeating {
		t.Fatalf("error %v, stop %q", err, res.Stop)
	}
	if len(res.Steps) != 3 || len(s.refunds) != 0 {
		t.Errorf("%d steps, refunds %v", len(res.Steps), s.refunds)
	}
}

// Programs that do different things are progress, even when they print nothing; silent programs are compared
// by their code.
func TestSilentProgramsAreProgress(t *testing.T) {
	model := agenttest.New(t, py("a = 1"), py("b = 2"), py("c = 3"), py("final_answer(a + b + c)"))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Add.")
	if err != nil || res.Answer != 6.0 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	// The same silent code three times is not.
	model = agenttest.New(t, py("a = 1"), py("a = 1"), py("a = 1"))
	a, _ = newAgent(t, model)
	if res, err = run(t, a, "Add."); !errors.Is(err, agent.ErrNoProgress) || len(res.Steps) != 3 {
		t.Fatalf("error %v, steps %d", err, len(res.Steps))
	}
}

func TestProgressOptionsValidated(t *testing.T) {
	for _, o := range []agent.Option{agent.WithMaxNoCode(0), agent.WithMaxRepeats(0)} {
		if _, err := agent.New(t.Context(), agenttest.New(nil), wasmbox.Config{}, o); !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("error %v", err)
		}
	}
}

// A reply whose only code is in a ```text block runs nothing: no tool call is made and the model is nudged.
func TestTextBlockNeverRuns(t *testing.T) {
	model := agenttest.New(t,
		"Here is what I would run:\n```text\nids = list_orders()\nfinal_answer(len(ids))\n```",
		py("final_answer(len(list_orders()))"),
	)
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Count the orders.")
	if err != nil || res.Answer != 4.0 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	if st := res.Steps[0]; st.Code != "" || len(st.ToolCalls) != 0 || !errors.Is(st.Err, agent.ErrNoCode) {
		t.Errorf("the text block ran: code %q, calls %v, err %v", st.Code, st.ToolCalls, st.Err)
	}
	if len(res.ToolCalls) != 1 {
		t.Errorf("tool calls %v", res.ToolCalls)
	}
}
