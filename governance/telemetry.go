package governance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the gate's spans and metrics.
const ScopeName = "github.com/wasmbox/wasmbox/governance"

// The gate's span and metric names, and its attribute keys. The span of a tool call follows the OpenTelemetry
// conventions for generative AI ("execute_tool NAME", gen_ai.operation.name, gen_ai.tool.name); the rest are
// wasmbox's own.
const (
	toolSpanName = "execute_tool"

	// MetricToolCalls counts the calls that reached the gate, by decision, outcome, decided_by and source.
	MetricToolCalls = "wasmbox.tool.calls"
	// MetricToolDuration is how long the tools that ran took (seconds), by outcome and source.
	MetricToolDuration = "wasmbox.tool.duration"
)

var (
	attrOperation    = attribute.String("gen_ai.operation.name", "execute_tool")
	keyToolName      = attribute.Key("gen_ai.tool.name")
	keyRunID         = attribute.Key("wasmbox.run.id")
	keySeq           = attribute.Key("wasmbox.tool.seq")
	keySource        = attribute.Key("wasmbox.tool.source")
	keyEffect        = attribute.Key("wasmbox.tool.effect")
	keyDecision      = attribute.Key("wasmbox.tool.decision")
	keyDecidedBy     = attribute.Key("wasmbox.tool.decided_by")
	keyReason        = attribute.Key("wasmbox.tool.reason")
	keyOutcome       = attribute.Key("wasmbox.tool.outcome")
	keyApprovalWait  = attribute.Key("wasmbox.tool.approval_wait_ms")
	keyToolDuration  = attribute.Key("wasmbox.tool.duration_ms")
	keyResultSize    = attribute.Key("wasmbox.tool.result_bytes")
	keyErrorType     = attribute.Key("error.type")
	maxReasonAttrLen = 1 << 10
)

// The closed sets the metrics are labelled with. A metric is never labelled with anything the guest chooses
// (a tool name, say): the guest could otherwise create a new time series with every call.
var (
	metricOutcomes  = [...]Status{StatusOK, StatusFailed, StatusAbandoned, StatusDenied}
	metricSources   = [...]Source{"", SourcePython, SourceAgent, SourceContainer}
	metricDeciders  = [...]string{"policy", "budget", "gate", "approver"}
	sourceAttrValue = [...]string{"unknown", "python", "agent", "container"}
)

