package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/store"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// resumeChildFlag makes the binary a child that resumes a task (P10): compare -resume-child URL TASK.
const resumeChildFlag = "-resume-child"

// taskReport holds the durable-task figures (P10, P11).
type taskReport struct {
	// ResumeMS: a paused task resumed in a new process, from ResumeTask to the start of its next tool call
	// (the sandbox already made, as a serverless function's warm path); ResumeTotalMS from the process's exec.
	ResumeMS      bench.Spread `json:"resume_ms"`
	ResumeTotalMS bench.Spread `json:"resume_total_ms"`
	// Replay100MS is ResumeMS for a task whose journal holds 100 calls before the paused one.
	Replay100MS bench.Spread `json:"resume_replay_100_calls_ms"`
	// SQLiteCallUS and PostgresCallUS: one governed call of a durable task (budget, counts, journal and audit
	// chain in the store), each call timed on its own.
	SQLiteCallUS   bench.Spread  `json:"sqlite_governed_call_us"`
	PostgresCallUS *bench.Spread `json:"postgres_governed_call_us,omitempty"`
}

var taskPolicy = governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
	if strings.HasPrefix(c.Tool, "approve_") {
		return governance.Verdict{Action: governance.NeedsApproval}, nil
	}
	return governance.Verdict{Action: governance.Allow}, nil
})

// taskSandbox is the sandbox of the resume measure, the same in the parent and the child; started is called
// when approve_ping starts.
func taskSandbox(ctx context.Context, db governance.Store, started func()) (*wasmbox.Sandbox, error) {
	gate, err := governance.NewGate(governance.GateConfig{Policy: taskPolicy, Auditor: governance.DiscardAuditor{}, Store: db,
		Limits: governance.Limits{MaxToolCalls: 1000}})
	if err != nil {
		return nil, err
	}
	ping := hostfuncs.Func("approve_ping", "Needs approval.", func(context.Context, struct{}) (bool, error) {
		if started != nil {
			started()
		}
		return true, nil
	})
	read := hostfuncs.Func("read", "Read-only.", func(context.Context, struct{}) (int, error) { return 1, nil })
	read.Effect = governance.ReadOnly
	return wasmbox.New(ctx, wasmbox.Config{Gate: gate, Deterministic: true, Tools: hostfuncs.NewRegistry().MustRegister(ping, read)})
}

func taskProgram(replayed int) string {
	return fmt.Sprintf("import tools\nfor _ in range(%d):\n    tools.read()\ntools.approve_ping()\nprint('done')\n", replayed)
}

// resumeChild resumes TASK from the store at url and prints how long it took until the next tool call started.
func resumeChild(url, id string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "resume child:", err)
		os.Exit(1)
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		fail(err)
	}
	defer db.Close()
	var t0, at time.Time
	sb, err := taskSandbox(ctx, db, func() { at = time.Now() })
	if err != nil {
		fail(err)
	}
	defer sb.Close(ctx)
	t0 = time.Now()
	res, err := sb.ResumeTask(ctx, id, wasmbox.TaskOptions{})
	if err != nil || res.Stdout != "done\n" || at.IsZero() {
		fail(fmt.Errorf("resume: %v (%+v)", err, res))
	}
	spawned, _ := strconv.ParseInt(os.Getenv("WASMBOX_SPAWNED_NS"), 10, 64)
	_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{
		"resume_ms": float64(at.Sub(t0).Microseconds()) / 1000,
		"total_ms":  float64(at.Sub(time.Unix(0, spawned)).Microseconds()) / 1000,
	})
}

