package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
)

// RunGovernance checks governance's durable tasks, shared budgets and audit chains on stores made by open:
// pause at an approval, decide once, resume in another gate (another process, as far as the store can tell)
// without running a tool twice, outcome-unknown calls, leases, divergence, tampering, and a budget shared by
// concurrent gates that never overspends. Every subtest opens its own store.
func RunGovernance(t *testing.T, open func(t *testing.T) governance.Store) {
	t.Run("PauseDecideResume", func(t *testing.T) { testPauseDecideResume(t, open(t)) })
	t.Run("DecisionsOnce", func(t *testing.T) { testDecisionsOnce(t, open(t)) })
	t.Run("Divergence", func(t *testing.T) { testDivergence(t, open(t)) })
	t.Run("Mismatch", func(t *testing.T) { testMismatch(t, open(t)) })
	t.Run("Lease", func(t *testing.T) { testLease(t, open(t)) })
	t.Run("OutcomeUnknown", func(t *testing.T) { testOutcomeUnknown(t, open(t)) })
	t.Run("LongToolKeepsLease", func(t *testing.T) { testLongToolKeepsLease(t, open(t)) })
	t.Run("Tampering", func(t *testing.T) { testTampering(t, open(t)) })
	t.Run("DataTampering", func(t *testing.T) { testDataTampering(t, open(t)) })
	t.Run("LimitsContinue", func(t *testing.T) { testLimitsContinue(t, open(t)) })
	t.Run("RecordWrittenElsewhere", func(t *testing.T) { testRecordWrittenElsewhere(t, open(t)) })
	t.Run("CommitFails", func(t *testing.T) { testCommitFails(t, open(t)) })
	t.Run("SharedBudget", func(t *testing.T) { testSharedBudget(t, open(t)) })
	t.Run("SharedAuditChain", func(t *testing.T) { testSharedAuditChain(t, open(t)) })
	t.Run("SharedBudgetAndChain", func(t *testing.T) { testSharedBudgetAndChain(t, open(t)) })
}

// policy allows every tool except those named "approve_*", which need approval.
var policy = governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
	if strings.HasPrefix(c.Tool, "approve_") {
		return governance.Verdict{Action: governance.NeedsApproval, Reason: "a person must approve " + c.Tool}, nil
	}
	return governance.Verdict{Action: governance.Allow, Effect: governance.Mutating}, nil
})

