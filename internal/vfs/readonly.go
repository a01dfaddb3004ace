package vfs

import (
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// OpenLimit bounds the handles one guest holds open at once across every
// mount wrapped with it (ReadOnly, Limited): past the bound, opens fail with
// EMFILE. wazero keeps no descriptor limit of its own and every handle costs
// host memory, so each guest instance gets one OpenLimit for all its mounts.
// It is safe for concurrent use.
type OpenLimit struct {
	mu   sync.Mutex
	max  int
	open int
}

// NewOpenLimit returns a bound of max handles (DefaultMaxOpenFiles if max <= 0).
func NewOpenLimit(max int) *OpenLimit {
	if max <= 0 {
		max = DefaultMaxOpenFiles
	}
	return &OpenLimit{max: max}
}

// Open reports how many handles are open under the limit.
func (l *OpenLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *OpenLimit) acquire() sys.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		return EMFILE
	}
	l.open++
	return 0
}

func (l *OpenLimit) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
}

// openFile opens through fsys under l (nil: no bound), wrapping the handle
// so that its Close releases its slot once.
func (l *OpenLimit) openFile(fsys sys.FS, path string, flag sys.Oflag, perm fs.FileMode) (*limitedFile, sys.Errno) {
	if l != nil {
		if errno := l.acquire(); errno != 0 {
			return nil, errno
		}
	}
	f, errno := fsys.OpenFile(path, flag, perm)
	if errno != 0 {
		if l != nil {
			l.release()
		}
		return nil, errno
	}
	return &limitedFile{File: f, lim: l}, 0
}

// limitedFile is a handle counted by an OpenLimit.
type limitedFile struct {
	sys.File
	lim      *OpenLimit
	closed   bool // guarded by the guest's single use of a handle; Close is idempotent
	nonblock bool // O_NONBLOCK for a file below that does not keep it itself
}

// Both engines' fd_fdstat_set_flags answer ENOSYS to O_NONBLOCK on a handle that is not a sys.PollableFile, where
// Linux accepts it on any file (os.set_blocking). A wrapped handle is one whatever lies below.
var _ sys.PollableFile = (*limitedFile)(nil)

// IsNonblock implements sys.PollableFile.
func (f *limitedFile) IsNonblock() bool { return f.nonblock }

// SetNonblock implements sys.PollableFile: it tells the file below when that one keeps the flag, and otherwise
// (wazero's adapted fs.FS files answer ENOSYS) only records it, with no effect, as Linux does for regular files
// and directories (reading them never blocks).
func (f *limitedFile) SetNonblock(enable bool) sys.Errno {
	if pf, ok := f.File.(sys.PollableFile); ok {
		if errno := pf.SetNonblock(enable); errno != 0 && errno != sys.ENOSYS {
			return errno
		}
	}
	f.nonblock = enable
	return 0
}

// Poll implements sys.Pollable: the file below's, or else ready (regular files and directories always are).
func (f *limitedFile) Poll(flag sys.Pflag, timeoutMillis int32) (bool, sys.Errno) {
	if pf, ok := f.File.(sys.PollableFile); ok {
		if ready, errno := pf.Poll(flag, timeoutMillis); errno != sys.ENOSYS {
			return ready, errno
		}
	}
	return true, 0
}

// Close implements sys.File. Only the first Close releases the slot.
func (f *limitedFile) Close() sys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	if f.lim != nil {
		f.lim.release()
	}
	return f.File.Close()
}

// Limited returns fsys with its opens counted by lim (which must not be
// nil); nothing else changes.
func Limited(fsys sys.FS, lim *OpenLimit) sys.FS { return &limitedFS{FS: fsys, lim: lim} }

type limitedFS struct {
	sys.FS
	lim *OpenLimit
}

// OpenFile implements sys.FS.
func (l *limitedFS) OpenFile(path string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	f, errno := l.lim.openFile(l.FS, path, flag, perm)
	if errno != 0 {
		return nil, errno
	}
	return f, 0
}

// ReadOnly returns a read-only view of fsys, as a read-only Linux mount
// behaves, whatever fsys itself allows: an open asking for write access,
// O_CREAT, O_EXCL, O_TRUNC or O_APPEND fails before fsys sees it (EROFS, or
// the errno Linux gives first: see refuseWrite); Mkdir, Rename, Rmdir,
// Unlink, Chmod, Utimens, Link and Symlink fail with EROFS. On its handles Write, Pwrite and Truncate fail with EBADF (EISDIR for a
// directory), as for any read-only descriptor, and Utimens and enabling
// append with EROFS. Reads, Stat and Readlink go to fsys unchanged, so the
// view shows changes the host makes to fsys. Opens count against lim unless
// it is nil.
//
// wazero's own sysfs.ReadFS is not enough: it refuses only O_WRONLY and
// O_RDWR and passes O_CREAT and O_TRUNC down, and a writable FS below
// creates or truncates.
func ReadOnly(fsys sys.FS, lim *OpenLimit) sys.FS { return &roFS{fs: fsys, lim: lim} }

type roFS struct {
	fs  sys.FS
	lim *OpenLimit
}

var _ sys.FS = (*roFS)(nil)

// writeFlags are the open flags a read-only mount refuses.
const writeFlags = sys.O_WRONLY | sys.O_RDWR | sys.O_CREAT | sys.O_EXCL | sys.O_TRUNC | sys.O_APPEND

