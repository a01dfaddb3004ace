package engine

// WASI preview 1, implemented in Go over InstanceConfig, for every engine: wazero and wasmtime bind the same
// functions, so the interpreter sees the same world on both. It follows wazero v1.12's wasi_snapshot_preview1
// closely (same preopen layout, same file-system interfaces, same errno choices), reports the quota errnos of
// internal/vfs (ENOSPC, EDQUOT, EMFILE) as themselves, and refuses fd_renumber (ENOSYS).
//
// All of an instance's WASI state (descriptor table, preopens, directory listings, clocks, randomness) is one
// *WASI that the engine owns; nothing of it lives in the engine's runtime. That is what lets an instance be
// reused: a new *WASI per run leaves nothing of the last run's descriptors behind.
//
// Every mount is the experimentalsys.FS GuestMounts builds (read-only mounts behind vfs.ReadOnly, one descriptor
// limit for all). No host directory is ever opened.

import (
	"encoding/binary"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

const wasiModule = "wasi_snapshot_preview1"

// wasip1 errno values.
const (
	wasiESuccess     = 0
	wasiEAcces       = 2
	wasiEAgain       = 6
	wasiEBadf        = 8
	wasiEDquot       = 19
	wasiEExist       = 20
	wasiEFault       = 21
	wasiEIntr        = 27
	wasiEInval       = 28
	wasiEIo          = 29
	wasiEIsdir       = 31
	wasiELoop        = 32
	wasiEMfile       = 33
	wasiENametoolong = 37
	wasiENoent       = 44
	wasiENospc       = 51
	wasiENosys       = 52
	wasiENotdir      = 54
	wasiENotempty    = 55
	wasiENotsock     = 57
	wasiENotsup      = 58
	wasiEPerm        = 63
	wasiERange       = 68
	wasiERofs        = 69
)

// wasiErrno maps a file-system errno to wasip1, as wazero's wasip1.ToErrno does, plus the quota errnos of
// internal/vfs. Anything unknown is EIO.
func wasiErrno(e experimentalsys.Errno) uint32 {
	switch e {
	case 0:
		return wasiESuccess
	case experimentalsys.EACCES:
		return wasiEAcces
	case experimentalsys.EAGAIN:
		return wasiEAgain
	case experimentalsys.EBADF:
		return wasiEBadf
	case experimentalsys.EEXIST:
		return wasiEExist
	case experimentalsys.EFAULT:
		return wasiEFault
	case experimentalsys.EINTR:
		return wasiEIntr
	case experimentalsys.EINVAL:
		return wasiEInval
	case experimentalsys.EIO:
		return wasiEIo
	case experimentalsys.EISDIR:
		return wasiEIsdir
	case experimentalsys.ELOOP:
		return wasiELoop
	case experimentalsys.ENAMETOOLONG:
		return wasiENametoolong
	case experimentalsys.ENOENT:
		return wasiENoent
	case experimentalsys.ENOSYS:
		return wasiENosys
	case experimentalsys.ENOTDIR:
		return wasiENotdir
	case experimentalsys.ERANGE:
		return wasiERange
	case experimentalsys.ENOTEMPTY:
		return wasiENotempty
	case experimentalsys.ENOTSOCK:
		return wasiENotsock
	case experimentalsys.ENOTSUP:
		return wasiENotsup
	case experimentalsys.EPERM:
		return wasiEPerm
	case experimentalsys.EROFS:
		return wasiERofs
	case vfs.ENOSPC:
		return wasiENospc
	case vfs.EDQUOT:
		return wasiEDquot
	case vfs.EMFILE:
		return wasiEMfile
	}
	return wasiEIo
}

// wasip1 flags and constants.
const (
	wasiFiletypeUnknown     = 0
	wasiFiletypeBlockDevice = 1
	wasiFiletypeCharDevice  = 2
	wasiFiletypeDirectory   = 3
	wasiFiletypeRegularFile = 4
	wasiFiletypeSymlink     = 7

	wasiOCreat     = 1
	wasiODirectory = 2
	wasiOExcl      = 4
	wasiOTrunc     = 8

	wasiFdAppend   = 1
	wasiFdDsync    = 2
	wasiFdNonblock = 4
	wasiFdRsync    = 8
	wasiFdSync     = 16

	wasiLookupSymlinkFollow = 1

	wasiFstAtim    = 1
	wasiFstAtimNow = 2
	wasiFstMtim    = 4
	wasiFstMtimNow = 8

	wasiClockRealtime  = 0
	wasiClockMonotonic = 1

	wasiEventClock   = 0
	wasiEventFdRead  = 1
	wasiEventFdWrite = 2

	wasiDirentSize = 24
)

// Rights (only reported: rights are not enforced, as in wazero).
const (
	rightFdDatasync = 1 << iota
	rightFdRead
	rightFdSeek
	rightFdstatSetFlags
	rightFdSync
	rightFdTell
	rightFdWrite
	rightFdAdvise
	rightFdAllocate
	rightPathCreateDirectory
	rightPathCreateFile
	rightPathLinkSource
	rightPathLinkTarget
	rightPathOpen
	rightFdReaddir
	rightPathReadlink
	rightPathRenameSource
	rightPathRenameTarget
	rightPathFilestatGet
	rightPathFilestatSetSize
	rightPathFilestatSetTimes
	rightFdFilestatGet
	rightFdFilestatSetSize
	rightFdFilestatSetTimes
	rightPathSymlink
	rightPathRemoveDirectory
	rightPathUnlinkFile
	rightPollFdReadwrite
)

const fileRightsBase = rightFdDatasync | rightFdRead | rightFdSeek | rightFdstatSetFlags | rightFdSync |
	rightFdTell | rightFdWrite | rightFdAdvise | rightFdAllocate | rightFdFilestatGet | rightFdFilestatSetSize |
	rightFdFilestatSetTimes | rightPollFdReadwrite

const dirRightsBase = rightFdDatasync | rightFdstatSetFlags | rightFdSync | rightPathCreateDirectory |
	rightPathCreateFile | rightPathLinkSource | rightPathLinkTarget | rightPathOpen | rightFdReaddir |
	rightPathReadlink | rightPathRenameSource | rightPathRenameTarget | rightPathFilestatGet |
	rightPathFilestatSetSize | rightPathFilestatSetTimes | rightFdFilestatGet | rightFdFilestatSetTimes |
	rightPathSymlink | rightPathRemoveDirectory | rightPathUnlinkFile

// wasiFile is one open file descriptor.
type wasiFile struct {
	fs      experimentalsys.FS // nil for stdio
	name    string             // path within fs ("" is its root); unused for preopens
	guest   string             // a preopen's guest path
	preopen bool
	f       experimentalsys.File // nil until a preopen is first used (opened lazily, like wazero)

	dirents []experimentalsys.Dirent // the listing fd_readdir serves, "." and ".." first; read at cookie 0
}

func (w *wasiFile) file() (experimentalsys.File, experimentalsys.Errno) {
	if w.f == nil {
		if !w.preopen || w.fs == nil {
			return nil, experimentalsys.EBADF
		}
		f, errno := w.fs.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
		if errno != 0 {
			return nil, errno
		}
		w.f = f
	}
	return w.f, 0
}

func (w *wasiFile) isDir() (bool, experimentalsys.Errno) {
	if w.preopen {
		return true, 0
	}
	return w.f.IsDir()
}

// WASI is the WASI side of one instance. It is only used on the goroutine running the guest.
type WASI struct {
	files     []*wasiFile // by fd; nil is a free slot
	walltime  func() (int64, int32)
	nanotime  func() int64
	nanosleep func(int64)
	rand      io.Reader
}

func NewWASI(cfg InstanceConfig) (*WASI, error) {
	w := &WASI{walltime: cfg.Walltime, nanotime: cfg.Nanotime, nanosleep: cfg.Nanosleep, rand: cfg.Rand}
	// Fake clocks and no randomness by default, like wazero's ModuleConfig (callers always set them).
	if w.walltime == nil {
		w.walltime = func() (int64, int32) { return 1640995200, 0 } // 2022-01-01T00:00:00Z
	}
	if w.nanotime == nil {
		var t int64
		w.nanotime = func() int64 { t += 1_000_000; return t }
	}
	if w.nanosleep == nil {
		w.nanosleep = func(int64) {}
	}
	if w.rand == nil {
		w.rand = zeroReader{}
	}
	w.files = []*wasiFile{
		{f: &stdinFile{r: cfg.Stdin}},
		{f: &stdoutFile{w: cfg.Stdout}},
		{f: &stdoutFile{w: cfg.Stderr}},
	}
	mounts, err := GuestMounts(cfg.Mounts)
	if err != nil {
		return nil, err
	}
	for k, mt := range cfg.Mounts {
		fsys := mounts[k]
		guest := mt.GuestPath
		if strings.Trim(guest, "/.") == "" {
			guest = "/"
		}
		w.files = append(w.files, &wasiFile{fs: fsys, guest: guest, preopen: true})
	}
	return w, nil
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// GuestMem is linear memory during one host call.
type GuestMem []byte

// Slice returns n bytes at off, or false if they are not all inside memory.
func (m GuestMem) Slice(off, n uint32) ([]byte, bool) {
	end := uint64(off) + uint64(n)
	if end > uint64(len(m)) {
		return nil, false
	}
	return m[off:end:end], true
}

// U32 reads a little-endian uint32 at off.
func (m GuestMem) U32(off uint32) (uint32, bool) {
	b, ok := m.Slice(off, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

// PutU32 writes v little-endian at off.
func (m GuestMem) PutU32(off, v uint32) bool {
	b, ok := m.Slice(off, 4)
	if ok {
		binary.LittleEndian.PutUint32(b, v)
	}
	return ok
}

// PutU64 writes v little-endian at off.
func (m GuestMem) PutU64(off uint32, v uint64) bool {
	b, ok := m.Slice(off, 8)
	if ok {
		binary.LittleEndian.PutUint64(b, v)
	}
	return ok
}

func (w *WASI) lookup(fd int32) (*wasiFile, bool) {
	if fd < 0 || int(fd) >= len(w.files) || w.files[fd] == nil {
		return nil, false
	}
	return w.files[fd], true
}

// insert puts f at the lowest free descriptor, as POSIX and wazero do.
func (w *WASI) insert(f *wasiFile) int32 {
	for fd, e := range w.files {
		if e == nil {
			w.files[fd] = f
			return int32(fd)
		}
	}
	w.files = append(w.files, f)
	return int32(len(w.files) - 1)
}

// close closes every open file (the workspace counts open handles against its limits).
func (w *WASI) Close() error {
	var err error
	for fd, f := range w.files {
		if f != nil && f.f != nil {
			if errno := f.f.Close(); errno != 0 {
				err = errno
			}
		}
		w.files[fd] = nil
	}
	return err
}

func (w *WASI) walltimeNanos() int64 {
	sec, nsec := w.walltime()
	return sec*1e9 + int64(nsec)
}

// atPath resolves a path relative to the directory fd: the file system and the path within it.
func (w *WASI) atPath(m GuestMem, fd int32, p, pathLen uint32) (experimentalsys.FS, string, experimentalsys.Errno) {
	b, ok := m.Slice(p, pathLen)
	if !ok {
		return nil, "", experimentalsys.EFAULT
	}
	name := string(b)
	trailingSlash := strings.HasSuffix(name, "/")
	f, ok := w.lookup(fd)
	if !ok {
		return nil, "", experimentalsys.EBADF
	}
	if isDir, errno := f.isDir(); errno != 0 {
		return nil, "", errno
	} else if !isDir {
		return nil, "", experimentalsys.ENOTDIR
	}
	if !f.preopen && f.name != "" {
		name = f.name + "/" + name
	}
	name = path.Clean(name)
	if !fs.ValidPath(name) { // absolute, or escapes the mount
		return nil, "", experimentalsys.EPERM
	}
	if trailingSlash && name != "." {
		name += "/"
	}
	return f.fs, name, 0
}

// ---- stdio ----

var stdioStat = wsys.Stat_t{Mode: fs.ModeDevice | 0o640, Nlink: 1}

// stdinPoller returns the poll method of f's reader when f is stdin over a reader that can poll.
func stdinPoller(f *wasiFile) experimentalsys.Pollable {
	if f == nil {
		return nil
	}
	sf, ok := f.f.(*stdinFile)
	if !ok {
		return nil
	}
	p, _ := sf.r.(experimentalsys.Pollable)
	return p
}

type stdinFile struct {
	experimentalsys.UnimplementedFile
	r io.Reader
}

func (f *stdinFile) Read(b []byte) (int, experimentalsys.Errno) {
	if f.r == nil {
		return 0, 0
	}
	n, err := f.r.Read(b)
	return n, experimentalsys.UnwrapOSError(err)
}
func (*stdinFile) Stat() (wsys.Stat_t, experimentalsys.Errno) { return stdioStat, 0 }
func (*stdinFile) IsDir() (bool, experimentalsys.Errno)       { return false, 0 }

type stdoutFile struct {
	experimentalsys.UnimplementedFile
	w io.Writer
}

func (f *stdoutFile) Write(b []byte) (int, experimentalsys.Errno) {
	if f.w == nil {
		return len(b), 0
	}
	n, err := f.w.Write(b)
	return n, experimentalsys.UnwrapOSError(err)
}
func (*stdoutFile) Stat() (wsys.Stat_t, experimentalsys.Errno) { return stdioStat, 0 }
func (*stdoutFile) IsDir() (bool, experimentalsys.Errno)       { return false, 0 }

// ---- helpers ----

func wasiFiletype(m fs.FileMode) uint8 {
	switch {
	case m.IsRegular():
		return wasiFiletypeRegularFile
	case m.IsDir():
		return wasiFiletypeDirectory
	case m&fs.ModeSymlink != 0:
		return wasiFiletypeSymlink
	case m&fs.ModeDevice != 0:
		if m&fs.ModeCharDevice != 0 {
			return wasiFiletypeCharDevice
		}
		return wasiFiletypeBlockDevice
	}
	return wasiFiletypeUnknown
}

func writeFilestat(m GuestMem, at uint32, st *wsys.Stat_t) experimentalsys.Errno {
	b, ok := m.Slice(at, 64)
	if !ok {
		return experimentalsys.EFAULT
	}
	le := binary.LittleEndian
	le.PutUint64(b, st.Dev)
	le.PutUint64(b[8:], st.Ino)
	le.PutUint64(b[16:], uint64(wasiFiletype(st.Mode)))
	le.PutUint64(b[24:], st.Nlink)
	le.PutUint64(b[32:], uint64(st.Size))
	le.PutUint64(b[40:], uint64(st.Atim))
	le.PutUint64(b[48:], uint64(st.Mtim))
	le.PutUint64(b[56:], uint64(st.Ctim))
	return 0
}

func toTimes(now func() int64, atim, mtim int64, fst uint16) (int64, int64, experimentalsys.Errno) {
	var nowTim int64
	getNow := func() int64 {
		if nowTim == 0 {
			nowTim = now()
		}
		return nowTim
	}
	switch set, isNow := fst&wasiFstAtim != 0, fst&wasiFstAtimNow != 0; {
	case set && isNow:
		return 0, 0, experimentalsys.EINVAL
	case set:
	case isNow:
		atim = getNow()
	default:
		atim = experimentalsys.UTIME_OMIT
	}
	switch set, isNow := fst&wasiFstMtim != 0, fst&wasiFstMtimNow != 0; {
	case set && isNow:
		return 0, 0, experimentalsys.EINVAL
	case set:
	case isNow:
		mtim = getNow()
	default:
		mtim = experimentalsys.UTIME_OMIT
	}
	return atim, mtim, 0
}

// iovecs calls fn with each guest buffer of an iovec array; fn returns the bytes moved and whether to go on.
func iovecs(m GuestMem, iovs, count uint32, fn func(b []byte) (int, bool, experimentalsys.Errno)) (uint32, experimentalsys.Errno) {
	if uint64(count)*8 > uint64(len(m)) {
		return 0, experimentalsys.EFAULT
	}
	vec, ok := m.Slice(iovs, count*8)
	if !ok {
		return 0, experimentalsys.EFAULT
	}
	var total uint32
	for k := uint32(0); k < count; k++ {
		off := binary.LittleEndian.Uint32(vec[8*k:])
		l := binary.LittleEndian.Uint32(vec[8*k+4:])
		b, ok := m.Slice(off, l)
		if !ok {
			return 0, experimentalsys.EFAULT
		}
		n, more, errno := fn(b)
		total += uint32(n)
		if errno == experimentalsys.ENOSYS {
			return 0, experimentalsys.EBADF // e.g. reading stdout
		} else if errno != 0 {
			return 0, errno
		}
		if !more {
			break
		}
	}
	return total, 0
}

func openFlags(dirflags, oflags, fdflags uint16, rights uint64) experimentalsys.Oflag {
	var fl experimentalsys.Oflag
	if dirflags&wasiLookupSymlinkFollow == 0 {
		fl |= experimentalsys.O_NOFOLLOW
	}
	if oflags&wasiODirectory != 0 {
		fl |= experimentalsys.O_DIRECTORY
	} else if oflags&wasiOExcl != 0 {
		fl |= experimentalsys.O_EXCL
	}
	defaultMode := experimentalsys.O_RDONLY
	if oflags&wasiOTrunc != 0 {
		fl |= experimentalsys.O_TRUNC
		defaultMode = experimentalsys.O_RDWR
	}
	if oflags&wasiOCreat != 0 {
		fl |= experimentalsys.O_CREAT
		defaultMode = experimentalsys.O_RDWR
	}
	if fdflags&wasiFdNonblock != 0 {
		fl |= experimentalsys.O_NONBLOCK
	}
	if fdflags&wasiFdAppend != 0 {
		fl |= experimentalsys.O_APPEND
		defaultMode = experimentalsys.O_RDWR
	}
	if fdflags&wasiFdDsync != 0 {
		fl |= experimentalsys.O_DSYNC
	}
	if fdflags&wasiFdRsync != 0 {
		fl |= experimentalsys.O_RSYNC
	}
	if fdflags&wasiFdSync != 0 {
		fl |= experimentalsys.O_SYNC
	}
	const r, w = rightFdRead, rightFdWrite
	switch {
	case rights&(r|w) == r|w:
		fl |= experimentalsys.O_RDWR
	case rights&w == w:
		fl |= experimentalsys.O_WRONLY
	case rights&r == r:
		fl |= experimentalsys.O_RDONLY
	default:
		fl |= defaultMode
	}
	return fl
}

// ---- the functions ----

// wasiArgs are the call's parameters as raw bits.
type wasiArgs []uint64

func (a wasiArgs) u32(k int) uint32 { return uint32(a[k]) }
func (a wasiArgs) i32(k int) int32  { return int32(uint32(a[k])) }
func (a wasiArgs) u64(k int) uint64 { return a[k] }

type wasiFunc func(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno

// wasiFuncs lists every function with its signature ('i' i32, 'I' i64 parameters; each returns an errno i32).
var wasiFuncs = []struct {
	name, params string
	fn           wasiFunc
}{
	{"args_get", "ii", func(*WASI, GuestMem, wasiArgs) experimentalsys.Errno { return 0 }},
	{"args_sizes_get", "ii", wasiSizesGet},
	{"environ_get", "ii", func(*WASI, GuestMem, wasiArgs) experimentalsys.Errno { return 0 }},
	{"environ_sizes_get", "ii", wasiSizesGet},
	{"clock_res_get", "ii", wasiClockResGet},
	{"clock_time_get", "iIi", wasiClockTimeGet},
	{"fd_advise", "iIIi", wasiFdAdvise},
	{"fd_allocate", "iII", wasiFdAllocate},
	{"fd_close", "i", wasiFdClose},
	{"fd_datasync", "i", func(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
		return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno { return f.Datasync() })
	}},
	{"fd_sync", "i", func(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
		return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno { return f.Sync() })
	}},
	{"fd_fdstat_get", "ii", wasiFdFdstatGet},
	{"fd_fdstat_set_flags", "ii", wasiFdFdstatSetFlags},
	{"fd_fdstat_set_rights", "iII", func(*WASI, GuestMem, wasiArgs) experimentalsys.Errno { return experimentalsys.ENOSYS }},
	{"fd_filestat_get", "ii", wasiFdFilestatGet},
	{"fd_filestat_set_size", "iI", func(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
		return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno { return f.Truncate(int64(a.u64(1))) })
	}},
	{"fd_filestat_set_times", "iIIi", wasiFdFilestatSetTimes},
	{"fd_pread", "iiiIi", wasiFdPread},
	{"fd_prestat_get", "ii", wasiFdPrestatGet},
	{"fd_prestat_dir_name", "iii", wasiFdPrestatDirName},
	{"fd_pwrite", "iiiIi", wasiFdPwrite},
	{"fd_read", "iiii", wasiFdRead},
	{"fd_readdir", "iiiIi", wasiFdReaddir},
	{"fd_renumber", "ii", func(*WASI, GuestMem, wasiArgs) experimentalsys.Errno { return experimentalsys.ENOSYS }},
	{"fd_seek", "iIii", wasiFdSeek},
	{"fd_tell", "ii", func(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
		return w.seek(m, a.i32(0), 0, io.SeekCurrent, a.u32(1))
	}},
	{"fd_write", "iiii", wasiFdWrite},
	{"path_create_directory", "iii", wasiPathCreateDirectory},
	{"path_filestat_get", "iiiii", wasiPathFilestatGet},
	{"path_filestat_set_times", "iiiiIIi", wasiPathFilestatSetTimes},
	{"path_link", "iiiiiii", wasiPathLink},
	{"path_open", "iiiiiIIii", wasiPathOpen},
	{"path_readlink", "iiiiii", wasiPathReadlink},
	{"path_remove_directory", "iii", func(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
		fsys, name, errno := w.atPath(m, a.i32(0), a.u32(1), a.u32(2))
		if errno != 0 {
			return errno
		}
		return fsys.Rmdir(name)
	}},
	{"path_rename", "iiiiii", wasiPathRename},
	{"path_symlink", "iiiii", wasiPathSymlink},
	{"path_unlink_file", "iii", func(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
		fsys, name, errno := w.atPath(m, a.i32(0), a.u32(1), a.u32(2))
		if errno != 0 {
			return errno
		}
		return fsys.Unlink(name)
	}},
	{"poll_oneoff", "iiii", wasiPollOneoff},
	{"random_get", "ii", wasiRandomGet},
	{"sched_yield", "", func(*WASI, GuestMem, wasiArgs) experimentalsys.Errno { return 0 }},
	// There are no sockets: a descriptor is either closed (EBADF) or not a socket.
	{"sock_accept", "iii", wasiSock},
	{"sock_recv", "iiiiii", wasiSock},
	{"sock_send", "iiiii", wasiSock},
	{"sock_shutdown", "ii", wasiSock},
}

// WASIModule is the import module name of WASI preview 1.
const WASIModule = wasiModule

// WASIFunc is one wasi_snapshot_preview1 function for an engine to bind: Params lists its parameters ('i' i32,
// 'I' i64) and every one returns a wasip1 errno (i32). proc_exit is not among them: ending the run is the
// engine's (see WASIProcExit).
type WASIFunc struct {
	Name, Params string
	// Call runs the function for the instance whose WASI state is w, over its linear memory m (valid for this
	// call only), with the parameters as raw bits (an i32 in the low 32 bits). It returns the wasip1 errno.
	Call func(w *WASI, m GuestMem, args []uint64) uint32
}

// WASIProcExit is the name of the one function every engine implements itself: it ends the run.
const WASIProcExit = "proc_exit"

// WASIFunctions lists the functions of wasi_snapshot_preview1 other than proc_exit.
func WASIFunctions() []WASIFunc {
	out := make([]WASIFunc, len(wasiFuncs))
	for k, d := range wasiFuncs {
		fn := d.fn
		out[k] = WASIFunc{Name: d.name, Params: d.params, Call: func(w *WASI, m GuestMem, a []uint64) uint32 {
			return wasiErrno(fn(w, m, a))
		}}
	}
	return out
}

func wasiSizesGet(_ *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	if !m.PutU32(a.u32(0), 0) || !m.PutU32(a.u32(1), 0) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiClockResGet(_ *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	switch a.u32(0) {
	case wasiClockRealtime, wasiClockMonotonic:
	default:
		return experimentalsys.EINVAL
	}
	if !m.PutU64(a.u32(1), 1) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiClockTimeGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	var t int64
	switch a.u32(0) {
	case wasiClockRealtime:
		t = w.walltimeNanos()
	case wasiClockMonotonic:
		t = w.nanotime()
	default:
		return experimentalsys.EINVAL
	}
	if !m.PutU64(a.u32(2), uint64(t)) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiFdAdvise(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	if _, ok := w.lookup(a.i32(0)); !ok {
		return experimentalsys.EBADF
	}
	if a.u32(3) > 5 { // normal, sequential, random, willneed, dontneed, noreuse
		return experimentalsys.EINVAL
	}
	return 0
}

func wasiFdAllocate(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	off, n := int64(a.u64(1)), int64(a.u64(2))
	if off < 0 || n <= 0 || off+n < 0 {
		return experimentalsys.EINVAL
	}
	return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno {
		st, errno := f.Stat()
		if errno != 0 {
			return errno
		}
		if end := off + n; end > st.Size {
			return f.Truncate(end)
		}
		return 0
	})
}

// withFile runs fn on fd's open file.
func (w *WASI) withFile(fd int32, fn func(experimentalsys.File) experimentalsys.Errno) experimentalsys.Errno {
	e, ok := w.lookup(fd)
	if !ok {
		return experimentalsys.EBADF
	}
	f, errno := e.file()
	if errno != 0 {
		return errno
	}
	return fn(f)
}

func wasiFdClose(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	fd := a.i32(0)
	e, ok := w.lookup(fd)
	if !ok {
		return experimentalsys.EBADF
	}
	if e.f != nil {
		if errno := e.f.Close(); errno != 0 {
			return errno
		}
	}
	w.files[fd] = nil
	return 0
}

func wasiFdFdstatGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	buf, ok := m.Slice(a.u32(1), 24)
	if !ok {
		return experimentalsys.EFAULT
	}
	e, ok := w.lookup(a.i32(0))
	if !ok {
		return experimentalsys.EBADF
	}
	var ftype uint8
	var fdflags uint16
	if e.preopen {
		ftype = wasiFiletypeDirectory
	} else {
		st, errno := e.f.Stat()
		if errno != 0 {
			return errno
		}
		ftype = wasiFiletype(st.Mode)
		if e.f.IsAppend() {
			fdflags |= wasiFdAppend
		}
		if pf, ok := e.f.(experimentalsys.PollableFile); ok && pf.IsNonblock() {
			fdflags |= wasiFdNonblock
		}
	}
	var base, inheriting uint64
	switch ftype {
	case wasiFiletypeDirectory:
		base, inheriting = dirRightsBase, fileRightsBase|dirRightsBase
	case wasiFiletypeCharDevice:
		base = fileRightsBase &^ rightFdSeek &^ rightFdTell
	default:
		base = fileRightsBase
	}
	le := binary.LittleEndian
	le.PutUint16(buf[0:], uint16(ftype))
	le.PutUint16(buf[2:], fdflags)
	le.PutUint32(buf[4:], 0)
	le.PutUint64(buf[8:], base)
	le.PutUint64(buf[16:], inheriting)
	return 0
}

func wasiFdFdstatSetFlags(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	flags := uint16(a.u32(1))
	if flags&(wasiFdDsync|wasiFdRsync|wasiFdSync) != 0 {
		return experimentalsys.EINVAL
	}
	return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno {
		nonblock := flags&wasiFdNonblock != 0
		if pf, ok := f.(experimentalsys.PollableFile); ok {
			if errno := pf.SetNonblock(nonblock); errno != 0 {
				return errno
			}
		} else if isDir, errno := f.IsDir(); errno == 0 && isDir {
			return experimentalsys.EISDIR
		} else if nonblock {
			return experimentalsys.ENOSYS
		}
		if st, errno := f.Stat(); errno == 0 && st.Mode.IsRegular() {
			return f.SetAppend(flags&wasiFdAppend != 0)
		}
		return 0
	})
}

func wasiFdFilestatGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	if _, ok := m.Slice(a.u32(1), 64); !ok {
		return experimentalsys.EFAULT
	}
	return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno {
		st, errno := f.Stat()
		if errno != 0 {
			return errno
		}
		return writeFilestat(m, a.u32(1), &st)
	})
}

