//go:build !unix

package mcp

import "os"

// alive reports whether a process with this id exists: on Windows, FindProcess opens it and fails when it is gone.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
