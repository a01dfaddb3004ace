package wheels

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"sync"
	"time"
)

// MemLayer is an in-memory, append-only Layer that is also a read-only fs.FS (with ReadDir, ReadFile and Stat),
// so it can be mounted as the sandbox's /packages directly. The zero value is an empty layer. It is safe for
// concurrent use: Install can add to it while sandboxes read it.
//
// Append-only: a file, once written, never changes. WriteFile of an existing path succeeds when the content is
// identical and otherwise fails with an error matching fs.ErrExist; so a running sandbox never sees a file
// change under it. Paths follow fs.ValidPath. Modification times are the zero time.
type MemLayer struct {
	mu    sync.RWMutex
	nodes map[string]*memNode // by path; "." is the root
}

type memNode struct {
	name     string
	mode     fs.FileMode
	data     []byte   // files; never modified once stored
	children []string // directories; sorted names
}

func (m *MemLayer) init() {
	if m.nodes == nil {
		m.nodes = map[string]*memNode{".": {name: ".", mode: fs.ModeDir | 0o755}}
	}
}

var errNotDir = errors.New("not a directory")

// mkdirAllLocked creates p and its parents; p is valid.
func (m *MemLayer) mkdirAllLocked(op, p string, perm fs.FileMode) error {
	if p == "." {
		return nil
	}
	if n := m.nodes[p]; n != nil {
		if n.mode.IsDir() {
			return nil
		}
		return &fs.PathError{Op: op, Path: p, Err: errNotDir}
	}
	parent := path.Dir(p)
	if err := m.mkdirAllLocked(op, parent, perm); err != nil {
		return err
	}
	m.link(parent, p, &memNode{name: path.Base(p), mode: fs.ModeDir | perm&fs.ModePerm})
	return nil
}

func (m *MemLayer) link(parent, p string, n *memNode) {
	dir := m.nodes[parent]
	i, _ := slices.BinarySearch(dir.children, n.name)
	dir.children = slices.Insert(dir.children, i, n.name)
	m.nodes[p] = n
}

// MkdirAll creates the directory path and any missing parents.
func (m *MemLayer) MkdirAll(p string, perm fs.FileMode) error {
	if !fs.ValidPath(p) {
		return &fs.PathError{Op: "mkdir", Path: p, Err: fs.ErrInvalid}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	return m.mkdirAllLocked("mkdir", p, perm)
}

// WriteFile creates the file path with a copy of data, creating missing parent directories (mode 0755). If the
// file exists with the same content it does nothing; with other content it fails (fs.ErrExist).
func (m *MemLayer) WriteFile(p string, data []byte, perm fs.FileMode) error {
	if !fs.ValidPath(p) || p == "." {
		return &fs.PathError{Op: "write", Path: p, Err: fs.ErrInvalid}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if n := m.nodes[p]; n != nil {
		switch {
		case n.mode.IsDir():
			return &fs.PathError{Op: "write", Path: p, Err: errors.New("is a directory")}
		case bytes.Equal(n.data, data):
			return nil
		}
		return &fs.PathError{Op: "write", Path: p, Err: errAppendOnly}
	}
	parent := path.Dir(p)
	if err := m.mkdirAllLocked("write", parent, 0o755); err != nil {
		return err
	}
	m.link(parent, p, &memNode{name: path.Base(p), mode: perm & fs.ModePerm, data: bytes.Clone(data)})
	return nil
}

var errAppendOnly = appendOnlyError{}

type appendOnlyError struct{}

func (appendOnlyError) Error() string {
	return "file exists with other content (the layer is append-only)"
}
func (appendOnlyError) Is(target error) bool { return target == fs.ErrExist }

func (m *MemLayer) lookup(op, name string) (*memNode, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if name == "." && m.nodes == nil {
		return &memNode{name: ".", mode: fs.ModeDir | 0o755}, nil
	}
	n := m.nodes[name]
	if n == nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	c := *n
	c.children = slices.Clone(n.children) // a snapshot: the directory may grow
	return &c, nil
}

// Open opens the named file or directory for reading (fs.FS).
func (m *MemLayer) Open(name string) (fs.File, error) {
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.mode.IsDir() {
		return &memDir{layer: m, path: name, n: n}, nil
	}
	return &memFile{n: n, r: bytes.NewReader(n.data)}, nil
}

// ReadFile returns the content of the named file (fs.ReadFileFS); the caller may modify it.
func (m *MemLayer) ReadFile(name string) ([]byte, error) {
	n, err := m.lookup("read", name)
	if err != nil {
		return nil, err
	}
	if n.mode.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return bytes.Clone(n.data), nil
}

// ReadDir lists the named directory, sorted by name (fs.ReadDirFS).
func (m *MemLayer) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.mode.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	return m.entries(name, n.children), nil
}

// Stat describes the named file or directory (fs.StatFS).
func (m *MemLayer) Stat(name string) (fs.FileInfo, error) {
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{n}, nil
}

func (m *MemLayer) entries(dir string, names []string) []fs.DirEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]fs.DirEntry, 0, len(names))
	for _, c := range names {
		p := c
		if dir != "." {
			p = dir + "/" + c
		}
		if n := m.nodes[p]; n != nil {
			out = append(out, memInfo{&memNode{name: n.name, mode: n.mode, data: n.data}})
		}
	}
	return out
}