func wasiFdFilestatSetTimes(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	e, ok := w.lookup(a.i32(0))
	if !ok {
		return experimentalsys.EBADF
	}
	atim, mtim, errno := toTimes(w.walltimeNanos, int64(a.u64(1)), int64(a.u64(2)), uint16(a.u32(3)))
	if errno != 0 {
		return errno
	}
	f, errno := e.file()
	if errno != 0 {
		return errno
	}
	errno = f.Utimens(atim, mtim)
	if (errno == experimentalsys.EPERM || errno == experimentalsys.ENOSYS) && e.fs != nil {
		name := e.name
		if e.preopen || name == "" {
			name = "."
		}
		errno = e.fs.Utimens(name, atim, mtim)
	}
	return errno
}

// fdIO is fd_read/fd_pread/fd_write/fd_pwrite: it applies io to each iovec of (fd, iovs, iovs_len) and stores
// the total at the pointer in argument resultArg. io reports whether the next buffer may follow (a short read
// ends the call).
func fdIO(w *WASI, m GuestMem, a wasiArgs, resultArg int, io func(f experimentalsys.File, b []byte) (int, bool, experimentalsys.Errno)) experimentalsys.Errno {
	return w.withFile(a.i32(0), func(f experimentalsys.File) experimentalsys.Errno {
		n, errno := iovecs(m, a.u32(1), a.u32(2), func(b []byte) (int, bool, experimentalsys.Errno) { return io(f, b) })
		if errno != 0 {
			return errno
		}
		if !m.PutU32(a.u32(resultArg), n) {
			return experimentalsys.EFAULT
		}
		return 0
	})
}

