package agent

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// ScopeName is the instrumentation scope of the agent's spans.
const ScopeName = "github.com/wasmbox/wasmbox/agent"

// The agent's spans: one per Run, and under it one per step (a model turn and the program it produced). The
// step's Session Exec span ("wasmbox.exec") and that program's tool calls nest under the step.
const (
	SpanRun  = "wasmbox.agent.run"
	SpanStep = "wasmbox.agent.step"
)

var (
	attrInvokeAgent  = attribute.String("gen_ai.operation.name", "invoke_agent")
	keyRunID         = attribute.Key("wasmbox.run.id")
	keyStep          = attribute.Key("wasmbox.agent.step")
	keySteps         = attribute.Key("wasmbox.agent.steps")
	keyStop          = attribute.Key("wasmbox.agent.stop")
	keyAnswered      = attribute.Key("wasmbox.agent.answered")
	keyRepairs       = attribute.Key("wasmbox.agent.repairs")
	keyRepair        = attribute.Key("wasmbox.agent.repair")
	keyHasCode       = attribute.Key("wasmbox.agent.has_code")
	keyExitCode      = attribute.Key("wasmbox.exit_code")
	keyToolCalls     = attribute.Key("wasmbox.tool_calls")
	keyException     = attribute.Key("wasmbox.exception.type")
	keyErrorType     = attribute.Key("error.type")
	maxStatusMessage = 1 << 10
)

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// startStep ends the previous step's span and starts the span of step r.step, a child of the Run's span in ctx.
func (r *runner) startStep(ctx context.Context) context.Context {
	r.endStep(nil)
	r.stepResult, r.stepN = nil, r.step
	ctx, r.stepSpan = r.a.tracer.Start(ctx, SpanStep)
	if r.stepSpan.IsRecording() {
		r.stepSpan.SetAttributes(keyStep.Int(r.step))
	}
	return ctx
}

// endStep ends the current step's span, if any, with what the step did; err is the Run's error when the Run
// ended in this step.
func (r *runner) endStep(err error) {
	span := r.stepSpan
	if span == nil {
		return
	}
	r.stepSpan = nil
	if span.IsRecording() {
		var st *Step
		if n := len(r.res.Steps); n > 0 && r.res.Steps[n-1].N == r.stepN {
			st = &r.res.Steps[n-1]
		}
		if st != nil {
			span.SetAttributes(keyHasCode.Bool(st.Code != ""), keyAnswered.Bool(st.Answered), keyRepair.Bool(st.Repair),
				keyToolCalls.Int(len(st.ToolCalls)))
			if st.Exception != nil {
				span.SetAttributes(keyException.String(strings.ToValidUTF8(st.Exception.Type, "\uFFFD")))
			}
		}
		if res := r.stepResult; res != nil {
			span.SetAttributes(keyExitCode.Int(res.ExitCode), keyRunID.String(res.RunID))
		}
		switch {
		case err != nil:
			span.SetStatus(codes.Error, truncate(err.Error(), maxStatusMessage))
			span.SetAttributes(keyErrorType.String(string(stopReason(err))))
		case st != nil && st.Err != nil:
			span.SetStatus(codes.Error, truncate(st.Err.Error(), maxStatusMessage))
		case st != nil && st.Exception != nil:
			span.SetStatus(codes.Error, "the program raised "+truncate(st.Exception.Type, 256))
		}
	}
	span.End()
}

// startRun starts the span of one Run, a child of the caller's span in ctx.
func (r *runner) startRun(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := r.a.tracer.Start(ctx, SpanRun)
	if span.IsRecording() {
		span.SetAttributes(attrInvokeAgent, keyRunID.String(r.gov.ID()))
	}
	return ctx, span
}

// endRun ends the Run's span with its outcome.
func (r *runner) endRun(span trace.Span, err error) {
	if span.IsRecording() {
		res := r.res
		span.SetAttributes(keySteps.Int(len(res.Steps)), keyStop.String(string(res.Stop)), keyRepairs.Int(res.Repairs),
			keyToolCalls.Int(len(res.ToolCalls)), keyAnswered.Bool(res.AnswerFrom != ""))
		if err != nil {
			span.SetStatus(codes.Error, truncate(err.Error(), maxStatusMessage))
			span.SetAttributes(keyErrorType.String(string(res.Stop)))
		}
	}
	span.End()
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// defaultGate is wasmbox's default gate, with the providers of cfg.
func defaultGate(cfg wasmbox.Config) (*governance.Gate, error) {
	gc := wasmbox.DefaultGateConfig()
	gc.TracerProvider, gc.MeterProvider = cfg.TracerProvider, cfg.MeterProvider
	g, err := governance.NewGate(gc)
	if err != nil {
		return nil, fmt.Errorf("agent: default gate: %w", err)
	}
	return g, nil
}
