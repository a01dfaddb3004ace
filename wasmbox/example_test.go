package wasmbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func Example() {
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Timeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, "import math\nprint(math.factorial(20))")
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	// Output: 2432902008176640000
}

func ExampleSandbox_Run_exception() {
	ctx := context.Background()
	sb, _ := wasmbox.New(ctx, wasmbox.Config{})
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, "x = {}\nprint(x['missing'])")
	fmt.Println(err, res.ExitCode, res.Exception.Type, res.Exception.Line)
	// Output: <nil> 1 KeyError 2
}

func ExampleSandbox_Run_timeout() {
	ctx := context.Background()
	sb, _ := wasmbox.New(ctx, wasmbox.Config{Timeout: 100 * time.Millisecond})
	defer sb.Close(ctx)
	_, err := sb.Run(ctx, "sum(range(10**13))") // a C-level loop
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output: true
}

func ExampleSandbox_NewSession() {
	ctx := context.Background()
	sb, _ := wasmbox.New(ctx, wasmbox.Config{})
	defer sb.Close(ctx)
	se, _ := sb.NewSession(ctx, nil)
	defer se.Close(ctx)
	se.Exec(ctx, "total = 40")
	res, _ := se.Exec(ctx, "total += 2\nprint(total)")
	fmt.Print(res.Stdout)
	// Output: 42
}

func ExampleWorkspace() {
	ctx := context.Background()
	sb, _ := wasmbox.New(ctx, wasmbox.Config{})
	defer sb.Close(ctx)
	ws := wasmbox.NewWorkspace(0, 0)
	ws.WriteFile("data.csv", []byte("a,b\n1,2\n3,4\n"))
	res, _ := sb.RunProgram(ctx, wasmbox.Program{Workspace: ws, Code: `import csv
rows = list(csv.DictReader(open("data.csv")))
open("sum.txt", "w").write(str(sum(int(r["b"]) for r in rows)))`})
	out, _ := ws.ReadFile("sum.txt")
	fmt.Println(string(out), res.FilesChanged[0].Path, res.FilesChanged[0].Kind)
	// Output: 6 sum.txt created
}

func ExampleConfig_tools() {
	ctx := context.Background()
	type args struct {
		City string `json:"city"`
	}
	weather := hostfuncs.Func("weather", "Current temperature in a city, in °C.",
		func(ctx context.Context, a args) (map[string]any, error) {
			return map[string]any{"city": a.City, "celsius": 21.5}, nil
		})
	weather.Effect = governance.ReadOnly
	sb, _ := wasmbox.New(ctx, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(weather)})
	defer sb.Close(ctx)
	res, _ := sb.Run(ctx, "import tools\nprint(tools.weather('Paris')['celsius'])")
	fmt.Print(res.Stdout, len(res.ToolCalls), " call, ", res.ToolCalls[0].Status, "\n")
	// Output:
	// 21.5
	// 1 call, ok
}
