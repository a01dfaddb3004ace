// Command scibench measures the sci runtime for bench/compare (which builds and runs it, since the main module
// cannot import this one) and prints one JSON object: go run ./internal/scibench [ROUNDS].
package main

import (
	"os"

	"github.com/wasmbox/wasmbox/bench"
	_ "github.com/wasmbox/wasmbox/sci"
)

func main() { os.Exit(bench.SciMain(os.Args[1:], os.Stdout, os.Stderr)) }
