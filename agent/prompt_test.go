package agent_test

import (
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// With Config.Packages the prompt names the installed packages instead of forbidding everything outside the
// standard library, and a program can import them.
func TestPromptListsInstalledPackages(t *testing.T) {
	dir := t.TempDir()
	pureWheel(t, dir, "greetlib", "1.0", "greetlib", "def greet(n):\n    return 'hello ' + n\n")
	wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"greetlib"}})
	if err != nil {
		t.Fatal(err)
	}
	model := agenttest.New(t, py("import greetlib\nfinal_answer(greetlib.greet('you'))"))
	a, _ := newAgentCfg(t, model, wasmbox.Config{Wheelhouse: wh, Packages: []string{"greetlib"}})
	sys := a.SystemPrompt()
	if strings.Contains(sys, "Do not import modules that are not in the standard library") || strings.Contains(sys, "standard library only") {
		t.Errorf("the prompt forbids the installed packages:\n%s", sys)
	}
	if !strings.Contains(sys, "Installed third-party packages (with their dependencies), ready to import: greetlib 1.0.") {
		t.Errorf("the prompt does not list greetlib:\n%s", sys)
	}
	res, err := run(t, a, "Greet.")
	if err != nil || res.Answer != "hello you" {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}

	// Without packages the standard-library rule stays.
	b, _ := newAgent(t, agenttest.New(nil))
	if !strings.Contains(b.SystemPrompt(), "Python standard library only") {
		t.Errorf("prompt without packages:\n%s", b.SystemPrompt())
	}
}

// The default gate refuses irreversible tools whatever their arguments (EffectPolicy asks for approval and no
// approver is configured), so the prompt does not show issue_refund; the other tools stay.
func TestPromptHidesAlwaysRefusedTools(t *testing.T) {
	a, _ := newAgent(t, agenttest.New(nil))
	sys := a.SystemPrompt()
	if strings.Contains(sys, "issue_refund") {
		t.Errorf("the prompt shows a tool the gate always refuses:\n%s", sys)
	}
	for _, want := range []string{"def list_orders(", "def get_order(order_id: str)"} {
		if !strings.Contains(sys, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	// A program can still call it (and is refused): hiding is about the prompt, the gate decides.
	model := agenttest.New(t, py("try:\n    issue_refund(order_id='A-1001', amount=1.0)\nexcept tools.ApprovalDenied:\n    final_answer('refused')"))
	a, s := newAgent(t, model)
	if res, err := run(t, a, "Refund."); err != nil || res.Answer != "refused" || len(s.refunds) != 0 {
		t.Errorf("answer %v, err %v, refunds %v", res.Answer, err, s.refunds)
	}
}

// With every tool refused, the prompt says there are none.
func TestPromptNoToolsShown(t *testing.T) {
	s := newShop()
	reg := s.registry()
	a, err := agent.New(t.Context(), agenttest.New(nil), wasmbox.Config{Tools: onlyIrreversible(t, reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(t.Context())
	if sys := a.SystemPrompt(); !strings.Contains(sys, "No tools are available") || strings.Contains(sys, "issue_refund") {
		t.Errorf("prompt:\n%s", sys)
	}
}
