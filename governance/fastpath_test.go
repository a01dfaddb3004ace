package governance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/handoff"
)

// The gate leaves the digest of a small result to its MemoryAuditor, which copies the result when the call ends
// and hashes it when the record is read: the digest must be of the result as the tool returned it, even if the
// tool reuses its buffer afterwards, and every reader must see it.
func TestMemoryAuditorDigestsTheResultAsReturned(t *testing.T) {
	aud := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud})
	run := g.NewRun("digest")
	buf := []byte(`{"n":0}`)
	var want []string
	for i := range 5 {
		copy(buf, fmt.Sprintf(`{"n":%d}`, i))
		sum := sha256.Sum256(buf)
		want = append(want, hex.EncodeToString(sum[:]))
		if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return buf, nil }); err != nil {
			t.Fatal(err)
		}
	}
	copy(buf, `{"n":9}`) // the tool's buffer changes after its last call
	big := make([]byte, 4<<10)
	for i := range big {
		big[i] = 'a'
	}
	big[0], big[len(big)-1] = '"', '"'
	sum := sha256.Sum256(big)
	want = append(want, hex.EncodeToString(sum[:])) // larger than the auditor is left to hash: hashed at once
	if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Effect: governance.ReadOnly},
		func(context.Context, governance.Call) ([]byte, error) { return big, nil }); err != nil {
		t.Fatal(err)
	}
	check := func(name string, recs []governance.Record) {
		t.Helper()
		var got []string
		for _, r := range recs {
			if r.Outcome == governance.StatusOK {
				got = append(got, r.ResultSHA256)
				if r.ResultSize == 0 {
					t.Errorf("%s: seq %d has no result size", name, r.Seq)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: digests\n got %v\nwant %v", name, got, want)
		}
	}
	check("RunRecords", aud.RunRecords("digest")) // the first reader settles some digests
	check("Records", aud.Records())
	check("Records again", aud.Records())
}

// A MemoryAuditor's MaxBytes counts a result it keeps for its digest, and reading the records (which replaces the
// result by its digest) keeps the accounting right: records are dropped by what they hold, never leaked.
func TestMemoryAuditorBoundsPendingResults(t *testing.T) {
	aud := &governance.MemoryAuditor{MaxBytes: 64 << 10}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, Limits: governance.Limits{MaxToolCalls: 1 << 20}})
	run := g.NewRun("bound")
	res := []byte(`"` + string(make([]byte, 900)) + `"`)
	for i := range res[1 : len(res)-1] {
		res[1+i] = 'x'
	}
	for i := range 2000 {
		if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return res, nil }); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			_ = aud.Records() // settles the digests so far
		}
	}
	// Each outcome record holds ~1 KiB for its result until read, plus 256 for itself; allowed records 256.
	if n := aud.Len(); n < 40 || n > 120 {
		t.Errorf("kept %d records within 64 KiB; want between 40 and 120", n)
	}
	if aud.Dropped() == 0 {
		t.Error("nothing dropped")
	}
	for _, r := range aud.Records() {
		if r.Outcome == governance.StatusOK && len(r.ResultSHA256) != 64 {
			t.Fatalf("record %d without its digest: %+v", r.Seq, r)
		}
	}
}

