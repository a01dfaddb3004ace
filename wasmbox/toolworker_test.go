package wasmbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// workerLabel marks the goroutines of this test: goroutines inherit the labels of the goroutine that starts
// them, so the tool workers its runs start carry it, and those of earlier tests (an abandoned tool may still be
// sleeping) do not.
var workerLabel = pprof.Labels("wasmbox-test", "tool-workers")

// workers counts the goroutines of this test that serve tool calls (internal/handoff).
func workers() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	n := 0
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(rec, `"wasmbox-test":"tool-workers"`) || !strings.Contains(rec, "handoff.(*Worker).loop") {
			continue
		}
		var c int
		if _, err := fmt.Sscanf(rec, "%d @", &c); err == nil {
			n += c
		}
	}
	return n
}

// The goroutines that run a sandbox's programs are reused from run to run, and their tool calls run on them (no
// goroutine per call): after any number of runs and calls, at most one idle worker is left, and none once the
// Sandbox is closed. A tool that hangs in one run is abandoned at the deadline together with that run's worker,
// and the next run of the same sandbox calls the same tool at once, on a new worker, and gets its own result.
func TestToolWorkersEndWithTheRun(t *testing.T) {
	pprof.Do(context.Background(), workerLabel, func(context.Context) { testToolWorkersEndWithTheRun(t) })
}

func testToolWorkersEndWithTheRun(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{}}}`),
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) {
			if strings.Contains(string(a), "hang") {
				<-hang // ignores its context
			}
			return a, nil
		}}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echo), Timeout: 300 * time.Millisecond})
	settle := func(what string, most int) {
		t.Helper()
		for i := 0; workers() > most; i++ {
			if i > 100 { // 500 ms, half the idle timeout
				t.Fatalf("%s: %d workers still alive, want at most %d", what, workers(), most)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 {
		res := run(t, sb, "import tools\nfor i in range(50):\n    assert tools.call('echo', x=i) == {'x': i}\nprint('ok')")
		if strings.TrimSpace(res.Stdout) != "ok" || res.ToolCallsCompleted != 50 {
			t.Fatalf("%+v", res)
		}
		settle("after a run of 50 calls", 1)
	}

	start := time.Now()
	res, err := sb.Run(context.Background(), "import tools\ntools.call('echo', x='hang')")
	if !errors.Is(err, wasmbox.ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Fatalf("hung tool: %v after %v", err, time.Since(start))
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Status != "abandoned" || res.ToolCalls[0].Seq != 1 {
		t.Fatalf("tool calls of the hung run: %+v", res.ToolCalls)
	}
	if workers() == 0 { // the abandoned worker is still in the tool: the count must see it
		t.Fatal("the hung tool's worker is not counted")
	}
	start = time.Now()
	res = run(t, sb, "import tools\nprint(tools.call('echo', x=7)['x'])")
	if strings.TrimSpace(res.Stdout) != "7" || time.Since(start) > 2*time.Second {
		t.Fatalf("the run after the hung one: %q after %v", res.Stdout, time.Since(start))
	}
	hang <- struct{}{} // the hung tool returns: its worker ends the killed exec, closes its instance and exits
	settle("after the hung tool returned", 1)
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle("after Close", 0)
}

// The gate's parts are host code too: an auditor that hangs (ignoring its context) while a program's tool call
// waits for its record cannot hold Run past its deadline either. The run ends as a timeout with the call listed
// as abandoned, and once the auditor returns, the sandbox serves the next run normally.
func TestHungGateComponentCannotHoldTheRun(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	aud := governance.AuditorFunc(func(_ context.Context, rec governance.Record) error {
		if rec.Tool == "echo" && strings.Contains(string(rec.Args), "hang") {
			<-release
		}
		return nil
	})
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud})
	if err != nil {
		t.Fatal(err)
	}
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{}}}`),
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(echo), Gate: gate, Timeout: 300 * time.Millisecond})
	start := time.Now()
	type result struct {
		res *wasmbox.Result
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := sb.Run(context.Background(), "import tools\nprint('before', flush=True)\ntools.call('echo', x='hang')")
		ran <- result{res, err}
	}()
	var res *wasmbox.Result
	select {
	case r := <-ran:
		res, err = r.res, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("Run still waits for the hung auditor 5 s after its 300 ms deadline")
	}
	took := time.Since(start)
	if !errors.Is(err, wasmbox.ErrTimeout) || took > 2*time.Second {
		t.Fatalf("hung auditor: %v after %v", err, took)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Status != "abandoned" || res.ToolCalls[0].Tool != "echo" || !strings.Contains(string(res.ToolCalls[0].Args), "hang") {
		t.Fatalf("tool calls of the hung run: %+v", res.ToolCalls)
	}
	if res.Stdout != "before\n" || res.ExitCode != -1 {
		t.Fatalf("result of the hung run: %+v", res)
	}
	free()
	res = run(t, sb, "import tools\nprint(tools.call('echo', x=7)['x'])")
	if strings.TrimSpace(res.Stdout) != "7" {
		t.Fatalf("the run after the hung one: %+v", res)
	}
}
