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

// baseNode is one entry of the change-tracking baseline, a tree shaped like
// the FS (names, no full paths: Mark costs a small struct per entry, however
// deep the tree). present is false for a node that only holds entries the
// host seeded below a path that is not itself in the baseline; children may
// then be set on a node of any kind.
type baseNode struct {
	ino      uint64
	version  uint64
	dir      bool
	present  bool
	children map[string]*baseNode
}

func newBaseDir() *baseNode {
	return &baseNode{dir: true, present: true, children: map[string]*baseNode{}}
}

// baseOf copies the tree at n into a baseline.
func baseOf(n *node) *baseNode {
	b := &baseNode{ino: n.ino, version: n.version, dir: n.isDir(), present: true}
	if n.isDir() {
		b.children = make(map[string]*baseNode, len(n.children))
		for name, c := range n.children {
			b.children[name] = baseOf(c)
		}
	}
	return b
}

// setBase records n as the baseline entry at parts (non-empty).
func (f *FS) setBase(parts []string, n *node) {
	b := f.baseline
	for _, name := range parts {
		if b.children == nil {
			b.children = map[string]*baseNode{}
		}
		c := b.children[name]
		if c == nil {
			c = &baseNode{}
			b.children[name] = c
		}
		b = c
	}
	b.ino, b.version, b.dir, b.present = n.ino, n.version, n.isDir(), true
}

func cloneBase(b *baseNode) *baseNode {
	c := *b
	if b.children != nil {
		c.children = make(map[string]*baseNode, len(b.children))
		for name, ch := range b.children {
			c.children[name] = cloneBase(ch)
		}
	}
	return &c
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
	if f.frozen {
		return pathErr("write", path, sys.EROFS)
	}
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
			f.setBase(parts[:i+1], c)
		}
		n = c
	}
	if len(parts) > 0 {
		f.grow(parts, 0, 0)
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
	f.grow(parts, 0, 0)
	f.setBase(parts, n)
}

// MkdirAll creates the directory at path and any missing parents with mode
// perm. It is all or nothing with respect to the file-count quota. Created
// directories become part of the change-tracking baseline.
func (f *FS) MkdirAll(path string, perm fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return pathErr("mkdir", path, sys.EROFS)
	}
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

// Mark makes the current state the baseline for Changes.
func (f *FS) Mark() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.baseline = baseOf(f.root)
}

// Changes lists what differs from the baseline: the state at the last Mark
// (initially the empty workspace) plus everything written by WriteFile,
// MkdirAll and CopyIn since. A regular file is Modified when its content was
// written or truncated, or when another file was renamed over it; a rename
// shows as Deleted (old path) plus Created (new path). Directories are
// reported Created or Deleted, never Modified; a deleted directory's entries
// are reported deleted too. A path whose type changed gets a Deleted and a
// Created entry, in that order.
//
// The order is Walk's: parents before children, names in lexical order
// within a directory. There are at most twice MaxFiles entries, each path
// at most MaxPathLen bytes; ChangesN bounds the result further.
func (f *FS) Changes() []Change {
	out, _ := f.ChangesN(-1)
	return out
}

// ChangesN is Changes keeping only the first max entries (all of them when
// max < 0); total is the number of changes there are. Only the entries kept
// have their path built, so its cost is bounded by max, not by the tree.
func (f *FS) ChangesN(max int) (changes []Change, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diffLocked(func(c Change) bool {
		total++
		if max < 0 || len(changes) < max {
			changes = append(changes, c)
		}
		return true
	}, func() bool { return max < 0 || len(changes) < max })
	return changes, total
}

// diffLocked walks the tree and the baseline together and calls emit for
// every change in Changes order. wantPath reports whether the next change
// needs its Path (when false, emit gets an empty Path). emit returns false
// to stop.
func (f *FS) diffLocked(emit func(Change) bool, wantPath func() bool) {
	var buf []byte
	var walk func(cur map[string]*node, base map[string]*baseNode) bool
	walk = func(cur map[string]*node, base map[string]*baseNode) bool {
		names := make([]string, 0, len(cur)+len(base))
		for name := range cur {
			names = append(names, name)
		}
		for name := range base {
			if _, ok := cur[name]; !ok {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		mark := len(buf)
		for _, name := range names {
			buf = buf[:mark]
			if mark > 0 {
				buf = append(buf, '/')
			}
			buf = append(buf, name...)
			c, b := cur[name], base[name]
			inBase := b != nil && b.present
			send := func(ch Change) bool {
				if wantPath() {
					ch.Path = string(buf)
				}
				return emit(ch)
			}
			ok := true
			switch {
			case c == nil:
				if inBase {
					ok = send(Change{Kind: Deleted, IsDir: b.dir})
				}
			case !inBase:
				ok = send(changeOf(Created, c))
			case b.dir != c.isDir():
				ok = send(Change{Kind: Deleted, IsDir: b.dir}) && send(changeOf(Created, c))
			case !c.isDir() && (b.ino != c.ino || b.version != c.version):
				ok = send(changeOf(Modified, c))
			}
			if !ok {
				return false
			}
			var cc map[string]*node
			if c != nil && c.isDir() {
				cc = c.children
			}
			var bc map[string]*baseNode
			if b != nil {
				bc = b.children
			}
			if (len(cc) > 0 || len(bc) > 0) && !walk(cc, bc) {
				return false
			}
		}
		buf = buf[:mark]
		return true
	}
	walk(f.root.children, f.baseline.children)
}

func changeOf(k ChangeKind, n *node) Change {
	return Change{Kind: k, Size: int64(len(n.data)), IsDir: n.isDir()}
}

// ---- whole-FS operations ----

// Clone returns a deep copy: same contents, modes, timestamps, inode
// numbers, quotas, clock and baseline, sharing no memory with f. Open handles
// are not copied (files unlinked but still open in f are not in the clone).
// The clone of a frozen FS is not frozen.
func (f *FS) Clone() *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &FS{
		limits:   f.limits,
		now:      f.now,
		dev:      newDev(),
		nextIno:  f.nextIno,
		version:  f.version,
		gen:      1,
		baseline: cloneBase(f.baseline),
	}
	c.root = c.cloneNode(f.root)
	return c
}

func (c *FS) cloneNode(n *node) *node {
	m := &node{
		ino: n.ino, mode: n.mode, atim: n.atim, mtim: n.mtim, ctim: n.ctim,
		version: n.version, linked: true,
		height: n.height, extent: n.extent, stale: n.stale,
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
// EBADF from then on. It does nothing on a frozen FS.
func (f *FS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.resetLocked()
	}
}
