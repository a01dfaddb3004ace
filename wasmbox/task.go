package wasmbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// TaskOptions describe a durable task to Sandbox.StartTask and Sandbox.ResumeTask.
type TaskOptions struct {
	// ID names a new task (1 to 128 of [A-Za-z0-9._-]); empty means a random one. ResumeTask ignores it.
	ID string
	// Holder names this process in the task's lease, for messages; empty means hostname:pid.
	Holder string
}

// replaySlack is added to a resumed run's deadline on top of twice the time its earlier runs took.
const replaySlack = 100 * time.Millisecond

// taskMeta is what a task keeps to be resumed: the program and the workspace it started with.
type taskMeta struct {
	Code     string     `json:"code"`
	Filename string     `json:"filename,omitempty"`
	Args     []string   `json:"args,omitempty"`
	Files    []taskFile `json:"files,omitempty"`
}

type taskFile struct {
	Path  string      `json:"path"`
	Mode  fs.FileMode `json:"mode"`
	MTime int64       `json:"mtime_ns"`
	Data  []byte      `json:"data,omitempty"`
}

// StartTask runs p as a durable task, kept in the store of the Sandbox's gate (governance.GateConfig.Store).
// It is Run with one difference: a tool call that needs approval does not wait for an approver. The run ends
// there, with ErrPaused and Result.Paused naming the call, and the process may exit: nothing is lost. Record the
// decision from any process that has the store (governance.Gate.Decide, `wasmbox approvals approve`), then
// ResumeTask, from any process with the same store and configuration, goes on from that call.
//
// Resuming replays the program: it runs again from its start, in deterministic mode, with the same starting
// workspace; every call the journal holds is answered from it (a tool that already ran is never run again), the
// paused call gets its decision, and later calls are new. Budgets, max_tool_calls, the deadline and the task's
// audit chain continue across runs. A replayed program that makes a different call than its journal holds
// ends with ErrGovernance wrapping governance.ErrDiverged.
//
// # Notes
//
// Durable tasks need Config.Deterministic: a replay must see the same clock and randomness as the first run
// (the task's programs see a clock that starts at Config.Time and advances 1 µs per reading). Program.Stdin and
// Program.Governance must be nil (the task brings its own governance run). The Result of a resumed run holds the
// whole program's output, the replayed part's included; so do Program.Stdout and Stderr when they stream.
//
// # Errors
//
// As Run, plus: ErrPaused (the run paused; the Result is set), ErrGovernance (the store failed mid-run, or
// another process took the task over: no tool ran ungoverned), ErrInvalidConfig (no store, not deterministic,
// Stdin or Governance set), and the store's errors (wrapping governance.ErrStore) when the task cannot start.
func (s *Sandbox) StartTask(ctx context.Context, p Program, opts TaskOptions) (*Result, error) {
	if err := s.taskReady(p); err != nil {
		return nil, err
	}
	ws := p.Workspace
	if ws == nil {
		ws = newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, s.clock().time)
	}
	files, err := snapshotWorkspace(ws)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(taskMeta{Code: p.Code, Filename: p.Filename, Args: p.Args, Files: files})
	if err != nil {
		return nil, fmt.Errorf("%w: task: %w", ErrInvalidConfig, err)
	}
	if len(meta) > governance.MaxTaskMeta {
		return nil, fmt.Errorf("%w: the program and its starting workspace are %d bytes as a task; at most %d can be kept", ErrInvalidConfig, len(meta), governance.MaxTaskMeta)
	}
	task, err := s.cfg.Gate.NewTask(ctx, governance.TaskOptions{ID: opts.ID, Fingerprint: s.taskFingerprint(meta), Meta: meta, Holder: opts.Holder})
	if err != nil {
		return nil, fmt.Errorf("wasmbox: StartTask: %w", err)
	}
	p.Workspace = ws
	return s.runTask(ctx, task, p)
}

