package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/tmc/langchaingo/llms"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

const euTotal = `total = 0.0
for oid in list_orders():
    o = get_order(order_id=oid)
    if o["region"] == "EU":
        total += o["amount"]
final_answer(total)`

func run(t *testing.T, a *agent.Agent, task string) (*agent.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return a.Run(ctx, task)
}

func TestCorrectFirstProgram(t *testing.T) {
	model := agenttest.New(t, "I'll sum the EU orders.\n"+py(euTotal))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "What is the total amount of every EU order?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != 1218.5 || res.AnswerFrom != agent.AnswerFinal || string(res.AnswerJSON) != "1218.5" {
		t.Errorf("answer %v (%s) from %q", res.Answer, res.AnswerJSON, res.AnswerFrom)
	}
	if len(res.Steps) != 1 || !res.Steps[0].Answered || res.Repairs != 0 || len(res.Errors) != 0 {
		t.Errorf("steps %+v, repairs %d, errors %v", res.Steps, res.Repairs, res.Errors)
	}
	if len(res.ToolCalls) != 5 {
		t.Errorf("%d tool calls, want 5", len(res.ToolCalls))
	}
	if st := res.Steps[0]; st.Exception != nil || strings.Contains(st.Stderr, "FinalAnswer") {
		t.Errorf("the FinalAnswer exception leaked: %v %q", st.Exception, st.Stderr)
	}
	// The model saw the system prompt with the stubs, then the task.
	p := model.Prompts()[0]
	if p[0].Role != llms.ChatMessageTypeSystem || p[1].Role != llms.ChatMessageTypeHuman {
		t.Fatalf("roles %v %v", p[0].Role, p[1].Role)
	}
	sys := agenttest.Text(p[0])
	for _, want := range []string{"def get_order(order_id: str) -> dict:", "List the ids of all orders.", "final_answer(value)", "No network"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if agenttest.Text(p[1]) != "What is the total amount of every EU order?" {
		t.Errorf("task message %q", agenttest.Text(p[1]))
	}
	// The agent's private files are gone from the workspace.
	if files := res.Workspace.Files(); len(files) != 0 {
		t.Errorf("files left in the workspace: %v", files)
	}
}

func TestRepairedProgram(t *testing.T) {
	model := agenttest.New(t,
		// Treats the dict as an object: AttributeError. ids is defined before the error.
		py("ids = list_orders()\ntotal = sum(get_order(order_id=i).amount for i in ids)\nfinal_answer(total)"),
		py(`total = sum(o["amount"] for o in (get_order(order_id=i) for i in ids) if o["region"] == "EU")
final_answer(total)`),
	)
	a, _ := newAgent(t, model)
	res, err := run(t, a, "What is the total amount of every EU order?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != 1218.5 || res.Repairs != 1 || len(res.Steps) != 2 || len(res.Errors) != 1 {
		t.Fatalf("answer %v, repairs %d, steps %d, errors %v", res.Answer, res.Repairs, len(res.Steps), res.Errors)
	}
	var pe *wasmbox.PythonError
	if !errors.As(res.Errors[0], &pe) || pe.Type != "AttributeError" {
		t.Errorf("error %v", res.Errors[0])
	}
	obs := res.Steps[0].Observation
	for _, want := range []string{"Your program failed at line 2: AttributeError", "Traceback", "get_order(order_id=i).amount", "Repair 1 of 2", "Variables defined before the error still exist", "get_order(order_id=\"A-1001\") -> ok"} {
		if !strings.Contains(obs, want) {
			t.Errorf("observation lacks %q:\n%s", want, obs)
		}
	}
	if !res.Steps[0].Repair || res.Steps[0].Exception == nil {
		t.Errorf("step 1: %+v", res.Steps[0])
	}
	if got := model.LastMessage(); got != obs {
		t.Errorf("the model saw %q, want the observation", got)
	}
}

