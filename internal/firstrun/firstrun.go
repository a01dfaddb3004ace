// Package firstrun is the program bench/compare times as "a new process's first result": one New and one
// Run(print(1)) with the start phases timed (internal/starttrace), printed as JSON on stdout. It is shared by
// bench/compare's own child and by the wasmtime module's, which differ only in the engine they select. With
// the arguments EngineNumbersFlag REPS RUNS it instead prints the engine's row of bench/compare's engine table
// (bench.EngineNumbers): how bench/compare measures an engine it cannot link.
package firstrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/wasmbox/wasmbox/bench"

	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Main runs the first result with the given engine ("" is the default) and exits non-zero on any failure. The
// cache is $WASMBOX_CACHE_DIR (empty: the default) and the precompiled directory $WASMBOX_PRECOMPILED.
func Main(engine string) {
	if len(os.Args) > 1 && os.Args[1] == EngineNumbersFlag {
		engineNumbers(engine, os.Args[2:])
		return
	}
	if !starttrace.FromEnv(os.Getenv) {
		starttrace.Enable()
	}
	if path := os.Getenv(CPUProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "firstrun:", err)
			os.Exit(1)
		}
		defer stop()
	}
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Engine: engine, CacheDir: os.Getenv("WASMBOX_CACHE_DIR"),
		PrecompiledDir: os.Getenv("WASMBOX_PRECOMPILED")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	starttrace.Mark("New: the rest")
	res, err := sb.Run(ctx, "print(1)")
	if err != nil || res.Stdout != "1\n" {
		fmt.Fprintln(os.Stderr, "run:", err, res)
		os.Exit(1)
	}
	starttrace.Mark("first Run")
	_ = sb.Close(ctx)
	starttrace.Mark("Close")
	_ = json.NewEncoder(os.Stdout).Encode(starttrace.Take())
}

// CPUProfileEnv names a file to which Main writes a CPU profile (runtime/pprof) of New, the first Run and Close:
// what `go tool pprof -top` reads to see where a start's time goes.
const CPUProfileEnv = "WASMBOX_FIRSTRUN_CPUPROFILE"

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("firstrun: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("firstrun: cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// EngineNumbersFlag, followed by REPS and RUNS, makes Main print bench.EngineNumbers of its engine as JSON.
const EngineNumbersFlag = "-engine-numbers"

func engineNumbers(engine string, args []string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "firstrun:", err)
		os.Exit(1)
	}
	if len(args) != 2 {
		fail(fmt.Errorf("%s takes REPS and RUNS, got %q", EngineNumbersFlag, args))
	}
	reps, err1 := strconv.Atoi(args[0])
	runs, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		fail(fmt.Errorf("%s: REPS and RUNS must be integers, got %q", EngineNumbersFlag, args))
	}
	row, err := bench.EngineNumbers(context.Background(), wasmbox.Config{Engine: engine, Timeout: 10 * time.Minute,
		CacheDir: os.Getenv("WASMBOX_CACHE_DIR")}, reps, runs)
	if err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(row)
}
