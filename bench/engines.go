package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// EngineRow is one engine's figures in bench/compare's engine table.
type EngineRow struct {
	FreshRunP50MS float64 `json:"fresh_run_p50_ms"`
	W1Seconds     float64 `json:"w1_seconds"`
	W2Seconds     float64 `json:"w2_seconds"`
}

// EngineNumbers measures one engine: the p50 of runs fresh runs of print(1) (after 3 unmeasured), then the
// median in-guest time of W1 and of W2 over reps runs each. cfg selects the engine (Config.Engine) and its
// limits.
func EngineNumbers(ctx context.Context, cfg wasmbox.Config, reps, runs int) (EngineRow, error) {
	if reps < 1 || runs < 1 {
		return EngineRow{}, fmt.Errorf("bench: EngineNumbers needs reps and runs ≥ 1 (got %d, %d)", reps, runs)
	}
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		return EngineRow{}, err
	}
	defer sb.Close(ctx)
	var lat []time.Duration
	for i := 0; i < runs+3; i++ {
		t := time.Now()
		if _, err := sb.Run(ctx, "print(1)"); err != nil {
			return EngineRow{}, err
		}
		if i >= 3 {
			lat = append(lat, time.Since(t))
		}
	}
	slices.Sort(lat)
	row := EngineRow{FreshRunP50MS: float64(lat[len(lat)/2]) / float64(time.Millisecond)}
	if row.W1Seconds, err = GuestTime(ctx, sb, W1, reps); err != nil {
		return row, err
	}
	row.W2Seconds, err = GuestTime(ctx, sb, W2, reps)
	return row, err
}

// GuestTime runs a workload reps times in sb, each timing itself inside the guest (Timed), and returns the
// median in seconds.
func GuestTime(ctx context.Context, sb *wasmbox.Sandbox, workload string, reps int) (float64, error) {
	if reps < 1 {
		return 0, fmt.Errorf("bench: GuestTime needs reps ≥ 1 (got %d)", reps)
	}
	var ts []float64
	for range reps {
		v, err := runFloat(ctx, sb, Timed(workload))
		if err != nil {
			return 0, err
		}
		ts = append(ts, v)
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// runFloat runs a program that prints one number and returns it.
func runFloat(ctx context.Context, sb *wasmbox.Sandbox, code string) (float64, error) {
	res, err := sb.Run(ctx, code)
	if err != nil {
		return 0, err
	}
	if res.Exception != nil {
		return 0, fmt.Errorf("bench: the program raised %s", res.Exception.Traceback)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(res.Stdout), 64)
	if err != nil {
		return 0, fmt.Errorf("bench: the program printed %q, not a number: %w", res.Stdout, err)
	}
	return v, nil
}
