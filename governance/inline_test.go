package governance_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/handoff"
)

// inlineRun is a run of an allow-all gate with an in-memory audit and the given ToolGrace.
func inlineRun(t *testing.T, id string, grace time.Duration) (*governance.MemoryAuditor, *governance.Run) {
	aud := &governance.MemoryAuditor{}
	g := mustGate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud, ToolGrace: grace,
		Limits: governance.Limits{MaxToolCalls: 100}})
	return aud, g.NewRun(id)
}

// For a caller that abandons its own goroutine at the deadline (the sandbox, through handoff.WithCallerAbandons),
// the gate runs the tool on the calling goroutine, with no handoff. Its bound still holds where it can: a tool
// that ignores its context is recorded "abandoned" ToolGrace after the end while it is still running, its
// budget is settled, the caller is told, and its return adds a "late" record behind it; Do then returns the
// abandoned outcome to nobody in particular.
func TestInlineToolRunsOnTheCallerAndIsAbandonedOnTime(t *testing.T) {
	grace := 30 * time.Millisecond
	aud, run := inlineRun(t, "inline", grace)
	var told atomic.Int32
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := handoff.WithCallerAbandons(base, func() { told.Add(1) })

	caller := goid()
	var ranOn uint64
	call := governance.Call{Tool: "t", Effect: governance.ReadOnly}
	for range 5 {
		out, err := run.Do(ctx, call, func(context.Context, governance.Call) ([]byte, error) { ranOn = goid(); return []byte(`1`), nil })
		if err != nil || string(out.Result) != "1" || out.Status != governance.StatusOK {
			t.Fatalf("inline call: %v %+v", err, out)
		}
	}
	if ranOn != caller {
		t.Fatalf("the tool ran on goroutine %d, want the caller's %d", ranOn, caller)
	}

	// A tool that ignores its context, on the caller's goroutine (here a goroutine of the test that it abandons).
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer hcancel()
	release := make(chan struct{})
	type result struct {
		out governance.Outcome
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := run.Do(hctx, call, func(context.Context, governance.Call) ([]byte, error) { <-release; return []byte(`"late"`), nil })
		done <- result{out, err}
	}()
	seqRecords := func(seq int64) []governance.Status {
		var st []governance.Status
		for _, rec := range aud.Records() {
			if rec.RunID == "inline" && rec.Seq == seq {
				st = append(st, rec.Outcome)
			}
		}
		return st
	}
	// The hung call is the 6th of the run.
	for len(seqRecords(6)) < 2 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no abandoned record while the tool hangs: %v", seqRecords(6))
		}
		time.Sleep(time.Millisecond)
	}
	// Measured from the context's own deadline: the test's goroutine may be descheduled between making the
	// context and reading start.
	if dl, _ := hctx.Deadline(); time.Now().Before(dl.Add(grace)) {
		t.Errorf("abandoned %v before the deadline plus ToolGrace", dl.Add(grace).Sub(time.Now()))
	}
	if got := seqRecords(6); got[0] != governance.StatusAllowed || got[1] != governance.StatusAbandoned {
		t.Fatalf("records while the tool hangs: %v", got)
	}
	for told.Load() != 1 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the caller was not told of the abandonment")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("Do returned while its tool still ran: %+v", r)
	default:
	}
	close(release)
	r := <-done
	if !errors.Is(r.err, governance.ErrToolAbandoned) || r.out.Status != governance.StatusAbandoned || r.out.Result != nil {
		t.Fatalf("hung inline call: %v %+v", r.err, r.out)
	}
	if got := seqRecords(6); len(got) != 3 || got[2] != governance.StatusLate {
		t.Fatalf("records of the hung call: %v, want allowed, abandoned, late", got)
	}
	if u := run.Usage(); u.Calls != 6 {
		t.Fatalf("usage %+v", u)
	}
}

