package agent

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tmc/langchaingo/llms"

	"github.com/wasmbox/wasmbox/governance"
)

// Defaults of the options.
const (
	DefaultMaxSteps       = 10
	DefaultMaxRepairs     = 2
	DefaultTimeout        = 5 * time.Minute
	DefaultMaxObservation = 10_000 // characters of printed output shown to the model per step
	// DefaultMaxNoCode is how many replies in a row may come without code: the first gets a nudge, the second
	// ends the Run.
	DefaultMaxNoCode = 2
	// DefaultMaxRepeats is how many programs in a row may repeat what an earlier program of the Run did before
	// the Run ends.
	DefaultMaxRepeats = 2
)

// Option configures an Agent or a Toolkit, in the style of langchaingo's options.
type Option func(*options)

type options struct {
	maxSteps     int
	maxRepairs   int
	timeout      time.Duration
	maxObs       int
	logger       hclog.Logger
	onEvent      func(Event)
	callOpts     []llms.CallOption
	instructions string
	installer    PackageInstaller
	escalation   *EscalationConfig // set by WithEscalation when it has a Backend: offer run_in_container
	govRun       *governance.Run   // WithGovernanceRun; nil: a new run per Run (per Toolkit)
	maxNoCode    int
	maxRepeats   int
	err          error
}

func defaultOptions() options {
	return options{
		maxSteps:   DefaultMaxSteps,
		maxRepairs: DefaultMaxRepairs,
		timeout:    DefaultTimeout,
		maxObs:     DefaultMaxObservation,
		maxNoCode:  DefaultMaxNoCode,
		maxRepeats: DefaultMaxRepeats,
		logger:     hclog.NewNullLogger(),
	}
}

func applyOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, o.err
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
	}
}

// WithMaxSteps bounds the model turns of one Run (each turn is one program, or one reply without code). It must
// be at least 1; the default is DefaultMaxSteps (10). With 1 the model writes one program, and what it prints
// is the answer if it does not call final_answer.
func WithMaxSteps(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail("WithMaxSteps(%d): must be at least 1", n)
		}
		o.maxSteps = n
	}
}

// WithMaxRepairs bounds how many times in a row a failing program is sent back to the model for repair; one
// more failure ends the Run with ErrRepairsExhausted. Zero means no repair. The default is DefaultMaxRepairs
// (2). Refused tool calls do not count: they are observations, not bugs.
func WithMaxRepairs(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.fail("WithMaxRepairs(%d): must not be negative", n)
		}
		o.maxRepairs = n
	}
}

// WithTimeout bounds a whole Run, model turns and programs together. The default is DefaultTimeout (5
// minutes). Each program is also bounded by the sandbox's own Config.Timeout. This bound includes the time a
// person takes to approve a tool call: the gate's ApprovalTimeout bounds each wait, and a wait that would
// outlast the Run is cut short by it (the call is then refused).
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail("WithTimeout(%v): must be positive", d)
		}
		o.timeout = d
	}
}

// WithMaxObservation caps the printed output (and, separately, the traceback and file contents) shown to the
// model per step, in characters. Longer text keeps its head and tail around a "[... truncated, was N chars
// ...]" marker. The default is DefaultMaxObservation (10,000); the minimum is 200.
func WithMaxObservation(chars int) Option {
	return func(o *options) {
		if chars < 200 {
			o.fail("WithMaxObservation(%d): must be at least 200", chars)
		}
		o.maxObs = chars
	}
}

// WithLogger sends the event stream to an hclog logger (model turns and answers at Info, the rest at Debug);
// governance.SlogLogger adapts a *slog.Logger. The default logs nothing.
func WithLogger(l hclog.Logger) Option {
	return func(o *options) {
		if l == nil {
			l = hclog.NewNullLogger()
		}
		o.logger = l
	}
}

// WithEventHandler calls fn for every event of a Run, in order, from the goroutine that called Run. fn must
// not block for long (it holds up the run); concurrent Runs call it concurrently.
func WithEventHandler(fn func(Event)) Option {
	return func(o *options) { o.onEvent = fn }
}

// WithCallOptions passes langchaingo call options (model name, temperature, max tokens, ...) to every model
// turn.
func WithCallOptions(opts ...llms.CallOption) Option {
	return func(o *options) { o.callOpts = append(o.callOpts, opts...) }
}

// WithInstructions appends task-independent instructions to the system prompt (a persona, an output format).
func WithInstructions(text string) Option {
	return func(o *options) { o.instructions = text }
}

// WithPackageInstaller plugs in package installation: the install_package sandbox tool uses it, and the
// code-action agent offers install_package(packages=[...]) to the programs (through the Gate, as a mutating
// tool). Without one, install_package reports that it is not available.
func WithPackageInstaller(p PackageInstaller) Option {
	return func(o *options) { o.installer = p }
}

// WithMaxNoCode bounds the replies in a row that hold no Python code: each but the last gets a nudge, and the
// last ends the Run with ErrNoProgress (wrapping ErrNoCode). It must be at least 1; the default is
// DefaultMaxNoCode (2: one nudge, then stop).
func WithMaxNoCode(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail("WithMaxNoCode(%d): must be at least 1", n)
		}
		o.maxNoCode = n
	}
}

// WithMaxRepeats bounds the programs in a row that repeat an earlier program of the Run: the same code, or the
// same tool calls (tool, arguments, outcome) with the same output and error. When n programs in a row have
// repeated, the Run ends with ErrNoProgress. It must be at least 1; the default is DefaultMaxRepeats (2).
// Repeating programs that fail also use up repairs (WithMaxRepairs), whichever comes first.
func WithMaxRepeats(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail("WithMaxRepeats(%d): must be at least 1", n)
		}
		o.maxRepeats = n
	}
}

// WithGovernanceRun makes every tool call of the agent's Runs (or of the Toolkit) count against run: its
// budgets (Limits such as MaxToolCalls and MaxIrreversible), its sequence numbers and its run id in the audit
// log. Use it to span several Runs of one conversation with one budget; run must come from the same Gate as the
// sandbox (Agent.Gate().NewRun, or Sandbox.Gate().NewRun). Concurrent Runs with the option share the run.
//
// Without it (or with nil) each Run, and each Toolkit, starts a run of its own that every one of its tool calls
// shares: those of every program and every restarted interpreter, install_package, and the calls of programs
// run in a container. The gate's max_tool_calls (governance.DefaultMaxToolCalls, 50, unless the gate's Limits
// say otherwise) therefore bounds the tool calls of a whole Run.
func WithGovernanceRun(run *governance.Run) Option {
	return func(o *options) { o.govRun = run }
}
