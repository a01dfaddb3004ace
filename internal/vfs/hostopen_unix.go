//go:build !windows

package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openHostNoFollow opens rel for reading. O_NOFOLLOW makes the kernel refuse a
// link at rel (ELOOP); O_NONBLOCK keeps the open from blocking should the
// entry have been swapped for a FIFO.
func openHostNoFollow(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%q: %w", rel, ErrHostSymlink)
	}
	return f, err
}

// createHostExcl creates name, which must not exist (not even as a link).
func createHostExcl(root *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	return root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
}
