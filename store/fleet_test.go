package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/pgtest"
	"github.com/wasmbox/wasmbox/store"
)

// The child processes of the fleet and crash tests are this test binary, started with WASMBOX_STORE_CHILD set:
// replicaMain (called from TestMain) runs the role it names and exits.
const childEnv = "WASMBOX_STORE_CHILD"

var fleetKey = []byte("fleet-audit-key-0123456789")

// stores are the real stores the fleet and crash tests run on.
func stores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "fleet.db") },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	}
}

// child starts this binary as a replica with role and args; its stdout is returned as a line reader.
func child(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

// replicaMain runs a child's role; it reports on stdout.
func replicaMain() {
	role := os.Getenv(childEnv)
	ctx := context.Background()
	db, err := store.Open(ctx, os.Getenv("STORE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(3)
	}
	defer db.Close()
	switch role {
	case "fleet":
		err = fleetReplica(ctx, db)
	case "pause", "midcall":
		err = crashReplica(ctx, db, role)
	case "middecide":
		err = decideAndHang(ctx, db)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fleetReplica makes CALLS governed calls against the shared budget "fleet" and the shared chain "fleet".
func fleetReplica(ctx context.Context, db governance.Store) error {
	calls, _ := strconv.Atoi(os.Getenv("CALLS"))
	budget, err := governance.NewStoreBudget(db, "fleet", governance.SharedLimits{MaxCalls: 1000})
	if err != nil {
		return err
	}
	aud, err := governance.NewStoreAuditor(db, "fleet", fleetKey)
	if err != nil {
		return err
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud,
		Limits: governance.Limits{MaxToolCalls: 100000, MaxDeniedCalls: 100000}, NewBudget: func(string) governance.Budget { return budget }})
	if err != nil {
		return err
	}
	run := g.NewRun("replica-" + os.Getenv("REPLICA"))
	ran, denied := 0, 0
	for i := range calls {
		_, err := run.Do(ctx, governance.Call{Tool: "spend", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Source: governance.SourcePython, Effect: governance.Mutating},
			func(context.Context, governance.Call) ([]byte, error) { ran++; return []byte(`true`), nil })
		switch {
		case err == nil:
		case errors.Is(err, governance.ErrBudgetExceeded):
			denied++
		default:
			return err
		}
	}
	fmt.Printf("ran %d denied %d\n", ran, denied)
	return nil
}

var approvePolicy = governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
	if strings.HasPrefix(c.Tool, "approve_") {
		return governance.Verdict{Action: governance.NeedsApproval, Reason: "needs a person"}, nil
	}
	return governance.Verdict{Action: governance.Allow, Effect: governance.Mutating}, nil
})

func taskGate(db governance.Store, ttl time.Duration) (*governance.Gate, error) {
	return governance.NewGate(governance.GateConfig{Policy: approvePolicy, Auditor: governance.DiscardAuditor{}, Store: db,
		StoreAuditKey: fleetKey, LeaseTTL: ttl})
}

func call(tool, args string) governance.Call {
	return governance.Call{Tool: tool, Args: json.RawMessage(args), Source: governance.SourcePython, Effect: governance.Mutating}
}

// crashReplica runs task TASK: a read, then (pause) a call that needs approval, or (midcall) a payment whose tool
// never returns. It says where it is and waits to be killed.
func crashReplica(ctx context.Context, db governance.Store, role string) error {
	g, err := taskGate(db, time.Second)
	if err != nil {
		return err
	}
	task, err := g.NewTask(ctx, governance.TaskOptions{ID: os.Getenv("TASK"), Fingerprint: "fp"})
	if err != nil {
		return err
	}
	tool := func(ctx context.Context, c governance.Call) ([]byte, error) {
		fmt.Printf("ran %s %s\n", c.Tool, governance.IdempotencyKey(ctx))
		if c.Tool == "pay" {
			select {} // killed here, mid-call
		}
		return []byte(`"ok"`), nil
	}
	if _, err := task.Run().Do(ctx, call("read", `{"q":1}`), tool); err != nil {
		return err
	}
	second := call("approve_send", `{"to":"bob"}`)
	if role == "midcall" {
		second = call("pay", `{"amount":5}`)
	}
	_, err = task.Run().Do(ctx, second, tool)
	if !errors.Is(err, governance.ErrPaused) {
		return fmt.Errorf("want a pause, got %v", err)
	}
	_ = task.End(ctx, 0, "")
	fmt.Println("paused")
	select {} // killed here, paused
}

// hangingStore runs each Update's function and then hangs inside the transaction, before it commits.
type hangingStore struct{ governance.Store }

func (h hangingStore) Update(ctx context.Context, fn func(governance.Tx) error) error {
	return h.Store.Update(ctx, func(tx governance.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		fmt.Println("inside")
		select {} // killed here, mid-decision
	})
}

func decideAndHang(ctx context.Context, db governance.Store) error {
	g, err := taskGate(hangingStore{db}, time.Second)
	if err != nil {
		return err
	}
	return g.Decide(ctx, os.Getenv("TASK"), 2, governance.TaskDecision{Allow: false, DecidedBy: "approver:doomed"})
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		ch <- strings.TrimSpace(l)
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("the replica said nothing for 60 s")
		return ""
	}
}

