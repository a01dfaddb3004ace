package governance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/wasmbox/wasmbox/internal/handoff"
	"github.com/wasmbox/wasmbox/internal/jsonvalid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxArgsBytes bounds a call's arguments when GateConfig.MaxArgsBytes is zero.
const DefaultMaxArgsBytes = 1 << 20

// DefaultMaxAuditArgsBytes bounds the arguments kept in one audit record when GateConfig.MaxAuditArgsBytes is
// zero.
const DefaultMaxAuditArgsBytes = 64 << 10

// DefaultToolGrace is how long the gate waits for a tool after the call's context ended when
// GateConfig.ToolGrace is zero.
const DefaultToolGrace = 100 * time.Millisecond

// maxErrorBytes bounds the error text kept in a record.
const maxErrorBytes = 4 << 10

// GateConfig configures a [Gate]. NewGate copies it; changing it afterwards has no effect.
//
// Every zero value is safe: no policy denies every call, no approver denies every call that needs approval,
// zero limits mean a run of at most DefaultMaxToolCalls calls. The one field without a default is Auditor,
// because running tools without an audit log must be a decision: use DiscardAuditor{} for that.
type GateConfig struct {
	// Policy decides each call. Nil denies every call.
	Policy Policy
	// Approver decides the calls that the policy marks NeedsApproval. Nil denies them.
	Approver Approver
	// Auditor records every call. Required.
	Auditor Auditor
	// Limits are the per-run budgets, enforced by each Run with its own counters.
	Limits Limits
	// NewBudget, if set, is called by NewRun to get an extra Budget for the run (may return nil for none).
	NewBudget func(runID string) Budget
	// ApprovalTimeout bounds the wait for the approver; when it passes, the call is denied with
	// ErrApprovalTimeout. Zero means DefaultApprovalTimeout (60s); a negative value means no bound of the
	// gate's own (the call's context still bounds the wait).
	ApprovalTimeout time.Duration
	// Redact, if set, rewrites a call's arguments before they reach the audit log and the approver's
	// DisplayArgs (the tool and the policy see the real arguments). Without it arguments are logged as they
	// are. If Redact panics or returns invalid JSON, the arguments are logged as a marker string instead, so a
	// broken hook cannot leak what it should have hidden.
	Redact func(tool string, args json.RawMessage) json.RawMessage
	// MaxArgsBytes bounds a call's arguments; larger calls are denied (ErrInvalidCall). Zero means
	// DefaultMaxArgsBytes (1 MiB); a negative value means no bound.
	MaxArgsBytes int
	// MaxAuditArgsBytes bounds the arguments kept in one audit record (after Redact). A record of larger
	// arguments keeps only their size and SHA-256 (Record.ArgsSize, Record.ArgsSHA256; Args is null), so
	// that what one call adds to the log is bounded whatever the guest sends. The approver still sees them
	// in full (ApprovalRequest.DisplayArgs). Zero means DefaultMaxAuditArgsBytes (64 KiB); a negative value
	// means no bound of its own (MaxArgsBytes still applies).
	MaxAuditArgsBytes int
	// ToolGrace is how long the gate still waits for a running tool after the call's context ended (the
	// program's deadline passed, or the caller cancelled). A tool that has not returned by then is
	// abandoned: Do returns a *ToolError wrapping ErrToolAbandoned and the context's error, the call is
	// audited as "abandoned", and when the tool returns, its result is discarded and a "late" record is
	// written. Zero means DefaultToolGrace (100 ms); a negative value means no grace at all.
	ToolGrace time.Duration
	// Logger (an hclog.Logger, or SlogLogger for a *slog.Logger) receives the gate's diagnostics (denials at debug level, audit failures at error level). Nil
	// logs nothing.
	Logger hclog.Logger
	// Now is the clock for record times; nil means time.Now. Durations always use the monotonic clock.
	Now func() time.Time
	// TracerProvider gives the span of every call ("execute_tool NAME", a child of the span in the call's
	// context; the tool runs with a context that carries it). Nil means the global one
	// (otel.GetTracerProvider()), which records nothing until the program installs an SDK.
	TracerProvider trace.TracerProvider
	// MeterProvider gives the gate's metrics (wasmbox.tool.calls, wasmbox.tool.duration). Nil means the
	// global one (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
	// Store keeps durable tasks ([Gate.NewTask], [Gate.ResumeTask], [Gate.Decide]): their journals, counters,
	// pending calls and audit chains. Nil means none: runs are in memory only and durable tasks are refused
	// (ErrNoStore). Runs made by NewRun never use it (give them a StoreBudget or StoreAuditor for state shared
	// across processes).
	Store Store
	// StoreAuditKey, if not empty, makes the audit chains of durable tasks HMAC-SHA256 with this key (at least
	// MinKeyBytes): an edit of a task's journal or chain in the store is then detected even by someone who can
	// write the store but does not know the key. Every process of a fleet must use the same key.
	StoreAuditKey []byte
	// LeaseTTL is how long a process holds a durable task without renewing its lease (it renews every third of
	// it while the task is open). Zero means DefaultLeaseTTL (30 s).
	LeaseTTL time.Duration
}

// Gate is the single point every tool call passes before it runs. A Gate is immutable after NewGate and safe
// for concurrent use; it is meant to be long-lived and shared by every sandbox and agent of a process, while
// budgets and counters live in the per-run [Run] values it creates.
//
// For each call, [Run.Do] applies, in this order:
//
//  1. validation of the call (tool name, arguments, source, cost);
//  2. the run's hard max_tool_calls cap (ErrToolLimit);
//  3. the Policy (ErrDenied), which may mark the tool's effect and cost;
//  4. the run's Limits and the Budget, before the tool runs (ErrBudgetExceeded);
//  5. the Approver, if the policy asked for approval (ErrApprovalDenied, ErrApprovalTimeout);
//  6. the "allowed" audit record, which must be written, or the tool does not run (ErrAudit);
//  7. the tool, with the call's context; a panic is recovered into a *ToolError (ErrToolPanic); a tool still
//     running GateConfig.ToolGrace after the context ended is abandoned (ErrToolAbandoned);
//  8. the outcome audit record: ok, failed or abandoned, duration, result size and SHA-256.
//
// Validation refuses arguments that are not JSON, are larger than GateConfig.MaxArgsBytes, are nested deeper
// than 1000 levels, or have an object with a duplicate key (exactly equal, or equal under the case folding
// that Go's encoding/json uses to match struct fields): with duplicates the policy, the approver and the tool
// could each read a different value.
//
// Before all of these, a run that has had Limits.MaxDeniedCalls denials refuses every call (ErrCallFlood).
// Denied calls are audited too. The Gate itself never panics because of a policy, approver, budget, auditor,
// redaction hook or tool: their panics become denials or errors.
type Gate struct {
	policy          Policy
	approver        Approver
	auditor         Auditor
	limits          Limits
	maxCalls        int64
	newBudget       func(string) Budget
	approvalTimeout time.Duration
	redact          func(string, json.RawMessage) json.RawMessage
	maxArgs         int
	maxAuditArgs    int
	maxDenied       int64
	toolGrace       time.Duration
	log             hclog.Logger
	now             func() time.Time
	tel             *telemetry
	store           Store
	storeKey        []byte
	leaseTTLv       time.Duration
	// mem is the auditor when it is a *MemoryAuditor: its records are kept without the copy through the
	// interface, and the digest of a small result is left to it (MemoryAuditor.keep).
	mem *MemoryAuditor
	// plainLimits is set when the limits have no per-tool caps: a call's budget check then touches only
	// counters of its own (see Run.reserve).
	plainLimits bool
}

