package vfs

import (
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// FuzzOps runs a sequence of file-system operations decoded from the input (create, write, truncate, mkdir,
// rename, unlink, rmdir, open/close, Mark, Clone, a frozen or read-only view) on a small FS and checks after each
// one that the quotas hold, that every entry obeys MaxDepth and MaxPathLen with correct cached bounds, and that
// the charged bytes and files match a walk of the tree once every handle is closed. Nothing may panic.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{3, 0, 3, 1, 3, 2, 4, 0, 1, 4, 1, 2, 5, 0})
	f.Add([]byte(strings.Repeat("\x03\xff", 20) + strings.Repeat("\x04\x13\x20", 10)))
	f.Fuzz(func(t *testing.T, ops []byte) {
		const maxBytes, maxFiles, maxOpen = 2048, 48, 6
		fs := New(Limits{MaxBytes: maxBytes, MaxFiles: maxFiles, MaxOpenFiles: maxOpen})
		var handles []sys.File
		lim := NewOpenLimit(maxOpen)
		ro := ReadOnly(fs, lim)
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		// path picks one of a few short names, or a long one, nested up to a few levels; long paths are built
		// from 250-byte names so the path bound is reachable within the file quota.
		path := func() string {
			b := next()
			depth := int(b>>5) + 1
			var parts []string
			for i := 0; i < depth; i++ {
				c := next()
				name := string(rune('a' + c%4))
				if c&0x80 != 0 {
					name = strings.Repeat(name, 250)
				}
				parts = append(parts, name)
			}
			return strings.Join(parts, "/")
		}
		for steps := 0; len(ops) > 0 && steps < 200; steps++ {
			switch next() % 14 {
			case 0:
				if h, errno := fs.OpenFile(path(), sys.O_CREAT|sys.O_RDWR, 0o644); errno == 0 {
					handles = append(handles, h)
				}
			case 1:
				if len(handles) > 0 {
					h := handles[int(next())%len(handles)]
					_, _ = h.Write(make([]byte, int(next())*16))
				}
			case 2:
				if len(handles) > 0 {
					_ = handles[int(next())%len(handles)].Truncate(int64(next()) * 32)
				}
			case 3:
				_ = fs.Mkdir(path(), 0o755)
			case 4:
				_ = fs.Rename(path(), path())
			case 5:
				_ = fs.Unlink(path())
			case 6:
				_ = fs.Rmdir(path())
			case 7:
				if len(handles) > 0 {
					k := int(next()) % len(handles)
					handles[k].Close()
					handles = append(handles[:k], handles[k+1:]...)
				}
			case 8:
				fs.Mark()
			case 9:
				c := fs.Clone()
				if a, b := fmtInfos(c.List()), fmtInfos(fs.List()); a != b {
					t.Fatalf("clone differs:\n%s\n%s", a, b)
				}
				checkBounds(t, c)
			case 10:
				// Read-only view: every write-ish call fails and changes nothing.
				before := fmtInfos(fs.List())
				p := path()
				for _, fl := range writeOpens {
					if h, errno := ro.OpenFile(p, fl, 0o644); errno == 0 {
						h.Close()
						t.Fatalf("read-only open %v of %q succeeded", fl, p)
					}
				}
				if ro.Mkdir(p, 0o755) == 0 || ro.Rename(p, path()) == 0 || ro.Unlink(p) == 0 || ro.Rmdir(p) == 0 {
					t.Fatal("read-only mutation succeeded")
				}
				if h, errno := ro.OpenFile(p, sys.O_RDONLY, 0); errno == 0 {
					if _, errno := h.Write([]byte("x")); errno == 0 {
						t.Fatal("write through a read-only handle")
					}
					h.Close()
				}
				if after := fmtInfos(fs.List()); after != before {
					t.Fatalf("read-only view changed the FS")
				}
				if lim.Open() != 0 {
					t.Fatalf("%d read-only handles leaked", lim.Open())
				}
			case 11:
				_ = fs.WriteFile(path(), make([]byte, int(next())), 0o644)
			case 12:
				_ = fs.MkdirAll(path(), 0o755)
			case 13:
				cs, total := fs.ChangesN(int(next() % 8))
				if all := fs.Changes(); len(all) != total || len(cs) > len(all) {
					t.Fatalf("ChangesN: %d of %d, Changes %d", len(cs), total, len(all))
				} else {
					for k := range cs {
						if cs[k] != all[k] {
							t.Fatalf("ChangesN[%d] = %+v, Changes %+v", k, cs[k], all[k])
						}
					}
				}
			}
			used, files := fs.Usage()
			if used > maxBytes || files > maxFiles || used < 0 || files < 0 {
				t.Fatalf("usage %d bytes, %d files", used, files)
			}
			if len(handles) > maxOpen {
				t.Fatalf("%d handles open", len(handles))
			}
			checkBounds(t, fs)
		}
		for _, h := range handles {
			h.Close()
		}
		// With no handle open, the charges are exactly what a walk sees.
		var bytes int64
		var n int
		_ = fs.Walk(func(i FileInfo) error {
			bytes += i.Size
			n++
			return nil
		})
		if used, files := fs.Usage(); used != bytes || files != n {
			t.Fatalf("charged %d bytes / %d files, walk sees %d / %d", used, files, bytes, n)
		}
		// After Mark nothing is a change.
		fs.Mark()
		if cs := fs.Changes(); len(cs) != 0 {
			t.Fatalf("changes after Mark: %+v", cs)
		}
	})
}
