package governance_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/goroutineid"
)

// goid returns the current goroutine's id.
var goid = goroutineid.ID

// The tools of a run's calls run on one reused goroutine (not the caller's, so that they can be abandoned);
// a tool that hangs past its call's deadline is abandoned, and the next calls of the same run and of other
// runs neither wait for it nor run on its goroutine nor see its result.
func TestToolWorkerReuseAndAHungTool(t *testing.T) {
	aud := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, ToolGrace: 20 * time.Millisecond,
		Limits: governance.Limits{MaxToolCalls: 100}})
	run := g.NewRun("r")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caller := goid()
	ids := map[uint64]bool{}
	var mu sync.Mutex
	idTool := func(context.Context, governance.Call) ([]byte, error) {
		mu.Lock()
		ids[goid()] = true
		mu.Unlock()
		return []byte(`1`), nil
	}
	call := governance.Call{Tool: "t", Effect: governance.ReadOnly}
	for range 20 {
		if _, err := run.Do(ctx, call, idTool); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != 1 || ids[caller] {
		t.Fatalf("20 calls ran their tools on goroutines %v (caller %d), want one worker", ids, caller)
	}
	var worker uint64
	for id := range ids {
		worker = id
	}

	// A tool that ignores its context, on the same run's worker.
	release := make(chan struct{})
	hungOn := make(chan uint64, 1)
	hung := func(context.Context, governance.Call) ([]byte, error) {
		hungOn <- goid()
		<-release
		return []byte(`"late"`), nil
	}
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Millisecond)
	out, err := run.Do(hctx, call, hung)
	hcancel()
	if !errors.Is(err, governance.ErrToolAbandoned) || out.Status != governance.StatusAbandoned {
		t.Fatalf("hung tool: %v %+v", err, out.Status)
	}
	if got := <-hungOn; got != worker {
		t.Fatalf("the hung tool ran on goroutine %d, want the run's worker %d", got, worker)
	}

	// The next calls, of this run and of another, run now, elsewhere, and get their own results.
	clear(ids)
	other := g.NewRun("other")
	for _, r := range []*governance.Run{run, other, run} {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		out, err := r.Do(cctx, call, idTool)
		ccancel()
		if err != nil || string(out.Result) != "1" || time.Since(start) > 2*time.Second {
			t.Fatalf("call after the hung one: %v %q after %v", err, out.Result, time.Since(start))
		}
	}
	if ids[worker] {
		t.Fatal("a later call ran on the abandoned worker")
	}

	// The hung tool returns: a "late" record after its "abandoned" one, and nothing else.
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var statuses []governance.Status
		for _, rec := range aud.Records() {
			if rec.Seq == out.Call.Seq && rec.RunID == "r" {
				statuses = append(statuses, rec.Outcome)
			}
		}
		if len(statuses) == 3 {
			if statuses[0] != governance.StatusAllowed || statuses[1] != governance.StatusAbandoned || statuses[2] != governance.StatusLate {
				t.Fatalf("records of the hung call: %v", statuses)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records of the hung call: %v, want allowed, abandoned, late", statuses)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Many goroutines calling through the runs of one gate, some with tools that are abandoned: every call gets its
// own tool's result (run with -race).
func TestToolWorkersUnderConcurrency(t *testing.T) {
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, ToolGrace: time.Millisecond,
		Limits: governance.Limits{MaxToolCalls: 10_000, MaxDeniedCalls: 10_000}})
	runs := []*governance.Run{g.NewRun("a"), g.NewRun("b")}
	release := make(chan struct{})
	defer close(release)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			r := runs[i%2]
			for n := range 200 {
				want := []byte(strconv.Itoa(i*1000 + n))
				if n%40 == 39 { // a tool that hangs until the test ends
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					_, err := r.Do(ctx, governance.Call{Tool: "t", Effect: governance.ReadOnly},
						func(context.Context, governance.Call) ([]byte, error) { <-release; return want, nil })
					if !errors.Is(err, context.DeadlineExceeded) { // abandoned, or refused when the deadline came first
						t.Errorf("hung call: %v", err)
					}
					cancel()
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				out, err := r.Do(ctx, governance.Call{Tool: "t", Effect: governance.ReadOnly},
					func(context.Context, governance.Call) ([]byte, error) { return want, nil })
				cancel()
				if err != nil || !bytes.Equal(out.Result, want) {
					t.Errorf("call %d/%d: %v %q, want %q", i, n, err, out.Result, want)
				}
			}
		})
	}
	wg.Wait()
}
