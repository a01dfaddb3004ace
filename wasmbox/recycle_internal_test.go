package wasmbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// spareCount is how many recycled instances sb keeps.
func spareCount(sb *Sandbox) int {
	sb.spares.mu.Lock()
	defer sb.spares.mu.Unlock()
	return len(sb.spares.list)
}

// instanceState is what an instance holds between calls: linear memory and the mutable globals.
func instanceState(t *testing.T, inst engine.Instance) ([]byte, [2]uint64) {
	t.Helper()
	mem := append([]byte(nil), inst.MemoryBytes()...)
	var g [2]uint64
	for k, name := range []string{hostfuncs.ExportStackPtr, hostfuncs.ExportFuel} {
		v, ok := inst.Global(name)
		if !ok {
			t.Fatalf("no global %s", name)
		}
		g[k] = v
	}
	return mem, g
}

// leaveEverything is a Run that changes every kind of state a program can reach and ends normally: objects,
// modules, interpreter settings, C-level state, open files and directory listings, closed and duplicated
// descriptors (the mounts' own included), cwd, environment, the stack and the deadline counter.
const leaveEverything = `import os, sys, builtins, gc, json, random
leak = [bytes(1000) for _ in range(2000)]
builtins.LEAK = leak
json.LEAK = 1
sys.modules["leaked_module"] = sys
sys.setrecursionlimit(77)
sys.path.insert(0, "/evil")
gc.disable()
random.seed(1)
os.environ["LEAK"] = "1"
os.putenv("LEAK2", "1")
os.chdir("/tmp")
held = [open("/workspace/held%d" % k, "w") for k in range(5)]
for f in held:
    f.write("x")
listing = os.scandir("/usr/local/lib")
next(listing)
fds = [os.open("/workspace/held0", os.O_RDONLY) for _ in range(3)]
for fd in range(3, 10):
    try:
        os.close(fd)  # the preopened mounts among them
    except OSError:
        pass
try:
    os.dup2(fds[-1], 3)
except (OSError, AttributeError):
    pass
def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)
deep(60)
x = 0
for _ in range(100000):
    x += 1
print("left")`

// probe prints what a program sees of the state leaveEverything changes.
const probe = `import os, sys, builtins, gc, json
fd = os.open("/workspace/probe", os.O_CREAT | os.O_WRONLY)
print(fd, os.listdir("/"), sorted(os.listdir("/usr/local/lib"))[:3], os.getcwd())
print(hasattr(builtins, "LEAK"), hasattr(json, "LEAK"), "leaked_module" in sys.modules, "/evil" in sys.path)
print(sys.getrecursionlimit(), gc.isenabled(), "LEAK" in os.environ, os.getenv("LEAK2"))
print(len(sys.modules), sorted(os.listdir("/workspace")))`

// A recycled instance is what instantiation made: the same memory, byte for byte, and the same globals; a
// program on it sees what a program on a new instance sees.
func TestRecycledInstanceIsAsInstantiated(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)

	g, err := sb.newGuest(ctx, newWorkspace(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	freshMem, freshGlobals := instanceState(t, g.inst)
	g.close(ctx) // not a Run's guest: closed, not kept
	if n := spareCount(sb); n != 0 {
		t.Fatalf("a guest that served no Run was kept (%d spares)", n)
	}
	want, err := sb.Run(ctx, probe) // on a new instance
	if err != nil {
		t.Fatal(err)
	}
	if n := spareCount(sb); n != 1 {
		t.Fatalf("%d spares after a Run, want 1", n)
	}

	for round := range 3 {
		res, err := sb.Run(ctx, leaveEverything)
		if err != nil || res.Stdout != "left\n" {
			t.Fatalf("round %d: %v %q %s", round, err, res.Stdout, res.Stderr)
		}
		sb.spares.mu.Lock()
		if len(sb.spares.list) != 1 {
			sb.spares.mu.Unlock()
			t.Fatalf("round %d: %d spares", round, len(sb.spares.list))
		}
		inst := sb.spares.list[0].inst
		sb.spares.mu.Unlock()
		mem, globals := instanceState(t, inst)
		if globals != freshGlobals {
			t.Errorf("round %d: globals %v, instantiated with %v", round, globals, freshGlobals)
		}
		if !bytes.Equal(mem, freshMem) {
			diff := 0
			for k := range min(len(mem), len(freshMem)) {
				if mem[k] != freshMem[k] {
					diff++
				}
			}
			t.Errorf("round %d: memory differs from a new instance's (%d vs %d bytes, %d differ)", round, len(mem), len(freshMem), diff)
		}
		got, err := sb.Run(ctx, probe) // on the recycled instance
		if err != nil {
			t.Fatal(err)
		}
		if got.Stdout != want.Stdout || got.Stderr != want.Stderr {
			t.Errorf("round %d: on a recycled instance the probe saw\n%s%s\non a new one\n%s%s", round, got.Stdout, got.Stderr, want.Stdout, want.Stderr)
		}
	}
}

// Runs that end in a way the host cannot vouch for leave no spare: their instance is closed, and the next Run
// still works.
func TestRecycleRefused(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{Timeout: 2 * time.Second, MemoryLimit: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	cases := []struct{ name, code string }{
		{"memory grew", "b = bytearray(64 << 20)\nprint(len(b))"},
		{"os._exit", "import os\nos._exit(3)"},
		{"hard kill at the deadline", "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"},
		{"trap", "import sys\nsys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)"},
	}
	for _, tc := range cases {
		sb.closeSpares(ctx) // start each case with none
		sb.spares.mu.Lock()
		sb.spares.closed = false
		sb.spares.mu.Unlock()
		_, _ = sb.Run(ctx, tc.code)
		if n := spareCount(sb); n != 0 {
			t.Errorf("%s: %d spares kept", tc.name, n)
		}
		res, err := sb.Run(ctx, "print(40 + 2)")
		if err != nil || res.Stdout != "42\n" {
			t.Errorf("%s: next run: %v %q", tc.name, err, res.Stdout)
		}
		if n := spareCount(sb); n != 1 {
			t.Errorf("%s: %d spares after a clean run, want 1", tc.name, n)
		}
	}
}

// Close closes the spares, and a Run that ends after Close keeps nothing.
func TestSparesClosedWithSandbox(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(ctx, "pass"); err != nil {
		t.Fatal(err)
	}
	sb.spares.mu.Lock()
	inst := sb.spares.list[0].inst
	sb.spares.mu.Unlock()
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := spareCount(sb); n != 0 {
		t.Errorf("%d spares after Close", n)
	}
	if _, err := inst.Call(ctx, hostfuncs.ExportABIVersion); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a spare still answers after Close: %v", err)
	}
}
