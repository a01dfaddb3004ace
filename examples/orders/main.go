// Command orders runs a Python program in the sandbox against the seed shop's tools, governed on the host:
//
//	go run ./examples/orders -code FILE.py [-max-tool-calls N] [-timeout D] [-approve allow|deny|timeout|prompt] [-audit FILE]
//
// It prints the program's stdout, then one line "tool_calls: N allowed, M denied", and exits with the program's
// exit code (124 on timeout, 125 on a wasmbox failure, 2 on usage errors). -approve decides issue_refund, the one
// irreversible tool: allow, deny, timeout (the approver never answers; the gate denies after 200 ms) or prompt
// (ask on the terminal, the default). -audit appends the hash-chained audit log to FILE (verify it with
// `go run ./cmd/wasmbox audit verify FILE`).
//
// Approval timing: with -approve prompt the person has the gate's approval timeout to answer
// (governance.DefaultApprovalTimeout, 60 s; the question shows the time left), and the program's own time limit
// (-timeout, 30 s by default) is paused while they decide, so a slow answer does not use up the program's time.
// No answer in time denies the call (ApprovalTimeout).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wasmbox/wasmbox/examples/internal/shop"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	codeFile := fs.String("code", "", "Python program to run (required)")
	maxCalls := fs.Int64("max-tool-calls", 50, "hard cap on tool calls per run")
	timeout := fs.Duration("timeout", wasmbox.DefaultTimeout, "the program's time limit (paused while a person approves a call)")
	approve := fs.String("approve", "prompt", "how issue_refund is approved: allow, deny, timeout or prompt")
	auditFile := fs.String("audit", "", "append the audit log (JSONL, hash-chained) to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *codeFile == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: orders -code FILE.py [-max-tool-calls N] [-timeout D] [-approve allow|deny|timeout|prompt] [-audit FILE]")
		return 2
	}
	src, err := os.ReadFile(*codeFile)
	if err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 2
	}
	cfg := governance.GateConfig{Policy: governance.EffectPolicy{}, Limits: governance.Limits{MaxToolCalls: *maxCalls}}
	switch *approve {
	case "allow":
		cfg.Approver = governance.AllowAll{}
	case "deny":
		cfg.Approver = governance.DenyAll{}
	case "timeout":
		cfg.ApprovalTimeout = 200 * time.Millisecond
		cfg.Approver = governance.ApproverFunc(func(ctx context.Context, _ governance.ApprovalRequest) (governance.Decision, error) {
			<-ctx.Done() // never answers
			return governance.Decision{}, ctx.Err()
		})
	case "prompt":
		cfg.Approver = &governance.TerminalApprover{In: stdin, Out: stderr}
	default:
		fmt.Fprintf(stderr, "orders: -approve must be allow, deny, timeout or prompt, not %q\n", *approve)
		return 2
	}
	if *auditFile != "" {
		aud, err := governance.OpenAuditFile(*auditFile, governance.JSONLConfig{})
		if err != nil {
			fmt.Fprintln(stderr, "orders:", err)
			return 125
		}
		defer aud.Close()
		cfg.Auditor = aud
	} else {
		cfg.Auditor = &governance.MemoryAuditor{}
	}
	gate, err := governance.NewGate(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 125
	}
	sb, err := wasmbox.New(ctx, wasmbox.Config{Tools: shop.New().Tools(), Gate: gate, Stderr: stderr, Timeout: *timeout})
	if err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 125
	}
	defer sb.Close(ctx)
	res, runErr := sb.RunProgram(ctx, wasmbox.Program{Code: string(src), Filename: *codeFile})
	if res == nil {
		fmt.Fprintln(stderr, "orders:", runErr)
		return 125
	}
	fmt.Fprint(stdout, res.Stdout)
	allowed, denied := 0, 0
	for _, c := range res.ToolCalls {
		if c.Status == "denied" {
			denied++
		} else {
			allowed++
		}
	}
	fmt.Fprintf(stdout, "tool_calls: %d allowed, %d denied\n", allowed, denied)
	var re *wasmbox.RunError
	switch {
	case errors.Is(runErr, wasmbox.ErrTimeout):
		fmt.Fprintln(stderr, "orders:", runErr)
		return 124
	case errors.As(runErr, &re) && re.Kind == wasmbox.KindInternal:
		fmt.Fprintln(stderr, "orders:", runErr)
		return 125
	}
	return res.ExitCode
}
