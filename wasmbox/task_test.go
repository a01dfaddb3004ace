package wasmbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// taskProcess is what one process of a fleet has: its own gate and sandbox over the shared store, and counters
// of the tools that really ran in it.
type taskProcess struct {
	sb               *wasmbox.Sandbox
	gate             *governance.Gate
	lookups, refunds *atomic.Int64
}

func newTaskProcess(t *testing.T, store governance.Store, mutate ...func(*wasmbox.Config)) *taskProcess {
	t.Helper()
	reg, lookups, refunds := toolSet(t)
	g, _ := gate(t, governance.GateConfig{Store: store})
	cfg := wasmbox.Config{Tools: reg, Gate: g, Deterministic: true, Seed: 7}
	for _, m := range mutate {
		m(&cfg)
	}
	return &taskProcess{sb: newSandbox(t, cfg), gate: g, lookups: lookups, refunds: refunds}
}

const refundProgram = `import tools, random, time, os
os.makedirs("out", exist_ok=True)
with open("out/before.txt", "w") as f:
    f.write("seen %s %r" % (open("input.txt").read(), random.random()))
order = tools.get_order("A-1")
print("order", order["id"], order["amount"])
try:
    ok = tools.issue_refund("A-1", 12.5)
    print("refunded", ok)
except tools.ToolDenied as e:
    print("refund denied:", e)
with open("out/after.txt", "w") as f:
    f.write("done")
print("files", sorted(os.listdir("out")))
`

func TestTaskPausesAndResumesInAnotherProcess(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	a := newTaskProcess(t, store)
	ws := wasmbox.NewWorkspace(0, 0)
	if err := ws.WriteFile("input.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	res, err := a.sb.StartTask(ctx, wasmbox.Program{Code: refundProgram, Workspace: ws}, wasmbox.TaskOptions{ID: "refund-1"})
	if !errors.Is(err, wasmbox.ErrPaused) || !errors.Is(err, governance.ErrPaused) {
		t.Fatalf("StartTask = %v; want ErrPaused", err)
	}
	if res == nil || res.TaskID != "refund-1" || res.Paused == nil || res.Paused.Tool != "issue_refund" || res.Paused.Seq != 2 ||
		string(res.Paused.Args) != `{"order_id":"A-1","amount":12.5}` {
		t.Fatalf("paused Result = %+v (paused %+v); want the refund call pending with its arguments", res, res.Paused)
	}
	if a.refunds.Load() != 0 || a.lookups.Load() != 1 {
		t.Fatalf("before the decision: %d refunds, %d lookups; want 0 and 1", a.refunds.Load(), a.lookups.Load())
	}
	if res.Stdout != "order A-1 420\n" {
		t.Fatalf("paused run printed %q", res.Stdout)
	}
	before, err := res.Workspace.ReadFile("out/before.txt")
	if err != nil {
		t.Fatal(err)
	}

	// Another process decides; a third resumes.
	if err := newTaskProcess(t, store).gate.Decide(ctx, "refund-1", 2, governance.TaskDecision{Allow: true, DecidedBy: "approver:test"}); err != nil {
		t.Fatal(err)
	}
	c := newTaskProcess(t, store)
	res, err = c.sb.ResumeTask(ctx, "refund-1", wasmbox.TaskOptions{})
	if err != nil {
		t.Fatalf("ResumeTask: %v (stderr %s)", err, res.Stderr)
	}
	if c.lookups.Load() != 0 || c.refunds.Load() != 1 {
		t.Fatalf("on resume: %d lookups, %d refunds; want 0 (from the journal) and 1", c.lookups.Load(), c.refunds.Load())
	}
	want := "order A-1 420\nrefunded True\nfiles ['after.txt', 'before.txt']\n"
	if res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("resumed run: exit %d, stdout %q; want %q", res.ExitCode, res.Stdout, want)
	}
	again, err := res.Workspace.ReadFile("out/before.txt")
	if err != nil || string(again) != string(before) {
		t.Fatalf("the replayed workspace holds %q (%v); the paused run wrote %q", again, err, before)
	}
	info, err := c.gate.TaskInfo(ctx, "refund-1")
	if err != nil || info.State != governance.TaskDone || info.Calls != 2 || info.Runs != 2 {
		t.Fatalf("TaskInfo = %+v, %v; want done after 2 calls in 2 runs", info, err)
	}
	if _, err := c.gate.VerifyTask(ctx, "refund-1"); err != nil {
		t.Fatalf("VerifyTask: %v", err)
	}
}

