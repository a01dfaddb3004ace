package wasmbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

type refundArgs struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// toolSet returns a registry with a read-only lookup, an irreversible refund and a panicking tool, and counters of
// how often each really ran.
func toolSet(t *testing.T) (*hostfuncs.Registry, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var lookups, refunds atomic.Int64
	get := hostfuncs.Func("get_order", "Get an order.", func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		lookups.Add(1)
		if a.OrderID == "none" {
			return nil, errors.New("order none does not exist")
		}
		return map[string]any{"id": a.OrderID, "amount": 420.0, "items": []string{"a", "b"}}, nil
	})
	get.Effect = governance.ReadOnly
	refund := hostfuncs.Func("issue_refund", "Refund an order.", func(ctx context.Context, a refundArgs) (bool, error) {
		refunds.Add(1)
		return true, nil
	})
	refund.Effect = governance.Irreversible
	boom := hostfuncs.Tool{Name: "boom", Effect: governance.ReadOnly, Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		panic("tool bug")
	}}
	return hostfuncs.NewRegistry().MustRegister(get, refund, boom), &lookups, &refunds
}

func gate(t *testing.T, cfg governance.GateConfig) (*governance.Gate, *governance.MemoryAuditor) {
	t.Helper()
	aud := &governance.MemoryAuditor{}
	if cfg.Auditor == nil {
		cfg.Auditor = aud
	}
	if cfg.Policy == nil {
		cfg.Policy = governance.EffectPolicy{}
	}
	g, err := governance.NewGate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, aud
}

