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

// A loop of `_wasmbox.call(b'Tnot_a_tool\n"' + b"x"*(1<<20) + b'"')` once kept every argument byte of every
// call, denied ones included. The bridge keeps a bounded number of records and argument bytes, and the run is
// flooded once it has had too many denials.
func TestBridgeBoundsWhatItKeeps(t *testing.T) {
	b := hostfuncs.NewBridge(hostfuncs.NewRegistry(), gateRun(t, governance.Limits{MaxDeniedCalls: 5000}), governance.SourcePython)
	args := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	small := json.RawMessage(`{"q":"` + strings.Repeat("y", 60<<10) + `"}`)
	for i := 0; i < 3000; i++ {
		a := args
		if i%2 == 0 {
			a = small
		}
		resp, isErr := b.Call(context.Background(), "not_a_tool", a)
		if !isErr || len(resp) > 8<<10 {
			t.Fatalf("call %d: %d-byte response, error %v", i, len(resp), isErr)
		}
	}
	calls := b.Calls()
	kept := 0
	for _, c := range calls {
		kept += len(c.Args)
		if c.Args == nil && (c.ArgsSize == 0 || len(c.ArgsSHA256) != 64) {
			t.Fatalf("call %d keeps neither its arguments nor their size and hash: %+v", c.Seq, c)
		}
	}
	if len(calls) != hostfuncs.MaxCallRecords || b.Unrecorded() != 3000-hostfuncs.MaxCallRecords || kept > hostfuncs.MaxRetainedArgsBytes || kept == 0 {
		t.Fatalf("%d records (%d unrecorded), %d argument bytes kept", len(calls), b.Unrecorded(), kept)
	}
	if b.Flooded() {
		t.Fatal("flooded below MaxDeniedCalls")
	}

	// A huge tool name is not kept, echoed or audited whole.
	b = hostfuncs.NewBridge(hostfuncs.NewRegistry(), gateRun(t, governance.Limits{}), governance.SourcePython)
	resp, isErr := b.Call(context.Background(), strings.Repeat("n", 1<<20), nil)
	if c := b.Calls()[0]; !isErr || len(resp) > 8<<10 || len(c.Tool) > 300 || len(c.Error) > 8<<10 || len(c.Reason) > 8<<10 {
		t.Fatalf("response %d bytes, record tool %d error %d reason %d bytes", len(resp), len(c.Tool), len(c.Error), len(c.Reason))
	}
	// With the default limits, the run is flooded after 100 denials, and the bridge says so.
	for i := 0; i < 200 && !b.Flooded(); i++ {
		b.Call(context.Background(), "not_a_tool", nil)
	}
	resp, _ = b.Call(context.Background(), "not_a_tool", nil)
	var e struct{ Type, Message string }
	if !b.Flooded() || json.Unmarshal(resp, &e) != nil || e.Type != "ToolLimitExceeded" {
		t.Fatalf("flooded %v, response %s", b.Flooded(), resp)
	}
}

// A tool that returns invalid JSON failed: its output must not reach the guest as a result.
func TestBridgeRefusesInvalidJSONResult(t *testing.T) {
	r := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "bad", Effect: governance.ReadOnly,
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"a":`), nil }})
	b := hostfuncs.NewBridge(r, gateRun(t, governance.Limits{}), governance.SourcePython)
	resp, isErr := b.Call(context.Background(), "bad", nil)
	var e struct{ Type, Message string }
	if !isErr || json.Unmarshal(resp, &e) != nil || e.Type != "ToolError" || !strings.Contains(e.Message, "invalid JSON") {
		t.Fatalf("response %s (error %v)", resp, isErr)
	}
	if c := b.Calls()[0]; c.Status != "failed" {
		t.Fatalf("recorded as %q", c.Status)
	}
}

// Arguments that are not JSON reach the bridge from a hostile guest; the gate refuses them, and the bridge's
// record keeps only their size and hash, so that the calls (and a Result holding them) still marshal.
func TestBridgeKeepsInvalidArgumentsByHashOnly(t *testing.T) {
	r := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }})
	b := hostfuncs.NewBridge(r, gateRun(t, governance.Limits{}), governance.SourcePython)
	resp, isErr := b.Call(context.Background(), "echo", json.RawMessage(`{"x": `))
	var e struct{ Type, Message string }
	if !isErr || json.Unmarshal(resp, &e) != nil || e.Type != "ToolDenied" || !strings.Contains(e.Message, "not valid JSON") {
		t.Fatalf("response %s (error %v)", resp, isErr)
	}
	if _, isErr := b.Call(context.Background(), "echo", json.RawMessage(`{}`)); isErr {
		t.Fatal("a valid call after the invalid one failed")
	}
	calls := b.Calls()
	if len(calls) != 2 || calls[0].Args != nil || calls[0].ArgsSize != 6 || len(calls[0].ArgsSHA256) != 64 || string(calls[1].Args) != `{}` {
		t.Fatalf("records %+v", calls)
	}
	if _, err := json.Marshal(calls); err != nil {
		t.Fatalf("the records do not marshal: %v", err)
	}
}

type withChan struct {
	C chan int `json:"c"`
}

// Func never panics: types JSON cannot carry give an error through Register, and interface types give an open
// schema.
func TestFuncWithUnusualTypes(t *testing.T) {
	ctx := context.Background()
	for name, tool := range map[string]hostfuncs.Tool{
		"chan_in":        hostfuncs.Func("chan_in", "", func(context.Context, chan int) (int, error) { return 0, nil }),
		"chan_out":       hostfuncs.Func("chan_out", "", func(context.Context, struct{}) (chan int, error) { return nil, nil }),
		"func_out":       hostfuncs.Func("func_out", "", func(context.Context, struct{}) (func(), error) { return nil, nil }),
		"complex_in":     hostfuncs.Func("complex_in", "", func(context.Context, struct{ X complex128 }) (int, error) { return 0, nil }),
		"chan_field":     hostfuncs.Func("chan_field", "", func(context.Context, withChan) (int, error) { return 0, nil }),
		"chan_field_out": hostfuncs.Func("chan_field_out", "", func(context.Context, struct{}) (*withChan, error) { return nil, nil }),
		"int_in":         hostfuncs.Func("int_in", "", func(context.Context, int) (int, error) { return 0, nil }),
	} {
		if err := hostfuncs.NewRegistry().Register(tool); !errors.Is(err, hostfuncs.ErrInvalidTool) {
			t.Errorf("%s: Register: %v, want ErrInvalidTool", name, err)
		}
	}
	var got any
	open := hostfuncs.Func("open", "", func(_ context.Context, in any) (any, error) { got = in; return in, nil })
	open.Effect = governance.ReadOnly
	r := hostfuncs.NewRegistry()
	if err := r.Register(open); err != nil {
		t.Fatal(err)
	}
	b := hostfuncs.NewBridge(r, gateRun(t, governance.Limits{}), governance.SourcePython)
	resp, isErr := b.Call(ctx, "open", json.RawMessage(`{"a":[1,"x"]}`))
	if isErr || string(resp) != `{"a":[1,"x"]}` || got == nil {
		t.Fatalf("open tool: %s (error %v), got %v", resp, isErr, got)
	}
	if !strings.Contains(r.Stubs(), `def open() -> "Any":`) {
		t.Errorf("stubs:\n%s", r.Stubs())
	}
}
