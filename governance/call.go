package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Call is one tool call as the gate sees it.
//
// RunID and Seq are assigned by [Run.Do]: whatever the caller puts there is overwritten, so the audit log's
// identities cannot be forged by the code that makes the call. Seq counts the calls of one run from 1, denied
// calls included.
type Call struct {
	RunID string
	Seq   int64
	// Tool is the tool's name: non-empty, valid UTF-8, at most 256 bytes, no control characters.
	Tool string
	// Args are the call's arguments as JSON (empty means none). They must be valid JSON and at most
	// GateConfig.MaxArgsBytes long. The gate does not copy them: do not modify them while Do runs.
	Args json.RawMessage
	// Effect is what the tool can do to the world, as declared by the code that registered the tool. The
	// zero value, EffectUnspecified, is treated as Irreversible (see [Effect]).
	Effect Effect
	// Cost is the call's cost in budget units (zero: free); negative costs are invalid.
	Cost int64
	// Source says who made the call: python (model-written code in the sandbox), agent (a direct tool call by
	// the agent), container (an escalated container). Empty means unknown; it never matches a policy's
	// `sources` rule.
	Source Source
	// IdempotencyKey is set by the gate for the calls of a durable task: the same for every attempt of the call
	// (TASK/SEQ), so that a tool run again after its outcome was unknown can recognise the call. Empty
	// otherwise (RunID and Seq identify a call of other runs). Whatever the caller puts here is overwritten.
	IdempotencyKey string
}

// Source says where a call came from.
type Source string

// The sources of calls.
const (
	SourcePython    Source = "python"
	SourceAgent     Source = "agent"
	SourceContainer Source = "container"
)

func (s Source) valid() bool {
	switch s {
	case "", SourcePython, SourceAgent, SourceContainer:
		return true
	}
	return false
}

// Effect says what a tool can do to the world.
//
// The zero value is EffectUnspecified, which the gate treats exactly like Irreversible: a tool that nobody
// marked needs approval under the default rules and counts towards Limits.MaxIrreversible. This is the safe
// default: forgetting to mark a tool can only make the gate stricter. EffectUnspecified exists as a separate
// value only so that a policy can fill in a marking the caller left out; the gate resolves it before budgets,
// approval and audit, so records never say "unspecified".
//
// Effects are ordered ReadOnly < Mutating < Irreversible. When both the call and the policy mark a tool, the
// stricter marking wins: a policy can raise a tool's effect but never lower what its registration declares.
type Effect uint8

// The effects.
const (
	EffectUnspecified Effect = iota // treated as Irreversible
	ReadOnly                        // reads only; safe to retry
	Mutating                        // changes state that can be changed back
	Irreversible                    // cannot be undone: payments, e-mail, deletion
)

var effectNames = [...]string{"unspecified", "read_only", "mutating", "irreversible"}

// String returns "unspecified", "read_only", "mutating" or "irreversible".
func (e Effect) String() string {
	if int(e) < len(effectNames) {
		return effectNames[e]
	}
	return "Effect(" + strconv.Itoa(int(e)) + ")"
}

// Resolve returns e for ReadOnly and Mutating, and Irreversible for everything else (EffectUnspecified and
// invalid values).
func (e Effect) Resolve() Effect {
	if e == ReadOnly || e == Mutating {
		return e
	}
	return Irreversible
}

// Stricter returns the stricter of e and o, ignoring EffectUnspecified unless both are unspecified.
func (e Effect) Stricter(o Effect) Effect {
	switch {
	case e == EffectUnspecified:
		return o
	case o == EffectUnspecified:
		return e
	}
	return max(e.Resolve(), o.Resolve())
}

// MarshalText implements encoding.TextMarshaler.
func (e Effect) MarshalText() ([]byte, error) {
	if int(e) >= len(effectNames) {
		return nil, fmt.Errorf("governance: invalid effect %d", int(e))
	}
	return []byte(effectNames[e]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. It accepts exactly the names that String returns.
func (e *Effect) UnmarshalText(b []byte) error {
	for i, n := range effectNames {
		if string(b) == n {
			*e = Effect(i)
			return nil
		}
	}
	return fmt.Errorf("invalid effect %q (want read_only, mutating or irreversible)", b)
}

// Decision is the gate's final word on a call: allowed or not, why, and who decided. DecidedBy is "policy",
// "budget", "gate" (malformed calls, approval timeouts and approver failures, audit failures, cancelled
// contexts) or "approver:NAME" (for example "approver:terminal").
type Decision struct {
	Allow     bool
	Reason    string
	DecidedBy string
}

// Action is a policy's verdict on a call. The zero value is Deny.
type Action uint8

// The actions.
const (
	Deny          Action = iota // the call does not run
	Allow                       // the call runs (budgets permitting)
	NeedsApproval               // the call runs only if the Approver says yes
	// Pause: the call needs a decision that may take long (a person, hours later). In a durable task (see
	// [Gate.NewTask]) the task pauses at the call, as it does for NeedsApproval, and resumes once the decision
	// is recorded; in a run without a store it is asked of the Approver, like NeedsApproval.
	Pause
)

func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case NeedsApproval:
		return "needs_approval"
	case Pause:
		return "pause"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Verdict is what a [Policy] says about a call.
//
// Effect and Cost are the policy's markings of the tool: the gate uses Call.Effect.Stricter(Effect) and
// max(Call.Cost, Cost) from then on (budgets, approval request, audit). Leave them zero to keep the call's own.
type Verdict struct {
	Action Action
	Reason string
	Effect Effect
	Cost   int64
}

// Status is the outcome of a call as recorded in the audit log.
type Status string

// The statuses. Every allowed call produces two records, "allowed" (written before the tool runs) and then
// "ok", "failed" or "abandoned"; every denied call produces one record, "denied" (except the calls refused
// after a run was flooded, see [ErrCallFlood]). A tool that was abandoned and returns later gets a third
// record, "late", describing what it finally did (its result is discarded).
const (
	StatusAllowed   Status = "allowed"
	StatusOK        Status = "ok"
	StatusFailed    Status = "failed"
	StatusDenied    Status = "denied"
	StatusAbandoned Status = "abandoned"
	StatusLate      Status = "late"
)

// Outcome describes a call that went through [Run.Do].
type Outcome struct {
	// Call is the call as the gate saw it: RunID and Seq assigned, Effect and Cost resolved.
	Call Call
	// Decision is the gate's decision; for denials it matches the returned *DeniedError.
	Decision Decision
	// Status is StatusOK, StatusFailed, StatusAbandoned or StatusDenied.
	Status Status
	// Result is what the tool returned (also when it returned an error alongside).
	Result []byte
	// Duration is how long the tool ran (until the gate stopped waiting, for an abandoned tool); zero if it
	// did not run.
	Duration time.Duration
	// ApprovalWait is how long the gate waited for the approver; zero if the call did not need approval.
	ApprovalWait time.Duration
	// AuditErr is not nil when the record of this outcome could not be written. For a denied call the call is
	// denied regardless; for a call that ran, the tool's result and error are returned as they are (the
	// "allowed" record was written before it ran), because reporting an error for a call that took effect would
	// invite a retry of an action that already happened.
	AuditErr error
}

// ToolFunc runs a tool for an allowed call. It receives the call's context (honour it) and the call as the gate
// saw it (Seq and RunID make a natural idempotency key).
type ToolFunc func(ctx context.Context, call Call) ([]byte, error)

const maxToolNameBytes = 256

// truncateUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence. A cut string is a copy, so that
// keeping it does not keep all of s alive.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}
