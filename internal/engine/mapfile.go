package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// A MappedFile is a file's contents, mapped read-only where the system can (Unix), read into memory otherwise.
// Mapping avoids copying a file that is read once (a module wazero decodes) into fresh memory: the bytes stay in
// the page cache and are shared with other processes. The bytes must not be written, and not used after Close.
//
// A mapped file that shrinks while mapped makes a read past its new end fault (SIGBUS); ReadGuard turns such a
// fault into an error. The files mapped here are replaced only by rename (never rewritten in place), so that
// happens only if someone truncates a cache or precompiled file by hand.
type MappedFile struct {
	Bytes []byte
	unmap func() error
}

// MapFile maps path read-only, or reads it where mapping is not available. An empty file gives empty Bytes.
func MapFile(path string) (*MappedFile, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() == 0 {
		return &MappedFile{}, nil
	}
	if int64(int(fi.Size())) != fi.Size() {
		return nil, fmt.Errorf("engine: %s is too large to map (%d bytes)", path, fi.Size())
	}
	return mapFile(f, int(fi.Size()))
}

// openRegular opens path without blocking and fails with ErrNotRegular unless it is a regular file.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := OpenRead(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s (%v)", ErrNotRegular, path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ErrNotRegular: a cache or precompiled file is not a regular file (a FIFO, a device, a directory).
var ErrNotRegular = errors.New("engine: not a regular file")

// ReadSmallFile reads a small record file (a manifest, an id) of at most max bytes. It refuses, without
// blocking or reading on, anything else: a file that is not regular (a FIFO, /dev/zero behind a symlink), or
// one larger than max. Callers treat a refusal like a missing file and rebuild the record.
func ReadSmallFile(path string, max int64) ([]byte, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fmt.Errorf("engine: %s has %d bytes, a record has at most %d", path, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max { // it grew while read
		return nil, fmt.Errorf("engine: %s grew past %d bytes while read", path, max)
	}
	return b, nil
}

// Close unmaps the file (a read copy is left to the garbage collector).
func (m *MappedFile) Close() error {
	if m == nil || m.unmap == nil {
		return nil
	}
	u := m.unmap
	m.unmap, m.Bytes = nil, nil
	return u()
}

// ReadGuard runs fn, turning a memory fault while it runs on this goroutine (a mapped file that shrank under it)
// into an error instead of a crash of the process.
func ReadGuard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("engine: a mapped file changed while it was read: %v", r)
				return
			}
			panic(r)
		}
	}()
	return fn()
}

func readFile(f *os.File, size int) (*MappedFile, error) {
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && n < size {
		return nil, err
	}
	return &MappedFile{Bytes: b}, nil
}
