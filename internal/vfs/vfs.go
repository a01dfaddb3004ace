package vfs

import (
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// Default quotas, used for any zero (or negative) field of Limits.
const (
	DefaultMaxBytes     = 64 << 20 // 64 MiB of file contents
	DefaultMaxFiles     = 10_000   // files + directories, the root excluded
	DefaultMaxOpenFiles = 1024     // open handles at once
)

// Path limits, as on Linux (plus a depth bound Linux does not have). Every
// entry of an FS satisfies them at all times: a path passed in that breaks
// one, and a create, mkdir or rename whose result would break one, fails with
// ENAMETOOLONG. They bound what host code spends per path (Walk, Changes,
// WriteBack), whatever sequence of renames the guest makes.
const (
	MaxNameLen = 255  // bytes in one path component
	MaxPathLen = 4096 // bytes in a whole path, as passed in and of every entry ("a/b/c", no leading slash)
	MaxDepth   = 256  // components in a path (the root is depth 0, "a/b" depth 2)
)

// devID is the Stat_t.Dev reported for every node of every FS.
const devID = 0x76667321 // "vfs!"

// Limits are the workspace quotas. The zero value means the defaults
// (DefaultMaxBytes, DefaultMaxFiles); so does any field <= 0.
type Limits struct {
	// MaxBytes bounds the sum of the sizes of all regular files, including
	// files that were unlinked but are still open. Exceeding it gives ENOSPC.
	MaxBytes int64
	// MaxFiles bounds the number of files plus directories, the root
	// excluded. Exceeding it gives EDQUOT.
	MaxFiles int
	// MaxOpenFiles bounds the handles open at once (wazero keeps no limit
	// of its own, and each handle costs host memory). Exceeding it gives
	// EMFILE.
	MaxOpenFiles int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxOpenFiles <= 0 {
		l.MaxOpenFiles = DefaultMaxOpenFiles
	}
	return l
}

// Option configures New.
type Option func(*FS)

// WithClock sets the clock used for every timestamp the FS records (creation,
// modification, status change). Pass a fixed or fake clock for deterministic
// runs. The default is time.Now. A nil clock is ignored.
func WithClock(now func() time.Time) Option {
	return func(f *FS) {
		if now != nil {
			f.now = now
		}
	}
}

// node is a file or a directory.
type node struct {
	ino      uint64
	mode     fs.FileMode      // type bits | permission bits
	data     []byte           // regular files
	children map[string]*node // non-nil exactly for directories
	atim     int64
	mtim     int64
	ctim     int64
	version  uint64 // FS-wide sequence number of the last content change
	opens    int    // open handles (of the current generation)
	linked   bool   // reachable from the root

	// Directories only: upper bounds of the deepest entry below (in
	// components: 1 for a child) and of the longest path below (bytes of
	// "child/grandchild"), so that a rename can check the moved subtree
	// against MaxDepth and MaxPathLen without walking it. They are exact
	// unless stale (something was removed below since they were computed);
	// exactBounds recomputes stale ones.
	height int
	extent int
	stale  bool
}

// isDir reads only children, which never changes after creation, so it is
// safe without the lock (Chmod rewrites mode).
func (n *node) isDir() bool { return n.children != nil }

// FS is an in-memory file system implementing wazero's experimental sys.FS.
// Create it with New; the zero value is not usable.
//
// All methods are safe for concurrent use: one mutex guards the whole tree,
// so a guest can use it while the host reads it from another goroutine.
// Distinct FS values share no mutable state.
type FS struct {
	sys.UnimplementedFS

	mu      sync.Mutex
	limits  Limits
	dev     uint64 // this FS's device number (mode.go)
	now     func() time.Time
	root    *node
	nextIno uint64
	version uint64
	gen     uint64 // bumped by Reset; handles of older generations are dead

	usedBytes   int64
	usedFiles   int
	openHandles int

	// frozen: see Freeze. Only ever set, never cleared.
	frozen bool

	baseline *baseNode
}

var _ sys.FS = (*FS)(nil)

// New returns an empty workspace (just its root directory) with the given
// quotas (zero fields take the defaults) and options.
func New(limits Limits, opts ...Option) *FS {
	f := &FS{limits: limits.withDefaults(), now: time.Now, dev: newDev()}
	for _, o := range opts {
		o(f)
	}
	f.resetLocked()
	return f
}

func (f *FS) resetLocked() {
	f.gen++
	f.nextIno = 1
	f.root = f.newNode(fs.ModeDir | 0o755)
	f.root.linked = true
	f.usedBytes = 0
	f.usedFiles = 0
	f.openHandles = 0
	f.baseline = newBaseDir()
}

func (f *FS) nowNanos() int64 { return f.now().UnixNano() }

func (f *FS) newNode(mode fs.FileMode) *node {
	t := f.nowNanos()
	n := &node{ino: f.nextIno, mode: mode, atim: t, mtim: t, ctim: t}
	f.nextIno++
	if mode.IsDir() {
		n.children = map[string]*node{}
	}
	return n
}

// Limits returns the effective quotas (defaults filled in).
func (f *FS) Limits() Limits { return f.limits }

// Usage reports the bytes and the file count currently charged to the quotas.
func (f *FS) Usage() (bytes int64, files int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usedBytes, f.usedFiles
}

// ---- paths ----

// parsePath turns a path as wazero or the host passes it into components.
// Leading "/" and "./", repeated and trailing slashes and "." components are
// dropped: every path is relative to the root of this FS (wazero passes
// "/name" for entries of a directory handle opened at the root). ".." is
// resolved lexically (there are no symlinks) and going above the root is
// refused with EPERM, as wazero itself does. NUL bytes give EINVAL.
func parsePath(p string) (parts []string, trailingSlash bool, errno sys.Errno) {
	if len(p) > MaxPathLen {
		return nil, false, sys.ENAMETOOLONG
	}
	if strings.IndexByte(p, 0) >= 0 {
		return nil, false, sys.EINVAL
	}
	trailingSlash = strings.HasSuffix(p, "/")
	for len(p) > 0 {
		var seg string
		if i := strings.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			seg, p = p, ""
		}
		switch seg {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return nil, false, sys.EPERM
			}
			parts = parts[:len(parts)-1]
		default:
			if len(seg) > MaxNameLen {
				return nil, false, sys.ENAMETOOLONG
			}
			parts = append(parts, seg)
		}
	}
	if len(parts) > MaxDepth {
		return nil, false, sys.ENAMETOOLONG
	}
	return parts, trailingSlash, 0
}

