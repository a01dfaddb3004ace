package vfs

import (
	"io"
	"sort"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// file is an open handle on a node. Its state is guarded by fs.mu.
//
// It implements every sys.File method itself (it cannot embed
// sys.UnimplementedFile, whose Seek would make seeker's ambiguous).
type file struct {
	seeker[int64]

	fs       *FS
	n        *node
	gen      uint64
	readable bool
	writable bool
	append   bool
	closed   bool
	nonblock bool // O_NONBLOCK as set by fcntl: recorded and reported, no effect (nothing here ever blocks)
	counted  bool // charged to n.opens and fs.openHandles (not on a frozen FS)
	off      int64

	// Directory reading walks the entries in name order; dirAfter is the
	// last name returned since open or rewind (Seek(0, io.SeekStart)), so a
	// handle costs no memory per entry. "." and ".." are not returned:
	// wazero's DirentCache adds them.
	dirAfter   string
	dirStarted bool
}

var _ sys.PollableFile = (*file)(nil)

// lock takes the FS lock and reports whether the handle is usable.
func (h *file) lock() sys.Errno {
	h.fs.mu.Lock()
	if h.closed || h.gen != h.fs.gen {
		return sys.EBADF
	}
	return 0
}

func (h *file) unlock() { h.fs.mu.Unlock() }

// Dev implements sys.File.
func (h *file) Dev() (uint64, sys.Errno) { return h.fs.dev, 0 }

// Ino implements sys.File.
func (h *file) Ino() (wsys.Inode, sys.Errno) { return h.n.ino, 0 }

// IsDir implements sys.File.
func (h *file) IsDir() (bool, sys.Errno) { return h.n.isDir(), 0 }

// IsAppend implements sys.File.
func (h *file) IsAppend() bool {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.append
}

// SetAppend implements sys.File.
func (h *file) SetAppend(enable bool) sys.Errno {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return errno
	}
	if h.n.isDir() {
		return sys.EISDIR
	}
	if enable && h.fs.frozen {
		return sys.EROFS
	}
	h.append = enable
	return 0
}

// IsNonblock implements sys.PollableFile.
func (h *file) IsNonblock() bool {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.nonblock
}

// SetNonblock implements sys.PollableFile. As on Linux, O_NONBLOCK on a regular file or a directory is recorded
// (fcntl reports it back) and changes nothing: reads and writes of memory never block.
func (h *file) SetNonblock(enable bool) sys.Errno {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return errno
	}
	h.nonblock = enable
	return 0
}

// Poll implements sys.Pollable: a regular file is always ready, as poll(2) reports on Linux.
func (h *file) Poll(sys.Pflag, int32) (bool, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return false, errno
	}
	return true, 0
}

// Stat implements sys.File.
func (h *file) Stat() (wsys.Stat_t, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return h.fs.statNode(h.n), 0
}

// Read implements sys.File.
func (h *file) Read(buf []byte) (int, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return 0, errno
	}
	n, errno := h.readAt(buf, h.off)
	h.off += int64(n)
	return n, errno
}

// Pread implements sys.File.
func (h *file) Pread(buf []byte, off int64) (int, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return 0, errno
	}
	if off < 0 {
		return 0, sys.EINVAL
	}
	return h.readAt(buf, off)
}

func (h *file) readAt(buf []byte, off int64) (int, sys.Errno) {
	switch {
	case h.n.isDir():
		return 0, sys.EISDIR
	case !h.readable:
		return 0, sys.EBADF
	case off >= int64(len(h.n.data)):
		return 0, 0
	}
	return copy(buf, h.n.data[off:]), 0
}

// seeker provides file's Seek method. It exists only because go vet's
// stdmethods check insists that any method named Seek taking an int64 return
// (int64, error), while sys.File wants (int64, sys.Errno); declared with a
// type parameter, the method is not matched. file embeds seeker[int64], so
// its method set has exactly Seek(int64, int) (int64, sys.Errno).
type seeker[T ~int64] struct{ h *file }

// Seek implements sys.File. On a directory only Seek(0, io.SeekStart) is
// allowed: it rewinds Readdir.
func (s seeker[T]) Seek(offset T, whence int) (T, sys.Errno) {
	n, errno := s.h.seek(int64(offset), whence)
	return T(n), errno
}

