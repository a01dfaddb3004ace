package agent

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tmc/langchaingo/llms"
)

// Defaults of the options.
const (
	DefaultMaxSteps       = 10
	DefaultMaxRepairs     = 2
	DefaultTimeout        = 5 * time.Minute
	DefaultMaxObservation = 10_000 // characters of printed output shown to the model per step
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
	err          error
}

func defaultOptions() options {
	return options{
		maxSteps:   DefaultMaxSteps,
		maxRepairs: DefaultMaxRepairs,
		timeout:    DefaultTimeout,
		maxObs:     DefaultMaxObservation,
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
// minutes). Each program is also bounded by the sandbox's own Config.Timeout.
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

// WithLogger sends the event stream to an hclog logger (model turns and answers at Info, the rest at Debug).
// The default logs nothing.
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
