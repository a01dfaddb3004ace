package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/llms"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Agent is a code-action agent: the model answers a task by writing Python programs that call the tools, the
// sandbox runs them, and the answer comes from final_answer(value). An Agent is safe for concurrent use; every
// Run has its own interpreter session and workspace.
type Agent struct {
	model  llms.Model
	sb     *wasmbox.Sandbox
	gate   *governance.Gate
	tools  *hostfuncs.Registry
	opts   options
	system string
	tracer trace.Tracer
}

// New creates an agent over model with a sandbox built from cfg. cfg.Tools are the tools the programs may call
// (shown to the model as Python stubs with their docstrings) and cfg.Gate governs every call; a nil Gate is
// wasmbox.DefaultGate() (read-only and mutating tools allowed, irreversible ones denied). The agent keeps that
// one Gate for everything it runs, including the Toolkit from NewToolkit.
//
// The system prompt says what the sandbox really has: the packages it installed (cfg.Packages and their
// dependencies), and the tools minus those the gate refuses whatever their arguments (with the default gate, the irreversible ones), with the tools that
// always need a person's approval named as such. The agent tells these apart only for policies it can evaluate
// without side effects (EffectPolicy, AllowAllPolicy, DenyAllPolicy, a compiled PolicySpec) and shows every other
// tool as is; hiding a tool only changes the prompt, never what the gate allows.
func New(ctx context.Context, model llms.Model, cfg wasmbox.Config, opts ...Option) (*Agent, error) {
	if model == nil {
		return nil, fmt.Errorf("%w: model is nil", ErrInvalidOption)
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	view := defaultGateView
	if cfg.Gate == nil {
		if cfg.Gate, err = defaultGate(cfg); err != nil {
			return nil, err
		}
	} else {
		view = viewOf(cfg.Gate)
	}
	reg := cfg.Tools
	if reg == nil {
		reg = hostfuncs.NewRegistry()
	}
	if o.installer != nil {
		// Offer install_package to the programs too: a copy of the caller's registry with one more tool.
		cp := hostfuncs.NewRegistry()
		for _, t := range reg.Tools() {
			if err := cp.Register(t); err != nil {
				return nil, err
			}
		}
		if err := cp.Register(pythonInstallTool(o.installer)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		if o.escalation != nil {
			if err := cp.Register(containerTool(o.escalation)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
			}
		}
		reg = cp
	}
	cfg.Tools = reg
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	timeout, mem := cfg.Timeout, cfg.MemoryLimit
	if timeout == 0 {
		timeout = wasmbox.DefaultTimeout
	}
	if mem == 0 {
		mem = wasmbox.DefaultMemoryLimit
	}
	shown, approval, install, err := promptTools(reg, view)
	if err != nil {
		return nil, err
	}
	system := renderSystemPrompt(promptData{
		Stubs:        strings.TrimRight(shown.Stubs(), "\n") + "\n",
		HasTools:     len(shown.Names()) > 0,
		Approval:     approval,
		Install:      o.installer != nil && install,
		Packages:     packageNames(sb.Packages()),
		BuiltIn:      builtinNames(sb.Info().BuiltIn),
		Timeout:      humanDuration(timeout),
		Memory:       humanBytes(mem),
		Instructions: strings.TrimSpace(o.instructions),
	})
	return &Agent{model: model, sb: sb, gate: cfg.Gate, tools: reg, opts: o, system: system, tracer: tracerOf(cfg.TracerProvider)}, nil
}

// SystemPrompt returns the system prompt the model is given.
func (a *Agent) SystemPrompt() string { return a.system }

// Sandbox returns the agent's sandbox.
func (a *Agent) Sandbox() *wasmbox.Sandbox { return a.sb }

// Gate returns the gate every tool call of the agent passes.
func (a *Agent) Gate() *governance.Gate { return a.gate }

// Close closes the sandbox, waiting for running programs (or ctx).
func (a *Agent) Close(ctx context.Context) error { return a.sb.Close(ctx) }

// AnswerSource says where a Result's answer came from.
type AnswerSource string

// The sources of an answer.
const (
	AnswerNone       AnswerSource = ""             // no answer
	AnswerFinal      AnswerSource = "final_answer" // the program called final_answer(value)
	AnswerFromOutput AnswerSource = "output"       // fallback: what the last program that finished printed
)

// StopReason says why a Run ended.
type StopReason string

// The reasons a Run ends. Only StopAnswered, and StopMaxSteps with the fallback answer (AnswerFromOutput), come
// without an error; for every other reason Run's error says the same thing.
const (
	StopAnswered   StopReason = "final_answer"      // a program called final_answer
	StopMaxSteps   StopReason = "max_steps"         // WithMaxSteps ran out (ErrMaxSteps)
	StopNoCode     StopReason = "no_code"           // WithMaxNoCode replies in a row had no code (ErrNoProgress)
	StopRepeating  StopReason = "repeating"         // WithMaxRepeats programs in a row repeated (ErrNoProgress)
	StopToolBudget StopReason = "tool_budget"       // the run's max_tool_calls was reached (ErrToolBudget)
	StopRepairs    StopReason = "repairs_exhausted" // ErrRepairsExhausted
	StopDeadline   StopReason = "deadline"          // ErrDeadline
	StopModel      StopReason = "model_error"       // ErrModel
	StopSandbox    StopReason = "sandbox_error"     // ErrSandbox
	StopPaused     StopReason = "paused"            // a durable task paused at a call waiting for a decision (wasmbox.ErrPaused)
)

// Result is the outcome of a Run. Run returns it even when it also returns an error, with the steps so far.
type Result struct {
	// Answer is the value given to final_answer, decoded from JSON (float64 for numbers, map[string]any for
	// dicts, []any for lists), or, as a fallback when the steps ran out, the trimmed printed output (a string)
	// of the last program that finished without an error. Nil when there is no answer.
	Answer any
	// AnswerJSON is the JSON of the final_answer value (nil for the fallback).
	AnswerJSON json.RawMessage
	// AnswerFrom says which of the two it is.
	AnswerFrom AnswerSource
	// Steps are the model turns, in order.
	Steps []Step
	// ToolCalls are every tool call of every program, in order.
	ToolCalls []hostfuncs.ToolCall
	// Errors are the failures met on the way (failed programs, replies without code, refused calls), each
	// a *StepError; the Run may still have succeeded after them.
	Errors []error
	// Repairs counts the failed programs sent back to the model for repair.
	Repairs int
	// Stop says why the Run ended.
	Stop StopReason
	// RunID is the id of the governance run that every tool call of the Run counted against: the run id of
	// their audit records, whose sequence numbers count the calls of the whole task.
	RunID string
	// Workspace is the run's workspace (/workspace), with whatever the programs wrote.
	Workspace *wasmbox.Workspace
	// Duration is the wall time of the Run.
	Duration time.Duration
	// TaskID is the durable task of StartTask and ResumeTask ("" for Run); Paused is the call it paused at.
	TaskID string
	Paused *governance.PendingCall
}

// Step is one model turn and what came of it.
type Step struct {
	N     int    // 1-based
	Reply string // the model's reply
	Code  string // the program extracted from it; empty if there was none
	// Stdout and Stderr are the program's output (Stderr without the final_answer traceback).
	Stdout, Stderr string
	// Exception is the program's uncaught exception, if any (never the FinalAnswer that ends a program).
	Exception *wasmbox.PythonError
	// Err is what went wrong in this step: ErrNoCode, a wasmbox run error (a timeout, the memory limit, the
	// tool-call limit), or nil (an exception alone is in Exception).
	Err error
	// ToolCalls are the program's tool calls.
	ToolCalls []hostfuncs.ToolCall
	// Observation is what was sent back to the model; empty for the step that answered.
	Observation string
	// Answered is set on the step whose program called final_answer.
	Answered bool
	// Repair is set when this step's observation asked the model to repair a failed program.
	Repair   bool
	Duration time.Duration
}

// StepError is a failure in one step.
type StepError struct {
	Step int
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %d: %v", e.Step, e.Err) }

// Unwrap returns the failure.
func (e *StepError) Unwrap() error { return e.Err }

// Run answers task with a fresh workspace.
//
// Every tool call of the Run (every program's, install_package, and those of programs run in a container)
// counts against one governance run (WithGovernanceRun, or a new one for the Run): budgets such as the gate's
// MaxIrreversible and max_tool_calls hold for the whole task, and the audit records carry the Run's RunID with
// one sequence.
//
// # Errors
//
// Run returns a non-nil *Result with every error. The error wraps ErrRepairsExhausted, ErrMaxSteps,
// ErrNoProgress, ErrToolBudget, ErrDeadline (and the context's error), ErrModel or ErrSandbox; Result.Stop says
// the same. A refused tool call, a failing tool or a failing program is never an error by itself: it goes back
// to the model as an observation.
func (a *Agent) Run(ctx context.Context, task string) (*Result, error) {
	return a.RunIn(ctx, nil, task)
}

// RunIn answers task in the given workspace (nil for a fresh one): files put there beforehand are visible to
// the programs under /workspace, and what they write stays there.
func (a *Agent) RunIn(ctx context.Context, ws *wasmbox.Workspace, task string) (*Result, error) {
	gov := a.opts.govRun
	if gov == nil {
		gov = a.gate.NewRun("")
	}
	return a.runWith(ctx, ws, task, gov, nil)
}

// runWith runs task with gov, the run of the durable task dt if it is not nil.
func (a *Agent) runWith(ctx context.Context, ws *wasmbox.Workspace, task string, gov *governance.Run, dt *governance.Task) (*Result, error) {
	r := &runner{a: a, o: &a.opts, res: &Result{RunID: gov.ID()}, gov: gov, task: dt, nonce: newNonce(), start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, a.opts.timeout)
	defer cancel()
	if ws == nil {
		ws = wasmbox.NewWorkspace(0, 0)
	}
	r.ws = ws
	r.res.Workspace = ws
	ctx = context.WithValue(ctx, workspaceKey{}, ws)
	ctx = context.WithValue(ctx, runnerKey{}, r)
	ctx, span := r.startRun(ctx)
	err := r.run(ctx, task)
	r.endStep(err)
	if r.se != nil {
		r.cleanup(ctx)
		_ = r.se.Close(ctx)
	}
	r.res.Duration = time.Since(r.start)
	if r.res.Stop == "" {
		r.res.Stop = stopReason(err)
	}
	if err != nil {
		r.emit(Event{Kind: EventError, Err: err})
	}
	r.endRun(span, err)
	return r.res, err
}

// runner is the state of one Run.
type runner struct {
	a     *Agent
	o     *options
	res   *Result
	nonce string
	start time.Time
	ws    *wasmbox.Workspace
	se    *wasmbox.Session
	gov   *governance.Run  // the task's run: every tool call of the Run counts against it
	task  *governance.Task // the durable task of StartTask/ResumeTask, nil otherwise
	step  int
	mu    sync.Mutex // serialises emit (stdout chunks come from the program's goroutine)
	// stepSpan is the span of the step in progress (nil between steps); stepResult the result of its program.
	stepSpan   trace.Span
	stepN      int
	stepResult *wasmbox.Result
}

func (r *runner) emit(e Event) {
	e.Time = time.Now()
	e.RunID = r.gov.ID()
	if e.Step == 0 {
		e.Step = r.step
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	log := r.o.logger
	switch e.Kind {
	case EventModelTurn:
		log.Info("model turn", "step", e.Step, "reply", e.Text)
	case EventAnswer:
		log.Info("answer", "step", e.Step, "answer", e.Answer, "from", e.Text)
	case EventError:
		log.Warn("run failed", "step", e.Step, "error", e.Err)
	case EventToolCall:
		log.Debug("tool call", "step", e.Step, "tool", e.ToolCall.Tool, "status", e.ToolCall.Status, "decided_by", e.ToolCall.DecidedBy, "reason", e.ToolCall.Reason, "error", e.ToolCall.Error)
	case EventCode:
		log.Debug("code", "step", e.Step, "code", e.Code)
	case EventRepair, EventRestart:
		log.Debug(string(e.Kind), "step", e.Step, "error", e.Err)
	default:
		log.Trace(string(e.Kind), "step", e.Step, "text", e.Text)
	}
	if r.o.onEvent != nil {
		r.o.onEvent(e)
	}
}

func (r *runner) deadline(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrDeadline, context.Cause(ctx))
}

// startSession starts (or restarts) the interpreter and defines final_answer and the tools in its globals.
func (r *runner) startSession(ctx context.Context) error {
	if r.se != nil {
		_ = r.se.Close(ctx)
		r.se = nil
	}
	se, err := r.a.sb.NewSession(ctx, r.ws)
	if err != nil {
		if ctx.Err() != nil {
			return r.deadline(ctx)
		}
		return fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	r.se = se
	res, err := se.ExecProgram(ctx, wasmbox.Program{Code: renderSetup(r.nonce, r.a.tools.Names()), Governance: r.gov})
	if err == nil && res.Exception != nil {
		err = res.Exception
	}
	if err != nil {
		if ctx.Err() != nil {
			return r.deadline(ctx)
		}
		return fmt.Errorf("%w: setting up the session: %w", ErrSandbox, err)
	}
	return nil
}

// cleanup removes the private directory (programs and answer file), so that the workspace keeps only what the
// programs wrote.
func (r *runner) cleanup(ctx context.Context) {
	if !r.se.Alive() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = r.se.ExecProgram(ctx, wasmbox.Program{Governance: r.gov,
		Code: "import shutil as _shutil\n_shutil.rmtree('/workspace/" + privateDir + "', ignore_errors=True)\ndel _shutil\n"})
}

func (r *runner) run(runCtx context.Context, task string) error {
	if err := r.startSession(runCtx); err != nil {
		return err
	}
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, r.a.system),
		llms.TextParts(llms.ChatMessageTypeHuman, task),
	}
	failures := 0       // consecutive failed programs
	lastFailure := ""   // the previous failure's type and message, to spot repeats
	lastOutput := ""    // stdout of the last program that finished without an exception
	haveOutput := false // whether lastOutput is set
	noCode := 0         // consecutive replies without code
	repeats := 0        // consecutive programs that repeated an earlier one
	seen := map[string]bool{}
	lastChance := false // the run's max_tool_calls was reached: this step must answer
	// giveUp ends the Run for a reason that means the model ran out of chances: with err, or, when the steps
	// ran out, with the fallback answer if there is one.
	giveUp := func(why StopReason, err error) error {
		r.res.Stop = why
		if out := strings.TrimSpace(lastOutput); why == StopMaxSteps && haveOutput && out != "" {
			r.res.Answer, r.res.AnswerFrom = out, AnswerFromOutput
			r.emit(Event{Kind: EventAnswer, Answer: out, Text: string(AnswerFromOutput)})
			return nil
		}
		return err
	}
	for r.step = 1; r.step <= r.o.maxSteps; r.step++ {
		ctx := r.startStep(runCtx)
		if ctx.Err() != nil {
			return r.deadline(ctx)
		}
		stepStart := time.Now()
		reply, err := r.generate(ctx, msgs)
		if err != nil {
			if ctx.Err() != nil {
				return r.deadline(ctx)
			}
			return err
		}
		r.emit(Event{Kind: EventModelTurn, Text: reply})
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeAI, reply))
		st := Step{N: r.step, Reply: reply}

		code, ok := ExtractCode(reply)
		if !ok {
			noCode++
			st.Err = ErrNoCode
			if noCode >= r.o.maxNoCode || lastChance {
				st.Duration = time.Since(stepStart)
				r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: ErrNoCode})
				r.res.Steps = append(r.res.Steps, st)
				if lastChance {
					return giveUp(StopToolBudget, fmt.Errorf("%w: %w", ErrToolBudget, wasmbox.ErrToolLimit))
				}
				return giveUp(StopNoCode, fmt.Errorf("%w: %d replies in a row had no Python code: %w", ErrNoProgress, noCode, ErrNoCode))
			}
			st.Observation = "Your reply contained no Python code, so nothing ran. Reply with one Python program in a ```python block. " +
				"To give the answer, call final_answer(value) in the program."
			st.Duration = time.Since(stepStart)
			r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: ErrNoCode})
			r.res.Steps = append(r.res.Steps, st)
			r.emit(Event{Kind: EventNudge, Text: st.Observation})
			msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, st.Observation))
			continue
		}
		noCode = 0
		st.Code = code
		r.emit(Event{Kind: EventCode, Code: code})

		res, runErr := r.exec(ctx, code)
		r.stepResult = res
		if res != nil {
			st.Stdout, st.Stderr, st.Exception, st.ToolCalls = res.Stdout, res.Stderr, res.Exception, res.ToolCalls
			r.res.ToolCalls = append(r.res.ToolCalls, res.ToolCalls...)
			for i := range res.ToolCalls {
				r.emit(Event{Kind: EventToolCall, ToolCall: &res.ToolCalls[i]})
			}
		}
		st.Err = runErr
		if errors.Is(runErr, wasmbox.ErrPaused) || errors.Is(runErr, wasmbox.ErrGovernance) {
			// A durable task paused at a call (or lost its store): the Run ends here; ResumeTask goes on.
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			if res != nil && res.Paused != nil {
				r.res.Paused, r.res.Stop = res.Paused, StopPaused
			}
			return runErr
		}

		// The answer, if the program gave one (even if it went on to fail, or swallowed FinalAnswer).
		if raw, ok := r.readAnswer(); ok {
			var v any
			_ = json.Unmarshal(raw, &v)
			st.Answered, st.Err = true, nil
			if st.Exception != nil && st.Exception.Type == "FinalAnswer" {
				st.Stderr = strings.TrimSuffix(st.Stderr, st.Exception.Traceback)
				st.Exception = nil
			}
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			r.res.Answer, r.res.AnswerJSON, r.res.AnswerFrom = v, raw, AnswerFinal
			r.emit(Event{Kind: EventAnswer, Answer: v, Text: string(AnswerFinal)})
			return nil
		}

		if ctx.Err() != nil { // the Run's deadline, not the program's own limit
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			return r.deadline(ctx)
		}
		restarted := false
		if !r.se.Alive() {
			r.emit(Event{Kind: EventRestart, Err: runErr})
			if err := r.startSession(ctx); err != nil {
				st.Duration = time.Since(stepStart)
				r.res.Steps = append(r.res.Steps, st)
				return err
			}
			restarted = true
		}
		if res == nil || (runErr != nil && !isProgramFailure(runErr)) {
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			return fmt.Errorf("%w: %w", ErrSandbox, runErr)
		}
		if lastChance {
			// The model was told that no tool call would run any more and that it must answer now.
			err := fmt.Errorf("%w: %w", ErrToolBudget, wasmbox.ErrToolLimit)
			r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: err})
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			return giveUp(StopToolBudget, err)
		}
		// A program that only repeats what an earlier one did is no progress.
		fp, fpCode := fingerprint(res, runErr), "code:"+code
		if seen[fpCode] || (fp != "" && seen[fp]) {
			repeats++
		} else {
			repeats = 0
		}
		seen[fpCode] = true
		if fp != "" {
			seen[fp] = true
		}
		if repeats >= r.o.maxRepeats {
			err := fmt.Errorf("%w: %d programs in a row repeated an earlier program (the same code, or the same tool calls, output and error)", ErrNoProgress, repeats)
			r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: err})
			st.Duration = time.Since(stepStart)
			r.res.Steps = append(r.res.Steps, st)
			return giveUp(StopRepeating, err)
		}
		hitLimit := hitToolLimit(res)

		body := report(res, runErr, r.o.maxObs)
		var obs strings.Builder
		switch {
		case isDenial(res.Exception) || errors.Is(runErr, wasmbox.ErrToolLimit):
			// A refusal is information, not a bug: it does not use up a repair.
			r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: orErr(runErr, res.Exception)})
			fmt.Fprintf(&obs, "Your program stopped because a tool call was refused: %v\n%s\n", orErr(nil, res.Exception), body)
			obs.WriteString("The refused call did not run, and retrying it will be refused again. Continue without it, " +
				"or call final_answer explaining what could not be done.")
		case res.Exception != nil || runErr != nil:
			failure := orErr(runErr, res.Exception)
			r.res.Errors = append(r.res.Errors, &StepError{Step: r.step, Err: failure})
			failures++
			if failures > r.o.maxRepairs {
				st.Observation = ""
				st.Duration = time.Since(stepStart)
				r.res.Steps = append(r.res.Steps, st)
				if r.o.maxRepairs == 0 {
					return fmt.Errorf("%w (repairs are off): %w", ErrRepairsExhausted, failure)
				}
				return fmt.Errorf("%w (%d): %w", ErrRepairsExhausted, r.o.maxRepairs, failure)
			}
			r.res.Repairs++
			st.Repair = true
			sig := headline(res, runErr)
			where := ""
			if e := res.Exception; e != nil && e.Line > 0 && runErr == nil {
				where = fmt.Sprintf(" at line %d", e.Line)
			}
			fmt.Fprintf(&obs, "Your program failed%s: %s\n%s\n", where, Truncate(sig, 500), body)
			obs.WriteString("Fix the program and reply with the corrected program in one ```python block.")
			if !restarted {
				obs.WriteString(" Variables defined before the error still exist.")
			}
			obs.WriteString(" Tool calls reported as ok have taken effect: do not repeat them.")
			switch {
			case sig == lastFailure:
				obs.WriteString(" This is the same error as before: do not repeat the same code; try a different approach.")
			case failures == r.o.maxRepairs:
				obs.WriteString(" This is the last attempt: if this approach keeps failing, try a different one.")
			}
			fmt.Fprintf(&obs, " (Repair %d of %d.)", failures, r.o.maxRepairs)
			lastFailure = sig
		default:
			failures, lastFailure = 0, ""
			lastOutput, haveOutput = res.Stdout, true
			fmt.Fprintf(&obs, "Your program finished without calling final_answer.\n%s\n", body)
			obs.WriteString("If you have the answer, call final_answer(value) with it (the variables still exist); otherwise continue with the next program.")
		}
		if restarted {
			obs.WriteString("\nThe interpreter was restarted: variables, functions and imports from earlier programs are gone; files in /workspace are kept.")
		}
		if hitLimit {
			lastChance = true
			obs.WriteString("\nThis task has used up its tool calls: no further tool call will run. Reply with one last program that " +
				"calls final_answer with what you have (or explains what could not be done); it must not call tools.")
		}
		st.Observation = obs.String()
		st.Duration = time.Since(stepStart)
		r.res.Steps = append(r.res.Steps, st)
		if st.Repair {
			r.emit(Event{Kind: EventRepair, Err: orErr(st.Err, st.Exception), Text: st.Observation})
		} else {
			r.emit(Event{Kind: EventObservation, Text: st.Observation})
		}
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, st.Observation))
	}
	r.step = r.o.maxSteps
	return giveUp(StopMaxSteps, fmt.Errorf("%w (%d)", ErrMaxSteps, r.o.maxSteps))
}