// NewGate returns a gate for cfg.
//
// # Errors
//
// NewGate fails if cfg.Auditor is nil.
func NewGate(cfg GateConfig) (*Gate, error) {
	if cfg.Auditor == nil {
		return nil, errors.New("governance: NewGate: GateConfig.Auditor is nil (use governance.DiscardAuditor{} to run without an audit log)")
	}
	g := &Gate{
		policy:          cfg.Policy,
		approver:        cfg.Approver,
		auditor:         cfg.Auditor,
		limits:          cfg.Limits.clone(),
		maxCalls:        cfg.Limits.maxCalls(),
		newBudget:       cfg.NewBudget,
		approvalTimeout: cfg.ApprovalTimeout,
		redact:          cfg.Redact,
		maxArgs:         cfg.MaxArgsBytes,
		maxAuditArgs:    cfg.MaxAuditArgsBytes,
		maxDenied:       cfg.Limits.maxDenied(),
		toolGrace:       cfg.ToolGrace,
		log:             cfg.Logger,
		now:             cfg.Now,
		store:           cfg.Store,
		storeKey:        bytes.Clone(cfg.StoreAuditKey),
		leaseTTLv:       cfg.LeaseTTL,
		plainLimits:     len(cfg.Limits.ToolCaps) == 0,
	}
	g.mem, _ = cfg.Auditor.(*MemoryAuditor)
	if n := len(cfg.StoreAuditKey); n > 0 && n < MinKeyBytes {
		return nil, fmt.Errorf("governance: NewGate: StoreAuditKey is %d bytes, want at least %d", n, MinKeyBytes)
	}
	if cfg.LeaseTTL < 0 {
		return nil, errors.New("governance: NewGate: LeaseTTL is negative")
	}
	if g.approvalTimeout == 0 {
		g.approvalTimeout = DefaultApprovalTimeout
	}
	if g.maxArgs == 0 {
		g.maxArgs = DefaultMaxArgsBytes
	}
	if g.maxAuditArgs == 0 {
		g.maxAuditArgs = DefaultMaxAuditArgsBytes
	}
	switch {
	case g.toolGrace == 0:
		g.toolGrace = DefaultToolGrace
	case g.toolGrace < 0:
		g.toolGrace = 0
	}
	if g.log == nil {
		g.log = hclog.NewNullLogger()
	}
	var err error
	if g.tel, err = newTelemetry(cfg.TracerProvider, cfg.MeterProvider); err != nil {
		return nil, fmt.Errorf("governance: NewGate: telemetry: %w", err)
	}
	return g, nil
}

// Run holds the state of one run (one sandbox execution, one session, one agent task): its sequence numbers
// and its budget counters. Runs of the same gate share nothing. A Run is safe for concurrent use.
type Run struct {
	g      *Gate
	id     string
	budget Budget
	// joint is set when budget and the gate's auditor keep their state in one store (see jointStore).
	joint *jointStore
	seq   atomic.Int64
	// flooded is set once denied reaches the gate's maxDenied (and never cleared), for Flooded without the lock.
	flooded atomic.Bool

	// calls, cost and irreversible are counters that calls within the limits update without the lock; a limit
	// that reads them is checked under mu (reserve).
	calls        atomic.Int64
	cost         atomic.Int64
	irreversible atomic.Int64
	// lastTool is the counter of the last tool called, so that a run of calls of one tool skips the lookup in
	// perTool.
	lastTool atomic.Pointer[toolCount]
	// base is the instant the run's clock counts from (now).
	base atomic.Pointer[time.Time]

	mu        sync.Mutex
	denied    int64
	unaudited int64
	flood     bool // the flood refusal was audited
	// perTool counts the calls of each tool (guarded by mu; each counter is updated atomically).
	perTool map[string]*toolCount

	workers handoff.Pool // the goroutines that run tools when the call's context can end
	// watches are the contexts of the tools running inline (runInline), by their Done channel: one AfterFunc per
	// context, not per call. Guarded by mu.
	watches map[<-chan struct{}]*inlineWatch
	// lastWatch is the last watch used, so that the calls of one context (an exec's) find it without the lock
	// (watchInline); cleared when that watch is dropped.
	lastWatch atomic.Pointer[inlineWatch]
	// spare is an inlineJob no timer can reach any more, kept for the next inline call (one heap object less per
	// call in a tight loop of calls).
	spare atomic.Pointer[inlineJob]
	// lastAudit is the audit context of the last call's context (auditContext): a sandbox's calls of one exec
	// share a context, so they share one context.WithoutCancel too.
	lastAudit atomic.Pointer[auditCtx]
	// task is the durable task whose run this is (Gate.NewTask, Gate.ResumeTask), nil for other runs.
	task *Task
	// halted is why the run must end (a pause, a store failure, a divergence), once set.
	halted atomic.Pointer[haltReason]
}

type haltReason struct{ err error }

// toolCount is the number of calls of one tool in a run that passed the budget check and were not refunded.
type toolCount struct {
	name string
	n    atomic.Int64
}

// toolCounter returns the counter of tool's calls, creating it.
func (r *Run) toolCounter(tool string) *toolCount {
	if c := r.lastTool.Load(); c != nil && c.name == tool {
		return c
	}
	r.mu.Lock()
	c := r.perTool[tool]
	if c == nil {
		if r.perTool == nil {
			r.perTool = map[string]*toolCount{}
		}
		c = &toolCount{name: tool}
		r.perTool[tool] = c
	}
	r.mu.Unlock()
	r.lastTool.Store(c)
	return c
}

// clockRefresh is how long a run derives wall-clock instants from the monotonic clock before it reads the wall
// clock again (now).
const clockRefresh = time.Second

