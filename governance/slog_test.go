package governance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
)

// TestSlogLogger: the gate logs through a *slog.Logger: levels, attributes and names arrive as slog records,
// and the handler's level decides what is written.
func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := governance.SlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Trace("dropped")
	l.Named("gate").Named("audit").With("run", "r1").Warn("slow", "ms", 12)
	if !l.IsDebug() || l.IsTrace() {
		t.Errorf("IsDebug %v IsTrace %v with a Debug handler", l.IsDebug(), l.IsTrace())
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("records %q", lines)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "slow" || rec["logger"] != "gate.audit" || rec["run"] != "r1" || rec["ms"] != 12.0 {
		t.Errorf("record %v", rec)
	}

	// Through a gate: a denial is logged at debug.
	buf.Reset()
	g, err := governance.NewGate(governance.GateConfig{Auditor: governance.DiscardAuditor{}, Logger: l})
	if err != nil {
		t.Fatal(err)
	}
	g.NewRun("r").Do(context.Background(), call("x", governance.ReadOnly), newTool().fn)
	if !strings.Contains(buf.String(), `"level":"DEBUG"`) {
		t.Errorf("the gate's denial was not logged through slog: %q", buf.String())
	}
	if governance.SlogLogger(nil).IsError() {
		t.Error("a nil *slog.Logger logs")
	}
}
