// Package wasmbox runs untrusted Python inside the host process: CPython 3.13 compiled to WebAssembly (WASI
// preview 1), executed by wazero, with no access to host files, environment, network, processes or threads, and
// with memory, time, output and workspace limits that are always on.
//
// Here's an example:
//
//	sb, err := wasmbox.New(ctx, wasmbox.Config{Timeout: 5 * time.Second})
//	if err != nil { ... }
//	defer sb.Close(ctx)
//	res, err := sb.Run(ctx, "print(sum(range(10)))")
//	// res.Stdout == "45\n"
//
// # Notes
//
//   - The interpreter is compiled once per process and cached on disk (Config.CacheDir); each Run gets a fresh
//     interpreter with a fresh workspace and shares nothing with other runs. The instance behind it is either new
//     or one an earlier Run of the same Sandbox ended normally, put back exactly as a new one starts: its memory
//     reset to the snapshot, its globals and all of its host-side state made again. A Session keeps one
//     interpreter alive for many Exec calls.
//   - A deadline or a cancelled context stops any code, including C-level loops, within milliseconds: Python
//     code first gets a KeyboardInterrupt (so Result.Exception has its traceback), then the instance is killed
//     (a program stopped inside a tool call or C code, or still running 40 ms later, has none: see Result).
//   - docs/THREAT_MODEL.md says what is and is not a security boundary.
//
// # Traces and metrics
//
// The package is instrumented with the OpenTelemetry API, never the SDK: like every library, it records into
// the global TracerProvider and MeterProvider (otel.GetTracerProvider) unless Config.TracerProvider or
// Config.MeterProvider gives others, so nothing is recorded until the program installs an SDK.
//
//   - Every Run and RunProgram has a span "wasmbox.run", every Session Exec "wasmbox.exec", a child of the span
//     in the caller's context, with wasmbox.run.id (the governance run id), wasmbox.exit_code,
//     wasmbox.duration_ms, wasmbox.peak_memory_bytes, wasmbox.tool_calls and wasmbox.tool_calls.completed,
//     wasmbox.outcome ("ok", "exception", "exit", "timeout", "memory", "tool_limit", "internal", "error") and,
//     for a failed run, error.type and an error status.
//   - Every tool call has a span "execute_tool NAME" from the Gate, a child of its run's span, with the gate's
//     decision, who decided, the approval wait, the outcome ("ok", "failed", "abandoned", "denied") and
//     error.type; the tool runs with a context carrying it (governance.GateConfig.TracerProvider).
//   - Metrics: wasmbox.runs (by operation and outcome) and wasmbox.run.duration here; wasmbox.tool.calls (by
//     decision, outcome, decider and source) and wasmbox.tool.duration in the gate. No metric is labelled with
//     anything the guest chooses, and no span carries a call's arguments or results.
//   - With no SDK installed (or the API's no-op providers) a tool call starts no span at all, and a run costs one
//     no-op span; bench/ measures both (BenchmarkTracing*).
//
// # Errors
//
// A Python exception is reported in Result.Exception, not as an error (unless Config.ExceptionAsError). Errors
// wrap one of the sentinels in errors.go; timeouts also satisfy errors.Is(err, context.DeadlineExceeded).
package wasmbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/handoff"
	"github.com/wasmbox/wasmbox/internal/vfs"
	"github.com/wasmbox/wasmbox/wheels"
)

// Sandbox runs Python programs. It is safe for concurrent use; every Run is isolated from every other.
type Sandbox struct {
	snap        *snapshot
	packages    *vfs.FS // installed packages, mounted read-only at /packages
	installed   []wheels.Installed
	cfg         Config
	toolsModule string
	it          *interp
	tel         *telemetry
	closed      atomic.Bool
	closeOnce   atomic.Bool
	wg          sync.WaitGroup
	// toolsOnExec: the sandbox has tools, so each exec runs on a worker (execWorkers) and its tool calls run on
	// that worker's goroutine (guest.execOn).
	toolsOnExec bool
	execWorkers handoff.Pool
	spares      spares
}

