//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package governance

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking advisory lock on f, released when f is closed.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
