//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a process group of its own, so that killGroup reaches everything the server started
// (an `npx` launcher starts node, a shell script starts its commands). On Linux it also makes this process a
// child subreaper (once), so that a descendant the server orphaned (one that left the group with setsid) is
// reparented to this process instead of init, and killGroup can reap it.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	becomeSubreaper()
}

// killGroup kills what is left of the server's process group, the descendants of the server seen now, and
// the pids in known (descendants seen earlier, while the server still ran: after it ends they are no longer
// its children). The leader's pid is the group's id; the kernel does not hand that number to a new process
// while any member of the group lives, and allocates pids sequentially up to pid_max before reusing one, so
// the signal reaches the server's own descendants only. ESRCH (nobody left) is the normal case. The killed
// descendants that were reparented to this process are reaped, waiting at most waitDelay.
func killGroup(cmd *exec.Cmd, known ...int) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pids := append(known, descendants(cmd.Process.Pid)...)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if len(pids) > 0 {
		reap(pids)
	}
}

// reap collects the exit status of each killed pid once it is this process's child (reparented to the
// subreaper), so that it does not linger as a zombie; a pid that is gone, or belongs to another parent, is
// left alone. It gives up after waitDelay.
func reap(pids []int) {
	deadline := time.Now().Add(waitDelay)
	for _, p := range pids {
		for {
			got, err := syscall.Wait4(p, nil, syscall.WNOHANG, nil)
			if got == p {
				break // reaped
			}
			if err == syscall.ECHILD {
				// Not (yet) our child: it is reparented here when its parent ends, if this process is a
				// subreaper; otherwise, or once it is gone, it is not ours to reap.
				if _, ok := parentOf(p); !ok || !becomeSubreaper() {
					break
				}
			} else if err != nil && err != syscall.EINTR {
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
