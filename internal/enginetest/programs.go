package enginetest

import (
	"testing"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
)

// LeaveEverything is a program that changes every kind of state a program can reach and ends normally: objects,
// modules, interpreter settings, C-level state, open files and directory listings, closed and duplicated
// descriptors (the mounts' own included), cwd, environment, the stack and the deadline counter.
const LeaveEverything = `import os, sys, builtins, gc, json, random
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

// Probe prints what a program sees of the state LeaveEverything changes: on a recycled instance it must print
// what it prints on a new one.
const Probe = `import os, sys, builtins, gc, json
fd = os.open("/workspace/probe", os.O_CREAT | os.O_WRONLY)
print(fd, os.listdir("/"), sorted(os.listdir("/usr/local/lib"))[:3], os.getcwd())
print(hasattr(builtins, "LEAK"), hasattr(json, "LEAK"), "leaked_module" in sys.modules, "/evil" in sys.path)
print(sys.getrecursionlimit(), gc.isenabled(), "LEAK" in os.environ, os.getenv("LEAK2"))
print(len(sys.modules), sorted(os.listdir("/workspace")))`

// Globals reads the interpreter's two mutable globals (the stack pointer and the deadline counter), which a
// recycled instance must give back as instantiation set them.
func Globals(t testing.TB, inst engine.Instance) [2]uint64 {
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