// newGate is one process's gate over store.
func newGate(t *testing.T, store governance.Store, limits governance.Limits) *governance.Gate {
	t.Helper()
	g, err := governance.NewGate(governance.GateConfig{Policy: policy, Auditor: governance.DiscardAuditor{}, Store: store,
		StoreAuditKey: []byte("0123456789abcdef0123456789abcdef"), Limits: limits, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tools counts how often each tool really ran, and with which idempotency keys.
type tools struct {
	mu   sync.Mutex
	ran  map[string]int
	keys []string
}

func (ts *tools) fn(name string) governance.ToolFunc {
	return func(ctx context.Context, c governance.Call) ([]byte, error) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.ran == nil {
			ts.ran = map[string]int{}
		}
		ts.ran[name]++
		ts.keys = append(ts.keys, c.IdempotencyKey+"|"+governance.IdempotencyKey(ctx))
		return []byte(fmt.Sprintf(`{"tool":%q,"args":%s}`, name, c.Args)), nil
	}
}

func (ts *tools) count(name string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.ran[name]
}

func call(tool, args string) governance.Call {
	return governance.Call{Tool: tool, Args: json.RawMessage(args), Source: governance.SourcePython, Effect: governance.Mutating}
}

// program is a deterministic "program": its calls in order; it stops at the first error, as a program ended by
// the sandbox would.
func program(ctx context.Context, run *governance.Run, ts *tools, calls ...governance.Call) ([]string, error) {
	var results []string
	for _, c := range calls {
		out, err := run.Do(ctx, c, ts.fn(c.Tool))
		if err != nil {
			if h := run.Halted(); h != nil {
				return results, h
			}
			results = append(results, "error:"+err.Error())
			continue
		}
		results = append(results, string(out.Result))
	}
	return results, nil
}

func testPauseDecideResume(t *testing.T, store governance.Store) {
	ctx := context.Background()
	steps := []governance.Call{call("read", `{"n":1}`), call("approve_send", `{"to":"bob","body":"hi\u202e"}`), call("read", `{"n":2}`)}

	// Process A: runs until the approval, and pauses.
	var ta tools
	ga := newGate(t, store, governance.Limits{})
	task, err := ga.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp1", Meta: []byte("program v1")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = program(ctx, task.Run(), &ta, steps...)
	var paused *governance.PausedError
	if !errors.As(err, &paused) || !errors.Is(err, governance.ErrPaused) {
		t.Fatalf("program reached the approval with %v; want a *PausedError", err)
	}
	if paused.Pending.TaskID != task.ID() || paused.Pending.Seq != 2 || paused.Pending.Tool != "approve_send" ||
		string(paused.Pending.Args) != `{"to":"bob","body":"hi\u202e"}` {
		t.Fatalf("pending call = %+v; want call 2, approve_send, with its arguments exactly", paused.Pending)
	}
	if ta.count("approve_send") != 0 {
		t.Fatal("the tool that needs approval ran before it was approved")
	}
	if _, err := task.Run().Do(ctx, call("read", `{}`), ta.fn("read")); !errors.Is(err, governance.ErrPaused) {
		t.Fatalf("a call after the pause = %v; want it refused with the pause", err)
	}
	if err := task.End(ctx, 5*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	// Every gate on the store sees the pending call.
	gb := newGate(t, store, governance.Limits{})
	pend, err := gb.PendingCalls(ctx, "", 0, 0)
	if err != nil || len(pend) != 1 || pend[0].TaskID != task.ID() || pend[0].Seq != 2 {
		t.Fatalf("PendingCalls = %+v, %v; want the one paused call", pend, err)
	}
	info, err := gb.TaskInfo(ctx, task.ID())
	if err != nil || info.State != governance.TaskPaused || info.Used != 5*time.Millisecond || info.Token != "" {
		t.Fatalf("TaskInfo = %+v, %v; want paused with 5ms used and no token shown", info, err)
	}
	// Resuming before the decision says it still waits.
	if _, err := gb.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp1"}); !errors.As(err, &paused) {
		t.Fatalf("ResumeTask before a decision = %v; want a *PausedError", err)
	}
	// Process C decides.
	gc := newGate(t, store, governance.Limits{})
	if err := gc.Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: true, DecidedBy: "approver:test:alice", Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	if pend, _ := gb.PendingCalls(ctx, "", 0, 0); len(pend) != 0 {
		t.Fatalf("a decided call is still listed as pending: %+v", pend)
	}
	// Process B resumes: the first call comes from the journal, the approved one runs once, the last is new.
	var tb tools
	tk, err := gb.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(tk.Meta()) != "program v1" || tk.Replay() != 2 {
		t.Fatalf("resumed task: Meta %q, Replay %d; want the program and 2 journaled calls", tk.Meta(), tk.Replay())
	}
	res, err := program(ctx, tk.Run(), &tb, steps...)
	if err != nil {
		t.Fatalf("resumed program: %v", err)
	}
	if tb.count("read") != 1 || tb.count("approve_send") != 1 {
		t.Fatalf("after resume, read ran %d times and approve_send %d; want 1 each (the first read came from the journal)", tb.count("read"), tb.count("approve_send"))
	}
	if res[0] != `{"tool":"read","args":{"n":1}}` {
		t.Fatalf("replayed result = %s; want the recorded one", res[0])
	}
	want := tk.ID() + "/2|" + tk.ID() + "/2"
	if len(tb.keys) == 0 || tb.keys[0] != want {
		t.Fatalf("the approved tool's idempotency key (call, context) = %v; want %s", tb.keys, want)
	}
	if err := tk.End(ctx, time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	info, _ = gb.TaskInfo(ctx, task.ID())
	if info.State != governance.TaskDone || info.Calls != 3 || info.Runs != 2 || info.Used != 6*time.Millisecond {
		t.Fatalf("TaskInfo = %+v; want done, 3 calls, 2 runs, 6ms used", info)
	}
	rep, err := gb.VerifyTask(ctx, task.ID())
	if err != nil {
		t.Fatalf("VerifyTask: %v", err)
	}
	// meta (the program kept with the task), allowed+ok (read 1), paused, decided, allowed+ok (send), allowed+ok
	// (read 2).
	if rep.Records != 9 {
		t.Fatalf("the task's audit chain has %d records; want 9", rep.Records)
	}
	recs, err := gb.TaskRecords(ctx, task.ID(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range recs {
		outcomes = append(outcomes, fmt.Sprintf("%d:%s", r.Seq, r.Outcome))
	}
	if got := strings.Join(outcomes, " "); got != "0:meta 1:allowed 1:ok 2:paused 2:decided 2:allowed 2:ok 3:allowed 3:ok" {
		t.Fatalf("audit chain = %s", got)
	}
	if _, err := gb.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp1"}); !errors.Is(err, governance.ErrTaskEnded) {
		t.Fatalf("resuming a done task = %v; want ErrTaskEnded", err)
	}
}

// pauseAt starts a task and runs calls until it pauses.
func pauseAt(t *testing.T, g *governance.Gate, fp string, calls ...governance.Call) *governance.Task {
	t.Helper()
	ctx := context.Background()
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	var ts tools
	if _, err := program(ctx, task.Run(), &ts, calls...); !errors.Is(err, governance.ErrPaused) {
		t.Fatalf("program = %v; want it paused", err)
	}
	if err := task.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	return task
}

func testDecisionsOnce(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task := pauseAt(t, g, "fp", call("read", `{}`), call("approve_x", `{}`))
	for _, c := range []struct {
		id   string
		seq  int64
		want error
	}{
		{"no-such-task", 1, governance.ErrTaskUnknown},
		{"../../etc/passwd", 1, governance.ErrTaskUnknown},
		{task.ID(), 1, governance.ErrNotPending},
		{task.ID(), 3, governance.ErrNotPending},
		{task.ID(), -1, governance.ErrNotPending},
	} {
		if err := g.Decide(ctx, c.id, c.seq, governance.TaskDecision{Allow: true}); !errors.Is(err, c.want) {
			t.Errorf("Decide(%q, %d) = %v; want %v", c.id, c.seq, err, c.want)
		}
	}
	// Concurrent deciders: exactly one decision is recorded.
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for i := range 6 {
		wg.Go(func() {
			err := newGate(t, store, governance.Limits{}).Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: i%2 == 0, DecidedBy: fmt.Sprint("approver:", i)})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, governance.ErrAlreadyDecided):
				refused.Add(1)
			default:
				t.Errorf("Decide: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != 5 {
		t.Fatalf("%d decisions recorded, %d refused; want 1 and 5", ok.Load(), refused.Load())
	}
	if _, err := g.VerifyTask(ctx, task.ID()); err != nil {
		t.Fatalf("VerifyTask after the decision: %v", err)
	}
	// A denial reaches the program as a denied call, and the tool never runs.
	g2 := newGate(t, store, governance.Limits{})
	if err := g2.Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: false}); !errors.Is(err, governance.ErrAlreadyDecided) {
		t.Fatalf("a later Decide = %v; want ErrAlreadyDecided", err)
	}
}

func testDivergence(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task := pauseAt(t, g, "fp", call("read", `{"a":1}`), call("approve_x", `{}`))
	if err := g.Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	tk, err := g.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	var ts tools
	_, err = program(ctx, tk.Run(), &ts, call("read", `{"a":2}`), call("approve_x", `{}`))
	if !errors.Is(err, governance.ErrDiverged) {
		t.Fatalf("a resumed program with other arguments = %v; want ErrDiverged", err)
	}
	if ts.count("read")+ts.count("approve_x") != 0 {
		t.Fatal("a tool ran in a diverged replay")
	}
	_ = tk.End(ctx, 0, "diverged")
}

func testMismatch(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task := pauseAt(t, g, "interpreter=abc tools=def", call("approve_x", `{}`))
	_ = g.Decide(ctx, task.ID(), 1, governance.TaskDecision{Allow: true})
	_, err := g.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "interpreter=abc tools=XYZ"})
	if !errors.Is(err, governance.ErrTaskMismatch) || !strings.Contains(err.Error(), "tools=XYZ") {
		t.Fatalf("ResumeTask with another fingerprint = %v; want ErrTaskMismatch naming both", err)
	}
	if _, err := g.ResumeTask(ctx, "task-forged", governance.TaskOptions{}); !errors.Is(err, governance.ErrTaskUnknown) {
		t.Fatalf("ResumeTask of an unknown ID = %v; want ErrTaskUnknown", err)
	}
}

