package wasmbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmbox/wasmbox/governance"
)

// sessionMeta is what a Session's task keeps: the workspace it started with and the code of every Exec.
type sessionMeta struct {
	Session bool       `json:"session"`
	Files   []taskFile `json:"files,omitempty"`
	Execs   []string   `json:"execs"`
}

const sessionKind = " kind=session"

// StartSessionTask starts a Session that is a durable task (see StartTask): its Execs share the task's
// budgets, and an Exec that reaches a call needing approval ends with ErrPaused (Result.Paused names the call),
// after which the Session is broken and the process may exit. ResumeSessionTask, in any process with the same
// store and configuration, makes the Session again: it replays the recorded Execs (answering their calls from
// the journal) and goes on with the one that paused. Close ends the task (done). Exec's Program must not set
// Stdin or Governance.
func (s *Sandbox) StartSessionTask(ctx context.Context, ws *Workspace, opts TaskOptions) (*Session, error) {
	if err := s.taskReady(Program{}); err != nil {
		return nil, err
	}
	if ws == nil {
		ws = newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, s.clock().time)
	}
	files, err := snapshotWorkspace(ws)
	if err != nil {
		return nil, err
	}
	meta := sessionMeta{Session: true, Files: files, Execs: []string{}}
	mb, _ := json.Marshal(meta)
	task, err := s.cfg.Gate.NewTask(ctx, governance.TaskOptions{ID: opts.ID, Fingerprint: s.taskFingerprint(nil) + sessionKind, Meta: mb, Holder: opts.Holder})
	if err != nil {
		return nil, fmt.Errorf("wasmbox: StartSessionTask: %w", err)
	}
	se, err := s.NewSession(ctx, ws)
	if err != nil {
		_ = task.End(context.WithoutCancel(ctx), 0, err.Error())
		return nil, err
	}
	se.run, se.task, se.meta = task.Run(), task, meta
	return se, nil
}

// ResumeSessionTask makes a paused (or orphaned) Session task's Session again in this process: it replays every
// recorded Exec and returns the Session with the Result of the last one, the Exec that had paused, which goes
// on from its paused call. If that call still waits for a decision, the Session is nil and the error ErrPaused.
//
// # Errors
//
// Those of ResumeTask; an Exec that fails differently on replay than it did (a divergence) ends it with
// ErrGovernance wrapping governance.ErrDiverged.
func (s *Sandbox) ResumeSessionTask(ctx context.Context, id string, opts TaskOptions) (*Session, *Result, error) {
	if err := s.taskReady(Program{}); err != nil {
		return nil, nil, err
	}
	task, _, pausedRes, err := s.openTask(ctx, "ResumeSessionTask", id, opts, true)
	if task == nil {
		return nil, pausedRes, err
	}
	fail := func(err error) (*Session, *Result, error) {
		_ = task.End(context.WithoutCancel(ctx), 0, err.Error())
		return nil, nil, fmt.Errorf("wasmbox: ResumeSessionTask: %w", err)
	}
	var meta sessionMeta
	if err := json.Unmarshal(task.Meta(), &meta); err != nil || !meta.Session {
		return fail(fmt.Errorf("%w: task %s: its Session in the store cannot be read", governance.ErrTampered, id))
	}
	ws, err := s.restoreWorkspace(meta.Files)
	if err != nil {
		return fail(err)
	}
	se, err := s.NewSession(ctx, ws)
	if err != nil {
		return fail(err)
	}
	se.run, se.task, se.meta = task.Run(), task, sessionMeta{Session: true, Files: meta.Files, Execs: []string{}}
	var res *Result
	se.replaying = true
	for i, code := range meta.Execs {
		res, err = se.Exec(ctx, code)
		if err != nil && i < len(meta.Execs)-1 {
			_ = se.Close(context.WithoutCancel(ctx))
			return nil, res, fmt.Errorf("wasmbox: ResumeSessionTask: replaying Exec %d: %w", i+1, err)
		}
	}
	se.replaying = false
	if err != nil && !se.Alive() {
		return nil, res, err
	}
	return se, res, err
}

// taskExec records an Exec of a Session task before it runs (a replayed one is recorded again in order).
func (se *Session) taskExec(ctx context.Context, p Program) error {
	switch {
	case se.taskEnded:
		return fmt.Errorf("%w: the Session's task has ended", ErrSessionBroken)
	case p.Stdin != nil || p.Governance != nil:
		return fmt.Errorf("%w: an Exec of a Session task must not set Program.Stdin or Program.Governance", ErrInvalidConfig)
	}
	se.meta.Execs = append(se.meta.Execs, p.Code)
	if se.replaying {
		return nil // already in the store
	}
	mb, err := json.Marshal(se.meta)
	if err != nil {
		return err
	}
	if err := se.task.SetMeta(ctx, mb); err != nil {
		se.meta.Execs = se.meta.Execs[:len(se.meta.Execs)-1]
		return runError(KindGovernance, ErrGovernance, err)
	}
	return nil
}

// taskExecDone ends the Session's task run in this process when the Exec paused or lost its store.
func (se *Session) taskExecDone(ctx context.Context, res *Result, err error) (*Result, error) {
	if res != nil {
		if se.replaying {
			se.used += se.task.LiveTime(res.Duration)
		} else {
			se.used += res.Duration
		}
		res.TaskID = se.task.ID()
	}
	halted := se.task.Halted()
	if halted == nil {
		return res, err
	}
	var paused *governance.PausedError
	failure := ""
	if errors.As(halted, &paused) {
		if res != nil {
			pending := paused.Pending
			res.Paused = &pending
		}
	} else {
		failure = halted.Error()
	}
	se.taskEnded = true
	if eerr := se.task.End(context.WithoutCancel(ctx), se.used, failure); eerr != nil && err == nil {
		err = runError(KindGovernance, ErrGovernance, eerr)
	}
	return res, err
}
