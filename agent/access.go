package agent

import (
	"context"
	"encoding/json"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// toolAccess is what the gate will do with every call of a tool from a program, as far as can be known without
// calling it. Only certain outcomes count: anything that may depend on the arguments, the run's counters or a
// policy the agent cannot read is accessMaybe.
type toolAccess uint8

const (
	accessMaybe    toolAccess = iota // may run: shown as is
	accessApproval                   // never runs without a person's approval: shown, and marked
	accessNever                      // always refused: not shown to the model
)

// gateView is what the agent knows of a Gate's decisions: its policy and whether its approver refuses
// everything.
type gateView struct {
	known          bool // policy is the gate's policy (nil: the gate denies every call)
	policy         governance.Policy
	approverKnown  bool
	approverDenies bool // every approval request is refused (no approver, or governance.DenyAll)
}

// defaultGateView is the view of wasmbox.DefaultGate: EffectPolicy, and DenyAll for approvals.
var defaultGateView = gateView{known: true, policy: governance.EffectPolicy{}, approverKnown: true, approverDenies: true}

// viewOf reads what the gate exposes. A gate without accessors for its policy and approver is opaque: every tool
// is then shown as is.
func viewOf(g *governance.Gate) gateView {
	var v gateView
	if p, ok := any(g).(interface{ Policy() governance.Policy }); ok {
		v.known, v.policy = true, p.Policy()
	}
	if a, ok := any(g).(interface{ Approver() governance.Approver }); ok {
		v.approverKnown = true
		switch a.Approver().(type) {
		case nil, governance.DenyAll, *governance.DenyAll:
			v.approverDenies = true
		}
	}
	return v
}

// access decides a tool's access for the programs (governance.SourcePython).
//
// The rule: a tool is hidden only when the policy refuses it whatever its arguments, or when it always needs
// approval and the approver refuses everything; it is marked as needing approval when the policy asks for
// approval whatever its arguments. Only policies whose decision can be computed without side effects are
// evaluated: EffectPolicy, AllowAllPolicy, DenyAllPolicy and a compiled PolicySpec (*RulePolicy). For a
// RulePolicy the tool's argument rules are dropped before evaluating a call with no arguments; that is sound
// because argument rules can only make a decision stricter (deny, or ask), never allow what the rest of the
// policy denies or lift an approval. Any other policy (a PolicyFunc, Combine) is never evaluated here, and its
// tools are shown as is. The run's limits (MaxIrreversible below zero, ToolCaps) are not consulted, so a tool
// refused only by them is still shown; the gate still refuses its calls.
func (v gateView) access(t hostfuncs.Tool) toolAccess {
	if !v.known {
		return accessMaybe
	}
	a := policyAccess(v.policy, t)
	if a == accessApproval && v.approverKnown && v.approverDenies {
		return accessNever
	}
	return a
}

func policyAccess(p governance.Policy, t hostfuncs.Tool) toolAccess {
	call := governance.Call{Tool: t.Name, Effect: t.Effect, Cost: t.Cost, Source: governance.SourcePython, Args: json.RawMessage("{}")}
	switch p := p.(type) {
	case nil:
		return accessNever // the gate denies every call without a policy
	case governance.DenyAllPolicy, *governance.DenyAllPolicy:
		return accessNever
	case governance.AllowAllPolicy, *governance.AllowAllPolicy:
		return accessMaybe
	case governance.EffectPolicy, *governance.EffectPolicy:
		return verdictAccess(governance.EffectPolicy{}.Evaluate(context.Background(), call))
	case *governance.RulePolicy:
		if p == nil {
			return accessMaybe
		}
		spec := p.Spec()
		if ts, ok := spec.Tools[t.Name]; ok && len(ts.Args) > 0 {
			ts.Args = nil
			spec.Tools[t.Name] = ts
		}
		np, err := governance.NewPolicy(spec)
		if err != nil {
			return accessMaybe
		}
		return verdictAccess(np.Evaluate(context.Background(), call))
	}
	return accessMaybe
}

func verdictAccess(v governance.Verdict, err error) toolAccess {
	switch {
	case err != nil:
		return accessMaybe
	case v.Action == governance.Deny:
		return accessNever
	case v.Action == governance.NeedsApproval:
		return accessApproval
	}
	return accessMaybe
}
