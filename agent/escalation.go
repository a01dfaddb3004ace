package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/wasmbox/wasmbox/escalate"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// ToolRunInContainer is the name of the tool that runs a program in the escalation container.
const ToolRunInContainer = "run_in_container"

// LabelPackages is the job label that names the escalated requirements (comma-separated), for policies.
const LabelPackages = "org.wasmbox.agent.packages"

// EscalationConfig configures escalation to a container for packages that need native code. See EscalatingInstaller and WithEscalation.
type EscalationConfig struct {
	// Backend runs the containers, e.g. from escalate.NewDocker. Nil: escalation is unavailable and
	// install_package says so (fail closed); WithEscalation then offers no run_in_container.
	Backend escalate.Backend
	// Policy decides whether a job may escalate (escalate.Allowed): asked when install_package escalates a
	// package, and again before every run_in_container run. Nil denies everything.
	//
	// At install time the job is a preview: Image, Python, Limits, the pip command in Argv and the requirements
	// in Labels[LabelPackages] (no Files, no Code). At run time it is the job that runs: the program (wrapped in
	// a prelude that installs the escalated packages), the workspace files and the wheels in Files, and the same
	// label.
	Policy escalate.Policy
	// Image is the container image (never pulled: it must be in the engine). It must have Python and pip.
	Image string
	// Python is the interpreter in the image; empty: escalate.DefaultPython (python3).
	Python string
	// WheelhouseDir is the host directory of wheels that the container's pip installs from (offline:
	// --no-index --find-links). Usually the directory of the sandbox's Config.Wheelhouse. Only the wheels of the
	// escalated projects are copied into a run. Empty: no package can be escalated.
	WheelhouseDir string
	// Limits bound each container run; zero values are escalate's defaults. A run is also bounded by the calling
	// program's own time limit (wasmbox Config.Timeout, 30 s by default), pip install included.
	Limits escalate.Limits
	// NoTools, if set, gives the container programs no tools; otherwise they may call the agent's tools
	// (import wasmbox_tools as tools), through the same Gate, as governance.SourceContainer calls.
	NoTools bool
}

// WithEscalation enables escalation for the code-action agent: install_package becomes
// EscalatingInstaller(cfg), and, when cfg.Backend is set, the programs get the tool
// run_in_container(code) -> {stdout, stderr, exit_code, files_changed} (a mutating tool, through the Gate like
// every tool). cfg.Image must be set.
func WithEscalation(cfg EscalationConfig) Option {
	return func(o *options) {
		if cfg.Image == "" {
			o.fail("WithEscalation: Image is empty")
		}
		o.installer = EscalatingInstaller(cfg)
		if cfg.Backend != nil {
			o.escalation = &cfg
		} else {
			o.escalation = nil
		}
	}
}

// EscalatingInstaller installs like SessionInstaller, and escalates a package that needs native code
// (wheels.ErrNeedsNative) when cfg.Policy allows it and cfg.Backend is set: the package is recorded for the
// session's workspace, to be installed in the container before every run_in_container program, and the model
// is told so. Otherwise the error explains why not: escalate.ErrNotAllowed (no policy, or the policy refused),
// escalate.ErrNoEngine (no backend: fail closed), or a missing image or wheel. Either way it is an observation,
// never an abort.
func EscalatingInstaller(cfg EscalationConfig) PackageInstaller {
	session := SessionInstaller()
	return PackageInstallerFunc(func(ctx context.Context, req InstallRequest) (string, error) {
		out, err := session.InstallPackages(ctx, req)
		var we *wheels.Error
		if !errors.Is(err, wheels.ErrNeedsNative) || !errors.As(err, &we) {
			return out, err
		}
		what := strings.Join(req.Packages, ", ")
		cannot := fmt.Sprintf("%s needs native code (%s), which cannot run in this sandbox", what, strings.Join(we.Files, ", "))
		if we.Project != "" && !slices.ContainsFunc(req.Packages, func(r string) bool { return projectOf(r) == we.Project }) {
			cannot = fmt.Sprintf("%s depends on %s, which needs native code (%s) and cannot run in this sandbox", what, we.Project, strings.Join(we.Files, ", "))
		}
		preview := cfg.job(req.Packages)
		preview.Argv = pipArgv(cfg.python(), req.Packages)
		refuse := func(why error) error {
			return &escalationError{errs: []error{err, why}, msg: fmt.Sprintf("%s, and it cannot run in a container either: %v. "+
				"Use the standard library or a pure-Python alternative.", cannot, why)}
		}
		if aerr := escalate.Allowed(ctx, cfg.Policy, preview); aerr != nil {
			return out, refuse(aerr)
		}
		switch {
		case cfg.Backend == nil:
			return out, refuse(fmt.Errorf("%w: no container backend is configured (escalation fails closed)", escalate.ErrNoEngine))
		case cfg.Image == "":
			return out, refuse(errors.New("no container image is configured"))
		case cfg.WheelhouseDir == "":
			return out, refuse(errors.New("no wheelhouse directory is configured for the container"))
		case req.Workspace == nil:
			return out, refuse(errors.New("no workspace"))
		}
		files, ferr := escalationWheels(cfg.WheelhouseDir, req.Packages, we.Files)
		if ferr != nil {
			return out, refuse(ferr)
		}
		recordEscalation(req.Workspace, req.Packages, files)
		return out + fmt.Sprintf("%s: not installed in this sandbox: it needs native code (%s). "+
			"It will be installed in a separate container instead: call %s(code=...) with a complete Python program that imports it. "+
			"That program runs in its own Python process (no variables are shared with this sandbox) with a copy of /workspace as its "+
			"working directory; the files it writes there are copied back. Do not import %s here.\n",
			what, strings.Join(we.Files, ", "), ToolRunInContainer, what), nil
	})
}