// now returns the current instant, with its monotonic reading. It reads only the monotonic clock, which costs
// half as much as time.Now's two clocks on a kvm-clock VM, and adds it to the last reading of the wall clock,
// which it takes again once that is clockRefresh old: a step of the wall clock shows in the records within a
// second, and the instants of one call stay in order whatever the wall clock does.
func (r *Run) now() time.Time {
	if b := r.base.Load(); b != nil {
		if d := time.Since(*b); d >= 0 && d < clockRefresh {
			return b.Add(d)
		}
	}
	t := time.Now()
	r.base.Store(&t)
	return t
}

// Halted returns why the run must end now, or nil: a *PausedError when a durable task paused at a call, or
// an error wrapping ErrStore, ErrDiverged or ErrTaskLost when a durable task can no longer be governed. Every
// later call of the run is refused with it. A sandbox checks it after each call, as it checks Flooded.
func (r *Run) Halted() error {
	if h := r.halted.Load(); h != nil {
		return h.err
	}
	return nil
}

// halt records the first reason the run must end.
func (r *Run) halt(err error) { r.halted.CompareAndSwap(nil, &haltReason{err: err}) }

// haltWith halts the run with err and returns it as the outcome of call.
func (r *Run) haltWith(call Call, err error) (Outcome, error) {
	r.halt(err)
	return Outcome{Call: call, Status: StatusDenied, Decision: Decision{Reason: err.Error(), DecidedBy: "gate"}}, r.Halted()
}

// Task returns the durable task whose run this is, or nil.
func (r *Run) Task() *Task { return r.task }

// auditCtx is a context and the one its audit records are written under.
type auditCtx struct{ of, actx context.Context }

// auditContext returns ctx without its cancellation, for the call's audit records: they are written even when
// ctx has ended. Consecutive calls under the same context get the same one.
func (r *Run) auditContext(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	if a := r.lastAudit.Load(); a != nil && a.of == ctx {
		return a.actx
	}
	actx := context.WithoutCancel(ctx)
	// Only a context of a comparable type is kept: comparing it with the next call's context then never panics
	// (an interface comparison looks at the values only when the dynamic types are the same).
	if reflect.TypeOf(ctx).Comparable() {
		r.lastAudit.Store(&auditCtx{of: ctx, actx: actx})
	}
	return actx
}

// NewRun starts a run. runID identifies it in the audit log and should be unique; an empty runID gets a random
// one.
func (g *Gate) NewRun(runID string) *Run {
	if runID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		runID = "run-" + hex.EncodeToString(b[:])
	}
	r := &Run{g: g, id: runID}
	if g.newBudget != nil {
		r.budget = g.newBudget(runID)
		r.joint = newJointStore(r.budget, g.auditor)
	}
	return r
}

// ID returns the run's identifier.
func (r *Run) ID() string { return r.id }

