package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// pairRecord is one interleaved pair of W1 or W2, kept whole in the report: nothing is discarded.
type pairRecord struct {
	CPU         int     `json:"cpu"`           // the CPU all members (and the peers) ran on; -1 unpinned
	WasmboxS    float64 `json:"wasmbox_s"`     // in the guest, time.perf_counter around the workload
	NativeS     float64 `json:"native_s"`      // the same natively, the mean of the runs before and after
	WasmboxCPUS float64 `json:"wasmbox_cpu_s"` // getrusage of this process around the whole Run
	NativeCPUS  float64 `json:"native_cpu_s"`  // resource.getrusage of the native process around the workload, the mean
	// The two native runs on their own, wall and CPU time.
	NativeBeforeS    float64 `json:"native_before_s"`
	NativeAfterS     float64 `json:"native_after_s"`
	NativeBeforeCPUS float64 `json:"native_before_cpu_s"`
	NativeAfterCPUS  float64 `json:"native_after_cpu_s"`
}

// pairBudget is how many pairs to run: at least min, then more while spend has not elapsed, at most max.
type pairBudget struct {
	min, max int
	spend    time.Duration
}

type pairsResult struct {
	ours, native     bench.Spread
	ratio, wallRatio bench.Spread
	pairs            []pairRecord
	peerS, peerR     map[*peer][]float64
}

// measurePairs times a workload in interleaved pairs, wasmbox and native, and after each pair on every peer.
//
// A pair is native, wasmbox, native again, and its ratio is wasmbox's time over the mean of the two native ones:
// a CPU that changes speed during the pair (which a virtual machine's do, by a factor of up to 2 within seconds,
// with nothing inside the machine to show for it) moves both sides of the ratio alike, to first order. Each pair
// runs on one CPU (pin, when not nil), the pairs going round the CPUs in turn, so that the members of a pair never
// compare two CPUs. The ratio is that of the CPU time (user + system, getrusage) each side spent: a member
// descheduled by another process here loses wall time but not CPU time. Both sides read the same counter of their
// own process; the wasmbox side's bracket is the whole Run, which adds the sandbox's start and end (about 0.2 ms)
// to a workload of a quarter of a second or more. The wall-time ratio of the same pairs is kept as well, and
// without CPU times (outside Linux) it is the ratio.
func measurePairs(ctx context.Context, sb *wasmbox.Sandbox, py, code string, peers []*peer, pin *pinning, b pairBudget) (pairsResult, error) {
	res := pairsResult{peerS: map[*peer][]float64{}, peerR: map[*peer][]float64{}}
	var ours, native, ratios, wall []float64
	defer func() {
		if pin != nil {
			_ = pin.release()
		}
	}()
	start := time.Now()
	for i := 0; i < b.max && (i < b.min || time.Since(start) < b.spend); i++ {
		rec := pairRecord{CPU: -1}
		if pin != nil {
			rec.CPU = pin.cpus[i%len(pin.cpus)]
			if err := pin.pin(rec.CPU); err != nil {
				return res, err
			}
		}
		if py != "" {
			var err error
			if rec.NativeBeforeS, rec.NativeBeforeCPUS, err = nativeTimeCPU(py, code); err != nil {
				return res, fmt.Errorf("native: %w", err)
			}
		}
		c0 := cpuTime()
		x, err := bench.GuestTime(ctx, sb, code, 1)
		if err != nil {
			return res, err
		}
		rec.WasmboxS, rec.WasmboxCPUS = x, (cpuTime() - c0).Seconds()
		if py != "" {
			if rec.NativeAfterS, rec.NativeAfterCPUS, err = nativeTimeCPU(py, code); err != nil {
				return res, fmt.Errorf("native: %w", err)
			}
			rec.NativeS, rec.NativeCPUS = (rec.NativeBeforeS+rec.NativeAfterS)/2, (rec.NativeBeforeCPUS+rec.NativeAfterCPUS)/2
		}
		res.pairs = append(res.pairs, rec)
		ours = append(ours, rec.WasmboxS)
		if rec.NativeS > 0 {
			native, wall = append(native, rec.NativeS), append(wall, rec.WasmboxS/rec.NativeS)
			if rec.WasmboxCPUS > 0 && rec.NativeCPUS > 0 {
				ratios = append(ratios, rec.WasmboxCPUS/rec.NativeCPUS)
			}
		}
		for _, p := range peers {
			v, err := p.ask(map[string]any{"op": "run", "code": code}, "s")
			if err != nil {
				if len(res.peerS[p]) == 0 && !slices.ContainsFunc(p.row.Errors, func(e string) bool { return strings.HasPrefix(e, "W") }) {
					p.fail(workloadName(code), err)
				}
				continue
			}
			res.peerS[p] = append(res.peerS[p], v)
			if rec.NativeS > 0 {
				res.peerR[p] = append(res.peerR[p], v/rec.NativeS)
			}
		}
	}
	if len(ratios) < len(wall) { // no CPU times: the wall-time ratio is the ratio
		ratios = wall
	}
	res.ours, res.native, res.ratio, res.wallRatio = bench.Summarise(ours), bench.Summarise(native), bench.Summarise(ratios), bench.Summarise(wall)
	return res, nil
}

func workloadName(code string) string {
	switch code {
	case bench.W1:
		return "W1"
	case bench.W2:
		return "W2"
	}
	return "workload"
}

// nativeTimeCPU runs a workload once natively and returns its wall time and the CPU time its process spent on it,
// both measured around the workload inside the process (bench.TimedNative).
func nativeTimeCPU(py, w string) (wall, cpu float64, err error) {
	out, err := exec.Command(py, "-I", "-S", "-c", bench.TimedNative(w)).Output()
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("compare: native printed %q, not two numbers", out)
	}
	if wall, err = strconv.ParseFloat(f[0], 64); err != nil {
		return 0, 0, fmt.Errorf("compare: native wall time: %w", err)
	}
	if cpu, err = strconv.ParseFloat(f[1], 64); err != nil {
		return 0, 0, fmt.Errorf("compare: native CPU time: %w", err)
	}
	return wall, cpu, nil
}
