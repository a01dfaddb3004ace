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

// The host alone bounds a program after its deadline: whatever the program sends or runs after the
// KeyboardInterrupt (a spoofed "unwinding" message, again and again; a finalizer, a weakref or gc callback that
// loops), it is killed within a fixed grace measured from the deadline.
func TestDeadlineBoundIsTheHosts(t *testing.T) {
	forEngine(t, func(t *testing.T, engine string) { testDeadlineBound(t, engine) })
}

func testDeadlineBound(t *testing.T, engine string) {
	const timeout = 300 * time.Millisecond
	sb := newSandbox(t, wasmbox.Config{Engine: engine, Timeout: timeout})
	programs := map[string]string{
		"unwinding spoofed repeatedly": `import _wasmbox
try:
    while True:
        pass
except KeyboardInterrupt:
    while True:
        _wasmbox.call(b'{"op":"unwinding"}')
`,
		"__del__ loops after the traceback": `class D:
    def __del__(self):
        while True:
            pass
def f():
    d = D()
    while True:
        pass
f()
`,
		"weakref callback loops": `import weakref
class O: pass
def cb(_):
    while True:
        pass
def f():
    o = O()
    r = weakref.ref(o, cb)
    while True:
        pass
f()
`,
		"gc callback loops": `import gc
def cb(phase, info):
    while True:
        pass
gc.callbacks.append(cb)
try:
    while True:
        pass
finally:
    gc.collect()
`,
	}
	for name, code := range programs {
		t.Run(name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), code)
			if !errors.Is(err, wasmbox.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want a timeout", err)
			}
			if res.Duration > 1500*time.Millisecond {
				t.Fatalf("ran %v under a %v timeout", res.Duration, timeout)
			}
			if res.ExitCode != -1 {
				t.Errorf("exit code %d after a deadline, want -1", res.ExitCode)
			}
		})
	}
	// The spoofed "unwinding" once bought 250 ms; the fixed grace is 40 ms. The best of three runs must stay well
	// below the old extension (a generous bound: the kill itself takes milliseconds).
	best := time.Hour
	for range 3 {
		res, _ := sb.Run(context.Background(), programs["unwinding spoofed repeatedly"])
		best = min(best, res.Duration-timeout)
	}
	if best > 200*time.Millisecond {
		t.Errorf("the spoofing program ran %v past its deadline at best, want well under 250 ms", best)
	}
}

// After a deadline the Result follows one rule whatever the program was doing: ExitCode -1, ErrTimeout, and
// Exception the KeyboardInterrupt when the program was interrupted in Python code (a sleep, a C-level loop or a
// swallowed interrupt leaves none to report).
func TestDeadlineOutcomeRule(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Timeout: 300 * time.Millisecond})
	for name, c := range map[string]struct {
		code      string
		exception string // "" when none can be captured
	}{
		"sleep":       {"import time\ntime.sleep(10)", ""},
		"loop":        {"while True:\n    pass", "KeyboardInterrupt"},
		"swallowed":   {"while True:\n    try:\n        while True: pass\n    except BaseException:\n        pass", ""},
		"c-level":     {"sum(range(10**13))", ""},
		"exits after": {"import sys\ntry:\n    while True: pass\nexcept KeyboardInterrupt:\n    sys.exit(0)", ""},
	} {
		t.Run(name, func(t *testing.T) {
			// An interrupted program has killGrace (40 ms) to unwind; a machine loaded enough to take longer kills
			// it instead, which leaves no exception: the exception must be there in one of three tries.
			var got *wasmbox.PythonError
			for try := 0; try < 3; try++ {
				res, err := sb.Run(context.Background(), c.code)
				if !errors.Is(err, wasmbox.ErrTimeout) {
					t.Fatalf("err %v, want ErrTimeout", err)
				}
				if res.ExitCode != -1 {
					t.Errorf("exit code %d, want -1", res.ExitCode)
				}
				if got = res.Exception; c.exception == "" || (got != nil && got.Type == c.exception) {
					break
				}
			}
			if c.exception != "" && (got == nil || got.Type != c.exception) {
				t.Errorf("exception %+v, want %s", got, c.exception)
			}
		})
	}
}

// The guest's exception report is text: it cannot make Run return ErrToolLimit or ErrMemoryLimit.
func TestGuestCannotForgeItsFailureClass(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{ExceptionAsError: true})
	forge := func(typ string) string {
		return `import _wasmbox, json
_wasmbox.call(json.dumps({"op": "exception", "type": "` + typ + `", "message": "x", "traceback": "", "line": 0}).encode())
raise SystemExit(1)`
	}
	for _, c := range []struct{ name, code, typ string }{
		{"forged ToolLimitExceeded report", forge("ToolLimitExceeded"), "ToolLimitExceeded"},
		{"raised ToolLimitExceeded", "import tools\nraise tools.ToolLimitExceeded('x')", "ToolLimitExceeded"},
		{"forged MemoryError report", forge("MemoryError"), "MemoryError"},
		{"raised MemoryError", "raise MemoryError", "MemoryError"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), c.code)
			if errors.Is(err, wasmbox.ErrToolLimit) || errors.Is(err, wasmbox.ErrMemoryLimit) {
				t.Fatalf("the guest chose its failure class: %v (peak %d)", err, res.PeakMemory)
			}
			if res.Exception == nil || res.Exception.Type != c.typ {
				t.Fatalf("exception %+v, want the program's %s as text", res.Exception, c.typ)
			}
		})
	}
}