func testLease(t *testing.T, store governance.Store) {
	ctx := context.Background()
	// Replica A reaches the store through a link that can go down.
	link := &flakyStore{Store: store}
	task, err := newGate(t, link, governance.Limits{}).NewTask(ctx, governance.TaskOptions{Fingerprint: "fp", Holder: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	var ts tools
	if _, err := task.Run().Do(ctx, call("read", `{"i":1}`), ts.fn("read")); err != nil {
		t.Fatal(err)
	}
	// While A holds it (and renews it, past one TTL), nobody else may resume it.
	time.Sleep(2500 * time.Millisecond)
	gb := newGate(t, store, governance.Limits{})
	_, err = gb.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp", Holder: "replica-b"})
	if !errors.Is(err, governance.ErrTaskBusy) || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("ResumeTask of a held task = %v; want ErrTaskBusy naming the holder", err)
	}
	// A is cut off: its lease expires and B takes the task over, replaying A's call.
	link.down.Store(true)
	var tb *governance.Task
	deadline := time.Now().Add(10 * time.Second)
	for {
		tb, err = gb.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp", Holder: "replica-b"})
		if !errors.Is(err, governance.ErrTaskBusy) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("ResumeTask after the holder's lease expired: %v", err)
	}
	if tb.Replay() != 1 {
		t.Fatalf("the taken-over task replays %d calls; want 1", tb.Replay())
	}
	// A comes back: it no longer holds the task, and cannot run anything in it.
	link.down.Store(false)
	if _, err := task.Run().Do(ctx, call("read", `{"i":2}`), ts.fn("read")); !errors.Is(err, governance.ErrTaskLost) {
		t.Fatalf("a call by the replica that lost the lease = %v; want ErrTaskLost", err)
	}
	if ts.count("read") != 1 {
		t.Fatalf("read ran %d times on A; want once (before it lost the task)", ts.count("read"))
	}
	_ = task.End(ctx, 0, "")
	var tbTools tools
	if _, err := program(ctx, tb.Run(), &tbTools, call("read", `{"i":1}`), call("read", `{"i":2}`)); err != nil {
		t.Fatal(err)
	}
	if tbTools.count("read") != 1 {
		t.Fatalf("read ran %d times on B; want once (call 1 came from the journal)", tbTools.count("read"))
	}
	if err := tb.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if info, _ := gb.TaskInfo(ctx, task.ID()); info.State != governance.TaskDone || info.Calls != 2 {
		t.Fatalf("TaskInfo = %+v; want done with 2 calls", info)
	}
}

// A tool that runs longer than the lease's TTL does not lose the task: the lease is renewed meanwhile.
func testLongToolKeepsLease(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp", Holder: "slow-replica"})
	if err != nil {
		t.Fatal(err)
	}
	other := newGate(t, store, governance.Limits{})
	var took error
	_, err = task.Run().Do(ctx, call("slow", `{}`), func(context.Context, governance.Call) ([]byte, error) {
		time.Sleep(3 * time.Second) // past the 2 s TTL of newGate's leases
		_, took = other.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
		return []byte(`"done"`), nil
	})
	if err != nil {
		t.Fatalf("the slow call: %v", err)
	}
	if !errors.Is(took, governance.ErrTaskBusy) {
		t.Fatalf("another process resuming the task while its slow tool ran = %v; want ErrTaskBusy (the lease renewed)", took)
	}
	if err := task.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
}

func testOutcomeUnknown(t *testing.T, store governance.Store) {
	ctx := context.Background()
	// A store that goes away right after the tool ran: the result cannot be recorded.
	flaky := &flakyStore{Store: store}
	g := newGate(t, flaky, governance.Limits{})
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	var ts tools
	pay := func(ctx context.Context, c governance.Call) ([]byte, error) {
		flaky.down.Store(true) // the process dies after the tool took effect, before its result is recorded
		return ts.fn("pay")(ctx, c)
	}
	_, err = task.Run().Do(ctx, call("pay", `{"amount":5}`), pay)
	if !errors.Is(err, governance.ErrStore) || task.Run().Halted() == nil {
		t.Fatalf("a call whose result cannot be recorded = %v (halted %v); want ErrStore and the run halted", err, task.Run().Halted())
	}
	if _, err := task.Run().Do(ctx, call("read", `{}`), ts.fn("read")); err == nil || ts.count("read") != 0 {
		t.Fatal("a halted run ran another tool")
	}
	if err := task.End(ctx, 0, ""); err == nil {
		t.Fatal("End with the store down succeeded")
	}
	flaky.down.Store(false)
	// The lease of the dead process expires; another process resumes: the call's outcome is unknown.
	g2 := newGate(t, store, governance.Limits{})
	var paused *governance.PausedError
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = g2.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
		if !errors.Is(err, governance.ErrTaskBusy) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.As(err, &paused) || !paused.Pending.OutcomeUnknown || paused.Pending.Seq != 1 || string(paused.Pending.Args) != `{"amount":5}` {
		t.Fatalf("ResumeTask after a death mid-call = %v; want a pause on call 1 with its outcome unknown", err)
	}
	// Denied: the program sees ErrOutcomeUnknown and the tool is not run again.
	if err := g2.Decide(ctx, task.ID(), 1, governance.TaskDecision{Allow: false, DecidedBy: "approver:ops"}); err != nil {
		t.Fatal(err)
	}
	tk, err := g2.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	var t2 tools
	_, err = tk.Run().Do(ctx, call("pay", `{"amount":5}`), t2.fn("pay"))
	if !errors.Is(err, governance.ErrOutcomeUnknown) || t2.count("pay") != 0 {
		t.Fatalf("the denied unknown call = %v (ran %d times); want ErrOutcomeUnknown, not run", err, t2.count("pay"))
	}
	if err := tk.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := g2.VerifyTask(ctx, task.ID()); err != nil {
		t.Fatalf("VerifyTask: %v", err)
	}
	if ts.count("pay") != 1 {
		t.Fatalf("pay ran %d times in all; want once", ts.count("pay"))
	}
}

func testTampering(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task := pauseAt(t, g, "fp", call("read", `{"q":"balance"}`), call("approve_x", `{}`))
	if err := g.Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	// Someone with write access to the store changes what the first call returned.
	err := store.Update(ctx, func(tx governance.Tx) error {
		kvs, err := tx.Scan("t/"+task.ID()+"/j/", "", 0)
		if err != nil || len(kvs) == 0 {
			return fmt.Errorf("journal not found (%v)", err)
		}
		var e map[string]any
		if err := json.Unmarshal(kvs[0].Value, &e); err != nil {
			return err
		}
		e["result"] = []byte(`{"balance":1000000}`)
		v, _ := json.Marshal(e)
		return tx.Put(kvs[0].Key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"}); !errors.Is(err, governance.ErrTampered) {
		t.Fatalf("ResumeTask of an edited journal = %v; want ErrTampered", err)
	}
	// An edited audit record is detected by the chain.
	task2 := pauseAt(t, g, "fp", call("read", `{}`), call("approve_x", `{}`))
	err = store.Update(ctx, func(tx governance.Tx) error {
		kvs, err := tx.Scan("a/t/"+task2.ID()+"/r/", "", 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if strings.Contains(string(kv.Value), `"allowed"`) {
				return tx.Put(kv.Key, []byte(strings.Replace(string(kv.Value), `"allowed"`, `"denied"`, 1)))
			}
		}
		return fmt.Errorf("no allowed record in the chain of %d", len(kvs))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.VerifyTask(ctx, task2.ID()); !errors.Is(err, governance.ErrTampered) {
		t.Fatalf("VerifyTask of an edited chain = %v; want ErrTampered", err)
	}
}

// testDataTampering edits what a resume runs (the data kept with the task, a Memo's result) in the store: the
// audit chain recorded the SHA-256 of each, so each edit is refused.
func testDataTampering(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{})
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp", Meta: []byte("exec 1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.SetMeta(ctx, []byte("exec 1; exec 2")); err != nil {
		t.Fatal(err)
	}
	if v, err := task.Memo(ctx, func(context.Context) ([]byte, error) { return []byte("model turn 1"), nil }); err != nil || string(v) != "model turn 1" {
		t.Fatalf("Memo = %q, %v", v, err)
	}
	var ts tools
	if _, err := program(ctx, task.Run(), &ts, call("read", `{}`), call("approve_x", `{}`)); !errors.Is(err, governance.ErrPaused) {
		t.Fatalf("program = %v; want it paused", err)
	}
	if err := task.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := g.Decide(ctx, task.ID(), 2, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	metaKey, memoKey := "t/"+task.ID()+"/m", "t/"+task.ID()+"/s/000000000001"
	get := func(key string) []byte {
		var v []byte
		if err := store.View(ctx, func(tx governance.Tx) error {
			var ok bool
			var err error
			if v, ok, err = tx.Get(key); err == nil && !ok {
				err = fmt.Errorf("%s not in the store", key)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	meta, memo := get(metaKey), get(memoKey)
	put := func(key string, v []byte) {
		if err := store.Update(ctx, func(tx governance.Tx) error {
			if v == nil {
				return tx.Delete(key)
			}
			return tx.Put(key, v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, edit := range []struct {
		what, key string
		v         []byte
	}{
		{"the task's data replaced", metaKey, []byte("exec 1; import os; exec 2")},
		{"the task's data rolled back to what it was first", metaKey, []byte("exec 1")},
		{"a memo's result replaced", memoKey, []byte("model turn 1, rewritten")},
		{"a memo removed", memoKey, nil},
	} {
		put(edit.key, edit.v)
		if _, err := g.VerifyTask(ctx, task.ID()); !errors.Is(err, governance.ErrTampered) {
			t.Fatalf("%s: VerifyTask = %v; want ErrTampered", edit.what, err)
		}
		if _, err := g.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"}); !errors.Is(err, governance.ErrTampered) {
			t.Fatalf("%s: ResumeTask = %v; want ErrTampered", edit.what, err)
		}
		put(metaKey, meta)
		put(memoKey, memo)
	}
	// Restored, the task resumes with its data and its memo, and the memo is not made again.
	tk, err := g.ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.End(ctx, 0, "")
	if string(tk.Meta()) != "exec 1; exec 2" {
		t.Fatalf("Meta after resume = %q", tk.Meta())
	}
	v, err := tk.Memo(ctx, func(context.Context) ([]byte, error) { return nil, errors.New("made again") })
	if err != nil || string(v) != "model turn 1" {
		t.Fatalf("Memo after resume = %q, %v; want the recorded turn", v, err)
	}
}

func testLimitsContinue(t *testing.T, store governance.Store) {
	ctx := context.Background()
	limits := governance.Limits{MaxToolCalls: 3}
	g := newGate(t, store, limits)
	task := pauseAt(t, g, "fp", call("read", `{"i":1}`), call("read", `{"i":2}`), call("approve_x", `{}`))
	if err := g.Decide(ctx, task.ID(), 3, governance.TaskDecision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	tk, err := newGate(t, store, limits).ResumeTask(ctx, task.ID(), governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	var ts tools
	run := tk.Run()
	for i, c := range []governance.Call{call("read", `{"i":1}`), call("read", `{"i":2}`), call("approve_x", `{}`)} {
		if _, err := run.Do(ctx, c, ts.fn(c.Tool)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	// The fourth call of the task is past max_tool_calls: the count continued across the resume.
	if _, err := run.Do(ctx, call("read", `{"i":4}`), ts.fn("read")); !errors.Is(err, governance.ErrToolLimit) {
		t.Fatalf("call 4 of a task capped at 3 = %v; want ErrToolLimit", err)
	}
	if ts.count("read") != 0 || ts.count("approve_x") != 1 {
		t.Fatalf("after resume read ran %d times, approve_x %d; want 0 and 1", ts.count("read"), ts.count("approve_x"))
	}
	_ = tk.End(ctx, 0, "")
	if u := run.Usage(); u.Calls != 4 || u.Denied != 1 {
		t.Fatalf("Usage = %+v; want 4 calls, 1 denied", u)
	}
}

// A task's record that another writer changed while this process holds the task is what its next call sees
// (the process keeps the record it last wrote, and must not trust it once the store holds other bytes).
func testRecordWrittenElsewhere(t *testing.T, store governance.Store) {
	ctx := context.Background()
	g := newGate(t, store, governance.Limits{MaxToolCalls: 3})
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	defer task.End(ctx, 0, "")
	var ts tools
	run := task.Run()
	if _, err := run.Do(ctx, call("read", `{"i":1}`), ts.fn("read")); err != nil {
		t.Fatal(err)
	}
	edit := func(change func(rec map[string]any)) {
		t.Helper()
		err := store.Update(ctx, func(tx governance.Tx) error {
			v, ok, err := tx.Get("t/" + task.ID())
			if err != nil || !ok {
				return fmt.Errorf("task record not found (%v)", err)
			}
			var rec map[string]any
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			change(rec)
			v, _ = json.Marshal(rec)
			return tx.Put("t/"+task.ID(), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Another writer counts two more calls of the task: the next one is past max_tool_calls.
	edit(func(rec map[string]any) { rec["calls"] = 3 })
	if _, err := run.Do(ctx, call("read", `{"i":2}`), ts.fn("read")); !errors.Is(err, governance.ErrToolLimit) {
		t.Fatalf("a call after another writer used up the task's calls = %v; want ErrToolLimit", err)
	}
	if info := task.Info(); info.Calls != 4 || info.Denied != 1 {
		t.Fatalf("Info = %d calls, %d denied; want 4 and 1 (the other writer's 3, and the refused call)", info.Calls, info.Denied)
	}
	// Another writer takes the task (its lease, under the same token): this process has lost it.
	edit(func(rec map[string]any) { rec["holder"], rec["state"] = "replica-b", "failed" })
	if _, err := run.Do(ctx, call("read", `{"i":3}`), ts.fn("read")); !errors.Is(err, governance.ErrTaskLost) {
		t.Fatalf("a call after another writer ended the task = %v; want ErrTaskLost", err)
	}
	if ts.count("read") != 1 {
		t.Fatalf("read ran %d times; want once (before the record was changed)", ts.count("read"))
	}
}

// A transaction whose function ran but that did not commit leaves the task as the store has it: what this
// process reports (Info) and what its next call starts from are the committed record, not the one rolled back.
func testCommitFails(t *testing.T, store governance.Store) {
	ctx := context.Background()
	link := &rollbackStore{Store: store}
	g := newGate(t, link, governance.Limits{})
	task, err := g.NewTask(ctx, governance.TaskOptions{Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	defer task.End(ctx, 0, "")
	var ts tools
	run := task.Run()
	if _, err := run.Do(ctx, call("read", `{"i":1}`), ts.fn("read")); err != nil {
		t.Fatal(err)
	}
	link.rollback.Store(true)
	if _, err := run.Do(ctx, call("read", `{"i":2}`), ts.fn("read")); !errors.Is(err, governance.ErrStore) {
		t.Fatalf("a call whose booking did not commit = %v; want ErrStore", err)
	}
	if info := task.Info(); info.Calls != 1 || info.PerTool["read"] != 1 {
		t.Fatalf("after a booking that did not commit Info = %d calls (read %d); want 1 (the store's)", info.Calls, info.PerTool["read"])
	}
	if err := task.SetMeta(ctx, []byte("new")); !errors.Is(err, governance.ErrStore) {
		t.Fatalf("SetMeta that did not commit = %v; want ErrStore", err)
	}
	link.rollback.Store(false)
	stored, err := g.TaskInfo(ctx, task.ID())
	if err != nil {
		t.Fatal(err)
	}
	info := task.Info()
	if info.Calls != stored.Calls || info.Calls != 1 || info.PerTool["read"] != 1 || !info.Updated.Equal(stored.Updated) {
		t.Fatalf("after a rolled-back booking Info = %d calls (read %d, updated %v); the store holds %d (updated %v)",
			info.Calls, info.PerTool["read"], info.Updated, stored.Calls, stored.Updated)
	}
	if ts.count("read") != 1 {
		t.Fatalf("read ran %d times; want once (the second call was never booked)", ts.count("read"))
	}
	if string(task.Meta()) == "new" {
		t.Fatal("Meta() returns what SetMeta could not commit")
	}
}

// rollbackStore runs each transaction's function and, while rollback is set, rolls it back instead of committing:
// a commit that failed after the function ran.
type rollbackStore struct {
	governance.Store
	rollback atomic.Bool
}

var errRolledBack = fmt.Errorf("%w: commit failed (test)", governance.ErrStore)

func (r *rollbackStore) Update(ctx context.Context, fn func(governance.Tx) error) error {
	if !r.rollback.Load() {
		return r.Store.Update(ctx, fn)
	}
	err := r.Store.Update(ctx, func(tx governance.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRolledBack
	})
	if err == nil {
		err = errRolledBack
	}
	return err
}

func testSharedBudget(t *testing.T, store governance.Store) {
	ctx := context.Background()
	budget, err := governance.NewStoreBudget(store, "fleet", governance.SharedLimits{MaxCalls: 60})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 6 { // six "replicas", each with its own gate
		wg.Go(func() {
			g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{},
				Limits: governance.Limits{MaxToolCalls: 1000}, NewBudget: func(string) governance.Budget { return budget }})
			if err != nil {
				t.Error(err)
				return
			}
			run := g.NewRun("")
			for range 20 {
				_, err := run.Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { ran.Add(1); return nil, nil })
				if err != nil && !errors.Is(err, governance.ErrBudgetExceeded) {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	u, err := budget.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 60 || u.Calls != 60 {
		t.Fatalf("120 calls against a shared budget of 60: %d ran, usage %d; want exactly 60", ran.Load(), u.Calls)
	}
}

// countingStore counts the write transactions made through it.
type countingStore struct {
	governance.Store
	updates atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, fn func(governance.Tx) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, fn)
}

// testSharedBudgetAndChain: replicas whose budget and audit chain are in one store. A call the policy allows
// books its budget and appends its "allowed" record in one transaction (two a call with its outcome, not
// three); a refused call writes its denial; the chain holds every record; a chain that cannot be appended to
// leaves the budget unspent and the tool not run; a store that went away refuses the call.
func testSharedBudgetAndChain(t *testing.T, store governance.Store) {
	ctx := context.Background()
	cs := &countingStore{Store: store}
	key := []byte("fleet-key-0123456789")
	newBudget := func(s governance.Store, scope string) *governance.StoreBudget {
		b, err := governance.NewStoreBudget(s, scope, governance.SharedLimits{MaxCalls: 60})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// gate is one replica's gate: budget, and the audit chain named chain in s.
	gate := func(s governance.Store, budget *governance.StoreBudget, chain string) *governance.Gate {
		aud, err := governance.NewStoreAuditor(s, chain, key)
		if err != nil {
			t.Fatal(err)
		}
		g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud,
			Limits: governance.Limits{MaxToolCalls: 1000, MaxDeniedCalls: 1000}, NewBudget: func(string) governance.Budget { return budget }})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	budget := newBudget(cs, "fleet2")
	var ran, refused atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		g := gate(cs, budget, "fleet2")
		wg.Go(func() {
			run := g.NewRun("")
			for range 20 {
				_, err := run.Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { ran.Add(1); return nil, nil })
				switch {
				case errors.Is(err, governance.ErrBudgetExceeded):
					refused.Add(1)
				case err != nil:
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	u, err := budget.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 60 || refused.Load() != 60 || u.Calls != 60 {
		t.Fatalf("120 calls against a shared budget of 60: %d ran, %d refused, usage %d; want 60, 60, 60", ran.Load(), refused.Load(), u.Calls)
	}
	// Each call that ran: its budget with its "allowed" record, then its outcome; each refused one: the
	// refusing transaction, then its denial.
	if n := cs.updates.Load(); n != 4*60 {
		t.Errorf("%d write transactions for 60 calls run and 60 refused; want %d", n, 4*60)
	}
	rep, err := governance.VerifyStoreChain(ctx, store, "fleet2", key)
	if err != nil || rep.Records != 3*60 {
		t.Fatalf("VerifyStoreChain = %+v, %v; want %d intact records (allowed and ok for each call run, a denial for each refused)", rep, err, 3*60)
	}

	// A chain whose head is corrupt: the call is refused as unaudited, and its budget is not spent.
	budget2 := newBudget(cs, "fleet3")
	if err := store.Update(ctx, func(tx governance.Tx) error { return tx.Put("a/broken/h", []byte("{not json")) }); err != nil {
		t.Fatal(err)
	}
	toolRan := false
	_, err = gate(cs, budget2, "broken").NewRun("").Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { toolRan = true; return nil, nil })
	if !errors.Is(err, governance.ErrAudit) || toolRan {
		t.Fatalf("a call whose record cannot be appended: %v (tool ran: %v); want ErrAudit and no run", err, toolRan)
	}
	if u, err := budget2.Usage(ctx); err != nil || u.Calls != 0 {
		t.Fatalf("budget after the unaudited call: %+v, %v; want nothing spent", u, err)
	}

	// The store goes away: the call is refused by the budget, wrapping ErrStore, and the tool does not run.
	fs := &flakyStore{Store: store}
	g3 := gate(fs, newBudget(fs, "fleet4"), "fleet4")
	fs.down.Store(true)
	_, err = g3.NewRun("").Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { toolRan = true; return nil, nil })
	if !errors.Is(err, governance.ErrBudgetExceeded) || !errors.Is(err, governance.ErrStore) || toolRan {
		t.Fatalf("a call while the store is down: %v (tool ran: %v); want ErrBudgetExceeded wrapping ErrStore", err, toolRan)
	}
	fs.down.Store(false)
	if _, err := g3.NewRun("").Do(ctx, call("read", `{}`), func(context.Context, governance.Call) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatalf("a call after the store came back: %v", err)
	}
}

func testSharedAuditChain(t *testing.T, store governance.Store) {
	ctx := context.Background()
	key := []byte("fleet-key-0123456789")
	var wg sync.WaitGroup
	const writers, each = 5, 12
	for w := range writers {
		wg.Go(func() {
			a, err := governance.NewStoreAuditor(store, "fleet", key)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range each {
				rec := governance.Record{RunID: fmt.Sprint("replica-", w), Seq: int64(i + 1), Tool: "read", Effect: governance.ReadOnly,
					Decision: "allow", Outcome: governance.StatusOK, Time: time.Unix(0, 0).UTC()}
				if err := a.Record(ctx, rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep, err := governance.VerifyStoreChain(ctx, store, "fleet", key)
	if err != nil || rep.Records != writers*each {
		t.Fatalf("VerifyStoreChain = %+v, %v; want %d intact records", rep, err, writers*each)
	}
	if _, err := governance.VerifyStoreChain(ctx, store, "fleet", []byte("wrong-key-0123456789")); !errors.Is(err, governance.ErrTampered) {
		t.Fatalf("verification with a wrong key = %v; want ErrTampered", err)
	}
	// A record removed from the end is detected through the head.
	err = store.Update(ctx, func(tx governance.Tx) error { return tx.Delete(fmt.Sprintf("a/fleet/r/%012d", writers*each)) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := governance.VerifyStoreChain(ctx, store, "fleet", key); !errors.Is(err, governance.ErrTampered) {
		t.Fatalf("verification after the last record was removed = %v; want ErrTampered", err)
	}
}

// flakyStore fails every transaction while down is set, as a store that went away does.
type flakyStore struct {
	governance.Store
	down atomic.Bool
}

var errDown = fmt.Errorf("%w: store unreachable (test)", governance.ErrStore)

func (f *flakyStore) Update(ctx context.Context, fn func(governance.Tx) error) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Update(ctx, fn)
}

func (f *flakyStore) View(ctx context.Context, fn func(governance.Tx) error) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.View(ctx, fn)
}
