package escalate

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error of this package starts with "escalate: " and wraps one of these (and, where there
// is one, the engine's own error) so that errors.Is works.
var (
	// ErrNoEngine: no container engine could be reached (no socket, daemon down, bad DOCKER_HOST). Nothing ran,
	// and nothing is ever run on the host instead.
	ErrNoEngine = errors.New("escalate: no container engine reachable")
	// ErrEngineVersion: the engine and this client share no API version (the engine refused the client's
	// version, or it is older than the client supports).
	ErrEngineVersion = errors.New("escalate: engine API version not supported")
	// ErrImageNotFound: the job's image is not present in the engine. Images are never pulled.
	ErrImageNotFound = errors.New("escalate: image not found locally (images are never pulled)")
	// ErrRuntimeNotFound: the configured OCI runtime (e.g. "runsc") is not registered with the engine.
	ErrRuntimeNotFound = errors.New("escalate: runtime not registered with the engine")
	// ErrUnenforceable: a hardening guarantee cannot be enforced with this engine configuration, e.g. runsc
	// registered without --oci-seccomp (the default seccomp profile would not apply inside gVisor).
	ErrUnenforceable = errors.New("escalate: hardening cannot be enforced")
	// ErrInvalidJob: the Job or the configuration is malformed (both a Code and an Argv, a bad path, a negative
	// limit...).
	ErrInvalidJob = errors.New("escalate: invalid job")
	// ErrNotAllowed: the policy did not allow the job to escalate (see Allowed). A nil policy allows nothing.
	ErrNotAllowed = errors.New("escalate: escalation not allowed by policy")
	// ErrEngine: the engine failed a request in a way not covered by the errors above; the engine's error is
	// wrapped too.
	ErrEngine = errors.New("escalate: engine error")
	// ErrClosed: the Backend was closed.
	ErrClosed = errors.New("escalate: backend closed")
	// ErrSocketLimit: the program went past a bound of the tool socket that ends the job (a flood of workspace
	// transfer ops); the container was killed. Run returns it with the partial Result.
	ErrSocketLimit = errors.New("escalate: tool socket limit exceeded")
	// ErrOOM is matched by Result.Err() when the container was killed for going over its memory limit.
	ErrOOM = errors.New("escalate: out of memory")
	// ErrExit is matched by Result.Err() when the program exited with a non-zero code.
	ErrExit = errors.New("escalate: non-zero exit")
)

// ExitError is what Result.Err returns for a run that did not exit 0. errors.Is(err, ErrExit) always holds;
// errors.Is(err, ErrOOM) holds when the container was OOM-killed.
type ExitError struct {
	Code      int
	OOMKilled bool
}

func (e *ExitError) Error() string {
	if e.OOMKilled {
		return fmt.Sprintf("escalate: out of memory: killed (exit code %d)", e.Code)
	}
	return fmt.Sprintf("escalate: exit code %d", e.Code)
}

// Is matches ErrExit, and ErrOOM for an OOM kill.
func (e *ExitError) Is(target error) bool {
	return target == ErrExit || (target == ErrOOM && e.OOMKilled)
}

// ToolError is an error a ToolHandler returns to choose the exception raised in Python: Type is the class name
// (ToolDenied, ApprovalDenied, ApprovalTimeout, BudgetExceeded, ToolLimitExceeded, ToolError,
// InvalidToolArguments, UnknownTool: the classes of the wasm sandbox's tools module; another name raises
// ToolError), Message its message. Any other error returned by a handler raises ToolError with the error's text.
type ToolError struct {
	Type    string
	Message string
}

func (e *ToolError) Error() string { return "escalate: tool error: " + e.Type + ": " + e.Message }
