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
	// SQLiteCallUS and PostgresCallUS (P11): one governed call of a run whose budget is a StoreBudget in the
	// store, shared by every run, process and replica using it (policy, run limits, the audit record to an
	// in-memory auditor, and the budget's one transaction), each call timed on its own.
	SQLiteCallUS   bench.Spread  `json:"sqlite_governed_call_us"`
	PostgresCallUS *bench.Spread `json:"postgres_governed_call_us,omitempty"`
	// SQLiteAuditCallUS and PostgresAuditCallUS: the same with the audit chain in the store too (a
	// StoreAuditor, one chain for the fleet): the budget with the "allowed" record, then the outcome record.
	SQLiteAuditCallUS   bench.Spread  `json:"sqlite_governed_call_shared_audit_us"`
	PostgresAuditCallUS *bench.Spread `json:"postgres_governed_call_shared_audit_us,omitempty"`
	// SQLiteTaskCallUS and PostgresTaskCallUS: one governed call of a durable task (budget, counts, journal
	// and audit chain in the store): two durable transactions, the first before the tool runs.
	SQLiteTaskCallUS   bench.Spread  `json:"sqlite_task_call_us"`
	PostgresTaskCallUS *bench.Spread `json:"postgres_task_call_us,omitempty"`
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

	// P11: governed calls with their budget in the store, then with more of their state there.
	if err := storeCalls(ctx, db, rounds, &rep.SQLiteCallUS, &rep.SQLiteAuditCallUS, &rep.SQLiteTaskCallUS); err != nil {
		return nil, nil, fmt.Errorf("sqlite: %w", err)
	}
	if pg := os.Getenv("WASMBOX_TEST_POSTGRES"); pg != "" {
		pdb, err := store.Open(ctx, pg)
		if err != nil {
			return nil, nil, fmt.Errorf("postgres: %w", err)
		}
		rep.PostgresCallUS, rep.PostgresAuditCallUS, rep.PostgresTaskCallUS = &bench.Spread{}, &bench.Spread{}, &bench.Spread{}
		err = storeCalls(ctx, pdb, rounds, rep.PostgresCallUS, rep.PostgresAuditCallUS, rep.PostgresTaskCallUS)
		pdb.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("postgres: %w", err)
		}
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

// storeCalls measures the three kinds of governed call with state in db: budget, budget and audit chain,
// durable task. Each round makes 200 calls of each kind in turn, so that drift of the machine hits all three.
func storeCalls(ctx context.Context, db governance.Store, rounds int, budget, audit, task *bench.Spread) error {
	tool := func(context.Context, governance.Call) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	c := governance.Call{Tool: "lookup", Args: json.RawMessage(`{"order_id":"A-1"}`), Source: governance.SourcePython, Effect: governance.ReadOnly}
	shared, err := governance.NewStoreBudget(db, fmt.Sprintf("call-bench-%d", time.Now().UnixNano()), governance.SharedLimits{MaxCalls: 1 << 40})
	if err != nil {
		return err
	}
	chain, err := governance.NewStoreAuditor(db, fmt.Sprintf("call-bench-%d", time.Now().UnixNano()), nil)
	if err != nil {
		return err
	}
	gate := func(aud governance.Auditor, withBudget bool) (*governance.Gate, error) {
		cfg := governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, Store: db, Limits: governance.Limits{MaxToolCalls: 1 << 40}}
		if withBudget {
			cfg.NewBudget = func(string) governance.Budget { return shared }
		}
		return governance.NewGate(cfg)
	}
	budgetGate, err := gate(&governance.MemoryAuditor{Limit: 1000}, true)
	if err != nil {
		return err
	}
	auditGate, err := gate(chain, true)
	if err != nil {
		return err
	}
	taskGate, err := gate(governance.DiscardAuditor{}, false)
	if err != nil {
		return err
	}
	timed := func(run *governance.Run, into *[]float64) error {
		for range 200 {
			t := time.Now()
			if _, err := run.Do(ctx, c, tool); err != nil {
				return err
			}
			*into = append(*into, float64(time.Since(t).Nanoseconds())/1000)
		}
		return nil
	}
	var b, a, k []float64
	for r := range rounds {
		if err := timed(budgetGate.NewRun(fmt.Sprintf("budget-%d", r)), &b); err != nil {
			return fmt.Errorf("governed call, budget in the store: %w", err)
		}
		if err := timed(auditGate.NewRun(fmt.Sprintf("audit-%d", r)), &a); err != nil {
			return fmt.Errorf("governed call, budget and audit chain in the store: %w", err)
		}
		t, err := taskGate.NewTask(ctx, governance.TaskOptions{ID: fmt.Sprintf("call-bench-%d-%d", time.Now().UnixNano(), r)})
		if err != nil {
			return err
		}
		if err := timed(t.Run(), &k); err != nil {
			return fmt.Errorf("governed call of a durable task: %w", err)
		}
		if err := t.End(ctx, 0, ""); err != nil {
			return err
		}
	}
	*budget, *audit, *task = bench.Summarise(b), bench.Summarise(a), bench.Summarise(k)
	return nil
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
	row("governed call, budget in SQLite", t.SQLiteCallUS.Format(" µs", 1), "P11 ≤ 50 µs (a StoreBudget shared by the fleet)")
	row("  budget and audit chain in SQLite", t.SQLiteAuditCallUS.Format(" µs", 1), "reported (a StoreAuditor too: two transactions)")
	row("  a durable task's call, SQLite", t.SQLiteTaskCallUS.Format(" µs", 1), "reported (journal and chain: two durable commits)")
	if t.PostgresCallUS != nil {
		row("governed call, budget in PostgreSQL", t.PostgresCallUS.Format(" µs", 1), "P11 ≤ 1 ms (loopback)")
		row("  budget and audit chain in PostgreSQL", t.PostgresAuditCallUS.Format(" µs", 1), "reported")
		row("  a durable task's call, PostgreSQL", t.PostgresTaskCallUS.Format(" µs", 1), "reported")
	}
}
