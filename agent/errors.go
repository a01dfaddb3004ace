package agent

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them (test with errors.Is) and starts with
// "agent: ".
var (
	// ErrInvalidOption: an Option or argument is out of range; the message names it.
	ErrInvalidOption = errors.New("agent: invalid option")
	// ErrMaxSteps: the Run used all its steps without an answer (no final_answer, and the last program that
	// finished printed nothing to fall back on).
	ErrMaxSteps = errors.New("agent: no answer within the step limit")
	// ErrRepairsExhausted: a program kept failing after the allowed repairs. It also wraps the last failure
	// (a *wasmbox.PythonError or a run error).
	ErrRepairsExhausted = errors.New("agent: program still failing after the allowed repairs")
	// ErrDeadline: the Run's total deadline passed or its context ended. It also wraps the context's error, so
	// errors.Is(err, context.DeadlineExceeded) (or context.Canceled) holds.
	ErrDeadline = errors.New("agent: run stopped by its deadline or context")
	// ErrModel: the model failed (its error is wrapped) or gave no reply.
	ErrModel = errors.New("agent: model failed")
	// ErrSandbox: the sandbox could not run a program (not a failure of the program itself); the wasmbox error
	// is wrapped.
	ErrSandbox = errors.New("agent: sandbox failed")
	// ErrNoProgress: the Run stopped because the model made no progress: too many replies in a row had no
	// code (WithMaxNoCode; the error then also wraps ErrNoCode), or too many programs in a row repeated an
	// earlier one (WithMaxRepeats). Result.Stop says which.
	ErrNoProgress = errors.New("agent: the model made no progress")
	// ErrToolBudget: the task's governance run reached its max_tool_calls, and the step after that (the model is
	// told to answer with what it has) gave no answer either. It also wraps wasmbox.ErrToolLimit.
	ErrToolBudget = errors.New("agent: the task's tool-call limit is used up")
	// ErrNoCode marks a step whose reply had no Python code (Step.Err); the model gets a nudge.
	ErrNoCode = errors.New("agent: reply has no Python code")
	// ErrInstallUnavailable is what install_package reports until a PackageInstaller is plugged in (its message
	// then also says what the program can import: the standard library and the runtime's built-in packages).
	ErrInstallUnavailable = errors.New("install_package is not available yet: escalation/wheelhouse not configured")
)
