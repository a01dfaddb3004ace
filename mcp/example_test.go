package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/mcp"
	"github.com/wasmbox/wasmbox/wasmbox"
)

var closedWorld = false

// weatherServer is an MCP server with one read-only tool, reached over the SDK's in-memory transport (a real
// program would give mcp.Server a Command or a URL instead).
func weatherServer(ctx context.Context) mcp.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "weather", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "get-forecast", Description: "Forecast for a city.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closedWorld},
		InputSchema: map[string]any{"type": "object", "required": []string{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string", "description": "the city"}}}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ City string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &sdk.CallToolResult{StructuredContent: map[string]any{"city": in.City, "high_c": 21}}, nil
		})
	clientSide, serverSide := sdk.NewInMemoryTransports()
	if _, err := s.Connect(ctx, serverSide, nil); err != nil {
		panic(err)
	}
	return mcp.Server{Name: "weather", Transport: clientSide}
}

func Example() {
	ctx := context.Background()
	// The server is our own, so its annotations may decide the tools' effects (a third-party server's may not:
	// without TrustAnnotations every tool needs approval unless a policy marks it).
	c, err := mcp.Connect(ctx, weatherServer(ctx), mcp.Config{TrustAnnotations: true})
	if err != nil {
		panic(err)
	}
	var cfg wasmbox.Config // the default Gate: read-only tools run, irreversible ones need approval
	if err := mcp.Attach(&cfg, c); err != nil {
		panic(err)
	}
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer sb.Close(ctx) // also closes the MCP session (and stops a server process)

	fmt.Print(cfg.Tools.Stubs())
	res, err := sb.Run(ctx, "import tools\nprint(tools.get_forecast('Lyon'))")
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println(res.ToolCalls[0].Tool, res.ToolCalls[0].Status, res.ToolCalls[0].DecidedBy)
	// Output:
	// def get_forecast(city: str) -> "Any":
	//     """Forecast for a city.
	//
	//     (MCP tool "get-forecast" of server "weather".)
	//
	//     Args:
	//         city (str): the city
	//     """
	//     ...
	//
	// {'city': 'Lyon', 'high_c': 21}
	// get_forecast ok policy
}

// The code-action agent gets MCP tools the same way: attach them to the Config it is given.
func ExampleAttach_agent() {
	ctx := context.Background()
	c, err := mcp.Connect(ctx, weatherServer(ctx), mcp.Config{TrustAnnotations: true})
	if err != nil {
		panic(err)
	}
	var cfg wasmbox.Config
	if err := mcp.Attach(&cfg, c); err != nil {
		panic(err)
	}
	model := agenttest.New(nil, "```python\nf = get_forecast(city=\"Oslo\")\nfinal_answer(f[\"high_c\"])\n```")
	a, err := agent.New(ctx, model, cfg)
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx) // closes the Sandbox, which closes the MCP client
	res, err := a.Run(ctx, "How warm will it be in Oslo?")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Answer, len(res.ToolCalls))
	// Output:
	// 21 1
}
