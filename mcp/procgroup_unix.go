//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that killGroup reaches everything the server started
// (an `npx` launcher starts node, a shell script starts its commands).
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup kills what is left of the server's process group once its leader has ended. The leader's pid is
// the group's id; the kernel does not hand that number to a new process while any member of the group lives,
// and allocates pids sequentially up to pid_max before reusing one, so the signal reaches the server's own
// descendants only. ESRCH (nobody left) is the normal case.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
