package escalate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/escalate"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// TestGatedAuditedToolCall runs a real container whose tool calls pass hostfuncs' registry and bridge and the
// governance Gate (EffectPolicy, no approver: irreversible tools are denied), and checks the audit records.
func TestGatedAuditedToolCall(t *testing.T) {
	host := escalate.EngineHostForTest(t)
	reg := hostfuncs.NewRegistry()
	type args struct {
		OrderID string `json:"order_id"`
	}
	get := hostfuncs.Func("get_order", "Get one order.", func(ctx context.Context, a args) (map[string]any, error) {
		if a.OrderID == "missing" {
			return nil, errors.New("no such order")
		}
		return map[string]any{"id": a.OrderID, "amount": 420}, nil
	})
	get.Effect = governance.ReadOnly
	refund := hostfuncs.Func("refund", "Refund an order.", func(ctx context.Context, a args) (bool, error) { return true, nil })
	refund.Effect = governance.Irreversible
	reg.MustRegister(get, refund)
	audit := &governance.MemoryAuditor{}
	gate, err := governance.NewGate(governance.GateConfig{Policy: governance.EffectPolicy{}, Auditor: audit})
	if err != nil {
		t.Fatal(err)
	}
	bridge := hostfuncs.NewBridge(reg, gate.NewRun("escalated-1"), governance.SourceContainer)

	d, err := escalate.NewDocker(t.Context(), escalate.DockerConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := d.Run(t.Context(), escalate.Job{
		Image: escalate.ImageForTest(),
		Code: `
import wasmbox_tools as tools
print(tools.get_order(order_id="A-1")["amount"])
for name, kw in [("get_order", {"order_id": "missing"}), ("get_order", {"order_id": 1}), ("refund", {"order_id": "A-1"}), ("nope", {})]:
    try:
        tools.call(name, **kw)
    except tools.ToolException as e:
        print(name, type(e).__name__, isinstance(e, tools.ToolDenied))
`,
		Tools: escalate.BridgeTools(bridge.Call),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "420\nget_order ToolError False\nget_order InvalidToolArguments False\nrefund ApprovalDenied True\nnope UnknownTool False\n"
	if res.Stdout != want {
		t.Fatalf("stdout %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	var outcomes []string
	for _, r := range audit.RunRecords("escalated-1") {
		if r.Source != governance.SourceContainer {
			t.Errorf("record source %q", r.Source)
		}
		outcomes = append(outcomes, r.Tool+":"+string(r.Outcome))
	}
	got := strings.Join(outcomes, " ")
	if !strings.Contains(got, "get_order:ok") || !strings.Contains(got, "refund:denied") || len(bridge.Calls()) != 5 {
		t.Fatalf("audit %s; bridge calls %d", got, len(bridge.Calls()))
	}
	t.Logf("audit: %s", got)
}
