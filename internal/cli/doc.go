// Package cli is the wasmbox command (cmd/wasmbox) as a package, so that builds of the command with more
// runtimes linked in (the sci module's cmd/wasmbox-sci) share every line of it. Exec is a whole main function,
// Main the command for given arguments and streams; see cmd/wasmbox for the usage, flags and exit codes.
package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/internal/starttrace"
)

// Exec runs the command line of this process (os.Args, the standard streams, an interrupt cancels) and returns
// the exit code: the whole of a main function that links the CLI.
func Exec() int {
	tracing := starttrace.FromEnv(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if tracing {
		starttrace.Mark("CLI: output, close")
		b, _ := json.Marshal(starttrace.Take())
		fmt.Fprintf(os.Stderr, "wasmbox starttrace: %s\n", b)
	}
	return code
}

// runtimeFlag registers --runtime, naming the runtimes this build of the command links in.
func runtimeFlag(fs *flag.FlagSet) *string {
	return fs.String("runtime", "base", "the interpreter: "+strings.Join(assets.Runtimes(), " or ")+
		" (sci, with numpy and pandas, is in the wasmbox-sci command of github.com/wasmbox/wasmbox/sci)")
}

// runtimeInfo is one runtime in `wasmbox version --json`.
type runtimeInfo struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Packages    map[string]string `json:"packages,omitempty"`
	Preload     []string          `json:"preload,omitempty"`
}

func runtimeInfos() []runtimeInfo {
	var out []runtimeInfo
	for _, name := range assets.Runtimes() {
		rt, err := assets.LookupRuntime(name)
		if err != nil {
			continue // registered a moment ago: cannot disappear
		}
		out = append(out, runtimeInfo{Name: rt.Name, Description: rt.Description, Packages: rt.Packages, Preload: rt.Preload})
	}
	return out
}
