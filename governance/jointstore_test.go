package governance_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

// panickyStore is a MemoryStore whose transactions panic on their first Put.
type panickyStore struct{ *governance.MemoryStore }

type panickyTx struct{ governance.Tx }

func (panickyTx) Put(string, []byte) error { panic("boom") }

func (p panickyStore) Update(ctx context.Context, fn func(governance.Tx) error) error {
	return p.MemoryStore.Update(ctx, func(tx governance.Tx) error { return fn(panickyTx{tx}) })
}

// A store that panics while a call books its budget and appends its "allowed" record in one transaction: the
// call is refused, as when a Budget panics, and the gate does not panic.
func TestJointStorePanicIsARefusal(t *testing.T) {
	s := panickyStore{new(governance.MemoryStore)}
	budget, err := governance.NewStoreBudget(s, "b", governance.SharedLimits{MaxCalls: 10})
	if err != nil {
		t.Fatal(err)
	}
	aud, err := governance.NewStoreAuditor(s, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud,
		NewBudget: func(string) governance.Budget { return budget }})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err = g.NewRun("").Do(context.Background(), governance.Call{Tool: "t", Args: json.RawMessage(`{}`)},
		func(context.Context, governance.Call) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, governance.ErrBudgetExceeded) || !strings.Contains(err.Error(), "budget panicked: boom") || ran {
		t.Fatalf("Do with a store that panics = %v (tool ran: %v); want ErrBudgetExceeded, budget panicked", err, ran)
	}
}
