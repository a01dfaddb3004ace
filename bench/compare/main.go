// Command compare runs the same workloads on wasmbox and on native CPython in one process run and prints the
// ratios:
//
//	go run ./bench/compare [-quick] [-json] [-p2]
//
// W0 fresh sandbox + print(1) p50/p90; W1 pure-Python loop; W2 json of 20k dicts; W3 tool calls through the
// Gate; W4 memory added per live idle sandbox; W5 trivial runs per second on all cores. The hard deadline is on
// in every wasmbox row; deadline_overhead_ratio compares W1 with the uninstrumented build.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
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

type report struct {
	FreshRunP50MS     float64              `json:"fresh_run_p50_ms"`
	FreshRunP90MS     float64              `json:"fresh_run_p90_ms"`
	NativePythonP50MS *float64             `json:"native_python_p50_ms"`
	W1Seconds         float64              `json:"w1_seconds"`
	W1NativeSeconds   *float64             `json:"w1_native_seconds"`
	W1RatioVsNative   *float64             `json:"w1_ratio_vs_native"`
	W2Seconds         float64              `json:"w2_seconds"`
	W2NativeSeconds   *float64             `json:"w2_native_seconds"`
	W2RatioVsNative   *float64             `json:"w2_ratio_vs_native"`
	DeadlineOverhead  float64              `json:"deadline_overhead_ratio"`
	ToolCallUS        *float64             `json:"tool_call_us"`
	RSSPerSandboxMiB  float64              `json:"rss_per_sandbox_mib"`
	NewProcessP50MS   *float64             `json:"new_process_first_result_p50_ms"`
	P2                *p2Report            `json:"p2"`
	RunsPerSec        float64              `json:"runs_per_sec"`
	NativePython      string               `json:"native_python"`
	Engines           map[string]engineRow `json:"engines"`
	Skipped           []string             `json:"skipped"`
	Cores             int                  `json:"cores"`
	Quick             bool                 `json:"quick"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == p2ChildFlag {
		p2Child()
		return
	}
	quick := flag.Bool("quick", false, "fewer repetitions (under a minute)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	against := flag.String("against", "", "also time W1/W2 on the interpreter built in DIR (e.g. pyruntime/build.sh --variant plain --out DIR) and print the ratios")
	p2Only := flag.Bool("p2", false, "measure only P2 (new process → first result) and its parts")
	flag.Parse()
	if *p2Only {
		r, err := measureP2(context.Background(), 7)
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
	if *against != "" {
		if err := compareBuilds(context.Background(), *against, *quick); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*quick, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(quick, asJSON bool) error {
	ctx := context.Background()
	r := report{Cores: runtime.NumCPU(), Quick: quick}
	reps, w0n := 5, 200
	if quick {
		reps, w0n = 3, 60
	}
	sb, err := wasmbox.New(ctx, wasmbox.Config{})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	logf := func(format string, a ...any) {
		if !asJSON {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}

	// W0
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

	// W1, W2 in the guest, deadline on; W1 without the deadline rewrite.
	if r.W1Seconds, err = guestTime(ctx, sb, bench.W1, reps); err != nil {
		return err
	}
	if r.W2Seconds, err = guestTime(ctx, sb, bench.W2, reps); err != nil {
		return err
	}
	if it, err := uninstrumented.Load(); err == nil {
		plain, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: it})
		if err != nil {
			return err
		}
		w1plain, err := guestTime(ctx, plain, bench.W1, reps)
		plain.Close(ctx)
		if err != nil {
			return err
		}
		r.DeadlineOverhead = r.W1Seconds / w1plain
	} else {
		r.Skipped = append(r.Skipped, "deadline overhead: "+err.Error())
	}
	logf("W1 %.3f s, W2 %.3f s, deadline overhead ×%.3f", r.W1Seconds, r.W2Seconds, r.DeadlineOverhead)

	// Every engine built in, side by side (wasmtime needs -tags wasmtime).
	r.Engines = map[string]engineRow{}
	for _, name := range wasmbox.Engines() {
		row, err := engineNumbers(ctx, name, reps, w0n/2)
		if err != nil {
			r.Skipped = append(r.Skipped, "engine "+name+": "+err.Error())
			continue
		}
		r.Engines[name] = row
	}

	// Native CPython.
	if py := findPython(); py != "" {
		r.NativePython = py
		if out, err := exec.Command(py, "-c", "import sys; print(sys.version.split()[0])").Output(); err == nil {
			r.NativePython += " (" + strings.TrimSpace(string(out)) + ")"
		}
		var starts []time.Duration
		for i := 0; i < max(reps*4, 10); i++ {
			t := time.Now()
			if err := exec.Command(py, "-I", "-S", "-c", "print(1)").Run(); err != nil {
				return err
			}
			starts = append(starts, time.Since(t))
		}
		p50 := pct(starts, 50)
		r.NativePythonP50MS = &p50
		n1, err1 := nativeTime(py, bench.W1, reps)
		n2, err2 := nativeTime(py, bench.W2, reps)
		if err1 == nil && err2 == nil {
			r.W1NativeSeconds, r.W2NativeSeconds = &n1, &n2
			a, b := r.W1Seconds/n1, r.W2Seconds/n2
			r.W1RatioVsNative, r.W2RatioVsNative = &a, &b
		} else {
			r.Skipped = append(r.Skipped, fmt.Sprintf("native workloads: %v %v", err1, err2))
		}
	} else {
		r.Skipped = append(r.Skipped, "native python3: not found on PATH")
	}

	// W3: the tool bridge.
	if us, err := toolCallMicros(ctx, quick); err == nil {
		r.ToolCallUS = &us
	} else {
		r.Skipped = append(r.Skipped, "W3 tool calls: "+err.Error())
	}

	// W4: memory per live idle sandbox (PSS, so shared pages are divided among their users).
	n := 20
	if quick {
		n = 8
	}
	r.RSSPerSandboxMiB, err = pssPerSession(ctx, sb, n)
	if err != nil {
		r.Skipped = append(r.Skipped, "W4: "+err.Error())
	}

	// W5: trivial runs per second on all cores.
	dur := 3 * time.Second
	if quick {
		dur = time.Second
	}
	r.RunsPerSec = throughput(ctx, sb, dur)

	// P2: a new process (the CLI) to its first result, with the cache warm and from a precompiled directory, with
	// its parts (p2.go).
	if p2, err := measureP2(ctx, max(reps, 5)); err == nil {
		r.P2, r.NewProcessP50MS = p2, &p2.CLIWarmCache.MedianMS
	} else {
		r.Skipped = append(r.Skipped, "P2 new process: "+err.Error())
	}

	for _, peer := range []string{"pyodide", "@pydantic/monty"} {
		r.Skipped = append(r.Skipped, peer+": node package not installed (npm install "+peer+" to add the row)")
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

// guestTime runs a timed workload reps times and returns the median of the in-guest durations.
func guestTime(ctx context.Context, sb *wasmbox.Sandbox, w string, reps int) (float64, error) {
	var ts []float64
	for range reps {
		res, err := sb.Run(ctx, bench.Timed(w))
		if err != nil {
			return 0, err
		}
		if res.Exception != nil {
			return 0, fmt.Errorf("workload raised %s", res.Exception.Traceback)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(res.Stdout), 64)
		if err != nil {
			return 0, err
		}
		ts = append(ts, v)
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// findPython prefers $WASMBOX_NATIVE_PYTHON, then python3.13, then python3 (the version is reported).
func findPython() string {
	if p := os.Getenv("WASMBOX_NATIVE_PYTHON"); p != "" {
		return p
	}
	for _, n := range []string{"python3.13", "python3"} {
		if p, err := exec.LookPath(n); err == nil {
			if exec.Command(p, "-c", "pass").Run() == nil {
				return p
			}
		}
	}
	return ""
}

func nativeTime(py, w string, reps int) (float64, error) {
	var ts []float64
	for range reps {
		out, err := exec.Command(py, "-I", "-S", "-c", bench.Timed(w)).Output()
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return 0, err
		}
		ts = append(ts, v)
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

func pssPerSession(ctx context.Context, sb *wasmbox.Sandbox, n int) (float64, error) {
	runtime.GC()
	before, err := pss()
	if err != nil {
		return 0, err
	}
	var sessions []*wasmbox.Session
	for range n {
		se, err := sb.NewSession(ctx, nil)
		if err != nil {
			return 0, err
		}
		if _, err := se.Exec(ctx, "x = 1"); err != nil {
			return 0, err
		}
		sessions = append(sessions, se)
	}
	runtime.GC()
	after, err := pss()
	for _, se := range sessions {
		se.Close(ctx)
	}
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n) / 1024, nil
}

// pss reads the process's proportional set size in KiB.
func pss() (int64, error) {
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

func throughput(ctx context.Context, sb *wasmbox.Sandbox, dur time.Duration) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := sb.Run(ctx, "print(1)"); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

func f(p *float64, format string) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf(format, *p)
}

func printTable(r report) {
	fmt.Printf("wasmbox bench/compare (%d cores, quick=%v; native: %s)\n\n", r.Cores, r.Quick, orDash(r.NativePython))
	fmt.Printf("%-44s %-22s %-14s %s\n", "workload", "wasmbox (deadline on)", "native", "ratio / target")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W0 fresh sandbox + print(1) p50 (p90)", fmt.Sprintf("%.2f ms (%.2f)", r.FreshRunP50MS, r.FreshRunP90MS), f(r.NativePythonP50MS, "%.2f ms"), "P1 ≤ 0.4 ms")
	fmt.Printf("%-44s %-22s %-14s %s\n", "new process → first result (CLI, p50)", f(r.NewProcessP50MS, "%.1f ms"), "", "P2 ≤ 150 ms")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W1 pure-Python loop", fmt.Sprintf("%.3f s", r.W1Seconds), f(r.W1NativeSeconds, "%.3f s"), f(r.W1RatioVsNative, "×%.2f")+" (P3 ≤ 3×)")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W2 json 20k dicts", fmt.Sprintf("%.3f s", r.W2Seconds), f(r.W2NativeSeconds, "%.3f s"), f(r.W2RatioVsNative, "×%.2f")+" (P3 ≤ 3×)")
	fmt.Printf("%-44s %-22s %-14s %s\n", "deadline cost on W1", fmt.Sprintf("×%.3f", r.DeadlineOverhead), "", "P4 ≤ ×1.10")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W3 tool call through the Gate", f(r.ToolCallUS, "%.2f µs"), "", "P5 ≤ 2 µs")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W4 PSS per live idle sandbox", fmt.Sprintf("%.2f MiB", r.RSSPerSandboxMiB), "", "P6 ≤ 2 MiB")
	fmt.Printf("%-44s %-22s %-14s %s\n", "W5 trivial runs/s, all cores", fmt.Sprintf("%.0f", r.RunsPerSec), "", "P7 ≥ 1,500")
	for _, name := range sortedKeys(r.Engines) {
		e := r.Engines[name]
		ratio := func(v float64, n *float64) string {
			if n == nil {
				return ""
			}
			return fmt.Sprintf(" (×%.2f native)", v / *n)
		}
		fmt.Printf("engine %-9s fresh run p50 %.2f ms · W1 %.3f s%s · W2 %.3f s%s\n", name, e.FreshRunP50MS,
			e.W1Seconds, ratio(e.W1Seconds, r.W1NativeSeconds), e.W2Seconds, ratio(e.W2Seconds, r.W2NativeSeconds))
	}
	printP2(r.P2)
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

type engineRow struct {
	FreshRunP50MS float64 `json:"fresh_run_p50_ms"`
	W1Seconds     float64 `json:"w1_seconds"`
	W2Seconds     float64 `json:"w2_seconds"`
}

func engineNumbers(ctx context.Context, name string, reps, runs int) (engineRow, error) {
	sb, err := wasmbox.New(ctx, wasmbox.Config{Engine: name})
	if err != nil {
		return engineRow{}, err
	}
	defer sb.Close(ctx)
	var lat []time.Duration
	for i := 0; i < runs+3; i++ {
		t := time.Now()
		if _, err := sb.Run(ctx, "print(1)"); err != nil {
			return engineRow{}, err
		}
		if i >= 3 {
			lat = append(lat, time.Since(t))
		}
	}
	row := engineRow{FreshRunP50MS: pct(lat, 50)}
	if row.W1Seconds, err = guestTime(ctx, sb, bench.W1, reps); err != nil {
		return row, err
	}
	row.W2Seconds, err = guestTime(ctx, sb, bench.W2, reps)
	return row, err
}

func sortedKeys(m map[string]engineRow) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compareBuilds times W1 and W2 on the shipped interpreter and on the one in dir, interleaved, and prints the
// medians and ratios (how the build flags are confirmed: pyruntime/MEASURED).
func compareBuilds(ctx context.Context, dir string, quick bool) error {
	read := func(name string) ([]byte, error) { return os.ReadFile(dir + "/" + name) }
	gz, err := read("python.wasm.gz")
	if err != nil {
		return err
	}
	wasm, err := assets.Gunzip(gz)
	if err != nil {
		return err
	}
	stdlib, err := read("stdlib.zip")
	if err != nil {
		return err
	}
	tz, err := read("tzdata.zip")
	if err != nil {
		return err
	}
	other, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: &assets.Interpreter{Wasm: wasm, WasmSHA256: "against:" + dir, Stdlib: stdlib, TZData: tz}})
	if err != nil {
		return err
	}
	defer other.Close(ctx)
	shipped, err := wasmbox.New(ctx, wasmbox.Config{})
	if err != nil {
		return err
	}
	defer shipped.Close(ctx)
	reps := 7
	if quick {
		reps = 3
	}
	for _, w := range []struct{ name, code string }{{"W1", bench.W1}, {"W2", bench.W2}} {
		var a, b []float64
		for range reps {
			x, err := guestTime(ctx, shipped, w.code, 1)
			if err != nil {
				return err
			}
			y, err := guestTime(ctx, other, w.code, 1)
			if err != nil {
				return err
			}
			a, b = append(a, x), append(b, y)
		}
		slices.Sort(a)
		slices.Sort(b)
		ma, mb := a[len(a)/2], b[len(b)/2]
		fmt.Printf("%s: shipped %.3f s, %s %.3f s: the shipped build takes ×%.2f the time (%.0f%% faster)\n", w.name, ma, dir, mb, ma/mb, (mb/ma-1)*100)
	}
	return nil
}
