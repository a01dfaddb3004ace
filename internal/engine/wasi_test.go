package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// wasip1 errno values (WASI snapshot 1, as wasi-libc defines them), written out here rather than taken from
// wasi.go so that the test checks the numbers the guest really sees.
const (
	wSuccess  = 0
	wBadf     = 8
	wDquot    = 19
	wExist    = 20
	wIsdir    = 31
	wMfile    = 33
	wNoent    = 44
	wNospc    = 51
	wNotdir   = 54
	wNotempty = 55
	wPerm     = 63
	wRofs     = 69
)

// wasip1 flags.
const (
	oCreat     = 1
	oDirectory = 2
	oExcl      = 4
	oTrunc     = 8
	rRead      = 1 << 1
	rWrite     = 1 << 6
	firstMount = 3 // fds 0-2 are stdio; the mounts' preopens follow in order
)

// trampolineWasm hand-assembles a module that imports every function of WASIFunctions from
// wasi_snapshot_preview1 and exports, for each, a function "t_<name>" that passes its parameters straight
// through to the import. It also exports one page of memory as "memory". The test then drives WASI from Go:
// every call goes through the engine's binding of the WASI functions, reading and writing guest memory, into
// the file systems GuestMounts built for the instance.
func trampolineWasm() []byte {
	defs := WASIFunctions()
	u := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) } // LEB128 unsigned
	str := func(b []byte, s string) []byte { return append(u(b, uint64(len(s))), s...) }
	section := func(out []byte, id byte, body []byte) []byte {
		return append(u(append(out, id), uint64(len(body))), body...)
	}

	n := uint64(len(defs))
	types, imports, funcs, code := u(nil, n), u(nil, n), u(nil, n), u(nil, n)
	exports := u(nil, n+1)
	exports = append(str(exports, "memory"), 0x02, 0x00)
	for i, d := range defs {
		types = u(append(types, 0x60), uint64(len(d.Params)))
		for _, c := range d.Params {
			if c == 'I' {
				types = append(types, 0x7e) // i64
			} else {
				types = append(types, 0x7f) // i32
			}
		}
		types = append(types, 0x01, 0x7f) // one i32 result: the errno

		imports = str(imports, WASIModule)
		imports = str(imports, d.Name)
		imports = u(append(imports, 0x00), uint64(i))

		funcs = u(funcs, uint64(i))

		exports = str(exports, "t_"+d.Name)
		exports = u(append(exports, 0x00), n+uint64(i))

		body := []byte{0x00} // no locals
		for p := range d.Params {
			body = u(append(body, 0x20), uint64(p)) // local.get p
		}
		body = u(append(body, 0x10), uint64(i)) // call import i
		body = append(body, 0x0b)               // end
		code = append(u(code, uint64(len(body))), body...)
	}
	mod := []byte("\x00asm\x01\x00\x00\x00")
	mod = section(mod, 1, types)
	mod = section(mod, 2, imports)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01}) // one memory, min 1 page
	mod = section(mod, 7, exports)
	mod = section(mod, 10, code)
	return mod
}

// wasiGuest is a trampoline instance on the wazero engine, with a bump allocator in its memory.
type wasiGuest struct {
	t    *testing.T
	inst Instance
	top  uint32
}

func newWASIGuest(t *testing.T, mounts ...Mount) *wasiGuest {
	t.Helper()
	ctx := context.Background()
	eng, err := NewWazero(ctx, WazeroConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	mod, err := eng.Compile(ctx, trampolineWasm())
	if err != nil {
		t.Fatal(err)
	}
	inst, err := mod.Instantiate(ctx, InstanceConfig{Mounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close(context.Background()) })
	return &wasiGuest{t: t, inst: inst, top: 1024}
}

func (g *wasiGuest) alloc(b []byte) uint32 {
	g.t.Helper()
	p := g.top
	g.top += uint32(len(b)+8) &^ 7
	if !g.inst.Write(p, b) {
		g.t.Fatal("memory write")
	}
	return p
}

// reset frees everything alloc handed out.
func (g *wasiGuest) reset() { g.top = 1024 }

func (g *wasiGuest) str(s string) (uint32, uint64) { return g.alloc([]byte(s)), uint64(len(s)) }

// call invokes a WASI function and returns its errno.
func (g *wasiGuest) call(name string, params ...uint64) uint32 {
	g.t.Helper()
	res, err := g.inst.Call(context.Background(), "t_"+name, params...)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	return uint32(res[0])
}

func (g *wasiGuest) u32(p uint32) uint32 {
	b, _ := g.inst.Read(p, 4)
	return binary.LittleEndian.Uint32(b)
}

func (g *wasiGuest) pathOpen(dirfd uint32, path string, oflags uint16, rights uint64) (uint32, uint32) {
	g.t.Helper()
	p, l := g.str(path)
	out := g.alloc(make([]byte, 4))
	errno := g.call("path_open", uint64(dirfd), 1, uint64(p), l, uint64(oflags), rights, rights, 0, uint64(out))
	return g.u32(out), errno
}

func (g *wasiGuest) iovec(buf []byte) uint32 {
	p := g.alloc(buf)
	return g.alloc(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, p), uint32(len(buf))))
}