// ResumeTask goes on with a paused task (after its decision), or with one whose process died (once its lease
// expired). See StartTask.
//
// # Errors
//
// ErrPaused with a Result whose Paused names the call, when the task still waits for a decision (a call that
// was running when its process died waits for one too: its outcome is unknown); governance.ErrTaskUnknown,
// ErrTaskBusy, ErrTaskEnded; governance.ErrTaskMismatch when this Sandbox differs from the one that started the
// task (the message says what: interpreter, tools, configuration); governance.ErrTampered when the task's
// journal or audit chain was edited in the store; and those of StartTask.
func (s *Sandbox) ResumeTask(ctx context.Context, id string, opts TaskOptions) (*Result, error) {
	if err := s.taskReady(Program{}); err != nil {
		return nil, err
	}
	task, info, res, err := s.openTask(ctx, "ResumeTask", id, opts, false)
	if task == nil {
		return res, err
	}
	fail := func(err error) (*Result, error) {
		_ = task.End(context.WithoutCancel(ctx), 0, err.Error())
		return nil, fmt.Errorf("wasmbox: ResumeTask: %w", err)
	}
	metaBytes := task.Meta()
	if s.taskFingerprint(metaBytes) != info.Fingerprint {
		return fail(fmt.Errorf("%w: task %s: its program in the store is not the one it was started with", governance.ErrTampered, id))
	}
	var meta taskMeta
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		return fail(fmt.Errorf("%w: task %s: its program in the store cannot be read: %w", governance.ErrTampered, id, err))
	}
	ws, err := s.restoreWorkspace(meta.Files)
	if err != nil {
		return fail(err)
	}
	// The deadline continues: what is left of Config.Timeout, plus time to replay the earlier runs.
	used := task.Used()
	timeout := max(s.cfg.Timeout-used, time.Millisecond) + 2*used + replaySlack
	return s.runTask(ctx, task, Program{Code: meta.Code, Filename: meta.Filename, Args: meta.Args, Workspace: ws, timeout: timeout})
}

// openTask opens task id for a resume (op names the caller in errors): it refuses a task of the other kind
// (a Session's or a program's) or of another configuration, and answers a task still waiting for its decision
// with a Result naming the call and ErrPaused. The Task is nil whenever the error is not.
func (s *Sandbox) openTask(ctx context.Context, op, id string, opts TaskOptions, session bool) (*governance.Task, governance.TaskInfo, *Result, error) {
	gate := s.cfg.Gate
	info, err := gate.TaskInfo(ctx, id)
	if err != nil {
		return nil, info, nil, fmt.Errorf("wasmbox: %s: %w", op, err)
	}
	isSession := strings.HasSuffix(info.Fingerprint, sessionKind)
	switch {
	case isSession && !session:
		return nil, info, nil, fmt.Errorf("wasmbox: %s: %w: task %s is a Session's, not a program's (use ResumeSessionTask)", op, governance.ErrTaskMismatch, id)
	case !isSession && session:
		return nil, info, nil, fmt.Errorf("wasmbox: %s: %w: task %s is a program's, not a Session's (use ResumeTask)", op, governance.ErrTaskMismatch, id)
	}
	if why := fingerprintDiff(strings.TrimSuffix(info.Fingerprint, sessionKind), s.taskFingerprint(nil)); why != "" {
		return nil, info, nil, fmt.Errorf("wasmbox: %s: %w: task %s: %s", op, governance.ErrTaskMismatch, id, why)
	}
	task, err := gate.ResumeTask(ctx, id, governance.TaskOptions{Fingerprint: info.Fingerprint, Holder: opts.Holder})
	var paused *governance.PausedError
	if errors.As(err, &paused) {
		pending := paused.Pending
		return nil, info, &Result{TaskID: id, Paused: &pending, ExitCode: -1}, runError(KindPaused, ErrPaused, err)
	}
	if err != nil {
		return nil, info, nil, fmt.Errorf("wasmbox: %s: %w", op, err)
	}
	return task, info, nil, nil
}

