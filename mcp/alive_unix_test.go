//go:build unix

package mcp

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// alive reports whether a process with this id exists and has not ended: a zombie (ended, not yet reaped: a
// container's init may never reap an orphan) counts as ended.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs (macOS): kill(0) is the answer
	}
	// The state follows the command name, which is in parentheses and may contain spaces.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