// taskNumbers measures P10 and P11. PostgreSQL is measured when WASMBOX_TEST_POSTGRES names a server.
func taskNumbers(ctx context.Context, rounds int) (*taskReport, []string, error) {
	var skipped []string
	dir, err := os.MkdirTemp("", "wasmbox-bench-tasks-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	url := "sqlite:" + filepath.Join(dir, "tasks.db")
	db, err := store.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	rep := &taskReport{}

	// P11: governed calls with everything in the store.
	if rep.SQLiteCallUS, err = governedCallMicros(ctx, db, rounds); err != nil {
		return nil, nil, fmt.Errorf("sqlite governed call: %w", err)
	}
	if pg := os.Getenv("WASMBOX_TEST_POSTGRES"); pg != "" {
		pdb, err := store.Open(ctx, pg)
		if err != nil {
			return nil, nil, fmt.Errorf("postgres: %w", err)
		}
		s, err := governedCallMicros(ctx, pdb, rounds)
		pdb.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("postgres governed call: %w", err)
		}
		rep.PostgresCallUS = &s
	} else {
		skipped = append(skipped, "postgres_governed_call_us: WASMBOX_TEST_POSTGRES is not set (.ci/postgres.sh starts a server and sets it)")
	}

	// P10: pause here, resume in a new process.
	sb, err := taskSandbox(ctx, db, nil)
	if err != nil {
		return nil, nil, err
	}
	defer sb.Close(ctx)
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var resume, total, replay []float64
	for i := range rounds {
		for _, replayed := range []int{0, 100} {
			id := fmt.Sprintf("bench-%d-%d-%d", time.Now().UnixNano(), i, replayed)
			_, err := sb.StartTask(ctx, wasmbox.Program{Code: taskProgram(replayed)}, wasmbox.TaskOptions{ID: id})
			if !errors.Is(err, wasmbox.ErrPaused) {
				return nil, nil, fmt.Errorf("task did not pause: %v", err)
			}
			if err := sb.Gate().Decide(ctx, id, int64(replayed)+1, governance.TaskDecision{Allow: true}); err != nil {
				return nil, nil, err
			}
			cmd := exec.CommandContext(ctx, self, resumeChildFlag, url, id)
			cmd.Env = append(os.Environ(), "WASMBOX_SPAWNED_NS="+strconv.FormatInt(time.Now().UnixNano(), 10))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return nil, nil, fmt.Errorf("resume child: %w", err)
			}
			var m map[string]float64
			if err := json.Unmarshal(out, &m); err != nil {
				return nil, nil, fmt.Errorf("resume child said %q", out)
			}
			if replayed == 0 {
				resume, total = append(resume, m["resume_ms"]), append(total, m["total_ms"])
			} else {
				replay = append(replay, m["resume_ms"])
			}
		}
	}
	rep.ResumeMS, rep.ResumeTotalMS, rep.Replay100MS = bench.Summarise(resume), bench.Summarise(total), bench.Summarise(replay)
	return rep, skipped, nil
}

// governedCallMicros times single governed calls of durable tasks in db: rounds tasks of 200 calls each.
func governedCallMicros(ctx context.Context, db governance.Store, rounds int) (bench.Spread, error) {
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}, Store: db,
		Limits: governance.Limits{MaxToolCalls: 100000}})
	if err != nil {
		return bench.Spread{}, err
	}
	tool := func(context.Context, governance.Call) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	c := governance.Call{Tool: "lookup", Args: json.RawMessage(`{"order_id":"A-1"}`), Source: governance.SourcePython, Effect: governance.ReadOnly}
	var us []float64
	for r := range rounds {
		task, err := gate.NewTask(ctx, governance.TaskOptions{ID: fmt.Sprintf("call-bench-%d-%d", time.Now().UnixNano(), r)})
		if err != nil {
			return bench.Spread{}, err
		}
		for range 200 {
			t := time.Now()
			if _, err := task.Run().Do(ctx, c, tool); err != nil {
				return bench.Spread{}, err
			}
			us = append(us, float64(time.Since(t).Nanoseconds())/1000)
		}
		if err := task.End(ctx, 0, ""); err != nil {
			return bench.Spread{}, err
		}
	}
	return bench.Summarise(us), nil
}

// setTasks measures the durable-task figures into r.
func (r *report) setTasks(ctx context.Context, rounds int) {
	t, skipped, err := taskNumbers(ctx, rounds)
	if err != nil {
		r.Skipped = append(r.Skipped, "durable tasks: "+err.Error())
		return
	}
	r.Tasks, r.Skipped = t, append(r.Skipped, skipped...)
	r.ResumeP50MS, r.SQLiteGovernedCallUS = &t.ResumeMS.Median, &t.SQLiteCallUS.Median
	if t.PostgresCallUS != nil {
		r.PostgresGovernedCallUS = &t.PostgresCallUS.Median
	}
}

func printTasks(r report) {
	t := r.Tasks
	if t == nil {
		return
	}
	row := func(a, b, d string) { fmt.Printf("%-40s %-47s %s\n", a, b, d) }
	row("paused task → resumed in a new process", t.ResumeMS.Format(" ms", 1), "P10 ≤ 50 ms + replay (SQLite; to the next tool call)")
	row("  the same from the process's exec", t.ResumeTotalMS.Format(" ms", 1), "includes loading the compiled interpreter (P2)")
	row("  with 100 recorded calls to replay", t.Replay100MS.Format(" ms", 1), "the replay's cost")
	row("governed call of a task, SQLite", t.SQLiteCallUS.Format(" µs", 1), "P11 ≤ 50 µs")
	if t.PostgresCallUS != nil {
		row("governed call of a task, PostgreSQL", t.PostgresCallUS.Format(" µs", 1), "P11 ≤ 1 ms (loopback)")
	}
}
