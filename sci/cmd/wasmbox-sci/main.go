// Command wasmbox-sci is the wasmbox CLI with the "sci" runtime (numpy and pandas) linked in: the same commands
// and flags as cmd/wasmbox, plus `--runtime sci` for run and mcp.
//
//	go install github.com/wasmbox/wasmbox/sci/cmd/wasmbox-sci@latest
//	wasmbox-sci run --runtime sci analysis.py
package main

import (
	"os"

	"github.com/wasmbox/wasmbox/internal/cli"
	_ "github.com/wasmbox/wasmbox/sci"
)

func main() { os.Exit(cli.Exec()) }