// Program is one Run's input.
type Program struct {
	// Code is the Python source.
	Code string
	// Filename names the code in tracebacks; default "<string>".
	Filename string
	// Args become sys.argv (Args[0] is the program name); default [Filename].
	Args []string
	// Stdin is the program's standard input; nil means empty. It is read on a goroutine of its own, one Read at
	// a time and only when the program asks (at most 64 KiB per Read, Config.StdinLimit in all), so a Reader that
	// blocks cannot hold the run past its deadline; that goroutine lives until the Reader returns from its last
	// Read, which may be after the run, and what that Read returns is dropped.
	Stdin io.Reader
	// Workspace is mounted at /workspace; nil means a fresh, empty one (returned in Result.Workspace). A
	// Workspace passed here is changed in place; do not share it between concurrent runs.
	Workspace *Workspace
	// Stdout and Stderr stream output for this run (instead of Config.Stdout/Stderr).
	Stdout, Stderr io.Writer
	// Governance is the governance run that this program's tool calls count against: its budgets, its
	// max_tool_calls and its sequence numbers in the audit log. Pass the same run to every program of one task
	// (the agent does) so that limits hold for the whole task. It must come from this Sandbox's Gate
	// (Sandbox.Gate().NewRun). Nil means the Session's own run (one per Session, shared by all its Execs), or a
	// new run for each Sandbox.RunProgram.
	Governance *governance.Run

	// timeout replaces Config.Timeout for this run (a resumed task's); zero means Config.Timeout.
	timeout time.Duration
}

// New validates cfg and prepares the interpreter (compiled once per process).
func New(ctx context.Context, cfg Config) (_ *Sandbox, err error) {
	defer func() {
		if err != nil { // the Sandbox would have owned them
			err = errors.Join(err, closeAll(context.WithoutCancel(ctx), cfg.Closers))
		}
	}()
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.OnCompile != nil {
		ctx = context.WithValue(ctx, onCompileKey{}, c.OnCompile)
	}
	it, err := loadInterp(ctx, c)
	if err != nil {
		return nil, err
	}
	c.Logger.Debug("sandbox ready", "interpreter_sha256", it.sha256, "memory_limit", c.MemoryLimit, "timeout", c.Timeout)
	tel, err := newTelemetry(c.TracerProvider, c.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("%w: telemetry: %w", ErrInvalidConfig, err)
	}
	s := &Sandbox{cfg: c, it: it, tel: tel, toolsModule: c.Tools.PythonModule(), packages: newPackageLayer(),
		toolsOnExec: len(c.Tools.Names()) > 0}
	if len(c.Packages) > 0 {
		if s.installed, err = installPackages(ctx, c.Wheelhouse, s.packages, c.Packages, c.provided); err != nil {
			return nil, err
		}
	}
	freezePackages(s.packages) // shared by every Run: immutable from here (Sessions clone it)
	if s.snap, err = s.takeSnapshot(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs code in a fresh interpreter with a fresh workspace.
func (s *Sandbox) Run(ctx context.Context, code string) (*Result, error) {
	return s.RunProgram(ctx, Program{Code: code})
}

// RunProgram runs one program in a fresh interpreter. The Result is non-nil whenever the program started, even
// if an error (a timeout, say) is also returned.
func (s *Sandbox) RunProgram(ctx context.Context, p Program) (*Result, error) {
	start := time.Now()
	ctx, span := s.tel.start(ctx, opRun)
	res, err := s.runProgram(ctx, p)
	s.tel.end(ctx, span, opRun, start, res, err)
	return res, err
}

func (s *Sandbox) runProgram(ctx context.Context, p Program) (*Result, error) {
	if err := s.reentrant(ctx); err != nil {
		return nil, err
	}
	if err := s.checkProgram(p); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.wg.Done()
	ws := p.Workspace
	if ws == nil {
		ws = newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, s.clock().time)
	}
	// Config.Timeout bounds the program (exec); starting the interpreter is bounded by ctx alone.
	g, err := s.newRunGuest(ctx, ws)
	if err != nil {
		return nil, err
	}
	defer g.close(ctx)
	res, err := g.exec(ctx, p, false)
	s.cfg.Logger.Debug("run finished", "exit_code", res.ExitCode, "duration", res.Duration, "error", err)
	return res, err
}

func (s *Sandbox) enter() error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.wg.Add(1)
	if s.closed.Load() {
		s.wg.Done()
		return ErrClosed
	}
	return nil
}

// Close stops accepting runs and waits for running ones to finish (or for ctx). The compiled interpreter stays
// cached for the process.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closed.Store(true)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		if s.closeOnce.CompareAndSwap(false, true) {
			s.execWorkers.Close()
			s.closeSpares(ctx)
			err := s.snap.image.Close() // live Sessions keep their own mappings
			return errors.Join(err, closeAll(ctx, s.cfg.Closers))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wasmbox: close: %w", ctx.Err())
	}
}