func TestTaskDeniedDecisionReachesTheProgram(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	a := newTaskProcess(t, store)
	ws := wasmbox.NewWorkspace(0, 0)
	_ = ws.WriteFile("input.txt", []byte("x"))
	if _, err := a.sb.StartTask(ctx, wasmbox.Program{Code: refundProgram, Workspace: ws}, wasmbox.TaskOptions{ID: "t2"}); !errors.Is(err, wasmbox.ErrPaused) {
		t.Fatal(err)
	}
	// Resuming before the decision says it still waits, and runs nothing.
	res, err := a.sb.ResumeTask(ctx, "t2", wasmbox.TaskOptions{})
	if !errors.Is(err, wasmbox.ErrPaused) || res == nil || res.Paused == nil || a.lookups.Load() != 1 {
		t.Fatalf("ResumeTask before a decision = %v (%+v); want ErrPaused with the pending call and nothing run", err, res)
	}
	if err := a.gate.Decide(ctx, "t2", 2, governance.TaskDecision{Allow: false, Reason: "too large"}); err != nil {
		t.Fatal(err)
	}
	res, err = a.sb.ResumeTask(ctx, "t2", wasmbox.TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.refunds.Load() != 0 || !strings.Contains(res.Stdout, "refund denied: ") || !strings.Contains(res.Stdout, "too large") {
		t.Fatalf("denied refund: %d refunds, stdout %q", a.refunds.Load(), res.Stdout)
	}
}

func TestTaskRefusals(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	noStore := newSandbox(t, wasmbox.Config{Deterministic: true})
	if _, err := noStore.StartTask(ctx, wasmbox.Program{Code: "print(1)"}, wasmbox.TaskOptions{}); !errors.Is(err, wasmbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "store") {
		t.Errorf("StartTask without a store = %v; want ErrInvalidConfig naming the store", err)
	}
	g, _ := gate(t, governance.GateConfig{Store: store})
	notDet := newSandbox(t, wasmbox.Config{Gate: g})
	if _, err := notDet.StartTask(ctx, wasmbox.Program{Code: "print(1)"}, wasmbox.TaskOptions{}); !errors.Is(err, wasmbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "Deterministic") {
		t.Errorf("StartTask without Deterministic = %v; want ErrInvalidConfig naming it", err)
	}
	a := newTaskProcess(t, store)
	if _, err := a.sb.StartTask(ctx, wasmbox.Program{Code: "print(1)", Stdin: strings.NewReader("x")}, wasmbox.TaskOptions{}); !errors.Is(err, wasmbox.ErrInvalidConfig) {
		t.Errorf("StartTask with Stdin = %v; want ErrInvalidConfig", err)
	}
	if _, err := a.sb.ResumeTask(ctx, "no-such-task", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTaskUnknown) {
		t.Errorf("ResumeTask of an unknown task = %v; want ErrTaskUnknown", err)
	}
	ws := wasmbox.NewWorkspace(0, 0)
	_ = ws.WriteFile("input.txt", []byte("x"))
	if _, err := a.sb.StartTask(ctx, wasmbox.Program{Code: refundProgram, Workspace: ws}, wasmbox.TaskOptions{ID: "t3"}); !errors.Is(err, wasmbox.ErrPaused) {
		t.Fatal(err)
	}
	_ = a.gate.Decide(ctx, "t3", 2, governance.TaskDecision{Allow: true})
	// Another tool set, or other settings: refused, saying which.
	other := newTaskProcess(t, store, func(c *wasmbox.Config) {
		c.Tools = hostfuncs.NewRegistry().MustRegister(hostfuncs.Func("get_order", "Other.", func(context.Context, struct{}) (int, error) { return 1, nil }))
	})
	if _, err := other.sb.ResumeTask(ctx, "t3", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTaskMismatch) || !strings.Contains(err.Error(), "tool set") {
		t.Errorf("ResumeTask with another tool set = %v; want ErrTaskMismatch naming the tool set", err)
	}
	seeded := newTaskProcess(t, store, func(c *wasmbox.Config) { c.Seed = 8 })
	if _, err := seeded.sb.ResumeTask(ctx, "t3", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTaskMismatch) || !strings.Contains(err.Error(), "settings") {
		t.Errorf("ResumeTask with another Seed = %v; want ErrTaskMismatch naming the settings", err)
	}
	// The program kept in the store was edited: refused.
	err := store.Update(ctx, func(tx governance.Tx) error {
		v, _, err := tx.Get("t/t3/m")
		if err != nil {
			return err
		}
		return tx.Put("t/t3/m", []byte(strings.Replace(string(v), "issue_refund", "get_order", 1)))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.sb.ResumeTask(ctx, "t3", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTampered) {
		t.Errorf("ResumeTask of an edited program = %v; want ErrTampered", err)
	}
	if a.refunds.Load() != 0 {
		t.Fatal("a refused resume ran the refund")
	}
}

// The store goes away during a run: the run ends with ErrGovernance wrapping ErrStore, and no later tool runs.
func TestTaskStoreGoesAwayFailsClosed(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	store := &governance.MemoryStore{Fail: func() error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}
	reg, lookups, _ := toolSet(t)
	var after atomic.Int64
	cut := hostfuncs.Func("cut_store", "Take the store away.", func(context.Context, struct{}) (bool, error) { down.Store(true); return true, nil })
	cut.Effect = governance.ReadOnly
	later := hostfuncs.Func("later", "Runs after.", func(context.Context, struct{}) (bool, error) { after.Add(1); return true, nil })
	later.Effect = governance.ReadOnly
	reg.MustRegister(cut, later)
	g, _ := gate(t, governance.GateConfig{Store: store})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g, Deterministic: true})
	res, err := sb.StartTask(ctx, wasmbox.Program{Code: `import tools
tools.get_order("A-1")
tools.cut_store()
print("after cut")
tools.later()
print("after later")
`}, wasmbox.TaskOptions{ID: "gone"})
	if !errors.Is(err, wasmbox.ErrGovernance) || !errors.Is(err, governance.ErrStore) {
		t.Fatalf("a run whose store went away = %v; want ErrGovernance wrapping ErrStore", err)
	}
	if after.Load() != 0 || strings.Contains(res.Stdout, "after later") || lookups.Load() != 1 {
		t.Fatalf("after the store went away: later ran %d times, stdout %q", after.Load(), res.Stdout)
	}
	// The store comes back: the task can be resumed once the dead run's lease expires; its last call's outcome
	// is unknown (it ran, but its result could not be recorded).
	down.Store(false)
	info, err := g.TaskInfo(ctx, "gone")
	if err != nil {
		t.Fatalf("TaskInfo after the store came back: %v", err)
	}
	if info.Journal != 2 {
		t.Fatalf("journal holds %d calls; want 2 (the lookup and the cut)", info.Journal)
	}
}

// startPausedSessionTask starts the Session task id in a new process over store: an Exec that looks the order
// up, then refundCode, which must pause at issue_refund. It returns the process, the Session (still open) and
// the paused Exec's result.
func startPausedSessionTask(t *testing.T, store governance.Store, id, refundCode string) (*taskProcess, *wasmbox.Session, *wasmbox.Result) {
	t.Helper()
	ctx := context.Background()
	a := newTaskProcess(t, store)
	se, err := a.sb.StartSessionTask(ctx, nil, wasmbox.TaskOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.Exec(ctx, `import tools
amount = tools.get_order("A-1")["amount"]`); err != nil {
		t.Fatal(err)
	}
	res, err := se.Exec(ctx, refundCode)
	if !errors.Is(err, wasmbox.ErrPaused) || res.Paused == nil || res.Paused.Tool != "issue_refund" || res.TaskID != id {
		t.Fatalf("the refund Exec = %v (%+v); want ErrPaused at issue_refund", err, res)
	}
	return a, se, res
}

// A Session task: its Execs are recorded; one pauses; another process replays the earlier ones (no tool runs
// again), goes on with the paused one, and the Session lives on with its globals.
func TestSessionTaskPausesAndResumes(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	a, se, _ := startPausedSessionTask(t, store, "session-1", `ok = tools.issue_refund("A-1", amount)
print("refunded", ok)`)
	if se.Alive() {
		t.Fatal("a paused Session is still alive")
	}
	_ = se.Close(ctx)
	if err := a.gate.Decide(ctx, "session-1", 2, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	b := newTaskProcess(t, store)
	if _, err := b.sb.ResumeTask(ctx, "session-1", wasmbox.TaskOptions{}); !errors.Is(err, governance.ErrTaskMismatch) {
		t.Fatalf("ResumeTask of a Session's task = %v; want ErrTaskMismatch", err)
	}
	se2, res, err := b.sb.ResumeSessionTask(ctx, "session-1", wasmbox.TaskOptions{})
	if err != nil {
		t.Fatalf("ResumeSessionTask: %v", err)
	}
	if res.Stdout != "refunded True\n" || b.lookups.Load() != 0 || b.refunds.Load() != 1 {
		t.Fatalf("resumed Exec printed %q; %d lookups, %d refunds (want the refund only)", res.Stdout, b.lookups.Load(), b.refunds.Load())
	}
	res, err = se2.Exec(ctx, "print(amount)")
	if err != nil || res.Stdout != "420\n" {
		t.Fatalf("the resumed Session's globals: %v, %q", err, res.Stdout)
	}
	if err := se2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := b.gate.TaskInfo(ctx, "session-1")
	if err != nil || info.State != governance.TaskDone || info.Calls != 2 {
		t.Fatalf("TaskInfo = %+v, %v; want done with 2 calls", info, err)
	}
	if _, err := b.gate.VerifyTask(ctx, "session-1"); err != nil {
		t.Fatal(err)
	}
}

// A Session task's earlier Execs are kept in the store and replayed on resume: a store writer who edits one (here
// to run more code, with the same tool calls, so that the journal alone would not notice) is refused, since the
// task's audit chain recorded the SHA-256 of what was kept.
func TestSessionTaskEditedExecRefused(t *testing.T) {
	ctx := context.Background()
	store := new(governance.MemoryStore)
	a, se, _ := startPausedSessionTask(t, store, "session-edit", `tools.issue_refund("A-1", amount)`)
	_ = se.Close(ctx)
	if err := a.gate.Decide(ctx, "session-edit", 2, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	err := store.Update(ctx, func(tx governance.Tx) error {
		v, _, err := tx.Get("t/session-edit/m")
		if err != nil {
			return err
		}
		edited := strings.Replace(string(v), `[\"amount\"]`, `[\"amount\"]\nprint(\"injected\")`, 1)
		if edited == string(v) {
			return fmt.Errorf("the Exec to edit is not in %s", v)
		}
		return tx.Put("t/session-edit/m", []byte(edited))
	})
	if err != nil {
		t.Fatal(err)
	}
	b := newTaskProcess(t, store)
	_, res, err := b.sb.ResumeSessionTask(ctx, "session-edit", wasmbox.TaskOptions{})
	if !errors.Is(err, governance.ErrTampered) {
		t.Fatalf("ResumeSessionTask of an edited Exec = %v (%+v); want ErrTampered", err, res)
	}
	if b.refunds.Load() != 0 || b.lookups.Load() != 0 {
		t.Fatalf("a refused resume ran tools: %d lookups, %d refunds", b.lookups.Load(), b.refunds.Load())
	}
}