// Paths returns the path of every file in the layer, sorted.
func (m *MemLayer) Paths() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for p, n := range m.nodes {
		if !n.mode.IsDir() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// memInfo is both the fs.FileInfo and the fs.DirEntry of a node.
type memInfo struct{ n *memNode }

func (i memInfo) Name() string               { return i.n.name }
func (i memInfo) Size() int64                { return int64(len(i.n.data)) }
func (i memInfo) Mode() fs.FileMode          { return i.n.mode }
func (i memInfo) ModTime() time.Time         { return time.Time{} }
func (i memInfo) IsDir() bool                { return i.n.mode.IsDir() }
func (i memInfo) Sys() any                   { return nil }
func (i memInfo) Type() fs.FileMode          { return i.n.mode.Type() }
func (i memInfo) Info() (fs.FileInfo, error) { return i, nil }
func (i memInfo) String() string             { return fs.FormatFileInfo(i) }

type memFile struct {
	n      *memNode
	r      *bytes.Reader
	closed bool
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f.n}, nil }

func (f *memFile) Read(b []byte) (int, error) {
	if f.closed {
		return 0, fs.ErrClosed
	}
	return f.r.Read(b)
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	if f.closed {
		return 0, fs.ErrClosed
	}
	return f.r.ReadAt(b, off)
}

func (f *memFile) Seek(off int64, whence int) (int64, error) {
	if f.closed {
		return 0, fs.ErrClosed
	}
	return f.r.Seek(off, whence)
}

func (f *memFile) Close() error {
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

type memDir struct {
	layer  *MemLayer
	path   string
	n      *memNode
	off    int
	closed bool
}

func (d *memDir) Stat() (fs.FileInfo, error) { return memInfo{d.n}, nil }

func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: errors.New("is a directory")}
}

func (d *memDir) Close() error {
	if d.closed {
		return fs.ErrClosed
	}
	d.closed = true
	return nil
}

// ReadDir reads the directory as it was when opened (fs.ReadDirFile).
func (d *memDir) ReadDir(count int) ([]fs.DirEntry, error) {
	if d.closed {
		return nil, fs.ErrClosed
	}
	rest := d.n.children[d.off:]
	if count > 0 && len(rest) > count {
		rest = rest[:count]
	}
	if count > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	d.off += len(rest)
	return d.layer.entries(d.path, rest), nil
}

var _ interface {
	Layer
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
} = (*MemLayer)(nil)