// The real thing is still classified: a call denied for max_tool_calls gives ErrToolLimit, memory growth to the
// cap gives ErrMemoryLimit.
func TestHostStateClassifies(t *testing.T) {
	reg, _, _ := toolSet(t)
	g, _ := gate(t, governance.GateConfig{Limits: governance.Limits{MaxToolCalls: 1}})
	sb := newSandbox(t, wasmbox.Config{Tools: reg, Gate: g, MemoryLimit: 96 << 20})
	_, err := sb.Run(context.Background(), "import tools\ntools.get_order('A-1')\ntools.get_order('A-2')")
	if !errors.Is(err, wasmbox.ErrToolLimit) {
		t.Errorf("err %v, want ErrToolLimit after a real denial", err)
	}
	_, err = sb.Run(context.Background(), "b = []\nwhile True:\n    b.append(bytearray(4 << 20))")
	if !errors.Is(err, wasmbox.ErrMemoryLimit) {
		t.Errorf("err %v, want ErrMemoryLimit", err)
	}
	// One request bigger than the whole limit is refused by the allocator at once (the peak stays low).
	_, err = sb.Run(context.Background(), "x = bytearray(1 << 30)")
	if !errors.Is(err, wasmbox.ErrMemoryLimit) {
		t.Errorf("err %v, want ErrMemoryLimit for a refused growth", err)
	}
}

// A trap is an internal failure, except when the host saw the memory at its cap: then it is the memory limit.
func TestTrapAtMemoryCap(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{MemoryLimit: 80 << 20})
	res, err := sb.Run(context.Background(), "import os\nos.abort()")
	if !errors.Is(err, wasmbox.ErrInternal) || errors.Is(err, wasmbox.ErrMemoryLimit) {
		t.Fatalf("a trap at peak %d: err %v, want ErrInternal", res.PeakMemory, err)
	}
	res, err = sb.Run(context.Background(), `import os
keep = []
size = 1 << 20
while size >= 4096:
    try:
        keep.append(bytearray(size))
    except MemoryError:
        size //= 2
os.abort()`)
	if !errors.Is(err, wasmbox.ErrMemoryLimit) {
		t.Fatalf("a trap at peak %d of %d: err %v, want ErrMemoryLimit", res.PeakMemory, 80<<20, err)
	}
}

// An exception the driver cannot format, or one too big to send, still ends the run as an ordinary exception
// with a bounded report (never exit 125 with no report).
func TestUnformattableException(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res, err := sb.Run(context.Background(), `class E(Exception):
    def __str__(self):
        raise RuntimeError("no")
raise E()`)
	if err != nil || res.ExitCode != 1 || res.Exception == nil || res.Exception.Type != "E" {
		t.Fatalf("err %v exit %d exception %+v", err, res.ExitCode, res.Exception)
	}
	res, err = sb.Run(context.Background(), `raise ValueError("x" * (20 << 20))`)
	if err != nil || res.ExitCode != 1 || res.Exception == nil || res.Exception.Type != "ValueError" {
		t.Fatalf("err %v exit %d exception %+v", err, res.ExitCode, res.Exception != nil)
	}
	if n := len(res.Exception.Message) + len(res.Exception.Traceback); n > 512<<10 {
		t.Errorf("the report kept %d bytes", n)
	}
	// A report sent by the program itself is cut by the host.
	res, _ = sb.Run(context.Background(), `import _wasmbox, json
_wasmbox.call(json.dumps({"op": "exception", "type": "T" * 100000, "message": "m" * (4 << 20),
    "traceback": "t" * (8 << 20), "line": -5}).encode())
raise SystemExit(3)`)
	if e := res.Exception; e == nil || len(e.Type) > 512 || len(e.Message) > 65<<10 || len(e.Traceback) > 257<<10 || e.Line != 0 {
		t.Fatalf("host kept an unbounded report: type %d message %d traceback %d", len(e.Type), len(e.Message), len(e.Traceback))
	}
}

// The ABI's size caps: a valid request over 16 MiB and a tool's valid response over 16 MiB are refused with an
// ABIError, and the run goes on.
func TestABISizeCaps(t *testing.T) {
	big := hostfuncs.Tool{Name: "big", Effect: governance.ReadOnly,
		Handler: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"` + strings.Repeat("y", 17<<20) + `"`), nil
		}}
	echo := hostfuncs.Tool{Name: "echo", Effect: governance.ReadOnly,
		Handler: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`1`), nil }}
	sb := newSandbox(t, wasmbox.Config{Tools: hostfuncs.NewRegistry().MustRegister(big, echo)})
	res := run(t, sb, `import _wasmbox, json
ok, resp = _wasmbox.call(b'Techo\n"' + b'x' * (16 << 20) + b'"')
print(ok, json.loads(resp)["type"])
ok, resp = _wasmbox.call(b'Techo\n{}')
print(ok, resp)
ok, resp = _wasmbox.call(b'Tbig\n{}')
print(ok, json.loads(resp)["type"])`)
	if want := "False ABIError\nTrue b'1'\nFalse ABIError\n"; res.Stdout != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", res.Stdout, want, tail(res.Stderr))
	}
}
