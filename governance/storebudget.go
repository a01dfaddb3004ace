package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
//
// When the gate's Auditor is a [StoreAuditor] of the same store (the same Store value: a wrapper of it, or a
// second store.Open of the same URL, is another store), a call the policy allows outright books its budget and
// appends its "allowed" record in one transaction: neither is written without the other, and the call costs
// one transaction less. (A call that waits for an approval books its budget before it waits, as with any
// Budget.)
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
		var err error
		refused, err = b.book(tx, call)
		return err
	})
	if err != nil {
		return nil, b.storeErr(err)
	}
	if refused != "" {
		return nil, b.refusal(refused)
	}
	return b.settler(ctx, call), nil
}

// book books call against the scope within tx, or returns why it does not fit (booking nothing).
func (b *StoreBudget) book(tx Tx, call Call) (refused string, err error) {
	u, err := b.read(tx)
	if err != nil {
		return "", err
	}
	if refused = b.limits.check(u, call); refused != "" {
		return refused, nil
	}
	u.Calls++
	u.CostUnits += call.Cost
	if call.Effect.Resolve() == Irreversible {
		u.Irreversible++
	}
	return "", b.write(tx, u)
}

func (b *StoreBudget) refusal(refused string) error {
	return errors.New("shared budget " + strconv.Quote(b.scope) + ": " + refused)
}

func (b *StoreBudget) storeErr(err error) error {
	return fmt.Errorf("shared budget %q: %w", b.scope, err)
}

// settler returns the settle function of a booked call: it refunds a call that did not run.
func (b *StoreBudget) settler(ctx context.Context, call Call) func(CallReport) {
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
	}
}

// jointStore is a run's StoreBudget and the gate's StoreAuditor when both are in one store: a call the policy
// allows outright then books its budget and appends its "allowed" record in one transaction, so that neither
// is written without the other, at one transaction less per call.
type jointStore struct {
	budget *StoreBudget
	audit  *StoreAuditor
}

// newJointStore returns the jointStore of b and a, or nil if they are not a StoreBudget and a StoreAuditor of
// the same store.
func newJointStore(b Budget, a Auditor) *jointStore {
	sb, ok := b.(*StoreBudget)
	if !ok {
		return nil
	}
	sa, ok := a.(*StoreAuditor)
	if !ok || !sameStore(sb.store, sa.store) {
		return nil
	}
	return &jointStore{budget: sb, audit: sa}
}

// sameStore reports whether a and b are the same Store value. It never panics: a nil store, or one whose value
// cannot be compared (a struct holding a map, say), is the same as no other.
func sameStore(a, b Store) bool {
	va := reflect.ValueOf(a)
	return va.IsValid() && va.Type() == reflect.TypeOf(b) && va.Comparable() && a == b
}

// bookAndRecord books call and appends rec in one transaction. berr is the budget's refusal, or an error of
// the store or of the budget's state; aerr an error of the audit chain itself (a corrupt head, a record that
// cannot be encoded). Either way the transaction wrote nothing, unless its commit's outcome is unknown (a
// connection to PostgreSQL lost during COMMIT): then the budget may be spent and the record written while the
// call is refused, which errs towards spending less. On success settle refunds the call if it does not run. A
// panic of the store becomes berr, as a panic of a Budget does.
func (j *jointStore) bookAndRecord(ctx context.Context, call Call, rec *Record) (settle func(CallReport), berr, aerr error) {
	defer func() {
		if p := recover(); p != nil {
			settle, berr, aerr = nil, fmt.Errorf("budget panicked: %v", p), nil
		}
	}()
	var refused string
	err := j.budget.store.Update(ctx, func(tx Tx) error {
		refused, aerr = "", nil
		var err error
		if refused, err = j.budget.book(tx, call); err != nil || refused != "" {
			return err
		}
		if _, err = appendChain(tx, j.audit.chain, j.audit.key, *rec); err != nil && errors.Is(err, ErrAudit) {
			aerr = err
		}
		return err
	})
	switch {
	case err != nil && aerr != nil && errors.Is(err, aerr):
		return nil, nil, aerr
	case err != nil:
		return nil, j.budget.storeErr(err), nil
	case refused != "":
		return nil, j.budget.refusal(refused), nil
	}
	return j.budget.settler(ctx, call), nil, nil
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
