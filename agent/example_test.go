package agent_test

import (
	"context"
	"fmt"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func Example() {
	ctx := context.Background()
	// One tool, shown to the model as `def get_price(item: str) -> float`.
	price := hostfuncs.Func("get_price", "Get the unit price of an item.", func(ctx context.Context, in struct {
		Item string `json:"item" jsonschema:"description=the item's name"`
	}) (float64, error) {
		return map[string]float64{"apple": 0.5, "pear": 0.75}[in.Item], nil
	})
	price.Effect = governance.ReadOnly
	tools := hostfuncs.NewRegistry().MustRegister(price)

	// A scripted model stands in for a real one (any langchaingo llms.Model). Its first program has a bug; the
	// traceback goes back and the second program repairs it.
	model := agenttest.New(nil,
		"```python\ntotal = 3 * get_price(item=apple)\n```",
		"The item name is a string.\n```python\ntotal = 3 * get_price(item=\"apple\") + 2 * get_price(item=\"pear\")\nfinal_answer({\"total\": total})\n```",
	)
	a, err := agent.New(ctx, model, wasmbox.Config{Tools: tools})
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)

	res, err := a.Run(ctx, "How much do 3 apples and 2 pears cost?")
	if err != nil {
		panic(err)
	}
	fmt.Println("answer:", res.Answer)
	fmt.Println("steps:", len(res.Steps), "repairs:", res.Repairs, "tool calls:", len(res.ToolCalls))
	fmt.Println("first error:", res.Errors[0])
	// Output:
	// answer: map[total:3]
	// steps: 2 repairs: 1 tool calls: 2
	// first error: step 1: NameError: name 'apple' is not defined
}
