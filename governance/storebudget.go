package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// SharedLimits are the caps of a [StoreBudget]: one budget that every run, process and replica using the same
// store and scope spends together. Zero means no cap of that kind; a negative value refuses every call that
// would count against it.
type SharedLimits struct {
	// MaxCalls caps the calls that reach the budget (those the run's own limits and the policy let through).
	MaxCalls int64
	// MaxCostUnits caps the sum of Call.Cost.
	MaxCostUnits int64
	// MaxIrreversible caps the irreversible calls.
	MaxIrreversible int64
}

// SharedUsage is what a [StoreBudget]'s scope has spent.
type SharedUsage struct {
	Calls        int64 `json:"calls"`
	CostUnits    int64 `json:"cost_units"`
	Irreversible int64 `json:"irreversible"`
}

// StoreBudget is a [Budget] kept in a [Store]: every reservation is one store transaction that reads what the
// scope has spent, refuses the call if it would go over, and books it otherwise. N replicas spending one scope
// therefore never overspend, however their calls interleave. A call refused later (by the approver, or
// because its audit record could not be written) is refunded.
//
// Use it from GateConfig.NewBudget, returning the same StoreBudget for every run that shares the budget:
//
//	budget, err := governance.NewStoreBudget(store, "tenant-42", governance.SharedLimits{MaxCalls: 1000})
//	gate, err := governance.NewGate(governance.GateConfig{..., NewBudget: func(string) governance.Budget { return budget }})
//
// A store that cannot be reached refuses the call (ErrBudgetExceeded wrapping ErrStore): the tool does not run.
type StoreBudget struct {
	store  Store
	scope  string
	limits SharedLimits
}

// NewStoreBudget returns the budget of scope in store with limits.
func NewStoreBudget(store Store, scope string, limits SharedLimits) (*StoreBudget, error) {
	if store == nil {
		return nil, errors.New("governance: NewStoreBudget: nil store")
	}
	if err := checkChainName(scope); err != nil {
		return nil, fmt.Errorf("governance: NewStoreBudget: %w", err)
	}
	return &StoreBudget{store: store, scope: scope, limits: limits}, nil
}

func (b *StoreBudget) key() string { return "b/" + b.scope }

// Reserve implements Budget.
func (b *StoreBudget) Reserve(ctx context.Context, call Call) (func(CallReport), error) {
	var refused string
	err := b.store.Update(ctx, func(tx Tx) error {
		refused = ""
		u, err := b.read(tx)
		if err != nil {
			return err
		}
		if refused = b.limits.check(u, call); refused != "" {
			return nil
		}
		u.Calls++
		u.CostUnits += call.Cost
		if call.Effect.Resolve() == Irreversible {
			u.Irreversible++
		}
		return b.write(tx, u)
	})
	if err != nil {
		return nil, fmt.Errorf("shared budget %q: %w", b.scope, err)
	}
	if refused != "" {
		return nil, errors.New("shared budget " + strconv.Quote(b.scope) + ": " + refused)
	}
	return func(r CallReport) {
		if r.Ran {
			return
		}
		// Refund a call that did not run. A refund that fails leaves the budget spent: it errs on the side of
		// spending less.
		_ = b.store.Update(context.WithoutCancel(ctx), func(tx Tx) error {
			u, err := b.read(tx)
			if err != nil {
				return err
			}
			u.Calls = max(u.Calls-1, 0)
			u.CostUnits = max(u.CostUnits-call.Cost, 0)
			if call.Effect.Resolve() == Irreversible {
				u.Irreversible = max(u.Irreversible-1, 0)
			}
			return b.write(tx, u)
		})
	}, nil
}

// Usage returns what the scope has spent.
func (b *StoreBudget) Usage(ctx context.Context) (SharedUsage, error) {
	var u SharedUsage
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		u, err = b.read(tx)
		return err
	})
	return u, err
}

func (b *StoreBudget) read(tx Tx) (SharedUsage, error) {
	var u SharedUsage
	v, ok, err := tx.Get(b.key())
	if err != nil || !ok {
		return u, err
	}
	if err := json.Unmarshal(v, &u); err != nil {
		return u, fmt.Errorf("%w: corrupt budget %q: %w", ErrStore, b.scope, err)
	}
	return u, nil
}

func (b *StoreBudget) write(tx Tx, u SharedUsage) error {
	v, _ := json.Marshal(u)
	return tx.Put(b.key(), v)
}

// check returns why call does not fit in what u leaves of l, or "".
func (l SharedLimits) check(u SharedUsage, call Call) string {
	switch {
	case l.MaxCalls != 0 && (l.MaxCalls < 0 || u.Calls >= l.MaxCalls):
		return fmt.Sprintf("max calls (%d) reached", max(l.MaxCalls, 0))
	case call.Cost > 0 && l.MaxCostUnits != 0 && (l.MaxCostUnits < 0 || call.Cost > l.MaxCostUnits-u.CostUnits):
		return fmt.Sprintf("cost units: %d used + %d would exceed max %d", u.CostUnits, call.Cost, max(l.MaxCostUnits, 0))
	case call.Effect.Resolve() == Irreversible && l.MaxIrreversible != 0 && (l.MaxIrreversible < 0 || u.Irreversible >= l.MaxIrreversible):
		return fmt.Sprintf("max irreversible calls (%d) reached", max(l.MaxIrreversible, 0))
	}
	return ""
}