// telemetry holds the gate's tracer and instruments, and the precomputed attribute sets of its metrics, so
// that a call adds no allocation for them.
type telemetry struct {
	tracer trace.Tracer
	// global: the tracer comes from the global provider; never: from a provider that never records (the
	// API's noop). See idle.
	global, never bool

	calls    metric.Int64Counter
	duration metric.Float64Histogram
	// callOpts[outcome][source][decider]; durOpts[outcome][source].
	callOpts [len(metricOutcomes)][len(metricSources)][len(metricDeciders)][]metric.AddOption
	durOpts  [len(metricOutcomes)][len(metricSources)][]metric.RecordOption
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &telemetry{global: tp == nil}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, t.never = tp.(noop.TracerProvider)
	t.tracer = tp.Tracer(ScopeName)
	meter := mp.Meter(ScopeName)
	var err error
	if t.calls, err = meter.Int64Counter(MetricToolCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls that reached the gate, by decision and outcome.")); err != nil {
		return nil, err
	}
	if t.duration, err = meter.Float64Histogram(MetricToolDuration, metric.WithUnit("s"),
		metric.WithDescription("How long the tools that ran took.")); err != nil {
		return nil, err
	}
	for o, outcome := range metricOutcomes {
		decision := "allow"
		if outcome == StatusDenied {
			decision = "deny"
		}
		for s := range metricSources {
			src := keySource.String(sourceAttrValue[s])
			for d, by := range metricDeciders {
				set := attribute.NewSet(keyDecision.String(decision), keyOutcome.String(string(outcome)), src, keyDecidedBy.String(by))
				t.callOpts[o][s][d] = []metric.AddOption{metric.WithAttributeSet(set)}
			}
			set := attribute.NewSet(keyOutcome.String(string(outcome)), src)
			t.durOpts[o][s] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	return t, nil
}

// idleGlobal is the global TracerProvider as it is until a program installs one (otel.SetTracerProvider): its
// tracers record nothing. Nil if it cannot be told apart from an installed provider (then every call starts a
// span, which is always correct).
var idleGlobal = func() trace.TracerProvider {
	if tp := otel.GetTracerProvider(); fmt.Sprintf("%T", tp) == "*global.tracerProvider" {
		return tp
	}
	return nil
}()

// idle reports whether a span of this gate would record nothing whatever its parent: its provider is the
// API's no-op one, or the global one while no program has installed an SDK. A call then starts no span at all
// (a no-op span costs allocations on the hot path); its context keeps the caller's span, which is the parent a
// no-op span would have passed on.
func (t *telemetry) idle() bool {
	return t.never || (t.global && idleGlobal != nil && otel.GetTracerProvider() == idleGlobal)
}

// start begins the span of one call; its name gets the tool's name only when it is recorded. The span is nil
// when the gate's tracer is idle.
func (t *telemetry) start(ctx context.Context, call *Call) (context.Context, trace.Span) {
	if t.idle() {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, toolSpanName)
	if span.IsRecording() {
		name := spanToolName(call.Tool)
		span.SetName(toolSpanName + " " + name)
		span.SetAttributes(attrOperation, keyToolName.String(name))
	}
	return ctx, span
}

// spanToolName is the tool's name as a span shows it: valid UTF-8, at most 256 bytes (the gate denies longer
// and invalid names, but they still get a span).
func spanToolName(s string) string {
	return strings.ToValidUTF8(truncateUTF8(s, maxToolNameBytes), "\uFFFD")
}

// end records the call's outcome on its span and in the metrics, and ends the span.
func (t *telemetry) end(ctx context.Context, span trace.Span, out Outcome, err error) {
	if span != nil && span.IsRecording() {
		call := out.Call
		decision := "allow"
		if out.Status == StatusDenied {
			decision = "deny"
		}
		attrs := []attribute.KeyValue{
			keyRunID.String(call.RunID), keySeq.Int64(call.Seq),
			keySource.String(sourceAttr(call.Source)), keyEffect.String(call.Effect.Resolve().String()),
			keyDecision.String(decision), keyDecidedBy.String(out.Decision.DecidedBy),
			keyOutcome.String(string(out.Status)),
		}
		if out.ApprovalWait > 0 {
			attrs = append(attrs, keyApprovalWait.Float64(ms(out.ApprovalWait)))
		}
		if out.Status != StatusDenied {
			attrs = append(attrs, keyToolDuration.Float64(ms(out.Duration)))
		}
		if out.Status == StatusOK {
			attrs = append(attrs, keyResultSize.Int(len(out.Result)))
		}
		if decision == "deny" && out.Decision.Reason != "" {
			attrs = append(attrs, keyReason.String(strings.ToValidUTF8(truncateUTF8(out.Decision.Reason, maxReasonAttrLen), "\uFFFD")))
		}
		if err != nil {
			kind := errorType(err)
			attrs = append(attrs, keyErrorType.String(kind))
			span.SetStatus(codes.Error, string(out.Status)+": "+kind)
		}
		span.SetAttributes(attrs...)
	}
	if span != nil {
		span.End()
	}
	if t.calls.Enabled(ctx) {
		t.calls.Add(ctx, 1, t.callOpts[outcomeIndex(out.Status)][sourceIndex(out.Call.Source)][deciderIndex(out.Decision.DecidedBy)]...)
	}
	if out.Status != StatusDenied && t.duration.Enabled(ctx) {
		t.duration.Record(ctx, out.Duration.Seconds(), t.durOpts[outcomeIndex(out.Status)][sourceIndex(out.Call.Source)]...)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sourceAttr(s Source) string { return sourceAttrValue[sourceIndex(s)] }

func outcomeIndex(s Status) int {
	for i, o := range metricOutcomes {
		if o == s {
			return i
		}
	}
	return len(metricOutcomes) - 1 // denied: what Do returns without one of the others
}

func sourceIndex(s Source) int {
	for i, o := range metricSources {
		if o == s {
			return i
		}
	}
	return 0
}

func deciderIndex(by string) int {
	if strings.HasPrefix(by, "approver") {
		return 3
	}
	for i, d := range metricDeciders[:3] {
		if d == by {
			return i
		}
	}
	return 2 // gate
}

// errorType names a call's error for the error.type attribute: the kind of denial, or how the tool failed.
func errorType(err error) string {
	var te *ToolError
	switch {
	case errors.As(err, &te):
		switch {
		case te.Abandoned:
			return "tool_abandoned"
		case te.Panic != nil:
			return "tool_panic"
		}
		return "tool_error"
	case errors.Is(err, ErrCallFlood):
		return "call_flood"
	case errors.Is(err, ErrToolLimit):
		return "tool_limit"
	case errors.Is(err, ErrApprovalTimeout):
		return "approval_timeout"
	case errors.Is(err, ErrApprovalDenied):
		return "approval_denied"
	case errors.Is(err, ErrBudgetExceeded):
		return "budget_exceeded"
	case errors.Is(err, ErrInvalidCall):
		return "invalid_call"
	case errors.Is(err, ErrAudit):
		return "audit"
	case errors.Is(err, ErrDenied):
		return "denied"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}
