package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/internal/firstrun"
	"github.com/wasmbox/wasmbox/internal/starttrace"
)

// P2 is a new process's first result with the cache warm, and from a precompiled directory. Each round runs, one
// after the other, the CLI (`wasmbox run -c 'print(1)'`) and this binary as a child that imports the sandbox
// package only (New + the first Run, no CLI), both with the warm cache and with the precompiled directory. Every
// process is timed whole, from just before the parent starts it to the end of its wait, and in parts: the parent
// hands it its start time (WASMBOX_STARTTRACE), so its first part is the exec, the Go runtime and package
// initialisation; then the phases of New and Run; the last part is what remains (closing, exit). The report gives
// the median of the rounds and their spread (min–max), as wall time and as process CPU time (user + system, all
// threads), which a loaded machine inflates less than wall time.

// p2ChildFlag makes this binary the P2 child: one New + Run(print(1)) with the start phases timed, printed as
// JSON on stdout.
const p2ChildFlag = "-p2-child"

func p2Child() { firstrun.Main("") }

// msSpread is the median and range of one measure over the rounds, in ms.
type msSpread struct {
	MedianMS float64 `json:"median_ms"`
	MinMS    float64 `json:"min_ms"`
	MaxMS    float64 `json:"max_ms"`
}

func msSpreadOf(v []float64) msSpread {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return msSpread{}
	}
	return msSpread{MedianMS: s[len(s)/2], MinMS: s[0], MaxMS: s[len(s)-1]}
}

type p2Part struct {
	Name string   `json:"name"`
	Wall msSpread `json:"wall"`
	CPU  msSpread `json:"cpu"`
}

// p2Case is one kind of process (the CLI or the package alone, warm cache or precompiled directory) over the
// rounds: its whole time and its parts.
type p2Case struct {
	Name string   `json:"name"`
	Wall msSpread `json:"wall"`
	CPU  msSpread `json:"cpu"`
	// MinorFaults is the median of the process's minor page faults (its fresh pages), where the system reports
	// them: on a virtual machine each costs microseconds.
	MinorFaults int64    `json:"minor_faults,omitempty"`
	Parts       []p2Part `json:"parts"`
}

type p2Report struct {
	Rounds int `json:"rounds"`
	// CLIWarmCache and CLIPrecompiled are the CLI's whole-process wall times (the P2 figure).
	CLIWarmCache   msSpread `json:"cli_warm_cache"`
	CLIPrecompiled msSpread `json:"cli_precompiled"`
	// WasmtimeWarmCache is the whole-process wall time of a program that selects the wasmtime engine (its own
	// module, cgo), with its cache warm; nil when that program could not be built (Unavailable says why).
	WasmtimeWarmCache *msSpread `json:"wasmtime_warm_cache,omitempty"`
	Unavailable       []string  `json:"unavailable,omitempty"`
	Cases             []p2Case  `json:"cases"`
	PrecompiledBytes  int64     `json:"precompiled_dir_bytes"`
	PrecompiledFiles  []string  `json:"precompiled_files"`
	PrecompileSeconds float64   `json:"precompile_seconds"`
}

// p2Run is one process: its whole wall and CPU time and the phases it reported.
type p2Run struct {
	wall, cpu time.Duration
	faults    int64
	phases    []starttrace.Phase
}

const p2Rest = "the rest: closing, exit"

// runTraced runs a process with WASMBOX_STARTTRACE set to the moment it is started and returns its times; phases
// parses the phases from its stdout and stderr.
func runTraced(ctx context.Context, name string, args []string, env []string, phases func(stdout, stderr []byte) ([]starttrace.Phase, error)) (p2Run, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	cmd.Env = append(append(os.Environ(), env...), starttrace.EnvVar+"="+strconv.FormatInt(start.UnixNano(), 10))
	if err := cmd.Start(); err != nil {
		return p2Run{}, err
	}
	err := cmd.Wait()
	r := p2Run{wall: time.Since(start)}
	if err != nil {
		return r, fmt.Errorf("%s %v: %v: %s", filepath.Base(name), args, err, stderr.String())
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.faults = minorFaults(cmd.ProcessState)
	ph, err := phases(stdout.Bytes(), stderr.Bytes())
	if err != nil {
		return r, fmt.Errorf("%s %v: %v", filepath.Base(name), args, err)
	}
	var w, c time.Duration
	for _, p := range ph {
		w, c = w+p.Took, c+p.CPU
	}
	r.phases = append(ph, starttrace.Phase{Name: p2Rest, Took: r.wall - w, CPU: r.cpu - c})
	return r, nil
}

// cliPhases reads the CLI's "wasmbox starttrace:" line and checks that the program printed 1.
func cliPhases(stdout, stderr []byte) ([]starttrace.Phase, error) {
	if string(stdout) != "1\n" {
		return nil, fmt.Errorf("printed %q", stdout)
	}
	const prefix = "wasmbox starttrace: "
	for _, line := range strings.Split(string(stderr), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			var ph []starttrace.Phase
			return ph, json.Unmarshal([]byte(rest), &ph)
		}
	}
	return nil, fmt.Errorf("no start trace on stderr: %q", stderr)
}

