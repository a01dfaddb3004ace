package wasmbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/testcache"
	"github.com/wasmbox/wasmbox/wheels"
)

// Defaults applied to zero-valued Config fields.
const (
	DefaultMemoryLimit    = 256 << 20 // bytes of guest linear memory
	DefaultTimeout        = 30 * time.Second
	DefaultOutputLimit    = 1 << 20 // bytes each of stdout and stderr
	DefaultWorkspaceBytes = 64 << 20
	DefaultWorkspaceFiles = 10_000
	DefaultStdinLimit     = 16 << 20 // bytes read from Program.Stdin per run
	MaxMemoryLimit        = 4 << 30  // the wasm32 address space
)

// DeterministicEpoch is the wall-clock time a deterministic run starts at when Config.Time is zero.
var DeterministicEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Config configures a Sandbox. Every field's zero value is a safe default; New validates the whole value once and
// keeps its own copy (changing the caller's Config later has no effect).
type Config struct {
	// MemoryLimit caps the guest's linear memory in bytes. Zero means DefaultMemoryLimit (256 MiB). Going over
	// raises MemoryError in Python; uncaught, the run fails with ErrMemoryLimit.
	MemoryLimit int64
	// Timeout bounds every Run and Session.Exec in wall-clock time, the program's tool calls included (the
	// context's own deadline applies too, whichever is first). Zero means DefaultTimeout (30 s). When it passes,
	// Python code gets a KeyboardInterrupt and any code still running 40 ms later (C-level loops, handlers,
	// finalizers, a tool that does not return) is killed; a tool's result that arrives after it is discarded.
	// The one pause: while the gate waits for a human to approve a call, the program's clock stops; that wait
	// is bounded by the gate's ApprovalTimeout and by the caller's context, which keeps running.
	Timeout time.Duration
	// StdoutLimit and StderrLimit cap the captured output in bytes; the excess is dropped, a marker is appended
	// and Result.StdoutTruncated / StderrTruncated are set. Zero means DefaultOutputLimit (1 MiB each).
	StdoutLimit, StderrLimit int
	// StdinLimit caps the bytes read from Program.Stdin per run; past it the program sees end of file. Zero
	// means DefaultStdinLimit (16 MiB). A read of stdin waits for data, end of file or the end of the run (then
	// the program sees end of file); it never waits past the deadline for a Reader that blocks.
	StdinLimit int64
	// WorkspaceBytes and WorkspaceFiles are the quotas of the in-memory workspace (/workspace) and of /tmp, each.
	// Writing past them gives ENOSPC (bytes) or EDQUOT (files) in Python. Zero means 64 MiB and 10,000 files.
	WorkspaceBytes int64
	WorkspaceFiles int
	// Env is the guest's entire environment. Nothing from the host's environment is passed unless it is named
	// here (see EnvFromHost). TMPDIR and HOME are set to /tmp and /workspace unless given.
	Env map[string]string
	// Stdout and Stderr, when set, receive the program's output while it runs (within the limits above), in
	// addition to Result.Stdout/Stderr. They are called from the goroutine running the program (the caller's, or,
	// in a sandbox with tools, a worker of the Sandbox), one call at a time per run; a writer shared by concurrent
	// runs must be safe for concurrent use.
	Stdout, Stderr io.Writer
	// Deterministic replaces the real clock and randomness: the wall clock starts at Time (DeterministicEpoch if
	// zero) and advances 1 µs per reading, and all randomness derives from Seed. The same code, input and Seed
	// then produce byte-identical output.
	Deterministic bool
	Seed          int64
	Time          time.Time
	// Preload lists modules imported once when the interpreter is prepared, so runs do not pay for them.
	Preload []string
	// CacheDir is the on-disk cache: the compiled interpreter (about 45 MB per compiled module; the first
	// process compiles two, which takes tens of seconds), the decompressed interpreter, and saved snapshots of
	// initialised interpreters (about 20–30 MB each) so that later processes start without compiling or
	// initialising. Empty means <os.UserCacheDir()>/wasmbox/compile (~/.cache/wasmbox/compile on Linux,
	// ~/Library/Caches/wasmbox/compile on macOS, %LocalAppData%\wasmbox\compile on Windows); the cache is
	// skipped silently if that directory cannot be created. DisableCompileCache turns it off. It holds native
	// code that the process runs: keep it private to the user (wasmbox creates it 0700). Several processes may
	// share it.
	CacheDir            string
	DisableCompileCache bool
	// CacheMaxBytes caps CacheDir's size: after writing to it, the least recently used entries (whole entries:
	// one compiled module, one snapshot, one decompressed interpreter) are removed until it fits, except those
	// used in the last 10 minutes, which another process may be about to read. Zero means DefaultCacheMaxBytes
	// (1 GiB); negative means no cap.
	CacheMaxBytes int64
	// PrecompiledDir is a directory made by Precompile (or `wasmbox precompile DIR`) at build time, used
	// read-only: the compiled interpreter and the saved snapshot come from it, so the first Run of a process
	// compiles and initialises nothing. New fails with ErrPrecompiled if it was made by another wasmbox or
	// wazero version, for another GOOS, GOARCH or CPU, or for another interpreter, or when a file in it changed.
	// Snapshots of configurations it does not hold are saved in CacheDir as usual. Empty means none.
	PrecompiledDir string
	// OnCompile, when set, is called before (done false) and after (done true) each compilation that the
	// on-disk cache cannot answer, which takes tens of seconds: a CLI shows progress with it. It is called on
	// the goroutine of New.
	OnCompile func(e CompileEvent)
	// ExceptionAsError makes an uncaught Python exception also a Go error (wrapping ErrPython).
	ExceptionAsError bool
	// Logger receives debug and trace events. Nil means no logging. For log/slog, pass
	// governance.SlogLogger(yourSlogLogger).
	Logger hclog.Logger
	// Tools are the host functions the code may call, as the Python module `tools` (import tools). Nil means
	// none: the module then exists but is empty.
	Tools *hostfuncs.Registry
	// Gate governs every tool call (policy, approval, budgets, max_tool_calls, audit). Nil means DefaultGate:
	// allow tools marked read-only or mutating, deny the rest (no approver), at most 50 calls per run, audit in
	// memory.
	Gate *governance.Gate
	// Wheelhouse, when set, is where pure-Python packages are installed from (offline, allow-listed by its
	// Options): Config.Packages at New, and Session.InstallPackages later. Nil means no installs.
	Wheelhouse *wheels.Wheelhouse
	// Packages are requirements ("attrs", "tabulate==0.9.0") installed from Wheelhouse when the Sandbox is created;
	// every run sees them read-only under /packages (on sys.path).
	Packages []string
	// Engine names the WebAssembly engine: "" or "wazero" (pure Go, the default), or "wasmtime" in programs
	// that import github.com/wasmbox/wasmbox/wasmtime (a module of its own; cgo; faster compute). See Engines.
	Engine string
	// Interpreter replaces the embedded interpreter (assets.Load()), e.g. with one built with extra modules.
	// It must speak the same ABI version; New checks its exports. Nil means the one Runtime names.
	Interpreter *assets.Interpreter
	// Runtime selects a registered interpreter by name: "" or "base" is the embedded CPython with its standard
	// library; "sci" (numpy and pandas) is registered by importing github.com/wasmbox/wasmbox/sci, a module of
	// its own. A name that is not linked in is an ErrInvalidConfig saying which module provides it. A runtime
	// brings its default Preload (numpy and pandas for "sci"), used when Preload is nil; an empty non-nil
	// Preload imports nothing. Setting both Runtime (other than "base") and Interpreter is an error.
	// See assets.Runtimes.
	Runtime string

	// runtime is the registered runtime that set Interpreter (withDefaults), "" otherwise; provided its
	// built-in packages, which package installs resolve against.
	runtime  string
	provided wheels.Provided
	// Closers live as long as the Sandbox: Close closes them, in reverse order, once the last run has ended
	// (and New closes them if it fails). They are what the Sandbox's tools depend on, such as the MCP servers
	// whose tools it serves (package mcp). Nil means none.
	Closers []Closer
	// TracerProvider gives the spans of every Run ("wasmbox.run") and Session Exec ("wasmbox.exec"), each a
	// child of the span in the caller's context. Nil means the global one (otel.GetTracerProvider()), which
	// records nothing until the program installs an OpenTelemetry SDK. The spans of tool calls come from the
	// Gate (governance.GateConfig.TracerProvider): the default gate uses this provider, a Gate you pass uses
	// its own, and either way they are children of the run's span. See "Traces and metrics" in the package
	// documentation.
	TracerProvider trace.TracerProvider
	// MeterProvider gives the metrics of runs (wasmbox.runs, wasmbox.run.duration). Nil means the global one
	// (otel.GetMeterProvider()). The default gate's tool-call metrics use it too.
	MeterProvider metric.MeterProvider
}

