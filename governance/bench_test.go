package governance_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

var benchResult = []byte(`{"temp_c":21,"city":"Oslo"}`)

func benchTool(context.Context, governance.Call) ([]byte, error) { return benchResult, nil }

func benchGate(b *testing.B, auditor governance.Auditor, policy governance.Policy) *governance.Run {
	g, err := governance.NewGate(governance.GateConfig{
		Policy:  policy,
		Auditor: auditor,
		Limits:  governance.Limits{MaxToolCalls: math.MaxInt64},
	})
	if err != nil {
		b.Fatal(err)
	}
	return g.NewRun("bench")
}

func runBench(b *testing.B, run *governance.Run) {
	c := governance.Call{Tool: "get_weather", Args: json.RawMessage(`{"city":"Oslo","units":"metric"}`), Source: governance.SourcePython, Effect: governance.ReadOnly}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := run.Do(ctx, c, benchTool); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateDo is the P5 target: a tool call through the gate with an allow-all policy and in-memory audit.
func BenchmarkGateDo(b *testing.B) {
	runBench(b, benchGate(b, &governance.MemoryAuditor{Limit: 1024}, governance.AllowAllPolicy{}))
}

// BenchmarkGateDoRulePolicy uses a compiled PolicySpec with an argument rule instead of allow-all.
func BenchmarkGateDoRulePolicy(b *testing.B) {
	spec, err := governance.ParsePolicy([]byte(`
allow: [get_weather]
tools:
  get_weather:
    effect: read_only
    args: [{path: units, one_of: [metric, imperial]}]
`), "yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := governance.NewPolicy(*spec)
	if err != nil {
		b.Fatal(err)
	}
	runBench(b, benchGate(b, &governance.MemoryAuditor{Limit: 1024}, p))
}

// BenchmarkGateDoFileAudit writes both records of each call to a hash-chained JSONL file (no fsync).
func BenchmarkGateDoFileAudit(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  governance.JSONLConfig
	}{
		{"sha256", governance.JSONLConfig{}},
		{"hmac", governance.JSONLConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a, err := governance.OpenAuditFile(filepath.Join(b.TempDir(), "audit.jsonl"), tc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			runBench(b, benchGate(b, a, governance.AllowAllPolicy{}))
		})
	}
}

// BenchmarkGateDoFileAuditSync is the same with an fsync after every record (two per call).
func BenchmarkGateDoFileAuditSync(b *testing.B) {
	a, err := governance.OpenAuditFile(filepath.Join(b.TempDir(), "audit.jsonl"), governance.JSONLConfig{Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	runBench(b, benchGate(b, a, governance.AllowAllPolicy{}))
}

// BenchmarkGateDoParallel shares one gate between goroutines, each with its own run.
func BenchmarkGateDoParallel(b *testing.B) {
	g, err := governance.NewGate(governance.GateConfig{
		Policy:  governance.AllowAllPolicy{},
		Auditor: &governance.MemoryAuditor{Limit: 1024},
		Limits:  governance.Limits{MaxToolCalls: math.MaxInt64},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := governance.Call{Tool: "get_weather", Args: json.RawMessage(`{"city":"Oslo"}`), Source: governance.SourcePython, Effect: governance.ReadOnly}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		run := g.NewRun("")
		for pb.Next() {
			if _, err := run.Do(context.Background(), c, benchTool); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
