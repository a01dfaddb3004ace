package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// P2 is a new process's first result with the cache warm, and from a precompiled directory. Each round runs, one
// after the other, the CLI (`wasmbox run -c 'print(1)'`) and this binary as a child that times the parts of the
// same start (New + the first Run), both with the warm cache and with the precompiled directory; the report gives
// the median of the rounds and their msSpread (min–max). The parts are also given as process CPU time (user +
// system, all threads), which a loaded machine inflates less than wall time.

// p2ChildFlag makes this binary the P2 child: one New + Run(print(1)) with the start phases timed, printed as
// JSON on stdout.
const p2ChildFlag = "-p2-child"

func p2Child() {
	starttrace.Enable()
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{CacheDir: os.Getenv("WASMBOX_CACHE_DIR"), PrecompiledDir: os.Getenv("WASMBOX_PRECOMPILED")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	starttrace.Mark("New: the rest")
	res, err := sb.Run(ctx, "print(1)")
	if err != nil || res.Stdout != "1\n" {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
	starttrace.Mark("first Run(print(1))")
	_ = json.NewEncoder(os.Stdout).Encode(starttrace.Take())
}

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

type p2Report struct {
	Rounds            int      `json:"rounds"`
	CLIWarmCache      msSpread `json:"cli_warm_cache"`
	CLIPrecompiled    msSpread `json:"cli_precompiled"`
	PartsWarmCache    []p2Part `json:"parts_warm_cache"`
	PartsPrecompiled  []p2Part `json:"parts_precompiled"`
	PrecompiledBytes  int64    `json:"precompiled_dir_bytes"`
	PrecompileSeconds float64  `json:"precompile_seconds"`
}

// measureP2 builds the CLI, warms the cache (the default one, or $WASMBOX_CACHE_DIR), bakes a precompiled
// directory, then runs rounds interleaved rounds.
func measureP2(ctx context.Context, rounds int) (*p2Report, error) {
	dir, err := os.MkdirTemp("", "wasmbox-compare-p2-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "wasmbox")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/wasmbox/wasmbox/cmd/wasmbox").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v: %s", err, out)
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
	filepath.WalkDir(pre, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				r.PrecompiledBytes += fi.Size()
			}
		}
		return nil
	})
	cli := func(env ...string) (float64, error) {
		cmd := exec.CommandContext(ctx, bin, "run", "-c", "print(1)")
		cmd.Env = append(os.Environ(), env...)
		t := time.Now()
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			return 0, fmt.Errorf("wasmbox run: %v %q", err, out)
		}
		return float64(time.Since(t).Microseconds()) / 1000, nil
	}
	child := func(env ...string) ([]starttrace.Phase, error) {
		cmd := exec.CommandContext(ctx, self, p2ChildFlag)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("p2 child: %v", err)
		}
		var ph []starttrace.Phase
		return ph, json.Unmarshal(out, &ph)
	}
	if _, err := cli(); err != nil { // fills the cache if it is cold
		return nil, err
	}
	if _, err := child(); err != nil {
		return nil, err
	}
	var warm, fromPre []float64
	var warmParts, preParts [][]starttrace.Phase
	withPre := "WASMBOX_PRECOMPILED=" + pre
	for range rounds {
		a, err := cli()
		if err != nil {
			return nil, err
		}
		b, err := cli(withPre)
		if err != nil {
			return nil, err
		}
		c, err := child()
		if err != nil {
			return nil, err
		}
		d, err := child(withPre)
		if err != nil {
			return nil, err
		}
		warm, fromPre = append(warm, a), append(fromPre, b)
		warmParts, preParts = append(warmParts, c), append(preParts, d)
	}
	r.CLIWarmCache, r.CLIPrecompiled = msSpreadOf(warm), msSpreadOf(fromPre)
	r.PartsWarmCache, r.PartsPrecompiled = partsOf(warmParts), partsOf(preParts)
	return r, nil
}

// partsOf summarises each phase over the rounds (in the order they first appear), and their total.
func partsOf(runs [][]starttrace.Phase) []p2Part {
	var names []string
	for _, r := range runs {
		for _, p := range r {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	var out []p2Part
	sum := func(r []starttrace.Phase, name string) (w, c float64) {
		for _, p := range r {
			if name == "" || p.Name == name {
				w += float64(p.Took.Microseconds()) / 1000
				c += float64(p.CPU.Microseconds()) / 1000
			}
		}
		return w, c
	}
	for _, n := range append(names, "") {
		var ws, cs []float64
		for _, r := range runs {
			w, c := sum(r, n)
			ws, cs = append(ws, w), append(cs, c)
		}
		if n == "" {
			n = "total (New + first Run)"
		}
		out = append(out, p2Part{Name: n, Wall: msSpreadOf(ws), CPU: msSpreadOf(cs)})
	}
	return out
}

func printP2(r *p2Report) {
	if r == nil {
		return
	}
	ms := func(s msSpread) string { return fmt.Sprintf("%.1f ms (%.1f–%.1f)", s.MedianMS, s.MinMS, s.MaxMS) }
	fmt.Printf("\nP2 new process → first result, median (min–max) of %d interleaved rounds\n", r.Rounds)
	fmt.Printf("  CLI, warm cache            %s\n", ms(r.CLIWarmCache))
	fmt.Printf("  CLI, precompiled directory %s  (directory %.0f MB, made in %.0f s)\n", ms(r.CLIPrecompiled), float64(r.PrecompiledBytes)/1e6, r.PrecompileSeconds)
	for _, s := range []struct {
		title string
		parts []p2Part
	}{{"parts, warm cache", r.PartsWarmCache}, {"parts, precompiled directory", r.PartsPrecompiled}} {
		fmt.Printf("  %s: wall / CPU\n", s.title)
		for _, p := range s.parts {
			fmt.Printf("    %-62s %s / %s\n", p.Name, ms(p.Wall), ms(p.CPU))
		}
	}
}
