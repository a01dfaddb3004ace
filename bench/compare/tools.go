package main

import (
	"context"

	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/governance"
)

// toolCallMicros measures W3: 10,000 calls from Python through an allow-all Gate with an in-memory audit.
func toolCallMicros(ctx context.Context, quick bool) (float64, error) {
	n := 10_000
	if quick {
		n = 3_000
	}
	sb, err := bench.ToolSandbox(ctx, &governance.MemoryAuditor{Limit: 1000}, int64(n)+1)
	if err != nil {
		return 0, err
	}
	defer sb.Close(ctx)
	return bench.ToolCallMicros(ctx, sb, n)
}
