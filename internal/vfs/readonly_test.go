package vfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

// writeOpens are the opens a read-only mount must refuse, each with EROFS.
var writeOpens = map[string]sys.Oflag{
	"O_WRONLY":               sys.O_WRONLY,
	"O_RDWR":                 sys.O_RDWR,
	"O_RDONLY|O_CREAT":       sys.O_RDONLY | sys.O_CREAT,
	"O_RDONLY|O_TRUNC":       sys.O_RDONLY | sys.O_TRUNC,
	"O_RDONLY|O_CREAT|EXCL":  sys.O_RDONLY | sys.O_CREAT | sys.O_EXCL,
	"O_RDONLY|O_EXCL":        sys.O_RDONLY | sys.O_EXCL,
	"O_RDONLY|O_APPEND":      sys.O_RDONLY | sys.O_APPEND,
	"O_WRONLY|O_CREAT|TRUNC": sys.O_WRONLY | sys.O_CREAT | sys.O_TRUNC,
}

// mutations are the path operations a read-only mount must refuse with EROFS.
var mutations = map[string]func(sys.FS) sys.Errno{
	"mkdir":        func(f sys.FS) sys.Errno { return f.Mkdir("newdir", 0o755) },
	"mkdir exists": func(f sys.FS) sys.Errno { return f.Mkdir("dir", 0o755) },
	"rename":       func(f sys.FS) sys.Errno { return f.Rename("f.txt", "g.txt") },
	"rename dir":   func(f sys.FS) sys.Errno { return f.Rename("dir", "dir2") },
	"unlink":       func(f sys.FS) sys.Errno { return f.Unlink("f.txt") },
	"rmdir":        func(f sys.FS) sys.Errno { return f.Rmdir("empty") },
	"chmod":        func(f sys.FS) sys.Errno { return f.Chmod("f.txt", 0o777) },
	"utimens":      func(f sys.FS) sys.Errno { return f.Utimens("f.txt", 1, 1) },
	"link":         func(f sys.FS) sys.Errno { return f.Link("f.txt", "h.txt") },
	"symlink":      func(f sys.FS) sys.Errno { return f.Symlink("f.txt", "s.txt") },
}

// linuxReadOnlyOpen is what Linux answers to an open with write flags on a read-only mount (the seeded tree:
// f.txt and dir/a.txt are files, dir a directory, x.py and nodir/x.py missing): EISDIR for a directory asked for
// writing or creation, EEXIST for O_CREAT|O_EXCL on an existing path, ENOENT for a missing path without O_CREAT or
// with a missing parent, EROFS otherwise.
func linuxReadOnlyOpen(p string, flag sys.Oflag) sys.Errno {
	acc := flag & (sys.O_RDONLY | sys.O_RDWR | sys.O_WRONLY)
	writable, creat := acc != sys.O_RDONLY, flag&sys.O_CREAT != 0
	exists := p == "f.txt" || p == "dir" || p == "dir/a.txt"
	switch {
	case p == "dir" && (writable || creat):
		return sys.EISDIR
	case exists && creat && flag&sys.O_EXCL != 0:
		return sys.EEXIST
	case exists:
		return sys.EROFS
	case !creat || p == "nodir/x.py":
		return sys.ENOENT
	}
	return sys.EROFS
}

