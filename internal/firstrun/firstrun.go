// Package firstrun is the program bench/compare times as "a new process's first result": one New and one
// Run(print(1)) with the start phases timed (internal/starttrace), printed as JSON on stdout. It is shared by
// bench/compare's own child and by the wasmtime module's, which differ only in the engine they select.
package firstrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/wasmbox/wasmbox/internal/starttrace"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Main runs the first result with the given engine ("" is the default) and exits non-zero on any failure. The
// cache is $WASMBOX_CACHE_DIR (empty: the default) and the precompiled directory $WASMBOX_PRECOMPILED.
func Main(engine string) {
	if !starttrace.FromEnv(os.Getenv) {
		starttrace.Enable()
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
