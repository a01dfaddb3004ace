// Package globaltest checks the zero value of the telemetry fields: the global providers. It installs a
// global SDK, so it is a test binary of its own.
package globaltest

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/oteltest"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Before a program installs an SDK, the gate starts no span (the tool sees the caller's span in its
// context, as a no-op span would have passed on); once one is installed, the same gate and sandbox, created
// before, record into it, with tool calls nested under the run.
func TestGlobalProviders(t *testing.T) {
	ctx := context.Background()
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}})
	if err != nil {
		t.Fatal(err)
	}
	var seen trace.Span
	tool := func(ctx context.Context, c governance.Call) ([]byte, error) {
		seen = trace.SpanFromContext(ctx)
		return []byte("null"), nil
	}
	// The caller's own span (from a provider of its own) is what the tool sees.
	rec0 := oteltest.NewRecorder(t)
	cctx, caller := rec0.Tracer("test").Start(ctx, "caller")
	if _, err := g.NewRun("").Do(cctx, governance.Call{Tool: "t", Effect: governance.ReadOnly}, tool); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if !seen.SpanContext().Equal(caller.SpanContext()) {
		t.Errorf("with no SDK installed the tool sees span %v, want the caller's %v", seen.SpanContext(), caller.SpanContext())
	}
	if n := len(rec0.Spans()); n != 1 {
		t.Errorf("%d spans recorded by the caller's provider, want only the caller's", n)
	}

	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }}
	sb, err := wasmbox.New(ctx, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echo)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)

	// Now the program installs an SDK.
	rec := oteltest.NewRecorder(t)
	otel.SetTracerProvider(rec)
	if _, err := g.NewRun("").Do(ctx, governance.Call{Tool: "t", Effect: governance.ReadOnly}, tool); err != nil {
		t.Fatal(err)
	}
	span := rec.One(t, "execute_tool t")
	if !seen.SpanContext().Equal(span.SpanContext) {
		t.Error("the tool's context does not carry its call's span")
	}
	if res, err := sb.Run(ctx, "import tools; tools.echo(); tools.echo()"); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	run := rec.One(t, wasmbox.SpanRun)
	calls := rec.Named("execute_tool echo")
	if len(calls) != 2 || !oteltest.ChildOf(calls[0], run) || !oteltest.ChildOf(calls[1], run) {
		t.Errorf("tool calls not under the run:\n%s", oteltest.Tree(rec.Spans()))
	}

	// The API's no-op provider, given explicitly, records nothing and starts no span either.
	ng, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{},
		TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	before := len(rec.Spans())
	if _, err := ng.NewRun("").Do(ctx, governance.Call{Tool: "t", Effect: governance.ReadOnly}, tool); err != nil {
		t.Fatal(err)
	}
	if len(rec.Spans()) != before || seen.SpanContext().IsValid() {
		t.Error("a gate with the no-op provider made a span")
	}
}