// escalationError explains why a package was not escalated; it wraps the wheels error (ErrNeedsNative) and the
// reason (escalate.ErrNotAllowed, escalate.ErrNoEngine, ...).
type escalationError struct {
	msg  string
	errs []error
}

func (e *escalationError) Error() string   { return e.msg }
func (e *escalationError) Unwrap() []error { return e.errs }

func (cfg *EscalationConfig) python() string {
	if cfg.Python == "" {
		return escalate.DefaultPython
	}
	return cfg.Python
}

// job is the skeleton of every job of this configuration.
func (cfg *EscalationConfig) job(pkgs []string) escalate.Job {
	j := escalate.Job{Image: cfg.Image, Python: cfg.Python, Limits: cfg.Limits,
		Labels: map[string]string{"org.wasmbox.agent": ToolRunInContainer}}
	if len(pkgs) > 0 {
		j.Labels[LabelPackages] = strings.Join(pkgs, ",")
	}
	return j
}

// wheelDir is where the wheels of the escalated packages are copied in the container's workspace; the prelude
// deletes it before the program starts, and changes below it are never copied back. The workspace's own files
// there are not copied in.
const wheelDir = ".wasmbox-escalate"

// pipArgv is the pip command that installs the escalated packages, offline, into /tmp.
func pipArgv(python string, pkgs []string) []string {
	return append([]string{python, "-m", "pip", "install", "--no-index", "--find-links", wheelDir + "/wheels",
		"--only-binary", ":all:", "--target", containerPackages, "--no-cache-dir", "--disable-pip-version-check",
		"--no-warn-script-location", "--quiet"}, pkgs...)
}

// containerPackages is where pip installs in the container (a tmpfs: the root file system is read-only).
const containerPackages = "/tmp/wasmbox-packages"

// projectOf returns the normalised project name of a requirement string ("Foo_Bar[x]>=1" → "foo-bar").
func projectOf(req string) string {
	req = strings.TrimSpace(req)
	if i := strings.IndexAny(req, "[<>=!~;@( \t"); i >= 0 {
		req = req[:i]
	}
	return wheels.Normalize(req)
}

