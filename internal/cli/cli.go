package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/internal/termsafe"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Exit codes of the CLI contract. The CLI's own codes are reserved: a program that exits with one of them (or with
// a code outside 0..255, which the operating system would truncate) makes the CLI exit with exitRemapped instead,
// and the program's own code is kept in the JSON's program_exit_code and named on stderr. A script can therefore
// trust that 124 means a timeout and 125 a failure of wasmbox itself.
const (
	exitRemapped = 1
	exitUsage    = 2
	exitTimeout  = 124
	exitFailure  = 125
)

// cliExitCode maps a program's exit code to the CLI's, reporting whether it had to change it.
func cliExitCode(program int) (int, bool) {
	switch {
	case program == exitUsage, program == exitTimeout, program == exitFailure, program == exitPaused, program < 0, program > 255:
		return exitRemapped, true
	}
	return program, false
}

const usageText = `usage:
  wasmbox run [--timeout D] [--memory SIZE] [--output-limit SIZE] [--env KEY=VALUE]... [--stdin]
              [--workspace DIR] [--writeback [--writeback-allow-hidden PATH]... [--writeback-only PATH]...
              [--writeback-exec] [--writeback-delete] [--writeback-on-error]] [--audit LOG] [--json]
              [--mcp 'CMD ARGS' | --mcp URL]... [--mcp-env NAME[=VALUE]]... [--mcp-connect-timeout D]
              [--approve allow|deny|ask] [--policy FILE] [--runtime NAME]
              [--store URL [--task-id ID] [--store-key-file F | --store-key-env VAR]] (FILE | -c CODE | -)
  wasmbox resume [the options of run] [--store URL] TASK
  wasmbox approvals list|show|approve|deny|serve [--store URL] ...   (wasmbox approvals: details)
  wasmbox mcp [--http ADDR [--allow-remote] [--allow-origin ORIGIN]...] [--timeout D] [--memory SIZE]
              [--output-limit SIZE] [--workspace-size SIZE]
              [--max-sessions N] [--idle-timeout D] [--max-file-size SIZE] [--runtime NAME]
  wasmbox version [--json]
  wasmbox precompile [--preload MODULE]... [--snapshot-only] [--runtime NAME] DIR
  wasmbox audit verify [--key-file F | --key-env VAR] [--head HASH] [--count N] FILE
`

// Main runs the wasmbox command with args (without the program name) and returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return withTelemetry(ctx, stderr, func(ctx context.Context) int { return runMain(ctx, args[1:], stdin, stdout, stderr, false) })
	case "resume":
		return withTelemetry(ctx, stderr, func(ctx context.Context) int { return runMain(ctx, args[1:], stdin, stdout, stderr, true) })
	case "approvals":
		return approvalsMain(ctx, args[1:], stdout, stderr)
	case "mcp":
		return withTelemetry(ctx, stderr, func(ctx context.Context) int { return mcpMain(ctx, args[1:], stdin, stdout, stderr) })
	case "version":
		return versionMain(ctx, args[1:], stdout, stderr)
	case "audit":
		return auditVerifyMain(args[1:], stdout, stderr)
	case "precompile":
		return precompileMain(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText+telemetryHelp)
		return 0
	default:
		fmt.Fprintf(stderr, "wasmbox: unknown command %q\n%s", args[0], usageText)
		return exitUsage
	}
}

type envFlag map[string]string

func (e envFlag) String() string { return "" }
func (e envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	e[k] = val
	return nil
}

// parseSize reads 512, 512K, 256M, 256MiB, 1G, 1GiB (powers of 1024).
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(u), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