// Session keeps one interpreter alive across Exec calls: globals, imports and the workspace persist. Exec calls
// are serialised. After a hard kill, a trap or os._exit the Session is broken (ErrSessionBroken). A tool called
// by one of the Session's programs cannot Exec in it (ErrReentrant).
type Session struct {
	sb   *Sandbox
	run  *governance.Run // the tool-call budget shared by every Exec (unless a Program names its own)
	turn chan struct{}   // one token: held by the Exec or Close in progress
	g    *guest
	ws   *Workspace
	// closed and broken mirror the Session's state for Alive and Workspace, which never wait for an Exec.
	closed, broken atomic.Bool
	pkgMu          sync.Mutex // serialises InstallPackages, which may run during an Exec
	packages       *vfs.FS
	// installed: packages were installed since the last Exec began (its import caches must be cleared).
	installed atomic.Bool
	// task is the durable task of a Session made by StartSessionTask or ResumeSessionTask (nil otherwise); meta
	// is what it keeps (the starting workspace and every Exec's code), used the program time of its Execs here,
	// replaying is set while ResumeSessionTask replays the recorded Execs.
	task      *governance.Task
	meta      sessionMeta
	used      time.Duration
	replaying bool
	taskEnded bool
}

// NewSession starts an interpreter for step-by-step work. ws may be nil for a fresh workspace.
func (s *Sandbox) NewSession(ctx context.Context, ws *Workspace) (*Session, error) {
	if err := s.reentrant(ctx); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.wg.Done()
	if ws == nil {
		ws = newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, s.clock().time)
	}
	layer := s.packages.Clone() // the session's own: InstallPackages must not change other runs
	g, err := s.newGuestWith(ctx, ws, layer)
	if err != nil {
		return nil, err
	}
	return &Session{sb: s, g: g, ws: ws, packages: layer, run: s.cfg.Gate.NewRun(""), turn: make(chan struct{}, 1)}, nil
}

// Exec runs code in the session's interpreter, with its own deadline and output.
func (se *Session) Exec(ctx context.Context, code string) (*Result, error) {
	return se.ExecProgram(ctx, Program{Code: code})
}

// ExecProgram is Exec with the options of Program (Workspace is ignored: the session's own is used).
func (se *Session) ExecProgram(ctx context.Context, p Program) (*Result, error) {
	start := time.Now()
	ctx, span := se.sb.tel.start(ctx, opExec)
	res, err := se.execProgram(ctx, p)
	se.sb.tel.end(ctx, span, opExec, start, res, err)
	return res, err
}

func (se *Session) execProgram(ctx context.Context, p Program) (*Result, error) {
	if err := se.sb.reentrant(ctx); err != nil {
		return nil, err
	}
	if err := se.sb.checkProgram(p); err != nil {
		return nil, err
	}
	if err := se.sb.enter(); err != nil {
		return nil, err
	}
	defer se.sb.wg.Done()
	if err := se.lock(ctx); err != nil {
		return nil, runError(KindTimeout, ErrTimeout, err)
	}
	defer se.unlock()
	if se.g == nil || se.closed.Load() {
		return nil, ErrClosed
	}
	if se.g.broken != nil {
		return nil, se.g.broken
	}
	se.g.installed = se.installed.Swap(false)
	if se.task != nil {
		if err := se.taskExec(ctx, p); err != nil {
			return nil, err
		}
	}
	if p.Governance == nil {
		p.Governance = se.run
	}
	res, err := se.g.exec(ctx, p, true)
	if se.g.broken != nil {
		se.broken.Store(true)
	}
	if se.task != nil {
		res, err = se.taskExecDone(ctx, res, err)
	}
	return res, err
}

