package hostfuncs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Parameter and tool names that collide with the names the generated module uses (call, json, tools, the
// builtins its helpers call) must not break it. Once, a parameter named call made its tool call itself.
func TestGeneratedModuleNamesCannotCollide(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the interpreter")
	}
	echo := func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }
	var props []string
	for _, p := range []string{"call", "name", "kwargs", "args", "json", "tools", "self", "type", "str", "dict",
		"super", "len", "ok", "resp", "err", "e", "k", "v", "object", "Exception", "ValueError", "TypeError", "list_tools"} {
		props = append(props, `"`+p+`":{"type":"string"}`)
	}
	params := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":false}`)
	reg := hostfuncs.NewRegistry()
	reg.MustRegister(hostfuncs.Tool{Name: "echo", Parameters: params, Effect: governance.ReadOnly, Handler: echo})
	for _, n := range []string{"type", "super", "dict", "len", "str", "object", "Exception", "ValueError", "TypeError", "StopIteration"} {
		reg.MustRegister(hostfuncs.Tool{Name: n, Effect: governance.ReadOnly, Handler: echo,
			Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"additionalProperties":false}`)})
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Tools: reg, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, `import tools
print(tools.echo(call="c", name="n", kwargs="k", json="j", self="s", type="t", super="S", err="e", list_tools="l"))
print(tools.type(x=1), tools.super(x=2), tools.dict(x=3), tools.len(x=4), tools.str(x=5), tools.object(x=6))
try:
    tools.echo(call=object())
except tools.InvalidToolArguments as e:
    print("InvalidToolArguments:", type(e).__name__)
try:
    tools.type(x="not an int")
except tools.ToolError as e:
    print("ToolError:", e.type, isinstance(e, tools.ToolException))
print(len(tools.list_tools()), tools.call("len", x=7))
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	want := `{'call': 'c', 'name': 'n', 'kwargs': 'k', 'json': 'j', 'self': 's', 'type': 't', 'super': 'S', 'err': 'e', 'list_tools': 'l'}
{'x': 1} {'x': 2} {'x': 3} {'x': 4} {'x': 5} {'x': 6}
InvalidToolArguments: InvalidToolArguments
ToolError: InvalidToolArguments True
11 {'x': 7}
`
	if res.Stdout != want {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
}

// A tool that ignores its context and sleeps 6 s, under a 2 s timeout: the run ends with an error soon after
// the deadline (the gate abandons the tool after its grace), not after the tool's 6 s.
func TestToolIgnoringContextDoesNotOutliveTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the interpreter")
	}
	release := make(chan struct{})
	defer close(release)
	reg := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "slow", Effect: governance.ReadOnly,
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			select { // ignores its context
			case <-release:
			case <-time.After(6 * time.Second):
			}
			return json.RawMessage(`"done"`), nil
		}})
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Tools: reg, Gate: g, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	start := time.Now()
	res, err := sb.Run(ctx, "import tools\nprint(tools.slow())\n")
	took := time.Since(start)
	if err == nil || took > 4500*time.Millisecond || strings.Contains(res.Stdout, "done") {
		t.Fatalf("after %s: err %v, stdout %q", took, err, res.Stdout)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Status != "abandoned" {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
}
