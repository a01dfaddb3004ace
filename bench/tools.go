package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// w3Func is W3's loop. It runs in a function, as benchmarks of Python do: at module level every iteration would
// also store i in the module's dict and look tools up in it, a cost that is not the tool call's and that differs
// between two builds of the same interpreter (the dict's collisions depend on the snapshot's string-hash
// secret). bench/compare runs the same loop on the peers.
const w3Func = "def w3(n):\n    for i in range(n):\n        tools.echo(i)\n"

// ToolCalls is the W3 program: n calls of a trivial tool from Python, timed inside the guest (seconds).
func ToolCalls(n int) string {
	return fmt.Sprintf("import time, tools\n%st0 = time.perf_counter()\nw3(%d)\nprint(time.perf_counter() - t0)\n", w3Func, n)
}

// ToolCallLoop is W3's loop alone, without the timing, for instruction counts (like W1Loop).
func ToolCallLoop(n int) string {
	return fmt.Sprintf("import tools\n%sw3(%d)\n", w3Func, n)
}

// ToolSandbox returns a sandbox with one read-only tool, echo(x), behind an allow-all gate auditing to auditor.
func ToolSandbox(ctx context.Context, auditor governance.Auditor, maxCalls int64) (*wasmbox.Sandbox, error) {
	cfg, err := ToolConfig(auditor, maxCalls)
	if err != nil {
		return nil, err
	}
	return wasmbox.New(ctx, cfg)
}

// ToolConfig is the configuration of ToolSandbox.
func ToolConfig(auditor governance.Auditor, maxCalls int64) (wasmbox.Config, error) {
	echo := hostfuncs.Tool{
		Name:       "echo",
		Effect:     governance.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
		Handler:    func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil },
	}
	gate, err := governance.NewGate(governance.GateConfig{
		Policy:  governance.AllowAllPolicy{},
		Auditor: auditor,
		Limits:  governance.Limits{MaxToolCalls: maxCalls},
	})
	if err != nil {
		return wasmbox.Config{}, err
	}
	return wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echo), Gate: gate}, nil
}

// ToolCallMicros runs n calls and returns the in-guest time per call in µs.
func ToolCallMicros(ctx context.Context, sb *wasmbox.Sandbox, n int) (float64, error) {
	s, err := runFloat(ctx, sb, ToolCalls(n))
	if err != nil {
		return 0, err
	}
	return s * 1e6 / float64(n), nil
}
