//go:build unix

package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser returns how to run the server's commands: as the postgres user when this process is root (the
// server refuses to run as root), with dir given to that user; nil otherwise.
func serverUser(dir string) (func(*exec.Cmd), error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: cred} }, nil
}