// checkReadOnly asserts that every write-ish open and operation on ro fails (with EROFS, or as Linux orders the
// errors on a read-only mount when linux is set: linuxReadOnlyOpen), that reads still work, and that nothing
// changed (checked through List of the FS below, when there is one).
func checkReadOnly(t *testing.T, ro sys.FS, below *FS, linux bool) {
	t.Helper()
	var before []FileInfo
	if below != nil {
		before = below.List()
	}
	for _, p := range []string{"f.txt", "x.py", "dir", "dir/a.txt", "nodir/x.py"} {
		for name, flag := range writeOpens {
			want := sys.EROFS
			if linux {
				want = linuxReadOnlyOpen(p, flag)
			} else if p == "nodir/x.py" {
				continue
			}
			if h, errno := ro.OpenFile(p, flag, 0o644); errno != want {
				if errno == 0 {
					h.Close()
				}
				t.Errorf("open %s %s: %v, want %v", p, name, errno, want)
			}
		}
	}
	for name, op := range mutations {
		if errno := op(ro); errno != sys.EROFS {
			t.Errorf("%s: %v, want EROFS", name, errno)
		}
	}
	h, errno := ro.OpenFile("f.txt", sys.O_RDONLY, 0)
	errnoOK(t, "open for reading", errno)
	buf := make([]byte, 16)
	if n, errno := h.Read(buf); errno != 0 || string(buf[:n]) != "hello" {
		t.Errorf("read %q %v", buf[:n], errno)
	}
	if _, errno := h.Write([]byte("x")); errno != sys.EBADF {
		t.Errorf("write on a read-only handle: %v, want EBADF", errno)
	}
	if _, errno := h.Pwrite([]byte("x"), 0); errno != sys.EBADF {
		t.Errorf("pwrite on a read-only handle: %v, want EBADF", errno)
	}
	if errno := h.Truncate(0); errno != sys.EBADF {
		t.Errorf("truncate on a read-only handle: %v, want EBADF", errno)
	}
	if errno := h.Utimens(1, 1); errno != sys.EROFS {
		t.Errorf("futimens on a read-only handle: %v, want EROFS", errno)
	}
	if errno := h.SetAppend(true); errno != sys.EROFS {
		t.Errorf("set append on a read-only handle: %v, want EROFS", errno)
	}
	errnoOK(t, "close", h.Close())
	d, errno := ro.OpenFile("dir", sys.O_RDONLY|sys.O_DIRECTORY, 0)
	errnoOK(t, "open dir", errno)
	if _, errno := d.Write([]byte("x")); errno != sys.EISDIR && errno != sys.EBADF {
		t.Errorf("write on a directory: %v, want EISDIR or EBADF", errno)
	}
	d.Close()
	if st, errno := ro.Stat("dir/a.txt"); errno != 0 || st.Size != 3 {
		t.Errorf("stat %+v %v", st, errno)
	}
	if below != nil {
		if got := fmtInfos(below.List()); got != fmtInfos(before) {
			t.Errorf("the FS below changed:\n%s\nwas\n%s", got, fmtInfos(before))
		}
	}
}

func fmtInfos(l []FileInfo) string {
	var b []byte
	for _, i := range l {
		b = append(b, i.Path...)
		b = append(b, ' ')
		b = append(b, i.Mode.String()...)
		b = append(b, ' ', byte('0'+i.Size%10), ' ')
		b = append(b, i.ModTime.String()...)
		b = append(b, '\n')
	}
	return string(b)
}

// A ReadOnly view refuses every write even though the FS below is writable (wazero's sysfs.ReadFS passed
// O_CREAT and O_TRUNC down to it).
func TestReadOnlyViewOfWritableFS(t *testing.T) {
	f := seeded(t, Limits{})
	checkReadOnly(t, ReadOnly(f, nil), f, true)
	// The view shows what the host does to the FS below.
	must(t, f.WriteFile("late.txt", []byte("x"), 0o644))
	if _, errno := ReadOnly(f, nil).Stat("late.txt"); errno != 0 {
		t.Errorf("host write not visible: %v", errno)
	}
}

// The same view over a read-only fs.FS adapted as the engines adapt the zip mounts.
func TestReadOnlyViewOfAdaptedFS(t *testing.T) {
	mfs := fstest.MapFS{
		"f.txt":     {Data: []byte("hello")},
		"dir/a.txt": {Data: []byte("aaa")},
		"empty":     {Mode: fs.ModeDir | 0o755},
	}
	checkReadOnly(t, ReadOnly(&sysfs.AdaptFS{FS: mfs}, nil), nil, true)
}

// wazero's own read-only wrapper lets O_CREAT and O_TRUNC through to a writable FS: the reason ReadOnly exists.
// If this starts failing, wazero fixed it; ReadOnly is still the one the engines use.
func TestWazeroReadFSPassesCreateDown(t *testing.T) {
	f := seeded(t, Limits{})
	h, errno := (&sysfs.ReadFS{FS: f}).OpenFile("x.py", sys.O_RDONLY|sys.O_CREAT, 0o644)
	if errno != 0 {
		t.Skipf("wazero's ReadFS now refuses O_CREAT (%v)", errno)
	}
	h.Close()
	if _, errno := f.Stat("x.py"); errno != 0 {
		t.Fatalf("created but not there: %v", errno)
	}
}