// pathLen is len(joinParts(parts)) without building it.
func pathLen(parts []string) int {
	n := len(parts) - 1
	if n < 0 {
		return 0
	}
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// below is the length a subtree of the given extent adds to its root's path
// ("/" plus the longest relative path), 0 for an empty subtree.
func below(extent int) int {
	if extent == 0 {
		return 0
	}
	return 1 + extent
}

// grow records in every ancestor of the entry at parts (the root included)
// that it now holds that entry, whose own subtree has the given height and
// extent (0, 0 for a file or an empty directory). Every node on parts must
// exist.
func (f *FS) grow(parts []string, height, extent int) {
	total := pathLen(parts) + below(extent)
	n, used := f.root, 0
	for i := range parts {
		n.height = max(n.height, len(parts)-i+height)
		n.extent = max(n.extent, total-used)
		if i == len(parts)-1 {
			return
		}
		n = n.children[parts[i]]
		used += len(parts[i]) + 1
	}
}

// shrink marks the bounds of every ancestor of parts (the root included,
// the entry itself excluded) stale after the entry was removed.
func (f *FS) shrink(parts []string) {
	n := f.root
	for i := range parts {
		n.stale = true
		if i == len(parts)-1 {
			return
		}
		c := n.children[parts[i]]
		if c == nil {
			return
		}
		n = c
	}
}

// exactBounds makes d's height and extent exact, recomputing stale
// directories below it (never deeper than MaxDepth: every entry obeys it).
func exactBounds(d *node) {
	if !d.stale {
		return
	}
	d.height, d.extent = 0, 0
	for name, c := range d.children {
		h, e := 1, len(name)
		if c.isDir() {
			exactBounds(c)
			h += c.height
			e += below(c.extent)
		}
		d.height, d.extent = max(d.height, h), max(d.extent, e)
	}
	d.stale = false
}

// fits reports whether n, placed at parts, keeps it and everything below it
// within MaxDepth and MaxPathLen.
func fits(n *node, parts []string) bool {
	check := func() bool {
		return len(parts)+n.height <= MaxDepth && pathLen(parts)+below(n.extent) <= MaxPathLen
	}
	if !n.isDir() {
		return len(parts) <= MaxDepth && pathLen(parts) <= MaxPathLen
	}
	if check() {
		return true
	}
	if !n.stale {
		return false
	}
	exactBounds(n)
	return check()
}

func joinParts(parts []string) string { return strings.Join(parts, "/") }

// lookup resolves parts from the root.
func (f *FS) lookup(parts []string) (*node, sys.Errno) {
	n := f.root
	for _, name := range parts {
		if !n.isDir() {
			return nil, sys.ENOTDIR
		}
		c, ok := n.children[name]
		if !ok {
			return nil, sys.ENOENT
		}
		n = c
	}
	return n, 0
}

// lookupParent resolves the directory holding the last component of parts,
// which must be non-empty.
func (f *FS) lookupParent(parts []string) (*node, string, sys.Errno) {
	dir, errno := f.lookup(parts[:len(parts)-1])
	if errno != 0 {
		return nil, "", errno
	}
	if !dir.isDir() {
		return nil, "", sys.ENOTDIR
	}
	return dir, parts[len(parts)-1], 0
}

// resolve parses and looks up p, applying the trailing-slash rule (a
// trailing slash on a non-directory is ENOTDIR).
func (f *FS) resolve(p string) (*node, []string, sys.Errno) {
	parts, slash, errno := parsePath(p)
	if errno != 0 {
		return nil, nil, errno
	}
	n, errno := f.lookup(parts)
	if errno != 0 {
		return nil, nil, errno
	}
	if slash && !n.isDir() {
		return nil, nil, sys.ENOTDIR
	}
	return n, parts, 0
}

// ---- quota accounting ----

func (f *FS) chargeBytes(delta int64) sys.Errno {
	if delta > 0 && f.usedBytes+delta > f.limits.MaxBytes {
		return ENOSPC
	}
	f.usedBytes += delta
	return 0
}

func (f *FS) checkFiles(add int) sys.Errno {
	if add > 0 && f.usedFiles+add > f.limits.MaxFiles {
		return EDQUOT
	}
	return 0
}

// release uncharges a node that is neither linked nor open.
func (f *FS) release(n *node) {
	f.usedBytes -= int64(len(n.data))
	f.usedFiles--
	n.data = nil
}

// unlinkNode detaches n (already removed from its parent's map).
func (f *FS) unlinkNode(n *node, now int64) {
	n.linked = false
	n.ctim = now
	if n.opens == 0 {
		f.release(n)
	}
}

// setSize changes the length of a regular file, charging the byte quota.
// Growth never over-allocates past what the quota could still hold.
func (f *FS) setSize(n *node, size int64) sys.Errno {
	old := int64(len(n.data))
	if size == old {
		return 0
	}
	if errno := f.chargeBytes(size - old); errno != 0 {
		return errno
	}
	switch {
	case size < old:
		clear(n.data[size:old])
		n.data = n.data[:size]
		if c := int64(cap(n.data)); c > 4096 && size < c/4 {
			n.data = append([]byte(nil), n.data...)
		}
	case size <= int64(cap(n.data)):
		n.data = n.data[:size] // bytes past len were cleared when it shrank
	default:
		newCap := 2 * int64(cap(n.data))
		if newCap < size {
			newCap = size
		}
		if headroom := size + (f.limits.MaxBytes - f.usedBytes); newCap > headroom {
			newCap = headroom
		}
		buf := make([]byte, size, newCap)
		copy(buf, n.data)
		n.data = buf
	}
	return 0
}

// writeAt writes buf at off, all or nothing.
func (f *FS) writeAt(n *node, buf []byte, off int64) (int, sys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	end := off + int64(len(buf))
	if end < off { // overflow
		return 0, ENOSPC
	}
	if end > int64(len(n.data)) {
		if errno := f.setSize(n, end); errno != 0 {
			return 0, errno
		}
	}
	copy(n.data[off:], buf)
	f.touchContent(n)
	return len(buf), 0
}

func (f *FS) touchContent(n *node) {
	t := f.nowNanos()
	n.mtim, n.ctim = t, t
	f.version++
	n.version = f.version
}

func (f *FS) touchDir(d *node, now int64) {
	d.mtim, d.ctim = now, now
}

func (f *FS) statNode(n *node) wsys.Stat_t {
	st := wsys.Stat_t{
		Dev:  f.statDev(n),
		Ino:  n.ino,
		Mode: n.mode,
		Atim: n.atim,
		Mtim: n.mtim,
		Ctim: n.ctim,
	}
	if n.isDir() {
		st.Nlink = 2
		for _, c := range n.children {
			if c.isDir() {
				st.Nlink++
			}
		}
		if !n.linked {
			st.Nlink = 0
		}
	} else {
		st.Size = int64(len(n.data))
		if n.linked {
			st.Nlink = 1
		}
	}
	return st
}

// ---- sys.FS ----

// OpenFile implements sys.FS. Supported flags: O_RDONLY, O_WRONLY, O_RDWR,
// O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY; O_NOFOLLOW, O_NONBLOCK,
// O_SYNC, O_DSYNC and O_RSYNC are accepted and have no effect (there are no
// symlinks and everything is in memory). perm is stored (permission bits
// only) for a created file; permissions are never enforced.
//
// An open without write access never changes an existing file: O_TRUNC on
// one needs O_WRONLY or O_RDWR (EINVAL otherwise; POSIX leaves the
// combination undefined and Linux truncates). On a frozen FS (Freeze) any open asking for
// write access, O_CREAT, O_EXCL, O_TRUNC or O_APPEND fails with EROFS, as on
// a read-only Linux mount.
func (f *FS) OpenFile(path string, flag sys.Oflag, perm fs.FileMode) (sys.File, sys.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()

	parts, slash, errno := parsePath(path)
	if errno != 0 {
		return nil, errno
	}
	acc := flag & (sys.O_RDONLY | sys.O_RDWR | sys.O_WRONLY)
	readable := acc == sys.O_RDONLY || acc == sys.O_RDWR
	writable := acc == sys.O_WRONLY || acc == sys.O_RDWR
	creat := flag&sys.O_CREAT != 0
	excl := flag&sys.O_EXCL != 0
	trunc := flag&sys.O_TRUNC != 0
	appnd := flag&sys.O_APPEND != 0
	wantDir := flag&sys.O_DIRECTORY != 0
	if f.frozen && (writable || creat || excl || trunc || appnd) {
		return nil, sys.EROFS
	}
	if !f.frozen && f.openHandles >= f.limits.MaxOpenFiles {
		return nil, EMFILE
	}

	var n *node
	if len(parts) == 0 {
		n = f.root
	} else {
		dir, name, errno := f.lookupParent(parts)
		if errno != 0 {
			return nil, errno
		}
		n = dir.children[name]
		if n == nil {
			if !creat {
				return nil, sys.ENOENT
			}
			if wantDir {
				return nil, sys.EINVAL
			}
			if slash {
				return nil, sys.EISDIR
			}
			if errno := f.checkFiles(1); errno != 0 {
				return nil, errno
			}
			n = f.newNode(newFilePerm) // WASI passes no mode (mode.go)
			n.linked = true
			dir.children[name] = n
			f.usedFiles++
			f.grow(parts, 0, 0)
			f.touchDir(dir, n.ctim)
			return f.newHandle(n, readable, writable, appnd), 0
		}
	}
	if creat && excl {
		return nil, sys.EEXIST
	}
	if n.isDir() {
		if writable || trunc {
			return nil, sys.EISDIR
		}
		return f.newHandle(n, true, false, false), 0
	}
	if wantDir || slash {
		return nil, sys.ENOTDIR
	}
	if trunc && !writable {
		return nil, sys.EINVAL
	}
	if trunc && len(n.data) > 0 {
		_ = f.setSize(n, 0) // shrinking never fails
		f.touchContent(n)
	}
	return f.newHandle(n, readable, writable, appnd), 0
}

// newHandle opens a handle on n. Handles of a frozen FS are not counted: nothing
// can be unlinked, so no accounting depends on them, and a frozen FS shared by
// many guests must not let one of them use up a shared handle limit (bound
// them per guest with an OpenLimit).
func (f *FS) newHandle(n *node, readable, writable, appnd bool) *file {
	h := &file{fs: f, n: n, gen: f.gen, readable: readable, writable: writable, append: appnd, counted: !f.frozen}
	if h.counted {
		n.opens++
		f.openHandles++
	}
	h.seeker.h = h
	return h
}

// Lstat implements sys.FS. There are no symlinks, so it is Stat.
func (f *FS) Lstat(path string) (wsys.Stat_t, sys.Errno) { return f.Stat(path) }

// Stat implements sys.FS.
func (f *FS) Stat(path string) (wsys.Stat_t, sys.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _, errno := f.resolve(path)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return f.statNode(n), 0
}

// Mkdir implements sys.FS: EEXIST if path exists (whatever its type),
// ENOENT/ENOTDIR for a missing/non-directory parent, EDQUOT past the
// file-count quota.
func (f *FS) Mkdir(path string, perm fs.FileMode) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	parts, _, errno := parsePath(path)
	if errno != 0 {
		return errno
	}
	if len(parts) == 0 {
		return sys.EEXIST
	}
	dir, name, errno := f.lookupParent(parts)
	if errno != 0 {
		return errno
	}
	if _, ok := dir.children[name]; ok {
		return sys.EEXIST
	}
	if errno := f.checkFiles(1); errno != 0 {
		return errno
	}
	n := f.newNode(fs.ModeDir | newDirPerm) // WASI passes no mode (mode.go)
	n.linked = true
	dir.children[name] = n
	f.usedFiles++
	f.grow(parts, 0, 0)
	f.touchDir(dir, n.ctim)
	return 0
}

