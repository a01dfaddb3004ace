package wasmtime

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// leaveEverything changes every kind of state a program can reach and ends normally: objects, modules,
// interpreter settings, open files and directory listings, closed descriptors, cwd, environment, the stack and
// the deadline counter.
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
os.chdir("/tmp")
held = [open("/workspace/held%d" % k, "w") for k in range(5)]
for f in held:
    f.write("x")
listing = os.scandir("/usr/local/lib")
next(listing)
fds = [os.open("/workspace/held0", os.O_RDONLY) for _ in range(3)]
open("/tmp/left", "w").write("x")
def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)
deep(60)
s = 0
for i in range(200_000):
    s += i
print("left")
`

// checkNothingLeft is what a new run sees: none of leaveEverything's state.
const checkNothingLeft = `import os, sys, builtins, gc, json
print(hasattr(builtins, "LEAK"), hasattr(json, "LEAK"), "leaked_module" in sys.modules,
      sys.getrecursionlimit() == 77, "/evil" in sys.path, gc.isenabled(), "LEAK" in os.environ,
      os.getcwd(), sorted(os.listdir("/workspace")), os.path.exists("/tmp/left"))
`

const nothingLeft = "False False False False False True False /workspace [] False\n"

// instanceGlobals reads the mutable globals a recycled instance must give back.
func instanceGlobals(t *testing.T, inst engine.Instance) [2]uint64 {
	t.Helper()
	var g [2]uint64
	for k, name := range []string{hostfuncs.ExportStackPtr, hostfuncs.ExportFuel} {
		v, ok := inst.Global(name)
		if !ok {
			t.Fatalf("no global %s", name)
		}
		g[k] = v
	}
	return g
}

// A wasmtime instance started from a mapped snapshot image can serve another run: Recycle puts its memory back to
// the image, byte for byte, and its globals to their initial values; Reuse gives it a new run's world, in which
// nothing of the last run is left.
func TestWasmtimeRecycle(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("images are copied, not mapped, on " + runtime.GOOS + ": its instances are not recycled")
	}
	it := loadInterp(t, "wasmtime")
	_, mod, image := snapshotOf(t, it)
	alloc := image.Allocator(256 << 20)

	g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
	mem0 := append([]byte(nil), g.inst.MemoryBytes()...)
	glob0 := instanceGlobals(t, g.inst)
	r, ok := g.inst.(engine.Recycler)
	if !ok {
		t.Fatal("a wasmtime instance is not an engine.Recycler")
	}
	for round := range 3 {
		if out := g.mustExec(leaveEverything); out != "left\n" {
			t.Fatalf("round %d: %q", round, out)
		}
		if bytes.Equal(g.inst.MemoryBytes(), mem0) {
			t.Fatal("the run changed no byte of memory: the comparison below proves nothing")
		}
		if err := r.Recycle(); err != nil {
			t.Fatalf("round %d: recycle: %v", round, err)
		}
		if mem := g.inst.MemoryBytes(); !bytes.Equal(mem, mem0) {
			diff := 0
			for k := range min(len(mem), len(mem0)) {
				if mem[k] != mem0[k] {
					diff++
				}
			}
			t.Fatalf("round %d: memory after recycling differs from the instance's first (%d bytes of %d, lengths %d and %d)", round, diff, len(mem0), len(mem), len(mem0))
		}
		if glob := instanceGlobals(t, g.inst); glob != glob0 {
			t.Fatalf("round %d: globals %v after recycling, want %v", round, glob, glob0)
		}
		if err := r.Recycle(); err == nil {
			t.Fatal("an instance was recycled twice")
		}
		next, cfg := newGuestState(t, it, guestOpts{mod: mod, memory: alloc})
		if err := r.Reuse(cfg); err != nil {
			t.Fatalf("round %d: reuse: %v", round, err)
		}
		next.inst = g.inst
		if out := next.mustExec(checkNothingLeft); out != nothingLeft {
			t.Fatalf("round %d: the next run saw %q, want %q", round, out, nothingLeft)
		}
		g = next
	}
	if err := r.Reuse(engine.InstanceConfig{}); err == nil {
		t.Fatal("an instance in use was given another run")
	}
}

// Recycling is refused, and the instance must then be closed, whenever it cannot be proven complete.
func TestWasmtimeRecycleRefused(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("images are copied, not mapped, on " + runtime.GOOS + ": its instances are not recycled")
	}
	it := loadInterp(t, "wasmtime")
	_, mod, image := snapshotOf(t, it)
	alloc := image.Allocator(256 << 20)
	for _, c := range []struct{ name, code, want string }{
		{"memory grew", "x = bytearray(64 << 20)\nx[-1] = 1", "memory grew"},
		{"the guest exited", "import os\nos._exit(3)", "did not return normally"},
	} {
		g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
		_, _ = g.exec(context.Background(), c.code)
		err := g.inst.(engine.Recycler).Recycle()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: recycle: %v, want an error saying %q", c.name, err, c.want)
		}
		if err := g.inst.(engine.Recycler).Reuse(engine.InstanceConfig{}); err == nil {
			t.Errorf("%s: an instance that was not recycled was given another run", c.name)
		}
	}
	// A killed run: the tick import asks for a kill once the context has ended.
	g := newGuest(t, it, guestOpts{mod: mod, memory: alloc})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.exec(ctx, "while True: pass"); err == nil {
		t.Fatal("a run under an ended context was not killed")
	}
	if err := g.inst.(engine.Recycler).Recycle(); err == nil || !strings.Contains(err.Error(), "did not return normally") {
		t.Errorf("killed: recycle: %v", err)
	}
	// An instance whose memory is not mapped from an image (the interpreter booting) has nothing to go back to.
	plain := newGuest(t, it, guestOpts{memory: engine.LimitedAllocator(256 << 20)})
	if err := plain.inst.(engine.Recycler).Recycle(); err == nil {
		t.Error("an instance without an image was recycled")
	}
}