// Closer is a resource whose life is the Sandbox's (Config.Closers).
type Closer interface {
	Close(ctx context.Context) error
}

// CompileEvent reports a compilation of the interpreter (Config.OnCompile).
type CompileEvent struct {
	// Module is "interpreter" (the module that initialises) or "snapshot module" (the one runs start from).
	Module string
	// Done is false when the compilation starts and true when it ends; Elapsed and Err are set then.
	Done    bool
	Elapsed time.Duration
	Err     error
}

// EnvFromHost returns the named host environment variables that are set, for Config.Env. Nothing else of the
// host's environment ever reaches the guest.
func EnvFromHost(names ...string) map[string]string {
	env := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env[n] = v
		}
	}
	return env
}

// withDefaults validates c and returns a copy with defaults applied.
func (c Config) withDefaults() (Config, error) {
	bad := func(field, why string) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, why)
	}
	switch {
	case c.MemoryLimit < 0:
		return bad("MemoryLimit", "is negative")
	case c.MemoryLimit > MaxMemoryLimit:
		return bad("MemoryLimit", fmt.Sprintf("exceeds %d bytes (the wasm32 address space)", int64(MaxMemoryLimit)))
	case c.MemoryLimit > 0 && c.MemoryLimit < 64<<20:
		return bad("MemoryLimit", "is below 64 MiB, too small for the interpreter")
	case c.Timeout < 0:
		return bad("Timeout", "is negative")
	case c.StdoutLimit < 0 || c.StderrLimit < 0:
		return bad("StdoutLimit/StderrLimit", "is negative")
	case c.StdinLimit < 0:
		return bad("StdinLimit", "is negative")
	case c.WorkspaceBytes < 0 || c.WorkspaceFiles < 0:
		return bad("WorkspaceBytes/WorkspaceFiles", "is negative")
	}
	for k := range c.Env {
		if k == "" || containsAny(k, "=\x00") {
			return bad("Env", fmt.Sprintf("has an invalid name %q", k))
		}
		if containsAny(c.Env[k], "\x00") {
			return bad("Env", fmt.Sprintf("value of %q contains NUL", k))
		}
	}
	for _, m := range c.Preload {
		if !isModuleName(m) {
			return bad("Preload", fmt.Sprintf("has an invalid module name %q", m))
		}
	}
	if c.Runtime != "" && c.Runtime != "base" {
		if c.Interpreter != nil {
			return bad("Runtime", fmt.Sprintf("%q and Interpreter are both set: choose one", c.Runtime))
		}
		rt, err := assets.LookupRuntime(c.Runtime)
		if err != nil {
			return Config{}, fmt.Errorf("%w: Runtime: %w", ErrInvalidConfig, err)
		}
		it, err := rt.Load()
		if err != nil {
			return Config{}, fmt.Errorf("%w: runtime %s: %w", ErrInterpreter, c.Runtime, err)
		}
		c.Interpreter, c.runtime, c.provided = it, rt.Name, wheels.Provided(rt.Packages)
		if c.Preload == nil {
			c.Preload = rt.Preload
		}
	}
	if c.PrecompiledDir != "" && c.Engine != "" && c.Engine != "wazero" {
		return bad("PrecompiledDir", "is for the wazero engine only")
	}
	if len(c.Packages) > 0 && c.Wheelhouse == nil {
		return bad("Packages", "needs a Wheelhouse to install from")
	}
	c.Packages = append([]string(nil), c.Packages...)
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StdoutLimit == 0 {
		c.StdoutLimit = DefaultOutputLimit
	}
	if c.StderrLimit == 0 {
		c.StderrLimit = DefaultOutputLimit
	}
	if c.StdinLimit == 0 {
		c.StdinLimit = DefaultStdinLimit
	}
	if c.WorkspaceBytes == 0 {
		c.WorkspaceBytes = DefaultWorkspaceBytes
	}
	if c.WorkspaceFiles == 0 {
		c.WorkspaceFiles = DefaultWorkspaceFiles
	}
	if c.Time.IsZero() {
		c.Time = DeterministicEpoch
	}
	if c.Gate == nil {
		gc := DefaultGateConfig()
		gc.TracerProvider, gc.MeterProvider = c.TracerProvider, c.MeterProvider
		g, err := governance.NewGate(gc)
		if err != nil {
			return Config{}, fmt.Errorf("wasmbox: default gate: %w", err)
		}
		c.Gate = g
	}
	if c.Tools == nil {
		c.Tools = hostfuncs.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	env := make(map[string]string, len(c.Env))
	for k, v := range c.Env {
		env[k] = v
	}
	c.Env = env
	c.Preload = append([]string(nil), c.Preload...)
	if c.CacheDir == "" && !c.DisableCompileCache {
		c.CacheDir = DefaultCacheDir()
	}
	if c.DisableCompileCache {
		c.CacheDir = ""
	}
	return c, nil
}