// Usage returns a snapshot of the run's counters.
func (r *Run) Usage() RunUsage {
	if t := r.task; t != nil {
		info := t.Info()
		return RunUsage{Calls: info.Calls, Denied: info.Denied, CostUnits: info.CostUnits, Irreversible: info.Irrev, PerTool: info.PerTool}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var perTool map[string]int64
	for name, c := range r.perTool {
		if n := c.n.Load(); n > 0 {
			if perTool == nil {
				perTool = map[string]int64{}
			}
			perTool[name] = n
		}
	}
	return RunUsage{Calls: r.calls.Load(), Denied: r.denied, Unaudited: r.unaudited, CostUnits: r.cost.Load(), Irreversible: r.irreversible.Load(), PerTool: perTool}
}

// Flooded reports whether the run has had Limits.MaxDeniedCalls denials: every further call is refused
// (ErrCallFlood) and the caller should end the run. A sandbox checks it after each call.
func (r *Run) Flooded() bool { return r.flooded.Load() }

// addDenied counts one denied call, and marks the run flooded when that makes MaxDeniedCalls.
func (r *Run) addDenied() {
	r.mu.Lock()
	r.denied++
	if r.denied >= r.g.maxDenied {
		r.flooded.Store(true)
	}
	r.mu.Unlock()
}

// Do passes call through the gate and, if it is allowed, runs tool. It is the one entry point for every tool
// call: calls bridged from Python, direct agent calls and calls from escalated containers alike.
//
// Do assigns call.RunID and call.Seq. It returns the tool's result in Outcome.Result and a nil error when the
// tool ran and succeeded; a *ToolError when it ran and failed, panicked or was abandoned; a *DeniedError when
// it did not run.
//
// The tool runs with ctx. When ctx can end, the tool runs on a goroutine of the run's own (one, reused from
// call to call, so a call costs a handoff rather than a new goroutine) and Do returns at most
// GateConfig.ToolGrace after ctx ends, whether the tool honours ctx or not; a tool that never returns keeps
// its goroutine (the gate cannot stop Go code), but nothing waits for it and no later call is given to it. An
// idle goroutine of a run exits when the context of its last call ends, or within two seconds without calls.
//
// Each call gets a span (see GateConfig.TracerProvider), and the tool's context carries it, so that the
// tool's own spans nest under it.
func (r *Run) Do(ctx context.Context, call Call, tool ToolFunc) (Outcome, error) {
	ctx, span := r.g.tel.start(ctx, &call)
	var out Outcome
	var err error
	call.IdempotencyKey = ""
	if r.task != nil {
		out, err = r.task.do(ctx, call, tool)
		r.g.tel.end(ctx, span, out, err)
		return out, err
	}
	out, err = r.do(ctx, call, tool, span)
	if out.Status == StatusAbandoned && inline(ctx) {
		return out, err // the span ended when the gate gave up on the tool (inlineJob.abandon)
	}
	r.g.tel.end(ctx, span, out, err)
	return out, err
}

// inline reports whether the tool of a call with ctx runs on the caller's goroutine (runInline).
func inline(ctx context.Context) bool { return ctx.Done() != nil && handoff.CallerAbandons(ctx) }

func (r *Run) do(ctx context.Context, call Call, tool ToolFunc, span trace.Span) (Outcome, error) {
	g := r.g
	call.RunID = r.id
	call.Seq = r.seq.Add(1)
	actx := r.auditContext(ctx) // for audit records: written even if ctx has ended

	invalid := g.validate(call, tool)
	cerr := ctx.Err()

	// 0. A flooded run refuses everything; only the first refusal is audited, so the log stays bounded. The run
	// is flooded exactly when its denials reached maxDenied (addDenied), so the atomic flag spares the lock to
	// every call of a run that is not.
	if r.flooded.Load() {
		r.mu.Lock()
		first := !r.flood
		r.flood = true
		if !first {
			r.unaudited++
		}
		denied := r.denied
		r.mu.Unlock()
		reason := "the run has had " + strconv.FormatInt(denied, 10) + " denied calls (max_denied_calls); every further call is refused"
		if first {
			return r.deny(actx, call, nil, ErrCallFlood, ErrToolLimit, "gate", reason+" and only this one is audited")
		}
		derr := &DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: reason, DecidedBy: "gate", Kind: ErrCallFlood, Err: ErrToolLimit}
		return Outcome{Call: call, Decision: Decision{Reason: reason, DecidedBy: "gate"}, Status: StatusDenied}, derr
	}
	// 1. The hard cap counts every call that is well formed and still wanted.
	var n int64
	if invalid == "" && cerr == nil {
		n = r.calls.Add(1)
	}

	if invalid != "" {
		return r.deny(actx, call, nil, ErrInvalidCall, nil, "gate", invalid)
	}
	if cerr != nil {
		return r.deny(actx, call, nil, cerr, cerr, "gate", "the call's context ended before it was decided")
	}
	if n > g.maxCalls {
		return r.deny(actx, call, nil, ErrToolLimit, nil, "budget", "max_tool_calls ("+strconv.FormatInt(g.maxCalls, 10)+") reached")
	}

	// 2. The policy.
	v, err := g.evaluate(ctx, call)
	call.Effect = call.Effect.Stricter(v.Effect).Resolve()
	call.Cost = max(call.Cost, v.Cost)
	if err != nil {
		return r.deny(actx, call, nil, ErrDenied, err, "policy", "policy error: "+err.Error())
	}
	switch v.Action {
	case Allow, NeedsApproval, Pause:
	case Deny:
		return r.deny(actx, call, nil, ErrDenied, nil, "policy", orDefault(v.Reason, "denied by policy"))
	default:
		return r.deny(actx, call, nil, ErrDenied, nil, "policy", "policy returned an unknown action "+v.Action.String())
	}

	// 3. Budgets, before the call.
	if reason := r.reserve(call); reason != "" {
		return r.deny(actx, call, nil, ErrBudgetExceeded, nil, "budget", reason)
	}
	settle := func(CallReport) {}
	// A call allowed outright, with the budget and the audit chain in one store, books the budget with its
	// "allowed" record (step 5): one transaction for both.
	joint := r.joint
	if v.Action != Allow {
		joint = nil
	}
	if r.budget != nil && joint == nil {
		s, err := reserveBudget(ctx, r.budget, call)
		if err != nil {
			r.release(call)
			return r.deny(actx, call, nil, ErrBudgetExceeded, err, "budget", "budget: "+err.Error())
		}
		if s != nil {
			settle = func(c CallReport) { safeSettle(g.log, s, c) }
		}
	}

	// 4. Approval.
	// The call's one reading of the wall clock: its later instants (the tool's start and end) are this one plus
	// the monotonic time since, which costs half as much to read and keeps one call's records in order even if
	// the wall clock is stepped meanwhile.
	decided := r.now()
	display := g.redactArgs(call.Tool, call.Args)
	rec := g.baseRecordAt(call, decided)
	g.setArgs(&rec, display)
	dec := Decision{Allow: true, Reason: orDefault(v.Reason, "allowed by policy"), DecidedBy: "policy"}
	var approvalWait time.Duration
	if v.Action == NeedsApproval || v.Action == Pause {
		asked := time.Now()
		d, kind, cause := g.approve(ctx, ApprovalRequest{
			Call: call, Reason: orDefault(v.Reason, "approval required"), DisplayArgs: display,
		})
		approvalWait = time.Since(asked)
		rec.Time = g.clock() // the record is of the decision, which came now
		if kind != nil {
			r.release(call)
			settle(CallReport{})
			out, err := r.deny(actx, call, &rec, kind, cause, d.DecidedBy, d.Reason)
			out.ApprovalWait = approvalWait
			return out, err
		}
		dec = d
	}

	// 5. The "allowed" record must be written before the tool runs.
	rec.Decision, rec.Reason, rec.DecidedBy, rec.Outcome = "allow", dec.Reason, dec.DecidedBy, StatusAllowed
	var aerr error
	if joint != nil {
		s, berr, err := joint.bookAndRecord(ctx, call, &rec)
		if berr != nil {
			r.release(call)
			return r.deny(actx, call, nil, ErrBudgetExceeded, berr, "budget", "budget: "+berr.Error())
		}
		if s != nil {
			settle = func(c CallReport) { safeSettle(g.log, s, c) }
		}
		aerr = err
	} else {
		aerr = g.record(actx, &rec)
	}
	if err := aerr; err != nil {
		r.release(call)
		settle(CallReport{})
		r.addDenied()
		g.log.Error("governance: audit failed; tool not run", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "error", err)
		dec = Decision{Allow: false, Reason: "the audit record could not be written: " + strings.TrimPrefix(err.Error(), ErrAudit.Error()+": "), DecidedBy: "gate"}
		return Outcome{Call: call, Decision: dec, Status: StatusDenied, AuditErr: err, ApprovalWait: approvalWait},
			&DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: dec.Reason, DecidedBy: dec.DecidedBy, Kind: ErrAudit, Err: err}
	}

	// 6. The tool. Its time counts from the decision (the "allowed" record is all that came between).
	start := decided
	if approvalWait > 0 {
		start = r.now()
	}
	if inline(ctx) {
		// The caller's goroutine is abandoned when ctx ends: the tool runs here, watched by a timer.
		res, terr, abandoned := r.runInline(ctx, actx, call, tool, &rec, start, settle, span, dec, approvalWait)
		if abandoned {
			// Its "abandoned" record was written and its budget settled when the gate gave up on it; the "late"
			// record too, by now.
			return Outcome{Call: call, Decision: dec, Status: StatusAbandoned, Duration: time.Since(start), ApprovalWait: approvalWait}, terr
		}
		return r.outcome(actx, call, dec, &rec, res, terr, nil, start, approvalWait, settle)
	}
	res, terr, late := r.runBounded(ctx, actx, call, tool, &rec, start)
	return r.outcome(actx, call, dec, &rec, res, terr, late, start, approvalWait, settle)
}

