package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/assets/uninstrumented"
	"github.com/wasmbox/wasmbox/bench"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// callgrindReport holds the instructions per iteration of W1's loop (bench.W1Loop), counted by valgrind's
// callgrind: deterministic, so that a change of a few percent shows even on a loaded machine. Each figure is
// (I(2n) − I(n)) / n, where I(k) counts every instruction of a whole process running the loop k times: start-up,
// compilation and snapshot work cancel out.
type callgrindReport struct {
	Iterations     int     `json:"iterations"`
	NativePerIter  float64 `json:"native_instructions_per_iteration"`
	WasmboxPerIter float64 `json:"wasmbox_instructions_per_iteration"`
	PlainPerIter   float64 `json:"wasmbox_no_deadline_instructions_per_iteration"`
	// ToolCallPerCall is W3 counted the same way (bench.ToolCallLoop): the instructions of one tool call from
	// Python through the gate (allow-all, in-memory audit) and back, guest and host together, over ToolCalls calls.
	ToolCalls       int     `json:"tool_calls,omitempty"`
	ToolCallPerCall float64 `json:"tool_call_instructions,omitempty"`
}

var collectedRE = regexp.MustCompile(`Collected : (\d+)`)

func callgrindCount(ctx context.Context, args ...string) (int64, error) {
	cmd := exec.CommandContext(ctx, "valgrind", append([]string{"--tool=callgrind", "--callgrind-out-file=/dev/null"}, args...)...)
	// valgrind 3.19 does not decode RDTSCP, which the Go runtime uses when the CPU has it. One P and no
	// collector: with more, the runtime's idle threads spin looking for work while the guest runs, and the
	// collections fall where the heap happens to be; both change a Go process's count by tens of percent from
	// one run to the next. So pinned, two runs of the same process agree to about 0.01%.
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOMAXPROCS=1", "GOGC=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("valgrind %v: %w: %s", args, err, tail(out))
	}
	m := collectedRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("valgrind %v: no instruction count in its output: %s", args, tail(out))
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

func tail(b []byte) string {
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(b)
}

// perIteration counts the processes args(n) and args(2n) and returns the instructions per iteration: their
// difference over n, in which everything the two processes share cancels.
func perIteration(ctx context.Context, n int, args func(k int) []string) (float64, error) {
	a, err := callgrindCount(ctx, args(n)...)
	if err != nil {
		return 0, err
	}
	b, err := callgrindCount(ctx, args(2*n)...)
	if err != nil {
		return 0, err
	}
	return float64(b-a) / float64(n), nil
}

func callgrindW1(ctx context.Context, py string) (*callgrindReport, error) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return nil, fmt.Errorf("valgrind not found on PATH: %w", err)
	}
	if py == "" {
		return nil, fmt.Errorf("no native python3 to compare with")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	const n = 200_000
	// Counting only inside Sandbox.RunProgram (--toggle-collect) loses the guest: wazero's compiled code runs
	// on its own stack, which callgrind's call tracking does not follow. So whole processes are counted, and
	// their fixed costs (loading the compiled module, making the snapshot) cancel in the difference.
	var inRun []string
	perIter := func(args func(k int) []string) (float64, error) { return perIteration(ctx, n, args) }
	// The real interpreter, not a launcher script (valgrind counts only the process it starts).
	out, err := exec.CommandContext(ctx, py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return nil, err
	}
	exe := strings.TrimSpace(string(out))
	c := &callgrindReport{Iterations: n}
	if c.NativePerIter, err = perIter(func(k int) []string { return []string{exe, "-I", "-S", "-c", bench.W1Loop(k)} }); err != nil {
		return nil, err
	}
	if c.WasmboxPerIter, err = perIter(func(k int) []string { return append(inRun, self, "-guest-loop", strconv.Itoa(k)) }); err != nil {
		return nil, err
	}
	if c.PlainPerIter, err = perIter(func(k int) []string { return append(inRun, self, "-guest-loop", strconv.Itoa(k), "-plain") }); err != nil {
		return nil, err
	}
	c.ToolCalls = 20_000
	if c.ToolCallPerCall, err = perIteration(ctx, c.ToolCalls, func(k int) []string { return []string{self, "-guest-toolcalls", strconv.Itoa(k)} }); err != nil {
		return nil, err
	}
	return c, nil
}

// guestToolCallsOnce makes n tool calls (bench.ToolCallLoop) in one fresh sandbox: what callgrindW1 counts for W3.
func guestToolCallsOnce(n int) error {
	ctx := context.Background()
	cfg, err := bench.ToolConfig(&governance.MemoryAuditor{Limit: 1000}, int64(n))
	if err != nil {
		return err
	}
	cfg.Timeout = time.Hour // under valgrind the guest runs tens of times slower than usual
	res, err := runOnce(ctx, cfg, "W3", bench.ToolCallLoop(n))
	if err == nil && len(res.ToolCalls) == 0 {
		err = fmt.Errorf("W3 recorded no tool calls: %s", res.Stderr)
	}
	return err
}

// runOnce runs code in a new sandbox made with cfg, and fails unless it exits 0.
func runOnce(ctx context.Context, cfg wasmbox.Config, name, code string) (*wasmbox.Result, error) {
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, code)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%s exited %d: %s", name, res.ExitCode, res.Stderr)
	}
	return res, nil
}

// guestLoopOnce runs W1's loop with n iterations in one fresh sandbox (what callgrindW1 counts), on the shipped
// interpreter, the one without the deadline counter (plain) or the one built in dir.
func guestLoopOnce(n int, plain bool, dir string) error {
	ctx := context.Background()
	// Under valgrind the guest runs tens of times slower than usual: the default timeout would end it.
	cfg := wasmbox.Config{Timeout: time.Hour}
	// Every variant gets its interpreter through Config.Interpreter, so that all of them start the same way (a
	// snapshot made in this process, not one read from the cache) and differ only in the interpreter.
	var err error
	switch {
	case plain:
		cfg.Interpreter, err = uninstrumented.Load()
	case dir != "":
		cfg.Interpreter, err = assets.LoadDir(dir)
	default:
		cfg.Interpreter, err = assets.Load()
	}
	if err != nil {
		return err
	}
	_, err = runOnce(ctx, cfg, "W1", bench.W1Loop(n))
	return err
}
