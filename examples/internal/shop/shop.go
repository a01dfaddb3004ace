// Package shop is the seed scenario shared by the examples: four orders behind three tools.
package shop

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// Order is one order of the shop.
type Order struct {
	ID     string  `json:"order_id"`
	Region string  `json:"region"`
	Amount float64 `json:"amount"`
}

// Shop holds the orders and the refunds issued; safe for concurrent use.
type Shop struct {
	mu      sync.Mutex
	orders  map[string]Order
	Refunds []Refund
}

// Refund is one refund the tool issued.
type Refund struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// New returns the seed shop: A-1001 EU 420.0, A-1002 US 275.0, A-1003 EU 158.5, A-1004 EU 640.0.
func New() *Shop {
	s := &Shop{orders: map[string]Order{}}
	for _, o := range []Order{{"A-1001", "EU", 420.0}, {"A-1002", "US", 275.0}, {"A-1003", "EU", 158.5}, {"A-1004", "EU", 640.0}} {
		s.orders[o.ID] = o
	}
	return s
}

type orderID struct {
	OrderID string `json:"order_id" jsonschema:"description=the order id (e.g. A-1001)"`
}

type refundArgs struct {
	OrderID string  `json:"order_id" jsonschema:"description=the order to refund"`
	Amount  float64 `json:"amount" jsonschema:"description=the amount to refund (at most the order amount)"`
}

// Tools returns list_orders and get_order (read-only) and issue_refund (irreversible: needs approval).
func (s *Shop) Tools() *hostfuncs.Registry {
	list := hostfuncs.Func("list_orders", "List the ids of all orders.", func(ctx context.Context, _ struct{}) ([]string, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		ids := make([]string, 0, len(s.orders))
		for id := range s.orders {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return ids, nil
	})
	list.Effect = governance.ReadOnly
	get := hostfuncs.Func("get_order", "Get one order: {order_id, region, amount}.", func(ctx context.Context, a orderID) (Order, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		o, ok := s.orders[a.OrderID]
		if !ok {
			return Order{}, fmt.Errorf("no order %q", a.OrderID)
		}
		return o, nil
	})
	get.Effect = governance.ReadOnly
	refund := hostfuncs.Func("issue_refund", "Refund an order (irreversible; needs approval). Returns the refund.", func(ctx context.Context, a refundArgs) (Refund, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		o, ok := s.orders[a.OrderID]
		if !ok {
			return Refund{}, fmt.Errorf("no order %q", a.OrderID)
		}
		if a.Amount <= 0 || a.Amount > o.Amount {
			return Refund{}, fmt.Errorf("refund amount %.2f is not within (0, %.2f]", a.Amount, o.Amount)
		}
		r := Refund{OrderID: a.OrderID, Amount: a.Amount}
		s.Refunds = append(s.Refunds, r)
		return r, nil
	})
	refund.Effect = governance.Irreversible
	return hostfuncs.NewRegistry().MustRegister(list, get, refund)
}
