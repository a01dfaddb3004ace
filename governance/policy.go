package governance

import (
	"context"
	"fmt"
	"strings"
)

// Policy decides whether a call may run, must be approved first, or is denied. It is consulted for every call
// that is under the run's max_tool_calls cap, before budgets and approval.
//
// Evaluate must be safe for concurrent use and must not modify or retain call.Args. An error or a panic denies
// the call (ErrDenied, with the error as the cause). A nil Policy in [GateConfig] denies every call.
//
// [NewPolicy] compiles a declarative [PolicySpec]; [PolicyFunc] adapts a function.
type Policy interface {
	Evaluate(ctx context.Context, call Call) (Verdict, error)
}

// PolicyFunc adapts a function to the [Policy] interface.
type PolicyFunc func(ctx context.Context, call Call) (Verdict, error)

// Evaluate calls f(ctx, call).
func (f PolicyFunc) Evaluate(ctx context.Context, call Call) (Verdict, error) { return f(ctx, call) }

// AllowAllPolicy allows every call without approval, including irreversible ones. The run's limits still apply
// (max_tool_calls is a hard cap). Meant for tests and benchmarks; production gates want a [PolicySpec].
type AllowAllPolicy struct{}

// Evaluate allows the call.
func (AllowAllPolicy) Evaluate(context.Context, Call) (Verdict, error) {
	return Verdict{Action: Allow, Reason: "allow-all policy"}, nil
}

// EffectPolicy allows read-only and mutating calls and sends irreversible ones (and calls whose effect is not
// marked, which count as irreversible) to the approver. It is wasmbox's default policy.
type EffectPolicy struct{}

// Evaluate implements Policy.
func (EffectPolicy) Evaluate(_ context.Context, call Call) (Verdict, error) {
	if call.Effect.Resolve() == Irreversible {
		return Verdict{Action: NeedsApproval, Reason: "irreversible tools need approval"}, nil
	}
	return Verdict{Action: Allow, Reason: call.Effect.Resolve().String() + " tool"}, nil
}

// DenyAllPolicy denies every call.
type DenyAllPolicy struct{}

// Evaluate denies the call.
func (DenyAllPolicy) Evaluate(context.Context, Call) (Verdict, error) {
	return Verdict{Action: Deny, Reason: "deny-all policy"}, nil
}

// Combine returns a policy that consults every policy in order: the first Deny (or error) wins, otherwise
// NeedsApproval if any policy needs approval, otherwise Allow. Markings are merged: the stricter effect and the
// highest cost. Combine() with no policies denies everything.
func Combine(policies ...Policy) Policy {
	ps := append([]Policy(nil), policies...)
	return PolicyFunc(func(ctx context.Context, call Call) (Verdict, error) {
		if len(ps) == 0 {
			return Verdict{Action: Deny, Reason: "no policy"}, nil
		}
		out := Verdict{Action: Allow}
		var reasons []string
		for i, p := range ps {
			if p == nil {
				return Verdict{}, fmt.Errorf("governance: Combine: policy %d is nil", i)
			}
			v, err := p.Evaluate(ctx, call)
			if err != nil {
				return Verdict{}, err
			}
			out.Effect = out.Effect.Stricter(v.Effect)
			out.Cost = max(out.Cost, v.Cost)
			switch v.Action {
			case Allow:
			case NeedsApproval, Pause:
				if out.Action != Pause {
					out.Action = v.Action
				}
				if v.Reason != "" {
					reasons = append(reasons, v.Reason)
				}
			default:
				v.Effect, v.Cost = out.Effect, out.Cost
				v.Action = Deny
				return v, nil
			}
		}
		if out.Action == NeedsApproval || out.Action == Pause {
			out.Reason = strings.Join(reasons, "; ")
		}
		return out, nil
	})
}
