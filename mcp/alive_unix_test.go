//go:build unix

package mcp

import "syscall"

// alive reports whether a process with this id exists (signal 0 checks without sending).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
