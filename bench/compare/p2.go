package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// p2ChildFlag makes this binary the P2 child: one New + Run(print(1)) with the start phases timed, printed as
// JSON on stdout. It runs in a fresh process, like the CLI, so its phases are the parts of a cold start.
const p2ChildFlag = "-p2-child"

func p2Child() {
	if p := os.Getenv("XPROF"); p != "" {
		f, _ := os.Create(p)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	starttrace.Enable()
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{CacheDir: os.Getenv("WASMBOX_CACHE_DIR")})
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
	//XPROF
}
