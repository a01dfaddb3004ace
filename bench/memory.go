package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// PSSPerSession measures W4: the proportional set size that n live idle sessions add to the process, divided
// by n, rounds times (each a spread entry, MiB).
//
// Each round reads the process's PSS with no session open and again with n open, both right after a full
// collection that returns free heap to the system (debug.FreeOSMemory), so what the Go heap happened to hold
// before is not counted for or against the sessions. A warm-up round first brings the pools and caches to
// their steady state. Live sessions only add mappings and heap, so a negative delta means the method failed:
// it is reported as an error, never clamped.
func PSSPerSession(ctx context.Context, sb *wasmbox.Sandbox, n, rounds int) (Spread, error) {
	open := func() ([]*wasmbox.Session, error) {
		var ss []*wasmbox.Session
		for range n {
			se, err := sb.NewSession(ctx, nil)
			if err != nil {
				return ss, err
			}
			ss = append(ss, se)
			if _, err := se.Exec(ctx, "x = 1"); err != nil {
				return ss, err
			}
		}
		return ss, nil
	}
	closeAll := func(ss []*wasmbox.Session) {
		for _, se := range ss {
			se.Close(ctx)
		}
	}
	warm, err := open()
	closeAll(warm)
	if err != nil {
		return Spread{}, err
	}
	var per []float64
	for range rounds {
		debug.FreeOSMemory()
		before, err := PSS()
		if err != nil {
			return Spread{}, err
		}
		ss, err := open()
		if err != nil {
			closeAll(ss)
			return Spread{}, err
		}
		debug.FreeOSMemory()
		after, err := PSS()
		closeAll(ss)
		if err != nil {
			return Spread{}, err
		}
		d := float64(after-before) / float64(n) / 1024
		if d < 0 {
			return Spread{}, fmt.Errorf("PSS fell by %d KiB with %d sessions open: the measure is disturbed", before-after, n)
		}
		per = append(per, d)
	}
	return Summarise(per), nil
}

// PSS reads the process's proportional set size in KiB.
func PSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, fmt.Errorf("PSS needs Linux /proc/self/smaps_rollup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no Pss line")
}