func childPhases(stdout, _ []byte) ([]starttrace.Phase, error) {
	var ph []starttrace.Phase
	return ph, json.Unmarshal(stdout, &ph)
}

// measureP2 builds the CLI (or uses cli if set), warms the cache (the default one, or $WASMBOX_CACHE_DIR), bakes
// a precompiled directory, then runs rounds interleaved rounds.
func measureP2(ctx context.Context, rounds int, cli string) (*p2Report, error) {
	dir, err := os.MkdirTemp("", "wasmbox-compare-p2-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := cli
	if bin == "" {
		bin = filepath.Join(dir, "wasmbox")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wasmbox/wasmbox/cmd/wasmbox").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	pre := filepath.Join(dir, "precompiled")
	r := &p2Report{Rounds: rounds}
	start := time.Now()
	if out, err := exec.CommandContext(ctx, bin, "precompile", pre).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wasmbox precompile: %v: %s", err, out)
	}
	r.PrecompileSeconds = time.Since(start).Seconds()
	filepath.WalkDir(pre, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				r.PrecompiledBytes += fi.Size()
				rel, _ := filepath.Rel(pre, path)
				r.PrecompiledFiles = append(r.PrecompiledFiles, fmt.Sprintf("%s (%.1f MB)", rel, float64(fi.Size())/1e6))
			}
		}
		return nil
	})
	withPre := "WASMBOX_PRECOMPILED=" + pre
	type p2Kind struct {
		name string
		run  func() (p2Run, error)
	}
	cases := []p2Kind{
		{"CLI, warm cache", func() (p2Run, error) {
			return runTraced(ctx, bin, []string{"run", "-c", "print(1)"}, nil, cliPhases)
		}},
		{"CLI, precompiled directory", func() (p2Run, error) {
			return runTraced(ctx, bin, []string{"run", "-c", "print(1)"}, []string{withPre}, cliPhases)
		}},
		{"package only (New + Run), warm cache", func() (p2Run, error) {
			return runTraced(ctx, self, []string{p2ChildFlag}, nil, childPhases)
		}},
		{"package only (New + Run), precompiled directory", func() (p2Run, error) {
			return runTraced(ctx, self, []string{p2ChildFlag}, []string{withPre}, childPhases)
		}},
	}
	// The same first result with the wasmtime engine: its module is nested (cgo, wasmtime-go), so its child is
	// built from there. Without cgo or a C toolchain the case is reported unavailable, with the build's error.
	if wt, err := buildWasmtimeChild(ctx, dir); err != nil {
		r.Unavailable = append(r.Unavailable, "wasmtime engine: "+err.Error())
	} else {
		cases = append(cases, p2Kind{"wasmtime engine, package only (New + Run), warm cache", func() (p2Run, error) {
			return runTraced(ctx, wt, nil, nil, childPhases)
		}})
	}
	// One unmeasured round fills the cache if it is cold and the page cache.
	for _, c := range cases {
		if _, err := c.run(); err != nil {
			return nil, err
		}
	}
	runs := make([][]p2Run, len(cases))
	for range rounds {
		for i, c := range cases {
			pr, err := c.run()
			if err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], pr)
		}
	}
	for i, c := range cases {
		var ws, cs []float64
		for _, pr := range runs[i] {
			ws, cs = append(ws, ms(pr.wall)), append(cs, ms(pr.cpu))
		}
		var fs []int64
		for _, pr := range runs[i] {
			fs = append(fs, pr.faults)
		}
		slices.Sort(fs)
		pc := p2Case{Name: c.name, Wall: msSpreadOf(ws), CPU: msSpreadOf(cs), Parts: partsOf(runs[i])}
		if len(fs) > 0 {
			pc.MinorFaults = fs[len(fs)/2]
		}
		r.Cases = append(r.Cases, pc)
	}
	r.CLIWarmCache, r.CLIPrecompiled = r.Cases[0].Wall, r.Cases[1].Wall
	if len(r.Cases) > 4 {
		r.WasmtimeWarmCache = &r.Cases[4].Wall
	}
	return r, nil
}