func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// TestFleetEightReplicasOneBudget: 8 processes make 1,600 governed calls against one budget of 1,000 in one
// store: exactly 1,000 run, 600 are refused, and the one audit chain they share holds every call, intact.
func TestFleetEightReplicasOneBudget(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			u := url(t)
			const replicas, each = 8, 200
			var wg sync.WaitGroup
			var mu sync.Mutex
			ran, denied := 0, 0
			start := time.Now()
			for i := range replicas {
				cmd, out := child(t, "fleet", "STORE_URL="+u, "CALLS="+strconv.Itoa(each), "REPLICA="+strconv.Itoa(i))
				wg.Go(func() {
					l, _ := out.ReadString('\n')
					var r, d int
					if _, err := fmt.Sscanf(l, "ran %d denied %d", &r, &d); err != nil {
						t.Errorf("replica %d said %q", i, l)
					}
					_, _ = io.Copy(io.Discard, out)
					if err := cmd.Wait(); err != nil {
						t.Errorf("replica %d: %v", i, err)
					}
					mu.Lock()
					ran, denied = ran+r, denied+d
					mu.Unlock()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			db, err := store.Open(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rep, err := governance.VerifyStoreChain(context.Background(), db, "fleet", fleetKey)
			if err != nil {
				t.Fatalf("the fleet's audit chain: %v", err)
			}
			recs, ok, den := 0, 0, 0
			for from := int64(1); ; {
				page, err := governance.StoreChainRecords(context.Background(), db, "fleet", from, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page {
					recs++
					switch r.Outcome {
					case governance.StatusOK:
						ok++
					case governance.StatusDenied:
						den++
					}
				}
				if len(page) < governance.MaxStoreScan {
					break
				}
				from += int64(len(page))
			}
			t.Logf("%s: %d replicas, %d calls: %d ran, %d refused, %d audit records (%d ok, %d denied) in %v",
				name, replicas, replicas*each, ran, denied, rep.Records, ok, den, elapsed.Round(time.Millisecond))
			if ran != 1000 || denied != replicas*each-1000 {
				t.Fatalf("%d calls ran and %d were refused against a budget of 1000; want 1000 and %d", ran, denied, replicas*each-1000)
			}
			if ok != 1000 || den != replicas*each-1000 || recs != 2*1000+den {
				t.Fatalf("audit chain: %d ok, %d denied, %d records; want every call accounted for", ok, den, recs)
			}
		})
	}
}

// TestKilledReplicas: a replica killed with SIGKILL while its task is paused, while a tool runs, and while it
// records a decision; each time another process resumes with nothing lost and nothing run twice.
func TestKilledReplicas(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := url(t)
			db, err := store.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			g, err := taskGate(db, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			resume := func(id string) *governance.Task {
				t.Helper()
				deadline := time.Now().Add(15 * time.Second)
				for {
					tk, err := g.ResumeTask(ctx, id, governance.TaskOptions{Fingerprint: "fp"})
					if err == nil {
						return tk
					}
					if !errors.Is(err, governance.ErrTaskBusy) || time.Now().After(deadline) {
						t.Fatalf("ResumeTask(%s): %v", id, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			type ran struct{ tool, key string }
			var mine []ran
			tool := func(ctx context.Context, c governance.Call) ([]byte, error) {
				mine = append(mine, ran{c.Tool, governance.IdempotencyKey(ctx)})
				return []byte(`"ok"`), nil
			}

			t.Run("paused", func(t *testing.T) {
				cmd, out := child(t, "pause", "STORE_URL="+u, "TASK=k-paused")
				if l := readLine(t, out); l != "ran read k-paused/1" {
					t.Fatalf("replica: %q", l)
				}
				if l := readLine(t, out); l != "paused" {
					t.Fatalf("replica: %q", l)
				}
				kill9(t, cmd)
				if err := g.Decide(ctx, "k-paused", 2, governance.TaskDecision{Allow: true}); err != nil {
					t.Fatal(err)
				}
				mine = nil
				tk := resume("k-paused")
				for _, c := range []governance.Call{call("read", `{"q":1}`), call("approve_send", `{"to":"bob"}`)} {
					if _, err := tk.Run().Do(ctx, c, tool); err != nil {
						t.Fatal(err)
					}
				}
				_ = tk.End(ctx, 0, "")
				if len(mine) != 1 || mine[0] != (ran{"approve_send", "k-paused/2"}) {
					t.Fatalf("after the kill, this process ran %v; want only the approved call", mine)
				}
				if _, err := g.VerifyTask(ctx, "k-paused"); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("mid-call", func(t *testing.T) {
				cmd, out := child(t, "midcall", "STORE_URL="+u, "TASK=k-call")
				readLine(t, out) // ran read
				if l := readLine(t, out); l != "ran pay k-call/2" {
					t.Fatalf("replica: %q", l)
				}
				kill9(t, cmd)
				// Its lease expires; the call it was running has an unknown outcome and waits for a decision.
				var paused *governance.PausedError
				deadline := time.Now().Add(15 * time.Second)
				for {
					_, err = g.ResumeTask(ctx, "k-call", governance.TaskOptions{Fingerprint: "fp"})
					if !errors.Is(err, governance.ErrTaskBusy) || time.Now().After(deadline) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if !errors.As(err, &paused) || !paused.Pending.OutcomeUnknown || paused.Pending.Seq != 2 {
					t.Fatalf("ResumeTask after a kill mid-call = %v; want a pause with the outcome unknown", err)
				}
				if err := g.Decide(ctx, "k-call", 2, governance.TaskDecision{Allow: true, Reason: "checked: not paid"}); err != nil {
					t.Fatal(err)
				}
				mine = nil
				tk := resume("k-call")
				for _, c := range []governance.Call{call("read", `{"q":1}`), call("pay", `{"amount":5}`)} {
					if _, err := tk.Run().Do(ctx, c, tool); err != nil {
						t.Fatal(err)
					}
				}
				_ = tk.End(ctx, 0, "")
				if len(mine) != 1 || mine[0] != (ran{"pay", "k-call/2"}) {
					t.Fatalf("after the kill, this process ran %v; want only the decided retry, with the same idempotency key", mine)
				}
				if _, err := g.VerifyTask(ctx, "k-call"); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("mid-decision", func(t *testing.T) {
				task, err := g.NewTask(ctx, governance.TaskOptions{ID: "k-decide", Fingerprint: "fp"})
				if err != nil {
					t.Fatal(err)
				}
				_, _ = task.Run().Do(ctx, call("read", `{"q":1}`), tool)
				if _, err := task.Run().Do(ctx, call("approve_send", `{"to":"bob"}`), tool); !errors.Is(err, governance.ErrPaused) {
					t.Fatal(err)
				}
				_ = task.End(ctx, 0, "")
				cmd, out := child(t, "middecide", "STORE_URL="+u, "TASK=k-decide")
				if l := readLine(t, out); l != "inside" {
					t.Fatalf("replica: %q", l)
				}
				kill9(t, cmd)
				// The decision it was recording is not there: the call still waits, and one decision is taken.
				deadline := time.Now().Add(20 * time.Second)
				for {
					err = g.Decide(ctx, "k-decide", 2, governance.TaskDecision{Allow: true, DecidedBy: "approver:survivor"})
					if err == nil || errors.Is(err, governance.ErrAlreadyDecided) || time.Now().After(deadline) {
						break
					}
					time.Sleep(100 * time.Millisecond) // the killed transaction's lock is being released
				}
				if err != nil {
					t.Fatalf("Decide after a replica died deciding: %v", err)
				}
				mine = nil
				tk := resume("k-decide")
				for _, c := range []governance.Call{call("read", `{"q":1}`), call("approve_send", `{"to":"bob"}`)} {
					if _, err := tk.Run().Do(ctx, c, tool); err != nil {
						t.Fatal(err)
					}
				}
				_ = tk.End(ctx, 0, "")
				if len(mine) != 1 || mine[0].tool != "approve_send" {
					t.Fatalf("after the kill, this process ran %v; want only the approved call", mine)
				}
				recs, _ := g.TaskRecords(ctx, "k-decide", 1, 0)
				for _, r := range recs {
					if r.DecidedBy == "approver:doomed" {
						t.Fatal("the killed replica's decision is in the chain")
					}
				}
				if _, err := g.VerifyTask(ctx, "k-decide"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
