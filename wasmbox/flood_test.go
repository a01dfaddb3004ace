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

// A program that keeps calling tools after the gate refuses them is ended, not served refusals until its
// deadline: the default gate allows 50 calls, refuses the next ones, and after MaxDeniedCalls refusals the run
// stops with ErrToolLimit and ErrCallFlood, long before its 20 s deadline. Refusals inside try/except cannot
// keep it alive.
func TestCallFloodEndsTheRun(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Timeout: 20 * time.Second})
	res := runFlood(t, sb, `import _wasmbox
print("start", flush=True)
while True:
    try:
        _wasmbox.call(b'Tnot_a_tool\n"' + b"x" * 4096 + b'"')
    except BaseException:
        pass`)
	if res == nil || res.Stdout != "start\n" || res.ExitCode != -1 {
		t.Fatalf("result %+v", res)
	}
	if len(res.ToolCalls) > 1000 {
		t.Fatalf("%d tool-call records kept", len(res.ToolCalls))
	}
}

// Arguments that are not JSON are refused by the gate like any other malformed call: each refusal is audited
// and counted, so a flood of them ends the run too.
func TestInvalidArgumentsFloodEndsTheRun(t *testing.T) {
	aud := &governance.MemoryAuditor{}
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud})
	if err != nil {
		t.Fatal(err)
	}
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return a, nil }}
	sb := newSandbox(t, wasmbox.Config{Timeout: 20 * time.Second, Gate: gate, Tools: hostfuncs.NewRegistry().MustRegister(echo)})
	res := runFlood(t, sb, `import _wasmbox
ok, resp = _wasmbox.call(b'Techo\n{"x": 1')
print(ok, resp.decode(), flush=True)
while True:
    try:
        _wasmbox.call(b'Techo\n{"x": ')
    except BaseException:
        pass`)
	if res == nil || !strings.HasPrefix(res.Stdout, `False {"type":"ToolDenied","message":"call to echo denied: arguments are not valid JSON`) {
		t.Fatalf("result %+v", res)
	}
	if _, err := json.Marshal(res.ToolCalls); err != nil {
		t.Fatalf("the run's tool calls do not marshal: %v", err)
	}
	recs := aud.Records()
	if len(recs) == 0 || recs[0].Decision != "deny" || recs[0].Tool != "echo" || !strings.Contains(recs[0].Reason, "not valid JSON") {
		t.Fatalf("first audit record %+v; want the refusal of the invalid arguments", recs)
	}
}

// runFlood runs a program that floods the host with refused calls under a 20 s deadline and checks that the host
// ended it for that, long before the deadline.
func runFlood(t *testing.T, sb *wasmbox.Sandbox, code string) *wasmbox.Result {
	t.Helper()
	start := time.Now()
	res, err := sb.Run(context.Background(), code)
	if !errors.Is(err, wasmbox.ErrToolLimit) || !errors.Is(err, governance.ErrCallFlood) {
		t.Fatalf("err %v; want ErrToolLimit and governance.ErrCallFlood", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("the flooding run took %v under a 20 s deadline", el)
	}
	return res
}

// The program's own report of ToolLimitExceeded is not the host's: without a real denial, no ErrToolLimit.
func TestToolLimitNeedsARealDenial(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	_, err := sb.Run(context.Background(), "import tools\nraise tools.ToolLimitExceeded('made up')")
	if errors.Is(err, wasmbox.ErrToolLimit) {
		t.Fatalf("a program raising ToolLimitExceeded itself gave %v", err)
	}
}
