package wasmbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestToolOutlivingTheDeadlineEndsTheRun: a tool call that the run's deadline cuts short ends the run there. The
// program never gets the call's answer (not even the DeadlineExceeded error: catching it would let the program
// run on past its deadline until the interpreter is killed), whether the tool honours its context or ignores it
// for a while (mutation testing removed the kill after such a call and no test noticed).
func TestToolOutlivingTheDeadlineEndsTheRun(t *testing.T) {
	for _, honours := range []bool{true, false} {
		slow := hostfuncs.Tool{Name: "slow", Effect: governance.ReadOnly, Parameters: json.RawMessage(`{"type":"object"}`),
			Handler: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				if honours {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				time.Sleep(700 * time.Millisecond) // past the deadline, within the gate's grace
				return json.RawMessage(`"late"`), nil
			}}
		sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(slow), Timeout: 300 * time.Millisecond})
		start := time.Now()
		res, err := sb.Run(context.Background(), `import tools, time
try:
    r = tools.call('slow')
    print('answer', r)
except BaseException as e:
    print('caught', type(e).__name__)
t = time.monotonic()
while time.monotonic() - t < 5:
    try:
        pass
    except BaseException:
        pass
print('ran on')`)
		took := time.Since(start)
		if !errors.Is(err, wasmbox.ErrTimeout) {
			t.Fatalf("honours ctx %v: %v, want ErrTimeout", honours, err)
		}
		if res != nil && (strings.Contains(res.Stdout, "caught") || strings.Contains(res.Stdout, "answer") || strings.Contains(res.Stdout, "ran on")) {
			t.Errorf("honours ctx %v: the program went on after the deadline: %q", honours, res.Stdout)
		}
		if took > 2*time.Second {
			t.Errorf("honours ctx %v: the run ended %v after it started (deadline 300 ms)", honours, took)
		}
	}
}