// taskReady checks that the Sandbox can run durable tasks and p can be one.
func (s *Sandbox) taskReady(p Program) error {
	switch {
	case s.cfg.Gate.Store() == nil:
		return fmt.Errorf("%w: durable tasks need a store (governance.GateConfig.Store of Config.Gate)", ErrInvalidConfig)
	case !s.cfg.Deterministic:
		return fmt.Errorf("%w: durable tasks need Config.Deterministic (a resumed task replays its program, which must see the same clock and randomness)", ErrInvalidConfig)
	case p.Stdin != nil:
		return fmt.Errorf("%w: a durable task's Program.Stdin must be nil (a replay could not read it again)", ErrInvalidConfig)
	case p.Governance != nil:
		return fmt.Errorf("%w: a durable task's Program.Governance must be nil (the task brings its own run)", ErrInvalidConfig)
	}
	return nil
}

// runTask runs p as the task's program and ends the task's run in this process.
func (s *Sandbox) runTask(ctx context.Context, task *governance.Task, p Program) (*Result, error) {
	p.Governance = task.Run()
	res, err := s.RunProgram(ctx, p)
	var used time.Duration
	if res != nil {
		used = task.LiveTime(res.Duration)
	}
	halted := task.Halted()
	var paused *governance.PausedError
	failure := ""
	switch {
	case errors.As(halted, &paused):
	case halted != nil:
		failure = halted.Error()
	case err != nil:
		failure = err.Error()
	case res != nil && res.ExitCode != 0:
		failure = fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Exception != nil {
			failure += ": " + res.Exception.Error()
		}
	}
	endErr := task.End(context.WithoutCancel(ctx), used, failure)
	if res != nil {
		res.TaskID = task.ID()
		if paused != nil {
			pending := paused.Pending
			res.Paused = &pending
		}
	}
	if err == nil && endErr != nil {
		err = runError(KindGovernance, ErrGovernance, fmt.Errorf("recording the end of task %s: %w", task.ID(), endErr))
	}
	return res, err
}

// taskFingerprint identifies what a task runs: the interpreter, the tools, the settings that change what a
// program sees, and (with meta) the program and its starting workspace. Its parts are named, so that a
// mismatch can say which differs.
func (s *Sandbox) taskFingerprint(meta []byte) string {
	h := func(parts ...string) string {
		d := sha256.New()
		for _, p := range parts {
			fmt.Fprintf(d, "%d:%s;", len(p), p)
		}
		return hex.EncodeToString(d.Sum(nil))[:16]
	}
	c := s.cfg
	env := make([]string, 0, len(c.Env))
	for k, v := range c.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	var pkgs []string
	for _, p := range s.installed {
		pkgs = append(pkgs, fmt.Sprint(p))
	}
	config := h(fmt.Sprint(c.Seed), c.Time.UTC().Format(time.RFC3339Nano), strings.Join(env, "\x00"), strings.Join(c.Preload, ","),
		strings.Join(pkgs, ","), fmt.Sprint(c.MemoryLimit, c.WorkspaceBytes, c.WorkspaceFiles, c.StdoutLimit, c.StderrLimit))
	fp := "interpreter=" + h(s.it.sha256, s.runtimeName()) + " tools=" + h(s.toolsModule) + " config=" + config
	if meta != nil {
		fp += " program=" + h(string(meta))
	}
	return fp
}

