package wasmbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// A durable task pauses at a call that needs approval instead of waiting for it; any process with the same store
// records the decision and resumes the task, which goes on from that call. Here one process does all three with
// an in-memory store; github.com/wasmbox/wasmbox/store opens SQLite and PostgreSQL ones.
func ExampleSandbox_StartTask() {
	ctx := context.Background()
	store := new(governance.MemoryStore) // or store.Open(ctx, "sqlite:tasks.db"), store.Open(ctx, "postgres://...")
	gate, err := governance.NewGate(governance.GateConfig{
		Policy: governance.EffectPolicy{}, Auditor: governance.DiscardAuditor{}, Store: store})
	if err != nil {
		panic(err)
	}
	refund := hostfuncs.Func("refund", "Refund an order.", func(ctx context.Context, a struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + a.Order, nil
	})
	refund.Effect = governance.Irreversible // irreversible calls need approval under EffectPolicy
	sb, err := wasmbox.New(ctx, wasmbox.Config{Gate: gate, Deterministic: true,
		Tools: hostfuncs.NewRegistry().MustRegister(refund)})
	if err != nil {
		panic(err)
	}
	defer sb.Close(ctx)

	res, err := sb.StartTask(ctx, wasmbox.Program{Code: "import tools\nprint('asking')\nprint(tools.refund('A-1'))"},
		wasmbox.TaskOptions{ID: "refund-A-1"})
	if errors.Is(err, wasmbox.ErrPaused) {
		fmt.Printf("%s paused at call %d: %s %s\n", res.TaskID, res.Paused.Seq, res.Paused.Tool, res.Paused.Args)
	}
	// Later, anywhere: a person approves, and the task resumes.
	if err := gate.Decide(ctx, "refund-A-1", res.Paused.Seq, governance.TaskDecision{Allow: true, DecidedBy: "approver:alice"}); err != nil {
		panic(err)
	}
	res, err = sb.ResumeTask(ctx, "refund-A-1", wasmbox.TaskOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	// Output:
	// refund-A-1 paused at call 1: refund {"order":"A-1"}
	// asking
	// refunded A-1
}
