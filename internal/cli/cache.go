package cli

import (
	"context"
	"flag"
	"fmt"
	"github.com/wasmbox/wasmbox/assets"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// The cache and precompiled directory come from the environment, so that scripts, containers and serverless
// functions set them once:
//
//	WASMBOX_CACHE_DIR    the on-disk cache (default: <user cache dir>/wasmbox/compile)
//	WASMBOX_CACHE_MAX    its size cap, e.g. 2GiB (default 1GiB; "off" for none)
//	WASMBOX_PRECOMPILED  a directory made by `wasmbox precompile DIR`, used read-only
func cacheFromEnv(cfg *wasmbox.Config) error {
	cfg.CacheDir = os.Getenv("WASMBOX_CACHE_DIR")
	cfg.PrecompiledDir = os.Getenv("WASMBOX_PRECOMPILED")
	switch v := strings.TrimSpace(os.Getenv("WASMBOX_CACHE_MAX")); v {
	case "":
	case "off", "none":
		cfg.CacheMaxBytes = -1
	default:
		n, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("WASMBOX_CACHE_MAX: %w", err)
		}
		cfg.CacheMaxBytes = n
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// compileProgress reports the one-time compile on stderr: a line updated every second on a terminal, one note
// otherwise. The first compile on a machine takes tens of seconds and would otherwise look like a hang.
func compileProgress(stderr io.Writer, cacheDir string) func(wasmbox.CompileEvent) {
	tty := isTerminal(stderr)
	where := cacheDir
	if where == "" {
		where = wasmbox.DefaultCacheDir()
	}
	var mu sync.Mutex
	var stop chan struct{}
	noted := false
	return func(e wasmbox.CompileEvent) {
		mu.Lock()
		defer mu.Unlock()
		if !e.Done {
			if !tty {
				if !noted {
					fmt.Fprintf(stderr, "wasmbox: compiling the interpreter once for this machine (about 20–60 s); later runs load it from %s\n", where)
					noted = true
				}
				return
			}
			stop = make(chan struct{})
			start := time.Now()
			go func(stop chan struct{}) {
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					fmt.Fprintf(stderr, "\rwasmbox: compiling the %s once for this machine (about 20–60 s)… %ds ", e.Module, int(time.Since(start).Seconds()))
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			}(stop)
			return
		}
		if stop != nil {
			close(stop)
			stop = nil
			fmt.Fprintf(stderr, "\rwasmbox: compiled the %s in %.1fs (cached in %s)\n", e.Module, e.Elapsed.Seconds(), where)
		}
	}
}

// precompileMain bakes a precompiled directory: `wasmbox precompile [--preload M]... [--snapshot-only]
// [--runtime NAME] DIR` (without --preload, the runtime's own preloads: numpy and pandas for sci).
func precompileMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmbox precompile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var preload []string
	fs.Func("preload", "a module to import before the snapshot (repeatable), as Config.Preload", func(v string) error {
		preload = append(preload, v)
		return nil
	})
	snapshotOnly := fs.Bool("snapshot-only", false, "leave out the compiled interpreter that initialises other configurations (about 45 MB less; the directory then serves this configuration only)")
	runtimeName := runtimeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if _, err := assets.LookupRuntime(*runtimeName); err != nil {
		fmt.Fprintf(stderr, "wasmbox precompile: --runtime: %v\n%s", err, usageText)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "wasmbox precompile: give exactly one DIR\n%s", usageText)
		return exitUsage
	}
	dir := fs.Arg(0)
	cfg := wasmbox.Config{Preload: preload, Runtime: *runtimeName, OnCompile: compileProgress(stderr, dir)}
	start := time.Now()
	bake := wasmbox.Precompile
	if *snapshotOnly {
		bake = wasmbox.PrecompileSnapshotOnly
	}
	if err := bake(ctx, dir, cfg); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wasmbox: precompiled into %s in %.1fs; run with WASMBOX_PRECOMPILED=%s\n", dir, time.Since(start).Seconds(), dir)
	return 0
}