func (h *file) seek(offset int64, whence int) (int64, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return 0, errno
	}
	if h.n.isDir() {
		if offset == 0 && whence == io.SeekStart {
			h.dirAfter, h.dirStarted = "", false
			return 0, 0
		}
		return 0, sys.EISDIR
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = h.off
	case io.SeekEnd:
		base = int64(len(h.n.data))
	default:
		return 0, sys.EINVAL
	}
	next := base + offset
	if next < 0 || (offset > 0 && next < base) {
		return 0, sys.EINVAL
	}
	h.off = next
	return next, 0
}

// Readdir implements sys.File. Entries come in name order and exclude "."
// and "..", like os.File.Readdir.
func (h *file) Readdir(n int) ([]sys.Dirent, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return nil, errno
	}
	if !h.n.isDir() {
		return nil, sys.EBADF
	}
	if !h.n.linked {
		return nil, sys.ENOENT
	}
	names := sortedNames(h.n)
	if h.dirStarted {
		names = names[sort.SearchStrings(names, h.dirAfter):]
		if len(names) > 0 && names[0] == h.dirAfter {
			names = names[1:]
		}
	}
	if n > 0 && n < len(names) {
		names = names[:n]
	}
	out := make([]sys.Dirent, len(names))
	for i, name := range names {
		c := h.n.children[name]
		out[i] = sys.Dirent{Name: name, Ino: c.ino, Type: c.mode.Type()}
	}
	if len(names) > 0 {
		h.dirAfter, h.dirStarted = names[len(names)-1], true
	}
	return out, 0
}

// Write implements sys.File. A write that would pass the byte quota fails
// with ENOSPC and changes nothing.
func (h *file) Write(buf []byte) (int, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return 0, errno
	}
	if h.n.isDir() || !h.writable {
		return 0, sys.EBADF
	}
	if h.fs.frozen {
		return 0, sys.EROFS
	}
	off := h.off
	if h.append {
		off = int64(len(h.n.data))
	}
	n, errno := h.fs.writeAt(h.n, buf, off)
	if errno == 0 {
		h.off = off + int64(n)
	}
	return n, errno
}

// Pwrite implements sys.File; it does not move the offset.
func (h *file) Pwrite(buf []byte, off int64) (int, sys.Errno) {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return 0, errno
	}
	switch {
	case h.n.isDir():
		return 0, sys.EISDIR
	case !h.writable:
		return 0, sys.EBADF
	case off < 0:
		return 0, sys.EINVAL
	case h.fs.frozen:
		return 0, sys.EROFS
	}
	return h.fs.writeAt(h.n, buf, off)
}

// Truncate implements sys.File. Growing past the byte quota fails with
// ENOSPC and changes nothing.
func (h *file) Truncate(size int64) sys.Errno {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return errno
	}
	switch {
	case h.n.isDir():
		return sys.EISDIR
	case size < 0:
		return sys.EINVAL
	case !h.writable:
		return sys.EBADF
	case h.fs.frozen:
		return sys.EROFS
	}
	if size == int64(len(h.n.data)) {
		return 0 // like Linux: no change, no timestamp update
	}
	if errno := h.fs.setSize(h.n, size); errno != 0 {
		return errno
	}
	h.fs.touchContent(h.n)
	return 0
}

// Sync implements sys.File (nothing to flush).
func (h *file) Sync() sys.Errno {
	defer h.unlock()
	return h.lock()
}

// Datasync implements sys.File (nothing to flush).
func (h *file) Datasync() sys.Errno { return h.Sync() }

// Utimens implements sys.File (EROFS on a frozen FS).
func (h *file) Utimens(atim, mtim int64) sys.Errno {
	defer h.unlock()
	if errno := h.lock(); errno != 0 {
		return errno
	}
	if h.fs.frozen {
		return sys.EROFS
	}
	h.fs.utimens(h.n, atim, mtim)
	return 0
}

// Close implements sys.File. Closing twice is harmless.
func (h *file) Close() sys.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return 0
	}
	h.closed = true
	if h.counted && h.gen == h.fs.gen {
		h.fs.openHandles--
		h.n.opens--
		if h.n.opens == 0 && !h.n.linked {
			h.fs.release(h.n)
		}
	}
	return 0
}
