package governance

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkTelemetry is what the gate adds to a call for its span and metrics (start and end, nothing else):
// off is the global providers with no SDK installed; noop the API's no-op providers; on the SDK recording
// into the in-memory test exporter and a manual metric reader.
func BenchmarkTelemetry(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	for _, v := range []struct {
		name string
		tp   trace.TracerProvider
		mp   metric.MeterProvider
	}{{"off", nil, nil}, {"on", tp, mp}} {
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
