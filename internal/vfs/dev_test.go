package vfs

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

// /dev holds null only; null reads empty, swallows writes and keeps nothing; nothing can be created in /dev.
func TestDevNull(t *testing.T) {
	d := Dev()
	for _, flag := range []sys.Oflag{sys.O_RDONLY, sys.O_WRONLY, sys.O_RDWR, sys.O_WRONLY | sys.O_CREAT | sys.O_TRUNC, sys.O_WRONLY | sys.O_APPEND} {
		h, errno := d.OpenFile("null", flag, 0o644)
		errnoOK(t, "open null", errno)
		if n, errno := h.Write(make([]byte, 1<<20)); n != 1<<20 || errno != 0 {
			t.Errorf("write: %d %v", n, errno)
		}
		if n, errno := h.Pwrite([]byte("x"), 1<<40); n != 1 || errno != 0 {
			t.Errorf("pwrite: %d %v", n, errno)
		}
		if n, errno := h.Read(make([]byte, 16)); n != 0 || errno != 0 {
			t.Errorf("read after writes: %d %v, want end of file", n, errno)
		}
		if off, errno := h.Seek(1<<30, 0); off != 0 || errno != 0 {
			t.Errorf("seek: %d %v, want 0", off, errno)
		}
		st, errno := h.Stat()
		if errno != 0 || st.Mode != fs.ModeDevice|fs.ModeCharDevice|0o666 || st.Size != 0 {
			t.Errorf("stat: %v %v", st.Mode, errno)
		}
		errnoOK(t, "close", h.Close())
	}
	for name, c := range map[string]struct {
		path string
		flag sys.Oflag
		want sys.Errno
	}{
		"create new":   {"zero", sys.O_WRONLY | sys.O_CREAT, sys.EROFS},
		"missing":      {"zero", sys.O_RDONLY, sys.ENOENT},
		"excl on null": {"null", sys.O_WRONLY | sys.O_CREAT | sys.O_EXCL, sys.EEXIST},
		"null as dir":  {"null", sys.O_RDONLY | sys.O_DIRECTORY, sys.ENOTDIR},
		"below null":   {"null/x", sys.O_RDONLY, sys.ENOTDIR},
		"write /dev":   {"", sys.O_WRONLY, sys.EISDIR},
		"escape":       {"../etc/passwd", sys.O_RDONLY, sys.EPERM},
	} {
		if _, errno := d.OpenFile(c.path, c.flag, 0o644); errno != c.want {
			t.Errorf("%s: %v, want %v", name, errno, c.want)
		}
	}
	for name, errno := range map[string]sys.Errno{
		"mkdir": d.Mkdir("x", 0o755), "unlink": d.Unlink("null"), "rename": d.Rename("null", "x"),
		"chmod": d.Chmod("null", 0o777), "symlink": d.Symlink("null", "x"), "rmdir": d.Rmdir("x"),
	} {
		if errno != sys.EROFS {
			t.Errorf("%s: %v, want EROFS", name, errno)
		}
	}
	h, errno := d.OpenFile("", sys.O_RDONLY, 0)
	errnoOK(t, "open /dev", errno)
	for round := 0; round < 2; round++ {
		ents, errno := h.Readdir(-1)
		if errno != 0 || len(ents) != 1 || ents[0].Name != "null" {
			t.Fatalf("readdir: %v %v", ents, errno)
		}
		if ents, _ := h.Readdir(-1); len(ents) != 0 {
			t.Fatalf("second readdir without a rewind: %v", ents)
		}
		if _, errno := h.Seek(0, 0); errno != 0 {
			t.Fatalf("rewind: %v", errno)
		}
	}
}

// O_NONBLOCK (os.set_blocking) is accepted and reported on every handle the guest can hold, as Linux does for
// regular files: workspace files, read-only views of an FS and of an adapted fs.FS (the stdlib), and /dev/null.
// Both engines answer ENOSYS for a handle that is not a sys.PollableFile.
func TestNonblockOnEveryHandle(t *testing.T) {
	ws := seeded(t, Limits{})
	lim := NewOpenLimit(0)
	mfs := fstest.MapFS{"f.txt": {Data: []byte("hello")}}
	for name, fsys := range map[string]sys.FS{
		"workspace":     Limited(ws, lim),
		"read-only":     ReadOnly(ws, lim),
		"adapted fs.FS": ReadOnly(&sysfs.AdaptFS{FS: mfs}, lim),
		"dev":           Limited(Dev(), lim),
	} {
		p := "f.txt"
		if name == "dev" {
			p = "null"
		}
		h, errno := fsys.OpenFile(p, sys.O_RDONLY, 0)
		errnoOK(t, name+" open", errno)
		pf, ok := h.(sys.PollableFile)
		if !ok {
			t.Fatalf("%s: %T is not a sys.PollableFile", name, h)
		}
		for _, on := range []bool{true, false, true} {
			if errno := pf.SetNonblock(on); errno != 0 || pf.IsNonblock() != on {
				t.Errorf("%s: SetNonblock(%v): %v, IsNonblock %v", name, on, errno, pf.IsNonblock())
			}
		}
		if ready, errno := pf.Poll(sys.POLLIN, 0); !ready || errno != 0 {
			t.Errorf("%s: poll %v %v, want ready", name, ready, errno)
		}
		if errno := h.SetAppend(false); errno != 0 {
			t.Errorf("%s: SetAppend(false): %v", name, errno)
		}
		errnoOK(t, name+" close", h.Close())
	}
	if n := lim.Open(); n != 0 {
		t.Errorf("%d handles still counted after every close", n)
	}
}