// The job of an inline call is reused by the run's next inline call only when no timer can reach it. A tool that
// returns after its context ended but within its grace leaves a timer armed on its job; the next call, under a new
// context and still running when that timer fires, must not be the one it abandons.
func TestInlineJobNotReusedUnderATimer(t *testing.T) {
	grace := 80 * time.Millisecond
	aud, run := inlineRun(t, "spare", grace)
	call := governance.Call{Tool: "t", Effect: governance.ReadOnly}

	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	out, err := run.Do(handoff.WithCallerAbandons(ctx1, func() {}), call, func(context.Context, governance.Call) ([]byte, error) {
		cancel1()                         // the context ends while the tool runs: its job gets a timer (grace 80 ms)
		time.Sleep(20 * time.Millisecond) // and the tool returns within the grace
		return []byte(`1`), nil
	})
	if err != nil || out.Status != governance.StatusOK {
		t.Fatalf("first call: %v %+v", err, out)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	out, err = run.Do(handoff.WithCallerAbandons(ctx2, func() {}), call, func(context.Context, governance.Call) ([]byte, error) {
		time.Sleep(3 * grace) // running when the first call's timer fires
		return []byte(`2`), nil
	})
	if err != nil || out.Status != governance.StatusOK || string(out.Result) != "2" {
		t.Fatalf("second call: %v %+v", err, out)
	}
	for _, rec := range aud.Records() {
		if rec.Outcome == governance.StatusAbandoned || rec.Outcome == governance.StatusLate {
			t.Errorf("record %d %s: a call that returned in time was abandoned", rec.Seq, rec.Outcome)
		}
	}
	if n := len(aud.Records()); n != 4 {
		t.Errorf("%d records, want allowed and ok for each call", n)
	}
}

// Several tools may run inline under one context at once (a caller with its own goroutines). Each is watched:
// one that returns is no longer abandoned, and when the context ends every one still running gets its
// "abandoned" record after the grace, and its "late" record once it returns. A later context gets a watch of
// its own.
func TestInlineConcurrentCallsOfOneContext(t *testing.T) {
	grace := 20 * time.Millisecond
	aud, run := inlineRun(t, "concurrent", grace)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	var told atomic.Int32
	ctx := handoff.WithCallerAbandons(base, func() { told.Add(1) })
	call := governance.Call{Tool: "t", Effect: governance.ReadOnly}

	const hung = 4
	release := make(chan struct{})
	started := make(chan struct{})
	results := make(chan error, hung+2)
	do := func(wait chan struct{}) {
		_, err := run.Do(ctx, call, func(context.Context, governance.Call) ([]byte, error) {
			started <- struct{}{}
			<-wait
			return []byte(`1`), nil
		})
		results <- err
	}
	// Two calls return while others still run, one registered first and one later; then another starts.
	quick1, quick2 := make(chan struct{}), make(chan struct{})
	go do(quick1)
	<-started
	for range hung - 1 {
		go do(release)
		<-started
	}
	go do(quick2)
	<-started
	for _, q := range []chan struct{}{quick2, quick1} {
		close(q)
		if err := <-results; err != nil {
			t.Fatalf("a call that returned in time: %v", err)
		}
	}
	go do(release)
	<-started
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	count := func(s governance.Status) int {
		n := 0
		for _, rec := range aud.Records() {
			if rec.Outcome == s {
				n++
			}
		}
		return n
	}
	for count(governance.StatusAbandoned) < hung || told.Load() < hung {
		if time.Now().After(deadline) {
			t.Fatalf("%d abandoned records, caller told %d times; want %d each", count(governance.StatusAbandoned), told.Load(), hung)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range hung {
		if err := <-results; !errors.Is(err, governance.ErrToolAbandoned) {
			t.Fatalf("a hung call returned %v, want ErrToolAbandoned", err)
		}
	}
	if n, l, ok := count(governance.StatusAbandoned), count(governance.StatusLate), count(governance.StatusOK); n != hung || l != hung || ok != 2 {
		t.Fatalf("records: %d abandoned, %d late, %d ok; want %d, %d, 2", n, l, ok, hung, hung)
	}

	// A new context: its call runs and is not abandoned by the old context's end.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	out, err := run.Do(handoff.WithCallerAbandons(ctx2, func() {}), call, func(context.Context, governance.Call) ([]byte, error) {
		time.Sleep(2 * grace)
		return []byte(`2`), nil
	})
	if err != nil || string(out.Result) != "2" {
		t.Fatalf("call under a new context: %v %+v", err, out)
	}
}