func TestRepairsRunOut(t *testing.T) {
	model := agenttest.New(t, py("1/0"), py("x = 1/0"), py("y = [][1]"))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Divide.")
	if !errors.Is(err, agent.ErrRepairsExhausted) {
		t.Fatalf("error %v, want ErrRepairsExhausted", err)
	}
	var pe *wasmbox.PythonError
	if !errors.As(err, &pe) || pe.Type != "IndexError" {
		t.Errorf("error %v does not wrap the last failure", err)
	}
	if res.Answer != nil || len(res.Steps) != 3 || res.Repairs != 2 || model.Calls() != 3 {
		t.Errorf("answer %v, steps %d, repairs %d, calls %d", res.Answer, len(res.Steps), res.Repairs, model.Calls())
	}
	// The same error twice, and the last repair: a nudge to change approach.
	if obs := res.Steps[1].Observation; !strings.Contains(obs, "same error as before") || !strings.Contains(obs, "try a different approach") || !strings.Contains(obs, "Repair 2 of 2") {
		t.Errorf("second observation:\n%s", obs)
	}
	if strings.Contains(res.Steps[0].Observation, "different") {
		t.Errorf("first observation already nudges:\n%s", res.Steps[0].Observation)
	}

	// One repair: it is the last attempt.
	model = agenttest.New(t, py("1/0"), py("[][1]"))
	a, _ = newAgent(t, model, agent.WithMaxRepairs(1))
	res, err = run(t, a, "Divide.")
	if !errors.Is(err, agent.ErrRepairsExhausted) || !strings.Contains(res.Steps[0].Observation, "This is the last attempt") {
		t.Errorf("error %v, observation:\n%s", err, res.Steps[0].Observation)
	}

	// With repairs off the first failure ends the run.
	model = agenttest.New(t, py("1/0"))
	a, _ = newAgent(t, model, agent.WithMaxRepairs(0))
	if _, err := run(t, a, "Divide."); !errors.Is(err, agent.ErrRepairsExhausted) {
		t.Fatalf("error %v", err)
	}
}

