package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// agentMeta is what an agent's durable task keeps: the task's text and the workspace it started with.
type agentMeta struct {
	Task      string `json:"task"`
	Workspace []byte `json:"workspace"`
}

// generate asks the model for the next reply; in a durable task the reply is recorded, so that a resumed task
// gets the same replies as far as its first run went, and asks the model only for new turns.
func (r *runner) generate(ctx context.Context, msgs []llms.MessageContent) (string, error) {
	ask := func(ctx context.Context) (string, error) {
		resp, err := r.a.model.GenerateContent(ctx, msgs, r.o.callOpts...)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrModel, err)
		}
		if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
			return "", fmt.Errorf("%w: the model returned no choices", ErrModel)
		}
		return resp.Choices[0].Content, nil
	}
	if r.task == nil {
		return ask(ctx)
	}
	out, err := r.task.Memo(ctx, func(ctx context.Context) ([]byte, error) {
		reply, err := ask(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(reply)
	})
	if err != nil {
		if errors.Is(err, ErrModel) {
			return "", err
		}
		return "", fmt.Errorf("%w: %w", ErrSandbox, runErrGovernance(err))
	}
	var reply string
	if err := json.Unmarshal(out, &reply); err != nil {
		return "", fmt.Errorf("%w: a recorded model turn cannot be read: %w", ErrSandbox, governance.ErrTampered)
	}
	return reply, nil
}

func runErrGovernance(err error) error { return fmt.Errorf("%w: %w", wasmbox.ErrGovernance, err) }

// taskFingerprint identifies the agent's configuration in its tasks: the sandbox's, the system prompt.
func (a *Agent) taskFingerprint() string {
	sum := sha256.Sum256([]byte(a.system))
	return a.sb.TaskFingerprint() + " agent=" + hex.EncodeToString(sum[:8]) + " kind=agent"
}

// StartTask answers task as a durable task in the store of the agent's gate (governance.GateConfig.Store of
// the Config given to New, which must be Deterministic): a program's tool call that needs approval ends the Run
// with wasmbox.ErrPaused (Result.Stop StopPaused, Result.Paused the call), and the process may exit. Once the
// call is decided (governance.Gate.Decide), ResumeTask in any process with the same store, model and
// configuration goes on: the model's earlier replies and the programs' earlier tool calls are answered from
// the task's records (no tool runs twice, the model is not asked again for a turn it already gave), and the Run
// continues from the paused call. Budgets and max_tool_calls hold for the whole task. ws is the starting
// workspace (nil for an empty one).
func (a *Agent) StartTask(ctx context.Context, ws *wasmbox.Workspace, task string, opts wasmbox.TaskOptions) (*Result, error) {
	if err := a.taskReady(); err != nil {
		return &Result{}, err
	}
	if ws == nil {
		ws = wasmbox.NewWorkspace(0, 0)
	}
	wsb, err := ws.MarshalBinary()
	if err != nil {
		return &Result{}, fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	meta, _ := json.Marshal(agentMeta{Task: task, Workspace: wsb})
	t, err := a.gate.NewTask(ctx, governance.TaskOptions{ID: opts.ID, Fingerprint: a.taskFingerprint(), Meta: meta, Holder: opts.Holder})
	if err != nil {
		return &Result{}, fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	return a.runTask(ctx, t, ws, task)
}

// ResumeTask goes on with a durable task of StartTask. A task still waiting for its decision returns
// wasmbox.ErrPaused at once (Result.Paused the call); another configuration is refused
// (governance.ErrTaskMismatch, saying what differs).
func (a *Agent) ResumeTask(ctx context.Context, id string, opts wasmbox.TaskOptions) (*Result, error) {
	if err := a.taskReady(); err != nil {
		return &Result{}, err
	}
	info, err := a.gate.TaskInfo(ctx, id)
	if err != nil {
		return &Result{}, fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	mine := a.taskFingerprint()
	if !strings.HasSuffix(info.Fingerprint, " kind=agent") {
		return &Result{}, fmt.Errorf("%w: %w: task %s is not an agent's", ErrSandbox, governance.ErrTaskMismatch, id)
	}
	if info.Fingerprint != mine {
		why := wasmbox.TaskFingerprintDiff(info.Fingerprint, mine)
		if why == "" {
			why = "it was started with another system prompt (tools, instructions or options of the agent)"
		}
		return &Result{}, fmt.Errorf("%w: %w: task %s: %s", ErrSandbox, governance.ErrTaskMismatch, id, why)
	}
	t, err := a.gate.ResumeTask(ctx, id, governance.TaskOptions{Fingerprint: info.Fingerprint, Holder: opts.Holder})
	var paused *governance.PausedError
	if errors.As(err, &paused) {
		p := paused.Pending
		return &Result{TaskID: id, RunID: id, Paused: &p, Stop: StopPaused}, err
	}
	if err != nil {
		return &Result{}, fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	var meta agentMeta
	ws := wasmbox.NewWorkspace(0, 0)
	if err := json.Unmarshal(t.Meta(), &meta); err != nil || ws.UnmarshalBinary(meta.Workspace) != nil {
		err := fmt.Errorf("%w: task %s: its record cannot be read", governance.ErrTampered, id)
		_ = t.End(context.WithoutCancel(ctx), 0, err.Error())
		return &Result{}, fmt.Errorf("%w: %w", ErrSandbox, err)
	}
	return a.runTask(ctx, t, ws, meta.Task)
}

func (a *Agent) taskReady() error {
	if a.gate.Store() == nil {
		return fmt.Errorf("%w: %w: durable tasks need a store (governance.GateConfig.Store)", ErrSandbox, wasmbox.ErrInvalidConfig)
	}
	return nil
}

// runTask runs the agent loop as the task t and ends the task's run in this process.
func (a *Agent) runTask(ctx context.Context, t *governance.Task, ws *wasmbox.Workspace, task string) (*Result, error) {
	start := time.Now()
	res, err := a.runWith(ctx, ws, task, t.Run(), t)
	res.TaskID = t.ID()
	used := t.LiveTime(time.Since(start))
	var paused *governance.PausedError
	failure := ""
	switch halted := t.Halted(); {
	case errors.As(halted, &paused):
		p := paused.Pending
		res.Paused, res.Stop = &p, StopPaused
	case halted != nil:
		failure = halted.Error()
	case err != nil:
		failure = err.Error()
	}
	if eerr := t.End(context.WithoutCancel(ctx), used, failure); eerr != nil && err == nil {
		err = fmt.Errorf("%w: recording the end of task %s: %w", ErrSandbox, t.ID(), eerr)
	}
	return res, err
}
