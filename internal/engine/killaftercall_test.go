package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/enginetest"
)

// killingHost answers like EchoHost and, once kill is set, asks the engine to end the run after the call.
type killingHost struct {
	enginetest.EchoHost
	kill bool
}

func (h *killingHost) KillAfterCall() bool { return h.kill }

// TestKillAfterCall: a host call after which the host asks to end the run (the run's end cut it short) ends the
// run with ErrKilled, its response never reaches guest memory, and the instance takes no further call and is
// never recycled (mutation testing removed each of these and no test noticed).
func TestKillAfterCall(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.NewWazero(ctx, engine.WazeroConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	mod, err := eng.Compile(ctx, enginetest.ABIModule())
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	host := &killingHost{}
	inst, err := mod.Instantiate(ctx, engine.InstanceConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	req := []byte("Techo\n{}")
	inst.Write(0, req)
	n := uint64(len(req))
	if r, err := inst.Call(ctx, "into", 0, n, 1000, 64); err != nil || int32(r[0]) != int32(n) {
		t.Fatalf("a call the host lets finish: %v %v", r, err)
	}
	inst.Write(2000, []byte("untouched"))
	host.kill = true
	if _, err := inst.Call(ctx, "into", 0, n, 2000, 64); !errors.Is(err, engine.ErrKilled) {
		t.Fatalf("a call after which the host ends the run: %v, want ErrKilled", err)
	}
	if b, _ := inst.Read(2000, 9); string(b) != "untouched" {
		t.Errorf("the killed call's response reached guest memory: %q", b)
	}
	host.kill = false
	calls := host.Calls
	if _, err := inst.Call(ctx, "into", 0, n, 1000, 64); err == nil || host.Calls != calls {
		t.Errorf("the killed instance took another call (err %v, host calls %d → %d)", err, calls, host.Calls)
	}
	rec, ok := inst.(engine.Recycler)
	if !ok {
		t.Fatal("the wazero instance is not a Recycler")
	}
	if err := rec.Recycle(); err == nil || !strings.Contains(err.Error(), "did not return normally") {
		t.Errorf("Recycle after a killed call: %v, want a refusal naming the failed call", err)
	}
}