func wasiFdRead(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	return fdIO(w, m, a, 3, func(f experimentalsys.File, b []byte) (int, bool, experimentalsys.Errno) {
		if len(b) == 0 {
			return 0, true, 0
		}
		n, errno := f.Read(b)
		return n, n == len(b), errno
	})
}

func wasiFdPread(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	off := int64(a.u64(3))
	return fdIO(w, m, a, 4, func(f experimentalsys.File, b []byte) (int, bool, experimentalsys.Errno) {
		if len(b) == 0 {
			return 0, true, 0
		}
		n, errno := f.Pread(b, off)
		off += int64(n)
		return n, n == len(b), errno
	})
}

func wasiFdWrite(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	return fdIO(w, m, a, 3, func(f experimentalsys.File, b []byte) (int, bool, experimentalsys.Errno) {
		n, errno := f.Write(b)
		return n, true, errno
	})
}

func wasiFdPwrite(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	off := int64(a.u64(3))
	return fdIO(w, m, a, 4, func(f experimentalsys.File, b []byte) (int, bool, experimentalsys.Errno) {
		n, errno := f.Pwrite(b, off)
		off += int64(n)
		return n, true, errno
	})
}

func wasiFdPrestatGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	e, ok := w.lookup(a.i32(0))
	if !ok || !e.preopen {
		return experimentalsys.EBADF
	}
	// prestat: tag 0 (directory), then the name length.
	if !m.PutU64(a.u32(1), uint64(len(e.guest))<<32) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiFdPrestatDirName(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	e, ok := w.lookup(a.i32(0))
	if !ok || !e.preopen {
		return experimentalsys.EBADF
	}
	n := a.u32(2)
	if uint32(len(e.guest)) < n {
		return experimentalsys.ENAMETOOLONG
	}
	b, ok := m.Slice(a.u32(1), n)
	if !ok {
		return experimentalsys.EFAULT
	}
	copy(b, e.guest)
	return 0
}

