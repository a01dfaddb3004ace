package vfs

import (
	"errors"
	"io/fs"
	"sort"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// FileInfo describes one workspace entry, as returned by Walk and List.
type FileInfo struct {
	Path    string      // slash-separated, relative to the workspace root, never empty
	Size    int64       // bytes, 0 for directories
	Mode    fs.FileMode // type bits | permission bits
	ModTime time.Time
}

// IsDir reports whether the entry is a directory.
func (i FileInfo) IsDir() bool { return i.Mode.IsDir() }

// ChangeKind says how a path differs from the baseline.
type ChangeKind int

const (
	Created  ChangeKind = iota + 1 // not in the baseline
	Modified                       // regular file whose content (or identity) changed
	Deleted                        // in the baseline, gone now
)

func (k ChangeKind) String() string {
	switch k {
	case Created:
		return "created"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return "ChangeKind(?)"
}

// Change is one entry of Changes.
type Change struct {
	Path  string
	Kind  ChangeKind
	Size  int64 // current size; 0 for Deleted and for directories
	IsDir bool  // the entry is (for Deleted: was) a directory
}

// baseEntry records a path's identity and content version at the baseline.
type baseEntry struct {
	ino     uint64
	version uint64
	dir     bool
}

func entryOf(n *node) baseEntry {
	return baseEntry{ino: n.ino, version: n.version, dir: n.isDir()}
}

// ---- host-side write/read ----

// WriteFile writes data to the file at path, creating missing parent
// directories (mode 0755) and the file (mode perm) as needed; an existing
// file is overwritten and keeps its mode, as os.WriteFile does. It is all or
// nothing: if the quotas cannot hold the result, nothing changes. What it
// writes becomes part of the change-tracking baseline, so seeding never shows
// up in Changes.
func (f *FS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts, _, errno := parsePath(path)
	if errno != 0 {
		return pathErr("write", path, errno)
	}
	if len(parts) == 0 {
		return pathErr("write", path, sys.EISDIR)
	}
	missing, errno := f.missingDirs(parts[:len(parts)-1])
	if errno != 0 {
		return pathErr("write", path, errno)
	}
	var old *node
	if missing == 0 {
		dir, _ := f.lookup(parts[:len(parts)-1])
		old = dir.children[parts[len(parts)-1]]
	}
	newFiles, oldLen := missing, int64(0)
	if old == nil {
		newFiles++
	} else if old.isDir() {
		return pathErr("write", path, sys.EISDIR)
	} else {
		oldLen = int64(len(old.data))
	}
	if errno := f.checkQuotas(newFiles, int64(len(data))-oldLen); errno != 0 {
		return pathErr("write", path, errno)
	}
	f.writeFileLocked(parts, data, perm)
	return nil
}

// checkQuotas checks, without charging, that addFiles more entries and
// deltaBytes more bytes fit.
func (f *FS) checkQuotas(addFiles int, deltaBytes int64) sys.Errno {
	if addFiles > 0 && f.usedFiles+addFiles > f.limits.MaxFiles {
		return EDQUOT
	}
	if deltaBytes > 0 && f.usedBytes+deltaBytes > f.limits.MaxBytes {
		return ENOSPC
	}
	return 0
}

// missingDirs counts the directories of parts that do not exist yet;
// ENOTDIR if one of them exists as a file.
func (f *FS) missingDirs(parts []string) (int, sys.Errno) {
	n := f.root
	for i, name := range parts {
		c, ok := n.children[name]
		if !ok {
			return len(parts) - i, 0
		}
		if !c.isDir() {
			return 0, sys.ENOTDIR
		}
		n = c
	}
	return 0, 0
}

// mkdirAllLocked creates the missing directories of parts (quota already
// checked) and records them in the baseline.
func (f *FS) mkdirAllLocked(parts []string, perm fs.FileMode) *node {
	n := f.root
	for i, name := range parts {
		c, ok := n.children[name]
		if !ok {
			c = f.newNode(fs.ModeDir | perm&fs.ModePerm)
			c.linked = true
			n.children[name] = c
			f.usedFiles++
			f.touchDir(n, c.ctim)
			f.baseline[joinParts(parts[:i+1])] = entryOf(c)
		}
		n = c
	}
	return n
}

// writeFileLocked does WriteFile's work once checks have passed.
func (f *FS) writeFileLocked(parts []string, data []byte, perm fs.FileMode) {
	dir := f.mkdirAllLocked(parts[:len(parts)-1], 0o755)
	name := parts[len(parts)-1]
	n := dir.children[name]
	if n == nil {
		n = f.newNode(perm & fs.ModePerm)
		n.linked = true
		dir.children[name] = n
		f.usedFiles++
		f.touchDir(dir, n.ctim)
	}
	f.usedBytes += int64(len(data)) - int64(len(n.data))
	n.data = append([]byte(nil), data...)
	f.touchContent(n)
	f.baseline[joinParts(parts)] = entryOf(n)
}

// MkdirAll creates the directory at path and any missing parents with mode
// perm. It is all or nothing with respect to the file-count quota. Created
// directories become part of the change-tracking baseline.
func (f *FS) MkdirAll(path string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts, _, errno := parsePath(path)
	if errno != 0 {
		return pathErr("mkdir", path, errno)
	}
	missing, errno := f.missingDirs(parts)
	if errno != 0 {
		return pathErr("mkdir", path, errno)
	}
	if errno := f.checkQuotas(missing, 0); errno != 0 {
		return pathErr("mkdir", path, errno)
	}
	f.mkdirAllLocked(parts, perm)
	return nil
}

// ReadFile returns a copy of the content of the file at path.
func (f *FS) ReadFile(path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _, errno := f.resolve(path)
	if errno != 0 {
		return nil, pathErr("read", path, errno)
	}
	if n.isDir() {
		return nil, pathErr("read", path, sys.EISDIR)
	}
	return append([]byte{}, n.data...), nil
}

// ---- listing ----

type walkNode struct {
	info     FileInfo
	children []*walkNode
}

func (f *FS) snapshotLocked(n *node, prefix string) []*walkNode {
	names := sortedNames(n)
	out := make([]*walkNode, 0, len(names))
	for _, name := range names {
		c := n.children[name]
		p := name
		if prefix != "" {
			p = prefix + "/" + name
		}
		w := &walkNode{info: FileInfo{Path: p, Size: int64(len(c.data)), Mode: c.mode, ModTime: time.Unix(0, c.mtim)}}
		if c.isDir() {
			w.children = f.snapshotLocked(c, p)
		}
		out = append(out, w)
	}
	return out
}

// Walk calls fn for every file and directory in the workspace (the root
// excluded), parents before children, names in lexical order, like
// fs.WalkDir. It works on a snapshot taken at the start, without holding the
// lock, so fn may call other methods of f. fn may return fs.SkipDir (skip a
// directory's contents, or the rest of a file's directory) or fs.SkipAll;
// any other error stops the walk and is returned as is.
func (f *FS) Walk(fn func(FileInfo) error) error {
	f.mu.Lock()
	tree := f.snapshotLocked(f.root, "")
	f.mu.Unlock()
	err := walkList(tree, fn)
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func walkList(list []*walkNode, fn func(FileInfo) error) error {
	for _, w := range list {
		err := fn(w.info)
		if err == nil && w.info.IsDir() {
			err = walkList(w.children, fn)
		}
		if err != nil {
			if errors.Is(err, fs.SkipDir) && w.info.IsDir() {
				continue
			}
			return err
		}
	}
	return nil
}

// List returns every file and directory in Walk order.
func (f *FS) List() []FileInfo {
	var out []FileInfo
	_ = f.Walk(func(i FileInfo) error {
		out = append(out, i)
		return nil
	})
	return out
}

// ---- change tracking ----

func (f *FS) indexLocked() map[string]*node {
	idx := map[string]*node{}
	var rec func(n *node, prefix string)
	rec = func(n *node, prefix string) {
		for name, c := range n.children {
			p := name
			if prefix != "" {
				p = prefix + "/" + name
			}
			idx[p] = c
			if c.isDir() {
				rec(c, p)
			}
		}
	}
	rec(f.root, "")
	return idx
}

// Mark makes the current state the baseline for Changes.
func (f *FS) Mark() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.baseline = map[string]baseEntry{}
	for p, n := range f.indexLocked() {
		f.baseline[p] = entryOf(n)
	}
}

// Changes lists, sorted by path, what differs from the baseline: the state
// at the last Mark (initially the empty workspace) plus everything written by
// WriteFile, MkdirAll and CopyIn since. A regular file is Modified when its
// content was written or truncated, or when another file was renamed over
// it; a rename shows as Deleted (old path) plus Created (new path).
// Directories are reported Created or Deleted, never Modified. A path whose
// type changed gets a Deleted and a Created entry, in that order.
func (f *FS) Changes() []Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changesLocked()
}

func (f *FS) changesLocked() []Change {
	var out []Change
	idx := f.indexLocked()
	for p, n := range idx {
		b, ok := f.baseline[p]
		switch {
		case !ok:
			out = append(out, changeOf(p, Created, n))
		case b.dir != n.isDir():
			out = append(out, Change{Path: p, Kind: Deleted, IsDir: b.dir}, changeOf(p, Created, n))
		case !n.isDir() && (b.ino != n.ino || b.version != n.version):
			out = append(out, changeOf(p, Modified, n))
		}
	}
	for p, b := range f.baseline {
		if _, ok := idx[p]; !ok {
			out = append(out, Change{Path: p, Kind: Deleted, IsDir: b.dir})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Kind == Deleted && out[j].Kind != Deleted
	})
	return out
}

func changeOf(p string, k ChangeKind, n *node) Change {
	return Change{Path: p, Kind: k, Size: int64(len(n.data)), IsDir: n.isDir()}
}

// ---- whole-FS operations ----

// Clone returns a deep copy: same contents, modes, timestamps, inode
// numbers, quotas, clock and baseline, sharing no memory with f. Open handles
// are not copied (files unlinked but still open in f are not in the clone).
func (f *FS) Clone() *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &FS{
		limits:   f.limits,
		now:      f.now,
		nextIno:  f.nextIno,
		version:  f.version,
		gen:      1,
		baseline: make(map[string]baseEntry, len(f.baseline)),
	}
	for p, b := range f.baseline {
		c.baseline[p] = b
	}
	c.root = c.cloneNode(f.root)
	return c
}

func (c *FS) cloneNode(n *node) *node {
	m := &node{
		ino: n.ino, mode: n.mode, atim: n.atim, mtim: n.mtim, ctim: n.ctim,
		version: n.version, linked: true,
	}
	if n.isDir() {
		m.children = make(map[string]*node, len(n.children))
		for name, ch := range n.children {
			m.children[name] = c.cloneNode(ch)
			c.usedFiles++
		}
	} else {
		m.data = append([]byte(nil), n.data...)
		c.usedBytes += int64(len(m.data))
	}
	return m
}

// Reset empties the workspace (root directory only) and the baseline,
// keeping the quotas and the clock. Handles opened before Reset fail with
// EBADF from then on.
func (f *FS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resetLocked()
}