func (g *wasiGuest) write(fd uint32, data []byte) (uint32, uint32) {
	g.t.Helper()
	iov := g.iovec(data)
	nw := g.alloc(make([]byte, 4))
	errno := g.call("fd_write", uint64(fd), uint64(iov), 1, uint64(nw))
	return g.u32(nw), errno
}

func (g *wasiGuest) pwrite(fd uint32, data []byte, off uint64) uint32 {
	g.t.Helper()
	iov := g.iovec(data)
	return g.call("fd_pwrite", uint64(fd), uint64(iov), 1, off, uint64(g.alloc(make([]byte, 4))))
}

func (g *wasiGuest) read(fd uint32, n int) ([]byte, uint32) {
	g.t.Helper()
	buf := g.alloc(make([]byte, n))
	iov := g.alloc(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, buf), uint32(n)))
	nr := g.alloc(make([]byte, 4))
	errno := g.call("fd_read", uint64(fd), uint64(iov), 1, uint64(nr))
	b, _ := g.inst.Read(buf, g.u32(nr))
	return b, errno
}

func (g *wasiGuest) pathCall(name string, dirfd uint32, path string) uint32 {
	g.t.Helper()
	p, l := g.str(path)
	return g.call(name, uint64(dirfd), uint64(p), l)
}

func (g *wasiGuest) rename(dirfd uint32, from, to string) uint32 {
	g.t.Helper()
	op, ol := g.str(from)
	np, nl := g.str(to)
	return g.call("path_rename", uint64(dirfd), uint64(op), ol, uint64(dirfd), uint64(np), nl)
}

// readdirNames lists a directory fd through fd_readdir, bufLen bytes at a time, resuming from the last complete
// entry's d_next cookie as wasi-libc does.
func (g *wasiGuest) readdirNames(fd uint32, bufLen uint32) []string {
	g.t.Helper()
	buf := g.alloc(make([]byte, bufLen))
	used := g.alloc(make([]byte, 4))
	var names []string
	cookie := uint64(0)
	for {
		if e := g.call("fd_readdir", uint64(fd), uint64(buf), uint64(bufLen), cookie, uint64(used)); e != wSuccess {
			g.t.Fatalf("fd_readdir: %d", e)
		}
		n := g.u32(used)
		b, _ := g.inst.Read(buf, n)
		for len(b) >= 24 {
			nl := binary.LittleEndian.Uint32(b[16:])
			if uint32(len(b)) < 24+nl {
				break // truncated entry: re-read from its cookie
			}
			names = append(names, string(b[24:24+nl]))
			cookie = binary.LittleEndian.Uint64(b)
			b = b[24+nl:]
		}
		if n < bufLen {
			return names
		}
	}
}

// openUntilEMFILE opens the paths in turn (each relative to its preopen) until an open fails, which must be with
// EMFILE, closes them all and returns how many succeeded.
func (g *wasiGuest) openUntilEMFILE(at []uint32, paths []string) int {
	g.t.Helper()
	var fds []uint32
	for k := 0; ; k++ {
		fd, e := g.pathOpen(at[k%len(at)], paths[k%len(paths)], 0, rRead)
		g.reset()
		if e != wSuccess {
			if e != wMfile {
				g.t.Fatalf("open past the handle limit: errno %d, want EMFILE(%d)", e, wMfile)
			}
			break
		}
		fds = append(fds, fd)
		if len(fds) > MaxOpenFiles {
			g.t.Fatal("no handle limit")
		}
	}
	for _, fd := range fds {
		if e := g.call("fd_close", uint64(fd)); e != wSuccess {
			g.t.Fatal("fd_close", e)
		}
	}
	return len(fds)
}

func fmtChanges(cs []vfs.Change) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %s %d %t", c.Path, c.Kind, c.Size, c.IsDir))
	}
	return strings.Join(parts, "|")
}

