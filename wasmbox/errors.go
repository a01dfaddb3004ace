package wasmbox

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them (test with errors.Is) and carries the
// "wasmbox: " prefix.
var (
	// ErrTimeout: the run's deadline passed or its context was cancelled. Errors that wrap it also wrap the
	// context's error, so errors.Is(err, context.DeadlineExceeded) (or context.Canceled) holds.
	ErrTimeout = errors.New("wasmbox: run stopped by its deadline or context")
	// ErrMemoryLimit: the program ran out of its memory limit: it ended on an uncaught MemoryError, or its
	// interpreter trapped, after the host saw it reach the limit (the allocator refused to grow its memory, or
	// its peak came within 1 MiB of Config.MemoryLimit). A MemoryError the program raised without reaching the
	// limit is an ordinary exception (Result.Exception). The wasmtime engine grows memory itself, so there only
	// the peak counts.
	ErrMemoryLimit = errors.New("wasmbox: memory limit reached")
	// ErrPython: the program ended with an uncaught exception. Returned only when Config.ExceptionAsError is
	// set; otherwise the exception is in Result.Exception and the error is nil.
	ErrPython = errors.New("wasmbox: uncaught Python exception")
	// ErrToolLimit: the program ended on ToolLimitExceeded after the gate really denied one of its calls for
	// the run's hard max_tool_calls, or the program kept calling tools after the gate had refused
	// governance.Limits.MaxDeniedCalls of them and the run was ended for it (errors.Is(err,
	// governance.ErrCallFlood) then holds too).
	ErrToolLimit = errors.New("wasmbox: tool call limit reached")
	// ErrInvalidConfig: a Config or Program field is out of range; the message names it.
	ErrInvalidConfig = errors.New("wasmbox: invalid configuration")
	// ErrInterpreter: the interpreter artifact is missing, corrupt or of another ABI version.
	ErrInterpreter = errors.New("wasmbox: interpreter unavailable")
	// ErrPrecompiled: Config.PrecompiledDir is not a directory made by Precompile for this binary: another wasmbox
	// or wazero version, another GOOS, GOARCH or CPU, another interpreter, or a file that changed since. The
	// message names the difference. It is never loaded in part.
	ErrPrecompiled = errors.New("wasmbox: precompiled directory refused")
	// ErrInternal: the engine failed (a trap that is not a memory limit, a host-side failure).
	ErrInternal = errors.New("wasmbox: internal failure")
	// ErrClosed: the Sandbox or Session was closed.
	ErrClosed = errors.New("wasmbox: closed")
	// ErrReentrant: Run, RunProgram, NewSession or Session.Exec was called from inside a tool call made by a
	// program of the same Sandbox (a tool that runs code in its own sandbox would deadlock its Session, or nest
	// interpreters without bound).
	ErrReentrant = errors.New("wasmbox: called from inside a tool call of the same sandbox")
	// ErrSessionBroken: a Session's interpreter was killed (hard deadline, trap, exit) and cannot be trusted;
	// create a new Session.
	ErrSessionBroken = errors.New("wasmbox: session interpreter is no longer usable")
	// ErrPaused: a durable task's program reached a tool call that waits for a decision, and its run ended
	// there (Result.Paused names the call). It is not a failure: record the decision and resume the task
	// (Sandbox.ResumeTask). Errors that wrap it also wrap governance.ErrPaused and the *governance.PausedError.
	ErrPaused = errors.New("wasmbox: task paused for a decision")
	// ErrGovernance: the gate could no longer govern a durable task's calls (its store failed or went away, the
	// resumed program diverged from its journal, another process took the task over), so the run ended: no
	// tool runs ungoverned. The cause says which (governance.ErrStore, ErrDiverged, ErrTaskLost, ...).
	ErrGovernance = errors.New("wasmbox: tool governance failed")
)

// ErrorKind classifies a run failure (the CLI's error.kind).
type ErrorKind string

// Kinds of run failure.
const (
	KindPython     ErrorKind = "python"
	KindTimeout    ErrorKind = "timeout"
	KindMemory     ErrorKind = "memory"
	KindOutput     ErrorKind = "output"
	KindWorkspace  ErrorKind = "workspace"
	KindToolLimit  ErrorKind = "tool_limit"
	KindPaused     ErrorKind = "paused"
	KindGovernance ErrorKind = "governance"
	KindInternal   ErrorKind = "internal"
)

// RunError is the error of a failed run. It wraps a sentinel (ErrTimeout, ...) and the cause.
type RunError struct {
	Kind     ErrorKind
	sentinel error
	Cause    error
}

func (e *RunError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%v: %v", e.sentinel, e.Cause)
	}
	return e.sentinel.Error()
}

// Unwrap returns the sentinel and the cause.
func (e *RunError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.Cause}
}

func runError(kind ErrorKind, sentinel, cause error) *RunError {
	return &RunError{Kind: kind, sentinel: sentinel, Cause: cause}
}
