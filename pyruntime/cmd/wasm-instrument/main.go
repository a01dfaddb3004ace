// Command wasm-instrument applies wasmbox's hard-deadline rewrite (see internal/wasmbin.Instrument) to an
// interpreter module, or lists a module's imports.
//
//	wasm-instrument [-interval N] [-export-stack-pointer=false] [-stats-json FILE] IN OUT
//	wasm-instrument -list-imports IN
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wasmbox/wasmbox/internal/wasmbin"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "wasm-instrument: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wasm-instrument", flag.ContinueOnError)
	fs.SetOutput(stderr)
	interval := fs.Int("interval", wasmbin.DefaultInterval, "loop iterations between two calls of the tick import")
	exportSP := fs.Bool("export-stack-pointer", true, "export __stack_pointer if it is not exported")
	statsJSON := fs.String("stats-json", "", "also write the statistics as JSON to this `file`")
	listImports := fs.Bool("list-imports", false, "print the module's imports as module.name, one a line, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: wasm-instrument [-interval N] [-stats-json FILE] IN OUT\n"+
			"       wasm-instrument -list-imports IN\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *listImports {
		if fs.NArg() != 1 {
			fs.Usage()
			return fmt.Errorf("-list-imports takes one file")
		}
		in, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return err
		}
		m, err := wasmbin.Decode(in)
		if err != nil {
			return err
		}
		for _, im := range m.Imports() {
			fmt.Fprintf(stdout, "%s.%s\n", im.Module, im.Name)
		}
		return nil
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return fmt.Errorf("want IN and OUT, got %d arguments", fs.NArg())
	}
	if *interval <= 0 || *interval > 1<<31-1 {
		return fmt.Errorf("-interval %d out of range", *interval)
	}
	in, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	out, st, err := wasmbin.Instrument(in, wasmbin.InstrumentOptions{Interval: int32(*interval),
		NoExportStackPointer: !*exportSP})
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if err := os.WriteFile(fs.Arg(1), out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wasm-instrument: %d functions, %d loops instrumented, %d -> %d bytes (%+.1f%%)\n",
		st.Functions, st.Loops, st.SizeBefore, st.SizeAfter,
		100*float64(st.SizeAfter-st.SizeBefore)/float64(st.SizeBefore))
	if st.UnexportedMutableGlobals > 0 {
		fmt.Fprintf(stderr, "wasm-instrument: warning: %d mutable globals are not exported (a snapshot misses them)\n",
			st.UnexportedMutableGlobals)
	}
	if *statsJSON != "" {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*statsJSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
