// Package zipfs serves a zip archive as a read-only fs.FS whose files are seekable.
//
// archive/zip's own fs.FS returns unseekable files for deflated entries, and CPython seeks (zoneinfo, io.open's
// tell(), linecache...). Here every file is decompressed once, on first open, and cached for the life of the FS,
// which is shared by every sandbox of a process; directories are listed from the zip's entries.
package zipfs

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// FS is a read-only, seekable view of a zip archive. It is safe for concurrent use.
type FS struct {
	files map[string]*zip.File
	dirs  map[string][]fs.DirEntry
	mu    sync.Mutex
	cache map[string][]byte
}

// New indexes the archive.
func New(zr *zip.Reader) (*FS, error) {
	f := &FS{files: map[string]*zip.File{}, dirs: map[string][]fs.DirEntry{".": nil}, cache: map[string][]byte{}}
	children := map[string]map[string]fs.DirEntry{".": {}}
	addDir := func(p string) {
		for ; p != "."; p = path.Dir(p) {
			if _, ok := children[p]; !ok {
				children[p] = map[string]fs.DirEntry{}
			}
			parent := path.Dir(p)
			if _, ok := children[parent]; !ok {
				children[parent] = map[string]fs.DirEntry{}
			}
			if _, linked := children[parent][path.Base(p)]; linked {
				return
			}
			children[parent][path.Base(p)] = dirEntry{name: path.Base(p)}
		}
	}
	for _, zf := range zr.File {
		name := strings.TrimSuffix(zf.Name, "/")
		if name == "" || !fs.ValidPath(name) {
			return nil, fmt.Errorf("zipfs: invalid entry name %q", zf.Name)
		}
		if strings.HasSuffix(zf.Name, "/") {
			addDir(name)
			continue
		}
		addDir(path.Dir(name))
		f.files[name] = zf
		children[path.Dir(name)][path.Base(name)] = fileInfo{name: path.Base(name), size: int64(zf.UncompressedSize64), mod: zf.Modified}
	}
	for d, m := range children {
		list := make([]fs.DirEntry, 0, len(m))
		for _, e := range m {
			list = append(list, e)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name() < list[j].Name() })
		f.dirs[d] = list
	}
	return f, nil
}

// Open implements fs.FS.
func (f *FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if list, ok := f.dirs[name]; ok {
		return &dir{info: dirEntry{name: path.Base(name)}, entries: list}, nil
	}
	zf, ok := f.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	data, err := f.read(name, zf)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{Reader: bytes.NewReader(data), info: fileInfo{name: path.Base(name), size: int64(len(data)), mod: zf.Modified}}, nil
}

func (f *FS) read(name string, zf *zip.File) ([]byte, error) {
	f.mu.Lock()
	data, ok := f.cache[name]
	f.mu.Unlock()
	if ok {
		return data, nil
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err = io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.cache[name] = data
	f.mu.Unlock()
	return data, nil
}

type file struct {
	*bytes.Reader
	info fileInfo
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type dir struct {
	info    dirEntry
	entries []fs.DirEntry
	off     int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *dir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return append([]fs.DirEntry(nil), rest...), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return append([]fs.DirEntry(nil), rest[:n]...), nil
}

type fileInfo struct {
	name string
	size int64
	mod  time.Time
}

func (i fileInfo) Name() string               { return i.name }
func (i fileInfo) Size() int64                { return i.size }
func (i fileInfo) Mode() fs.FileMode          { return 0o444 }
func (i fileInfo) ModTime() time.Time         { return i.mod }
func (i fileInfo) IsDir() bool                { return false }
func (i fileInfo) Sys() any                   { return nil }
func (i fileInfo) Type() fs.FileMode          { return 0 }
func (i fileInfo) Info() (fs.FileInfo, error) { return i, nil }

type dirEntry struct{ name string }

func (d dirEntry) Name() string               { return d.name }
func (d dirEntry) Size() int64                { return 0 }
func (d dirEntry) Mode() fs.FileMode          { return fs.ModeDir | 0o555 }
func (d dirEntry) ModTime() time.Time         { return time.Time{} }
func (d dirEntry) IsDir() bool                { return true }
func (d dirEntry) Sys() any                   { return nil }
func (d dirEntry) Type() fs.FileMode          { return fs.ModeDir }
func (d dirEntry) Info() (fs.FileInfo, error) { return d, nil }
