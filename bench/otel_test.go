package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
// median and the spread (min–max) of its rounds, in CPU time and wall time, and the medians of the per-round
// ratios on/off.
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

// interleave measures off and on for *rounds rounds, alternating which goes first. work does n operations;
// each sample is its wall time and the process's CPU time (user + system, GC included) per operation, in
// units of scale (1 for ns, 1000 for µs). CPU time is what a loaded machine distorts least: wall time counts
// the time other processes held the cores. It reports the medians, the spreads (min–max) and the medians of
// the per-round ratios on/off.
func interleave(b *testing.B, unit string, scale float64, n int, work func(on bool)) {
	sample := func(on bool) (wall, cpu float64) {
		c0, t0 := cpuTime(), time.Now()
		work(on)
		w, c := time.Since(t0), cpuTime()-c0
		return float64(w.Nanoseconds()) / scale / float64(n), float64(c.Nanoseconds()) / scale / float64(n)
	}
	sample(false) // warm both paths once
	sample(true)
	var offW, onW, offC, onC, ratioW, ratioC []float64
	for b.Loop() {
		for r := range *rounds {
			var ow, oc, nw, nc float64
			if r%2 == 0 {
				ow, oc = sample(false)
				nw, nc = sample(true)
			} else {
				nw, nc = sample(true)
				ow, oc = sample(false)
			}
			offW, onW, offC, onC = append(offW, ow), append(onW, nw), append(offC, oc), append(onC, nc)
			ratioW, ratioC = append(ratioW, nw/ow), append(ratioC, nc/oc)
		}
	}
	b.ReportMetric(median(offC), unit+"_cpu_off")
	b.ReportMetric(median(onC), unit+"_cpu_on")
	b.ReportMetric(median(ratioC), "cpu_ratio_on/off")
	b.ReportMetric(median(ratioW), "wall_ratio_on/off")
	line := func(name string, xs []float64, u string) string {
		return fmt.Sprintf("%s median %.3f%s (min %.3f, max %.3f)", name, median(xs), u, slices.Min(xs), slices.Max(xs))
	}
	b.Logf("%d interleaved rounds of %d operations each\n  CPU:  %s; %s; %s\n  wall: %s; %s; %s", len(offC), n,
		line("off", offC, " "+unit), line("on", onC, " "+unit), line("on/off", ratioC, ""),
		line("off", offW, " "+unit), line("on", onW, " "+unit), line("on/off", ratioW, ""))
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
	interleave(b, "ns/call", 1, calls, func(on bool) {
		run := gates[on].NewRun("")
		for range calls {
			if _, err := run.Do(ctx, governance.Call{Tool: "echo", Args: args, Effect: governance.ReadOnly, Source: governance.SourcePython}, tool); err != nil {
				b.Fatal(err)
			}
		}
		tel.exp.Reset()
	})
}

// BenchmarkTracingToolCall is a tool call from Python through the bridge and the gate and back (the W3 program,
// 2000 calls in one run): µs per call.
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
	const calls = 2000
	interleave(b, "µs/call", 1000, calls, func(on bool) {
		if _, err := ToolCallMicros(context.Background(), sbs[on], calls); err != nil {
			b.Fatal(err)
		}
		tel.exp.Reset()
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
	interleave(b, "µs/run", 1000, runs, func(on bool) {
		for range runs {
			runOK(b, sbs[on], "print(1)")
		}
		tel.exp.Reset()
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
