//go:build linux

package wasmtime

import "syscall"

// defaultWasmStack is half the stack of the threads wasm runs on, at most 4 MiB. Go's cgo threads get glibc's
// default pthread stack: RLIMIT_STACK, or 2 MiB when that is unlimited. CPython needs 1–2 MiB of wasm stack
// to reach its own recursion limits in C (json.dumps / repr of deeply nested lists, the parser); below that a
// deep structure traps ("call stack exhausted") instead of raising RecursionError.
func defaultWasmStack() int {
	const max = 4 << 20
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err != nil {
		return 1 << 20
	}
	if rl.Cur == ^uint64(0) || rl.Cur == 0 {
		return 1 << 20 // threads get 2 MiB
	}
	return int(min(uint64(max), rl.Cur/2))
}
