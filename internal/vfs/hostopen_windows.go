//go:build windows

package vfs

import (
	"io/fs"
	"os"
)

// openHostNoFollow opens rel for reading. Windows has no O_NOFOLLOW: symbolic
// links, junctions and other reparse points are refused by checking the
// opened file against the entry's Lstat (checkOpenedNotLink). Windows has no
// FIFOs in the file system, so the open cannot block on one.
func openHostNoFollow(root *os.Root, rel string) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	if err := checkOpenedNotLink(root, rel, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// createHostExcl creates name, which must not exist: O_EXCL (CREATE_NEW)
// fails on any existing entry, a link included; the check after the open
// refuses a link raced in since.
func createHostExcl(root *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if err := checkOpenedNotLink(root, name, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