// escalationWheels returns the host paths of the wheels to copy into a container: the files named by the
// ErrNeedsNative error and every wheel of the requested projects, by base name. Source distributions are not
// copied (pip runs with --only-binary :all:).
func escalationWheels(dir string, pkgs, named []string) (map[string]string, error) {
	want := map[string]bool{}
	for _, p := range pkgs {
		want[projectOf(p)] = true
	}
	out := map[string]string{}
	add := func(name string) {
		if strings.HasSuffix(strings.ToLower(name), ".whl") && !strings.ContainsAny(name, `/\`) {
			out[name] = filepath.Join(dir, name)
		}
	}
	for _, f := range named {
		add(f)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the wheelhouse: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(strings.ToLower(name), ".whl") {
			continue
		}
		if dist, _, ok := strings.Cut(name, "-"); ok && want[wheels.Normalize(dist)] {
			add(name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the wheelhouse has no wheel for it (source distributions are not built)")
	}
	return out, nil
}

// escalated holds, per workspace, the requirements escalated to the container and the wheels they need. Entries
// go away with their workspace.
var escalated struct {
	mu sync.Mutex
	m  map[weak.Pointer[wasmbox.Workspace]]*escalation
}

type escalation struct {
	reqs   []string
	wheels map[string]string // base name → host path
}

func recordEscalation(ws *wasmbox.Workspace, reqs []string, files map[string]string) {
	key := weak.Make(ws)
	escalated.mu.Lock()
	defer escalated.mu.Unlock()
	if escalated.m == nil {
		escalated.m = map[weak.Pointer[wasmbox.Workspace]]*escalation{}
	}
	e := escalated.m[key]
	if e == nil {
		e = &escalation{wheels: map[string]string{}}
		escalated.m[key] = e
		runtime.AddCleanup(ws, func(k weak.Pointer[wasmbox.Workspace]) {
			escalated.mu.Lock()
			delete(escalated.m, k)
			escalated.mu.Unlock()
		}, key)
	}
	for _, r := range reqs {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(e.reqs, r) {
			e.reqs = append(e.reqs, r)
		}
	}
	for k, v := range files {
		e.wheels[k] = v
	}
}

// EscalatedPackages returns the requirements escalated to the container for ws, in the order they were asked
// for.
func EscalatedPackages(ws *wasmbox.Workspace) []string {
	reqs, _ := escalatedFor(ws)
	return reqs
}

func escalatedFor(ws *wasmbox.Workspace) ([]string, map[string]string) {
	escalated.mu.Lock()
	defer escalated.mu.Unlock()
	e := escalated.m[weak.Make(ws)]
	if e == nil {
		return nil, nil
	}
	wheels := make(map[string]string, len(e.wheels))
	for k, v := range e.wheels {
		wheels[k] = v
	}
	return slices.Clone(e.reqs), wheels
}

// ContainerResult is what run_in_container returns to the program.
type ContainerResult struct {
	Stdout       string                `json:"stdout"`
	Stderr       string                `json:"stderr"`
	ExitCode     int                   `json:"exit_code"`
	FilesChanged []escalate.FileChange `json:"files_changed"`
}

// containerTool is run_in_container for the programs of the code-action agent.
func containerTool(cfg *EscalationConfig) hostfuncs.Tool {
	desc := "Run a complete Python program in a separate, isolated container (no network) where packages that need native code work: " +
		"those that install_package reported as needing native code are installed there before the program starts. " +
		"The program runs in its own Python process: it shares no variables with this sandbox, so pass data through files. " +
		"A copy of /workspace is its working directory, and files it creates or modifies there are copied back to /workspace. " +
		"The tools are available there after `import wasmbox_tools as tools` (tools.NAME(...)). " +
		"Returns {stdout, stderr, exit_code, files_changed}; a non-zero exit_code means the program failed (see stderr)."
	if cfg.NoTools {
		desc = strings.Replace(desc, "The tools are available there after `import wasmbox_tools as tools` (tools.NAME(...)). ", "", 1)
	}
	t := hostfuncs.Func(ToolRunInContainer, desc,
		func(ctx context.Context, in struct {
			Code string `json:"code" jsonschema:"description=the complete Python program to run in the container"`
		}) (*ContainerResult, error) {
			return runInContainer(ctx, cfg, in.Code)
		})
	t.Effect = governance.Mutating
	return t
}

// skipPath reports whether a workspace path stays out of container runs: the agent's private directory and
// the wheel directory.
func skipPath(p string) bool {
	for _, d := range []string{privateDir, wheelDir} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func runInContainer(ctx context.Context, cfg *EscalationConfig, code string) (*ContainerResult, error) {
	if strings.TrimSpace(code) == "" {
		return nil, errors.New("code is empty")
	}
	if cfg.Backend == nil {
		return nil, fmt.Errorf("%w: no container backend is configured (escalation fails closed)", escalate.ErrNoEngine)
	}
	ws, _ := ctx.Value(workspaceKey{}).(*wasmbox.Workspace)
	if ws == nil {
		return nil, errors.New("no workspace for this run")
	}
	reqs, whls := escalatedFor(ws)
	job := cfg.job(reqs)
	job.Files = map[string][]byte{}
	for _, f := range ws.Files() {
		if f.IsDir() || skipPath(f.Path) {
			continue
		}
		b, err := ws.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("copying /workspace/%s into the container: %s", f.Path, fsReason(err))
		}
		job.Files[f.Path] = b
	}
	for name, p := range whls {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading the wheel %s: %w", name, err)
		}
		job.Files[wheelDir+"/wheels/"+name] = b
	}
	job.Code = containerPrelude(cfg.python(), reqs, code)
	if !cfg.NoTools {
		if r, ok := ctx.Value(runnerKey{}).(*runner); ok {
			reg := hostfuncs.NewRegistry()
			for _, t := range r.a.tools.Tools() {
				if t.Name == ToolRunInContainer || t.Name == ToolInstallPackage {
					continue
				}
				if err := reg.Register(t); err != nil {
					return nil, err
				}
			}
			// The task's run: the container's tool calls share the budget of the programs that asked for it.
			bridge := hostfuncs.NewBridge(reg, r.gov, governance.SourceContainer)
			job.Tools = escalate.BridgeTools(bridge.Call)
		}
	}
	if err := escalate.Allowed(ctx, cfg.Policy, job); err != nil {
		return nil, fmt.Errorf("running in a container is not allowed here: %w", err)
	}
	res, err := cfg.Backend.Run(ctx, job)
	if res == nil {
		if err == nil {
			err = errors.New("the backend returned no result")
		}
		return nil, fmt.Errorf("the container could not run the program: %w", err)
	}
	out := &ContainerResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, FilesChanged: []escalate.FileChange{}}
	var notes []string
	switch {
	case res.TimedOut || errors.Is(err, context.DeadlineExceeded):
		notes = append(notes, "the program was killed at its time limit")
	case res.OOMKilled:
		notes = append(notes, "the program was killed: out of memory")
	case err != nil:
		notes = append(notes, err.Error())
	}
	if res.FilesTruncated {
		notes = append(notes, "not every changed file could be copied back (over the size limit, or the program was killed)")
	}
	var deleted []string
	for _, c := range res.Changes {
		if skipPath(c.Path) {
			continue
		}
		out.FilesChanged = append(out.FilesChanged, c)
		if c.Kind == "deleted" {
			deleted = append(deleted, c.Path)
			continue
		}
		data, ok := res.Files[c.Path]
		if !ok {
			continue
		}
		if werr := ws.WriteFile(c.Path, data); werr != nil {
			notes = append(notes, fmt.Sprintf("could not copy /workspace/%s back: %s", c.Path, fsReason(werr)))
		}
	}
	if len(deleted) > 0 {
		notes = append(notes, "files deleted in the container are still in /workspace: "+strings.Join(deleted, ", "))
	}
	for _, n := range notes {
		if out.Stderr != "" && !strings.HasSuffix(out.Stderr, "\n") {
			out.Stderr += "\n"
		}
		out.Stderr += "[" + ToolRunInContainer + ": " + n + "]\n"
	}
	return out, nil
}

// containerPrelude wraps the model's program: it installs the escalated packages offline with pip (from the
// wheels copied under wheelDir), deletes wheelDir, and runs the program as __main__ with its own source lines in
// tracebacks and `tools` bound to wasmbox_tools.
func containerPrelude(python string, reqs []string, code string) string {
	q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	argv := []string{}
	if len(reqs) > 0 {
		argv = pipArgv(python, reqs)
	}
	return strings.NewReplacer("@ARGV@", q(argv), "@TARGET@", q(containerPackages), "@WHEELS@", q(wheelDir),
		"@CODE@", q(code), "@NAME@", q("<"+ToolRunInContainer+">")).Replace(preludeCode)
}

const preludeCode = `def _wasmbox_prelude():
    import linecache, os, shutil, subprocess, sys
    argv, target, wheels = @ARGV@, @TARGET@, @WHEELS@
    if argv:
        argv[0] = sys.executable
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            shutil.rmtree(wheels, ignore_errors=True)
            sys.stderr.write("run_in_container: installing the packages failed (pip exit code %d):\n%s" % (p.returncode, p.stdout))
            sys.exit(3)
        sys.path.insert(0, target)
    shutil.rmtree(wheels, ignore_errors=True)
    code, name = @CODE@, @NAME@
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        import wasmbox_tools
        g["tools"] = wasmbox_tools
    except ImportError:
        pass
    return code, name, g

_wasmbox_code, _wasmbox_name, _wasmbox_globals = _wasmbox_prelude()
del _wasmbox_prelude
try:
    exec(compile(_wasmbox_code, _wasmbox_name, "exec"), _wasmbox_globals)
except SystemExit:
    raise
except BaseException as e:  # the traceback without this wrapper's frame, with the program's source lines
    import sys, traceback
    traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    sys.exit(1)
`