type jsonError struct {
	Kind      string `json:"kind"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

type jsonResult struct {
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// ExitCode is the CLI's exit code; ProgramExitCode is the program's own (they differ when the program's
	// code collides with the CLI's reserved codes, or the program did not finish).
	ExitCode        int                  `json:"exit_code"`
	ProgramExitCode int                  `json:"program_exit_code"`
	DurationMS      float64              `json:"duration_ms"`
	Error           *jsonError           `json:"error"`
	FilesChanged    []wasmbox.FileChange `json:"files_changed"`
	// FilesChangedTotal counts every change; files_changed lists at most wasmbox.MaxFilesChanged of them.
	FilesChangedTotal int            `json:"files_changed_total"`
	WrittenBack       bool           `json:"written_back"`
	WriteBack         *jsonWriteBack `json:"writeback,omitempty"`
	// WriteBackError says why --writeback failed (the run itself is described by the other fields).
	WriteBackError string `json:"writeback_error,omitempty"`
	RunID          string `json:"run_id,omitempty"`
	// AuditHead and AuditRecords anchor the --audit log after the run: keep them, and
	// `wasmbox audit verify --head H --count N LOG` later proves that nothing was cut from its end.
	AuditHead    string               `json:"audit_head,omitempty"`
	AuditRecords int64                `json:"audit_records,omitempty"`
	ToolCalls    []hostfuncs.ToolCall `json:"tool_calls"`
	// TaskID is the durable task of a run with --store (and of resume); Paused is the call it paused at.
	TaskID string                  `json:"task_id,omitempty"`
	Paused *governance.PendingCall `json:"paused,omitempty"`
}

// jsonWriteBack is what --writeback did, in the JSON result.
type jsonWriteBack struct {
	Written    []string      `json:"written"`
	Dirs       []string      `json:"dirs"`
	Deleted    []string      `json:"deleted"`
	NotDeleted []string      `json:"not_deleted"`
	Refused    []jsonRefusal `json:"refused"`
}

type jsonRefusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func writeBackJSON(r *wasmbox.WriteBackReport) *jsonWriteBack {
	if r == nil {
		return nil
	}
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	out := &jsonWriteBack{Written: nonNil(r.Written), Dirs: nonNil(r.Dirs), Deleted: nonNil(r.Deleted),
		NotDeleted: nonNil(r.NotDeleted), Refused: []jsonRefusal{}}
	for _, f := range r.Refused {
		out.Refused = append(out.Refused, jsonRefusal{Path: f.Path, Reason: f.Reason})
	}
	return out
}

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, resume bool) int {
	cmd := "wasmbox run"
	if resume {
		cmd = "wasmbox resume"
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", wasmbox.DefaultTimeout, "deadline of the run")
	memory := fs.String("memory", "256MiB", "memory limit of the guest")
	outputLimit := fs.String("output-limit", "1MiB", "cap on captured stdout and on stderr, each; the excess is dropped and reported")
	passStdin := fs.Bool("stdin", false, "pass this process's standard input to the program (default: the program's stdin is empty)")
	env := envFlag{}
	fs.Var(env, "env", "KEY=VALUE passed to the guest (repeatable); nothing else of the host's environment is")
	wsDir := fs.String("workspace", "", "copy DIR into the workspace before the run")
	writeback := fs.Bool("writeback", false, "write changed files back to --workspace DIR after a run that ended normally: exit status 0, no uncaught exception (hidden paths refused)")
	wbOnError := fs.Bool("writeback-on-error", false, "with --writeback, write back also after an uncaught exception or a non-zero exit (never after a timeout, the memory limit or a failure of wasmbox)")
	var wbOpts wasmbox.WriteBackOptions
	fs.Func("writeback-allow-hidden", "let --writeback write this hidden PATH (e.g. .github); repeatable; never .git for untrusted code", func(v string) error {
		wbOpts.AllowHidden = append(wbOpts.AllowHidden, v)
		return nil
	})
	fs.Func("writeback-only", "restrict --writeback to this PATH (and below); repeatable", func(v string) error {
		wbOpts.Only = append(wbOpts.Only, v)
		return nil
	})
	fs.BoolVar(&wbOpts.Executable, "writeback-exec", false, "keep the execute bits the program gave its files")
	fs.BoolVar(&wbOpts.Delete, "writeback-delete", false, "apply the program's deletions to DIR (default: report them only)")
	asJSON := fs.Bool("json", false, "print exactly one JSON object on stdout")
	code := fs.String("c", "", "program passed as a string")
	auditPath := fs.String("audit", "", "append the run's tool-call records to the hash-chained JSONL audit LOG and report its head")
	var gov govFlags
	gov.register(fs)
	// --mcp client options: the servers' environment and the wait for their handshake.
	var mcpOpts mcpClientFlags
	mcpOpts.register(fs)
	engineName := fs.String("engine", "", "WebAssembly engine: "+strings.Join(wasmbox.Engines(), " or ")+" (default wazero)")
	runtimeName := runtimeFlag(fs)
	var sf storeFlags
	sf.register(fs)
	taskID := fs.String("task-id", "", "with --store: the new task's ID (default: a random one)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "%s: %s\n%s", cmd, msg, usageText)
		return exitUsage
	}
	sf.resolve()
	if resume && sf.url == "" {
		return usage("no store: give --store URL or set WASMBOX_STORE")
	}
	if *taskID != "" && (sf.url == "" || resume) {
		return usage("--task-id names a new task of run --store")
	}
	if _, err := assets.LookupRuntime(*runtimeName); err != nil {
		return usage("--runtime: " + err.Error())
	}
	codeSet := false
	fs.Visit(func(f *flag.Flag) { codeSet = codeSet || f.Name == "c" })
	var src, filename, resumeID string
	switch rest := fs.Args(); {
	case resume && !codeSet && len(rest) == 1:
		resumeID = rest[0]
	case resume:
		return usage("give exactly one TASK")
	case codeSet && len(rest) == 0:
		src, filename = *code, "<string>"
	case !codeSet && len(rest) == 1 && rest[0] == "-":
		if *passStdin {
			return usage("--stdin cannot be combined with a program read from stdin (-)")
		}
		b, err := io.ReadAll(stdin)
		if err != nil {
			return usage("reading the program from stdin: " + err.Error())
		}
		src, filename = string(b), "<stdin>"
		stdin = nil // stdin carried the program
	case !codeSet && len(rest) == 1:
		b, err := os.ReadFile(rest[0])
		if err != nil {
			return usage(err.Error())
		}
		src, filename = string(b), rest[0]
	default:
		return usage("give exactly one of FILE, -c CODE or -")
	}
	if *writeback && *wsDir == "" {
		return usage("--writeback needs --workspace DIR")
	}
	if resume && *wsDir != "" && !*writeback {
		return usage("a resumed task has the workspace it started with: --workspace DIR is only the --writeback target")
	}
	if sf.url != "" && *passStdin {
		return usage("--stdin cannot be used with --store (a resumed task could not read it again)")
	}
	if *wsDir != "" {
		if fi, err := os.Stat(*wsDir); err != nil {
			return usage(fmt.Sprintf("--workspace %s: %v", termsafe.Clean(*wsDir), errors.Unwrap(err)))
		} else if !fi.IsDir() {
			return usage(fmt.Sprintf("--workspace %s: not a directory", termsafe.Clean(*wsDir)))
		}
	}
	if !*writeback && (len(wbOpts.AllowHidden) > 0 || len(wbOpts.Only) > 0 || wbOpts.Executable || wbOpts.Delete || *wbOnError) {
		return usage("--writeback-* options need --writeback")
	}
	mem, err := parseSize(*memory)
	if err != nil {
		return usage("--memory: " + err.Error())
	}
	if *timeout <= 0 {
		return usage("--timeout must be positive")
	}
	outLimit, err := parseSize(*outputLimit)
	if err != nil || outLimit > 1<<30 {
		return usage(fmt.Sprintf("--output-limit: want a size from 1 byte to 1GiB, got %q", *outputLimit))
	}
	cfg := wasmbox.Config{Timeout: *timeout, MemoryLimit: mem, Env: env, Engine: *engineName, Runtime: *runtimeName,
		StdoutLimit: int(outLimit), StderrLimit: int(outLimit)}
	if !*asJSON {
		cfg.Stdout, cfg.Stderr = stdout, stderr
	}
	if err := cacheFromEnv(&cfg); err != nil {
		return usage(err.Error())
	}
	cfg.OnCompile = compileProgress(stderr, cfg.CacheDir)
	fail := func(err error) int {
		if *asJSON {
			writeJSON(stdout, jsonResult{ExitCode: exitFailure, Error: &jsonError{Kind: string(wasmbox.KindInternal), Message: err.Error()}})
		} else {
			fmt.Fprintln(stderr, err)
		}
		if errors.Is(err, wasmbox.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailure
	}
	if gov.approve == "ask" && (*passStdin || filename == "<stdin>") {
		return usage("--approve ask reads answers from stdin; it cannot be combined with --stdin or a program read from stdin (-)")
	}
	gcfg, err := gov.gateConfig(stdin, stderr)
	if err != nil {
		return usage(err.Error())
	}
	var audit *governance.JSONLAuditor
	if *auditPath != "" {
		if audit, err = governance.OpenAuditFile(*auditPath, governance.JSONLConfig{}); err != nil {
			return fail(fmt.Errorf("wasmbox: --audit: %w", err))
		}
		defer audit.Close()
		gcfg.Auditor = audit
	}
	if sf.url != "" {
		closer, err := sf.open(ctx, &gcfg)
		if err != nil {
			return fail(fmt.Errorf("wasmbox: --store: %w", err))
		}
		defer closer.Close()
		// A task is replayed when it resumes: its programs see the deterministic clock and randomness.
		cfg.Deterministic = true
	}
	if audit != nil || gov.used() || sf.url != "" {
		if cfg.Gate, err = governance.NewGate(gcfg); err != nil {
			return fail(err)
		}
	}
	if len(gov.mcp) > 0 {
		if err := connectMCP(ctx, gov.mcp, *timeout, mcpOpts, &cfg, stderr); err != nil {
			return fail(err)
		}
	}
	starttrace.Mark("CLI: arguments, telemetry, configuration")
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer sb.Close(context.WithoutCancel(ctx))
	starttrace.Mark("New: the rest")
	ws := wasmbox.NewWorkspace(0, 0)
	if *wsDir != "" && !resume {
		if err := ws.CopyIn(ctx, *wsDir); err != nil {
			return fail(err)
		}
	}
	prog := wasmbox.Program{Code: src, Filename: filename, Workspace: ws}
	if filename != "<string>" && filename != "<stdin>" {
		prog.Args = []string{filename}
	} else {
		prog.Args = []string{"-c"}
	}
	if *passStdin && stdin != nil {
		prog.Stdin = stdin
	}
	start := time.Now()
	var res *wasmbox.Result
	var runErr error
	switch {
	case resume:
		res, runErr = sb.ResumeTask(ctx, resumeID, wasmbox.TaskOptions{})
	case sf.url != "":
		res, runErr = sb.StartTask(ctx, prog, wasmbox.TaskOptions{ID: *taskID})
	default:
		res, runErr = sb.RunProgram(ctx, prog)
	}
	starttrace.Mark("first Run")
	if res == nil {
		return fail(runErr)
	}
	if res.Workspace != nil {
		ws = res.Workspace
	}
	// Write back only a program that ran to its end: after a timeout, the memory limit or a failure of wasmbox
	// the workspace is whatever the program had reached, and is not copied out. After an uncaught exception or
	// a non-zero exit it is copied out only with --writeback-on-error.
	wroteBack := false
	var wbReport *wasmbox.WriteBackReport
	var wbErr error
	failed := res.Exception != nil || res.ExitCode != 0
	if *writeback && runErr == nil && (!failed || *wbOnError) {
		rep, err := ws.WriteBackWith(ctx, *wsDir, wbOpts)
		if err != nil && !errors.Is(err, wasmbox.ErrWriteBackRefused) {
			wbErr = err // the run is still reported, with this error
		} else {
			wroteBack = true
		}
		wbReport = rep
	}
	if wbReport != nil && (len(wbReport.Refused) > 0 || len(wbReport.NotDeleted) > 0) {
		// Said on stderr in both modes: in --json, stdout carries only the object (which lists them too). The
		// paths and reasons are the program's choice: escaped, so that they cannot drive the terminal.
		for _, r := range wbReport.Refused {
			fmt.Fprintf(stderr, "wasmbox: writeback refused %s: %s\n", termsafe.Clean(r.Path), termsafe.Clean(r.Reason))
		}
		if n := len(wbReport.NotDeleted); n > 0 {
			fmt.Fprintf(stderr, "wasmbox: writeback left %d deleted path(s) on the host (see --writeback-delete): %s\n", n, termsafe.Clean(strings.Join(wbReport.NotDeleted, ", ")))
		}
	}
	if wbErr != nil {
		fmt.Fprintf(stderr, "wasmbox: writeback failed: %s\n", termsafe.Clean(wbErr.Error()))
	}
	exit, remapped := cliExitCode(res.ExitCode)
	var je *jsonError
	var re *wasmbox.RunError
	switch {
	case errors.As(runErr, &re):
		je = &jsonError{Kind: string(re.Kind), Message: runErr.Error()}
		switch re.Kind {
		case wasmbox.KindTimeout:
			exit = exitTimeout
		case wasmbox.KindInternal, wasmbox.KindGovernance:
			exit = exitFailure
		case wasmbox.KindPaused:
			exit = exitPaused
		}
	case runErr != nil:
		je = &jsonError{Kind: string(wasmbox.KindInternal), Message: runErr.Error()}
		exit = exitFailure
	}
	if res.Exception != nil {
		if je == nil {
			// The exception's type is the program's own report: the kind of failure comes from the host only
			// (a run error above), so an uncaught exception without one is a Python failure, whatever its type.
			je = &jsonError{Kind: string(wasmbox.KindPython)}
		}
		je.Type, je.Message, je.Traceback = res.Exception.Type, res.Exception.Message, res.Exception.Traceback
	}
	if wbErr != nil {
		exit = exitFailure
	}
	var auditHead string
	var auditRecords int64
	if audit != nil {
		auditHead, auditRecords = audit.Anchor()
	}
	if *asJSON {
		out := jsonResult{TaskID: res.TaskID, Paused: res.Paused, AuditHead: auditHead, AuditRecords: auditRecords, Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated,
			StderrTruncated: res.StderrTruncated, ExitCode: exit, ProgramExitCode: res.ExitCode,
			DurationMS: float64(time.Since(start).Microseconds()) / 1000, Error: je,
			FilesChanged: res.FilesChanged, FilesChangedTotal: res.FilesChangedTotal, WrittenBack: wroteBack, WriteBack: writeBackJSON(wbReport), RunID: res.RunID, ToolCalls: res.ToolCalls}
		if wbErr != nil {
			out.WriteBackError = wbErr.Error()
		}
		if out.ToolCalls == nil {
			out.ToolCalls = []hostfuncs.ToolCall{}
		}
		if out.FilesChanged == nil {
			out.FilesChanged = []wasmbox.FileChange{}
		}
		writeJSON(stdout, out)
		return exit
	}
	// Text mode: the program's output was streamed; say on stderr what the stream alone cannot show.
	for _, tr := range []struct {
		name string
		cut  bool
	}{{"stdout", res.StdoutTruncated}, {"stderr", res.StderrTruncated}} {
		if tr.cut {
			fmt.Fprintf(stderr, "wasmbox: %s truncated at %s (raise --output-limit)\n", tr.name, *outputLimit)
		}
	}
	switch {
	case res.Paused != nil:
		fmt.Fprintln(stderr, pausedMessage(res.Paused))
	case runErr != nil:
		fmt.Fprintln(stderr, termsafe.Clean(runErr.Error()))
	case res.TaskID != "":
		fmt.Fprintf(stderr, "wasmbox: task %s done\n", res.TaskID)
	}
	switch {
	case !*writeback || wroteBack || wbErr != nil:
	case runErr != nil:
		fmt.Fprintln(stderr, "wasmbox: workspace not written back: the program did not run to its end")
	default:
		fmt.Fprintln(stderr, "wasmbox: workspace not written back: the program failed (add --writeback-on-error to write it back anyway)")
	}
	if audit != nil {
		fmt.Fprintf(stderr, "wasmbox: audit %s: %d records, head %s\n", *auditPath, auditRecords, auditHead)
	}
	if remapped && runErr == nil {
		fmt.Fprintf(stderr, "wasmbox: the program exited with %d, a code the CLI reserves; exiting with %d\n", res.ExitCode, exit)
	}
	return exit
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func versionMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmbox version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() != 0 {
		return exitUsage
	}
	cfg := wasmbox.Config{}
	if err := cacheFromEnv(&cfg); err != nil {
		fmt.Fprintln(stderr, "wasmbox version:", err)
		return exitUsage
	}
	cfg.OnCompile = compileProgress(stderr, cfg.CacheDir)
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	defer sb.Close(ctx)
	info := sb.Info()
	if *asJSON {
		writeJSON(stdout, struct {
			wasmbox.Info
			Runtimes []runtimeInfo `json:"runtimes"`
		}{info, runtimeInfos()})
		return 0
	}
	fmt.Fprintf(stdout, "wasmbox: CPython %s, ABI v%d, interpreter sha256 %s\n", info.PythonVersion, info.ABIVersion, info.InterpreterSHA256)
	for _, rt := range runtimeInfos() {
		fmt.Fprintf(stdout, "runtime %s: %s\n", rt.Name, rt.Description)
	}
	return 0
}

// parseExit is the exit code of a flag parse that failed: 0 for -h/--help (the flag package has printed the
// subcommand's flags), 2 for a usage error.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return exitUsage
}