func wasiFdSeek(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	return w.seek(m, a.i32(0), int64(a.u64(1)), int(a.u32(2)), a.u32(3))
}

func (w *WASI) seek(m GuestMem, fd int32, off int64, whence int, result uint32) experimentalsys.Errno {
	e, ok := w.lookup(fd)
	if !ok {
		return experimentalsys.EBADF
	}
	if isDir, _ := e.isDir(); isDir {
		return experimentalsys.EISDIR
	}
	pos, errno := e.f.Seek(off, whence)
	if errno != 0 {
		return errno
	}
	if !m.PutU64(result, uint64(pos)) {
		return experimentalsys.EFAULT
	}
	return 0
}

// wasiFdReaddir serves the listing read when the cookie is 0 ("." and ".." first); a cookie is the index of the
// next entry.
func wasiFdReaddir(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	bufPtr, bufLen, cookie, usedPtr := a.u32(1), a.u32(2), a.u64(3), a.u32(4)
	if bufLen < wasiDirentSize {
		return experimentalsys.EINVAL
	}
	e, ok := w.lookup(a.i32(0))
	if !ok {
		return experimentalsys.EBADF
	}
	f, errno := e.file()
	if errno != 0 {
		return errno
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return errno
	} else if !isDir {
		return experimentalsys.EBADF // as wazero: some guests crash on ENOTDIR
	}
	if cookie == 0 || e.dirents == nil {
		if cookie != 0 {
			return experimentalsys.ENOENT
		}
		if e.dirents != nil { // rewind to see entries added since
			if _, errno := f.Seek(0, io.SeekStart); errno != 0 {
				return errno
			}
		}
		ino, errno := f.Ino()
		if errno != 0 {
			return errno
		}
		list, errno := f.Readdir(-1)
		if errno != 0 {
			return errno
		}
		e.dirents = append([]experimentalsys.Dirent{{Name: ".", Ino: ino, Type: fs.ModeDir}, {Name: "..", Type: fs.ModeDir}}, list...)
	}
	if cookie > uint64(len(e.dirents)) {
		return experimentalsys.ENOENT
	}
	buf, ok := m.Slice(bufPtr, bufLen)
	if !ok {
		return experimentalsys.EFAULT
	}
	le := binary.LittleEndian
	used := uint32(0)
	for k := cookie; k < uint64(len(e.dirents)); k++ {
		d := e.dirents[k]
		var hdr [wasiDirentSize]byte
		le.PutUint64(hdr[0:], k+1)
		le.PutUint64(hdr[8:], d.Ino)
		le.PutUint32(hdr[16:], uint32(len(d.Name)))
		le.PutUint32(hdr[20:], uint32(wasiFiletype(d.Type)))
		rest := bufLen - used
		if uint64(wasiDirentSize)+uint64(len(d.Name)) > uint64(rest) {
			// Partial entry: as much of the header as fits, and report a full buffer so the guest retries.
			copy(buf[used:], hdr[:])
			used = bufLen
			break
		}
		copy(buf[used:], hdr[:])
		copy(buf[used+wasiDirentSize:], d.Name)
		used += wasiDirentSize + uint32(len(d.Name))
	}
	if !m.PutU32(usedPtr, used) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiPathCreateDirectory(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	fsys, name, errno := w.atPath(m, a.i32(0), a.u32(1), a.u32(2))
	if errno != 0 {
		return errno
	}
	return fsys.Mkdir(name, 0o700)
}

func wasiPathFilestatGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	fsys, name, errno := w.atPath(m, a.i32(0), a.u32(2), a.u32(3))
	if errno != 0 {
		return errno
	}
	var st wsys.Stat_t
	if a.u32(1)&wasiLookupSymlinkFollow == 0 {
		st, errno = fsys.Lstat(name)
	} else {
		st, errno = fsys.Stat(name)
	}
	if errno != 0 {
		return errno
	}
	return writeFilestat(m, a.u32(4), &st)
}