// fingerprintDiff says which named parts of mine differ from the task's fingerprint (the program part of the
// task's is not compared), or "".
func fingerprintDiff(task, mine string) string {
	parts := func(fp string) map[string]string {
		m := map[string]string{}
		for _, f := range strings.Fields(fp) {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
		return m
	}
	t, m := parts(task), parts(mine)
	var diff []string
	for _, k := range []string{"interpreter", "tools", "config"} {
		if t[k] != m[k] {
			diff = append(diff, k)
		}
	}
	if len(diff) == 0 {
		return ""
	}
	what := map[string]string{"interpreter": "the interpreter (runtime or build)", "tools": "the tool set (names, signatures)",
		"config": "the sandbox settings (Seed, Time, Env, Preload, packages, limits)"}
	var out []string
	for _, d := range diff {
		out = append(out, what[d])
	}
	return "it was started with another " + strings.Join(out, ", another ") + " than this sandbox has; resume it with the same configuration"
}

// snapshotWorkspace returns ws's files and directories, parents first.
func snapshotWorkspace(ws *Workspace) ([]taskFile, error) {
	var out []taskFile
	f := ws.files()
	for _, fi := range f.List() {
		tf := taskFile{Path: fi.Path, Mode: fi.Mode, MTime: fi.ModTime.UnixNano()}
		if !fi.Mode.IsDir() {
			data, err := f.ReadFile(fi.Path)
			if err != nil {
				return nil, fmt.Errorf("%w: task: reading %s from the workspace: %w", ErrInvalidConfig, fi.Path, err)
			}
			tf.Data = data
		}
		out = append(out, tf)
	}
	slices.SortStableFunc(out, func(a, b taskFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// restoreWorkspace makes the workspace a task started with.
func (s *Sandbox) restoreWorkspace(files []taskFile) (*Workspace, error) {
	ws := newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, s.clock().time)
	if err := restoreInto(ws, files); err != nil {
		return nil, err
	}
	return ws, nil
}

// restoreInto adds files to ws.
func restoreInto(ws *Workspace, files []taskFile) error {
	f := ws.files()
	for _, tf := range files {
		if !fs.ValidPath(tf.Path) || tf.Path == "." {
			return fmt.Errorf("%w: task workspace path %q", governance.ErrTampered, tf.Path)
		}
		var err error
		if tf.Mode.IsDir() {
			err = f.MkdirAll(tf.Path, tf.Mode.Perm())
		} else {
			if err = f.MkdirAll(path.Dir(tf.Path), 0o755); err == nil {
				err = f.WriteFile(tf.Path, tf.Data, tf.Mode.Perm())
			}
		}
		if err != nil {
			return fmt.Errorf("wasmbox: task: restoring %s in the workspace: %w", tf.Path, err)
		}
	}
	// Times last, children before parents: writing a file changes its directory's time.
	for i := len(files) - 1; i >= 0; i-- {
		tf := files[i]
		_ = f.Utimens(tf.Path, tf.MTime, tf.MTime)
		_ = f.Chmod(tf.Path, tf.Mode.Perm())
	}
	return nil
}

// TaskFingerprint identifies this Sandbox's configuration in durable tasks (interpreter, tools, the settings
// that change what a program sees), for layers that keep tasks of their own (the agent's): a task started with
// one fingerprint should be resumed only by a Sandbox with the same.
func (s *Sandbox) TaskFingerprint() string { return s.taskFingerprint(nil) }

// TaskFingerprintDiff says what differs between two TaskFingerprints in words, or "" when they match.
func TaskFingerprintDiff(task, mine string) string { return fingerprintDiff(task, mine) }

// MarshalBinary returns the workspace's files and directories (contents, modes, times), for keeping it with a
// durable task; UnmarshalBinary puts them back.
func (w *Workspace) MarshalBinary() ([]byte, error) {
	files, err := snapshotWorkspace(w)
	if err != nil {
		return nil, err
	}
	return json.Marshal(files)
}

// UnmarshalBinary adds the files and directories of data (made by MarshalBinary) to the workspace, within its
// quotas.
func (w *Workspace) UnmarshalBinary(data []byte) error {
	var files []taskFile
	if err := json.Unmarshal(data, &files); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return restoreInto(w, files)
}
