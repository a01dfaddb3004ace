package hostfuncs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

type orderArgs struct {
	OrderID string  `json:"order_id" jsonschema:"description=the order id"`
	Note    string  `json:"note,omitempty"`
	Amount  float64 `json:"amount,omitempty"`
}

type order struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func registry(t *testing.T) *hostfuncs.Registry {
	t.Helper()
	r := hostfuncs.NewRegistry()
	get := hostfuncs.Func("get_order", "Get one order by id.", func(ctx context.Context, a orderArgs) (order, error) {
		if a.OrderID == "missing" {
			return order{}, errors.New("no such order")
		}
		return order{ID: a.OrderID, Amount: 420}, nil
	})
	get.Effect = governance.ReadOnly
	if err := r.Register(get); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegisterRejects(t *testing.T) {
	h := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	r := registry(t)
	for name, tool := range map[string]hostfuncs.Tool{
		"keyword":      {Name: "class", Handler: h},
		"not ident":    {Name: "get-order", Handler: h},
		"private":      {Name: "_x", Handler: h},
		"reserved":     {Name: "list_tools", Handler: h},
		"no handler":   {Name: "x"},
		"duplicate":    {Name: "get_order", Handler: h},
		"bad schema":   {Name: "y", Handler: h, Parameters: json.RawMessage(`{"type": 5}`)},
		"not object":   {Name: "z", Handler: h, Parameters: json.RawMessage(`{"type": "string"}`)},
		"bad param":    {Name: "w", Handler: h, Parameters: json.RawMessage(`{"type":"object","properties":{"for":{}}}`)},
		"invalid json": {Name: "v", Handler: h, Parameters: json.RawMessage(`{`)},
	} {
		if err := r.Register(tool); !errors.Is(err, hostfuncs.ErrInvalidTool) {
			t.Errorf("%s: err %v, want ErrInvalidTool", name, err)
		}
	}
}

func TestValidate(t *testing.T) {
	r := registry(t)
	if err := r.Validate("get_order", json.RawMessage(`{"order_id":"A-1"}`)); err != nil {
		t.Errorf("valid args: %v", err)
	}
	for _, bad := range []string{`{}`, `{"order_id": 5}`, `[]`, `{"order_id":"x","extra":1}`, `nope`} {
		if err := r.Validate("get_order", json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestPythonStubs(t *testing.T) {
	got := registry(t).Stubs()
	for _, want := range []string{
		`def get_order(order_id: str, *, note: str = _MISSING, amount: float = _MISSING) -> dict:`,
		`Get one order by id.`,
		`order_id (str): the order id`,
		`amount (float, optional)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stubs lack %q:\n%s", want, got)
		}
	}
}

func gateRun(t *testing.T, limits governance.Limits) *governance.Run {
	t.Helper()
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.EffectPolicy{}, Auditor: &governance.MemoryAuditor{}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return g.NewRun("")
}

func TestBridgeErrorTypes(t *testing.T) {
	r := registry(t)
	panicky := hostfuncs.Tool{Name: "boom", Effect: governance.ReadOnly, Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("kaboom") }}
	irreversible := hostfuncs.Tool{Name: "refund", Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`true`), nil }}
	r.MustRegister(panicky, irreversible)
	b := hostfuncs.NewBridge(r, gateRun(t, governance.Limits{MaxToolCalls: 6}), governance.SourcePython)
	ctx := context.Background()
	for _, c := range []struct {
		name, args, wantType string
	}{
		{"get_order", `{"order_id":"A-1"}`, ""},
		{"get_order", `{"order_id":"missing"}`, "ToolError"},
		{"get_order", `{"order_id":1}`, "InvalidToolArguments"},
		{"nope", `{}`, "UnknownTool"},
		{"boom", `{}`, "ToolError"},
		{"refund", `{}`, "ApprovalDenied"},
		{"get_order", `{"order_id":"A-1"}`, "ToolLimitExceeded"},
	} {
		resp, isErr := b.Call(ctx, c.name, json.RawMessage(c.args))
		if c.wantType == "" {
			if isErr || string(resp) != `{"id":"A-1","amount":420}` {
				t.Errorf("%s %s: %s %v", c.name, c.args, resp, isErr)
			}
			continue
		}
		var e struct{ Type, Message string }
		if !isErr || json.Unmarshal(resp, &e) != nil || e.Type != c.wantType {
			t.Errorf("%s %s: got %s (error %v), want type %s", c.name, c.args, resp, isErr, c.wantType)
		}
		if c.wantType == "ToolError" && c.name == "get_order" && e.Message != "no such order" {
			t.Errorf("tool message not kept: %q", e.Message)
		}
		if c.wantType == "UnknownTool" && !strings.Contains(e.Message, "get_order") {
			t.Errorf("unknown-tool message should list the real tools: %q", e.Message)
		}
	}
	calls := b.Calls()
	if len(calls) != 7 || calls[0].Status != "ok" || calls[5].Status != "denied" || calls[5].DecidedBy != "gate" || calls[4].Status != "failed" {
		t.Errorf("calls %+v", calls)
	}
}

// A parameter without a type is annotated "Any" as a string: the generated module must import nothing to load.
func TestUntypedParameterAnnotation(t *testing.T) {
	r := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "echo", Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil },
		Parameters: json.RawMessage(`{"type":"object","properties":{"v":{}},"required":["v"]}`)})
	if got := r.Stubs(); !strings.Contains(got, `def echo(v: "Any") -> "Any":`) {
		t.Errorf("stubs:\n%s", got)
	}
}

type noteArgs struct {
	Name  string         `json:"name"`
	Extra any            `json:"extra,omitempty"`
	Tags  map[string]any `json:"tags,omitempty"`
}

// TestFuncWithAnyField: a struct field of type any (its schema is the boolean schema true) registers, shows as
// "Any" in Python, and accepts any value; a property whose schema is false accepts none, and one whose schema
// is neither an object nor a boolean is refused with a clear error.
func TestFuncWithAnyField(t *testing.T) {
	r := hostfuncs.NewRegistry()
	if err := r.Register(hostfuncs.Func("note", "keeps a note", func(ctx context.Context, a noteArgs) (string, error) { return a.Name, nil })); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if got := r.Stubs(); !strings.Contains(got, `extra: "Any" = _MISSING`) {
		t.Errorf("stubs:\n%s", got)
	}
	for _, args := range []string{`{"name":"a","extra":[1,{"x":null}]}`, `{"name":"a","extra":"s","tags":{"k":1}}`} {
		if err := r.Validate("note", json.RawMessage(args)); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
	nop := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	r2 := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "never", Handler: nop,
		Parameters: json.RawMessage(`{"type":"object","properties":{"v":false}}`)})
	if err := r2.Validate("never", json.RawMessage(`{"v":1}`)); err == nil {
		t.Error("a property whose schema is false accepted a value")
	}
	err := hostfuncs.NewRegistry().Register(hostfuncs.Tool{Name: "bad", Handler: nop,
		Parameters: json.RawMessage(`{"type":"object","properties":{"v":3}}`)})
	if !errors.Is(err, hostfuncs.ErrInvalidTool) || !strings.Contains(err.Error(), "object or a boolean") {
		t.Errorf("property schema 3: %v", err)
	}
}
