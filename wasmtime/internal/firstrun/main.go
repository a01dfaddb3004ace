// Command firstrun is bench/compare's "new process → first result" child with the wasmtime engine: built by
// `go run ./bench/compare -p2` from this module, since the main module cannot import this one.
package main

import (
	"github.com/wasmbox/wasmbox/internal/firstrun"
	_ "github.com/wasmbox/wasmbox/wasmtime"
)

func main() { firstrun.Main("wasmtime") }