// DefaultCacheDir is where the cache lives when Config.CacheDir is empty: <os.UserCacheDir()>/wasmbox/compile, or
// "" if the system names no user cache directory (then nothing is cached on disk). In this module's own tests it
// is a temporary directory (internal/testcache), never the user's.
func DefaultCacheDir() string {
	if d := testcache.Dir(); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wasmbox", "compile")
}

func containsAny(s, chars string) bool {
	for _, r := range s {
		for _, c := range chars {
			if r == c {
				return true
			}
		}
	}
	return false
}

func isModuleName(s string) bool {
	if s == "" {
		return false
	}
	start := true
	for _, r := range s {
		switch {
		case r == '.':
			if start {
				return false
			}
			start = true
			continue
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case r >= '0' && r <= '9':
			if start {
				return false
			}
		default:
			return false
		}
		start = false
	}
	return !start
}

// DefaultGate is the gate used when Config.Gate is nil: every tool may run except those whose effect is
// irreversible or unmarked (they need an approver, and there is none), at most governance's default of 50 calls
// per run, with the audit kept in memory (the last 10,000 records).
func DefaultGate() (*governance.Gate, error) {
	g, err := governance.NewGate(DefaultGateConfig())
	if err != nil {
		return nil, fmt.Errorf("wasmbox: default gate: %w", err)
	}
	return g, nil
}

// DefaultGateConfig is the configuration of DefaultGate, for callers who want its policy with an auditor (or
// limits) of their own.
func DefaultGateConfig() governance.GateConfig {
	return governance.GateConfig{
		Policy:   governance.EffectPolicy{},
		Approver: governance.DenyAll{},
		Auditor:  &governance.MemoryAuditor{Limit: 10_000},
	}
}