// outcome settles the budget, writes the outcome record of a tool that ran (ok, failed or abandoned) and
// returns the call's Outcome.
func (r *Run) outcome(actx context.Context, call Call, dec Decision, rec *Record, res []byte, terr error, late chan struct{}, start time.Time, approvalWait time.Duration, settle func(CallReport)) (Outcome, error) {
	g := r.g
	dur := time.Since(start)
	end := start.Add(dur)
	settle(CallReport{Ran: true, Failed: terr != nil, Duration: dur, ResultSize: len(res)})

	// 7. The outcome.
	out := Outcome{Call: call, Decision: dec, Status: StatusOK, Result: res, Duration: dur, ApprovalWait: approvalWait}
	if g.now == nil {
		rec.Time = end.UTC()
	} else {
		rec.Time = g.now().UTC()
	}
	rec.Outcome = StatusOK
	rec.Duration = dur
	if late != nil {
		out.Status = StatusAbandoned
		rec.Outcome = StatusAbandoned
		rec.Error = truncateUTF8(terr.Error(), maxErrorBytes)
		defer close(late) // the tool's goroutine writes its "late" record after this one
	} else if terr != nil {
		out.Status = StatusFailed
		rec.Outcome = StatusFailed
		rec.Error = truncateUTF8(terr.Error(), maxErrorBytes)
	} else if g.mem != nil && res != nil && len(res) <= maxDeferredResult {
		// The memory auditor keeps a copy of a small result and hashes it when the record is read.
		if err := g.mem.keep(rec, res); err != nil {
			out.AuditErr = err
			g.log.Error("governance: outcome not audited", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "error", err)
		}
		return out, nil
	} else {
		sum := sha256.Sum256(res)
		var hexSum [2 * sha256.Size]byte
		hex.Encode(hexSum[:], sum[:])
		rec.ResultSize = int64(len(res))
		rec.ResultSHA256 = string(hexSum[:]) // one allocation, where hex.EncodeToString makes two
	}
	if err := g.record(actx, rec); err != nil {
		out.AuditErr = err
		g.log.Error("governance: outcome not audited", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "error", err)
	}
	return out, terr
}

// deny records and returns a denial. rec, if not nil, is the record prepared so far (its Args already redacted).
func (r *Run) deny(actx context.Context, call Call, rec *Record, kind, cause error, by, reason string) (Outcome, error) {
	g := r.g
	var rc Record
	if rec != nil {
		rc = *rec
	} else {
		rc = g.newRecord(call, kind != ErrInvalidCall && kind != ErrCallFlood)
	}
	if by == "" {
		by = "gate"
	}
	dec := Decision{Allow: false, Reason: reason, DecidedBy: by}
	rc.Decision, rc.Reason, rc.DecidedBy, rc.Outcome = "deny", reason, by, StatusDenied
	if kind != ErrCallFlood { // refusals of a flooded run are counted apart (RunUsage.Unaudited)
		r.addDenied()
	}
	derr := &DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: reason, DecidedBy: by, Kind: kind, Err: cause}
	rc.Error = truncateUTF8(derr.Error(), maxErrorBytes)
	out := Outcome{Call: call, Decision: dec, Status: StatusDenied}
	if err := g.record(actx, &rc); err != nil {
		out.AuditErr = err
		g.log.Error("governance: denial not audited", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "error", err)
	}
	if g.log.IsDebug() {
		g.log.Debug("governance: call denied", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "by", by, "reason", reason)
	}
	return out, derr
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// validate returns why call is malformed, or "".
func (g *Gate) validate(call Call, tool ToolFunc) string {
	switch {
	case call.Tool == "":
		return "empty tool name"
	case len(call.Tool) > maxToolNameBytes:
		return "tool name longer than " + strconv.Itoa(maxToolNameBytes) + " bytes"
	case !utf8.ValidString(call.Tool):
		return "tool name is not valid UTF-8"
	case !call.Source.valid():
		return "unknown source " + strconv.Quote(string(call.Source))
	case call.Cost < 0:
		return "negative cost"
	case call.Effect > Irreversible:
		return "invalid effect " + strconv.Itoa(int(call.Effect))
	case tool == nil:
		return "no tool function"
	case g.maxArgs > 0 && len(call.Args) > g.maxArgs:
		return "arguments are " + strconv.Itoa(len(call.Args)) + " bytes, more than " + strconv.Itoa(g.maxArgs)
	case len(call.Args) > 0 && !jsonvalid.Valid(call.Args):
		return "arguments are not valid JSON"
	}
	if reason := duplicateKey(call.Args); reason != "" {
		return reason
	}
	for i := 0; i < len(call.Tool); i++ {
		if c := call.Tool[i]; c < 0x20 || c == 0x7f || (c >= utf8.RuneSelf && hasControl(call.Tool[i:])) {
			return "tool name contains control characters"
		} else if c >= utf8.RuneSelf {
			break
		}
	}
	return ""
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func (g *Gate) clock() time.Time {
	if g.now != nil {
		return g.now().UTC()
	}
	return time.Now().UTC()
}

// newRecord starts the record of call; with argsOK its arguments are redacted into it (or their size and
// hash, when too large), otherwise they are null and only their size is kept.
func (g *Gate) newRecord(call Call, argsOK bool) Record {
	rec := g.baseRecord(call)
	switch {
	case argsOK && len(call.Args) > 0:
		g.setArgs(&rec, g.redactArgs(call.Tool, call.Args))
	case len(call.Args) > 0:
		rec.ArgsSize = int64(len(call.Args))
	}
	return rec
}

// baseRecord starts the record of call, without its arguments.
func (g *Gate) baseRecord(call Call) Record { return g.baseRecordAt(call, time.Now()) }

// baseRecordAt is baseRecord for a call decided at now (the gate's clock, if it has one, is read instead).
func (g *Gate) baseRecordAt(call Call, now time.Time) Record {
	t := now.UTC()
	if g.now != nil {
		t = g.now().UTC()
	}
	rec := Record{
		Version: RecordVersion,
		Time:    t,
		RunID:   call.RunID,
		Seq:     call.Seq,
		Tool:    truncateUTF8(call.Tool, maxToolNameBytes),
		Source:  call.Source,
		Effect:  call.Effect,
		Cost:    call.Cost,
	}
	if rec.Effect > Irreversible {
		rec.Effect = Irreversible
	}
	return rec
}

// setArgs puts args (already redacted) into rec, or only their size and SHA-256 if they are larger than
// MaxAuditArgsBytes.
func (g *Gate) setArgs(rec *Record, args json.RawMessage) {
	if len(args) == 0 {
		return
	}
	if g.maxAuditArgs > 0 && len(args) > g.maxAuditArgs {
		sum := sha256.Sum256(args)
		rec.Args, rec.ArgsSize, rec.ArgsSHA256 = nil, int64(len(args)), hex.EncodeToString(sum[:])
		return
	}
	rec.Args = args
}

var (
	redactionFailed  = json.RawMessage(`"[redaction failed]"`)
	redactionInvalid = json.RawMessage(`"[redaction returned invalid JSON]"`)
)

func (g *Gate) redactArgs(tool string, args json.RawMessage) (out json.RawMessage) {
	if g.redact == nil {
		return args
	}
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("governance: redaction hook panicked", "tool", tool, "panic", fmt.Sprint(p))
			out = redactionFailed
		}
	}()
	out = g.redact(tool, args)
	if len(out) > 0 && !jsonvalid.Valid(out) {
		g.log.Error("governance: redaction hook returned invalid JSON", "tool", tool)
		return redactionInvalid
	}
	return out
}