// Calls within the limits are booked without the run's lock, calls a limit applies to under it: with both at
// once from many goroutines, no limit is ever passed, and the counters add up.
func TestConcurrentLimitsMixedFastAndLocked(t *testing.T) {
	for _, caps := range []bool{false, true} {
		t.Run(fmt.Sprint("caps=", caps), func(t *testing.T) {
			lim := governance.Limits{MaxToolCalls: 1 << 20, MaxCostUnits: 50, MaxIrreversible: 7, MaxDeniedCalls: 1 << 20}
			if caps {
				lim.ToolCaps = map[string]int64{"capped": 13}
			}
			g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{Limit: 100}, Limits: lim})
			run := g.NewRun("mixed")
			calls := []governance.Call{
				{Tool: "free", Effect: governance.ReadOnly},
				{Tool: "costly", Effect: governance.ReadOnly, Cost: 3},
				{Tool: "irrev", Effect: governance.Irreversible},
				{Tool: "capped", Effect: governance.ReadOnly},
			}
			var ran [4]atomic.Int64
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					for range 400 {
						k := rng.IntN(len(calls))
						_, err := run.Do(context.Background(), calls[k], func(context.Context, governance.Call) ([]byte, error) { return []byte(`1`), nil })
						if err == nil {
							ran[k].Add(1)
						}
					}
				}()
			}
			wg.Wait()
			u := run.Usage()
			if got := ran[1].Load() * 3; got > 50 || got != u.CostUnits {
				t.Errorf("cost: ran %d units, usage %d, max 50", got, u.CostUnits)
			}
			if got := ran[2].Load(); got > 7 || got != u.Irreversible {
				t.Errorf("irreversible: ran %d, usage %d, max 7", got, u.Irreversible)
			}
			if caps && ran[3].Load() != 13 {
				t.Errorf("capped tool ran %d times, want exactly its cap 13", ran[3].Load())
			}
			for k, c := range calls {
				if u.PerTool[c.Tool] != ran[k].Load() {
					t.Errorf("PerTool[%s] = %d, ran %d", c.Tool, u.PerTool[c.Tool], ran[k].Load())
				}
			}
			if u.Calls != 8*400 {
				t.Errorf("Calls = %d, want %d", u.Calls, 8*400)
			}
		})
	}
}

// A run refunds what a refused call booked (here: approval denied after the budget check), on the lock-free
// counters too.
func TestRefundOnTheFastPath(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.PolicyFunc(func(context.Context, governance.Call) (governance.Verdict, error) {
		return governance.Verdict{Action: governance.NeedsApproval}, nil
	}), Auditor: &governance.MemoryAuditor{}})
	run := g.NewRun("refund")
	for range 3 {
		if _, err := run.Do(context.Background(), governance.Call{Tool: "t", Effect: governance.Irreversible, Cost: 2},
			func(context.Context, governance.Call) ([]byte, error) { return []byte(`1`), nil }); err == nil {
			t.Fatal("a call needing approval ran without an approver")
		}
	}
	if u := run.Usage(); u.CostUnits != 0 || u.Irreversible != 0 || len(u.PerTool) != 0 || u.Calls != 3 {
		t.Errorf("usage after three refunded calls: %+v", u)
	}
}

// The inline path registers a call in its context's watch without the lock when it can (the watch's slot). A
// context that ends while calls enter and leave the slot must still find every tool that is running: none may
// run past its deadline and grace unrecorded. Each round ends a fresh context at a random moment around the
// start of a call whose tool waits for the context and then hangs until released.
func TestInlineSlotNeverMissesTheContextsEnd(t *testing.T) {
	const grace = 5 * time.Millisecond
	aud := &governance.MemoryAuditor{Limit: 10}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, ToolGrace: grace, Limits: governance.Limits{MaxToolCalls: 1 << 20}})
	run := g.NewRun("slot")
	release := make(chan struct{})
	defer close(release)
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		base, cancel := context.WithCancel(context.Background())
		var told atomic.Bool
		ctx := handoff.WithCallerAbandons(base, func() { told.Store(true) })
		// A few quick calls first, so that the slow call finds the watch (and its slot) ready.
		for range 3 {
			if _, err := run.Do(ctx, governance.Call{Tool: "q", Effect: governance.ReadOnly}, func(context.Context, governance.Call) ([]byte, error) { return []byte(`1`), nil }); err != nil {
				t.Fatal(err)
			}
		}
		delay := time.Duration(rng.IntN(200)) * time.Microsecond
		time.AfterFunc(delay, cancel)
		var started atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = run.Do(ctx, governance.Call{Tool: "hang", Effect: governance.ReadOnly}, func(c context.Context, _ governance.Call) ([]byte, error) {
				started.Store(true)
				<-c.Done()
				<-release
				return []byte(`1`), nil
			})
		}()
		// Either the context ended before the call was decided (it is refused, the tool never starts and Do
		// returns), or the tool started and must be abandoned.
		deadline := time.Now().Add(5 * time.Second)
	wait:
		for !told.Load() {
			select {
			case <-done:
				if started.Load() {
					t.Fatalf("round %d: the hanging tool returned", round)
				}
				break wait
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d (cancel after %v, tool started %v): the hanging tool was never abandoned", round, delay, started.Load())
			}
			time.Sleep(100 * time.Microsecond)
		}
		cancel()
	}
}
