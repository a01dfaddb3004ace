package hostfuncs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// Abandon lists the call still in progress as abandoned, with the gate's sequence number once the tool has
// started, and the bridge records nothing after it (the abandoned call's late return included), so the calls
// a caller reported when it gave up are final.
func TestBridgeAbandon(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	reg := hostfuncs.NewRegistry().MustRegister(
		hostfuncs.Tool{Name: "quick", Effect: governance.ReadOnly, Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`1`), nil
		}},
		hostfuncs.Tool{Name: "slow", Effect: governance.ReadOnly, Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`), Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			close(started)
			<-release
			return json.RawMessage(`2`), nil
		}})
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{}})
	if err != nil {
		t.Fatal(err)
	}
	br := hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)
	ctx := context.Background()
	if _, isErr := br.Call(ctx, "quick", json.RawMessage(`{}`)); isErr {
		t.Fatal("quick call failed")
	}
	if got := br.Abandon(); len(got) != 1 || got[0].Status != "ok" {
		t.Fatalf("Abandon with nothing in progress: %+v", got)
	}

	br = hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)
	br.Call(ctx, "quick", json.RawMessage(`{}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		br.Call(ctx, "slow", json.RawMessage(`{"a":1}`))
	}()
	select {
	case <-started:
	case <-done:
		t.Fatalf("the slow call returned without running its tool: %+v", br.Calls())
	}
	time.Sleep(5 * time.Millisecond)
	calls := br.Abandon()
	if len(calls) != 2 || calls[1].Tool != "slow" || calls[1].Status != "abandoned" || calls[1].Seq != 2 ||
		string(calls[1].Args) != `{"a":1}` || calls[1].Duration < 5*time.Millisecond || calls[1].ErrorType != "ToolError" {
		t.Fatalf("Abandon with a call in progress: %+v", calls)
	}
	close(release)
	<-done
	if after := br.Calls(); len(after) != 2 || after[1].Status != "abandoned" {
		t.Fatalf("calls after the abandoned call returned: %+v", after)
	}
}

// CallBytes is Call for a name the guest sent as bytes: the same answers and records, and a name that is not a
// tool's is copied, so that the records do not change with the caller's buffer.
func TestBridgeCallBytes(t *testing.T) {
	reg := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }})
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	byString := hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)
	byBytes := hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)
	for _, name := range []string{"echo", "nope", ""} {
		buf := []byte(name)
		want, wantErr := byString.Call(ctx, name, json.RawMessage(`{}`))
		got, gotErr := byBytes.CallBytes(ctx, buf, json.RawMessage(`{}`))
		if string(got) != string(want) || gotErr != wantErr {
			t.Errorf("%q: CallBytes answered %s (error %v), Call %s (error %v)", name, got, gotErr, want, wantErr)
		}
		for i := range buf {
			buf[i] = 'X'
		}
	}
	want, got := byString.Calls(), byBytes.Calls()
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d and %d calls recorded", len(got), len(want))
	}
	for i := range got {
		if got[i].Tool != want[i].Tool || got[i].Status != want[i].Status || got[i].ErrorType != want[i].ErrorType {
			t.Errorf("call %d: CallBytes recorded %+v, Call %+v", i, got[i], want[i])
		}
	}
}
