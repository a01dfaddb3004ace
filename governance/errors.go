package governance

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by [Run.Do] for a call that did not complete satisfies errors.Is with
// exactly one of the denial sentinels (or a context error, see [DeniedError]; ErrCallFlood comes with
// ErrToolLimit); a tool that ran and failed gives ErrToolFailed (and ErrToolPanic when it panicked,
// ErrToolAbandoned when the gate stopped waiting for it). The Python bridge maps them to exceptions:
//
//	ErrToolLimit (incl. ErrCallFlood)              → ToolLimitExceeded
//	ErrApprovalTimeout                             → ApprovalTimeout
//	ErrDenied, ErrApprovalDenied, ErrBudgetExceeded,
//	ErrInvalidCall, ErrAudit                       → ToolDenied
//	ErrToolFailed (incl. ErrToolPanic, ErrToolAbandoned) → ToolError
var (
	// ErrDenied: the policy denied the call (or the policy failed, which denies).
	ErrDenied = errors.New("governance: denied by policy")
	// ErrApprovalDenied: the call needed approval and the approver said no, failed, panicked, or there was no
	// approver.
	ErrApprovalDenied = errors.New("governance: approval denied")
	// ErrApprovalTimeout: the call needed approval and no answer came within GateConfig.ApprovalTimeout (or
	// before the call's context deadline). Such errors also satisfy errors.Is(err, context.DeadlineExceeded).
	ErrApprovalTimeout = errors.New("governance: approval timed out")
	// ErrBudgetExceeded: a per-run limit (per-tool cap, cost units, irreversible actions) or a custom Budget
	// refused the call before it ran.
	ErrBudgetExceeded = errors.New("governance: budget exceeded")
	// ErrToolLimit: the run reached its hard max_tool_calls cap.
	ErrToolLimit = errors.New("governance: tool call limit reached")
	// ErrCallFlood: the run has had Limits.MaxDeniedCalls calls denied, so it is flooding the gate; every
	// later call of the run is refused with this error, only the first of them is audited, and the caller
	// should end the run now ([Run.Flooded] reports it). Such errors also satisfy errors.Is(err, ErrToolLimit).
	ErrCallFlood = errors.New("governance: too many denied tool calls; the run must end")
	// ErrInvalidCall: the call itself was malformed (empty or oversized tool name, arguments that are not
	// JSON or are too large, unknown source, negative cost, nil tool function).
	ErrInvalidCall = errors.New("governance: invalid call")
	// ErrAudit: the "allowed" audit record could not be written, so the tool was not run; also wraps
	// Outcome.AuditErr and the errors of the auditors in this package.
	ErrAudit = errors.New("governance: audit failed")
	// ErrToolFailed: the tool ran and returned an error (or panicked). See [ToolError].
	ErrToolFailed = errors.New("governance: tool failed")
	// ErrToolPanic: the tool panicked; the panic was recovered. Such errors also satisfy ErrToolFailed.
	ErrToolPanic = errors.New("governance: tool panicked")
	// ErrToolAbandoned: the call's context ended while the tool ran and the tool did not return within
	// GateConfig.ToolGrace, so the gate stopped waiting; its eventual result is discarded. Such errors also
	// satisfy ErrToolFailed and the context's error (context.DeadlineExceeded or context.Canceled) and cause.
	ErrToolAbandoned = errors.New("governance: tool abandoned after its context ended")

	// ErrInvalidPolicy is wrapped by every error from [ParsePolicy], [LoadPolicyFile], [PolicySpec.Validate]
	// and [NewPolicy].
	ErrInvalidPolicy = errors.New("governance: invalid policy")
	// ErrTampered is wrapped by the [VerifyError] that [Verify] returns for a log that fails verification.
	ErrTampered = errors.New("governance: audit log tampered")
	// ErrKeyRequired: [Verify] met HMAC-keyed records but was given no key.
	ErrKeyRequired = errors.New("governance: audit log is HMAC-keyed; a key is required")
)

// DeniedError is the error for a call that the gate did not let run. It names the tool, the run, the
// per-run sequence number, who decided and why.
//
// Kind is one of ErrDenied, ErrApprovalDenied, ErrApprovalTimeout, ErrBudgetExceeded, ErrToolLimit,
// ErrCallFlood (whose Err is ErrToolLimit), ErrInvalidCall or ErrAudit — or context.Canceled / context.DeadlineExceeded when the call's context ended
// before the tool could start. Err, when not nil, is the underlying cause (the policy's, approver's, budget's or
// auditor's error, or a context error). errors.Is matches both Kind and Err.
type DeniedError struct {
	Tool      string
	RunID     string
	Seq       int64
	Reason    string
	DecidedBy string
	Kind      error
	Err       error
}

func (e *DeniedError) Error() string {
	var b strings.Builder
	kind := "governance: denied"
	if e.Kind != nil {
		kind = e.Kind.Error()
	}
	if !strings.HasPrefix(kind, "governance: ") {
		kind = "governance: not run: " + kind
	}
	b.WriteString(kind)
	b.WriteString(": tool ")
	b.WriteString(quoteName(e.Tool))
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns Kind and Err (those that are not nil).
func (e *DeniedError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// ToolError is the error for a tool that ran and failed. Err is the tool's own error, whose message is kept
// in full; when the tool panicked, Panic is the recovered value, Stack the goroutine's stack at the panic, and
// Err the panic value if it was an error.
//
// errors.Is(err, ErrToolFailed) holds for every ToolError; errors.Is(err, ErrToolPanic) only for panics;
// errors.Is(err, ErrToolAbandoned) only when Abandoned is set (Err is then the context's error and cause).
// errors.Is/As also reach Err, so a tool that failed with context.DeadlineExceeded still satisfies
// errors.Is(err, context.DeadlineExceeded).
type ToolError struct {
	Tool  string
	RunID string
	Seq   int64
	Err   error
	Panic any
	Stack []byte
	// Abandoned: the gate stopped waiting for the tool, which was still running when the call's context
	// ended and did not return within GateConfig.ToolGrace.
	Abandoned bool
}

func (e *ToolError) Error() string {
	if e.Abandoned {
		return fmt.Sprintf("governance: tool %s abandoned: still running after its context ended: %v", quoteName(e.Tool), e.Err)
	}
	if e.Panic != nil {
		return fmt.Sprintf("governance: tool %s panicked: %v", quoteName(e.Tool), e.Panic)
	}
	return fmt.Sprintf("governance: tool %s failed: %v", quoteName(e.Tool), e.Err)
}

// Unwrap returns ErrToolFailed (and ErrToolPanic for a panic) and Err.
func (e *ToolError) Unwrap() []error {
	errs := make([]error, 0, 3)
	if e.Panic != nil {
		errs = append(errs, ErrToolPanic)
	}
	if e.Abandoned {
		errs = append(errs, ErrToolAbandoned)
	}
	errs = append(errs, ErrToolFailed)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// quoteName quotes a tool name for messages, shortening absurdly long names.
func quoteName(s string) string {
	if len(s) > maxToolNameBytes {
		s = truncateUTF8(s, maxToolNameBytes) + "…"
	}
	return fmt.Sprintf("%q", s)
}