// Chmod implements sys.FS. The permission bits are stored and reported by
// stat but never enforced.
func (f *FS) Chmod(path string, perm fs.FileMode) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	n, _, errno := f.resolve(path)
	if errno != 0 {
		return errno
	}
	n.mode = n.mode&fs.ModeType | perm&fs.ModePerm
	n.ctim = f.nowNanos()
	return 0
}

// Rename implements sys.FS with POSIX rename semantics: a file replaces an
// existing file; a directory replaces an empty directory (ENOTEMPTY
// otherwise); file over directory is EISDIR, directory over file is ENOTDIR;
// moving a directory into its own subtree, or renaming the root, is EINVAL.
// A directory whose deepest entry would then pass MaxDepth or MaxPathLen is
// ENAMETOOLONG. Open handles keep referring to the moved node. Rename never
// grows usage.
func (f *FS) Rename(from, to string) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	fromParts, fromSlash, errno := parsePath(from)
	if errno != 0 {
		return errno
	}
	toParts, toSlash, errno := parsePath(to)
	if errno != 0 {
		return errno
	}
	if len(fromParts) == 0 || len(toParts) == 0 {
		return sys.EINVAL
	}
	srcDir, srcName, errno := f.lookupParent(fromParts)
	if errno != 0 {
		return errno
	}
	src, ok := srcDir.children[srcName]
	if !ok {
		return sys.ENOENT
	}
	if !src.isDir() && (fromSlash || toSlash) {
		return sys.ENOTDIR
	}
	dstDir, dstName, errno := f.lookupParent(toParts)
	if errno != 0 {
		return errno
	}
	dst := dstDir.children[dstName]
	if dst == src {
		return 0
	}
	if src.isDir() && isPrefix(fromParts, toParts) {
		return sys.EINVAL
	}
	if dst != nil {
		switch {
		case src.isDir() && !dst.isDir():
			return sys.ENOTDIR
		case !src.isDir() && dst.isDir():
			return sys.EISDIR
		case dst.isDir() && len(dst.children) > 0:
			return sys.ENOTEMPTY
		}
	}
	if !fits(src, toParts) {
		return sys.ENAMETOOLONG
	}
	now := f.nowNanos()
	f.shrink(fromParts)
	delete(srcDir.children, srcName)
	if dst != nil {
		f.shrink(toParts)
		delete(dstDir.children, dstName)
		f.unlinkNode(dst, now)
	}
	dstDir.children[dstName] = src
	f.grow(toParts, src.height, src.extent)
	src.ctim = now
	f.touchDir(srcDir, now)
	f.touchDir(dstDir, now)
	return 0
}

