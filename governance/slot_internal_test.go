package governance

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/internal/handoff"
)

// The one interleaving of the inline slot that a test cannot reach by timing alone: the call's context ends,
// and its end empties the watch, after the call saw the watch alive but before it took the slot. The call then
// puts its job into a slot nobody will look at again, and must see ended and register the job anew (under a new
// watch, which fires at once), so that the tool, which ignores its context, is still abandoned. With
// endTakesIt false the end may come at any moment around the call.
func TestInlineSlotContextEndsInTheWindow(t *testing.T) {
	for _, endTakesIt := range []bool{true, false} {
		aud := &MemoryAuditor{}
		g, err := NewGate(GateConfig{Policy: AllowAllPolicy{}, Auditor: aud, ToolGrace: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		run := g.NewRun("window")
		base, cancel := context.WithCancel(context.Background())
		var told atomic.Bool
		ctx := handoff.WithCallerAbandons(base, func() { told.Store(true) })
		ok := func(context.Context, Call) ([]byte, error) { return []byte(`1`), nil }
		for range 2 { // the watch and its slot exist
			if _, err := run.Do(ctx, Call{Tool: "q", Effect: ReadOnly}, ok); err != nil {
				t.Fatal(err)
			}
		}
		testHookBeforeSlot = func() {
			testHookBeforeSlot = nil
			cancel()
			if !endTakesIt {
				return
			}
			// Wait for the context's end to have emptied the watch.
			for deadline := time.Now().Add(5 * time.Second); ; {
				run.mu.Lock()
				n := len(run.watches)
				run.mu.Unlock()
				if n == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Error("the context's end never ran")
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		release := make(chan struct{})
		go func() {
			_, _ = run.Do(ctx, Call{Tool: "hang", Effect: ReadOnly}, func(context.Context, Call) ([]byte, error) { <-release; return []byte(`1`), nil })
		}()
		deadline := time.Now().Add(5 * time.Second)
		for !told.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("endTakesIt=%v: the hanging tool was never abandoned", endTakesIt)
			}
			time.Sleep(100 * time.Microsecond)
		}
		close(release)
		testHookBeforeSlot = nil
	}
}
