package main

import (
	"context"

	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/governance"
)

// toolCallMicros measures W3: rounds of n calls from Python through an allow-all Gate with an in-memory audit,
// each round's time per call one entry of the spread; between runs after each round (the peers' own loops, so
// that both see the same machine load).
func toolCallMicros(ctx context.Context, n, rounds int, between func()) (bench.Spread, error) {
	sb, err := bench.ToolSandbox(ctx, &governance.MemoryAuditor{Limit: 1000}, int64(n)+1)
	if err != nil {
		return bench.Spread{}, err
	}
	defer sb.Close(ctx)
	if _, err := bench.ToolCallMicros(ctx, sb, 100); err != nil { // warm
		return bench.Spread{}, err
	}
	var us []float64
	for range rounds {
		v, err := bench.ToolCallMicros(ctx, sb, n)
		if err != nil {
			return bench.Spread{}, err
		}
		us = append(us, v)
		between()
	}
	return bench.Summarise(us), nil
}
