//go:build !linux

package wasmtime

// defaultWasmStack keeps wasmtime's default (512 KiB) where thread stack sizes are not known.
func defaultWasmStack() int { return 0 }
