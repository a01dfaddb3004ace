// Command tour is the README's short tour as one program: a sandbox, a run, a workspace, a session and a tool
// behind the governance gate.
//
//	go run ./examples/tour
//
// Every line of the README's tour is here as written (tour_test.go checks it), so the README cannot drift
// from code that compiles and runs.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Order is what the get_order tool returns.
type Order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// orders is a stand-in for your database.
type orders map[string]Order

func (o orders) Order(_ context.Context, id string) (Order, error) {
	if ord, ok := o[id]; ok {
		return ord, nil
	}
	return Order{}, fmt.Errorf("no order %q", id)
}

func main() {
	if err := tour(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

func tour(ctx context.Context) error {
	sb, err := wasmbox.New(ctx, wasmbox.Config{Timeout: 5 * time.Second, MemoryLimit: 128 << 20})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)

	res, err := sb.Run(ctx, "import math; print(math.factorial(20))")
	if err != nil {
		return err
	}
	fmt.Print(res.Stdout)

	ws := wasmbox.NewWorkspace(0, 0)
	ws.WriteFile("data.csv", []byte("a,b\n1,2\n"))
	res, err = sb.RunProgram(ctx, wasmbox.Program{Code: "print(open('data.csv').read())", Workspace: ws})
	if err != nil {
		return err
	}
	fmt.Print(res.Stdout)

	se, _ := sb.NewSession(ctx, nil) // one interpreter across steps (REPL-style agents)
	defer se.Close(ctx)
	se.Exec(ctx, "x = 41")
	res, _ = se.Exec(ctx, "print(x + 1)") // "42\n"
	fmt.Print(res.Stdout)

	return tools(ctx, orders{"A-1001": {ID: "A-1001", Amount: 129.5}})
}

func tools(ctx context.Context, db orders) error {
	getOrder := hostfuncs.Func("get_order", "Get one order.", func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (Order, error) {
		return db.Order(ctx, a.OrderID)
	})
	getOrder.Effect = governance.ReadOnly
	gate, _ := wasmbox.DefaultGate() // what a nil Config.Gate gets; governance.NewGate for a policy of your own
	sb, _ := wasmbox.New(ctx, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(getOrder), Gate: gate})
	defer sb.Close(ctx)
	res, _ := sb.Run(ctx, "import tools\nprint(tools.get_order('A-1001')['amount'])")
	// res.ToolCalls records every call, allowed or denied; tools.ToolDenied & co. are catchable in Python
	fmt.Print(res.Stdout)
	fmt.Printf("%d tool call(s), the first %s\n", len(res.ToolCalls), res.ToolCalls[0].Status)
	return nil
}
