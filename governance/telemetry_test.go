package governance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"

	"github.com/wasmbox/wasmbox/internal/oteltest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkTelemetry is what the gate adds to a call for its span and metrics (start and end, nothing else):
// off is the global providers with no SDK installed; on the SDK recording into the in-memory test exporter and
// a manual metric reader; traces and metrics one of the two; traces_noexport the SDK recording spans that no
// processor exports (the SDK's own cost).
func BenchmarkTelemetry(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	bare := sdktrace.NewTracerProvider() // records spans, exports nothing
	defer bare.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	for _, v := range []struct {
		name string
		tp   trace.TracerProvider
		mp   metric.MeterProvider
	}{{"off", nil, nil}, {"on", tp, mp}, {"traces", tp, nil}, {"metrics", nil, mp}, {"traces_noexport", bare, nil}} {
		b.Run(v.name, func(b *testing.B) {
			tel, err := newTelemetry(v.tp, v.mp)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			call := Call{Tool: "echo", Args: json.RawMessage(`{}`), Source: SourcePython, RunID: "run-1", Seq: 1}
			out := Outcome{Call: call, Decision: Decision{Allow: true, DecidedBy: "policy"}, Status: StatusOK, Result: []byte("{}")}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_, span := tel.start(ctx, &call)
				tel.end(ctx, span, out, nil)
				if i++; i%1000 == 0 {
					exp.Reset()
				}
			}
		})
	}
}

// What a guest chooses reaches a span only bounded: a tool name of 10,000 bytes, with invalid UTF-8, gives a
// span name of at most 256 bytes of it, valid UTF-8; the call's arguments never reach a span.
func TestSpanBoundsGuestText(t *testing.T) {
	rec := oteltest.NewRecorder(t)
	g, err := NewGate(GateConfig{Policy: AllowAllPolicy{}, Auditor: DiscardAuditor{}, TracerProvider: rec})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("é", 5000) + "\xff"
	_, err = g.NewRun("").Do(context.Background(), Call{Tool: name, Args: json.RawMessage(`{"secret":"hunter2"}`), Effect: ReadOnly},
		func(context.Context, Call) ([]byte, error) { return []byte("null"), nil })
	if !errors.Is(err, ErrInvalidCall) {
		t.Fatalf("err %v", err)
	}
	spans := rec.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if len(s.Name) > len("execute_tool ")+maxToolNameBytes || !utf8.ValidString(s.Name) {
		t.Errorf("span name of %d bytes, valid UTF-8 %v", len(s.Name), utf8.ValidString(s.Name))
	}
	for _, kv := range s.Attributes {
		if v := kv.Value.Emit(); len(v) > maxReasonAttrLen || strings.Contains(v, "hunter2") || !utf8.ValidString(v) {
			t.Errorf("attribute %s: %d bytes", kv.Key, len(v))
		}
	}
	if v, _ := oteltest.Attr(s, "error.type"); v.AsString() != "invalid_call" {
		t.Errorf("error.type %v", v.Emit())
	}
}
