// Command refund lets the code-action agent refund an order of the seed shop. issue_refund is irreversible,
// so the gate asks for approval at the terminal: the question goes to stderr and the answer (y/N) is read from
// stdin.
//
// Approval timing: the person has 90 s to answer (the gate's ApprovalTimeout here; the default is 60 s), and the
// question shows the time left. The program's own time limit (the sandbox's 30 s) is paused while they decide;
// the agent's limit for the whole task (agent.WithTimeout, 5 minutes by default) is not, so a wait also ends
// when the task's time is up. No answer in time denies the call (ApprovalTimeout), and the program goes on.
//
//	go run ./examples/refund [-order A-1003] [-amount 50] [-provider auto|scripted|openai|anthropic|ollama] [-v]
//
// The provider is chosen as in examples/codeaction (OPENAI_API_KEY, ANTHROPIC_API_KEY, OLLAMA_HOST, else a
// scripted model, which it says on stderr). It prints the agent's answer as JSON on stdout, then the refunds the
// shop actually issued.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/examples/internal/provider"
	"github.com/wasmbox/wasmbox/examples/internal/shop"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// scriptedReply is the program a model would write: it tries the refund and reports either outcome, since a
// refused call raises tools.ToolDenied (ApprovalDenied when the person says no).
const scriptedReply = "I'll check the order, then try the refund; it needs approval, so I handle a refusal.\n```python\n" +
	`order = get_order(order_id=%q)
try:
    refund = issue_refund(order_id=order["order_id"], amount=%v)
    final_answer({"refunded": True, "order_id": refund["order_id"], "amount": refund["amount"]})
except tools.ToolDenied as e:
    final_answer({"refunded": False, "order_id": order["order_id"], "reason": str(e)})
` + "```"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("refund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	orderID := fs.String("order", "A-1003", "the order to refund")
	amount := fs.Float64("amount", 50, "the amount to refund")
	providerName := fs.String("provider", "auto", "auto, scripted, openai, anthropic or ollama")
	verbose := fs.Bool("v", false, "show the programs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: refund [-order ID] [-amount N] [-provider auto|scripted|openai|anthropic|ollama] [-v]")
		return 2
	}
	model, name, err := provider.Choose(*providerName, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "refund:", err)
		return 2
	}
	if model == nil {
		fmt.Fprintln(stderr, "refund: no OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST set: using a SCRIPTED model (canned replies, not an LLM)")
		model = agenttest.New(nil, fmt.Sprintf(scriptedReply, *orderID, *amount))
	} else {
		fmt.Fprintln(stderr, "refund: using", name)
	}

	// Read-only and mutating tools run; irreversible ones (issue_refund) need a yes at the terminal.
	gate, err := governance.NewGate(governance.GateConfig{
		Policy:   governance.EffectPolicy{},
		Approver: &governance.TerminalApprover{In: stdin, Out: stderr},
		Auditor:  &governance.MemoryAuditor{},
		// A person answers: give them time. The program's clock stops while they decide, so its own limit
		// need not cover the wait.
		ApprovalTimeout: 90 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(stderr, "refund:", err)
		return 1
	}
	s := shop.New()
	a, err := agent.New(ctx, model, wasmbox.Config{Tools: s.Tools(), Gate: gate},
		agent.WithEventHandler(func(e agent.Event) {
			switch {
			case e.Kind == agent.EventCode && *verbose:
				fmt.Fprintf(stderr, "step %d:\n    | %s\n", e.Step, strings.ReplaceAll(e.Code, "\n", "\n    | "))
			case e.Kind == agent.EventToolCall:
				fmt.Fprintf(stderr, "tool %s: %s", e.ToolCall.Tool, e.ToolCall.Status)
				if e.ToolCall.DecidedBy != "" && e.ToolCall.DecidedBy != "policy" {
					fmt.Fprintf(stderr, " (%s)", e.ToolCall.DecidedBy)
				}
				fmt.Fprintln(stderr)
			}
		}))
	if err != nil {
		fmt.Fprintln(stderr, "refund:", err)
		return 1
	}
	defer a.Close(ctx)
	task := fmt.Sprintf("The customer says order %s arrived damaged. Refund %.2f on it, then tell me whether the refund "+
		"went through, as a dict with refunded (bool), order_id, and amount or reason.", *orderID, *amount)
	res, err := a.Run(ctx, task)
	if err != nil {
		fmt.Fprintln(stderr, "refund:", err)
		return 1
	}
	out, _ := json.Marshal(res.Answer)
	fmt.Fprintln(stdout, string(out))
	fmt.Fprintf(stdout, "refunds issued: %d\n", len(s.Refunds))
	for _, r := range s.Refunds {
		fmt.Fprintf(stdout, "  %s %.2f\n", r.OrderID, r.Amount)
	}
	return 0
}