func TestToolsFromPython(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	sb := newSandbox(t, wasmbox.Config{Tools: reg})
	res := run(t, sb, `import tools, inspect
o = tools.get_order("A-1")
print(type(o).__name__, o["amount"], o["items"], tools.get_order(order_id="A-2")["id"])
print(inspect.signature(tools.get_order), tools.get_order.__doc__.splitlines()[0])
print([t["name"] for t in tools.list_tools()])
try:
    tools.get_order("none")
except tools.ToolError as e:
    print("ToolError:", e)
try:
    tools.get_order(5)
except TypeError as e:
    print("TypeError:", type(e).__name__)
try:
    tools.call("nope")
except tools.UnknownTool as e:
    print("UnknownTool lists", "get_order" in str(e))
try:
    tools.boom()
except tools.ToolError as e:
    print("panic:", e)
`)
	want := `dict 420 ['a', 'b'] A-2
(order_id: str) -> dict Get an order.
['get_order', 'issue_refund', 'boom']
ToolError: order none does not exist
TypeError: InvalidToolArguments
UnknownTool lists True
panic: tool boom failed: it panicked on the host
`
	if res.Stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	if lookups.Load() != 3 {
		t.Errorf("get_order ran %d times, want 3 (the invalid call must not run)", lookups.Load())
	}
	if len(res.ToolCalls) != 6 || res.ToolCalls[0].Status != "ok" || res.ToolCalls[4].ErrorType != "UnknownTool" {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
}

// max_tool_calls stops a loop of calls at exactly N, even with an allow-all policy.
func TestMaxToolCallsExact(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	g, aud := gate(t, governance.GateConfig{Policy: governance.AllowAllPolicy{}, Limits: governance.Limits{MaxToolCalls: 7}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	res, err := sb.Run(context.Background(), `import tools
n = 0
try:
    while True:
        tools.get_order("A-1")
        n += 1
except tools.ToolLimitExceeded as e:
    print(n, isinstance(e, tools.ToolDenied))
`)
	if err != nil || res.Stdout != "7 True\n" || lookups.Load() != 7 {
		t.Fatalf("stdout %q err %v runs %d; want 7 calls exactly", res.Stdout, err, lookups.Load())
	}
	if n := len(aud.RunRecords(res.RunID)); n < 8 {
		t.Errorf("audit has %d records for the run, want every call incl. the denied 8th", n)
	}
	// Uncaught, the limit is a typed run error.
	_, err = sb.Run(context.Background(), "import tools\nwhile True: tools.get_order('x')")
	if !errors.Is(err, wasmbox.ErrToolLimit) {
		t.Errorf("err %v, want ErrToolLimit", err)
	}
}

// approval timeout and approver error both deny; the tool never runs; the program can catch it and go on.
func TestApprovalDenials(t *testing.T) {
	for name, approver := range map[string]governance.Approver{
		"timeout": governance.ApproverFunc(func(ctx context.Context, _ governance.ApprovalRequest) (governance.Decision, error) {
			<-ctx.Done()
			return governance.Decision{}, ctx.Err()
		}),
		"error": governance.ApproverFunc(func(context.Context, governance.ApprovalRequest) (governance.Decision, error) {
			return governance.Decision{}, errors.New("approval service down")
		}),
		"deny": governance.DenyAll{},
	} {
		t.Run(name, func(t *testing.T) {
			reg, _, refunds := toolSet(t)
			g, _ := gate(t, governance.GateConfig{Approver: approver, ApprovalTimeout: 100 * time.Millisecond})
			sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
			res := run(t, sb, `import tools
try:
    tools.issue_refund("A-1", 10.0)
except tools.ToolDenied as e:
    print(type(e).__name__)
print("went on", tools.get_order("A-1")["id"])`)
			want := map[string]string{"timeout": "ApprovalTimeout", "error": "ApprovalDenied", "deny": "ApprovalDenied"}[name]
			if res.Stdout != want+"\nwent on A-1\n" {
				t.Errorf("stdout %q, want %s then went on", res.Stdout, want)
			}
			if refunds.Load() != 0 {
				t.Errorf("the refund ran %d times", refunds.Load())
			}
		})
	}
}

// budgets are checked before the call.
func TestBudgetCheckedBeforeCall(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	g, _ := gate(t, governance.GateConfig{Limits: governance.Limits{ToolCaps: map[string]int64{"get_order": 2}}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	res := run(t, sb, `import tools
for i in range(3):
    try:
        tools.get_order("A-%d" % i)
        print("ok")
    except tools.BudgetExceeded:
        print("budget")`)
	if res.Stdout != "ok\nok\nbudget\n" || lookups.Load() != 2 {
		t.Errorf("stdout %q, runs %d", res.Stdout, lookups.Load())
	}
}

// concurrent sandboxes sharing one Gate have separate budgets.
func TestConcurrentRunsSeparateBudgets(t *testing.T) {
	reg, lookups, _ := toolSet(t)
	g, _ := gate(t, governance.GateConfig{Limits: governance.Limits{MaxToolCalls: 5}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(context.Background(), "import tools\nn = 0\ntry:\n    while True:\n        tools.get_order('x'); n += 1\nexcept tools.ToolLimitExceeded:\n    print(n)")
			if err != nil || res.Stdout != "5\n" {
				errs <- fmt.Errorf("stdout %q err %v", res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if lookups.Load() != 30 {
		t.Errorf("%d lookups, want 6 runs × 5", lookups.Load())
	}
}

// A tool gets the run's context: a hanging tool is stopped by the run's deadline.
func TestHangingToolStoppedByDeadline(t *testing.T) {
	hang := hostfuncs.Tool{Name: "hang", Effect: governance.ReadOnly, Handler: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(hang), Timeout: 200 * time.Millisecond})
	start := time.Now()
	res, err := sb.Run(context.Background(), "import tools\ntools.hang()\nwhile True: pass")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Status != "failed" {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
}

func TestToolsModuleWithoutTools(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, "import tools\nprint(tools.list_tools())")
	if strings.TrimSpace(res.Stdout) != "[]" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// Arguments and results cross as JSON: unicode and nesting survive, what JSON cannot carry is refused in Python.
func TestToolJSONEdges(t *testing.T) {
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"v":{}},"required":["v"]}`),
		Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echo)})
	res := run(t, sb, `import tools, math
v = {"s": "héllo ✓ \u2028", "n": [1, 2.5, None, True, {"deep": [[]]}], "big": 2**70}
print(tools.echo(v=v) == {"v": v})
for bad in (object(), math.nan, {1: 2}, b"bytes"):
    try:
        tools.echo(v=bad)
        print("accepted", bad)
    except tools.InvalidToolArguments as e:
        print("refused")
loop = []
loop.append(loop)
try:
    tools.echo(v=loop)
except tools.InvalidToolArguments:
    print("refused")`)
	if want := "True\nrefused\nrefused\naccepted {1: 2}\nrefused\nrefused\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %s)", res.Stdout, want, res.Stderr)
	}
}

// The generated tools module calls tools through the C path of _wasmbox (encode, host call and decode in one C
// call), and it behaves exactly as the Python path it replaced: results, omitted optional arguments, every
// error class and message.
func TestToolCallCPathMatchesPython(t *testing.T) {
	reg, _, _ := toolSet(t)
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"v":{},"opt":{"type":"integer"}},"required":["v"]}`),
		Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }}
	spaced := hostfuncs.Tool{Name: "spaced", Effect: governance.ReadOnly,
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(" [1, 2] \n"), nil
		}}
	// raw answers with the text it is given, so that the guest can try response texts of its choice.
	raw := hostfuncs.Tool{Name: "raw", Effect: governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"t":{"type":"string"}},"required":["t"]}`),
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) {
			var v struct{ T string }
			if err := json.Unmarshal(a, &v); err != nil {
				return nil, err
			}
			return json.RawMessage(v.T), nil
		}}
	reg.MustRegister(echo, spaced, raw)
	g, _ := gate(t, governance.GateConfig{Limits: governance.Limits{MaxToolCalls: 2000, MaxDeniedCalls: 2000}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g})
	script := `import tools, _wasmbox, math, random
def attempt(f):
    try:
        return repr(f())
    except BaseException as e:
        return "%s(%r, tool=%r)" % (type(e).__name__, str(e), getattr(e, "tool", None))
PY = False
def tool(name):
    # The tool's C callable, or (PY) the generated Python function it wraps, which calls _call_tool.
    f = getattr(tools, name)
    return f.__wrapped__ if PY else f
def suite():
    out = []
    out.append(attempt(lambda: tool("echo")(v={"s": "héllo ✓", "n": [1, 2.5, None, True], "big": 2**70})))
    out.append(attempt(lambda: tool("echo")(v=1)))            # the optional argument is omitted
    out.append(attempt(lambda: tool("echo")(v=1, opt=2)))
    out.append(attempt(lambda: tool("echo")(v=object())))
    out.append(attempt(lambda: tool("echo")(v=math.inf)))
    out.append(attempt(lambda: tool("get_order")("none")))
    out.append(attempt(lambda: tool("get_order")(5)))
    out.append(attempt(lambda: tools.call("nope")))
    out.append(attempt(lambda: tools.call(5)).split("(")[0])  # TypeError in both, worded differently
    out.append(attempt(lambda: tool("boom")()))
    out.append(attempt(lambda: tool("spaced")()))
    # Arguments that do not fit the signature: the same TypeError, word for word.
    out.append(attempt(lambda: tool("echo")()))
    out.append(attempt(lambda: tool("echo")(1, 2)))
    out.append(attempt(lambda: tool("echo")(1, 2, opt=3)))
    out.append(attempt(lambda: tool("echo")(v=1, zz=2)))
    out.append(attempt(lambda: tool("echo")(1, v=2)))
    # Arguments and results of every common shape, and the edges of each: the direct JSON paths of the C call
    # must give what the json module gives.
    r = random.Random(7)
    def rstr():
        return "".join(r.choice(['a', '0', ' ', '"', '\\', '/', '\n', '\t', '\b', '\x00', '\x1f', '\x7f', '\xe9',
                                 '\u2028', '<', '&', '\U0001F600']) for _ in range(r.randrange(0, 10)))
    def rval(d=0):
        k = r.randrange(11 if d < 4 else 6)
        if k == 0: return r.choice([None, True, False])
        if k == 1: return r.choice([0, -1, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 10**18, 10**19, 10**30, r.randrange(-10**6, 10**6)])
        if k == 2: return r.choice([0.0, -0.0, 1.5, 1e16, 1e-7, 1e22, 5e-324, 1.7976931348623157e308, 0.1, r.random()])
        if k in (3, 4, 5): return rstr()
        if k in (6, 7): return [rval(d + 1) for _ in range(r.randrange(0, 4))]
        if k == 8: return tuple(rval(d + 1) for _ in range(r.randrange(0, 3)))
        return {rstr(): rval(d + 1) for _ in range(r.randrange(0, 4))}
    out.extend(attempt(lambda: tool("echo")(v=rval())) for _ in range(300))
    nest = 1
    for _ in range(37):
        nest = [nest]
    out.append(attempt(lambda: tool("echo")(v=nest)))
    for t in ['1', '-0', '01', '1.', '1e5', '1E+5', '-1.5e-300', '1e400', '123456789012345678901234', '9223372036854775808',
              '-9223372036854775808', 'NaN', '-Infinity', 'true', 'nul', ' 5 ', '[1,2,]', '{"a":1,"a":2}',
              '{"a" : [ 1 , {"b" : null} ] }', '{a:1}', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00x"',
              '"\\x"', '"a\\/b"', '"tab\there"', '"\\u003c\\u0026"', '[' * 40 + ']' * 40, '{"k":' * 35 + '1' + '}' * 35,
              '[1] [2]', '', '"\xe9"', '[1.5,-2,"\\n"]']:
        out.append(attempt(lambda: tool("raw")(t)))
    return out
print("C path", tools._call_tool is getattr(_wasmbox, "call_tool", None), type(tools.echo) is _wasmbox.Tool)
c = suite()
tools._call_tool, PY = tools._call_tool_py, True
p = suite()
for a, b in zip(c, p):
    print("same" if a == b else "DIFFERENT", a, "|", b)
`
	res := run(t, sb, script)
	if res.Exception != nil {
		t.Fatalf("exception: %s", res.Exception.Traceback)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 17+300+1+34 || lines[0] != "C path True True" {
		t.Fatalf("stdout:\n%s", res.Stdout)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "same ") {
			t.Errorf("%s", l)
		}
	}
	t.Logf("\n%s", strings.Join(lines[:17], "\n"))
}
