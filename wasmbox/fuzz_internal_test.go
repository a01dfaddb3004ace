package wasmbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// FuzzHostCall feeds arbitrary guest requests to the host's call handler: it must never panic and must answer
// every malformed request with an error response the guest can decode.
func FuzzHostCall(f *testing.F) {
	for _, s := range []string{``, `{`, `{"op":"tool","name":"echo","args":{"x":1}}`, `{"op":"tool","name":"echo","args":[]}`,
		`{"op":"exception","type":"E","line":3}`, `{"op":"unwinding"}`, `{"op":"nope"}`, `null`, `{"op":"tool","args":"x"}`} {
		f.Add([]byte(s))
	}
	reg := hostfuncs.NewRegistry().MustRegister(hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
		Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }})
	gate, err := DefaultGate()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		h := &guestHost{state: &execState{bridge: hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)}}
		resp, isErr := h.Call(context.Background(), req)
		if isErr {
			var e struct{ Type, Message string }
			if err := json.Unmarshal(resp, &e); err != nil || e.Type == "" {
				t.Fatalf("error response %q is not {type, message}", resp)
			}
		} else if !json.Valid(resp) {
			t.Fatalf("response %q is not JSON", resp)
		}
	})
}
