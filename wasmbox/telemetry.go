package wasmbox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the sandbox's spans and metrics.
const ScopeName = "github.com/wasmbox/wasmbox/wasmbox"

// The names of the sandbox's spans and metrics.
const (
	// SpanRun is the span of Sandbox.Run and RunProgram; SpanExec that of Session.Exec and ExecProgram.
	SpanRun  = "wasmbox.run"
	SpanExec = "wasmbox.exec"
	// MetricRuns counts runs and Execs by operation (run, exec) and outcome.
	MetricRuns = "wasmbox.runs"
	// MetricRunDuration is the wall time of runs and Execs in seconds (Result.Duration), by operation and
	// outcome.
	MetricRunDuration = "wasmbox.run.duration"
)

// The outcomes of a run, as its span and metrics name them (wasmbox.outcome): "ok" (exit code 0),
// "exception" (an uncaught Python exception), "exit" (another non-zero exit code), the ErrorKind of a failed run
// ("timeout", "memory", "tool_limit", "internal"; "python" is reported as "exception"), or "error" for a call
// that failed before the program started (ErrClosed, ErrReentrant, an invalid Program).
var runOutcomes = [...]string{"ok", "exception", "exit", string(KindTimeout), string(KindMemory), string(KindToolLimit),
	string(KindInternal), string(KindOutput), string(KindWorkspace), "error"}

const (
	opRun = iota
	opExec
)

var (
	keyOperation   = attribute.Key("wasmbox.operation")
	keyOutcome     = attribute.Key("wasmbox.outcome")
	keyRunID       = attribute.Key("wasmbox.run.id")
	keyExitCode    = attribute.Key("wasmbox.exit_code")
	keyDurationMs  = attribute.Key("wasmbox.duration_ms")
	keyPeakMemory  = attribute.Key("wasmbox.peak_memory_bytes")
	keyToolCalls   = attribute.Key("wasmbox.tool_calls")
	keyToolsDone   = attribute.Key("wasmbox.tool_calls.completed")
	keyException   = attribute.Key("wasmbox.exception.type")
	keyErrorType   = attribute.Key("error.type")
	keyFiles       = attribute.Key("wasmbox.files_changed")
	keyTruncated   = attribute.Key("wasmbox.output_truncated")
	operationNames = [...]string{"run", "exec"}
)

// telemetry is a Sandbox's tracer and instruments, with the attribute sets of its metrics computed once.
type telemetry struct {
	tracer   trace.Tracer
	runs     metric.Int64Counter
	duration metric.Float64Histogram
	addOpts  [2][len(runOutcomes)][]metric.AddOption
	recOpts  [2][len(runOutcomes)][]metric.RecordOption
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &telemetry{tracer: tp.Tracer(ScopeName)}
	meter := mp.Meter(ScopeName)
	var err error
	if t.runs, err = meter.Int64Counter(MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs and Session Execs, by outcome.")); err != nil {
		return nil, err
	}
	if t.duration, err = meter.Float64Histogram(MetricRunDuration, metric.WithUnit("s"),
		metric.WithDescription("Wall time of runs and Session Execs.")); err != nil {
		return nil, err
	}
	for op, opName := range operationNames {
		for o, outcome := range runOutcomes {
			set := attribute.NewSet(keyOperation.String(opName), keyOutcome.String(outcome))
			t.addOpts[op][o] = []metric.AddOption{metric.WithAttributeSet(set)}
			t.recOpts[op][o] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	return t, nil
}

// start begins the span of a Run or an Exec, a child of the span in ctx.
func (t *telemetry) start(ctx context.Context, op int) (context.Context, trace.Span) {
	name := SpanRun
	if op == opExec {
		name = SpanExec
	}
	return t.tracer.Start(ctx, name)
}

// end records the outcome of a Run or Exec on its span and in the metrics, and ends the span.
func (t *telemetry) end(ctx context.Context, span trace.Span, op int, start time.Time, res *Result, err error) {
	outcome := runOutcome(res, err)
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 12)
		attrs = append(attrs, keyOutcome.String(runOutcomes[outcome]))
		if res != nil {
			attrs = append(attrs,
				keyRunID.String(res.RunID),
				keyExitCode.Int(res.ExitCode),
				keyDurationMs.Float64(float64(res.Duration)/float64(time.Millisecond)),
				keyPeakMemory.Int64(int64(min(res.PeakMemory, 1<<62))),
				keyToolCalls.Int(len(res.ToolCalls)),
				keyToolsDone.Int(res.ToolCallsCompleted),
				keyFiles.Int(res.FilesChangedTotal),
			)
			if res.StdoutTruncated || res.StderrTruncated {
				attrs = append(attrs, keyTruncated.Bool(true))
			}
			if res.Exception != nil {
				// The guest's text, already bounded to 256 bytes by the host.
				attrs = append(attrs, keyException.String(strings.ToValidUTF8(res.Exception.Type, "\uFFFD")))
			}
		}
		switch {
		case err != nil:
			attrs = append(attrs, keyErrorType.String(runOutcomes[outcome]))
			span.SetStatus(codes.Error, statusText(err.Error()))
		case outcome != 0:
			attrs = append(attrs, keyErrorType.String(runOutcomes[outcome]))
			span.SetStatus(codes.Error, "exit code "+strconv.Itoa(res.ExitCode))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
	if t.runs.Enabled(ctx) {
		t.runs.Add(ctx, 1, t.addOpts[op][outcome]...)
	}
	if t.duration.Enabled(ctx) {
		d := time.Since(start)
		if res != nil {
			d = res.Duration
		}
		t.duration.Record(ctx, d.Seconds(), t.recOpts[op][outcome]...)
	}
}

// runOutcome is the index in runOutcomes of a run's outcome.
func runOutcome(res *Result, err error) int {
	var re *RunError
	switch {
	case err != nil && errors.As(err, &re):
		if re.Kind == KindPython {
			return 1
		}
		for i, o := range runOutcomes[3:] {
			if o == string(re.Kind) {
				return i + 3
			}
		}
		return len(runOutcomes) - 1
	case err != nil || res == nil:
		return len(runOutcomes) - 1
	case res.ExitCode == 0:
		return 0
	case res.Exception != nil:
		return 1
	}
	return 2
}

// maxStatusText bounds a span's status description: a run's error can carry the guest's text (an exception's
// message is up to 64 KiB).
const maxStatusText = 1 << 10

func statusText(s string) string {
	return strings.ToValidUTF8(truncateText(s, maxStatusText), "\uFFFD")
}
