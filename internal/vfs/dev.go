package vfs

import (
	"io/fs"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// devNullMode is /dev/null's mode on Linux: a character device, rw for everyone.
const devNullMode = fs.ModeDevice | fs.ModeCharDevice | 0o666

// Dev returns the guest's /dev: a directory holding only "null", which reads as empty and discards every
// write, as on Linux. It keeps no state at all (every handle is independent and nothing written is stored), so
// one value can serve every guest. Creating, removing or renaming anything in it is EROFS (as for a read-only
// mount); a missing name is ENOENT.
func Dev() sys.FS { return devFS{} }

type devFS struct{ sys.UnimplementedFS }

var _ sys.FS = devFS{}

// devEntry resolves p to the root (isRoot) or null; anything else is ENOENT (ENOTDIR below null).
func devEntry(p string) (isRoot bool, errno sys.Errno) {
	parts, slash, errno := parsePath(p)
	switch {
	case errno != 0:
		return false, errno
	case len(parts) == 0:
		return true, 0
	case parts[0] != "null":
		return false, sys.ENOENT
	case len(parts) > 1 || slash:
		return false, sys.ENOTDIR
	}
	return false, 0
}

func devStat(isRoot bool) wsys.Stat_t {
	if isRoot {
		return wsys.Stat_t{Dev: devID, Ino: 1, Mode: fs.ModeDir | 0o755, Nlink: 2}
	}
	return wsys.Stat_t{Dev: devID, Ino: 2, Mode: devNullMode, Nlink: 1}
}

// OpenFile implements sys.FS: the root for reading, null with any access (O_TRUNC and O_APPEND have no effect, as
// on Linux); O_CREAT|O_EXCL on null is EEXIST, O_DIRECTORY on null ENOTDIR; a new name is EROFS with O_CREAT and
// ENOENT without.
func (devFS) OpenFile(p string, flag sys.Oflag, _ fs.FileMode) (sys.File, sys.Errno) {
	isRoot, errno := devEntry(p)
	acc := flag & (sys.O_RDONLY | sys.O_RDWR | sys.O_WRONLY)
	creat := flag&sys.O_CREAT != 0
	switch {
	case errno == sys.ENOENT && creat:
		return nil, sys.EROFS
	case errno != 0:
		return nil, errno
	case creat && flag&sys.O_EXCL != 0:
		return nil, sys.EEXIST
	case isRoot && (acc != sys.O_RDONLY || creat || flag&sys.O_TRUNC != 0):
		return nil, sys.EISDIR
	case isRoot:
		d := &devDir{}
		d.zeroSeeker.dir = d
		return d, 0
	case flag&sys.O_DIRECTORY != 0:
		return nil, sys.ENOTDIR
	}
	return &nullFile{}, 0
}

// Stat implements sys.FS.
func (devFS) Stat(p string) (wsys.Stat_t, sys.Errno) {
	isRoot, errno := devEntry(p)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return devStat(isRoot), 0
}

// Lstat implements sys.FS (there are no links).
func (d devFS) Lstat(p string) (wsys.Stat_t, sys.Errno) { return d.Stat(p) }

// Readlink implements sys.FS: EINVAL for what exists (not a link).
func (devFS) Readlink(p string) (string, sys.Errno) {
	if _, errno := devEntry(p); errno != 0 {
		return "", errno
	}
	return "", sys.EINVAL
}

func (devFS) Mkdir(string, fs.FileMode) sys.Errno    { return sys.EROFS }
func (devFS) Chmod(string, fs.FileMode) sys.Errno    { return sys.EROFS }
func (devFS) Rename(string, string) sys.Errno        { return sys.EROFS }
func (devFS) Rmdir(string) sys.Errno                 { return sys.EROFS }
func (devFS) Unlink(string) sys.Errno                { return sys.EROFS }
func (devFS) Link(string, string) sys.Errno          { return sys.EROFS }
func (devFS) Symlink(string, string) sys.Errno       { return sys.EROFS }
func (devFS) Utimens(string, int64, int64) sys.Errno { return sys.EROFS }

// devDir is an open handle on /dev: it lists null. Like file, it cannot embed sys.UnimplementedFile (see seeker).
type devDir struct {
	zeroSeeker[int64]
	listed bool
}

var _ sys.File = (*devDir)(nil)

func (*devDir) Dev() (uint64, sys.Errno)              { return devID, 0 }
func (*devDir) Ino() (wsys.Inode, sys.Errno)          { return 1, 0 }
func (*devDir) IsDir() (bool, sys.Errno)              { return true, 0 }
func (*devDir) IsAppend() bool                        { return false }
func (*devDir) SetAppend(bool) sys.Errno              { return sys.EISDIR }
func (*devDir) Stat() (wsys.Stat_t, sys.Errno)        { return devStat(true), 0 }
func (*devDir) Read([]byte) (int, sys.Errno)          { return 0, sys.EISDIR }
func (*devDir) Pread([]byte, int64) (int, sys.Errno)  { return 0, sys.EISDIR }
func (*devDir) Write([]byte) (int, sys.Errno)         { return 0, sys.EISDIR }
func (*devDir) Pwrite([]byte, int64) (int, sys.Errno) { return 0, sys.EISDIR }
func (*devDir) Truncate(int64) sys.Errno              { return sys.EISDIR }
func (*devDir) Sync() sys.Errno                       { return 0 }
func (*devDir) Datasync() sys.Errno                   { return 0 }
func (*devDir) Utimens(int64, int64) sys.Errno        { return sys.EROFS }
func (*devDir) Close() sys.Errno                      { return 0 }

// Readdir implements sys.File: null, then nothing until a rewind (Seek(0, SeekStart)).
func (d *devDir) Readdir(int) ([]sys.Dirent, sys.Errno) {
	if d.listed {
		return nil, 0
	}
	d.listed = true
	return []sys.Dirent{{Name: "null", Ino: 2, Type: devNullMode.Type()}}, 0
}

// nullFile is an open handle on /dev/null: reads are at end of file, writes succeed and are dropped, seeks go
// to 0. It holds nothing, so a guest can write to it forever at no cost to the host beyond the call itself.
type nullFile struct {
	zeroSeeker[int64]
	nonblock bool
	append   bool
}

var _ sys.PollableFile = (*nullFile)(nil)

func (*nullFile) Dev() (uint64, sys.Errno)                  { return devID, 0 }
func (*nullFile) Ino() (wsys.Inode, sys.Errno)              { return 2, 0 }
func (*nullFile) IsDir() (bool, sys.Errno)                  { return false, 0 }
func (*nullFile) Stat() (wsys.Stat_t, sys.Errno)            { return devStat(false), 0 }
func (*nullFile) Read([]byte) (int, sys.Errno)              { return 0, 0 }
func (*nullFile) Pread([]byte, int64) (int, sys.Errno)      { return 0, 0 }
func (*nullFile) Write(b []byte) (int, sys.Errno)           { return len(b), 0 }
func (*nullFile) Pwrite(b []byte, _ int64) (int, sys.Errno) { return len(b), 0 }
func (*nullFile) Readdir(int) ([]sys.Dirent, sys.Errno)     { return nil, sys.EBADF }
func (*nullFile) Truncate(int64) sys.Errno                  { return 0 }
func (*nullFile) Sync() sys.Errno                           { return 0 }
func (*nullFile) Datasync() sys.Errno                       { return 0 }
func (*nullFile) Utimens(int64, int64) sys.Errno            { return 0 }
func (*nullFile) Close() sys.Errno                          { return 0 }
func (f *nullFile) IsAppend() bool                          { return f.append }
func (f *nullFile) SetAppend(on bool) sys.Errno             { f.append = on; return 0 }
func (f *nullFile) IsNonblock() bool                        { return f.nonblock }
func (f *nullFile) SetNonblock(on bool) sys.Errno           { f.nonblock = on; return 0 }

// Poll implements sys.Pollable: /dev/null is always ready.
func (*nullFile) Poll(sys.Pflag, int32) (bool, sys.Errno) { return true, 0 }

// zeroSeeker gives devDir and nullFile their Seek (see seeker for why it is generic): every seek lands at 0, which
// is what Linux reports for /dev/null; on /dev only a rewind is accepted, and it restarts the listing.
type zeroSeeker[T ~int64] struct{ dir *devDir }

// Seek implements sys.File.
func (z zeroSeeker[T]) Seek(offset T, whence int) (T, sys.Errno) {
	if z.dir != nil {
		if offset != 0 || whence != 0 {
			return 0, sys.EISDIR
		}
		z.dir.listed = false
	}
	return 0, 0
}
