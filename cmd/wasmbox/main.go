// Command wasmbox runs Python programs in the wasmbox sandbox.
//
//	wasmbox run [--timeout D] [--memory SIZE] [--env KEY=VALUE]... [--workspace DIR] [--writeback] [--json] (FILE | -c CODE | -)
//	wasmbox version [--json]
//	wasmbox audit verify [--key-file F | --key-env VAR] FILE
//
// Exit codes: the program's own; 124 on timeout; 2 on usage errors; 125 when wasmbox fails.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := realMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
