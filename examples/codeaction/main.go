// Command codeaction answers the seed question "What is the total amount of every EU order?" with the
// code-action agent: the model writes Python that calls the shop's tools (list_orders, get_order) in the
// sandbox, and gives the answer with final_answer.
//
//	go run ./examples/codeaction [-provider auto|scripted|openai|anthropic|ollama] [-question Q] [-v]
//
// With -provider auto (the default) it uses OpenAI if OPENAI_API_KEY is set, else Anthropic if
// ANTHROPIC_API_KEY is set, else Ollama if OLLAMA_HOST is set (model names from OPENAI_MODEL, ANTHROPIC_MODEL,
// OLLAMA_MODEL). With none of them it runs a scripted model, offline, and says so on stderr. The answer is
// printed on stdout as JSON (1218.5); the agent's progress goes to stderr (-v shows the programs and what the
// model is told).
//
// It runs under wasmbox's default gate, which has no approver: issue_refund (irreversible, so it needs approval)
// is refused whatever its arguments, and the agent leaves it out of the model's prompt. Nothing here waits for
// a person; examples/refund shows approval at the terminal.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/examples/internal/provider"
	"github.com/wasmbox/wasmbox/examples/internal/shop"
	"github.com/wasmbox/wasmbox/wasmbox"
)

const seedQuestion = "What is the total amount of every EU order?"

// scriptedReplies stand in for a model: a first program looks at the data, a second one (using the variables
// of the first) computes and answers.
var scriptedReplies = []string{
	"Let me look at the orders first.\n```python\nids = list_orders()\nprint(ids)\nprint(get_order(order_id=ids[0]))\n```",
	"Each order is a dict with a region and an amount. Now the EU total:\n```python\n" +
		"total = 0.0\nfor order_id in ids:\n    order = get_order(order_id=order_id)\n    if order[\"region\"] == \"EU\":\n" +
		"        total += order[\"amount\"]\nfinal_answer(total)\n```",
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("codeaction", flag.ContinueOnError)
	fs.SetOutput(stderr)
	providerName := fs.String("provider", "auto", "auto, scripted, openai, anthropic or ollama")
	question := fs.String("question", seedQuestion, "the task for the agent")
	verbose := fs.Bool("v", false, "show the programs and the observations")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: codeaction [-provider auto|scripted|openai|anthropic|ollama] [-question Q] [-v]")
		return 2
	}
	model, name, err := provider.Choose(*providerName, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "codeaction:", err)
		return 2
	}
	if model == nil {
		fmt.Fprintln(stderr, "codeaction: no OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST set: using a SCRIPTED model (canned replies, not an LLM)")
		if *question != seedQuestion {
			fmt.Fprintln(stderr, "codeaction: the scripted replies answer the seed question only:", seedQuestion)
		}
		model = agenttest.New(nil, scriptedReplies...)
	} else {
		fmt.Fprintln(stderr, "codeaction: using", name)
	}

	a, err := agent.New(ctx, model, wasmbox.Config{Tools: shop.New().Tools()},
		agent.WithEventHandler(progress(stderr, *verbose)))
	if err != nil {
		fmt.Fprintln(stderr, "codeaction:", err)
		return 1
	}
	defer a.Close(ctx)
	res, err := a.Run(ctx, *question)
	if err != nil {
		fmt.Fprintln(stderr, "codeaction:", err)
		return 1
	}
	out, _ := json.Marshal(res.Answer)
	fmt.Fprintln(stdout, string(out))
	fmt.Fprintf(stderr, "codeaction: %d step(s), %d repair(s), %d tool call(s), answer from %s\n", len(res.Steps), res.Repairs, len(res.ToolCalls), res.AnswerFrom)
	return 0
}

// progress prints the agent's events on w.
func progress(w io.Writer, verbose bool) func(agent.Event) {
	return func(e agent.Event) {
		switch e.Kind {
		case agent.EventCode:
			fmt.Fprintf(w, "step %d: running a program of %d lines\n", e.Step, strings.Count(e.Code, "\n")+1)
			if verbose {
				fmt.Fprintln(w, indent(e.Code))
			}
		case agent.EventToolCall:
			fmt.Fprintf(w, "  tool %s: %s", e.ToolCall.Tool, e.ToolCall.Status)
			if e.ToolCall.DecidedBy != "" && e.ToolCall.Status == "denied" {
				fmt.Fprintf(w, " by %s", e.ToolCall.DecidedBy)
			}
			fmt.Fprintln(w)
		case agent.EventObservation, agent.EventRepair, agent.EventNudge:
			if e.Kind == agent.EventRepair {
				fmt.Fprintf(w, "step %d: the program failed (%v); asking for a repair\n", e.Step, e.Err)
			}
			if verbose {
				fmt.Fprintln(w, indent(e.Text))
			}
		case agent.EventStdout:
			if verbose {
				fmt.Fprint(w, indent(e.Text))
			}
		}
	}
}

func indent(s string) string {
	return "    | " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    | ") + "\n"
}