func (g *Gate) evaluate(ctx context.Context, call Call) (v Verdict, err error) {
	if g.policy == nil {
		return Verdict{Action: Deny, Reason: "no policy configured"}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			v, err = Verdict{}, fmt.Errorf("policy panicked: %v", p)
		}
	}()
	return g.policy.Evaluate(ctx, call)
}

func (g *Gate) record(ctx context.Context, rec *Record) (err error) {
	if g.mem != nil {
		return g.mem.keep(rec, nil)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: auditor panicked: %v", ErrAudit, p)
		}
	}()
	if err = g.auditor.Record(ctx, *rec); err != nil && !errors.Is(err, ErrAudit) {
		err = fmt.Errorf("%w: %w", ErrAudit, err)
	}
	return err
}

type approvalResult struct {
	d   Decision
	err error
}

// approve asks the approver. It returns the decision and, for a denial, its kind and cause.
func (g *Gate) approve(ctx context.Context, req ApprovalRequest) (Decision, error, error) {
	deny := func(kind, cause error, by, reason string) (Decision, error, error) {
		return Decision{Allow: false, Reason: reason, DecidedBy: by}, kind, cause
	}
	if g.approver == nil {
		return deny(ErrApprovalDenied, nil, "gate", "approval required but no approver is configured")
	}
	if p := deadlinePauser(ctx); p != nil {
		resume := p.PauseDeadline()
		defer resume()
	}
	actx, cancel := context.WithCancel(ctx)
	if g.approvalTimeout > 0 {
		actx, cancel = context.WithTimeout(ctx, g.approvalTimeout)
	}
	defer cancel()
	req.Deadline, _ = actx.Deadline()

	ch := make(chan approvalResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- approvalResult{err: fmt.Errorf("approver panicked: %v", p)}
			}
		}()
		d, err := g.approver.Approve(actx, req)
		ch <- approvalResult{d, err}
	}()

	var res approvalResult
	select {
	case res = <-ch:
	case <-actx.Done():
	}
	// An answer that arrives together with the timeout does not count: the deadline is part of the contract.
	if actx.Err() != nil {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return deny(err, err, "gate", "approval abandoned: "+err.Error())
		}
		reason := "no answer before the call's deadline"
		if ctx.Err() == nil {
			reason = "no answer within " + g.approvalTimeout.String()
		}
		return deny(ErrApprovalTimeout, context.DeadlineExceeded, "gate", reason)
	}
	if res.err != nil {
		return deny(ErrApprovalDenied, res.err, "gate", "approver error: "+res.err.Error())
	}
	d := res.d
	if d.DecidedBy == "" {
		d.DecidedBy = "approver"
	}
	if !d.Allow {
		return deny(ErrApprovalDenied, nil, d.DecidedBy, orDefault(d.Reason, "denied by the approver"))
	}
	d.Reason = orDefault(d.Reason, "approved")
	return d, nil, nil
}

func reserveBudget(ctx context.Context, b Budget, call Call) (s func(CallReport), err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("budget panicked: %v", p)
		}
	}()
	return b.Reserve(ctx, call)
}

func safeSettle(log hclog.Logger, s func(CallReport), c CallReport) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("governance: budget settle panicked", "panic", fmt.Sprint(p))
		}
	}()
	s(c)
}

// The states of a tool call run by a worker: the worker and the waiting caller each try to move it out of
// running, and only one of them can.
const (
	toolRunning int32 = iota
	toolFinished
	toolAbandoned
)

// toolJob is one tool call handed to a run's worker goroutine.
type toolJob struct {
	ctx, actx context.Context
	r         *Run
	call      Call
	tool      ToolFunc
	start     time.Time
	state     atomic.Int32
	// Set by the caller before it abandons the call (read by the worker only then): the record to base the
	// "late" one on, and the channel closed once the "abandoned" record is written.
	rec  *Record
	late chan struct{}
	res  []byte
	err  error
}

// Run is the worker's side of a call: run the tool, then either leave the result to the caller or, if the
// caller abandoned the call, write the "late" record once the "abandoned" one is written.
func (j *toolJob) Run() {
	res, err := runTool(j.ctx, j.call, j.tool)
	if j.state.CompareAndSwap(toolRunning, toolFinished) {
		j.res, j.err = res, err // read by the caller after the worker's Done
		return
	}
	g := j.r.g
	dur := time.Since(j.start)
	<-j.late
	g.recordLate(j.actx, *j.rec, j.call, dur, res, err)
}

// recordLate writes the "late" record of an abandoned tool that returned after dur, based on the call's record.
func (g *Gate) recordLate(actx context.Context, lr Record, call Call, dur time.Duration, res []byte, err error) {
	lr.Time = g.clock()
	lr.Outcome, lr.Duration, lr.Error = StatusLate, dur, ""
	lr.Reason = "the tool returned after the gate had abandoned it; its result was discarded"
	if err != nil {
		lr.Error = truncateUTF8(err.Error(), maxErrorBytes)
	} else {
		sum := sha256.Sum256(res)
		lr.ResultSize, lr.ResultSHA256 = int64(len(res)), hex.EncodeToString(sum[:])
	}
	if aerr := g.record(actx, &lr); aerr != nil {
		g.log.Debug("governance: late result not audited", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "error", aerr)
	}
}