// TestWASIWorkspace drives a workspace mounted at /workspace through the engine's WASI, as the interpreter
// does: ordinary file operations, the errnos of refused ones, and the workspace's quotas, which the guest sees
// as wasip1 ENOSPC (byte quota), EDQUOT (file-count quota) and EMFILE (handle limit), never as EIO.
func TestWASIWorkspace(t *testing.T) {
	const at = firstMount
	ws := vfs.New(vfs.Limits{MaxBytes: 64, MaxFiles: 4})
	if err := ws.WriteFile("seed.txt", []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws.Mark()
	g := newWASIGuest(t, Mount{GuestPath: "/workspace", SysFS: ws})

	// The preopen is the mount.
	nameBuf := g.alloc(make([]byte, len("/workspace")))
	if e := g.call("fd_prestat_dir_name", at, uint64(nameBuf), uint64(len("/workspace"))); e != wSuccess {
		t.Fatal("fd_prestat_dir_name", e)
	}
	if b, _ := g.inst.Read(nameBuf, uint32(len("/workspace"))); string(b) != "/workspace" {
		t.Fatalf("preopen name %q", b)
	}

	// Create and write a file; the host sees it.
	fd, e := g.pathOpen(at, "hello.txt", oCreat|oTrunc, rRead|rWrite)
	if e != wSuccess {
		t.Fatal("path_open create", e)
	}
	if n, e := g.write(fd, []byte("hi from wasm")); e != wSuccess || n != 12 {
		t.Fatal("fd_write", n, e)
	}
	if e := g.call("fd_close", uint64(fd)); e != wSuccess {
		t.Fatal("fd_close", e)
	}
	if b, err := ws.ReadFile("hello.txt"); err != nil || string(b) != "hi from wasm" {
		t.Fatal(string(b), err)
	}

	// Read the host-seeded file; it was opened without write access.
	fd, e = g.pathOpen(at, "seed.txt", 0, rRead)
	if e != wSuccess {
		t.Fatal("path_open seed", e)
	}
	if b, e := g.read(fd, 100); e != wSuccess || string(b) != "from host" {
		t.Fatal("fd_read", string(b), e)
	}
	if _, e := g.write(fd, []byte("x")); e != wBadf {
		t.Fatal("write to a read-only fd", e)
	}
	g.call("fd_close", uint64(fd))

	// O_EXCL on an existing file; a missing file; O_DIRECTORY on a file.
	if _, e := g.pathOpen(at, "hello.txt", oCreat|oExcl, rWrite); e != wExist {
		t.Fatal("O_EXCL", e)
	}
	if _, e := g.pathOpen(at, "missing", 0, rRead); e != wNoent {
		t.Fatal("missing", e)
	}
	if _, e := g.pathOpen(at, "hello.txt", oDirectory, rRead); e != wNotdir {
		t.Fatal("O_DIRECTORY on a file", e)
	}

	// Directories and fd_readdir ("." and ".." come first).
	if e := g.pathCall("path_create_directory", at, "sub"); e != wSuccess {
		t.Fatal("mkdir", e)
	}
	if e := g.pathCall("path_create_directory", at, "sub"); e != wExist {
		t.Fatal("mkdir again", e)
	}
	dfd, e := g.pathOpen(at, ".", oDirectory, rRead)
	if e != wSuccess {
		t.Fatal("open root dir", e)
	}
	if got := strings.Join(g.readdirNames(dfd, 4096), " "); got != ". .. hello.txt seed.txt sub" {
		t.Fatalf("readdir: %q", got)
	}
	// Small buffers: several fd_readdir calls with cookies.
	if got := strings.Join(g.readdirNames(dfd, 40), " "); got != ". .. hello.txt seed.txt sub" {
		t.Fatalf("readdir in small steps: %q", got)
	}
	// Opening relative to a directory fd that is not the preopen.
	fd, e = g.pathOpen(dfd, "seed.txt", 0, rRead)
	if e != wSuccess {
		t.Fatal("openat root dir fd", e)
	}
	if b, _ := g.read(fd, 4); string(b) != "from" {
		t.Fatal(string(b))
	}
	g.call("fd_close", uint64(fd))
	g.call("fd_close", uint64(dfd))
	dfd, e = g.pathOpen(at, "sub", oDirectory, rRead)
	if e != wSuccess {
		t.Fatal("open sub", e)
	}
	fd, e = g.pathOpen(dfd, "inner", oCreat, rWrite)
	if e != wSuccess {
		t.Fatal("openat sub", e)
	}
	g.call("fd_close", uint64(fd))
	if _, err := ws.ReadFile("sub/inner"); err != nil {
		t.Fatal(err)
	}
	if _, e := g.pathOpen(dfd, "../../x", oCreat, rWrite); e != wPerm {
		t.Fatal("openat escape", e)
	}
	g.call("fd_close", uint64(dfd))
	if e := g.pathCall("path_unlink_file", at, "sub/inner"); e != wSuccess {
		t.Fatal(e)
	}

	// Rename, unlink, rmdir.
	if e := g.rename(at, "hello.txt", "sub/hello.txt"); e != wSuccess {
		t.Fatal("rename", e)
	}
	if e := g.pathCall("path_remove_directory", at, "sub"); e != wNotempty {
		t.Fatal("rmdir non-empty", e)
	}
	if e := g.pathCall("path_unlink_file", at, "sub"); e != wIsdir {
		t.Fatal("unlink dir", e)
	}
	if e := g.pathCall("path_unlink_file", at, "sub/hello.txt"); e != wSuccess {
		t.Fatal("unlink", e)
	}
	if e := g.pathCall("path_remove_directory", at, "sub"); e != wSuccess {
		t.Fatal("rmdir", e)
	}

	// Escapes: ".." above the mount is refused, and the workspace refuses symlinks and links.
	if _, e := g.pathOpen(at, "../etc/passwd", 0, rRead); e != wPerm {
		t.Fatal("path_open ..", e)
	}
	if _, e := g.pathOpen(at, "a/../../etc/passwd", 0, rRead); e != wPerm {
		t.Fatal("path_open a/../..", e)
	}
	tp, tl := g.str("/etc/passwd")
	lp, ll := g.str("evil")
	if e := g.call("path_symlink", uint64(tp), tl, at, uint64(lp), ll); e != wPerm {
		t.Fatal("path_symlink", e)
	}
	sp, sl := g.str("seed.txt")
	if e := g.call("path_link", at, 0, uint64(sp), sl, at, uint64(lp), ll); e != wPerm {
		t.Fatal("path_link", e)
	}
	if _, err := ws.ReadFile("evil"); err == nil {
		t.Fatal("link created")
	}
	g.reset()

	// The byte quota is ENOSPC for every way of growing a file, with no partial effect.
	fd, e = g.pathOpen(at, "big", oCreat, rRead|rWrite)
	if e != wSuccess {
		t.Fatal("open big", e)
	}
	if _, e := g.write(fd, bytes.Repeat([]byte("x"), 56)); e != wNospc { // 9 (seed.txt) + 56 > 64
		t.Fatalf("fd_write past the byte quota: errno %d, want ENOSPC(%d)", e, wNospc)
	}
	if e := g.pwrite(fd, []byte("x"), 100); e != wNospc {
		t.Fatalf("fd_pwrite past the byte quota: errno %d, want ENOSPC(%d)", e, wNospc)
	}
	if e := g.call("fd_filestat_set_size", uint64(fd), 1000); e != wNospc {
		t.Fatalf("fd_filestat_set_size past the byte quota: errno %d, want ENOSPC(%d)", e, wNospc)
	}
	if e := g.call("fd_allocate", uint64(fd), 0, 1000); e != wNospc {
		t.Fatalf("fd_allocate past the byte quota: errno %d, want ENOSPC(%d)", e, wNospc)
	}
	if b, _ := ws.ReadFile("big"); len(b) != 0 {
		t.Fatal("partial write", len(b))
	}
	// Below the quota the same file still grows.
	if n, e := g.write(fd, []byte("ok")); e != wSuccess || n != 2 {
		t.Fatal("fd_write under the quota", n, e)
	}
	g.call("fd_close", uint64(fd))

	// The file-count quota is EDQUOT for mkdir and create: seed.txt, big, d1 and d2 are 4.
	for _, d := range []string{"d1", "d2"} {
		if e := g.pathCall("path_create_directory", at, d); e != wSuccess {
			t.Fatal(d, e)
		}
	}
	if e := g.pathCall("path_create_directory", at, "d3"); e != wDquot {
		t.Fatalf("mkdir past the file-count quota: errno %d, want EDQUOT(%d)", e, wDquot)
	}
	if _, e := g.pathOpen(at, "f5", oCreat, rWrite); e != wDquot {
		t.Fatalf("create past the file-count quota: errno %d, want EDQUOT(%d)", e, wDquot)
	}
	g.reset()

	// Too many open handles: EMFILE, at MaxOpenFiles (the preopen holds none until it is used itself).
	if n := g.openUntilEMFILE([]uint32{at}, []string{"seed.txt"}); n != MaxOpenFiles {
		t.Fatalf("%d handles opened, want %d", n, MaxOpenFiles)
	}
	// Closing them frees the slots.
	fd, e = g.pathOpen(at, "seed.txt", 0, rRead)
	if e != wSuccess {
		t.Fatal("open after closing", e)
	}
	g.call("fd_close", uint64(fd))

	// Change tracking saw the guest's work.
	if got := fmtChanges(ws.Changes()); got != "big created 2 false|d1 created 0 true|d2 created 0 true" {
		t.Fatal(got)
	}
}

// TestWASIReadOnlyMounts: read-only mounts (an fs.FS, and a workspace mounted with ReadOnly) refuse every write
// flag and every mutating operation with the errno a read-only Linux mount gives, and one handle limit (EMFILE)
// covers all the mounts of an instance together.
func TestWASIReadOnlyMounts(t *testing.T) {
	pkgs := vfs.New(vfs.Limits{})
	if err := pkgs.WriteFile("mod.py", []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pkgs.MkdirAll("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	lib := fstest.MapFS{"os.py": {Data: []byte("import sys\n")}, "dir/x.py": {Data: []byte("")}}
	ws := vfs.New(vfs.Limits{})
	g := newWASIGuest(t,
		Mount{GuestPath: "/packages", SysFS: pkgs, ReadOnly: true},
		Mount{GuestPath: "/lib", FS: lib},
		Mount{GuestPath: "/workspace", SysFS: ws},
	)
	const pkgsAt, libAt, wsAt = firstMount, firstMount + 1, firstMount + 2

	for _, m := range []struct {
		at         uint32
		file, dir  string
		name, host string
	}{{pkgsAt, "mod.py", "dir", "/packages", "x = 1\n"}, {libAt, "os.py", "dir", "/lib", "import sys\n"}} {
		// Reading works.
		fd, e := g.pathOpen(m.at, m.file, 0, rRead)
		if e != wSuccess {
			t.Fatalf("%s: open for reading: %d", m.name, e)
		}
		if b, e := g.read(fd, 100); e != wSuccess || string(b) != m.host {
			t.Fatalf("%s: read %q, %d", m.name, b, e)
		}
		if _, e := g.write(fd, []byte("y")); e != wBadf {
			t.Errorf("%s: fd_write on a read-only fd: %d, want EBADF", m.name, e)
		}
		g.call("fd_close", uint64(fd))
		g.reset()

		for _, tc := range []struct {
			what   string
			path   string
			oflags uint16
			rights uint64
			want   uint32
		}{
			{"open for writing", m.file, 0, rWrite, wRofs},
			{"open read-write", m.file, 0, rRead | rWrite, wRofs},
			{"O_TRUNC", m.file, oTrunc, rRead | rWrite, wRofs},
			{"O_CREAT of an existing file", m.file, oCreat, rRead, wRofs},
			{"O_CREAT of a new file", "new.py", oCreat, rRead | rWrite, wRofs},
			{"O_CREAT|O_EXCL of an existing file", m.file, oCreat | oExcl, rWrite, wExist},
			{"open of a missing file", "missing.py", 0, rWrite, wNoent},
		} {
			if _, e := g.pathOpen(m.at, tc.path, tc.oflags, tc.rights); e != tc.want {
				t.Errorf("%s: %s: errno %d, want %d", m.name, tc.what, e, tc.want)
			}
		}
		if e := g.pathCall("path_create_directory", m.at, "newdir"); e != wRofs {
			t.Errorf("%s: mkdir: %d, want EROFS", m.name, e)
		}
		if e := g.pathCall("path_unlink_file", m.at, m.file); e != wRofs {
			t.Errorf("%s: unlink: %d, want EROFS", m.name, e)
		}
		if e := g.pathCall("path_remove_directory", m.at, m.dir); e != wRofs {
			t.Errorf("%s: rmdir: %d, want EROFS", m.name, e)
		}
		if e := g.rename(m.at, m.file, "moved.py"); e != wRofs {
			t.Errorf("%s: rename: %d, want EROFS", m.name, e)
		}
		g.reset()
	}
	if b, _ := pkgs.ReadFile("mod.py"); string(b) != "x = 1\n" || len(pkgs.List()) != 2 {
		t.Errorf("the read-only workspace changed: %q %v", b, pkgs.List())
	}

	// The writable mount next to them still works.
	fd, e := g.pathOpen(wsAt, "out.txt", oCreat, rWrite)
	if e != wSuccess {
		t.Fatal("create in the workspace", e)
	}
	g.call("fd_close", uint64(fd))

	// One limit for all the mounts together.
	n := g.openUntilEMFILE([]uint32{pkgsAt, libAt, wsAt}, []string{"mod.py", "os.py", "out.txt"})
	if n != MaxOpenFiles {
		t.Fatalf("%d handles opened across the mounts, want %d", n, MaxOpenFiles)
	}
}
