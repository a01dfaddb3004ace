// Command importcheck imports every module a built interpreter ships, once, inside the sandbox, and fails if one
// cannot be imported that is not on the skip list of importcheck.py (beside this file) (each entry with its
// reason), or if a listed module imports after all. pyruntime/build.sh runs it on the artifacts it just built.
//
//	go run ./pyruntime/cmd/importcheck -dir assets    (python.wasm or python.wasm.gz, stdlib.zip, tzdata.zip)
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/wasmbox"
)

//go:embed importcheck.py
var program string

type report struct {
	Imported   int               `json:"imported"`
	Skipped    int               `json:"skipped"`
	Failed     map[string]string `json:"failed"`
	StaleSkips []string          `json:"stale_skips"`
}

func main() {
	dir := flag.String("dir", "assets", "directory with python.wasm.gz, stdlib.zip and tzdata.zip")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	it, err := assets.LoadDir(dir)
	if err != nil {
		return err
	}
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Interpreter: it, Timeout: 5 * time.Minute, MemoryLimit: 1 << 30})
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, program)
	if err != nil {
		return err
	}
	if res.Exception != nil {
		return fmt.Errorf("the check itself failed: %s", res.Exception.Traceback)
	}
	var rep report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		return fmt.Errorf("cannot read the report (%w): %s %s", err, res.Stdout, res.Stderr)
	}
	fmt.Printf("importcheck: %d modules imported, %d skipped (listed with reasons)\n", rep.Imported, rep.Skipped)
	if len(rep.Failed) == 0 && len(rep.StaleSkips) == 0 {
		return nil
	}
	names := make([]string, 0, len(rep.Failed))
	for n := range rep.Failed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "importcheck: cannot import %s: %s\n", n, rep.Failed[n])
	}
	for _, n := range rep.StaleSkips {
		fmt.Fprintf(os.Stderr, "importcheck: %s is on the skip list but does not fail: remove it\n", n)
	}
	return fmt.Errorf("%d modules failed, %d skip entries are stale", len(rep.Failed), len(rep.StaleSkips))
}