// stopReason maps Run's error to the reason the Run ended (for the errors that set no reason of their own).
func stopReason(err error) StopReason {
	switch {
	case err == nil:
		return StopAnswered
	case errors.Is(err, ErrDeadline):
		return StopDeadline
	case errors.Is(err, ErrRepairsExhausted):
		return StopRepairs
	case errors.Is(err, ErrModel):
		return StopModel
	case errors.Is(err, ErrMaxSteps):
		return StopMaxSteps
	}
	return StopSandbox
}

// hitToolLimit reports whether a program met the run's max_tool_calls: a call refused with ToolLimitExceeded,
// even if the program caught it. The run is shared by the whole task, so every later call would be refused too.
func hitToolLimit(res *wasmbox.Result) bool {
	for _, c := range res.ToolCalls {
		if c.ErrorType == "ToolLimitExceeded" {
			return true
		}
	}
	return false
}

// canonicalJSON rewrites a JSON value with sorted keys and numbers by value (5 and 5.0 alike), so that the
// same call written twice compares equal; invalid JSON is kept as it is.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// fingerprint sums up what a program did that the model can see, apart from its code: its tool calls (tool,
// arguments, outcome), its output and its error. Tracebacks are left out (they name the step's file). It is ""
// for a program that did nothing visible, which is compared by its code only.
func fingerprint(res *wasmbox.Result, runErr error) string {
	type call struct{ Tool, Args, Status, ErrorType, Error string }
	v := struct {
		Calls          []call
		Stdout, Stderr string
		Exception      string
		RunErr         string
	}{Stdout: res.Stdout}
	for _, c := range res.ToolCalls {
		v.Calls = append(v.Calls, call{c.Tool, canonicalJSON(c.Args), c.Status, c.ErrorType, c.Error})
	}
	if e := res.Exception; e != nil {
		v.Exception = e.Type + ": " + e.Message
	} else {
		v.Stderr = res.Stderr
	}
	var re *wasmbox.RunError
	if errors.As(runErr, &re) {
		v.RunErr = string(re.Kind)
	}
	if len(v.Calls) == 0 && v.Stdout == "" && v.Stderr == "" && v.Exception == "" && v.RunErr == "" {
		return ""
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// isProgramFailure reports whether a run error is the program's own doing (the model can fix it), rather than
// the sandbox failing.
func isProgramFailure(err error) bool {
	var re *wasmbox.RunError
	if errors.As(err, &re) {
		switch re.Kind {
		case wasmbox.KindPython, wasmbox.KindTimeout, wasmbox.KindMemory, wasmbox.KindOutput, wasmbox.KindWorkspace, wasmbox.KindToolLimit:
			return true
		}
	}
	return false
}

// headline says in a few words why a program failed, for the model.
func headline(res *wasmbox.Result, runErr error) string {
	switch {
	case errors.Is(runErr, wasmbox.ErrTimeout):
		return "it ran past its time limit"
	case errors.Is(runErr, wasmbox.ErrMemoryLimit):
		return "it ran out of memory"
	case res != nil && res.Exception != nil:
		return res.Exception.Type + ": " + res.Exception.Message
	case runErr != nil:
		return runErr.Error()
	}
	return "unknown failure"
}

func orErr(err error, e *wasmbox.PythonError) error {
	if err != nil {
		return err
	}
	if e != nil {
		return e
	}
	return errors.New("unknown failure")
}

// exec runs one program of the model, streaming its output as events. The program is saved under
// /workspace/.wasmbox-agent first, so that tracebacks show its source lines.
func (r *runner) exec(ctx context.Context, code string) (*wasmbox.Result, error) {
	name := fmt.Sprintf("%s/step_%d.py", privateDir, r.step)
	filename := "<step " + fmt.Sprint(r.step) + ">"
	if r.ws.WriteFile(name, []byte(code)) == nil {
		filename = "/workspace/" + name
	}
	step := r.step
	out := writerFunc(func(p []byte) (int, error) {
		r.emit(Event{Kind: EventStdout, Step: step, Text: string(p)})
		return len(p), nil
	})
	return r.se.ExecProgram(ctx, wasmbox.Program{Code: code, Filename: filename, Stdout: out, Governance: r.gov})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// readAnswer returns the JSON value final_answer wrote in this Run, if any.
func (r *runner) readAnswer() (json.RawMessage, bool) {
	b, err := r.ws.ReadFile(answerFile)
	if err != nil {
		return nil, false
	}
	var f struct {
		Nonce string          `json:"nonce"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(b, &f) != nil || f.Nonce != r.nonce || len(f.Value) == 0 {
		return nil, false
	}
	return f.Value, true
}

type workspaceKey struct{}

// runnerKey carries the *runner, whose session (restarted after a kill) the installer needs at call time.
type runnerKey struct{}

// pythonInstallTool is install_package for the programs of the code-action agent.
func pythonInstallTool(p PackageInstaller) hostfuncs.Tool {
	t := hostfuncs.Func("install_package", "Install third-party Python packages into this sandbox (pure-Python packages only). Returns a report of what was installed.",
		func(ctx context.Context, in struct {
			Packages []string `json:"packages" jsonschema:"description=requirement strings such as tabulate or attrs==23.2.0"`
		}) (string, error) {
			ws, _ := ctx.Value(workspaceKey{}).(*wasmbox.Workspace)
			var se *wasmbox.Session
			if r, ok := ctx.Value(runnerKey{}).(*runner); ok {
				se = r.se
			}
			return p.InstallPackages(ctx, InstallRequest{Packages: in.Packages, Workspace: ws, Session: se})
		})
	t.Effect = governance.Mutating
	return t
}