// isPrefix reports whether p is a proper prefix of q.
func isPrefix(p, q []string) bool {
	if len(p) >= len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// Rmdir implements sys.FS: ENOTDIR for a file, ENOTEMPTY for a non-empty
// directory, EINVAL for the root.
func (f *FS) Rmdir(path string) sys.Errno {
	return f.remove(path, sys.EINVAL, func(n *node, _ bool) sys.Errno {
		switch {
		case !n.isDir():
			return sys.ENOTDIR
		case len(n.children) > 0:
			return sys.ENOTEMPTY
		}
		return 0
	})
}

// Unlink implements sys.FS: EISDIR for a directory (as Linux does). An
// unlinked file that is still open stays readable and writable through its
// handles and stays charged to the quotas until the last handle closes.
func (f *FS) Unlink(path string) sys.Errno {
	return f.remove(path, sys.EISDIR, func(n *node, slash bool) sys.Errno {
		switch {
		case n.isDir():
			return sys.EISDIR
		case slash:
			return sys.ENOTDIR
		}
		return 0
	})
}

// remove is Rmdir and Unlink: it finds path's entry (rootErr for the root, ENOENT if absent), lets check refuse
// it, then removes it.
func (f *FS) remove(path string, rootErr sys.Errno, check func(n *node, trailingSlash bool) sys.Errno) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	parts, slash, errno := parsePath(path)
	if errno != 0 {
		return errno
	}
	if len(parts) == 0 {
		return rootErr
	}
	dir, name, errno := f.lookupParent(parts)
	if errno != 0 {
		return errno
	}
	n, ok := dir.children[name]
	if !ok {
		return sys.ENOENT
	}
	if errno := check(n, slash); errno != 0 {
		return errno
	}
	now := f.nowNanos()
	f.shrink(parts)
	delete(dir.children, name)
	f.unlinkNode(n, now)
	f.touchDir(dir, now)
	return 0
}

