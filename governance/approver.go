package governance

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"
)

// DefaultApprovalTimeout is how long the gate waits for an approver when GateConfig.ApprovalTimeout is zero.
const DefaultApprovalTimeout = 60 * time.Second

// ApprovalRequest is what an [Approver] is asked.
type ApprovalRequest struct {
	// Call is the call, with RunID, Seq, Effect and Cost resolved and the raw arguments.
	Call Call
	// Reason is why approval is needed (the policy's reason, e.g. "irreversible tool requires approval").
	Reason string
	// DisplayArgs are the call's complete arguments after GateConfig.Redact (the audit log gets the same
	// bytes, or only their size and hash when they are longer than GateConfig.MaxAuditArgsBytes): show these
	// to people, and never a part of them without saying so. They have no duplicate object keys (the gate
	// refuses such calls), so what is shown is what the tool receives.
	DisplayArgs json.RawMessage
	// Deadline is when the gate stops waiting (zero if it waits as long as the call's context).
	Deadline time.Time
}

// Approver decides calls that the policy marked NeedsApproval.
//
// Approvers live only on the host: the guest's code never sees an approval request and has no way to answer
// one — the gate calls Approve itself and the guest only learns the final outcome.
//
// The gate calls Approve in its own goroutine with a context that ends at the approval timeout, and stops
// waiting at that point even if Approve does not return: an approver that ignores its context cannot hold a
// call open. The call is denied unless Approve returns a Decision with Allow set and a nil error before the
// timeout: an error or a panic denies (ErrApprovalDenied), and so does the timeout (ErrApprovalTimeout).
// DecidedBy in the returned decision is recorded in the audit log ("approver" if empty).
//
// Approve must be safe for concurrent use; concurrent runs may ask at the same time.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to the [Approver] interface.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve calls f(ctx, req).
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// AllowAll approves every request ("approver:allow_all"). For tests and trusted batch jobs.
type AllowAll struct{}

// Approve approves.
func (AllowAll) Approve(context.Context, ApprovalRequest) (Decision, error) {
	return Decision{Allow: true, Reason: "auto-approved", DecidedBy: "approver:allow_all"}, nil
}

// DenyAll denies every request ("approver:deny_all").
type DenyAll struct{}

// Approve denies.
func (DenyAll) Approve(context.Context, ApprovalRequest) (Decision, error) {
	return Decision{Allow: false, Reason: "auto-denied", DecidedBy: "approver:deny_all"}, nil
}

// ChanApprover hands approval requests to a user interface over a channel. Each request is a
// *PendingApproval sent on C; the UI answers it with Allow or Deny (from any goroutine, at most once).
// Approve honours its context both while sending and while waiting, so an absent UI only delays the call until
// the approval timeout, and then the call is denied.
//
// Here's an example:
//
//	reqs := make(chan *governance.PendingApproval)
//	cfg.Approver = governance.ChanApprover{C: reqs, Name: "web"}
//	go func() {
//		for p := range reqs {
//			if askUser(p.Request) { p.Allow("clicked approve") } else { p.Deny("clicked deny") }
//		}
//	}()
type ChanApprover struct {
	// C receives the requests. A nil C denies every request at once.
	C chan<- *PendingApproval
	// Name is recorded as DecidedBy "approver:Name"; empty means "channel".
	Name string
}

// Approve sends the request on a.C and waits for the answer or the end of ctx.
func (a ChanApprover) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	if a.C == nil {
		return Decision{}, errors.New("governance: ChanApprover has no channel")
	}
	name := a.Name
	if name == "" {
		name = "channel"
	}
	p := &PendingApproval{Request: req, reply: make(chan Decision, 1), done: ctx.Done(), by: "approver:" + name}
	select {
	case a.C <- p:
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
	select {
	case d := <-p.reply:
		return d, nil
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// PendingApproval is one request sent by a [ChanApprover].
type PendingApproval struct {
	Request  ApprovalRequest
	reply    chan Decision
	done     <-chan struct{}
	by       string
	answered atomic.Bool
}

// Allow approves the call. It reports whether the answer was taken: false if the request was already
// answered or the gate stopped waiting.
func (p *PendingApproval) Allow(reason string) bool { return p.answer(true, reason) }

// Deny denies the call. It reports whether the answer was taken.
func (p *PendingApproval) Deny(reason string) bool { return p.answer(false, reason) }

// Done is closed when the gate stops waiting for this request (timeout or cancelled call); a UI can use it to
// withdraw the question.
func (p *PendingApproval) Done() <-chan struct{} { return p.done }

func (p *PendingApproval) answer(allow bool, reason string) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	if !p.answered.CompareAndSwap(false, true) {
		return false
	}
	p.reply <- Decision{Allow: allow, Reason: reason, DecidedBy: p.by} // buffered: never blocks
	return true
}
