package wasmbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/oteltest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func attrString(t *testing.T, s tracetest.SpanStub, key string) string {
	t.Helper()
	v, ok := oteltest.Attr(s, key)
	if !ok {
		t.Fatalf("span %s has no attribute %s", s.Name, key)
	}
	return v.Emit()
}

func wantAttr(t *testing.T, s tracetest.SpanStub, key, want string) {
	t.Helper()
	if got := attrString(t, s, key); got != want {
		t.Errorf("span %s: %s = %q, want %q", s.Name, key, got, want)
	}
}

// A run's span is a child of the caller's span; each tool call's span is a child of the run's span, with its
// tool name, gate decision and outcome; the tool runs with a context carrying its call's span, so spans the tool
// makes nest under it.
func TestTraceRunWithThreeToolCalls(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	lookup := hostfuncs.Func("get_order", "Get an order.", func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		// The tool's own span, from the provider of the span in its context.
		_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("shop").Start(ctx, "db.query")
		defer span.End()
		return map[string]any{"id": a.OrderID, "amount": 420.0}, nil
	})
	lookup.Effect = governance.ReadOnly
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(lookup), TracerProvider: rec})

	ctx, caller := rec.Tracer("test").Start(context.Background(), "caller")
	res, err := sb.Run(ctx, "import tools\nfor i in range(3):\n    print(tools.get_order(f'A-{i}')['id'])")
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "A-0\nA-1\nA-2\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	t.Logf("trace of one run with three tool calls, as exported by the SDK's in-memory test exporter:\n%s", oteltest.Tree(rec.Spans()))

	root := rec.One(t, "caller")
	runSpan := rec.One(t, wasmbox.SpanRun)
	if !oteltest.ChildOf(runSpan, root) {
		t.Errorf("the run's span is not a child of the caller's")
	}
	if runSpan.Status.Code != codes.Unset {
		t.Errorf("run span status %v", runSpan.Status)
	}
	wantAttr(t, runSpan, "wasmbox.outcome", "ok")
	wantAttr(t, runSpan, "wasmbox.exit_code", "0")
	wantAttr(t, runSpan, "wasmbox.tool_calls", "3")
	wantAttr(t, runSpan, "wasmbox.tool_calls.completed", "3")
	wantAttr(t, runSpan, "wasmbox.run.id", res.RunID)
	if v := attrString(t, runSpan, "wasmbox.peak_memory_bytes"); v == "0" || v != itoa(res.PeakMemory) {
		t.Errorf("peak memory %s, result says %d", v, res.PeakMemory)
	}
	if _, ok := oteltest.Attr(runSpan, "wasmbox.duration_ms"); !ok {
		t.Error("no duration on the run's span")
	}
	calls := rec.Named("execute_tool get_order")
	if len(calls) != 3 {
		t.Fatalf("%d tool-call spans, want 3:\n%s", len(calls), oteltest.Tree(rec.Spans()))
	}
	queries := rec.Named("db.query")
	for i, c := range calls {
		if !oteltest.ChildOf(c, runSpan) {
			t.Errorf("tool call %d is not a child of the run's span", i)
		}
		wantAttr(t, c, "gen_ai.operation.name", "execute_tool")
		wantAttr(t, c, "gen_ai.tool.name", "get_order")
		wantAttr(t, c, "wasmbox.tool.decision", "allow")
		wantAttr(t, c, "wasmbox.tool.decided_by", "policy")
		wantAttr(t, c, "wasmbox.tool.outcome", "ok")
		wantAttr(t, c, "wasmbox.tool.source", "python")
		wantAttr(t, c, "wasmbox.run.id", res.RunID)
		if c.Status.Code != codes.Unset {
			t.Errorf("tool call %d status %v", i, c.Status)
		}
		n := 0
		for _, q := range queries {
			if oteltest.ChildOf(q, c) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("tool call %d has %d db.query children, want 1", i, n)
		}
	}
	seqs := map[string]bool{}
	for _, c := range calls {
		seqs[attrString(t, c, "wasmbox.tool.seq")] = true
	}
	if len(seqs) != 3 || !seqs["1"] || !seqs["3"] {
		t.Errorf("tool call seqs %v", seqs)
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// A call the gate denies (here: no approver for an irreversible tool) has a span with the denial and an error
// status; a call that needs approval records how long the approver took.
func TestTraceDeniedAndApprovedCalls(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	reg, _, refunds := toolSet(t)
	approver := governance.ApproverFunc(func(ctx context.Context, req governance.ApprovalRequest) (governance.Decision, error) {
		time.Sleep(20 * time.Millisecond)
		return governance.Decision{Allow: strings.Contains(string(req.Call.Args), "A-1"), DecidedBy: "approver:test"}, nil
	})
	g, _ := gate(t, governance.GateConfig{TracerProvider: rec, Approver: approver})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g, TracerProvider: rec})
	res, err := sb.Run(context.Background(), `import tools
print(tools.issue_refund("A-1", 5.0))
try:
    tools.issue_refund("B-2", 5.0)
except tools.ToolDenied as e:
    print("denied")
`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "True\ndenied\n" || refunds.Load() != 1 {
		t.Fatalf("stdout %q, refunds %d", res.Stdout, refunds.Load())
	}
	t.Logf("\n%s", oteltest.Tree(rec.Spans()))
	runSpan := rec.One(t, wasmbox.SpanRun)
	calls := rec.Named("execute_tool issue_refund")
	if len(calls) != 2 {
		t.Fatalf("%d spans", len(calls))
	}
	ok, denied := calls[0], calls[1]
	for _, c := range calls {
		if !oteltest.ChildOf(c, runSpan) {
			t.Errorf("%s is not a child of the run", c.Name)
		}
		if _, has := oteltest.Attr(c, "wasmbox.tool.approval_wait_ms"); !has {
			t.Errorf("no approval wait on %v", c.Attributes)
		}
		wantAttr(t, c, "wasmbox.tool.decided_by", "approver:test")
		wantAttr(t, c, "wasmbox.tool.effect", "irreversible")
	}
	if v, _ := oteltest.Attr(ok, "wasmbox.tool.approval_wait_ms"); v.AsFloat64() < 20 {
		t.Errorf("approval wait %v ms, the approver took 20 ms", v.AsFloat64())
	}
	wantAttr(t, ok, "wasmbox.tool.outcome", "ok")
	wantAttr(t, denied, "wasmbox.tool.decision", "deny")
	wantAttr(t, denied, "wasmbox.tool.outcome", "denied")
	wantAttr(t, denied, "error.type", "approval_denied")
	if denied.Status.Code != codes.Error {
		t.Errorf("denied call's status %v", denied.Status)
	}
	if _, has := oteltest.Attr(denied, "wasmbox.tool.reason"); !has {
		t.Error("no reason on the denied call")
	}
	// Arguments never reach a span (they may be secrets).
	for _, s := range rec.Spans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "B-2") {
				t.Errorf("span %s attribute %s carries the call's arguments", s.Name, kv.Key)
			}
		}
	}
}

