// Command compare runs the same workloads on wasmbox and on native CPython in one process run and prints the
// ratios:
//
//	go run ./bench/compare [-quick] [-json] [-callgrind] [-no-sci] [-tasks] [-p2 [-p2-rounds N] [-p2-cli BIN]]
//	go run ./bench/compare -sci [-quick] [-json]   (only the sci runtime)
//	go run ./bench/compare -against DIR [-quick] [-callgrind]   (the shipped interpreter against the one built in DIR)
//
// W0 fresh sandbox + print(1) p50/p90; W1 pure-Python loop; W2 json of 20k dicts; W3 tool calls through the
// Gate; W4 memory added per live idle sandbox; W5 trivial runs per second on all cores. The hard deadline is on
// in every wasmbox row; deadline_overhead_ratio compares W1's loop, run in a function, with the uninstrumented
// build. The engine table ("engines") has W0, W1 and W2 on every engine linked in and on the wasmtime engine,
// which lives in its own module and is measured by a child built from it (cgo; without a C toolchain the row is
// skipped with the build's error). The sci runtime (numpy and pandas) is measured by a child built from the sci
// module: its fresh run, its import without the snapshot, its PSS, and vectorised workloads (array math on 10⁶
// elements, a groupby over 10⁵ rows, read_csv of 4 MB) against the same numpy and pandas sources built natively
// by pyruntime/sci/native.sh (without that build the ratios are skipped, saying so).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/assets/uninstrumented"
	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/wasmbox"
)

const benchTimeout = 10 * time.Minute

