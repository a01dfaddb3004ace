package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wasmbox/wasmbox/assets/uninstrumented"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func sandbox(b *testing.B, cfg wasmbox.Config) *wasmbox.Sandbox {
	b.Helper()
	sb, err := wasmbox.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func runOK(b *testing.B, sb *wasmbox.Sandbox, code string) {
	res, err := sb.Run(context.Background(), code)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("run: %v %+v", err, res)
	}
}

// BenchmarkPrecompile compiles the interpreter with no cache (a new process on a new machine), initialises it
// and saves its snapshot: what `wasmbox precompile DIR` does at build time. Loading a cache or a precompiled
// directory in a new process is P2, measured by go run ./bench/compare.
func BenchmarkPrecompile(b *testing.B) {
	for b.Loop() {
		if err := wasmbox.Precompile(context.Background(), b.TempDir(), wasmbox.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunPrint is a fresh isolated sandbox + print(1) (P1).
func BenchmarkRunPrint(b *testing.B) {
	sb := sandbox(b, wasmbox.Config{})
	runOK(b, sb, "print(1)")
	for b.Loop() {
		runOK(b, sb, "print(1)")
	}
}

// BenchmarkRunParallel is trivial runs on all cores (P7).
func BenchmarkRunParallel(b *testing.B) {
	sb := sandbox(b, wasmbox.Config{})
	runOK(b, sb, "print(1)")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			runOK(b, sb, "print(1)")
		}
	})
}

func benchWorkload(b *testing.B, cfg wasmbox.Config, code string) {
	sb := sandbox(b, cfg)
	for b.Loop() {
		runOK(b, sb, code)
	}
}

func BenchmarkW1Loop(b *testing.B) { benchWorkload(b, wasmbox.Config{}, W1) }
func BenchmarkW2JSON(b *testing.B) { benchWorkload(b, wasmbox.Config{}, W2) }

// The same workloads on the interpreter before the deadline rewrite: the ratio is the deadline's cost (P4).
func BenchmarkW1LoopNoDeadline(b *testing.B) { benchWorkload(b, noDeadline(b), W1) }
func BenchmarkW2JSONNoDeadline(b *testing.B) { benchWorkload(b, noDeadline(b), W2) }

func noDeadline(b *testing.B) wasmbox.Config {
	it, err := uninstrumented.Load()
	if err != nil {
		b.Fatal(err)
	}
	return wasmbox.Config{Interpreter: it}
}

// BenchmarkToolCall is the round trip of one tool call from Python through the Gate (P5): 10,000 calls per run,
// reported as µs per call, with an in-memory audit and with a hash-chained file audit. Each call crosses into Go
// twice (call, fetch) and runs the bridge, the gate and the tool on the program's own goroutine (a worker of the
// Sandbox, handed the whole run once): no handoff per call.
func BenchmarkToolCall(b *testing.B) {
	file, err := governance.OpenAuditFile(filepath.Join(b.TempDir(), "audit.jsonl"), governance.JSONLConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	for name, aud := range map[string]governance.Auditor{"memory": &governance.MemoryAuditor{Limit: 1000}, "file": file} {
		b.Run(name, func(b *testing.B) {
			sb, err := ToolSandbox(context.Background(), aud, 20_000)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close(context.Background())
			var total float64
			for b.Loop() {
				us, err := ToolCallMicros(context.Background(), sb, 10_000)
				if err != nil {
					b.Fatal(err)
				}
				total += us
			}
			b.ReportMetric(total/float64(b.N), "µs/call")
		})
	}
}
