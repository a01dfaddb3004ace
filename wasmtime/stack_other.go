//go:build wasmtime && !linux

package engine

func platformMemoryLimit(LinearMemory) (uint64, bool) { return 0, false }

// defaultWasmStack keeps wasmtime's default (512 KiB) where thread stack sizes are not known.
func defaultWasmStack() int { return 0 }
