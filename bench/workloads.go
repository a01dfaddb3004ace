// Package bench holds wasmbox's benchmarks and the workloads that bench/compare runs side by side with native
// CPython. Speed targets are checked here, never as wall-clock assertions in tests.
//
// The targets, as bench/compare labels them:
//
//	P1  a fresh isolated sandbox running print(1), compiled module loaded, p50     ≤ 0.2 ms
//	P2  a new process to its first result, with the compilation cache              ≤ 150 ms (default engine)
//	P3  pure-Python compute against native CPython 3.13, hard deadline on          ≤ 2× (q3/q1 ≤ 1.15 over the rounds)
//	P4  the cost of the hard deadline on compute                                   ≤ 10%
//	P5  a governed tool call from Python (policy, budget, audit, schema check)     ≤ 1 µs
//	P6  private memory (PSS) added per live idle sandbox                           ≤ 2 MiB
//	P7  trivial runs per second on 2 cores                                         ≥ 1,500
//	P8  a fresh run of a runtime with numpy and pandas imported, p50               ≤ 2 ms
//	P9  what an application importing only the sandbox package downloads           ≤ 20 MB of modules
//	P10 a paused task resumed in a new process, to its next tool call (SQLite)    ≤ 50 ms + the replay
//	P11 a governed call with its budget in a shared store (StoreBudget), p50     SQLite ≤ 50 µs, PostgreSQL ≤ 1 ms
//	    (bench/compare -tasks: resume_p50_ms, sqlite_governed_call_us, postgres_governed_call_us; beside them,
//	    reported without a target, the same call with the audit chain in the store too and a durable task's
//	    call: *_governed_call_shared_audit_us, *_task_call_us)
package bench

import "strconv"

// Workloads timed inside the guest (and natively) with time.perf_counter, so interpreter start is excluded.
const (
	// W1: pure-Python loop.
	W1 = `s = 0
for i in range(3_000_000):
    s += i * i
`
	// W2: json dumps/loads of 20k dicts (an f-string rather than %-formatting, which Monty lacks).
	W2 = `import json
data = [{"id": i, "name": f"item{i}", "tags": ["a", "b"], "price": i * 1.5} for i in range(20000)]
s = json.dumps(data)
back = json.loads(s)
assert len(back) == 20000
`
)

// BuildWorkloads are what `bench/compare -against DIR` times on two interpreter builds: W1 and W2, and three
// more kinds of everyday Python that the two do not exercise (method calls and attributes, text processing,
// sorting and hashing), so that a build option is not judged on one loop.
var BuildWorkloads = []struct{ Name, Code string }{
	{"W1 loop", W1},
	{"W2 json", W2},
	{"objects", `class V:
    __slots__ = ("x", "y")
    def __init__(self, x, y):
        self.x, self.y = x, y
    def add(self, o):
        return V(self.x + o.x, self.y + o.y)
    def dot(self, o):
        return self.x * o.x + self.y * o.y
acc, d, t = V(0, 0), V(1, 2), 0
for i in range(300_000):
    acc = acc.add(d)
    t += acc.dot(d) % 7
assert t > 0
`},
	{"text", `import re
words = re.compile(r"[a-z]+")
line = "The quick brown fox jumps over the lazy dog, again and again; " * 4
n = 0
for i in range(20_000):
    s = line.upper().lower().replace("again", str(i))
    n += len(words.findall(s)) + len(s.split()) + s.count("o")
    n += len(f"{i:>8}|{s[:10]!r}|{i / 7:.3f}")
assert n > 0
`},
	{"sort and hash", `import random
r = random.Random(1)
xs = [r.random() for _ in range(200_000)]
ys = sorted(xs)
keys = [str(int(x * 1e6)) for x in ys]
d = {k: i for i, k in enumerate(keys)}
s = {k[::-1] for k in keys}
assert len(d) > 0 and len(s) > 0 and ys[0] <= ys[-1]
`},
}

// W1Loop is W1's loop with n iterations instead of 3,000,000, in a function (for instruction counts, which
// subtract two sizes). In a function its names are fast locals. At module level every iteration looks s and i up
// in a dict, and whether they collide there depends on the string-hash secret, which is fixed when an
// interpreter initialises (per snapshot in a sandbox, per process natively): that alone moved W1's count per
// iteration by 6% between two snapshots of the same build, more than the effects being measured.
func W1Loop(n int) string {
	return "def w1():\n    s = 0\n    for i in range(" + strconv.Itoa(n) + "):\n        s += i * i\n    return s\nw1()\n"
}

// Timed wraps a workload so that it prints its own duration in seconds (one float on stdout).
func Timed(workload string) string {
	return "import time as _t\n_t0 = _t.perf_counter()\n" + indentExec(workload) + "print(_t.perf_counter() - _t0)\n"
}

// TimedNative is Timed for a native interpreter: it prints the workload's wall time and the user and system
// time its process spent on it (resource.getrusage, the counter the host reads for a sandbox), on one line.
func TimedNative(workload string) string {
	return "import time as _t, resource as _r\n_u = lambda: sum(_r.getrusage(_r.RUSAGE_SELF)[:2])\n_c0 = _u()\n_t0 = _t.perf_counter()\n" +
		indentExec(workload) + "_t1 = _t.perf_counter()\nprint(_t1 - _t0, _u() - _c0)\n"
}

func indentExec(src string) string {
	return "exec(compile(" + pyQuote(src) + ", '<workload>', 'exec'), {})\n"
}

func pyQuote(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			out = append(out, '\\', 'n')
		case '"', '\\':
			out = append(out, '\\', c)
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '"'))
}
