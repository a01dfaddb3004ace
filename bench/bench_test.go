package bench

import (
	"context"
	"io"
	"os"
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
// once (call_into, the reply written into the guest's buffer) and runs the bridge, the gate and the tool on the
// program's own goroutine (a worker of the Sandbox, handed the whole run once): no handoff per call.
//
// The file audit writes every record to a real file, which starts over from its beginning past
// maxBenchAuditBytes: a long -benchtime (each iteration is 20,000 records) must not fill the disk.
func BenchmarkToolCall(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	file, err := governance.NewJSONLAuditor(&wrappingFile{f: f, limit: maxBenchAuditBytes}, governance.JSONLConfig{})
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

// maxBenchAuditBytes bounds the file BenchmarkToolCall's file audit writes.
const maxBenchAuditBytes = 64 << 20

// wrappingFile writes to f and truncates f back to empty once it holds limit bytes.
type wrappingFile struct {
	f        *os.File
	n, limit int64
}

func (w *wrappingFile) Write(p []byte) (int, error) {
	if w.n+int64(len(p)) > w.limit {
		if err := w.f.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := w.f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		w.n = 0
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	return n, err
}

func TestWrappingFileStaysBounded(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &wrappingFile{f: f, limit: 100}
	for i := range 50 {
		if _, err := w.Write([]byte("0123456789")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 100 {
		t.Errorf("file holds %d bytes after 500 written with limit 100, want 100", st.Size())
	}
}
