package bench

import (
	"context"
	"encoding/json"
	"flag"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// The tracing benchmarks compare the hot paths with telemetry off (no provider anywhere: the global
// providers, with no SDK installed, as in every program that does not use OpenTelemetry) and on (the SDK
// recording every span into the in-memory test exporter, and every metric into a manual reader). The two run
// as interleaved rounds (off, on, on, off, ...) so that drift of the machine hits both alike; each reports the
// median and the spread (min–max) of its rounds, and the median of the per-round ratios on/off.
//
//	go test -run '^$' -bench Tracing -benchtime 1x -rounds 21 ./bench/
var rounds = flag.Int("rounds", 3, "rounds of the interleaved tracing benchmarks (each round measures off and on once)")

// telemetryOn is a recording SDK setup; reset drops what was recorded (so memory stays flat between samples).
type telemetryOn struct {
	tp  *sdktrace.TracerProvider
	mp  *sdkmetric.MeterProvider
	exp *tracetest.InMemoryExporter
}

func newTelemetryOn(b *testing.B) *telemetryOn {
	exp := tracetest.NewInMemoryExporter()
	t := &telemetryOn{
		tp:  sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample())),
		mp:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		exp: exp,
	}
	b.Cleanup(func() { _ = t.tp.Shutdown(context.Background()); _ = t.mp.Shutdown(context.Background()) })
	return t
}

// providers returns the providers of a variant: nil (the global ones) when off.
func (t *telemetryOn) providers(on bool) (trace.TracerProvider, metric.MeterProvider) {
	if !on {
		return nil, nil
	}
	return t.tp, t.mp
}

// interleave measures off and on for *rounds rounds, alternating which goes first, and reports the medians,
// spreads and the median ratio. measure returns one sample of the cost (in unit) and must not depend on the
// previous sample.
func interleave(b *testing.B, unit string, measure func(on bool) float64) {
	measure(false) // warm both paths once
	measure(true)
	var off, on, ratio []float64
	for b.Loop() {
		for r := range *rounds {
			var o, n float64
			if r%2 == 0 {
				o, n = measure(false), measure(true)
			} else {
				n, o = measure(true), measure(false)
			}
			off, on, ratio = append(off, o), append(on, n), append(ratio, n/o)
		}
	}
	b.ReportMetric(median(off), unit+"_off")
	b.ReportMetric(median(on), unit+"_on")
	b.ReportMetric(median(ratio), "ratio_on/off")
	b.Logf("%d rounds: off median %.3f %s (min %.3f, max %.3f); on median %.3f %s (min %.3f, max %.3f); on/off median %.3f (min %.3f, max %.3f)",
		len(off), median(off), unit, slices.Min(off), slices.Max(off), median(on), unit, slices.Min(on), slices.Max(on),
		median(ratio), slices.Min(ratio), slices.Max(ratio))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// BenchmarkTracingGate is the gate alone (Run.Do of a trivial tool, in-memory nothing: a discarding auditor), the
// part of a tool call where a span and two metric updates are the largest share: ns per call.
func BenchmarkTracingGate(b *testing.B) {
	tel := newTelemetryOn(b)
	gates := map[bool]*governance.Gate{}
	for _, on := range []bool{false, true} {
		tp, mp := tel.providers(on)
		g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{},
			Limits: governance.Limits{MaxToolCalls: 1 << 40}, TracerProvider: tp, MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		gates[on] = g
	}
	const calls = 2_000
	args := json.RawMessage(`{"x":1}`)
	tool := func(_ context.Context, c governance.Call) ([]byte, error) { return c.Args, nil }
	ctx := context.Background()
	interleave(b, "ns/call", func(on bool) float64 {
		run := gates[on].NewRun("")
		start := time.Now()
		for range calls {
			if _, err := run.Do(ctx, governance.Call{Tool: "echo", Args: args, Effect: governance.ReadOnly, Source: governance.SourcePython}, tool); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		tel.exp.Reset()
		return float64(d.Nanoseconds()) / calls
	})
}

// BenchmarkTracingToolCall is a tool call from Python through the bridge and the gate and back (the W3 program),
// timed inside the guest: µs per call.
func BenchmarkTracingToolCall(b *testing.B) {
	tel := newTelemetryOn(b)
	sbs := map[bool]*wasmbox.Sandbox{}
	for _, on := range []bool{false, true} {
		tp, mp := tel.providers(on)
		gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{Limit: 1000},
			Limits: governance.Limits{MaxToolCalls: 10_000}, TracerProvider: tp, MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		sbs[on] = sandbox(b, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echoTool()), Gate: gate, TracerProvider: tp, MeterProvider: mp})
	}
	interleave(b, "µs/call", func(on bool) float64 {
		us, err := ToolCallMicros(context.Background(), sbs[on], 2000)
		if err != nil {
			b.Fatal(err)
		}
		tel.exp.Reset()
		return us
	})
}

// BenchmarkTracingRun is a fresh run of print(1) (a span and two metric updates per run): µs per run.
func BenchmarkTracingRun(b *testing.B) {
	tel := newTelemetryOn(b)
	sbs := map[bool]*wasmbox.Sandbox{}
	for _, on := range []bool{false, true} {
		tp, mp := tel.providers(on)
		sbs[on] = sandbox(b, wasmbox.Config{TracerProvider: tp, MeterProvider: mp})
	}
	const runs = 50
	interleave(b, "µs/run", func(on bool) float64 {
		start := time.Now()
		for range runs {
			runOK(b, sbs[on], "print(1)")
		}
		d := time.Since(start)
		tel.exp.Reset()
		return float64(d.Microseconds()) / runs
	})
}

func echoTool() hostfuncs.Tool {
	return hostfuncs.Tool{
		Name:       "echo",
		Effect:     governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
		Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil },
	}
}