// A run stopped by its deadline has an error status and the outcome "timeout"; a tool still running then is
// recorded as abandoned, under the run.
func TestTraceTimedOutRun(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := hostfuncs.Tool{Name: "stuck", Effect: governance.ReadOnly, Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		<-release // ignores its context
		return []byte("null"), nil
	}}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(stuck), TracerProvider: rec,
		Timeout: 300 * time.Millisecond})
	res, err := sb.Run(context.Background(), "import tools\ntools.stuck()")
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	t.Logf("\n%s", oteltest.Tree(rec.Spans()))
	runSpan := rec.One(t, wasmbox.SpanRun)
	if runSpan.Status.Code != codes.Error {
		t.Errorf("status %v", runSpan.Status)
	}
	wantAttr(t, runSpan, "wasmbox.outcome", "timeout")
	wantAttr(t, runSpan, "error.type", "timeout")
	wantAttr(t, runSpan, "wasmbox.exit_code", "-1")
	wantAttr(t, runSpan, "wasmbox.run.id", res.RunID)
	call := rec.One(t, "execute_tool stuck")
	if !oteltest.ChildOf(call, runSpan) {
		t.Error("the tool call is not a child of the run")
	}
	wantAttr(t, call, "wasmbox.tool.outcome", "abandoned")
	wantAttr(t, call, "error.type", "tool_abandoned")

	// A compute loop, stopped by the deadline, the same way.
	rec2 := oteltest.NewRecorder(t)
	sb2 := newSandbox(t, wasmbox.Config{TracerProvider: rec2, Timeout: 200 * time.Millisecond})
	if _, err := sb2.Run(context.Background(), "while True: pass"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	wantAttr(t, rec2.One(t, wasmbox.SpanRun), "wasmbox.outcome", "timeout")
}