func wasiPathFilestatSetTimes(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	atim, mtim, errno := toTimes(w.walltimeNanos, int64(a.u64(4)), int64(a.u64(5)), uint16(a.u32(6)))
	if errno != 0 {
		return errno
	}
	fsys, name, errno := w.atPath(m, a.i32(0), a.u32(2), a.u32(3))
	if errno != 0 {
		return errno
	}
	if a.u32(1)&wasiLookupSymlinkFollow != 0 {
		return fsys.Utimens(name, atim, mtim)
	}
	f, errno := fsys.OpenFile(name, experimentalsys.O_WRONLY, 0)
	if errno != 0 {
		return errno
	}
	defer f.Close()
	return f.Utimens(atim, mtim)
}

func wasiPathLink(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	oldFS, oldName, errno := w.atPath(m, a.i32(0), a.u32(2), a.u32(3))
	if errno != 0 {
		return errno
	}
	newFS, newName, errno := w.atPath(m, a.i32(4), a.u32(5), a.u32(6))
	if errno != 0 {
		return errno
	}
	if oldFS != newFS {
		return experimentalsys.ENOSYS // cross-device, as wazero reports it
	}
	return oldFS.Link(oldName, newName)
}

func wasiPathOpen(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	dirfd, dirflags, pathLen := a.i32(0), uint16(a.u32(1)), a.u32(3)
	oflags, rights, fdflags, result := uint16(a.u32(4)), a.u64(5), uint16(a.u32(7)), a.u32(8)
	fsys, name, errno := w.atPath(m, dirfd, a.u32(2), pathLen)
	if errno != 0 {
		return errno
	}
	if pathLen == 0 {
		return experimentalsys.EINVAL
	}
	fl := openFlags(dirflags, oflags, fdflags, rights)
	wantDir := fl&experimentalsys.O_DIRECTORY != 0
	if wantDir && oflags&wasiOCreat != 0 {
		return experimentalsys.EINVAL // path_create_directory creates directories
	}
	f, errno := fsys.OpenFile(name, fl, 0o600)
	if errno != 0 {
		return errno
	}
	if wantDir {
		if isDir, errno := f.IsDir(); errno != 0 || !isDir {
			_ = f.Close()
			if errno == 0 {
				errno = experimentalsys.ENOTDIR
			}
			return errno
		}
	}
	entry := &wasiFile{fs: fsys, f: f, name: strings.TrimSuffix(name, "/")}
	if entry.name == "." {
		entry.name = ""
	}
	fd := w.insert(entry)
	if !m.PutU32(result, uint32(fd)) {
		_ = f.Close()
		w.files[fd] = nil
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiPathReadlink(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	pathLen, buf, bufLen, used := a.u32(2), a.u32(3), a.u32(4), a.u32(5)
	if pathLen == 0 || bufLen == 0 {
		return experimentalsys.EINVAL
	}
	fsys, name, errno := w.atPath(m, a.i32(0), a.u32(1), pathLen)
	if errno != 0 {
		return errno
	}
	dst, errno := fsys.Readlink(name)
	if errno != 0 {
		return errno
	}
	if len(dst) > int(bufLen) {
		return experimentalsys.ERANGE
	}
	b, ok := m.Slice(buf, uint32(len(dst)))
	if !ok {
		return experimentalsys.EFAULT
	}
	copy(b, dst)
	if !m.PutU32(used, uint32(len(dst))) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiPathRename(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	oldFS, oldName, errno := w.atPath(m, a.i32(0), a.u32(1), a.u32(2))
	if errno != 0 {
		return errno
	}
	newFS, newName, errno := w.atPath(m, a.i32(3), a.u32(4), a.u32(5))
	if errno != 0 {
		return errno
	}
	if oldFS != newFS {
		return experimentalsys.ENOSYS // across mounts, as wazero
	}
	return oldFS.Rename(oldName, newName)
}

func wasiPathSymlink(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	oldPtr, oldLen, fd, newPtr, newLen := a.u32(0), a.u32(1), a.i32(2), a.u32(3), a.u32(4)
	if oldLen == 0 || newLen == 0 {
		return experimentalsys.EINVAL
	}
	target, ok := m.Slice(oldPtr, oldLen)
	if !ok {
		return experimentalsys.EFAULT
	}
	fsys, name, errno := w.atPath(m, fd, newPtr, newLen)
	if errno != 0 {
		return errno
	}
	// The file systems decide: internal/vfs refuses (EPERM), read-only mounts give EROFS.
	return fsys.Symlink(string(target), name)
}

// wasiPollOneoff handles clock subscriptions (relative timeouts, through Nanosleep) and fd subscriptions. Every
// open descriptor is always ready for reading, except a stdin whose reader can poll (it is waited for, up to
// the earliest clock timeout); writing readiness is not supported (ENOTSUP in the event). Ready fd events are
// reported without sleeping.
func wasiPollOneoff(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	in, out, nsubs, neventsPtr := a.u32(0), a.u32(1), a.u32(2), a.u32(3)
	if nsubs == 0 {
		return experimentalsys.EINVAL
	}
	if uint64(nsubs)*48 > uint64(len(m)) {
		return experimentalsys.EFAULT
	}
	inBuf, ok := m.Slice(in, nsubs*48)
	if !ok {
		return experimentalsys.EFAULT
	}
	outBuf, ok := m.Slice(out, nsubs*32)
	if !ok {
		return experimentalsys.EFAULT
	}
	inCopy := append([]byte(nil), inBuf...) // in and out may overlap
	le := binary.LittleEndian
	type event struct {
		userdata []byte
		typ      byte
		errno    uint32
	}
	var fdEvents, clockEvents, stdinEvents []event
	timeout := int64(-1)
	for k := uint32(0); k < nsubs; k++ {
		sub := inCopy[48*k : 48*k+48]
		typ := sub[8]
		args := sub[16:]
		ev := event{userdata: sub[:8], typ: typ}
		switch typ {
		case wasiEventClock:
			ns := int64(le.Uint64(args[8:]))
			switch le.Uint16(args[24:]) {
			case 0: // relative
			case 1: // absolute
				return experimentalsys.ENOTSUP
			default:
				return experimentalsys.EINVAL
			}
			if ns < 0 {
				ns = 0
			}
			if timeout < 0 || ns < timeout {
				timeout = ns
			}
			clockEvents = append(clockEvents, ev)
		case wasiEventFdRead, wasiEventFdWrite:
			fd := int32(le.Uint32(args))
			if fd < 0 {
				return experimentalsys.EBADF
			}
			f, ok := w.lookup(fd)
			switch {
			case !ok:
				ev.errno = wasiEBadf
			case typ == wasiEventFdWrite:
				ev.errno = wasiENotsup
			case stdinPoller(f) != nil:
				stdinEvents = append(stdinEvents, ev)
				continue
			}
			fdEvents = append(fdEvents, ev)
		default:
			return experimentalsys.EINVAL
		}
	}
	// A stdin that can tell whether data is ready (the sandbox's) is waited for as wazero does: until data, end of
	// input or the end of the run, or the earliest clock timeout.
	if len(stdinEvents) > 0 && len(fdEvents) == 0 {
		ms := int32(-1)
		if timeout >= 0 {
			ms = int32(min((timeout+999_999)/1_000_000, math.MaxInt32))
		}
		f, _ := w.lookup(0)
		if ready, _ := stdinPoller(f).Poll(experimentalsys.POLLIN, ms); ready {
			fdEvents = stdinEvents
		} else {
			fdEvents = clockEvents // the poll has waited for the timeout
		}
	} else {
		fdEvents = append(fdEvents, stdinEvents...)
	}
	events := fdEvents
	if len(events) == 0 {
		if timeout > 0 {
			w.nanosleep(timeout)
		}
		events = clockEvents
	}
	clear(outBuf)
	for k, ev := range events {
		o := outBuf[32*k:]
		copy(o, ev.userdata)
		le.PutUint16(o[8:], uint16(ev.errno))
		le.PutUint16(o[10:], uint16(ev.typ))
	}
	if !m.PutU32(neventsPtr, uint32(len(events))) {
		return experimentalsys.EFAULT
	}
	return 0
}

func wasiRandomGet(w *WASI, m GuestMem, a wasiArgs) experimentalsys.Errno {
	b, ok := m.Slice(a.u32(0), a.u32(1))
	if !ok {
		return experimentalsys.EFAULT
	}
	if _, err := io.ReadFull(w.rand, b); err != nil {
		return experimentalsys.EIO
	}
	return 0
}

func wasiSock(w *WASI, _ GuestMem, a wasiArgs) experimentalsys.Errno {
	if _, ok := w.lookup(a.i32(0)); !ok {
		return experimentalsys.EBADF
	}
	return experimentalsys.ENOTSUP
}