// runBounded runs tool with ctx and returns its result, or gives up GateConfig.ToolGrace after ctx ended. For
// an abandoned tool it returns a *ToolError with Abandoned set and a channel that the caller closes once it
// has written the "abandoned" record; the tool's goroutine then writes a "late" record (based on rec) when the
// tool returns.
//
// The tool runs on the run's worker goroutine (internal/handoff), reused from call to call: one handoff each
// way instead of a new goroutine whose stack grows on every call. A worker whose tool is abandoned is never
// reused, so a tool that hangs delays no later call; the next call gets a new worker.
func (r *Run) runBounded(ctx, actx context.Context, call Call, tool ToolFunc, rec *Record, start time.Time) ([]byte, error, chan struct{}) {
	if ctx.Done() == nil { // nothing can end this call: run the tool here
		res, err := runTool(ctx, call, tool)
		return res, err, nil
	}
	g := r.g
	j := &toolJob{ctx: ctx, actx: actx, r: r, call: call, tool: tool, start: start}
	w := r.workers.Start(ctx, j)
	finished := func() ([]byte, error, chan struct{}) {
		<-w.Done()
		r.workers.Put(w)
		return j.res, j.err, nil
	}
	select {
	case <-w.Done():
		r.workers.Put(w)
		return j.res, j.err, nil
	case <-ctx.Done():
	}
	if g.toolGrace > 0 {
		t := time.NewTimer(g.toolGrace)
		select {
		case <-w.Done():
			t.Stop()
			r.workers.Put(w)
			return j.res, j.err, nil
		case <-t.C:
		}
	}
	lateRec := *rec // a copy, so that rec stays on the caller's stack on the common path
	j.rec, j.late = &lateRec, make(chan struct{})
	if !j.state.CompareAndSwap(toolRunning, toolAbandoned) { // it returned just now
		return finished()
	}
	w.Abandon()
	return nil, g.abandonedError(ctx, call), j.late
}

// runTool runs tool, turning errors and panics into *ToolError.
func runTool(ctx context.Context, call Call, tool ToolFunc) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			te := &ToolError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Panic: p, Stack: debug.Stack()}
			if e, ok := p.(error); ok {
				te.Err = e
			}
			res, err = nil, te
		}
	}()
	res, err = tool(ctx, call)
	if err != nil {
		err = &ToolError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Err: err}
	}
	return res, err
}

// reserve applies the run's Limits to call and books it; it returns why the call is refused, or "".
//
// A call that no limit applies to (no cap on its tool, no cost or no cost limit, not irreversible or no limit
// of those) only adds to counters, atomically and without the lock; any other is checked and booked under the
// run's lock. The two never disagree: a counter that some call's limit reads is only ever changed under the
// lock (a tool's counter when the limits cap that tool, the cost when they cap the cost and the call costs
// something, the irreversible calls when they cap those and the call is irreversible).
func (r *Run) reserve(call Call) string {
	l := &r.g.limits
	costly := call.Cost > 0 && l.MaxCostUnits != 0
	irrev := call.Effect == Irreversible
	capped := irrev && l.MaxIrreversible != 0
	if r.g.plainLimits && !costly && !capped {
		r.toolCounter(call.Tool).n.Add(1)
		if call.Cost > 0 {
			r.cost.Add(call.Cost)
		}
		if irrev {
			r.irreversible.Add(1)
		}
		return ""
	}
	c := r.toolCounter(call.Tool)
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit, ok := l.ToolCaps[call.Tool]; ok && c.n.Load() >= max(limit, 0) {
		return "max calls of this tool per run (" + strconv.FormatInt(max(limit, 0), 10) + ") reached"
	}
	if costly {
		if used := r.cost.Load(); l.MaxCostUnits < 0 || call.Cost > l.MaxCostUnits-used {
			return fmt.Sprintf("cost units: %d used + %d would exceed max %d", used, call.Cost, max(l.MaxCostUnits, 0))
		}
	}
	if capped && r.irreversible.Load() >= max(l.MaxIrreversible, 0) {
		return "max irreversible calls per run (" + strconv.FormatInt(max(l.MaxIrreversible, 0), 10) + ") reached"
	}
	c.n.Add(1)
	r.cost.Add(call.Cost)
	if irrev {
		r.irreversible.Add(1)
	}
	return ""
}

// release refunds what reserve booked for call.
func (r *Run) release(call Call) {
	r.toolCounter(call.Tool).n.Add(-1)
	r.cost.Add(-call.Cost)
	if call.Effect == Irreversible {
		r.irreversible.Add(-1)
	}
}

// Policy returns the gate's policy (nil if none: every call is denied).
func (g *Gate) Policy() Policy { return g.policy }

// Approver returns the gate's approver (nil if none: every call that needs approval is denied).
func (g *Gate) Approver() Approver { return g.approver }

// Limits returns a copy of the per-run limits every Run of the gate enforces.
func (g *Gate) Limits() Limits { return g.limits.clone() }

// Gate returns the gate the run belongs to.
func (r *Run) Gate() *Gate { return r.g }

// inlineJob is one tool running on its caller's goroutine (runInline). The tool's return and the gate's giving
// up race on state, as for toolJob.
type inlineJob struct {
	ctx, actx context.Context
	r         *Run
	call      Call
	rec       Record // the caller's record as the tool started: a copy, so the caller's stays on its stack
	start     time.Time
	settle    func(CallReport)
	state     atomic.Int32
	late      chan struct{} // made by abandon, and closed once the "abandoned" record is written
	terr      error         // written by abandon before it closes late
	// For the call's span, which abandon ends (Do does not, for an abandoned inline call).
	span         trace.Span
	dec          Decision
	approvalWait time.Duration
	// w is the watch j was registered with (guarded by the run's mu), and inSlot whether j is in its slot
	// rather than among its jobs under the lock.
	w      *inlineWatch
	inSlot bool
}

// inlineWatch is the one AfterFunc of a context under which tools run inline, and those tools. A sandbox's
// calls come one at a time under one context: such a call takes the slot, an atomic, without the run's lock;
// calls running at the same time as it go to one and more, under the lock.
//
// The slot and the context's end never miss each other: a call puts its job in the slot and then reads ended;
// the end sets ended and then empties the slot. Either the end finds the job in the slot (and abandons it in
// time), or the call sees ended and takes its job back (and registers it under the lock, where the end has
// already happened, so a new watch fires at once).
type inlineWatch struct {
	done  <-chan struct{}
	slot  atomic.Pointer[inlineJob]
	ended atomic.Bool
	one   *inlineJob
	more  map[*inlineJob]struct{}
}

func (w *inlineWatch) add(j *inlineJob) {
	if w.one == nil {
		w.one = j
		return
	}
	if w.more == nil {
		w.more = map[*inlineJob]struct{}{}
	}
	w.more[j] = struct{}{}
}

// remove takes j out of w, reporting whether it was there.
func (w *inlineWatch) remove(j *inlineJob) bool {
	if w.one == j {
		w.one = nil
		return true
	}
	if _, ok := w.more[j]; ok {
		delete(w.more, j)
		return true
	}
	return false
}

// take empties w and returns its jobs.
func (w *inlineWatch) take() []*inlineJob {
	var jobs []*inlineJob
	if w.one != nil {
		jobs = append(jobs, w.one)
	}
	for j := range w.more {
		jobs = append(jobs, j)
	}
	w.one, w.more = nil, nil
	return jobs
}