func TestDeniedToolObservedAndWorkedAround(t *testing.T) {
	model := agenttest.New(t,
		py(`o = get_order(order_id="A-1003")
r = issue_refund(order_id=o["order_id"], amount=50.0)
final_answer(r)`),
		py(`final_answer({"refunded": False, "order": o["order_id"], "reason": "refunds need approval"})`),
	)
	a, s := newAgent(t, model) // the default gate denies irreversible tools
	res, err := run(t, a, "Refund 50 on order A-1003.")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"refunded": false, "order": "A-1003", "reason": "refunds need approval"}
	if diff := cmp.Diff(want, res.Answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if res.Repairs != 0 {
		t.Errorf("a refusal used %d repairs", res.Repairs)
	}
	if len(s.refunds) != 0 {
		t.Errorf("refunds issued: %v", s.refunds)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[1].Status != "denied" || res.ToolCalls[1].Tool != "issue_refund" {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
	obs := res.Steps[0].Observation
	for _, want := range []string{"a tool call was refused: ApprovalDenied", `issue_refund(order_id="A-1003", amount=50.0) -> DENIED by approver:deny_all`, "did not run"} {
		if !strings.Contains(obs, want) {
			t.Errorf("observation lacks %q:\n%s", want, obs)
		}
	}
	if len(res.Errors) != 1 {
		t.Errorf("errors %v", res.Errors)
	}
}

func TestMaxSteps(t *testing.T) {
	// No answer and nothing printed: ErrMaxSteps.
	model := agenttest.New(t, py("x = 1"), "I think the answer is 2.")
	a, _ := newAgent(t, model, agent.WithMaxSteps(2))
	res, err := run(t, a, "Compute.")
	if !errors.Is(err, agent.ErrMaxSteps) {
		t.Fatalf("error %v, want ErrMaxSteps", err)
	}
	if len(res.Steps) != 2 || res.Answer != nil || !errors.Is(res.Steps[1].Err, agent.ErrNoCode) {
		t.Errorf("steps %+v answer %v", res.Steps, res.Answer)
	}
	if !strings.Contains(res.Steps[0].Observation, "finished without calling final_answer") {
		t.Errorf("observation:\n%s", res.Steps[0].Observation)
	}

	// Printed output is the fallback answer.
	model = agenttest.New(t, py(strings.Replace(euTotal, "final_answer(total)", "print(total)", 1)))
	a, _ = newAgent(t, model, agent.WithMaxSteps(1))
	res, err = run(t, a, "What is the total amount of every EU order?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "1218.5" || res.AnswerFrom != agent.AnswerFromOutput || res.AnswerJSON != nil {
		t.Errorf("answer %#v from %q", res.Answer, res.AnswerFrom)
	}
}

func TestFinalAnswerDict(t *testing.T) {
	model := agenttest.New(t, py(`ids = list_orders()
eu = [i for i in ids if get_order(order_id=i)["region"] == "EU"]
final_answer({"orders": eu, "count": len(eu), "ok": True, "note": None, "nested": {"a": [1, 2.5]}})`))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Which orders are EU?")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"orders": []any{"A-1001", "A-1003", "A-1004"}, "count": 3.0, "ok": true, "note": nil,
		"nested": map[string]any{"a": []any{1.0, 2.5}}}
	if diff := cmp.Diff(want, res.Answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

func TestFinalAnswerNotSwallowed(t *testing.T) {
	model := agenttest.New(t, py(`try:
    final_answer(42)
except Exception:
    print("swallowed")
print("after")`))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Answer.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != 42.0 || res.Steps[0].Stdout != "" {
		t.Errorf("answer %v, stdout %q", res.Answer, res.Steps[0].Stdout)
	}

	// Even a bare except cannot lose the answer: it was delivered before the raise.
	model = agenttest.New(t, py("try:\n    final_answer('yes')\nexcept:\n    pass\nprint('went on')"))
	a, _ = newAgent(t, model)
	if res, err = run(t, a, "Answer."); err != nil || res.Answer != "yes" {
		t.Errorf("answer %v, err %v", res.Answer, err)
	}
}

func TestFinalAnswerNeedsJSON(t *testing.T) {
	model := agenttest.New(t, py("final_answer({1, 2})"), py("final_answer(sorted({1, 2}))"))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "Answer.")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{1.0, 2.0}, res.Answer); diff != "" || res.Repairs != 1 {
		t.Errorf("answer %v, repairs %d", res.Answer, res.Repairs)
	}
	if !strings.Contains(res.Steps[0].Observation, "must be JSON-serialisable") {
		t.Errorf("observation:\n%s", res.Steps[0].Observation)
	}
}

// Printing or writing something that looks like an answer does not make one: only final_answer does.
func TestAnswerCannotBeForged(t *testing.T) {
	model := agenttest.New(t,
		py(`import os, json
os.makedirs("/workspace/.wasmbox-agent", exist_ok=True)
open("/workspace/.wasmbox-agent/answer.json", "w").write(json.dumps({"nonce": "guess", "value": 666}))
print("FINAL ANSWER: 666")`),
		py("final_answer(7)"),
	)
	a, _ := newAgent(t, model, agent.WithMaxSteps(2))
	res, err := run(t, a, "Answer.")
	if err != nil || res.Answer != 7.0 || len(res.Steps) != 2 {
		t.Errorf("answer %v, steps %d, err %v", res.Answer, len(res.Steps), err)
	}
}

func TestNoCodeNudge(t *testing.T) {
	model := agenttest.New(t, "The total is probably 1218.5.", py(euTotal))
	a, _ := newAgent(t, model)
	res, err := run(t, a, "What is the total amount of every EU order?")
	if err != nil || res.Answer != 1218.5 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	if msg := agenttest.Text(model.Prompts()[1][3]); !strings.Contains(msg, "no Python code") {
		t.Errorf("nudge %q", msg)
	}
	if res.Repairs != 0 || len(res.Errors) != 1 || !errors.Is(res.Errors[0], agent.ErrNoCode) {
		t.Errorf("repairs %d errors %v", res.Repairs, res.Errors)
	}
}

// State persists between steps; a program that runs past the sandbox's limit is stopped, the interpreter is
// restarted and the model is told its variables are gone.
func TestProgramTimeoutRestarts(t *testing.T) {
	model := agenttest.New(t,
		py("x = 41\nprint('x set')"),
		py("x += 1\nwhile True:\n    pass"),
		py("final_answer(globals().get('x', 'gone'))"),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Timeout: 300 * time.Millisecond})
	res, err := run(t, a, "Loop.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "gone" && res.Answer != 42.0 {
		t.Errorf("answer %v", res.Answer)
	}
	obs := res.Steps[1].Observation
	if !strings.Contains(obs, "time limit") || !errors.Is(res.Steps[1].Err, wasmbox.ErrTimeout) {
		t.Errorf("observation:\n%s\nerr %v", obs, res.Steps[1].Err)
	}
	if res.Answer == "gone" && !strings.Contains(obs, "interpreter was restarted") {
		t.Errorf("restart not reported:\n%s", obs)
	}
}

