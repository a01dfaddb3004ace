package wasmbox

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkFreshRunPhases is Sandbox.Run("print(1)") (P1) cut into its phases, each reported as its median per
// run in µs (phase-µs): the span, the workspace, the instance, the program (guest and host), closing (with the
// memory reset), and the end of the span. Sub-benchmark "reused" is what Run does: it takes the instance an
// earlier Run left (recycled to how it was made) and recycles it again at close. "new" instantiates every time
// and closes the instance, as the first Run, a Session or a Run beyond the spares does; its instance phase is
// mostly wazero filling the function table.
//
//	go test -run '^$' -bench FreshRunPhases -benchtime 2000x ./wasmbox/
//
// With -cpu-phases the phases are measured in the thread's CPU time instead of wall time, which a busy machine
// disturbs less.
func BenchmarkFreshRunPhases(b *testing.B) {
	b.Run("reused", func(b *testing.B) { benchRunPhases(b, true) })
	b.Run("new", func(b *testing.B) { benchRunPhases(b, false) })
}

func benchRunPhases(b *testing.B, reuse bool) {
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(ctx)
	runtime.LockOSThread() // the thread's CPU clock must follow this goroutine
	defer runtime.UnlockOSThread()
	now := time.Now
	if *cpuPhases {
		now = threadCPUTime
	}
	names := []string{"span-start", "workspace", "instance", "exec", "close-reset", "span-end"}
	times := make([][]time.Duration, len(names))
	for b.Loop() {
		var t [7]time.Time
		t[0] = now()
		rctx, span := sb.tel.start(ctx, opRun)
		t[1] = now()
		ws := newWorkspace(sb.cfg.WorkspaceBytes, sb.cfg.WorkspaceFiles, sb.clock().time)
		t[2] = now()
		newGuest := sb.newGuest
		if reuse {
			newGuest = sb.newRunGuest
		}
		g, err := newGuest(rctx, ws)
		if err != nil {
			b.Fatal(err)
		}
		t[3] = now()
		res, err := g.exec(rctx, Program{Code: "print(1)"}, false)
		if err != nil || res.Stdout != "1\n" {
			b.Fatal(err, res)
		}
		t[4] = now()
		g.close(rctx)
		t[5] = now()
		sb.tel.end(rctx, span, opRun, t[0], res, err)
		t[6] = now()
		for i := range names {
			times[i] = append(times[i], t[i+1].Sub(t[i]))
		}
	}
	for i, n := range names {
		slices.Sort(times[i])
		b.ReportMetric(float64(times[i][len(times[i])/2])/1e3, n+"-µs")
	}
}
