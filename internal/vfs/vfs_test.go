package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/experimental/sys"
)

var epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func fixedClock() func() time.Time { return func() time.Time { return epoch } }

// seeded returns an FS with: dir/, dir/sub/, dir/a.txt ("aaa"), empty/, f.txt ("hello").
func seeded(t testing.TB, l Limits) *FS {
	t.Helper()
	f := New(l, WithClock(fixedClock()))
	must(t, f.WriteFile("dir/a.txt", []byte("aaa"), 0o644))
	must(t, f.MkdirAll("dir/sub", 0o755))
	must(t, f.MkdirAll("empty", 0o755))
	must(t, f.WriteFile("f.txt", []byte("hello"), 0o644))
	return f
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func errnoOK(t testing.TB, what string, got sys.Errno) {
	t.Helper()
	if got != 0 {
		t.Fatalf("%s: %v", what, got)
	}
}

func open(t testing.TB, f *FS, p string, flag sys.Oflag) sys.File {
	t.Helper()
	h, errno := f.OpenFile(p, flag, 0o644)
	errnoOK(t, "open "+p, errno)
	return h
}

func openErr(p string, flag sys.Oflag) func(*FS) sys.Errno {
	return func(f *FS) sys.Errno {
		h, errno := f.OpenFile(p, flag, 0o644)
		if errno == 0 {
			h.Close()
		}
		return errno
	}
}

func TestPOSIXTable(t *testing.T) {
	const (
		rd, wr, rw = sys.O_RDONLY, sys.O_WRONLY, sys.O_RDWR
		cr, ex, tr = sys.O_CREAT, sys.O_EXCL, sys.O_TRUNC
		dr         = sys.O_DIRECTORY
	)
	tests := []struct {
		name string
		op   func(*FS) sys.Errno
		want sys.Errno
	}{
		{"open missing", openErr("nope", rd), sys.ENOENT},
		{"open create", openErr("new", wr|cr), 0},
		{"open create excl existing", openErr("f.txt", wr|cr|ex), sys.EEXIST},
		{"open create excl dir", openErr("dir", wr|cr|ex), sys.EEXIST},
		{"open create excl root", openErr(".", rd|cr|ex), sys.EEXIST},
		{"open dir read", openErr("dir", rd), 0},
		{"open dir O_DIRECTORY", openErr("dir", rd|dr), 0},
		{"open root", openErr(".", rd|dr), 0},
		{"open root empty path", openErr("", rd|dr), 0},
		{"open dir write", openErr("dir", wr), sys.EISDIR},
		{"open dir rdwr", openErr("dir", rw), sys.EISDIR},
		{"open dir trunc", openErr("dir", rd|tr), sys.EISDIR},
		{"open file O_DIRECTORY", openErr("f.txt", rd|dr), sys.ENOTDIR},
		{"open file trailing slash", openErr("f.txt/", rd), sys.ENOTDIR},
		{"open create trailing slash", openErr("newdir/", wr|cr), sys.EISDIR},
		{"open create O_DIRECTORY", openErr("newdir", rd|cr|dr), sys.EINVAL},
		{"open missing parent", openErr("nodir/x", wr|cr), sys.ENOENT},
		{"open through file", openErr("f.txt/x", wr|cr), sys.ENOTDIR},
		{"open name too long", openErr(strings.Repeat("n", 256), wr|cr), sys.ENAMETOOLONG},
		{"open path too long", openErr(strings.Repeat("d/", 2049), rd), sys.ENAMETOOLONG},
		{"open name 255 ok", openErr(strings.Repeat("n", 255), wr|cr), 0},

		{"mkdir new", func(f *FS) sys.Errno { return f.Mkdir("dir/new", 0o755) }, 0},
		{"mkdir existing dir", func(f *FS) sys.Errno { return f.Mkdir("dir", 0o755) }, sys.EEXIST},
		{"mkdir existing file", func(f *FS) sys.Errno { return f.Mkdir("f.txt", 0o755) }, sys.EEXIST},
		{"mkdir root", func(f *FS) sys.Errno { return f.Mkdir(".", 0o755) }, sys.EEXIST},
		{"mkdir missing parent", func(f *FS) sys.Errno { return f.Mkdir("x/y", 0o755) }, sys.ENOENT},
		{"mkdir under file", func(f *FS) sys.Errno { return f.Mkdir("f.txt/y", 0o755) }, sys.ENOTDIR},
		{"mkdir trailing slash", func(f *FS) sys.Errno { return f.Mkdir("nd/", 0o755) }, 0},

		{"rmdir empty", func(f *FS) sys.Errno { return f.Rmdir("empty") }, 0},
		{"rmdir empty slash", func(f *FS) sys.Errno { return f.Rmdir("empty/") }, 0},
		{"rmdir non-empty", func(f *FS) sys.Errno { return f.Rmdir("dir") }, sys.ENOTEMPTY},
		{"rmdir file", func(f *FS) sys.Errno { return f.Rmdir("f.txt") }, sys.ENOTDIR},
		{"rmdir missing", func(f *FS) sys.Errno { return f.Rmdir("nope") }, sys.ENOENT},
		{"rmdir root", func(f *FS) sys.Errno { return f.Rmdir(".") }, sys.EINVAL},

		{"unlink file", func(f *FS) sys.Errno { return f.Unlink("f.txt") }, 0},
		{"unlink dir", func(f *FS) sys.Errno { return f.Unlink("dir") }, sys.EISDIR},
		{"unlink root", func(f *FS) sys.Errno { return f.Unlink("/") }, sys.EISDIR},
		{"unlink missing", func(f *FS) sys.Errno { return f.Unlink("nope") }, sys.ENOENT},
		{"unlink file slash", func(f *FS) sys.Errno { return f.Unlink("f.txt/") }, sys.ENOTDIR},

		{"rename file to new", func(f *FS) sys.Errno { return f.Rename("f.txt", "dir/g.txt") }, 0},
		{"rename file over file", func(f *FS) sys.Errno { return f.Rename("f.txt", "dir/a.txt") }, 0},
		{"rename file over dir", func(f *FS) sys.Errno { return f.Rename("f.txt", "empty") }, sys.EISDIR},
		{"rename dir over file", func(f *FS) sys.Errno { return f.Rename("empty", "f.txt") }, sys.ENOTDIR},
		{"rename dir over non-empty dir", func(f *FS) sys.Errno { return f.Rename("empty", "dir") }, sys.ENOTEMPTY},
		{"rename dir over empty dir", func(f *FS) sys.Errno { return f.Rename("dir/sub", "empty") }, 0},
		{"rename dir into itself", func(f *FS) sys.Errno { return f.Rename("dir", "dir/sub/x") }, sys.EINVAL},
		{"rename dir to itself", func(f *FS) sys.Errno { return f.Rename("dir", "dir") }, 0},
		{"rename missing", func(f *FS) sys.Errno { return f.Rename("nope", "x") }, sys.ENOENT},
		{"rename to missing parent", func(f *FS) sys.Errno { return f.Rename("f.txt", "no/x") }, sys.ENOENT},
		{"rename to under file", func(f *FS) sys.Errno { return f.Rename("dir", "f.txt/x") }, sys.ENOTDIR},
		{"rename root", func(f *FS) sys.Errno { return f.Rename(".", "x") }, sys.EINVAL},
		{"rename onto root", func(f *FS) sys.Errno { return f.Rename("empty", "/") }, sys.EINVAL},
		{"rename file slash", func(f *FS) sys.Errno { return f.Rename("f.txt/", "x") }, sys.ENOTDIR},

		{"symlink", func(f *FS) sys.Errno { return f.Symlink("/etc/passwd", "link") }, sys.EPERM},
		{"symlink relative", func(f *FS) sys.Errno { return f.Symlink("f.txt", "link") }, sys.EPERM},
		{"link", func(f *FS) sys.Errno { return f.Link("f.txt", "hard") }, sys.EPERM},
		{"readlink file", func(f *FS) sys.Errno { _, e := f.Readlink("f.txt"); return e }, sys.EINVAL},
		{"readlink missing", func(f *FS) sys.Errno { _, e := f.Readlink("nope"); return e }, sys.ENOENT},

		{"chmod", func(f *FS) sys.Errno { return f.Chmod("f.txt", 0o400) }, 0},
		{"chmod missing", func(f *FS) sys.Errno { return f.Chmod("nope", 0o400) }, sys.ENOENT},
		{"utimens", func(f *FS) sys.Errno { return f.Utimens("dir", 1, 2) }, 0},
		{"utimens missing", func(f *FS) sys.Errno { return f.Utimens("nope", 1, 2) }, sys.ENOENT},
		{"stat missing", func(f *FS) sys.Errno { _, e := f.Stat("nope"); return e }, sys.ENOENT},
		{"lstat dir", func(f *FS) sys.Errno { _, e := f.Lstat("dir/"); return e }, 0},
		{"stat file slash", func(f *FS) sys.Errno { _, e := f.Stat("f.txt/"); return e }, sys.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := seeded(t, Limits{})
			if got := tt.op(f); got != tt.want {
				t.Fatalf("got %v (%d), want %v (%d)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestRenameEffects(t *testing.T) {
	f := seeded(t, Limits{})
	errnoOK(t, "rename", f.Rename("f.txt", "dir/a.txt"))
	if b, _ := f.ReadFile("dir/a.txt"); string(b) != "hello" {
		t.Fatalf("dir/a.txt = %q", b)
	}
	if _, e := f.Stat("f.txt"); e != sys.ENOENT {
		t.Fatalf("old name: %v", e)
	}
	if used, files := f.Usage(); used != 5 || files != 4 {
		t.Fatalf("usage %d bytes %d files, want 5, 4", used, files)
	}
	// Directory rename moves the subtree.
	errnoOK(t, "rename dir", f.Rename("dir", "empty/moved"))
	if b, _ := f.ReadFile("empty/moved/a.txt"); string(b) != "hello" {
		t.Fatalf("moved = %q", b)
	}
	// A handle follows its node across a rename.
	h := open(t, f, "empty/moved/a.txt", sys.O_RDWR)
	defer h.Close()
	errnoOK(t, "rename again", f.Rename("empty/moved/a.txt", "z.txt"))
	if _, e := h.Write([]byte("J")); e != 0 {
		t.Fatal(e)
	}
	if b, _ := f.ReadFile("z.txt"); string(b) != "Jello" {
		t.Fatalf("z.txt = %q", b)
	}
}

func TestFileIO(t *testing.T) {
	f := New(Limits{}, WithClock(fixedClock()))
	h := open(t, f, "x", sys.O_RDWR|sys.O_CREAT)
	if n, e := h.Write([]byte("hello world")); n != 11 || e != 0 {
		t.Fatal(n, e)
	}
	if off, e := h.Seek(0, io.SeekCurrent); off != 11 || e != 0 {
		t.Fatal(off, e)
	}
	if off, e := h.Seek(-5, io.SeekEnd); off != 6 || e != 0 {
		t.Fatal(off, e)
	}
	buf := make([]byte, 10)
	if n, e := h.Read(buf); n != 5 || e != 0 || string(buf[:n]) != "world" {
		t.Fatal(n, e, string(buf[:n]))
	}
	if n, e := h.Read(buf); n != 0 || e != 0 {
		t.Fatal("read at EOF", n, e)
	}
	if n, e := h.Pread(buf[:5], 0); n != 5 || e != 0 || string(buf[:5]) != "hello" {
		t.Fatal(n, e)
	}
	if _, e := h.Pread(buf, -1); e != sys.EINVAL {
		t.Fatal("pread -1", e)
	}
	if _, e := h.Seek(-100, io.SeekCurrent); e != sys.EINVAL {
		t.Fatal("seek negative", e)
	}
	if _, e := h.Seek(0, 7); e != sys.EINVAL {
		t.Fatal("bad whence", e)
	}
	// pwrite past EOF leaves a zero-filled hole and does not move the offset.
	if n, e := h.Pwrite([]byte("!"), 14); n != 1 || e != 0 {
		t.Fatal(n, e)
	}
	if b, _ := f.ReadFile("x"); string(b) != "hello world\x00\x00\x00!" {
		t.Fatalf("%q", b)
	}
	if off, _ := h.Seek(0, io.SeekCurrent); off != 11 {
		t.Fatal("pwrite moved offset to", off)
	}
	// Shrink then grow: the regrown part must read as zeros.
	errnoOK(t, "truncate 2", h.Truncate(2))
	errnoOK(t, "truncate 6", h.Truncate(6))
	if b, _ := f.ReadFile("x"); string(b) != "he\x00\x00\x00\x00" {
		t.Fatalf("%q", b)
	}
	if e := h.Truncate(-1); e != sys.EINVAL {
		t.Fatal("truncate -1", e)
	}
	errnoOK(t, "sync", h.Sync())
	errnoOK(t, "datasync", h.Datasync())
	st, e := h.Stat()
	errnoOK(t, "fstat", e)
	if st.Size != 6 || st.Mode != 0o644 || st.Nlink != 1 || st.Ino == 0 || st.Dev == 0 || st.Mtim != epoch.UnixNano() {
		t.Fatalf("stat %+v", st)
	}
	if ino, _ := h.Ino(); ino != st.Ino {
		t.Fatal("ino mismatch")
	}
	errnoOK(t, "close", h.Close())
	errnoOK(t, "close twice", h.Close())
	if _, e := h.Read(buf); e != sys.EBADF {
		t.Fatal("read after close", e)
	}
	if _, e := h.Write(buf); e != sys.EBADF {
		t.Fatal("write after close", e)
	}
	if _, e := h.Stat(); e != sys.EBADF {
		t.Fatal("stat after close", e)
	}

	// O_APPEND writes at the end whatever the offset.
	a := open(t, f, "x", sys.O_WRONLY|sys.O_APPEND)
	if !a.IsAppend() {
		t.Fatal("IsAppend")
	}
	a.Seek(0, io.SeekStart)
	a.Write([]byte("AB"))
	if b, _ := f.ReadFile("x"); string(b) != "he\x00\x00\x00\x00AB" {
		t.Fatalf("append: %q", b)
	}
	errnoOK(t, "SetAppend", a.SetAppend(false))
	a.Seek(0, io.SeekStart)
	a.Write([]byte("H"))
	if b, _ := f.ReadFile("x"); string(b) != "He\x00\x00\x00\x00AB" {
		t.Fatalf("after SetAppend(false): %q", b)
	}
	if _, e := a.Read(buf); e != sys.EBADF {
		t.Fatal("read on O_WRONLY", e)
	}
	a.Close()

	r := open(t, f, "x", sys.O_RDONLY)
	if _, e := r.Write([]byte("x")); e != sys.EBADF {
		t.Fatal("write on O_RDONLY", e)
	}
	if _, e := r.Pwrite([]byte("x"), 0); e != sys.EBADF {
		t.Fatal("pwrite on O_RDONLY", e)
	}
	if e := r.Truncate(0); e != sys.EBADF {
		t.Fatal("truncate on O_RDONLY", e)
	}
	r.Close()

	// O_TRUNC empties.
	tr := open(t, f, "x", sys.O_WRONLY|sys.O_TRUNC)
	tr.Close()
	if b, _ := f.ReadFile("x"); len(b) != 0 {
		t.Fatalf("after O_TRUNC: %q", b)
	}

	// Directory handles.
	d := open(t, f, ".", sys.O_RDONLY)
	if isDir, _ := d.IsDir(); !isDir {
		t.Fatal("root not dir")
	}
	if _, e := d.Read(buf); e != sys.EISDIR {
		t.Fatal("read dir", e)
	}
	if _, e := d.Write(buf); e != sys.EBADF {
		t.Fatal("write dir", e)
	}
	if _, e := d.Pwrite(buf, 0); e != sys.EISDIR {
		t.Fatal("pwrite dir", e)
	}
	if e := d.Truncate(0); e != sys.EISDIR {
		t.Fatal("truncate dir", e)
	}
	if _, e := d.Seek(3, io.SeekStart); e != sys.EISDIR {
		t.Fatal("seek dir", e)
	}
	d.Close()
}

func TestStatAndTimes(t *testing.T) {
	now := epoch
	f := New(Limits{}, WithClock(func() time.Time { return now }))
	must(t, f.WriteFile("d/x", []byte("abc"), 0o600))
	st, e := f.Stat("d/x")
	errnoOK(t, "stat", e)
	if st.Size != 3 || st.Mode != 0o600 || st.Mtim != epoch.UnixNano() || st.Atim != st.Mtim || st.Ctim != st.Mtim {
		t.Fatalf("%+v", st)
	}
	dst, _ := f.Stat("d")
	if !dst.Mode.IsDir() || dst.Mode.Perm() != 0o755 || dst.Nlink != 2 {
		t.Fatalf("dir %+v", dst)
	}
	root, _ := f.Stat("/")
	if root.Nlink != 3 || root.Ino != 1 {
		t.Fatalf("root %+v", root)
	}
	if dst.Ino == st.Ino || root.Ino == dst.Ino {
		t.Fatal("inodes not distinct")
	}
	errnoOK(t, "chmod", f.Chmod("d/x", 0o4755|fs.ModeSetuid))
	st, _ = f.Stat("d/x")
	if st.Mode != 0o755 {
		t.Fatalf("mode after chmod: %v", st.Mode)
	}
	now = epoch.Add(time.Hour)
	errnoOK(t, "utimens", f.Utimens("d/x", sys.UTIME_OMIT, 42))
	st, _ = f.Stat("d/x")
	if st.Mtim != 42 || st.Atim != epoch.UnixNano() || st.Ctim != now.UnixNano() {
		t.Fatalf("times %+v", st)
	}
	h := open(t, f, "d/x", sys.O_WRONLY)
	errnoOK(t, "futimens", h.Utimens(7, sys.UTIME_OMIT))
	h.Write([]byte("z"))
	h.Close()
	st, _ = f.Stat("d/x")
	if st.Atim != 7 || st.Mtim != now.UnixNano() {
		t.Fatalf("times after write %+v", st)
	}
	// Creating an entry updates the directory's mtime.
	now = epoch.Add(2 * time.Hour)
	errnoOK(t, "mkdir", f.Mkdir("d/y", 0o700))
	dst, _ = f.Stat("d")
	if dst.Mtim != now.UnixNano() || dst.Nlink != 3 {
		t.Fatalf("dir after mkdir %+v", dst)
	}
}

func TestReaddir(t *testing.T) {
	f := seeded(t, Limits{})
	must(t, f.WriteFile("dir/b.txt", nil, 0o644))
	d := open(t, f, "dir", sys.O_RDONLY|sys.O_DIRECTORY)
	defer d.Close()
	first, e := d.Readdir(2)
	errnoOK(t, "readdir", e)
	rest, e := d.Readdir(-1)
	errnoOK(t, "readdir rest", e)
	var names []string
	for _, de := range append(first, rest...) {
		names = append(names, fmt.Sprintf("%s:%v:%t", de.Name, de.Type, de.Ino != 0))
	}
	if got := strings.Join(names, " "); got != "a.txt:----------:true b.txt:----------:true sub:d---------:true" {
		t.Fatal(got)
	}
	if more, _ := d.Readdir(10); len(more) != 0 {
		t.Fatal("not exhausted", more)
	}
	// Rewind sees new entries.
	must(t, f.WriteFile("dir/c.txt", nil, 0o644))
	if _, e := d.Seek(0, io.SeekStart); e != 0 {
		t.Fatal(e)
	}
	all, _ := d.Readdir(0)
	if len(all) != 4 {
		t.Fatal(all)
	}
	// Readdir of a removed directory.
	e2 := open(t, f, "empty", sys.O_RDONLY)
	errnoOK(t, "rmdir", f.Rmdir("empty"))
	if _, e := e2.Readdir(1); e != sys.ENOENT {
		t.Fatal("readdir removed dir", e)
	}
	e2.Close()
	// Readdir on a file.
	fh := open(t, f, "f.txt", sys.O_RDONLY)
	if _, e := fh.Readdir(1); e != sys.EBADF {
		t.Fatal("readdir file", e)
	}
	fh.Close()
}

func TestPathEscape(t *testing.T) {
	for _, p := range []string{"..", "../..", "../etc/passwd", "a/../../b", "./../x", "dir/../../x", "/../x"} {
		f := seeded(t, Limits{})
		if _, e := f.OpenFile(p, sys.O_RDWR|sys.O_CREAT, 0o644); e != sys.EPERM {
			t.Errorf("open %q: %v, want EPERM", p, e)
		}
		if _, e := f.Stat(p); e != sys.EPERM {
			t.Errorf("stat %q: %v", p, e)
		}
		if e := f.Mkdir(p, 0o755); e != sys.EPERM {
			t.Errorf("mkdir %q: %v", p, e)
		}
		if e := f.Rename("f.txt", p); e != sys.EPERM {
			t.Errorf("rename to %q: %v", p, e)
		}
		if e := f.Unlink(p); e != sys.EPERM {
			t.Errorf("unlink %q: %v", p, e)
		}
		if err := f.WriteFile(p, []byte("x"), 0o644); !errors.Is(err, sys.EPERM) || !strings.HasPrefix(err.Error(), "vfs: ") {
			t.Errorf("WriteFile %q: %v", p, err)
		}
		if _, err := f.ReadFile(p); !errors.Is(err, sys.EPERM) {
			t.Errorf("ReadFile %q: %v", p, err)
		}
	}
	for _, p := range []string{"a\x00b", "f.txt\x00/../../etc/passwd", "\x00"} {
		f := seeded(t, Limits{})
		if _, e := f.OpenFile(p, sys.O_RDWR|sys.O_CREAT, 0o644); e != sys.EINVAL {
			t.Errorf("open %q: %v, want EINVAL", p, e)
		}
		if err := f.WriteFile(p, nil, 0o644); !errors.Is(err, sys.EINVAL) {
			t.Errorf("WriteFile %q: %v", p, err)
		}
	}
	// Absolute paths and internal ".." are confined to the root.
	f := seeded(t, Limits{})
	for _, p := range []string{"/etc/passwd", "/f.txt", "//f.txt", "dir/../f.txt", "./dir/./../f.txt", "dir//..//f.txt"} {
		if _, e := f.Stat(p); p == "/etc/passwd" {
			if e != sys.ENOENT {
				t.Errorf("stat %q: %v", p, e)
			}
		} else if e != 0 {
			t.Errorf("stat %q: %v", p, e)
		}
	}
	must(t, f.MkdirAll("/etc", 0o755))
	h := open(t, f, "/etc/passwd", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte("confined"))
	h.Close()
	if b, err := f.ReadFile("etc/passwd"); err != nil || string(b) != "confined" {
		t.Fatal(b, err)
	}
	for _, i := range f.List() {
		if strings.Contains(i.Path, "..") || strings.HasPrefix(i.Path, "/") || strings.Contains(i.Path, "\x00") || strings.Contains(i.Path, "//") {
			t.Errorf("bad path in tree: %q", i.Path)
		}
	}
}

func TestSymlinkAndLinkRefused(t *testing.T) {
	f := seeded(t, Limits{})
	if e := f.Symlink("../../../../etc/passwd", "evil"); e != sys.EPERM {
		t.Fatal(e)
	}
	if e := f.Link("f.txt", "hard"); e != sys.EPERM {
		t.Fatal(e)
	}
	for _, p := range []string{"evil", "hard"} {
		if _, e := f.Lstat(p); e != sys.ENOENT {
			t.Fatalf("%s exists: %v", p, e)
		}
	}
}

func TestQuotaBytes(t *testing.T) {
	f := New(Limits{MaxBytes: 100})
	h := open(t, f, "a", sys.O_RDWR|sys.O_CREAT)
	defer h.Close()
	if n, e := h.Write(bytes.Repeat([]byte("x"), 60)); n != 60 || e != 0 {
		t.Fatal(n, e)
	}
	check := func(what string, wantBytes int64, wantSize int) {
		t.Helper()
		if used, _ := f.Usage(); used != wantBytes {
			t.Fatalf("%s: usage %d, want %d", what, used, wantBytes)
		}
		b, _ := f.ReadFile("a")
		if len(b) != wantSize || strings.Trim(string(b), "x") != "" {
			t.Fatalf("%s: content changed: %d bytes", what, len(b))
		}
	}
	if n, e := h.Write(bytes.Repeat([]byte("y"), 41)); n != 0 || e != ENOSPC {
		t.Fatal("write over quota", n, e)
	}
	check("write", 60, 60)
	if off, _ := h.Seek(0, io.SeekCurrent); off != 60 {
		t.Fatal("offset moved", off)
	}
	if n, e := h.Pwrite(bytes.Repeat([]byte("y"), 20), 90); n != 0 || e != ENOSPC {
		t.Fatal("pwrite over quota", n, e)
	}
	check("pwrite", 60, 60)
	if e := h.Truncate(101); e != ENOSPC {
		t.Fatal("truncate over quota", e)
	}
	check("truncate", 60, 60)
	if _, e := h.Pwrite([]byte("y"), 1<<62); e != ENOSPC {
		t.Fatal("huge pwrite", e)
	}
	check("huge pwrite", 60, 60)
	// Another file shares the budget.
	g := open(t, f, "b", sys.O_WRONLY|sys.O_CREAT|sys.O_APPEND)
	if _, e := g.Write(make([]byte, 40)); e != 0 {
		t.Fatal(e)
	}
	if _, e := g.Write(make([]byte, 1)); e != ENOSPC {
		t.Fatal("101st byte", e)
	}
	g.Close()
	if err := f.WriteFile("c", []byte("z"), 0o644); !errors.Is(err, ENOSPC) || !strings.Contains(err.Error(), "vfs: ") {
		t.Fatal("WriteFile over quota:", err)
	}
	if _, e := f.Stat("c"); e != sys.ENOENT {
		t.Fatal("WriteFile left a file")
	}
	// Replacing content counts only the difference; freeing space allows writes.
	must(t, f.WriteFile("b", make([]byte, 10), 0o644))
	if used, _ := f.Usage(); used != 70 {
		t.Fatal("usage", used)
	}
	errnoOK(t, "unlink", f.Unlink("b"))
	if used, _ := f.Usage(); used != 60 {
		t.Fatal("usage after unlink", used)
	}
	if _, e := h.Write(make([]byte, 40)); e != 0 {
		t.Fatal(e)
	}
}

func TestQuotaUnlinkedOpenFileStaysCharged(t *testing.T) {
	f := New(Limits{MaxBytes: 100, MaxFiles: 2})
	h := open(t, f, "tmp", sys.O_RDWR|sys.O_CREAT)
	h.Write(make([]byte, 80))
	errnoOK(t, "unlink", f.Unlink("tmp"))
	// Still readable and writable through the handle, still charged.
	if _, e := h.Pwrite([]byte("abc"), 0); e != 0 {
		t.Fatal(e)
	}
	buf := make([]byte, 3)
	if n, _ := h.Pread(buf, 0); n != 3 || string(buf) != "abc" {
		t.Fatal(string(buf))
	}
	if used, files := f.Usage(); used != 80 || files != 1 {
		t.Fatal("usage", used, files)
	}
	if st, _ := h.Stat(); st.Nlink != 0 {
		t.Fatal("nlink", st.Nlink)
	}
	if err := f.WriteFile("x", make([]byte, 21), 0o644); !errors.Is(err, ENOSPC) {
		t.Fatal(err)
	}
	if _, e := h.Write(make([]byte, 21)); e != ENOSPC {
		t.Fatal("write past quota on unlinked file", e)
	}
	errnoOK(t, "close", h.Close())
	if used, files := f.Usage(); used != 0 || files != 0 {
		t.Fatal("usage after close", used, files)
	}
}

func TestQuotaFiles(t *testing.T) {
	f := New(Limits{MaxFiles: 3})
	must(t, f.WriteFile("a", nil, 0o644))
	errnoOK(t, "mkdir", f.Mkdir("d", 0o755))
	open(t, f, "d/b", sys.O_WRONLY|sys.O_CREAT).Close()
	if _, e := f.OpenFile("c", sys.O_WRONLY|sys.O_CREAT, 0o644); e != EDQUOT {
		t.Fatal("4th file", e)
	}
	if e := f.Mkdir("e", 0o755); e != EDQUOT {
		t.Fatal("4th dir", e)
	}
	// Opening existing files is still fine.
	open(t, f, "a", sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC).Close()
	errnoOK(t, "unlink", f.Unlink("a"))
	// One slot left: a WriteFile needing a parent and a file must not create the parent.
	if err := f.WriteFile("p/q", nil, 0o644); !errors.Is(err, EDQUOT) {
		t.Fatal(err)
	}
	if _, e := f.Stat("p"); e != sys.ENOENT {
		t.Fatal("partial effect: parent created")
	}
	if err := f.MkdirAll("m/n", 0o755); !errors.Is(err, EDQUOT) {
		t.Fatal(err)
	}
	if _, e := f.Stat("m"); e != sys.ENOENT {
		t.Fatal("partial effect: MkdirAll")
	}
	if _, files := f.Usage(); files != 2 {
		t.Fatal("files", files)
	}
	errnoOK(t, "mkdir last", f.Mkdir("last", 0o755))
	// Renames never need quota.
	errnoOK(t, "rename", f.Rename("d/b", "b"))
}

func TestMaxOpenFiles(t *testing.T) {
	f := New(Limits{MaxOpenFiles: 3})
	var hs []sys.File
	for i := 0; i < 3; i++ {
		hs = append(hs, open(t, f, ".", sys.O_RDONLY))
	}
	if _, e := f.OpenFile("new", sys.O_WRONLY|sys.O_CREAT, 0o644); e != EMFILE {
		t.Fatal("4th handle", e)
	}
	if _, e := f.Stat("new"); e != sys.ENOENT {
		t.Fatal("EMFILE open created the file")
	}
	hs[0].Close()
	hs[0].Close() // double close must not free a second slot
	open(t, f, "new", sys.O_WRONLY|sys.O_CREAT)
	if _, e := f.OpenFile("new", sys.O_RDONLY, 0); e != EMFILE {
		t.Fatal("after double close", e)
	}
	f.Reset() // old handles no longer count
	for i := 0; i < 3; i++ {
		open(t, f, ".", sys.O_RDONLY)
	}
}

func TestReaddirWhileChanging(t *testing.T) {
	f := New(Limits{})
	for _, n := range []string{"b", "d", "f"} {
		must(t, f.WriteFile(n, nil, 0o644))
	}
	d := open(t, f, ".", sys.O_RDONLY)
	defer d.Close()
	first, _ := d.Readdir(1) // b
	errnoOK(t, "unlink", f.Unlink("b"))
	must(t, f.WriteFile("a", nil, 0o644)) // before the cursor: not seen
	must(t, f.WriteFile("e", nil, 0o644)) // after the cursor: seen
	rest, _ := d.Readdir(0)
	var names []string
	for _, de := range append(first, rest...) {
		names = append(names, de.Name)
	}
	if got := strings.Join(names, " "); got != "b d e f" {
		t.Fatal(got)
	}
}

func TestDefaults(t *testing.T) {
	l := New(Limits{}).Limits()
	if l.MaxBytes != 64<<20 || l.MaxFiles != 10000 || l.MaxOpenFiles != 1024 {
		t.Fatalf("%+v", l)
	}
	l = New(Limits{MaxBytes: -1, MaxFiles: 5}).Limits()
	if l.MaxBytes != DefaultMaxBytes || l.MaxFiles != 5 {
		t.Fatalf("%+v", l)
	}
}

func TestErrors(t *testing.T) {
	f := New(Limits{})
	_, err := f.ReadFile("missing")
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, sys.ENOENT) {
		t.Fatal(err)
	}
	var pe *PathError
	if !errors.As(err, &pe) || pe.Path != "missing" || pe.Op != "read" {
		t.Fatal(err)
	}
	if err.Error() != `vfs: read "missing": no such file or directory` {
		t.Fatal(err.Error())
	}
	must(t, f.MkdirAll("d", 0o755))
	if _, err := f.ReadFile("d"); !errors.Is(err, sys.EISDIR) {
		t.Fatal(err)
	}
	if err := f.WriteFile("d", nil, 0o644); !errors.Is(err, sys.EISDIR) {
		t.Fatal(err)
	}
	if err := f.WriteFile("", nil, 0o644); !errors.Is(err, sys.EISDIR) {
		t.Fatal(err)
	}
}

func TestChanges(t *testing.T) {
	f := seeded(t, Limits{})
	if c := f.Changes(); len(c) != 0 {
		t.Fatalf("seeding shows as changes: %v", c)
	}
	// Guest activity.
	h := open(t, f, "new.txt", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte("new!"))
	h.Close()
	h = open(t, f, "dir/a.txt", sys.O_WRONLY|sys.O_APPEND)
	h.Write([]byte("+"))
	h.Close()
	errnoOK(t, "unlink", f.Unlink("f.txt"))
	errnoOK(t, "mkdir", f.Mkdir("made", 0o755))
	errnoOK(t, "rmdir", f.Rmdir("empty"))
	// Opening without writing is not a modification; nor is a no-op truncate.
	h = open(t, f, "dir/a.txt", sys.O_RDWR)
	h.Truncate(4)
	h.Close()

	want := "dir/a.txt modified 4 false|empty deleted 0 true|f.txt deleted 0 false|made created 0 true|new.txt created 4 false"
	if got := fmtChanges(f.Changes()); got != want {
		t.Fatalf("\ngot  %s\nwant %s", got, want)
	}
	// A rename is deleted+created; replacing a file by rename is modified.
	f.Mark()
	if c := f.Changes(); len(c) != 0 {
		t.Fatal("after Mark:", c)
	}
	errnoOK(t, "rename", f.Rename("new.txt", "dir/a.txt"))
	errnoOK(t, "rename dir", f.Rename("made", "made2"))
	want = "dir/a.txt modified 4 false|made deleted 0 true|made2 created 0 true|new.txt deleted 0 false"
	if got := fmtChanges(f.Changes()); got != want {
		t.Fatalf("\ngot  %s\nwant %s", got, want)
	}
	// Type change on one path.
	f.Mark()
	errnoOK(t, "rmdir", f.Rmdir("made2"))
	open(t, f, "made2", sys.O_WRONLY|sys.O_CREAT).Close()
	want = "made2 deleted 0 true|made2 created 0 false"
	if got := fmtChanges(f.Changes()); got != want {
		t.Fatalf("\ngot  %s\nwant %s", got, want)
	}
	// Host writes after Mark become baseline, not changes.
	f.Mark()
	must(t, f.WriteFile("host.txt", []byte("h"), 0o644))
	if c := f.Changes(); len(c) != 0 {
		t.Fatal("host write shows as change:", c)
	}
}

func fmtChanges(cs []Change) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %s %d %t", c.Path, c.Kind, c.Size, c.IsDir))
	}
	return strings.Join(parts, "|")
}

func TestWalkAndList(t *testing.T) {
	f := seeded(t, Limits{})
	var got []string
	for _, i := range f.List() {
		got = append(got, fmt.Sprintf("%s:%d:%t", i.Path, i.Size, i.IsDir()))
	}
	if s := strings.Join(got, " "); s != "dir:0:true dir/a.txt:3:false dir/sub:0:true empty:0:true f.txt:5:false" {
		t.Fatal(s)
	}
	var seen []string
	err := f.Walk(func(i FileInfo) error {
		seen = append(seen, i.Path)
		if i.Path == "dir" {
			return fs.SkipDir
		}
		// fn may call back into f: Walk does not hold the lock.
		if !i.IsDir() {
			if _, err := f.ReadFile(i.Path); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || strings.Join(seen, " ") != "dir empty f.txt" {
		t.Fatal(seen, err)
	}
	stop := errors.New("stop")
	if err := f.Walk(func(FileInfo) error { return stop }); err != stop {
		t.Fatal(err)
	}
	seen = nil
	f.Walk(func(i FileInfo) error { seen = append(seen, i.Path); return fs.SkipAll })
	if len(seen) != 1 {
		t.Fatal(seen)
	}
}

func TestCloneAndReset(t *testing.T) {
	f := seeded(t, Limits{MaxBytes: 1000, MaxFiles: 50})
	h := open(t, f, "f.txt", sys.O_RDWR)
	c := f.Clone()
	// Independent contents.
	h.Write([]byte("J"))
	must(t, c.WriteFile("dir/a.txt", []byte("clone"), 0o644))
	if b, _ := f.ReadFile("dir/a.txt"); string(b) != "aaa" {
		t.Fatal("clone wrote into original", string(b))
	}
	if b, _ := c.ReadFile("f.txt"); string(b) != "hello" {
		t.Fatal("original wrote into clone", string(b))
	}
	if c.Limits() != f.Limits() {
		t.Fatal("limits")
	}
	if ub, uf := c.Usage(); ub != 10 || uf != 5 {
		t.Fatal("clone usage", ub, uf)
	}
	// The clone keeps the baseline: its changes are its own.
	if got := fmtChanges(c.Changes()); got != "" {
		t.Fatal(got)
	}
	if got := fmtChanges(f.Changes()); got != "f.txt modified 5 false" {
		t.Fatal(got)
	}

	f.Reset()
	if l := f.List(); len(l) != 0 {
		t.Fatal(l)
	}
	if ub, uf := f.Usage(); ub != 0 || uf != 0 {
		t.Fatal(ub, uf)
	}
	if len(f.Changes()) != 0 {
		t.Fatal("changes after reset")
	}
	if _, e := h.Write([]byte("x")); e != sys.EBADF {
		t.Fatal("stale handle", e)
	}
	errnoOK(t, "close stale", h.Close())
	if ub, uf := f.Usage(); ub != 0 || uf != 0 {
		t.Fatal("stale close changed usage", ub, uf)
	}
	must(t, f.WriteFile("again", []byte("1"), 0o644))
	if f.Limits().MaxBytes != 1000 {
		t.Fatal("limits lost")
	}
}

// TestConcurrency runs many independent FS values in parallel, and one FS
// used by a "guest" goroutine while the host reads it from others.
func TestConcurrency(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f := New(Limits{MaxBytes: 1 << 16, MaxFiles: 100})
			for j := 0; j < 50; j++ {
				p := fmt.Sprintf("d%d/f%d", j%5, j)
				f.Mkdir(fmt.Sprintf("d%d", j%5), 0o755)
				h, e := f.OpenFile(p, sys.O_RDWR|sys.O_CREAT, 0o644)
				if e != 0 {
					t.Error(e)
					return
				}
				h.Write([]byte(p))
				h.Close()
				if j%3 == 0 {
					f.Unlink(p)
				}
			}
			c := f.Clone()
			c.Reset()
			_ = f.Changes()
		}(i)
	}

	shared := New(Limits{})
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, i := range shared.List() {
					if !i.IsDir() {
						shared.ReadFile(i.Path)
					}
				}
				_ = shared.Changes()
				_ = shared.Clone()
				shared.Usage()
			}
		}()
	}
	h, _ := shared.OpenFile("log", sys.O_WRONLY|sys.O_CREAT|sys.O_APPEND, 0o644)
	for j := 0; j < 300; j++ {
		h.Write([]byte("line\n"))
		shared.Mkdir(fmt.Sprintf("d%d", j%7), 0o755)
		shared.Rename(fmt.Sprintf("d%d", j%7), fmt.Sprintf("e%d", j%7))
		shared.Rmdir(fmt.Sprintf("e%d", j%7))
	}
	h.Close()
	close(stop)
	wg.Wait()
	if b, _ := shared.ReadFile("log"); len(b) != 300*5 {
		t.Fatal(len(b))
	}
}
