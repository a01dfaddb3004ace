package hostfuncs_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/handoff"
)

// BenchmarkBridgeCall is the host's share of one tool call (the guest's encoding and the crossing into the
// host are not in it): the bridge, an allow-all gate with an in-memory audit, validation and the tool, for a
// tool given as a schema (like bench's echo), for a typed Go tool and for a schema tool with two string arguments
// ("pair", the common shape of real arguments); "inline" is the echo tool as a sandbox with
// tools calls it: under the exec's context, which can end, on the caller's goroutine.
func BenchmarkBridgeCall(b *testing.B) {
	type echoIn struct {
		X int `json:"x"`
	}
	reg := hostfuncs.NewRegistry().MustRegister(
		hostfuncs.Tool{
			Name:       "echo",
			Effect:     governance.ReadOnly,
			Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
			Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil },
		},
		hostfuncs.Func("typed", "", func(_ context.Context, in echoIn) (int, error) { return in.X, nil }),
		hostfuncs.Tool{
			Name:   "pair",
			Effect: governance.ReadOnly,
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}},` +
				`"required":["city"]}`),
			Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil },
		},
	)
	for _, name := range []string{"echo", "typed", "inline", "pair"} {
		b.Run(name, func(b *testing.B) {
			tool := name
			ctx := context.Background()
			if name == "inline" {
				tool = "echo"
				c, cancel := context.WithCancel(ctx)
				defer cancel()
				ctx = handoff.WithCallerAbandons(c, func() {})
			}
			gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: &governance.MemoryAuditor{Limit: 1000},
				Limits: governance.Limits{MaxToolCalls: 1 << 40}})
			if err != nil {
				b.Fatal(err)
			}
			br := hostfuncs.NewBridge(reg, gate.NewRun(""), governance.SourcePython)
			args := make([]json.RawMessage, 100)
			for i := range args {
				args[i] = json.RawMessage(`{"x":` + strconv.Itoa(i) + `}`)
				if name == "pair" {
					args[i] = json.RawMessage(`{"city":"Oslo ` + strconv.Itoa(i) + `","units":"metric"}`)
				}
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if resp, isErr := br.Call(ctx, tool, args[i%len(args)]); isErr {
					b.Fatalf("call failed: %s", resp)
				}
				i++
			}
		})
	}
}
