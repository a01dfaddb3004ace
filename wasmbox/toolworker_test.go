package wasmbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
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

// The goroutines that run a program's tool calls are reused from call to call and end with the run: none is
// left once Run has returned (well before their idle timeout). A tool that hangs in one run is abandoned at the
// deadline, and the next run of the same sandbox calls the same tool at once and gets its own result.
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
	settle := func(what string) {
		t.Helper()
		for i := 0; workers() > 0; i++ {
			if i > 100 { // 500 ms, half the idle timeout
				t.Fatalf("%s: %d tool workers still alive", what, workers())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	res := run(t, sb, "import tools\nfor i in range(50):\n    assert tools.call('echo', x=i) == {'x': i}\nprint('ok')")
	if strings.TrimSpace(res.Stdout) != "ok" || res.ToolCallsCompleted != 50 {
		t.Fatalf("%+v", res)
	}
	settle("after a run of 50 calls")

	start := time.Now()
	res, err := sb.Run(context.Background(), "import tools\ntools.call('echo', x='hang')")
	if !errors.Is(err, wasmbox.ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Fatalf("hung tool: %v after %v", err, time.Since(start))
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Status != "abandoned" {
		t.Fatalf("tool calls of the hung run: %+v", res.ToolCalls)
	}
	if workers() == 0 { // the gate's worker is still in the tool: the count must see it
		t.Fatal("the hung tool's worker is not counted")
	}
	start = time.Now()
	res = run(t, sb, "import tools\nprint(tools.call('echo', x=7)['x'])")
	if strings.TrimSpace(res.Stdout) != "7" || time.Since(start) > 2*time.Second {
		t.Fatalf("the run after the hung one: %q after %v", res.Stdout, time.Since(start))
	}
	hang <- struct{}{} // the hung tool returns: its workers exit, having served nothing else
	settle("after the hung tool returned")
}
