//go:build !linux

package engine

// hugeCodeOff says why wazero's code is not put in huge pages: that is done on Linux only (hugecode_linux.go).
func hugeCodeOff() string { return "not Linux" }

func withHugeCode(fn func()) { fn() }
