// Package governance is the gate every tool call passes before it runs: policy, approval, budgets, a hard cap on
// the number of calls, and a tamper-evident audit log.
//
// Code written by a model runs in the wasm sandbox, but the tools it calls run on the host with the host's
// authority: the tool bridge is a deliberate hole in the sandbox. This package is what governs it. Every call —
// bridged from Python, made directly by the agent, or made by an escalated container — goes through one method,
// [Run.Do], synchronously and before the tool runs. Its audit log is append-only and hash-chained,
// optionally with an HMAC key, and [Verify] detects edits, removals, insertions and reorders. Panics in
// tools and in every pluggable part become errors, never crashes.
//
// Here's an example:
//
//	spec, err := governance.LoadPolicyFile("policy.yaml")
//	policy, err := governance.NewPolicy(*spec)
//	audit, err := governance.OpenAuditFile("audit.jsonl", governance.JSONLConfig{Key: key})
//	gate, err := governance.NewGate(governance.GateConfig{
//		Policy:   policy,
//		Limits:   policy.Limits(),
//		Approver: &governance.TerminalApprover{},
//		Auditor:  audit,
//	})
//	run := gate.NewRun(runID) // one per sandbox run: budgets are per run
//	out, err := run.Do(ctx, governance.Call{Tool: "send_email", Args: args, Source: governance.SourcePython},
//		func(ctx context.Context, c governance.Call) ([]byte, error) { return sendEmail(ctx, c.Args) })
//
// # The parts
//
// [Policy], [Approver], [Budget] and [Auditor] are one-method interfaces with func adapters ([PolicyFunc],
// [ApproverFunc], [BudgetFunc], [AuditorFunc]), composed by a [Gate] the way net/http composes handlers. The
// package provides a declarative policy ([PolicySpec], compiled by [NewPolicy]), approvers for tests
// ([AllowAll], [DenyAll]), for user interfaces ([ChanApprover]) and for terminals ([TerminalApprover]), per-run
// [Limits], and auditors ([JSONLAuditor], [MemoryAuditor], [MultiAuditor], [DiscardAuditor]).
//
// # Durable tasks
//
// With GateConfig.Store (a [Store]: [MemoryStore], or SQLite and PostgreSQL from package
// github.com/wasmbox/wasmbox/store), [Gate.NewTask] starts a task whose calls are journaled in the store, with
// its counters, its pending call and its own hash-chained audit log. A call that needs approval (or a policy's
// [Pause]) pauses the task instead of waiting: [Run.Do] returns a *[PausedError] and [Run.Halted] reports it.
// [Gate.Decide] records a decision once, from any process; [Gate.ResumeTask] opens the task in any process,
// and its Run answers the journaled calls without running their tools again before making new ones. A lease
// gives a task to one process at a time. [StoreBudget] and [StoreAuditor] share a budget and an audit chain
// across the processes of a fleet. Package wasmbox runs programs, Sessions and agents as tasks on top of this.
//
// # Safe defaults
//
// Everything fails closed. A nil policy denies everything; tools a policy does not name are denied; a tool
// whose effect nobody declared is treated as irreversible, and irreversible calls need approval; a nil
// approver, an approver error or panic, and an approval timeout (60 s by default) all deny; the per-run cap on
// tool calls defaults to 50 and has no "unlimited" value; if the "allowed" audit record cannot be written the
// tool does not run. Approvers live only on the host: nothing in the guest can see or answer an approval
// request.
//
// # Errors
//
// A call that did not run returns a *[DeniedError]; one that ran and failed returns a *[ToolError]. Both carry
// the tool name, run and sequence number, and match the sentinel errors ([ErrDenied], [ErrApprovalDenied],
// [ErrApprovalTimeout], [ErrBudgetExceeded], [ErrToolLimit], [ErrInvalidCall], [ErrAudit], [ErrToolFailed],
// [ErrToolPanic]) with errors.Is. All messages start with "governance: ".
//
// # Concurrency
//
// Gates, runs, policies, approvers and auditors of this package are safe for concurrent use. A Gate is meant to be
// shared by the whole process; its Runs share no mutable state with each other.
//
// # Logging
//
// The package writes nothing to standard output or standard error, except the TerminalApprover's questions
// (to its Out, os.Stderr by default). Diagnostics go to GateConfig.Logger, an hclog.Logger, if set.
//
// # Traces and metrics
//
// [Run.Do] gives every call an OpenTelemetry span, "execute_tool NAME" (gen_ai.operation.name, gen_ai.tool.name,
// wasmbox.run.id, wasmbox.tool.seq, .source, .effect, .decision, .decided_by, .approval_wait_ms, .duration_ms,
// .outcome, and error.type with an error status for a call that was denied or failed), a child of the span in
// the call's context; the tool runs with a context that carries it. The metrics wasmbox.tool.calls and
// wasmbox.tool.duration (seconds) are labelled by decision, outcome, decider and source only: never by a tool
// name, which the guest chooses. GateConfig.TracerProvider and MeterProvider default to the global providers;
// while no SDK is installed a call starts no span at all.
package governance
