package agent_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// shop is the seed scenario (examples/internal/shop cannot be imported from here): four orders behind
// list_orders, get_order (read-only) and issue_refund (irreversible).
type shop struct {
	mu      sync.Mutex
	orders  map[string]order
	refunds []string
}

type order struct {
	ID     string  `json:"order_id"`
	Region string  `json:"region"`
	Amount float64 `json:"amount"`
}

func newShop() *shop {
	s := &shop{orders: map[string]order{}}
	for _, o := range []order{{"A-1001", "EU", 420.0}, {"A-1002", "US", 275.0}, {"A-1003", "EU", 158.5}, {"A-1004", "EU", 640.0}} {
		s.orders[o.ID] = o
	}
	return s
}

func (s *shop) registry() *hostfuncs.Registry {
	list := hostfuncs.Func("list_orders", "List the ids of all orders.", func(ctx context.Context, _ struct{}) ([]string, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var ids []string
		for id := range s.orders {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return ids, nil
	})
	list.Effect = governance.ReadOnly
	get := hostfuncs.Func("get_order", "Get one order: {order_id, region, amount}.", func(ctx context.Context, a struct {
		OrderID string `json:"order_id" jsonschema:"description=the order id"`
	}) (order, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		o, ok := s.orders[a.OrderID]
		if !ok {
			return order{}, fmt.Errorf("no order %q", a.OrderID)
		}
		return o, nil
	})
	get.Effect = governance.ReadOnly
	refund := hostfuncs.Func("issue_refund", "Refund an order (irreversible; needs approval).", func(ctx context.Context, a struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}) (map[string]any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refunds = append(s.refunds, a.OrderID)
		return map[string]any{"order_id": a.OrderID, "amount": a.Amount}, nil
	})
	refund.Effect = governance.Irreversible
	return hostfuncs.NewRegistry().MustRegister(list, get, refund)
}

// newAgent builds an agent over the seed shop with the default gate (issue_refund is denied).
func newAgent(t *testing.T, model llms.Model, opts ...agent.Option) (*agent.Agent, *shop) {
	t.Helper()
	return newAgentCfg(t, model, wasmbox.Config{}, opts...)
}

func newAgentCfg(t *testing.T, model llms.Model, cfg wasmbox.Config, opts ...agent.Option) (*agent.Agent, *shop) {
	t.Helper()
	s := newShop()
	if cfg.Tools == nil {
		cfg.Tools = s.registry()
	}
	a, err := agent.New(context.Background(), model, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, s
}

// py wraps code in a fenced block, as a model would reply.
func py(code string) string { return "```python\n" + code + "\n```" }

var _ = agenttest.New

// onlyIrreversible returns a registry with the irreversible tools of reg.
func onlyIrreversible(t *testing.T, reg *hostfuncs.Registry) *hostfuncs.Registry {
	t.Helper()
	out := hostfuncs.NewRegistry()
	for _, tl := range reg.Tools() {
		if tl.Effect == governance.Irreversible {
			if err := out.Register(tl); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}