type report struct {
	FreshRunP50MS     float64                    `json:"fresh_run_p50_ms"`
	FreshRunP90MS     float64                    `json:"fresh_run_p90_ms"`
	NativePythonP50MS *float64                   `json:"native_python_p50_ms"`
	W1Seconds         float64                    `json:"w1_seconds"`
	W1NativeSeconds   *float64                   `json:"w1_native_seconds"`
	W1RatioVsNative   *float64                   `json:"w1_ratio_vs_native"`
	W1RatioSpread     bench.Spread               `json:"w1_ratio_spread"`
	W1WallRatioSpread bench.Spread               `json:"w1_wall_ratio_spread"`
	W1Pairs           []pairRecord               `json:"w1_pairs"`
	W2Seconds         float64                    `json:"w2_seconds"`
	W2NativeSeconds   *float64                   `json:"w2_native_seconds"`
	W2RatioVsNative   *float64                   `json:"w2_ratio_vs_native"`
	W2RatioSpread     bench.Spread               `json:"w2_ratio_spread"`
	W2WallRatioSpread bench.Spread               `json:"w2_wall_ratio_spread"`
	W2Pairs           []pairRecord               `json:"w2_pairs"`
	DeadlineOverhead  float64                    `json:"deadline_overhead_ratio"`
	DeadlineSpread    bench.Spread               `json:"deadline_overhead_spread"`
	ToolCallUS        *float64                   `json:"tool_call_us"`
	ToolCallSpread    bench.Spread               `json:"tool_call_us_spread"`
	RSSPerSandboxMiB  float64                    `json:"rss_per_sandbox_mib"` // PSS, as the comment of W4 says
	PSSSpread         bench.Spread               `json:"pss_per_sandbox_mib_spread"`
	NewProcessP50MS   *float64                   `json:"new_process_first_result_p50_ms"`
	P2                *p2Report                  `json:"p2"`
	RunsPerSec        float64                    `json:"runs_per_sec"`
	RunsPerSecSpread  bench.Spread               `json:"runs_per_sec_spread"`
	Callgrind         *callgrindReport           `json:"callgrind,omitempty"`
	NativePython      string                     `json:"native_python"`
	Engines           map[string]bench.EngineRow `json:"engines"`
	// The sci runtime (numpy and pandas), measured by a child built from the sci module; its headline figures
	// also at the top level.
	Sci              *bench.SciRow `json:"sci,omitempty"`
	SciFreshRunP50MS *float64      `json:"sci_fresh_run_p50_ms"`
	SciImportMS      *float64      `json:"sci_import_ms"`
	SciPSSMiB        *float64      `json:"sci_pss_per_sandbox_mib"`
	// Durable tasks (P10, P11), with the headline figures at the top level.
	Tasks                  *taskReport        `json:"tasks,omitempty"`
	ResumeP50MS            *float64           `json:"resume_p50_ms"`
	SQLiteGovernedCallUS   *float64           `json:"sqlite_governed_call_us"`
	PostgresGovernedCallUS *float64           `json:"postgres_governed_call_us"`
	Peers                  map[string]peerRow `json:"peers"`
	Skipped                []string           `json:"skipped"`
	Cores                  int                `json:"cores"`
	Quick                  bool               `json:"quick"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == p2ChildFlag {
		p2Child()
		return
	}
	if len(os.Args) == 4 && os.Args[1] == resumeChildFlag {
		resumeChild(os.Args[2], os.Args[3])
		return
	}
	quick := flag.Bool("quick", false, "fewer repetitions (a few minutes with the peers, for CI)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	against := flag.String("against", "", "also time W1/W2 on the interpreter built in DIR (e.g. pyruntime/build.sh --variant plain --out DIR) and print the ratios")
	cg := flag.Bool("callgrind", false, "also count W1's instructions per loop iteration (native, wasmbox, wasmbox without the deadline) and W3's per tool call under valgrind: slow, deterministic")
	guestLoop := flag.Int("guest-loop", 0, "internal: run W1 with N iterations in one sandbox and exit (what -callgrind counts)")
	guestToolCalls := flag.Int("guest-toolcalls", 0, "internal: make N tool calls in one sandbox and exit (what -callgrind counts for W3)")
	plain := flag.Bool("plain", false, "internal: with -guest-loop, use the interpreter without the deadline counter")
	interpDir := flag.String("interp", "", "internal: with -guest-loop, use the interpreter built in DIR")
	p2Only := flag.Bool("p2", false, "measure only P2 (new process → first result) and its parts")
	p2Rounds := flag.Int("p2-rounds", 7, "with -p2: interleaved rounds")
	p2CLI := flag.String("p2-cli", "", "with -p2: the wasmbox CLI binary to time (default: build ./cmd/wasmbox)")
	sciOnly := flag.Bool("sci", false, "measure only the sci runtime (numpy and pandas; a child built from the sci module)")
	noSci := flag.Bool("no-sci", false, "leave the sci runtime out of the full run")
	tasksOnly := flag.Bool("tasks", false, "measure only durable tasks and shared stores (P10 resume, P11 governed calls with state in SQLite and, with WASMBOX_TEST_POSTGRES, PostgreSQL)")
	flag.Parse()
	if *p2Only {
		r, err := measureP2(context.Background(), *p2Rounds, *p2CLI)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		if *asJSON {
			_ = json.NewEncoder(os.Stdout).Encode(r)
		} else {
			printP2(r)
		}
		return
	}
	if *tasksOnly {
		var r report
		r.setTasks(context.Background(), map[bool]int{true: 3, false: 7}[*quick])
		if *asJSON {
			_ = json.NewEncoder(os.Stdout).Encode(r)
		} else {
			printTasks(r)
		}
		return
	}
	if *sciOnly {
		row, err := sciNumbers(context.Background(), map[bool]int{true: 3, false: 5}[*quick])
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		if *asJSON {
			_ = json.NewEncoder(os.Stdout).Encode(row)
		} else {
			printSci(row)
		}
		return
	}
	if *guestToolCalls > 0 {
		if err := guestToolCallsOnce(*guestToolCalls); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if *guestLoop > 0 {
		if err := guestLoopOnce(*guestLoop, *plain, *interpDir); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if *against != "" {
		if err := compareBuilds(context.Background(), *against, *quick, *cg); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*quick, *asJSON, *cg, !*noSci); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(quick, asJSON, cg, sci bool) error {
	ctx := context.Background()
	r := report{Cores: runtime.NumCPU(), Quick: quick, Peers: map[string]peerRow{}, Skipped: []string{}}
	reps, w0n, rounds := 7, 200, 5
	if quick {
		reps, w0n, rounds = 3, 60, 3
	}
	// The timeouts are long: on a loaded machine a workload may take many times its usual time, and this is
	// a measure of speed, not of the deadline.
	sb, err := wasmbox.New(ctx, wasmbox.Config{Timeout: benchTimeout})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	logf := func(format string, a ...any) {
		if !asJSON {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}
	// W0, before the peers start: their node processes load for seconds, and on two cores a fresh run
	// measured beside them measures them.
	var lat []time.Duration
	for i := 0; i < w0n+5; i++ {
		t := time.Now()
		if _, err := sb.Run(ctx, "print(1)"); err != nil {
			return err
		}
		if i >= 5 {
			lat = append(lat, time.Since(t))
		}
	}
	r.FreshRunP50MS, r.FreshRunP90MS = pct(lat, 50), pct(lat, 90)
	logf("W0 fresh run p50 %.2f ms", r.FreshRunP50MS)
	tmp, err := os.MkdirTemp("", "wasmbox-compare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	peers, missing := startPeers(tmp)
	r.Skipped = append(r.Skipped, missing...)
	defer func() {
		for _, p := range peers {
			p.stop()
		}
	}()

	for _, p := range peers {
		var ms []float64
		n := 50                  // a new Monty is cheap
		if p.name == "pyodide" { // seconds each
			n = map[bool]int{true: 1, false: 3}[quick]
		}
		for range n {
			v, err := p.ask(map[string]any{"op": "fresh"}, "ms")
			if err != nil {
				p.fail("fresh", err)
				break
			}
			ms = append(ms, v)
		}
		p.row.FreshRun = bench.Summarise(ms)
		p.row.FreshRunP50MS = p.row.FreshRun.Median
	}

	// W1 and W2, deadline on, in interleaved pairs: wasmbox and native (in turn first), then every peer, all
	// pinned to one CPU per pair (measurePairs).
	py := findPython()
	if py == "" {
		r.Skipped = append(r.Skipped, "native python3: not found on PATH (or $WASMBOX_NATIVE_PYTHON)")
	}
	pin, err := newPinning()
	if err != nil {
		r.Skipped = append(r.Skipped, "pinning a pair to one CPU: "+err.Error()+" (pairs may straddle CPUs)")
		pin = nil
	} else {
		for _, p := range peers {
			pin.also(p.cmd.Process.Pid)
		}
	}
	budget := map[bool]pairBudget{true: {min: 9, max: 27, spend: 20 * time.Second}, false: {min: 15, max: 45, spend: 60 * time.Second}}[quick]
	for _, w := range []struct {
		name, code string
		ours       *float64
		native     **float64
		ratio      **float64
		spread     *bench.Spread
		wall       *bench.Spread
		pairs      *[]pairRecord
	}{
		{"W1", bench.W1, &r.W1Seconds, &r.W1NativeSeconds, &r.W1RatioVsNative, &r.W1RatioSpread, &r.W1WallRatioSpread, &r.W1Pairs},
		{"W2", bench.W2, &r.W2Seconds, &r.W2NativeSeconds, &r.W2RatioVsNative, &r.W2RatioSpread, &r.W2WallRatioSpread, &r.W2Pairs},
	} {
		m, err := measurePairs(ctx, sb, py, w.code, peers, pin, budget)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		*w.ours, *w.pairs = m.ours.Median, m.pairs
		if m.native.N > 0 {
			n := m.native.Median
			*w.native, *w.spread, *w.wall = &n, m.ratio, m.wallRatio
			*w.ratio = &w.spread.Median
		}
		for _, p := range peers {
			if len(m.peerS[p]) == 0 {
				continue
			}
			s := bench.Summarise(m.peerR[p])
			switch w.name {
			case "W1":
				p.row.W1Seconds, p.row.W1RatioSpread = bench.Summarise(m.peerS[p]).Median, s
				if s.N > 0 {
					p.row.W1RatioVsNativ = &s.Median
				}
			case "W2":
				p.row.W2Seconds, p.row.W2RatioSpread = bench.Summarise(m.peerS[p]).Median, s
				if s.N > 0 {
					p.row.W2RatioVsNativ = &s.Median
				}
			}
		}
		logf("%s %.3f s, ratio to native %s CPU time, q1–q3 %.2f–%.2f (wall time %s)", w.name, *w.ours,
			w.spread.Format("×", 2), w.spread.Q1, w.spread.Q3, w.wall.Format("×", 2))
	}

	// The deadline's cost: W1's loop in a function (bench.W1Loop: module-level names would make it depend on
	// each interpreter's string-hash secret) on the instrumented and the uninstrumented interpreter, both
	// loaded the same way, in interleaved pairs.
	if it, err := uninstrumented.Load(); err == nil {
		plain, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: it, Timeout: benchTimeout})
		if err != nil {
			return err
		}
		shipped, err := assets.Load()
		if err != nil {
			plain.Close(ctx)
			return err
		}
		instrumented, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: shipped, Timeout: benchTimeout})
		if err != nil {
			plain.Close(ctx)
			return err
		}
		loop := bench.W1Loop(3_000_000)
		_, _, s, err := bench.Pairs(reps,
			func() (float64, error) { return bench.GuestTime(ctx, instrumented, loop, 1) },
			func() (float64, error) { return bench.GuestTime(ctx, plain, loop, 1) })
		plain.Close(ctx)
		instrumented.Close(ctx)
		if err != nil {
			return err
		}
		r.DeadlineOverhead, r.DeadlineSpread = s.Median, s
	} else {
		r.Skipped = append(r.Skipped, "deadline overhead: "+err.Error())
	}
	logf("deadline overhead %s", r.DeadlineSpread.Format("×", 3))

	// Every engine linked in, side by side. The wasmtime engine lives in its own module
	// (github.com/wasmbox/wasmbox/wasmtime), which this command cannot import: its row comes from a child.
	r.Engines = map[string]bench.EngineRow{}
	for _, name := range wasmbox.Engines() {
		row, err := bench.EngineNumbers(ctx, wasmbox.Config{Engine: name, Timeout: benchTimeout}, max(reps/2, 3), w0n/2)
		if err != nil {
			r.Skipped = append(r.Skipped, "engine "+name+": "+err.Error())
			continue
		}
		r.Engines[name] = row
	}
	// The wasmtime engine, measured the same way in a child built from its module (P3 asks ≤ 2× native of it).
	if row, err := wasmtimeEngineNumbers(ctx, max(reps/2, 3), w0n/2); err != nil {
		r.Skipped = append(r.Skipped, "engine wasmtime: "+err.Error())
	} else {
		r.Engines["wasmtime"] = row
	}

	if sci {
		row, err := sciNumbers(ctx, rounds)
		if err != nil {
			r.Skipped = append(r.Skipped, "sci runtime: "+err.Error())
		} else {
			r.Sci, r.SciFreshRunP50MS, r.SciImportMS, r.SciPSSMiB = row, &row.FreshRunP50MS, &row.ImportMS.Median, &row.PSSPerSandboxMiB.Median
			r.Skipped = append(r.Skipped, row.Skipped...)
			logf("sci fresh run p50 %.2f ms, import %.0f ms", row.FreshRunP50MS, row.ImportMS.Median)
		}
	}

	r.setTasks(ctx, rounds)

	// Native CPython's start, for scale.
	if py != "" {
		r.NativePython = py
		if out, err := exec.Command(py, "-c", "import sys; print(sys.version.split()[0])").Output(); err == nil {
			r.NativePython += " (" + strings.TrimSpace(string(out)) + ")"
		}
		var starts []time.Duration
		for i := 0; i < max(reps*2, 10); i++ {
			t := time.Now()
			if err := exec.Command(py, "-I", "-S", "-c", "print(1)").Run(); err != nil {
				return err
			}
			starts = append(starts, time.Since(t))
		}
		p50 := pct(starts, 50)
		r.NativePythonP50MS = &p50
	}

	// W3: the tool bridge, rounds of n calls, each round followed by the peers' own host-function loop. A round
	// is short (about 20 ms), so there are many: with five, one slow stretch of a shared machine moved the
	// median by a quarter.
	n, w3Rounds := 10_000, 25
	if quick {
		n, w3Rounds = 3_000, 5
	}
	if s, err := toolCallMicros(ctx, n, w3Rounds, func() {
		for _, p := range peers {
			v, err := p.ask(map[string]any{"op": "tool", "n": n}, "us")
			if err != nil {
				if len(p.toolUS) == 0 && !slices.ContainsFunc(p.row.Errors, func(e string) bool { return strings.HasPrefix(e, "tool") }) {
					p.fail("tool", err)
				}
				continue
			}
			p.toolUS = append(p.toolUS, v)
		}
	}); err == nil {
		r.ToolCallUS, r.ToolCallSpread = &s.Median, s
	} else {
		r.Skipped = append(r.Skipped, "W3 tool calls: "+err.Error())
	}
	for _, p := range peers {
		p.row.ToolCall = bench.Summarise(p.toolUS)
		if len(p.toolUS) > 0 {
			p.row.ToolCallUS = &p.row.ToolCall.Median
		}
		r.Peers[p.name] = p.row
	}

	// W4: PSS per live idle sandbox.
	ns := 24
	if quick {
		ns = 12
	}
	if s, err := bench.PSSPerSession(ctx, sb, ns, rounds); err == nil {
		r.RSSPerSandboxMiB, r.PSSSpread = s.Median, s
	} else {
		r.Skipped = append(r.Skipped, "W4: "+err.Error())
	}

	// W5: trivial runs per second on all cores, counted over fixed windows.
	dur := 2 * time.Second
	if quick {
		dur = time.Second
	}
	var rps []float64
	for range max(rounds-2, 2) {
		rps = append(rps, throughput(ctx, sb, dur))
	}
	r.RunsPerSecSpread = bench.Summarise(rps)
	r.RunsPerSec = r.RunsPerSecSpread.Median

	// P2: a new process (the CLI) to its first result, with the cache warm and from a precompiled directory, with
	// its parts (p2.go).
	if p2, err := measureP2(ctx, max(reps, 5), ""); err == nil {
		r.P2, r.NewProcessP50MS = p2, &p2.CLIWarmCache.MedianMS
	} else {
		r.Skipped = append(r.Skipped, "P2 new process: "+err.Error())
	}

	if cg {
		c, err := callgrindW1(ctx, py)
		if err != nil {
			r.Skipped = append(r.Skipped, "callgrind: "+err.Error())
		} else {
			r.Callgrind = c
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printTable(r)
	return nil
}

func pct(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100].Microseconds()) / 1000
}

// findPython prefers $WASMBOX_NATIVE_PYTHON, then a working python3.13 on PATH, then one that pyenv installed
// without selecting it, then python3 (the version is reported).
func findPython() string {
	if p := os.Getenv("WASMBOX_NATIVE_PYTHON"); p != "" {
		return p
	}
	works := func(p string) bool { return exec.Command(p, "-c", "pass").Run() == nil }
	if p, err := exec.LookPath("python3.13"); err == nil && works(p) {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		m, _ := filepath.Glob(filepath.Join(home, ".pyenv/versions/3.13*/bin/python3.13"))
		if len(m) > 0 && works(m[len(m)-1]) {
			return m[len(m)-1]
		}
	}
	if p, err := exec.LookPath("python3"); err == nil && works(p) {
		return p
	}
	return ""
}

// throughput counts the trivial runs that all cores complete in dur (runs started before the end and
// finished after it are not counted) and returns them per second.
func throughput(ctx context.Context, sb *wasmbox.Sandbox, dur time.Duration) float64 {
	var n atomic.Int64
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := sb.Run(ctx, "print(1)"); err == nil && !time.Now().After(deadline) {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / dur.Seconds()
}

func f(p *float64, format string) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf(format, *p)
}

func printTable(r report) {
	fmt.Printf("wasmbox bench/compare (%d cores, quick=%v; native: %s)\n", r.Cores, r.Quick, orDash(r.NativePython))
	fmt.Printf("ratios: median of interleaved pairs (min–max, n pairs), W1/W2 in CPU time with both members on one CPU; wall-clock figures depend on the machine's load\n\n")
	row := func(a, b, c, d string) { fmt.Printf("%-40s %-34s %-12s %s\n", a, b, c, d) }
	row("workload", "wasmbox (deadline on)", "native", "ratio (min–max) / target")
	row("W0 fresh sandbox + print(1) p50 (p90)", fmt.Sprintf("%.2f ms (%.2f)", r.FreshRunP50MS, r.FreshRunP90MS), f(r.NativePythonP50MS, "%.2f ms"), "P1 ≤ 0.2 ms")
	row("new process → first result (CLI, p50)", f(r.NewProcessP50MS, "%.1f ms"), "", "P2 ≤ 150 ms")
	if r.P2 != nil && r.P2.WasmtimeWarmCache != nil {
		row("  a program on the wasmtime engine (p50)", fmt.Sprintf("%.1f ms", r.P2.WasmtimeWarmCache.MedianMS), "", "P2 ≤ 150 ms")
	}
	row("W1 pure-Python loop", fmt.Sprintf("%.3f s", r.W1Seconds), f(r.W1NativeSeconds, "%.3f s"), r.W1RatioSpread.Format("×", 2)+" P3 ≤ 2×")
	row("W2 json 20k dicts", fmt.Sprintf("%.3f s", r.W2Seconds), f(r.W2NativeSeconds, "%.3f s"), r.W2RatioSpread.Format("×", 2)+" P3 ≤ 2×")
	row("deadline cost on W1's loop", r.DeadlineSpread.Format("×", 3), "", "P4 ≤ ×1.10")
	row("W3 tool call through the Gate", r.ToolCallSpread.Format(" µs", 2), "", "P5 ≤ 1 µs")
	row("W4 PSS per live idle sandbox", r.PSSSpread.Format(" MiB", 2), "", "P6 ≤ 2 MiB")
	row("W5 trivial runs/s, all cores", r.RunsPerSecSpread.Format("", 0), "", "P7 ≥ 1,500")
	if c := r.Callgrind; c != nil {
		row("W1 instructions per iteration", fmt.Sprintf("%.1f (no deadline %.1f)", c.WasmboxPerIter, c.PlainPerIter), fmt.Sprintf("%.1f", c.NativePerIter),
			fmt.Sprintf("×%.3f of native; deadline ×%.3f (callgrind)", c.WasmboxPerIter/c.NativePerIter, c.WasmboxPerIter/c.PlainPerIter))
		if c.ToolCallPerCall > 0 {
			row("W3 instructions per tool call", fmt.Sprintf("%.0f", c.ToolCallPerCall), "", "guest and host (callgrind)")
		}
	}
	for _, name := range sortedKeys(r.Engines) {
		e := r.Engines[name]
		ratio := func(v float64, n *float64) string {
			if n == nil {
				return ""
			}
			return fmt.Sprintf(" (×%.2f native)", v / *n)
		}
		target := ""
		if name == "wasmtime" {
			target = " · P3 ≤ 2× native with wasmtime"
		}
		fmt.Printf("engine %-9s fresh run p50 %.2f ms · W1 %.3f s%s · W2 %.3f s%s%s\n", name, e.FreshRunP50MS,
			e.W1Seconds, ratio(e.W1Seconds, r.W1NativeSeconds), e.W2Seconds, ratio(e.W2Seconds, r.W2NativeSeconds), target)
	}
	printP2(r.P2)
	printSci(r.Sci)
	printTasks(r)
	for _, name := range slices.Sorted(maps.Keys(r.Peers)) {
		p := r.Peers[name]
		fmt.Printf("\npeer %s (%s %s, in node; timed around the call in node)\n", name, p.Package, p.Version)
		row("  fresh instance + print(1) p50", p.FreshRun.Format(" ms", 2), "", "")
		row("  W1 pure-Python loop", fmt.Sprintf("%.3f s", p.W1Seconds), "", p.W1RatioSpread.Format("×", 2))
		row("  W2 json 20k dicts", fmt.Sprintf("%.3f s", p.W2Seconds), "", p.W2RatioSpread.Format("×", 2))
		row("  host function call", p.ToolCall.Format(" µs", 2), "", "no gate, no audit")
		for _, e := range p.Errors {
			fmt.Println("  not measured:", e)
		}
	}
	fmt.Println()
	for _, s := range r.Skipped {
		fmt.Println("skipped:", s)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func sortedKeys(m map[string]bench.EngineRow) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compareBuilds times bench.BuildWorkloads on the shipped interpreter and on the one in dir, in interleaved
// pairs, and prints each build's median and the median of the per-pair ratios, with their ranges; with cg it
// also counts the instructions per iteration of W1's loop on both (how build options are confirmed:
// pyruntime/MEASURED).
func compareBuilds(ctx context.Context, dir string, quick, cg bool) error {
	it, err := assets.LoadDir(dir)
	if err != nil {
		return err
	}
	other, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: it, Timeout: benchTimeout})
	if err != nil {
		return err
	}
	defer other.Close(ctx)
	// The shipped interpreter goes through Config.Interpreter too, so that both start from a snapshot made
	// here: a module-level workload's speed depends on the snapshot's string-hash secret (bench.W1Loop).
	base, err := assets.Load()
	if err != nil {
		return err
	}
	shipped, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: base, Timeout: benchTimeout})
	if err != nil {
		return err
	}
	defer shipped.Close(ctx)
	reps := 7
	if quick {
		reps = 3
	}
	for _, w := range bench.BuildWorkloads {
		// Interleaved pairs, alternating which build goes first; the ratio is taken within each pair.
		var a, b, ratio []float64
		for i := range reps {
			first, second := shipped, other
			if i%2 == 1 {
				first, second = other, shipped
			}
			x, err := bench.GuestTime(ctx, first, w.Code, 1)
			if err != nil {
				return err
			}
			y, err := bench.GuestTime(ctx, second, w.Code, 1)
			if err != nil {
				return err
			}
			if i%2 == 1 {
				x, y = y, x
			}
			a, b, ratio = append(a, x), append(b, y), append(ratio, x/y)
		}
		sa, sb, sr := bench.Summarise(a), bench.Summarise(b), bench.Summarise(ratio)
		fmt.Printf("%s: shipped %.3f s (%.3f–%.3f), %s %.3f s (%.3f–%.3f): the shipped build takes ×%.3f (%.3f–%.3f) the time, median of %d interleaved pairs\n",
			w.Name, sa.Median, sa.Min, sa.Max, dir, sb.Median, sb.Min, sb.Max, sr.Median, sr.Min, sr.Max, reps)
	}
	if !cg {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	const n = 200_000
	perIter := func(extra ...string) (float64, error) {
		return perIteration(ctx, n, func(k int) []string {
			return append([]string{self, "-guest-loop", strconv.Itoa(k)}, extra...)
		})
	}
	s, err := perIter()
	if err != nil {
		return err
	}
	o, err := perIter("-interp", dir)
	if err != nil {
		return err
	}
	fmt.Printf("W1's loop, instructions per iteration (callgrind): shipped %.1f, %s %.1f: ×%.4f\n", s, dir, o, s/o)
	return nil
}