// Link implements sys.FS: hard links are refused with EPERM (the file system
// does not support them; Linux says EPERM for that too), EROFS when frozen.
func (f *FS) Link(_, _ string) sys.Errno { return f.noLinks() }

// Symlink implements sys.FS: symbolic links are refused with EPERM (EROFS
// when frozen), so no path in the workspace can ever point anywhere else.
func (f *FS) Symlink(_, _ string) sys.Errno { return f.noLinks() }

func (f *FS) noLinks() sys.Errno {
	if f.Frozen() {
		return sys.EROFS
	}
	return sys.EPERM
}

// Freeze makes f read-only for good, for the guest and the host alike: from
// then on every sys.FS operation that would change it (an open with write
// access, O_CREAT, O_EXCL, O_TRUNC or O_APPEND, Mkdir, Rename, Rmdir, Unlink,
// Chmod, Utimens, Link, Symlink) fails with EROFS, so do writes, truncates and
// Utimens through handles opened before, and the host-side writers
// (WriteFile, MkdirAll, CopyIn) return an error wrapping EROFS; Reset does
// nothing. Reading, Walk, Changes, Mark and Clone still work; a Clone is not
// frozen. Use it for a layer that many guests share.
//
// Handles opened on a frozen FS do not count against Limits.MaxOpenFiles (see
// OpenLimit for a per-guest bound).
func (f *FS) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

// Frozen reports whether Freeze was called.
func (f *FS) Frozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

// Readlink implements sys.FS: EINVAL (not a symlink) for any existing path,
// ENOENT for a missing one, as POSIX readlink does.
func (f *FS) Readlink(path string) (string, sys.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, _, errno := f.resolve(path); errno != 0 {
		return "", errno
	}
	return "", sys.EINVAL
}

// Utimens implements sys.FS. UTIME_OMIT keeps a timestamp.
func (f *FS) Utimens(path string, atim, mtim int64) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	n, _, errno := f.resolve(path)
	if errno != 0 {
		return errno
	}
	f.utimens(n, atim, mtim)
	return 0
}

func (f *FS) utimens(n *node, atim, mtim int64) {
	if atim != sys.UTIME_OMIT {
		n.atim = atim
	}
	if mtim != sys.UTIME_OMIT {
		n.mtim = mtim
	}
	n.ctim = f.nowNanos()
}

// sortedNames returns the names in d, sorted.
func sortedNames(d *node) []string {
	names := make([]string, 0, len(d.children))
	for name := range d.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