// runInline runs tool on the calling goroutine, for a caller that abandons this goroutine when ctx ends (see
// internal/handoff.WithCallerAbandons): no handoff each way, which in a tight loop of calls costs more than the
// rest of the call, since each handoff wakes a parked thread. The gate still keeps its bound: when ctx ends, a
// timer gives the tool GateConfig.ToolGrace, then writes the "abandoned" record and settles the budget exactly as
// runBounded's caller does; the tool's eventual return then writes the "late" record behind it and Do returns an
// Outcome nobody waits for. It reports abandoned when that happened (the records are written and settle was
// called); otherwise the caller writes the outcome as usual.
func (r *Run) runInline(ctx, actx context.Context, call Call, tool ToolFunc, rec *Record, start time.Time, settle func(CallReport),
	span trace.Span, dec Decision, approvalWait time.Duration) ([]byte, error, bool) {
	j := r.watchInline(ctx, func(j *inlineJob) {
		j.ctx, j.actx, j.call, j.rec, j.start, j.settle = ctx, actx, call, *rec, start, settle
		j.span, j.dec, j.approvalWait = span, dec, approvalWait
	})
	res, err := runTool(ctx, call, tool)
	if r.unwatchInline(j) {
		return res, err, false // no timer saw j: the tool finished first, and j is the run's spare again
	}
	if j.state.CompareAndSwap(toolRunning, toolFinished) {
		return res, err, false
	}
	<-j.late // abandon wrote the "abandoned" record
	r.g.recordLate(actx, j.rec, call, time.Since(start), res, err)
	return nil, j.terr, true
}

// watchInline takes the run's spare job (or a new one), fills it in with fill and registers it under its
// context's watch, creating the watch (one AfterFunc) for a new context. A call under the context of the last
// watch takes the watch's slot when it is free, without the lock; any other registers under the lock, which
// orders the job's fields before any timer's reads (the slot's atomics do that for the slot). A watch lives
// until its context ends (the sandbox ends the context of every exec when it returns); a context that has
// already ended fires at once.
func (r *Run) watchInline(ctx context.Context, fill func(*inlineJob)) *inlineJob {
	done := ctx.Done()
	j := r.spare.Swap(nil)
	if j == nil {
		j = &inlineJob{r: r}
	}
	fill(j)
	if w := r.lastWatch.Load(); w != nil && w.done == done && !w.ended.Load() {
		if testHookBeforeSlot != nil {
			testHookBeforeSlot()
		}
		if w.slot.CompareAndSwap(nil, j) {
			j.w, j.inSlot = w, true
			if !w.ended.Load() || !w.slot.CompareAndSwap(j, nil) {
				return j // registered; or the context's end took it from the slot, and abandons it in time
			}
			j.w, j.inSlot = nil, false // the context ended meanwhile and its watch missed j: register it anew
		}
	}
	r.mu.Lock()
	w := r.lastWatch.Load()
	first := false
	if w == nil || w.done != done {
		w = r.watches[done]
		if first = w == nil; first {
			if r.watches == nil {
				r.watches = map[<-chan struct{}]*inlineWatch{}
			}
			w = &inlineWatch{done: done}
			r.watches[done] = w
		}
		r.lastWatch.Store(w)
	}
	w.add(j)
	j.w = w
	r.mu.Unlock()
	if first {
		context.AfterFunc(ctx, func() { r.inlineCtxEnded(done) })
	}
	return j
}

// testHookBeforeSlot, if set (by tests), runs between a call's first look at its watch and its taking the slot.
var testHookBeforeSlot func()

// unwatchInline removes j from its context's watch once its tool has returned. It reports whether j was still
// there: then no timer was armed for it, nothing else can reach it, and it becomes the run's spare (cleared of
// the call). Otherwise the context ended while the tool ran and j is left to the race with its timer.
func (r *Run) unwatchInline(j *inlineJob) bool {
	if j.inSlot {
		if !j.w.slot.CompareAndSwap(j, nil) {
			return false // its context ended (inlineCtxEnded took it from the slot)
		}
	} else {
		r.mu.Lock()
		removed := j.w.remove(j)
		r.mu.Unlock()
		if !removed { // its context ended (inlineCtxEnded emptied the watch)
			return false
		}
	}
	j.ctx, j.actx, j.call, j.rec, j.settle, j.span, j.dec, j.w, j.inSlot = nil, nil, Call{}, Record{}, nil, nil, Decision{}, nil, false
	r.spare.Store(j)
	return true
}

// inlineCtxEnded runs when a context under which tools run inline ends: every tool still running gets its grace,
// and the watch is dropped (a later call under the same context makes a new one, which fires at once).
func (r *Run) inlineCtxEnded(done <-chan struct{}) {
	r.mu.Lock()
	var jobs []*inlineJob
	if w := r.watches[done]; w != nil {
		w.ended.Store(true)
		if j := w.slot.Swap(nil); j != nil {
			jobs = append(jobs, j)
		}
		jobs = append(jobs, w.take()...)
		delete(r.watches, done)
		r.lastWatch.CompareAndSwap(w, nil)
	}
	r.mu.Unlock()
	for _, j := range jobs {
		r.g.armAbandon(j)
	}
}

// armAbandon gives the running tool of j its ToolGrace, then abandons it.
func (g *Gate) armAbandon(j *inlineJob) {
	if g.toolGrace > 0 {
		time.AfterFunc(g.toolGrace, j.abandon)
		return
	}
	j.abandon()
}

// abandon gives up on the tool of j if it is still running: the "abandoned" outcome record and the budget's
// settlement, as runBounded's caller would write them, then the signal for the "late" record.
func (j *inlineJob) abandon() {
	j.late = make(chan struct{}) // before the race, as runBounded does: the tool's side waits on it once it lost
	if !j.state.CompareAndSwap(toolRunning, toolAbandoned) {
		return // it returned first
	}
	rec := j.rec // the "late" record starts again from j.rec
	j.terr = j.r.g.abandonedError(j.ctx, j.call)
	out, _ := j.r.outcome(j.actx, j.call, j.dec, &rec, nil, j.terr, j.late, j.start, j.approvalWait, j.settle) // closes late
	j.r.g.tel.end(j.ctx, j.span, out, j.terr)
	handoff.Abandoned(j.ctx) // the caller may stop waiting: the call is recorded
}

// abandonedError is the error of a call whose tool the gate gave up on because ctx ended.
func (g *Gate) abandonedError(ctx context.Context, call Call) *ToolError {
	cerr := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != cerr {
		cerr = fmt.Errorf("%w (%w)", cerr, cause)
	}
	g.log.Debug("governance: tool abandoned", "run", call.RunID, "seq", call.Seq, "tool", call.Tool, "grace", g.toolGrace)
	return &ToolError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Err: cerr, Abandoned: true}
}
