package wasmbox

import (
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// Result is the outcome of one run. A Python exception is part of a Result (Exception), not a Go error, unless
// Config.ExceptionAsError is set.
type Result struct {
	// Stdout and Stderr hold what the program wrote, up to the configured limits; when output was dropped they
	// end with a "[wasmbox: output truncated: N more bytes dropped]" marker and the Truncated flag is set.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	// ExitCode is the program's own: 0, 1 for an uncaught exception, n for sys.exit(n). A run stopped by its
	// deadline or its context (ErrTimeout) always has ExitCode -1, whatever the program was doing; so has a run
	// whose interpreter trapped.
	ExitCode int
	// Exception is the uncaught exception as the program's interpreter reported it, or nil. It is the guest's
	// text, bounded by the host (type 256 bytes, message 64 KiB, traceback 256 KiB); the error Run returns is
	// decided by the host alone. After a deadline it is the exception that ended the program (normally the
	// KeyboardInterrupt the deadline raised) if one was reported before the kill, and nil when the program was
	// killed first (in a tool call, in C code, or still running killGrace after the deadline). It is nil for a
	// program that exited with code 0.
	Exception *PythonError
	// Duration is the wall time of the run, interpreter start included.
	Duration time.Duration
	// PeakMemory is the largest size of guest linear memory during the run, in bytes.
	PeakMemory uint64
	// FilesChanged lists what the program created, modified or deleted in the workspace: at most
	// MaxFilesChanged entries, parents before their contents. FilesChangedTotal counts them all; when it is
	// larger, the list was cut.
	FilesChanged      []FileChange
	FilesChangedTotal int
	// ToolCalls lists every tool call of the run, allowed, denied or failed, in order, as recorded by the time
	// the run ended.
	ToolCalls []hostfuncs.ToolCall
	// ToolCallsCompleted is how many tool calls returned a result to the program. A call whose result came
	// after the run's deadline is not counted (the program never saw it).
	ToolCallsCompleted int
	// RunID identifies the run in the audit log.
	RunID string
	// Workspace is the run's workspace, to read files back or write them out.
	Workspace *Workspace
	// TaskID is the durable task this run belongs to (Sandbox.StartTask, Sandbox.ResumeTask), "" otherwise.
	TaskID string
	// Paused is the call a durable task's run stopped at, waiting for a decision (the error is then ErrPaused);
	// nil otherwise.
	Paused *governance.PendingCall
}

// PythonError describes an uncaught Python exception.
type PythonError struct {
	Type      string `json:"type"`      // e.g. "ZeroDivisionError"
	Message   string `json:"message"`   // str(exception)
	Traceback string `json:"traceback"` // the text CPython prints
	Line      int    `json:"line"`      // the line of the program where it was raised, 0 if unknown
}

func (e *PythonError) Error() string { return e.Type + ": " + e.Message }
