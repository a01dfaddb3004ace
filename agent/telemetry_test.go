package agent_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/internal/oteltest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// An agent Run has a span, one child span per step, and under each step the Session Exec of its program, with
// the program's tool calls under that.
func TestTraceAgentSteps(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	model := agenttest.New(t,
		"First a failing program.\n"+py("ids = list_orders()\n1/0"),
		"Fixed.\n"+py(euTotal))
	a, _ := newAgentCfg(t, model, wasmbox.Config{TracerProvider: rec})
	ctx, caller := rec.Tracer("test").Start(context.Background(), "caller")
	res, err := a.Run(ctx, "What is the total amount of every EU order?")
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", oteltest.Tree(rec.Spans()))
	runSpan := rec.One(t, agent.SpanRun)
	if !oteltest.ChildOf(runSpan, rec.One(t, "caller")) {
		t.Error("the agent run is not a child of the caller")
	}
	for key, want := range map[string]string{"wasmbox.agent.steps": "2", "wasmbox.agent.stop": string(res.Stop),
		"wasmbox.run.id": res.RunID, "wasmbox.tool_calls": "6", "wasmbox.agent.answered": "true", "wasmbox.agent.repairs": "1"} {
		if v, _ := oteltest.Attr(runSpan, key); v.Emit() != want {
			t.Errorf("run span %s = %q, want %q", key, v.Emit(), want)
		}
	}
	steps := rec.Named(agent.SpanStep)
	if len(steps) != 2 {
		t.Fatalf("%d step spans", len(steps))
	}
	execs := rec.Named(wasmbox.SpanExec)
	for i, st := range steps {
		if !oteltest.ChildOf(st, runSpan) {
			t.Errorf("step %d is not a child of the run", i+1)
		}
		if v, _ := oteltest.Attr(st, "wasmbox.agent.step"); v.AsInt64() != int64(i+1) {
			t.Errorf("step span %d has step number %v", i+1, v.Emit())
		}
		n := 0
		for _, e := range execs {
			if oteltest.ChildOf(e, st) {
				n++
				tools := 0
				for _, c := range rec.Spans() {
					if c.Name[:min(len(c.Name), 13)] == "execute_tool " && oteltest.ChildOf(c, e) {
						tools++
					}
				}
				if want := []int{1, 5}[i]; tools != want {
					t.Errorf("step %d: %d tool calls under its exec, want %d", i+1, tools, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("step %d has %d exec spans, want 1", i+1, n)
		}
	}
	first, second := steps[0], steps[1]
	if first.Status.Code != codes.Error {
		t.Errorf("the failed step's status %v", first.Status)
	}
	for key, want := range map[string]string{"wasmbox.exit_code": "1", "wasmbox.exception.type": "ZeroDivisionError",
		"wasmbox.agent.repair": "true", "wasmbox.tool_calls": "1"} {
		if v, _ := oteltest.Attr(first, key); v.Emit() != want {
			t.Errorf("step 1 %s = %q, want %q", key, v.Emit(), want)
		}
	}
	for key, want := range map[string]string{"wasmbox.agent.answered": "true", "wasmbox.tool_calls": "5"} {
		if v, _ := oteltest.Attr(second, key); v.Emit() != want {
			t.Errorf("step 2 %s = %q, want %q", key, v.Emit(), want)
		}
	}
	// The program that gave the final answer succeeded: its Exec span is not an exception.
	for _, e := range execs {
		if !oteltest.ChildOf(e, second) {
			continue
		}
		if v, _ := oteltest.Attr(e, "wasmbox.outcome"); v.Emit() != "ok" || e.Status.Code == codes.Error {
			t.Errorf("the answering program's exec span: outcome %q, status %v", v.Emit(), e.Status)
		}
	}
}
