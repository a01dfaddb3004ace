package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/wasmbox/wasmbox/bench"
)

// sciNumbers builds the sci module's scibench child and has it measure the sci runtime (bench.SciNumbers): the
// main module cannot import the sci module, whose artifacts users who do not ask for them never download.
func sciNumbers(ctx context.Context, rounds int) (*bench.SciRow, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wasmbox-compare-sci-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "scibench")
	if out, err := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(root, "sci"), "-o", bin, "./internal/scibench").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w: %s", err, bytes.TrimSpace(out))
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, strconv.Itoa(rounds))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scibench: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var row bench.SciRow
	if err := json.Unmarshal(out, &row); err != nil || row.FreshRunP50MS <= 0 || len(row.Workloads) != len(bench.SciWorkloads) {
		return nil, fmt.Errorf("scibench printed %q, not a sci row (%v)", bytes.TrimSpace(out), err)
	}
	return &row, nil
}

func printSci(r *bench.SciRow) {
	if r == nil {
		return
	}
	row := func(a, b, c, d string) { fmt.Printf("%-40s %-34s %-12s %s\n", a, b, c, d) }
	fmt.Printf("\nsci runtime (numpy 2.2.4, pandas 2.2.3); native: %s\n", r.Native)
	row("  fresh run + print(1) p50", r.FreshRun.Format(" ms", 2), "", fmt.Sprintf("≤ 2 ms (base runtime, interleaved: %.2f ms)", r.BaseFreshRunP50MS))
	nat := "—"
	if r.NativeImportMS != nil {
		nat = fmt.Sprintf("%.0f ms", r.NativeImportMS.Median)
	}
	row("  import numpy, pandas (no snapshot)", r.ImportMS.Format(" ms", 0), nat, "what the snapshot saves each run")
	row("  PSS per live idle sci session", r.PSSPerSandboxMiB.Format(" MiB", 2), "", "")
	for _, w := range r.Workloads {
		ratio := "—"
		if w.RatioVsNative != nil {
			ratio = w.RatioSpread.Format("×", 2)
		}
		row("  "+w.Name, fmt.Sprintf("%.3f s", w.Seconds), f(w.NativeSeconds, "%.3f s"), ratio)
	}
}
