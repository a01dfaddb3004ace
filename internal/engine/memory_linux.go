//go:build linux

package engine

import "golang.org/x/sys/unix"

// memfdCreate makes the anonymous file a Linux image lives in.
var memfdCreate = func() (int, error) { return unix.MemfdCreate("wasmbox-snapshot", unix.MFD_CLOEXEC) }

// hasPagemap: /proc/self/pagemap tells which pages of a memory became private.
const hasPagemap = true
