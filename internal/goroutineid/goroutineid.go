// Package goroutineid tells the tests which goroutine they run on, to check where a job or a tool ran. It
// parses runtime.Stack's first line; nothing outside tests should depend on goroutine identity.
package goroutineid

import (
	"bytes"
	"runtime"
	"strconv"
)

// ID returns the calling goroutine's id.
func ID() uint64 {
	var b [64]byte
	s := b[:runtime.Stack(b[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(s[:bytes.IndexByte(s, ' ')]), 10, 64)
	return id
}
