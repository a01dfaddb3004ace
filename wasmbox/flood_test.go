package wasmbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// A program that keeps calling tools after the gate refuses them is ended, not served refusals until its
// deadline: the default gate allows 50 calls, refuses the next ones, and after MaxDeniedCalls refusals the run
// stops with ErrToolLimit and ErrCallFlood, long before its 20 s deadline. Refusals inside try/except cannot
// keep it alive.
func TestCallFloodEndsTheRun(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Timeout: 20 * time.Second})
	start := time.Now()
	res, err := sb.Run(context.Background(), `import _wasmbox
print("start", flush=True)
while True:
    try:
        _wasmbox.call(b'Tnot_a_tool\n"' + b"x" * 4096 + b'"')
    except BaseException:
        pass`)
	if !errors.Is(err, wasmbox.ErrToolLimit) || !errors.Is(err, governance.ErrCallFlood) {
		t.Fatalf("err %v; want ErrToolLimit and governance.ErrCallFlood", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("the flooding run took %v under a 20 s deadline", el)
	}
	if res == nil || res.Stdout != "start\n" || res.ExitCode != -1 {
		t.Fatalf("result %+v", res)
	}
	if len(res.ToolCalls) > 1000 {
		t.Fatalf("%d tool-call records kept", len(res.ToolCalls))
	}
}

// The program's own report of ToolLimitExceeded is not the host's: without a real denial, no ErrToolLimit.
func TestToolLimitNeedsARealDenial(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	_, err := sb.Run(context.Background(), "import tools\nraise tools.ToolLimitExceeded('made up')")
	if errors.Is(err, wasmbox.ErrToolLimit) {
		t.Fatalf("a program raising ToolLimitExceeded itself gave %v", err)
	}
}