// buildWasmtimeChild builds the wasmtime module's firstrun program into dir: the child that times a first
// result (no arguments) or the engine's figures (-engine-numbers). Without cgo or a C toolchain it fails with the
// build's error.
func buildWasmtimeChild(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	wt := filepath.Join(dir, "firstrun-wasmtime")
	if out, err := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(root, "wasmtime"), "-o", wt, "./internal/firstrun").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, bytes.TrimSpace(out))
	}
	return wt, nil
}

// wasmtimeEngineNumbers builds the wasmtime child and has it measure the engine's row (bench.EngineNumbers).
func wasmtimeEngineNumbers(ctx context.Context, reps, runs int) (bench.EngineRow, error) {
	dir, err := os.MkdirTemp("", "wasmbox-compare-")
	if err != nil {
		return bench.EngineRow{}, err
	}
	defer os.RemoveAll(dir)
	wt, err := buildWasmtimeChild(ctx, dir)
	if err != nil {
		return bench.EngineRow{}, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, wt, firstrun.EngineNumbersFlag, strconv.Itoa(reps), strconv.Itoa(runs))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return bench.EngineRow{}, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var row bench.EngineRow
	if err := json.Unmarshal(out, &row); err != nil || row.W1Seconds <= 0 || row.W2Seconds <= 0 || row.FreshRunP50MS <= 0 {
		return bench.EngineRow{}, fmt.Errorf("the child printed %q, not an engine row (%v)", bytes.TrimSpace(out), err)
	}
	return row, nil
}

// moduleRoot is the directory of the main module (bench/compare runs from inside it).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not run from inside the wasmbox module (go env GOMOD: %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

// minorFaults is the Minflt of the process's rusage (Unix), 0 where the system has none.
func minorFaults(ps *os.ProcessState) int64 {
	v := reflect.ValueOf(ps.SysUsage())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	if f := v.Elem().FieldByName("Minflt"); f.IsValid() && f.CanInt() {
		return f.Int()
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// partsOf summarises each phase over the rounds, in the order they first appear.
func partsOf(runs []p2Run) []p2Part {
	var names []string
	for _, r := range runs {
		for _, p := range r.phases {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	var out []p2Part
	for _, n := range names {
		var ws, cs []float64
		for _, r := range runs {
			var w, c time.Duration
			for _, p := range r.phases {
				if p.Name == n {
					w, c = w+p.Took, c+p.CPU
				}
			}
			ws, cs = append(ws, ms(w)), append(cs, ms(c))
		}
		out = append(out, p2Part{Name: n, Wall: msSpreadOf(ws), CPU: msSpreadOf(cs)})
	}
	return out
}

func printP2(r *p2Report) {
	if r == nil {
		return
	}
	f := func(s msSpread) string { return fmt.Sprintf("%6.1f ms (%.1f–%.1f)", s.MedianMS, s.MinMS, s.MaxMS) }
	fmt.Printf("\nP2 new process → first result, median (min–max) of %d interleaved rounds, wall / CPU\n", r.Rounds)
	fmt.Printf("  precompiled directory: %.0f MB, made in %.0f s: %s\n", float64(r.PrecompiledBytes)/1e6, r.PrecompileSeconds, strings.Join(r.PrecompiledFiles, ", "))
	for _, u := range r.Unavailable {
		fmt.Printf("  unavailable: %s\n", u)
	}
	for _, c := range r.Cases {
		fmt.Printf("  %-62s %s / %s, %d minor faults\n", c.Name, f(c.Wall), f(c.CPU), c.MinorFaults)
		for _, p := range c.Parts {
			fmt.Printf("    %-60s %s / %s\n", p.Name, f(p.Wall), f(p.CPU))
		}
	}
}
