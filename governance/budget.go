package governance

import (
	"context"
	"maps"
	"time"
)

// DefaultMaxToolCalls is the per-run cap on tool calls when Limits.MaxToolCalls is zero.
const DefaultMaxToolCalls = 50

// DefaultMaxDeniedCalls is the per-run number of denied calls after which the run is flooded
// ([ErrCallFlood]) when Limits.MaxDeniedCalls is zero.
const DefaultMaxDeniedCalls = 100

// Limits are the per-run budgets that every [Run] enforces with its own counters (runs share nothing). All of
// them are checked before the tool runs; none can be lifted by the policy or the approver.
//
// The zero value is a run of at most DefaultMaxToolCalls calls and no other limit. There is deliberately no
// value meaning "unlimited" for MaxToolCalls: to allow more calls, say how many.
type Limits struct {
	// MaxToolCalls is the hard cap on calls per run, counted when a call reaches the gate, whatever its
	// outcome (so a model looping on a denied tool is stopped too). It is checked before anything else, so it
	// holds even with an allow-all policy. Zero means DefaultMaxToolCalls (50); a negative value means no
	// call at all (the only way to express a cap of zero).
	MaxToolCalls int64
	// MaxCostUnits caps the sum of Call.Cost over the calls of a run. Zero means no cost cap; a negative value
	// refuses every call with a positive cost.
	MaxCostUnits int64
	// MaxIrreversible caps the irreversible calls of a run (after effect resolution, so unmarked tools count).
	// Zero means no cap of its own (irreversible calls still need approval under the default policy rules, and
	// MaxToolCalls still bounds them); a negative value refuses every irreversible call.
	MaxIrreversible int64
	// ToolCaps caps the calls of individual tools per run, by exact tool name. An entry of zero or less
	// refuses every call of that tool. The gate copies the map.
	ToolCaps map[string]int64
	// MaxDeniedCalls bounds the denied calls of a run, whatever the reason (malformed calls, which
	// MaxToolCalls does not count, and calls past MaxToolCalls included). Once a run has had this many
	// denials it is flooded: every later call is refused with ErrCallFlood, only the first such refusal is
	// audited, and [Run.Flooded] reports true so that the caller can end the run. This bounds the records a
	// run can add to the audit log to 3×MaxToolCalls + MaxDeniedCalls + 1 (two per allowed call, one more
	// for a tool abandoned at a deadline that returns later, one per denial, one for the flood). Zero means DefaultMaxDeniedCalls (100); a negative value
	// means 1 (the first denial floods the run).
	MaxDeniedCalls int64
}

// Budget is an additional, pluggable meter, consulted after the run's own [Limits] and before approval. Use it
// for budgets the gate cannot know about, such as money spent per tenant across runs.
//
// Reserve is called before the tool runs. An error refuses the call (ErrBudgetExceeded, with the error as the
// cause). On success it may return a settle function, which the gate calls exactly once after the call: with
// Ran false when the call was refused later (approval, audit failure), so the reservation can be refunded, or
// with what the call did. Reserve and settle must be safe for concurrent use.
//
// GateConfig.NewBudget creates one Budget per run, so per-run state is natural; return a shared value from it
// for cross-run budgets.
type Budget interface {
	Reserve(ctx context.Context, call Call) (settle func(CallReport), err error)
}

// BudgetFunc adapts a function to the [Budget] interface.
type BudgetFunc func(ctx context.Context, call Call) (func(CallReport), error)

// Reserve calls f(ctx, call).
func (f BudgetFunc) Reserve(ctx context.Context, call Call) (func(CallReport), error) {
	return f(ctx, call)
}

// CallReport is what a budget's settle function learns after a call.
type CallReport struct {
	Ran        bool // false: the tool did not run; refund the reservation
	Failed     bool // the tool returned an error or panicked
	Duration   time.Duration
	ResultSize int
}

// RunUsage is a snapshot of a run's counters.
type RunUsage struct {
	// Calls counts the calls that reached the gate, denied ones included (the max_tool_calls counter).
	Calls int64
	// Denied counts the denied calls, malformed ones and those past the caps included (the MaxDeniedCalls
	// counter), but not the refusals of a flooded run (ErrCallFlood): the first of those is audited, and
	// Unaudited counts the others, which have no record of their own.
	Denied, Unaudited int64
	// CostUnits, Irreversible and PerTool count the calls that passed the budget check and were not refunded
	// (a call refused later, by approval or an audit failure, is refunded).
	CostUnits    int64
	Irreversible int64
	PerTool      map[string]int64
}

func (l Limits) clone() Limits {
	l.ToolCaps = maps.Clone(l.ToolCaps)
	return l
}

func (l Limits) maxDenied() int64 {
	switch {
	case l.MaxDeniedCalls == 0:
		return DefaultMaxDeniedCalls
	case l.MaxDeniedCalls < 0:
		return 1
	}
	return l.MaxDeniedCalls
}

func (l Limits) maxCalls() int64 {
	switch {
	case l.MaxToolCalls == 0:
		return DefaultMaxToolCalls
	case l.MaxToolCalls < 0:
		return 0
	}
	return l.MaxToolCalls
}