// OpenFile implements sys.FS. An open with a write flag never reaches the FS below; it fails with the errno
// Linux gives on a read-only mount, so programs that catch IsADirectoryError, FileExistsError or
// FileNotFoundError see what they expect: see refuseWrite.
func (r *roFS) OpenFile(path string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	if flag&writeFlags != 0 {
		return nil, refuseWrite(r.fs, path, flag)
	}
	f, errno := r.lim.openFile(r.fs, path, flag, perm)
	if errno != 0 {
		return nil, errno
	}
	return &roFile{limitedFile: f}, 0
}

// refuseWrite is the errno of an open with write flags on a read-only mount, in Linux's order: a directory
// asked for writing or creation is EISDIR; O_CREAT|O_EXCL on an existing path is EEXIST; a missing path is ENOENT
// unless O_CREAT asks to create it, and a missing or non-directory parent is ENOENT or ENOTDIR even then; any other
// write is EROFS. Only Stat is asked of fsys, so nothing below can change.
func refuseWrite(fsys sys.FS, p string, flag sys.Oflag) sys.Errno {
	acc := flag & (sys.O_RDONLY | sys.O_RDWR | sys.O_WRONLY)
	writable := acc == sys.O_WRONLY || acc == sys.O_RDWR
	creat := flag&sys.O_CREAT != 0
	st, errno := fsys.Stat(p)
	switch {
	case errno == 0 && st.Mode.IsDir() && (writable || creat):
		return sys.EISDIR
	case errno == 0 && creat && flag&sys.O_EXCL != 0:
		return sys.EEXIST
	case errno == 0:
		return sys.EROFS
	case errno != sys.ENOENT:
		return errno // ENOTDIR, ENAMETOOLONG, EINVAL... as the lookup below found it
	case !creat:
		return sys.ENOENT
	}
	dir := path.Dir(strings.TrimSuffix(p, "/"))
	if dir == "/" || dir == "." || dir == "" {
		return sys.EROFS // the mount's root always exists
	}
	if st, errno := fsys.Stat(dir); errno != 0 {
		return errno
	} else if !st.Mode.IsDir() {
		return sys.ENOTDIR
	}
	return sys.EROFS
}

// Lstat implements sys.FS.
func (r *roFS) Lstat(path string) (wsys.Stat_t, sys.Errno) { return r.fs.Lstat(path) }

// Stat implements sys.FS.
func (r *roFS) Stat(path string) (wsys.Stat_t, sys.Errno) { return r.fs.Stat(path) }

// Readlink implements sys.FS.
func (r *roFS) Readlink(path string) (string, sys.Errno) { return r.fs.Readlink(path) }

// Mkdir implements sys.FS: EROFS.
func (*roFS) Mkdir(string, fs.FileMode) sys.Errno { return sys.EROFS }

// Chmod implements sys.FS: EROFS.
func (*roFS) Chmod(string, fs.FileMode) sys.Errno { return sys.EROFS }

// Rename implements sys.FS: EROFS.
func (*roFS) Rename(string, string) sys.Errno { return sys.EROFS }

// Rmdir implements sys.FS: EROFS.
func (*roFS) Rmdir(string) sys.Errno { return sys.EROFS }

// Unlink implements sys.FS: EROFS.
func (*roFS) Unlink(string) sys.Errno { return sys.EROFS }

// Link implements sys.FS: EROFS.
func (*roFS) Link(string, string) sys.Errno { return sys.EROFS }

// Symlink implements sys.FS: EROFS.
func (*roFS) Symlink(string, string) sys.Errno { return sys.EROFS }

// Utimens implements sys.FS: EROFS.
func (*roFS) Utimens(string, int64, int64) sys.Errno { return sys.EROFS }

// roFile is a handle of a ReadOnly view.
type roFile struct{ *limitedFile }

func (f *roFile) writeErr() sys.Errno {
	if dir, errno := f.File.IsDir(); errno != 0 {
		return errno
	} else if dir {
		return sys.EISDIR
	}
	return sys.EBADF
}

// Write implements sys.File: EBADF (EISDIR for a directory).
func (f *roFile) Write([]byte) (int, sys.Errno) { return 0, f.writeErr() }

// Pwrite implements sys.File: EBADF (EISDIR for a directory).
func (f *roFile) Pwrite([]byte, int64) (int, sys.Errno) { return 0, f.writeErr() }

// Truncate implements sys.File: EBADF (EISDIR for a directory).
func (f *roFile) Truncate(int64) sys.Errno { return f.writeErr() }

// Utimens implements sys.File: EROFS.
func (*roFile) Utimens(int64, int64) sys.Errno { return sys.EROFS }

// SetAppend implements sys.File: enabling append is EROFS, disabling it succeeds.
func (f *roFile) SetAppend(enable bool) sys.Errno {
	if enable {
		return sys.EROFS
	}
	// Turning append off on a handle that cannot write is a no-op; wazero's adapted fs.FS files answer ENOSYS,
	// which fd_fdstat_set_flags (os.set_blocking) would otherwise pass on.
	if errno := f.File.SetAppend(false); errno != 0 && errno != sys.ENOSYS {
		return errno
	}
	return 0
}