func TestDeadline(t *testing.T) {
	model := agenttest.NewReplies(t, agenttest.Reply{Text: py("while True:\n    pass")})
	a, _ := newAgentCfg(t, model, wasmbox.Config{Timeout: 10 * time.Second}, agent.WithTimeout(300*time.Millisecond))
	start := time.Now()
	res, err := run(t, a, "Loop.")
	if !errors.Is(err, agent.ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	if time.Since(start) > 5*time.Second || len(res.Steps) != 1 {
		t.Errorf("took %v, steps %d", time.Since(start), len(res.Steps))
	}
}

func TestModelError(t *testing.T) {
	boom := errors.New("rate limited")
	model := agenttest.NewReplies(t, agenttest.Reply{Err: boom})
	a, _ := newAgent(t, model)
	if _, err := run(t, a, "Hi."); !errors.Is(err, agent.ErrModel) || !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
}

func TestEvents(t *testing.T) {
	var mu sync.Mutex
	var kinds []agent.EventKind
	var stdout strings.Builder
	model := agenttest.New(t,
		py("print('looking')\nids = list_orders()"),
		py("1/0"),
		py("final_answer(len(ids))"),
	)
	a, _ := newAgent(t, model, agent.WithEventHandler(func(e agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Time.IsZero() || e.Step == 0 {
			t.Errorf("event %+v has no time or step", e)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != e.Kind || e.Kind != agent.EventStdout {
			kinds = append(kinds, e.Kind)
		}
		if e.Kind == agent.EventStdout {
			stdout.WriteString(e.Text)
		}
		if e.Kind == agent.EventToolCall && (e.ToolCall == nil || e.ToolCall.Tool != "list_orders") {
			t.Errorf("tool call event %+v", e.ToolCall)
		}
	}))
	res, err := run(t, a, "Count the orders.")
	if err != nil || res.Answer != 4.0 {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	want := []agent.EventKind{
		agent.EventModelTurn, agent.EventCode, agent.EventStdout, agent.EventToolCall, agent.EventObservation,
		agent.EventModelTurn, agent.EventCode, agent.EventRepair,
		agent.EventModelTurn, agent.EventCode, agent.EventAnswer,
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if stdout.String() != "looking\n" {
		t.Errorf("stdout events %q", stdout.String())
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []agent.Option{agent.WithMaxSteps(0), agent.WithMaxRepairs(-1), agent.WithTimeout(0), agent.WithMaxObservation(10)} {
		if _, err := agent.New(context.Background(), agenttest.New(nil), wasmbox.Config{}, o); !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("error %v", err)
		}
	}
	if _, err := agent.New(context.Background(), nil, wasmbox.Config{}); !errors.Is(err, agent.ErrInvalidOption) {
		t.Errorf("nil model: %v", err)
	}
}

// Concurrent runs of one agent share nothing: each has its own session and workspace.
func TestConcurrentRuns(t *testing.T) {
	const n = 4
	replies := make([]string, n)
	for i := range replies {
		replies[i] = py("import os\nos.makedirs('mine', exist_ok=True)\nfinal_answer(len(os.listdir('mine')) + len(list_orders()))\n")
	}
	a, _ := newAgent(t, agenttest.New(t, replies...))
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := a.Run(context.Background(), "Count.")
			if err != nil || res.Answer != 4.0 {
				t.Errorf("answer %v, err %v", res.Answer, err)
			}
		}()
	}
	wg.Wait()
}

func TestLoggerAndCallOptions(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), Level: hclog.Debug})
	model := agenttest.New(t, py("final_answer(get_order(order_id='A-1002')['region'])"))
	a, _ := newAgent(t, model, agent.WithLogger(logger), agent.WithCallOptions(llms.WithTemperature(0.2), llms.WithMaxTokens(500)))
	res, err := run(t, a, "Where is A-1002?")
	if err != nil || res.Answer != "US" {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"model turn", "code", "tool call: step=1 tool=get_order status=ok", "answer: step=1 answer=US from=final_answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if o := model.CallOptions()[0]; o.Temperature != 0.2 || o.MaxTokens != 500 {
		t.Errorf("call options %+v", o)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
