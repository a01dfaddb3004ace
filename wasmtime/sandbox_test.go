package wasmtime_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
	_ "github.com/wasmbox/wasmbox/wasmtime"
)

type blockedReader struct{ release chan struct{} }

func (r blockedReader) Read([]byte) (int, error) { <-r.release; return 0, io.EOF }

// TestSandbox runs the sandbox on this engine end to end, through the import that registers it: output, a tool
// call through the gate, the memory limit, and deadlines that hold against a busy loop and a blocked stdin.
func TestSandbox(t *testing.T) {
	if !slices.Contains(wasmbox.Engines(), "wasmtime") {
		t.Fatalf("importing the package did not register the engine: %v", wasmbox.Engines())
	}
	ctx := context.Background()
	type args struct {
		City string `json:"city"`
	}
	weather := hostfuncs.Func("weather", "Current temperature in a city.",
		func(ctx context.Context, a args) (map[string]any, error) {
			return map[string]any{"city": a.City, "celsius": 21.5}, nil
		})
	weather.Effect = governance.ReadOnly
	sb, err := wasmbox.New(ctx, wasmbox.Config{Engine: "wasmtime", Timeout: 2 * time.Second,
		MemoryLimit: 64 << 20, Tools: hostfuncs.NewRegistry().MustRegister(weather)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)

	res, err := sb.Run(ctx, "import math, tools\nprint(math.factorial(20), tools.weather('Paris')['celsius'])")
	if err != nil || res.Stdout != "2432902008176640000 21.5\n" || len(res.ToolCalls) != 1 {
		t.Fatalf("run: %v %+v", err, res)
	}

	res, err = sb.Run(ctx, "x = bytearray(200 << 20)")
	if err == nil && (res.Exception == nil || res.Exception.Type != "MemoryError") {
		t.Fatalf("200 MiB under a 64 MiB limit: %v %+v", err, res)
	}

	start := time.Now()
	if _, err := sb.Run(ctx, "while True: pass"); !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("busy loop: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("busy loop ran %v under a 2 s timeout", d)
	}

	blocked := blockedReader{release: make(chan struct{})}
	defer close(blocked.release)
	_, err = sb.RunProgram(ctx, wasmbox.Program{Code: "import sys\nsys.stdin.read()", Stdin: blocked})
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("blocked stdin: %v, want ErrTimeout", err)
	}
	if err := sb.Close(ctx); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Close: %v", err)
	}
}

// A Sandbox's Runs on this engine reuse instances (recycled: memory back to the snapshot image, globals to their
// first values); no Run sees anything of an earlier one, whether that Run ended normally, raised, grew its
// memory, exited or ran into its deadline (a run whose memory grew or that exited closes its instance instead).
// That the instances are recycled at all is TestWasmtimeRecycle's to show: here only what a Run sees counts.
func TestRunsLeaveNothingBehind(t *testing.T) {
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Engine: "wasmtime", Timeout: 2 * time.Second, MemoryLimit: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	const leave = `import os, sys, builtins, json
builtins.LEAK = [bytes(1000) for _ in range(1000)]
json.LEAK = 1
sys.modules["leaked_module"] = sys
sys.setrecursionlimit(77)
os.environ["LEAK"] = "1"
os.chdir("/tmp")
open("/tmp/left", "w").write("x")
open("/workspace/left", "w").write("x")
held = open("/workspace/held", "w")
`
	const check = `import os, sys, builtins, json
print(hasattr(builtins, "LEAK"), hasattr(json, "LEAK"), "leaked_module" in sys.modules,
      sys.getrecursionlimit() == 77, "LEAK" in os.environ, os.getcwd(), os.listdir("/workspace"),
      os.path.exists("/tmp/left"))
`
	const clean = "False False False False False /workspace [] False\n"
	for _, other := range []string{
		leave,
		leave + "x = bytearray(100 << 20)\nx[-1] = 1",
		leave + "raise ValueError('after leaving')",
		leave + "import os\nos._exit(3)",
		leave + "while True: pass",
	} {
		for range 2 { // the second Run takes the instance the check below put back
			_, _ = sb.Run(ctx, other)
			res, err := sb.Run(ctx, check)
			if err != nil || res.Stdout != clean {
				t.Fatalf("after %q: %v %q, want %q", other, err, res.Stdout, clean)
			}
		}
	}
}