// Session Execs have spans of their own; an uncaught exception gives an error status and its type.
func TestTraceSessionExec(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	sb := newSandbox(t, wasmbox.Config{TracerProvider: rec})
	se, err := sb.NewSession(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(context.Background())
	if _, err := se.Exec(context.Background(), "x = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := se.Exec(context.Background(), "1/0"); err != nil {
		t.Fatal(err)
	}
	execs := rec.Named(wasmbox.SpanExec)
	if len(execs) != 2 {
		t.Fatalf("%d exec spans", len(execs))
	}
	wantAttr(t, execs[0], "wasmbox.outcome", "ok")
	wantAttr(t, execs[1], "wasmbox.outcome", "exception")
	wantAttr(t, execs[1], "wasmbox.exception.type", "ZeroDivisionError")
	wantAttr(t, execs[1], "wasmbox.exit_code", "1")
	if execs[1].Status.Code != codes.Error {
		t.Errorf("status %v", execs[1].Status)
	}
	if attrString(t, execs[0], "wasmbox.run.id") != attrString(t, execs[1], "wasmbox.run.id") {
		t.Error("the Execs of one Session have different run ids")
	}
}

// Runs are counted by outcome, tool calls by decision; durations go to histograms. No metric carries a name the
// guest chose.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, _, _ := toolSet(t)
	sb := newSandbox(t, wasmbox.Config{Tools: reg, MeterProvider: mp})
	if _, err := sb.Run(context.Background(), `import tools
tools.get_order("A-1"); tools.get_order("A-2")
try:
    tools.issue_refund("A-1", 1.0)
except tools.ToolDenied:
    pass
try:
    tools.call("no_such_tool_made_up_by_the_guest")
except Exception:
    pass
`); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(context.Background(), "raise ValueError"); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	hist := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					key := m.Name
					for _, kv := range p.Attributes.ToSlice() {
						key += " " + string(kv.Key) + "=" + kv.Value.Emit()
						if strings.Contains(kv.Value.Emit(), "no_such_tool") {
							t.Errorf("metric %s is labelled with a guest-chosen name", m.Name)
						}
					}
					sums[key] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
				}
			}
		}
	}
	t.Logf("%v %v", sums, hist)
	want := map[string]int64{
		"wasmbox.runs wasmbox.operation=run wasmbox.outcome=ok":                                                                                 1,
		"wasmbox.runs wasmbox.operation=run wasmbox.outcome=exception":                                                                          1,
		"wasmbox.tool.calls wasmbox.tool.decided_by=policy wasmbox.tool.decision=allow wasmbox.tool.outcome=ok wasmbox.tool.source=python":      2,
		"wasmbox.tool.calls wasmbox.tool.decided_by=approver wasmbox.tool.decision=deny wasmbox.tool.outcome=denied wasmbox.tool.source=python": 1,
		"wasmbox.tool.calls wasmbox.tool.decided_by=policy wasmbox.tool.decision=allow wasmbox.tool.outcome=failed wasmbox.tool.source=python":  1,
	}
	for k, v := range want {
		if sums[k] != v {
			t.Errorf("%s = %d, want %d", k, sums[k], v)
		}
	}
	if hist[wasmbox.MetricRunDuration] != 2 || hist[governance.MetricToolDuration] != 3 {
		t.Errorf("histogram counts %v", hist)
	}
}

// A run's error can carry the guest's text (here a 60 KB exception message, with ExceptionAsError): the span's
// status keeps at most 1 KiB of it.
func TestTraceStatusIsBounded(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	sb := newSandbox(t, wasmbox.Config{TracerProvider: rec, ExceptionAsError: true})
	if _, err := sb.Run(context.Background(), "raise ValueError('x' * 60000)"); !errors.Is(err, wasmbox.ErrPython) {
		t.Fatalf("err %v", err)
	}
	s := rec.One(t, wasmbox.SpanRun)
	if s.Status.Code != codes.Error || len(s.Status.Description) > 1100 || !strings.Contains(s.Status.Description, "ValueError") {
		t.Errorf("status %v, %d bytes", s.Status.Code, len(s.Status.Description))
	}
	wantAttr(t, s, "wasmbox.outcome", "exception")
}
