package hostfuncs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/jsonvalid"
)

// The bounds of what a Bridge keeps of a run's calls (Bridge.Calls), whatever the guest sends.
const (
	// MaxCallArgsBytes is the most argument bytes one ToolCall keeps; larger arguments are described by
	// ArgsSize and ArgsSHA256 instead.
	MaxCallArgsBytes = 64 << 10
	// MaxRetainedArgsBytes is the most argument bytes the ToolCalls of one Bridge keep in all; past it, calls
	// keep ArgsSize and ArgsSHA256 only.
	MaxRetainedArgsBytes = 1 << 20
	// MaxCallRecords is the most ToolCalls one Bridge keeps; later calls are only counted (Bridge.Unrecorded).
	MaxCallRecords = 1000
	// maxToolNameBytes and maxCallTextBytes bound a ToolCall's tool name, and its reason and error text.
	maxToolNameBytes = 256
	maxCallTextBytes = 4 << 10
)

// ToolCall records one tool call of a run, whatever its outcome.
type ToolCall struct {
	Seq  int64  `json:"seq"`
	Tool string `json:"tool"` // at most 256 bytes (longer names are cut)
	// Args are the call's arguments, when they fit in the bridge's bounds (MaxCallArgsBytes per call,
	// MaxRetainedArgsBytes per bridge) and are JSON; otherwise Args is nil and ArgsSize and ArgsSHA256 (lowercase
	// hex) describe them.
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsSize   int64           `json:"args_size,omitempty"`
	ArgsSHA256 string          `json:"args_sha256,omitempty"`
	// Status is "ok", "failed", "abandoned" (the tool, or the gate before it, was still running when the
	// deadline and its grace passed) or "denied".
	Status    string        `json:"status"`
	DecidedBy string        `json:"decided_by,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Error     string        `json:"error,omitempty"`
	ErrorType string        `json:"error_type,omitempty"` // the Python exception raised, if any
	Duration  time.Duration `json:"duration_ns"`
}

// Bridge serves the tool calls of one run: it validates them against the registry and passes every one through
// the run's governance.Run before the tool runs.
//
// What it keeps of the calls is bounded in bytes and records (see MaxCallRecords and the other bounds), and it
// never copies arguments it does not keep. When the governance run is flooded (too many denied calls, see
// governance.ErrCallFlood), every later call is refused: the caller should then end the run
// ([Bridge.Flooded]).
//
// A Bridge is safe for concurrent use. It tracks one call in progress, for [Bridge.Abandon], which is exact when
// calls come one at a time, as a sandbox's do; with concurrent calls, Abandon may leave some out.
type Bridge struct {
	reg        *Registry
	run        *governance.Run
	source     governance.Source
	mu         sync.Mutex
	calls      []ToolCall
	keptArgs   int
	unrecorded int64
	// epoch is when the bridge was made: calls are timed as monotonic time since it. tool is b.runTool.
	epoch time.Time
	tool  governance.ToolFunc
	// inflight is the call in progress; its zero value, with active false, means none. inflightSeq is its sequence
	// number once the gate has given it one (stored by the tool without the lock; set to 0 with inflight).
	// abandoned is set by Abandon, after which nothing more is recorded.
	inflight    inflightCall
	inflightSeq atomic.Int64
	abandoned   bool
	// cur is the entry of the last call handed to the gate, which the tool function (runTool) takes when the
	// gate hands it a call of that name, rather than looking the name up again.
	cur atomic.Pointer[entry]
}

// inflightCall is the call in progress: active, with start the monotonic time since the bridge's epoch (read
// without the wall clock, which costs twice as much).
type inflightCall struct {
	name   string
	args   json.RawMessage
	start  time.Duration
	active bool
}

// NewBridge returns the bridge of one run.
func NewBridge(reg *Registry, run *governance.Run, source governance.Source) *Bridge {
	b := &Bridge{reg: reg, run: run, source: source, epoch: time.Now()}
	b.tool = b.runTool // one function value for every call, rather than a closure per call
	return b
}

// Calls returns the run's tool calls so far.
func (b *Bridge) Calls() []ToolCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ToolCall(nil), b.calls...)
}

// RunID is the governance run id.
func (b *Bridge) RunID() string { return b.run.ID() }

// Flooded reports whether the governance run refuses every further call because it had too many denied calls
// (governance.Limits.MaxDeniedCalls): a program that keeps calling after that is flooding the host, and its run
// should end now.
func (b *Bridge) Flooded() bool { return b.run.Flooded() }

// Halted reports why the governance run refuses every further call and the program must end now (a durable
// task paused at a call, or lost its store), or nil. See governance.Run.Halted.
func (b *Bridge) Halted() error { return b.run.Halted() }

// Unrecorded returns the number of calls not kept in Calls because MaxCallRecords was reached.
func (b *Bridge) Unrecorded() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unrecorded
}

var (
	errUnknownTool = errors.New("unknown tool")
	errInvalidArgs = errors.New("invalid arguments")
)

// Call runs one tool call. It returns the JSON result, or an error response {"type", "message"} whose type names
// the Python exception to raise (isError true). It never panics on bad input.
func (b *Bridge) Call(ctx context.Context, name string, args json.RawMessage) (resp []byte, isError bool) {
	return b.call(ctx, name, b.reg.entry(name), args)
}

// CallBytes is Call with the tool's name as the guest sent it: a registered name is not copied.
func (b *Bridge) CallBytes(ctx context.Context, name []byte, args json.RawMessage) (resp []byte, isError bool) {
	if e := b.reg.entryBytes(name); e != nil {
		return b.call(ctx, e.Name, e, args)
	}
	return b.call(ctx, string(name), nil, args)
}

// call is Call with the tool's entry looked up (nil for an unknown name). The entry is looked up once here and
// once more by the tool function (b.tool, made once per bridge): a registry only grows, and a tool's entry
// never changes.
func (b *Bridge) call(ctx context.Context, name string, e *entry, args json.RawMessage) (resp []byte, isError bool) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// An unknown name runs nothing (the tool func reports UnknownTool with the real names), so it is read-only
	// for the policy; it is still counted and audited like every call.
	effect, cost := governance.ReadOnly, int64(0)
	if e != nil {
		effect, cost = e.Effect, e.Cost
	}
	start := time.Since(b.epoch)
	b.mu.Lock()
	b.inflight = inflightCall{name: name, args: args, start: start, active: true}
	b.inflightSeq.Store(0)
	b.mu.Unlock()
	if e != nil {
		b.cur.Store(e)
	}
	out, err := b.run.Do(ctx, governance.Call{Tool: name, Args: args, Effect: effect, Cost: cost, Source: b.source}, b.tool)
	rec := ToolCall{Seq: out.Call.Seq, Tool: cut(name, maxToolNameBytes), Status: string(out.Status), DecidedBy: out.Decision.DecidedBy,
		Reason: cut(out.Decision.Reason, maxCallTextBytes)}
	if err == nil {
		// The gate timed the call from its decision to the tool's end; only the approval's wait came before.
		rec.Status, rec.Duration = "ok", out.ApprovalWait+out.Duration
		b.record(rec, args, true)
		return out.Result, false
	}
	rec.Duration = time.Since(b.epoch) - start
	typ, msg := pythonError(err)
	msg = cut(msg, maxCallTextBytes)
	rec.Error, rec.ErrorType = msg, typ
	if rec.Status == "" || rec.Status == "allowed" {
		rec.Status = "failed"
	}
	// A call the gate refused as malformed may have arguments that are not JSON: they are kept by size and hash
	// only, so that the records always marshal.
	b.record(rec, args, !errors.Is(err, governance.ErrInvalidCall))
	return ErrorResponse(typ, msg), true
}

// runTool is the tool function the gate runs for every call of b (b.tool): the registered tool, with its
// arguments checked against its schema and its result checked to be JSON. The gate hands it the call's own
// tool name.
func (b *Bridge) runTool(ctx context.Context, call governance.Call) ([]byte, error) {
	b.inflightSeq.Store(call.Seq)
	e := b.cur.Load()
	if e == nil || e.Name != call.Tool {
		e = b.reg.entry(call.Tool)
	}
	if e == nil {
		return nil, fmt.Errorf("%w %q; the tools are: %s", errUnknownTool, cut(call.Tool, maxToolNameBytes), strings.Join(b.reg.Names(), ", "))
	}
	// The gate runs the tool only with arguments that are valid JSON.
	if err := e.validJSON(call.Args); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidArgs, err)
	}
	res, err := e.Handler(ctx, call.Args)
	if err != nil {
		return nil, err
	}
	if !jsonvalid.Valid(res) {
		return nil, fmt.Errorf("tool %s returned invalid JSON", e.Name)
	}
	return res, nil
}

// Abandon is for a caller that gives up on the run while a call may still be in progress (its goroutine is left
// to it): it returns the run's calls, with the call in progress, if any, as "abandoned", and records nothing
// afterwards. The call's sequence number is the gate's when the gate had got as far as the tool, else 0.
func (b *Bridge) Abandon() []ToolCall {
	b.mu.Lock()
	if !b.abandoned {
		b.abandoned = true
		if inf := b.inflight; inf.active {
			seq := b.inflightSeq.Load()
			tool := cut(inf.name, maxToolNameBytes)
			c := ToolCall{Seq: seq, Tool: tool, Status: string(governance.StatusAbandoned),
				Reason:    "the call had not returned when the run's deadline and its grace had passed",
				Error:     fmt.Sprintf("tool %s did not finish before the deadline; its result is discarded", tool),
				ErrorType: "ToolError", Duration: time.Since(b.epoch) - inf.start}
			b.recordLocked(c, inf.args, seq != 0 || json.Valid(inf.args)) // a sequence number: the gate checked them
		}
	}
	calls := append([]ToolCall(nil), b.calls...)
	b.mu.Unlock()
	return calls
}

// record ends the call in progress and keeps c with as much of args as the bounds allow (with valid false, args
// may not be JSON, and only their size and hash are kept).
func (b *Bridge) record(c ToolCall, args json.RawMessage, valid bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight = inflightCall{}
	b.inflightSeq.Store(0)
	if b.abandoned {
		return
	}
	b.recordLocked(c, args, valid)
}

func (b *Bridge) recordLocked(c ToolCall, args json.RawMessage, valid bool) {
	if len(b.calls) >= MaxCallRecords {
		b.unrecorded++
		return
	}
	if valid && len(args) <= MaxCallArgsBytes && b.keptArgs+len(args) <= MaxRetainedArgsBytes {
		c.Args = append(json.RawMessage(nil), args...)
		b.keptArgs += len(args)
	} else {
		sum := sha256.Sum256(args)
		c.ArgsSize, c.ArgsSHA256 = int64(len(args)), hex.EncodeToString(sum[:])
	}
	b.calls = append(b.calls, c)
}

// cut shortens s to at most n bytes (a copy, so that the rest of s is not kept alive), without splitting a
// UTF-8 sequence, and marks the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.Clone(s[:i]) + "…"
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
			return "ToolError", fmt.Sprintf("tool %s failed: it panicked on the host", cut(te.Tool, maxToolNameBytes))
		}
		if te.Abandoned {
			return "ToolError", fmt.Sprintf("tool %s did not finish before the deadline; its result is discarded", cut(te.Tool, maxToolNameBytes))
		}
		return "ToolError", innerMessage(err)
	}
	return "ToolDenied", err.Error()
}

func deniedMessage(err error) string {
	var de *governance.DeniedError
	if errors.As(err, &de) {
		if de.Reason != "" {
			return fmt.Sprintf("call to %s denied: %s", cut(de.Tool, maxToolNameBytes), de.Reason)
		}
		return fmt.Sprintf("call to %s denied", cut(de.Tool, maxToolNameBytes))
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
