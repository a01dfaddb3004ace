package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// ToolCall records one tool call of a run, whatever its outcome.
type ToolCall struct {
	Seq       int64           `json:"seq"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args,omitempty"`
	Status    string          `json:"status"` // "ok", "failed" or "denied"
	DecidedBy string          `json:"decided_by,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"` // the Python exception raised, if any
	Duration  time.Duration   `json:"duration_ns"`
}

// Bridge serves the tool calls of one run: it validates them against the registry and passes every one through
// the run's governance.Run before the tool runs.
type Bridge struct {
	reg    *Registry
	run    *governance.Run
	source governance.Source
	mu     sync.Mutex
	calls  []ToolCall
}

// NewBridge returns the bridge of one run.
func NewBridge(reg *Registry, run *governance.Run, source governance.Source) *Bridge {
	return &Bridge{reg: reg, run: run, source: source}
}

// Calls returns the run's tool calls so far.
func (b *Bridge) Calls() []ToolCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ToolCall(nil), b.calls...)
}

// RunID is the governance run id.
func (b *Bridge) RunID() string { return b.run.ID() }

var (
	errUnknownTool = errors.New("unknown tool")
	errInvalidArgs = errors.New("invalid arguments")
)

// Call runs one tool call. It returns the JSON result, or an error response {"type", "message"} whose type names
// the Python exception to raise (isError true). It never panics on bad input.
func (b *Bridge) Call(ctx context.Context, name string, args json.RawMessage) (resp []byte, isError bool) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// An unknown name runs nothing (the tool func reports UnknownTool with the real names), so it is read-only
	// for the policy; it is still counted and audited like every call.
	effect, cost := governance.ReadOnly, int64(0)
	if t, ok := b.reg.Lookup(name); ok {
		effect, cost = t.Effect, t.Cost
	}
	start := time.Now()
	out, err := b.run.Do(ctx, governance.Call{Tool: name, Args: args, Effect: effect, Cost: cost, Source: b.source},
		func(ctx context.Context, call governance.Call) ([]byte, error) {
			t, ok := b.reg.Lookup(name)
			if !ok {
				return nil, fmt.Errorf("%w %q; the tools are: %s", errUnknownTool, name, strings.Join(b.reg.Names(), ", "))
			}
			if err := b.reg.Validate(name, call.Args); err != nil {
				return nil, fmt.Errorf("%w: %w", errInvalidArgs, err)
			}
			res, err := t.Handler(ctx, call.Args)
			if err != nil {
				return nil, err
			}
			if !json.Valid(res) {
				return nil, fmt.Errorf("tool %s returned invalid JSON", name)
			}
			return res, nil
		})
	rec := ToolCall{Seq: out.Call.Seq, Tool: name, Args: args, Status: string(out.Status), DecidedBy: out.Decision.DecidedBy,
		Reason: out.Decision.Reason, Duration: time.Since(start)}
	if err == nil {
		rec.Status = "ok"
		b.record(rec)
		return out.Result, false
	}
	typ, msg := pythonError(err)
	rec.Error, rec.ErrorType = msg, typ
	if rec.Status == "" || rec.Status == "allowed" {
		rec.Status = "failed"
	}
	b.record(rec)
	return ErrorResponse(typ, msg), true
}

func (b *Bridge) record(c ToolCall) {
	b.mu.Lock()
	b.calls = append(b.calls, c)
	b.mu.Unlock()
}

// pythonError maps a gate error to the Python exception class and its message.
func pythonError(err error) (typ, msg string) {
	var te *governance.ToolError
	var de *governance.DeniedError
	switch {
	case errors.Is(err, errUnknownTool):
		return "UnknownTool", innerMessage(err)
	case errors.Is(err, errInvalidArgs):
		return "InvalidToolArguments", innerMessage(err)
	case errors.Is(err, governance.ErrToolLimit):
		return "ToolLimitExceeded", deniedMessage(err)
	case errors.Is(err, governance.ErrApprovalTimeout):
		return "ApprovalTimeout", deniedMessage(err)
	case errors.Is(err, governance.ErrApprovalDenied):
		return "ApprovalDenied", deniedMessage(err)
	case errors.Is(err, governance.ErrBudgetExceeded):
		return "BudgetExceeded", deniedMessage(err)
	case errors.As(err, &de):
		return "ToolDenied", deniedMessage(err)
	case errors.As(err, &te):
		if te.Panic != nil {
			return "ToolError", fmt.Sprintf("tool %s failed: it panicked on the host", te.Tool)
		}
		return "ToolError", innerMessage(err)
	}
	return "ToolDenied", err.Error()
}

func deniedMessage(err error) string {
	var de *governance.DeniedError
	if errors.As(err, &de) {
		if de.Reason != "" {
			return fmt.Sprintf("call to %s denied: %s", de.Tool, de.Reason)
		}
		return fmt.Sprintf("call to %s denied", de.Tool)
	}
	return err.Error()
}

// innerMessage is the tool's own message, without the gate's wrapping.
func innerMessage(err error) string {
	var te *governance.ToolError
	if errors.As(err, &te) && te.Err != nil {
		return te.Err.Error()
	}
	return err.Error()
}
