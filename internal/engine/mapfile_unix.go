//go:build unix

package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(f *os.File, size int) (*MappedFile, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil { // a file system that cannot map: read it
		return readFile(f, size)
	}
	return &MappedFile{Bytes: b, unmap: func() error { return unix.Munmap(b) }}, nil
}

// OpenRead opens path for reading without blocking on a FIFO or device that has no writer (O_NONBLOCK has no
// effect on reads of a regular file).
func OpenRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
}