func TestFreeze(t *testing.T) {
	f := seeded(t, Limits{MaxOpenFiles: 4})
	w := open(t, f, "f.txt", sys.O_RDWR) // opened before Freeze, for writing
	f.Freeze()
	if !f.Frozen() {
		t.Fatal("not frozen")
	}
	checkReadOnly(t, f, f, false)
	// Handles opened for writing before Freeze cannot write any more.
	if _, errno := w.Write([]byte("x")); errno != sys.EROFS {
		t.Errorf("write: %v, want EROFS", errno)
	}
	if _, errno := w.Pwrite([]byte("x"), 0); errno != sys.EROFS {
		t.Errorf("pwrite: %v, want EROFS", errno)
	}
	if errno := w.Truncate(0); errno != sys.EROFS {
		t.Errorf("truncate: %v, want EROFS", errno)
	}
	if errno := w.Utimens(1, 1); errno != sys.EROFS {
		t.Errorf("futimens: %v, want EROFS", errno)
	}
	w.Close()
	// The host cannot change it either.
	before := fmtInfos(f.List())
	for name, err := range map[string]error{
		"WriteFile": f.WriteFile("f.txt", []byte("changed"), 0o644),
		"MkdirAll":  f.MkdirAll("new/dir", 0o755),
		"CopyIn":    f.CopyIn(context.Background(), hostTree(t)),
	} {
		if !errors.Is(err, sys.EROFS) {
			t.Errorf("%s on a frozen FS: %v, want EROFS", name, err)
		}
	}
	f.Reset()
	if got := fmtInfos(f.List()); got != before {
		t.Errorf("frozen FS changed:\n%s", got)
	}
	// Handles of a frozen FS are not counted (many guests share it; each bounds its own with an OpenLimit).
	var hs []sys.File
	for i := 0; i < 10; i++ {
		hs = append(hs, open(t, f, "f.txt", sys.O_RDONLY))
	}
	for _, h := range hs {
		h.Close()
	}
	// A clone is a new, writable FS.
	c := f.Clone()
	if c.Frozen() {
		t.Fatal("clone frozen")
	}
	must(t, c.WriteFile("f.txt", []byte("mine"), 0o644))
	if b, _ := f.ReadFile("f.txt"); string(b) != "hello" {
		t.Fatalf("clone write reached the original: %q", b)
	}
}

func hostTree(t *testing.T) string {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("x"), 0o644))
	return dir
}

// An open without write access never empties a file, even on a writable FS.
func TestReadOnlyOpenNeverTruncates(t *testing.T) {
	f := seeded(t, Limits{})
	if h, errno := f.OpenFile("f.txt", sys.O_RDONLY|sys.O_TRUNC, 0); errno != sys.EINVAL {
		if errno == 0 {
			h.Close()
		}
		t.Fatalf("O_RDONLY|O_TRUNC: %v, want EINVAL", errno)
	}
	if b, _ := f.ReadFile("f.txt"); string(b) != "hello" {
		t.Fatalf("file emptied: %q", b)
	}
}

// One OpenLimit bounds the handles of every mount it wraps, read-only and writable alike.
func TestOpenLimitAcrossMounts(t *testing.T) {
	frozen := seeded(t, Limits{})
	frozen.Freeze()
	ws := seeded(t, Limits{})
	adapted := &sysfs.AdaptFS{FS: fstest.MapFS{"f.txt": {Data: []byte("hello")}}}
	lim := NewOpenLimit(6)
	mounts := []sys.FS{ReadOnly(frozen, lim), Limited(ws, lim), ReadOnly(adapted, lim)}
	var hs []sys.File
	for i := 0; i < 6; i++ {
		h, errno := mounts[i%3].OpenFile("f.txt", sys.O_RDONLY, 0)
		errnoOK(t, "open", errno)
		hs = append(hs, h)
	}
	for k, m := range mounts {
		if h, errno := m.OpenFile("f.txt", sys.O_RDONLY, 0); errno != EMFILE {
			if errno == 0 {
				h.Close()
			}
			t.Errorf("mount %d: open past the limit: %v, want EMFILE", k, errno)
		}
	}
	// A failed open takes no slot; closing twice frees one slot only.
	if _, errno := mounts[1].OpenFile("missing", sys.O_RDONLY, 0); errno != EMFILE {
		t.Errorf("open of a missing file at the limit: %v", errno)
	}
	hs[0].Close()
	hs[0].Close()
	if lim.Open() != 5 {
		t.Errorf("open count %d after one close, want 5", lim.Open())
	}
	h, errno := mounts[2].OpenFile("f.txt", sys.O_RDONLY, 0)
	errnoOK(t, "open after a close", errno)
	if _, errno := mounts[0].OpenFile("f.txt", sys.O_RDONLY, 0); errno != EMFILE {
		t.Errorf("double close freed two slots: %v", errno)
	}
	h.Close()
	for _, h := range hs[1:] {
		h.Close()
	}
	if lim.Open() != 0 {
		t.Errorf("open count %d after closing everything", lim.Open())
	}
}