// lock waits for the Session's turn, or for ctx.
func (se *Session) lock(ctx context.Context) error {
	select {
	case se.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (se *Session) unlock() { <-se.turn }

// GovernanceRun returns the run that the session's tool calls count against by default: one for the whole
// Session, so that budgets and max_tool_calls hold across Execs.
func (se *Session) GovernanceRun() *governance.Run { return se.run }

// Workspace returns the session's workspace (nil after Close). It does not wait for an Exec in progress, so a
// tool of the Session's program may call it.
func (se *Session) Workspace() *Workspace {
	if se.closed.Load() {
		return nil
	}
	return se.ws
}

// Alive reports whether the session can still Exec: false once it, or its Sandbox, is closed, or its
// interpreter broke. It never waits for an Exec in progress.
func (se *Session) Alive() bool {
	return !se.closed.Load() && !se.broken.Load() && !se.sb.closed.Load()
}

// Close ends the session's program the way CPython ends one (atexit callbacks, logging's shutdown, the
// finalizers of its globals, every file it left open flushed and closed into the workspace), within the
// Sandbox's Timeout and limits, and releases the interpreter. Output of that last phase goes to Config.Stdout
// and Config.Stderr. It waits for an Exec in progress to end (runs end within their deadline), or for ctx. A
// broken Session (ErrSessionBroken) has no program left to end: Close only releases it.
func (se *Session) Close(ctx context.Context) error {
	se.closed.Store(true)
	if err := se.lock(ctx); err != nil {
		return fmt.Errorf("wasmbox: close session: %w", err)
	}
	defer se.unlock()
	if se.g == nil {
		return nil
	}
	var err error
	if se.g.broken == nil && se.sb.enter() == nil {
		defer se.sb.wg.Done()
		se.g.shutdown = true
		_, err = se.g.exec(ctx, Program{Governance: se.run}, true)
		se.g.shutdown = false
		if err != nil {
			err = fmt.Errorf("wasmbox: close session: ending the program: %w", err)
		}
	}
	se.g.close(ctx)
	se.g = nil
	if se.task != nil && !se.taskEnded {
		se.taskEnded = true
		failure := ""
		if err != nil {
			failure = err.Error()
		}
		if eerr := se.task.End(context.WithoutCancel(ctx), se.used, failure); eerr != nil && err == nil {
			err = fmt.Errorf("%w: close session: recording the end of task %s: %w", ErrGovernance, se.task.ID(), eerr)
		}
	}
	return err
}

// checkProgram refuses what a Program may not ask for, before anything runs.
func (s *Sandbox) checkProgram(p Program) error {
	if p.Governance != nil && p.Governance.Gate() != s.cfg.Gate {
		return fmt.Errorf("%w: Program.Governance comes from another gate than this Sandbox's (use Sandbox.Gate().NewRun)", ErrInvalidConfig)
	}
	return nil
}

// Gate returns the gate that governs this Sandbox's tool calls (Config.Gate, or the default one). Use its NewRun
// to give several programs or Sessions one budget (Program.Governance).
func (s *Sandbox) Gate() *governance.Gate { return s.cfg.Gate }

// Packages lists what Config.Packages installed when the Sandbox was created, dependencies included, in
// install order. Packages a Session installs later are the Session's own and are not listed here.
func (s *Sandbox) Packages() []wheels.Installed { return slices.Clone(s.installed) }

// Info describes the interpreter.
type Info struct {
	Engine string `json:"engine"`
	// Runtime is the registered runtime the Sandbox runs ("base", "sci"), or "custom" for a Config.Interpreter.
	Runtime           string `json:"runtime"`
	PythonVersion     string `json:"python_version"`
	ABIVersion        int    `json:"abi_version"`
	InterpreterSHA256 string `json:"interpreter_sha256"`
	// BuiltIn are the third-party packages built into the runtime, by project name and version (numpy and pandas
	// in "sci"); package installs resolve against them and never replace them.
	BuiltIn map[string]string `json:"built_in,omitempty"`
}

// Info returns the versions of the interpreter this Sandbox runs.
func (s *Sandbox) Info() Info {
	return Info{Engine: s.engineName(), Runtime: s.runtimeName(), PythonVersion: assets.PythonVersion, ABIVersion: hostfuncs.ABIVersion,
		InterpreterSHA256: s.it.sha256, BuiltIn: maps.Clone(map[string]string(s.cfg.provided))}
}

func (s *Sandbox) runtimeName() string {
	switch {
	case s.cfg.runtime != "":
		return s.cfg.runtime
	case s.cfg.Interpreter != nil:
		return "custom"
	}
	return "base"
}

func (s *Sandbox) engineName() string {
	if s.cfg.Engine == "" {
		return "wazero"
	}
	return s.cfg.Engine
}

// closeAll closes cs in reverse order and joins their errors.
func closeAll(ctx context.Context, cs []Closer) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i] == nil {
			continue
		}
		if err := cs[i].Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("wasmbox: close: %w", err))
		}
	}
	return errors.Join(errs...)
}
