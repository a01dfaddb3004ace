package vfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// wasip1 errno values (WASI snapshot 1).
const (
	wSuccess  = 0
	wBadf     = 8
	wDquot    = 19
	wExist    = 20
	wInval    = 28
	wIo       = 29
	wIsdir    = 31
	wMfile    = 33
	wNoent    = 44
	wNospc    = 51
	wNotdir   = 54
	wNotempty = 55
	wPerm     = 63
)

// wasip1 flags.
const (
	oCreat      = 1
	oDirectory  = 2
	oExcl       = 4
	oTrunc      = 8
	rightRead   = 1 << 1
	rightWrite  = 1 << 6
	fdAppend    = 1
	preopenFD   = 3
	workspaceAt = "/workspace"
)

// trampolineWasm hand-assembles a module that imports every function of
// wasi_snapshot_preview1 (signatures taken from wazero's own definitions) and
// exports, for each, a function "t_<name>" that passes its parameters
// straight through to the import. It also exports one page of memory as
// "memory". The test then drives WASI from Go: every call goes through
// wazero's real WASI host functions, reading and writing guest memory, and
// through its FSContext (fds, preopens, DirentCache) into the mounted FS.
func trampolineWasm(defs map[string]api.FunctionDefinition) ([]byte, []string) {
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)

	u := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) } // LEB128 unsigned
	str := func(b []byte, s string) []byte { return append(u(b, uint64(len(s))), s...) }
	section := func(out []byte, id byte, body []byte) []byte {
		return append(u(append(out, id), uint64(len(body))), body...)
	}

	var types, imports, funcs, exports, code []byte
	n := uint64(len(names))
	types, imports, funcs, code = u(nil, n), u(nil, n), u(nil, n), u(nil, n)
	exports = u(nil, n+1)
	exports = append(str(exports, "memory"), 0x02, 0x00)
	for i, name := range names {
		d := defs[name]
		types = append(types, 0x60)
		types = u(types, uint64(len(d.ParamTypes())))
		types = append(types, d.ParamTypes()...)
		types = u(types, uint64(len(d.ResultTypes())))
		types = append(types, d.ResultTypes()...)

		imports = str(imports, wasi_snapshot_preview1.ModuleName)
		imports = str(imports, name)
		imports = u(append(imports, 0x00), uint64(i))

		funcs = u(funcs, uint64(i))

		exports = str(exports, "t_"+name)
		exports = u(append(exports, 0x00), n+uint64(i))

		body := []byte{0x00} // no locals
		for p := range d.ParamTypes() {
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
	return mod, names
}

// guest is a trampoline instance with a tiny bump allocator in its memory.
type guest struct {
	t   *testing.T
	ctx context.Context
	mod api.Module
	mem api.Memory
	top uint32
}

func (g *guest) alloc(b []byte) uint32 {
	p := g.top
	g.top += uint32(len(b)+8) &^ 7
	if !g.mem.Write(p, b) {
		g.t.Fatal("memory write")
	}
	return p
}

func (g *guest) str(s string) (uint32, uint64) { return g.alloc([]byte(s)), uint64(len(s)) }

// call invokes a WASI function and returns its errno.
func (g *guest) call(name string, params ...uint64) uint32 {
	g.t.Helper()
	fn := g.mod.ExportedFunction("t_" + name)
	if fn == nil {
		g.t.Fatalf("no export t_%s", name)
	}
	res, err := fn.Call(g.ctx, params...)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	return uint32(res[0])
}

func (g *guest) u32(p uint32) uint32 { v, _ := g.mem.ReadUint32Le(p); return v }

func (g *guest) pathOpen(path string, oflags, fdflags uint16, rights uint64) (uint32, uint32) {
	return g.pathOpenAt(preopenFD, path, oflags, fdflags, rights)
}

func (g *guest) pathOpenAt(dirfd uint32, path string, oflags, fdflags uint16, rights uint64) (uint32, uint32) {
	p, l := g.str(path)
	out := g.alloc(make([]byte, 4))
	errno := g.call("path_open", uint64(dirfd), 1, uint64(p), l, uint64(oflags), rights, rights, uint64(fdflags), uint64(out))
	return g.u32(out), errno
}

func (g *guest) write(fd uint32, data []byte) (uint32, uint32) {
	buf := g.alloc(data)
	iov := g.alloc(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, buf), uint32(len(data))))
	nw := g.alloc(make([]byte, 4))
	errno := g.call("fd_write", uint64(fd), uint64(iov), 1, uint64(nw))
	return g.u32(nw), errno
}

func (g *guest) read(fd uint32, n int) ([]byte, uint32) {
	buf := g.alloc(make([]byte, n))
	iov := g.alloc(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, buf), uint32(n)))
	nr := g.alloc(make([]byte, 4))
	errno := g.call("fd_read", uint64(fd), uint64(iov), 1, uint64(nr))
	b, _ := g.mem.Read(buf, g.u32(nr))
	return append([]byte(nil), b...), errno
}

func (g *guest) pathCall(name, path string) uint32 {
	p, l := g.str(path)
	return g.call(name, preopenFD, uint64(p), l)
}

// readdirNames lists a directory fd through fd_readdir, bufLen bytes at a
// time, resuming from the last complete entry's d_next cookie as wasi-libc
// does.
func (g *guest) readdirNames(fd uint32, bufLen uint32) []string {
	buf := g.alloc(make([]byte, bufLen))
	used := g.alloc(make([]byte, 4))
	var names []string
	cookie := uint64(0)
	for {
		if e := g.call("fd_readdir", uint64(fd), uint64(buf), uint64(bufLen), cookie, uint64(used)); e != wSuccess {
			g.t.Fatalf("fd_readdir: %d", e)
		}
		n := g.u32(used)
		b, _ := g.mem.Read(buf, n)
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

func newGuest(t *testing.T, ctx context.Context, ws *FS, wrapWASI bool) *guest {
	t.Helper()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { r.Close(context.Background()) })
	var err error
	if wrapWASI {
		_, err = InstantiateWASI(ctx, r)
	} else {
		_, err = wasi_snapshot_preview1.Instantiate(ctx, r)
	}
	if err != nil {
		t.Fatal(err)
	}
	defs, err := loadWASIDefs()
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := trampolineWasm(defs)

	// This is how wasmbox mounts the workspace.
	fsCfg := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(ws, workspaceAt)
	cfg := wazero.NewModuleConfig().WithFSConfig(fsCfg).WithName("")

	mod, err := r.InstantiateWithConfig(ctx, bin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &guest{t: t, ctx: ctx, mod: mod, mem: mod.Memory(), top: 1024}
}

func TestWASIIntegration(t *testing.T) {
	ws := New(Limits{MaxBytes: 64, MaxFiles: 4}, WithClock(fixedClock()))
	must(t, ws.WriteFile("seed.txt", []byte("from host"), 0o644))
	ctx := NewContext(context.Background(), ws)
	g := newGuest(t, ctx, ws, true)

	// The preopen is our mount.
	nameBuf := g.alloc(make([]byte, len(workspaceAt)))
	if e := g.call("fd_prestat_dir_name", preopenFD, uint64(nameBuf), uint64(len(workspaceAt))); e != wSuccess {
		t.Fatal("fd_prestat_dir_name", e)
	}
	if b, _ := g.mem.Read(nameBuf, uint32(len(workspaceAt))); string(b) != workspaceAt {
		t.Fatalf("preopen name %q", b)
	}

	// Create and write a file; the host sees it.
	fd, e := g.pathOpen("hello.txt", oCreat|oTrunc, 0, rightRead|rightWrite)
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

	// Read the host-seeded file.
	fd, e = g.pathOpen("seed.txt", 0, 0, rightRead)
	if e != wSuccess {
		t.Fatal("path_open seed", e)
	}
	if b, e := g.read(fd, 100); e != wSuccess || string(b) != "from host" {
		t.Fatal("fd_read", string(b), e)
	}
	if _, e := g.write(fd, []byte("x")); e != wBadf {
		t.Fatal("write to read-only fd", e)
	}
	g.call("fd_close", uint64(fd))

	// O_EXCL on an existing file; missing file; O_DIRECTORY on a file.
	if _, e := g.pathOpen("hello.txt", oCreat|oExcl, 0, rightWrite); e != wExist {
		t.Fatal("O_EXCL", e)
	}
	if _, e := g.pathOpen("missing", 0, 0, rightRead); e != wNoent {
		t.Fatal("missing", e)
	}
	if _, e := g.pathOpen("hello.txt", oDirectory, 0, rightRead); e != wNotdir {
		t.Fatal("O_DIRECTORY on file", e)
	}

	// Directories and readdir ("." and ".." come from wazero).
	if e := g.pathCall("path_create_directory", "sub"); e != wSuccess {
		t.Fatal("mkdir", e)
	}
	if e := g.pathCall("path_create_directory", "sub"); e != wExist {
		t.Fatal("mkdir again", e)
	}
	dfd, e := g.pathOpen(".", oDirectory, 0, rightRead)
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
	// Opening relative to a directory fd that is not the preopen: wazero
	// joins the paths itself ("" + "/seed.txt" for the root).
	fd, e = g.pathOpenAt(dfd, "seed.txt", 0, 0, rightRead)
	if e != wSuccess {
		t.Fatal("openat root dir fd", e)
	}
	if b, _ := g.read(fd, 4); string(b) != "from" {
		t.Fatal(string(b))
	}
	g.call("fd_close", uint64(fd))
	g.call("fd_close", uint64(dfd))
	dfd, e = g.pathOpen("sub", oDirectory, 0, rightRead)
	if e != wSuccess {
		t.Fatal("open sub", e)
	}
	fd, e = g.pathOpenAt(dfd, "inner", oCreat, 0, rightWrite)
	if e != wSuccess {
		t.Fatal("openat sub", e)
	}
	g.call("fd_close", uint64(fd))
	if _, err := ws.ReadFile("sub/inner"); err != nil {
		t.Fatal(err)
	}
	if _, e := g.pathOpenAt(dfd, "../../x", oCreat, 0, rightWrite); e != wPerm {
		t.Fatal("openat escape", e)
	}
	g.call("fd_close", uint64(dfd))
	if e := g.pathCall("path_unlink_file", "sub/inner"); e != wSuccess {
		t.Fatal(e)
	}

	// Rename, unlink, rmdir.
	op, ol := g.str("hello.txt")
	np, nl := g.str("sub/hello.txt")
	if e := g.call("path_rename", preopenFD, uint64(op), ol, preopenFD, uint64(np), nl); e != wSuccess {
		t.Fatal("rename", e)
	}
	if e := g.pathCall("path_remove_directory", "sub"); e != wNotempty {
		t.Fatal("rmdir non-empty", e)
	}
	if e := g.pathCall("path_unlink_file", "sub"); e != wIsdir {
		t.Fatal("unlink dir", e)
	}
	if e := g.pathCall("path_unlink_file", "sub/hello.txt"); e != wSuccess {
		t.Fatal("unlink", e)
	}
	if e := g.pathCall("path_remove_directory", "sub"); e != wSuccess {
		t.Fatal("rmdir", e)
	}

	// Escapes: wazero refuses "..", and our FS refuses symlinks and links.
	if _, e := g.pathOpen("../etc/passwd", 0, 0, rightRead); e != wPerm {
		t.Fatal("path_open ..", e)
	}
	if _, e := g.pathOpen("a/../../etc/passwd", 0, 0, rightRead); e != wPerm {
		t.Fatal("path_open a/../..", e)
	}
	tp, tl := g.str("/etc/passwd")
	lp, ll := g.str("evil")
	if e := g.call("path_symlink", uint64(tp), tl, preopenFD, uint64(lp), ll); e != wPerm {
		t.Fatal("path_symlink", e)
	}
	sp, sl := g.str("seed.txt")
	if e := g.call("path_link", preopenFD, 0, uint64(sp), sl, preopenFD, uint64(lp), ll); e != wPerm {
		t.Fatal("path_link", e)
	}
	if _, err := ws.ReadFile("evil"); err == nil {
		t.Fatal("link created")
	}

	// Quotas surface as ENOSPC / EDQUOT through the wrapped WASI functions.
	fd, e = g.pathOpen("big", oCreat, 0, rightWrite)
	if e != wSuccess {
		t.Fatal("open big", e)
	}
	if _, e := g.write(fd, bytes.Repeat([]byte("x"), 56)); e != wNospc { // 9 (seed.txt) + 56 > 64
		t.Fatalf("fd_write past byte quota: errno %d, want ENOSPC(%d)", e, wNospc)
	}
	if b, _ := ws.ReadFile("big"); len(b) != 0 {
		t.Fatal("partial write", len(b))
	}
	if e := g.call("fd_filestat_set_size", uint64(fd), 1000); e != wNospc {
		t.Fatal("ftruncate past quota", e)
	}
	g.call("fd_close", uint64(fd))
	// Files: seed.txt, big + 2 more = 4.
	for _, d := range []string{"d1", "d2"} {
		if e := g.pathCall("path_create_directory", d); e != wSuccess {
			t.Fatal(d, e)
		}
	}
	if e := g.pathCall("path_create_directory", "d3"); e != wDquot {
		t.Fatalf("mkdir past file quota: errno %d, want EDQUOT(%d)", e, wDquot)
	}
	if _, e := g.pathOpen("f5", oCreat, 0, rightWrite); e != wDquot {
		t.Fatalf("create past file quota: errno %d, want EDQUOT(%d)", e, wDquot)
	}

	// Too many open handles: EMFILE (the preopen's handle counts too).
	var fds []uint32
	for {
		fd, e := g.pathOpen("seed.txt", 0, 0, rightRead)
		if e != wSuccess {
			if e != wMfile {
				t.Fatalf("open past handle limit: errno %d, want EMFILE(%d)", e, wMfile)
			}
			break
		}
		fds = append(fds, fd)
		if len(fds) > DefaultMaxOpenFiles {
			t.Fatal("no handle limit")
		}
	}
	if len(fds) != DefaultMaxOpenFiles-1 {
		t.Fatal("handles opened:", len(fds))
	}
	for _, fd := range fds {
		g.call("fd_close", uint64(fd))
	}

	// Change tracking saw the guest's work.
	if got := fmtChanges(ws.Changes()); got != "big created 0 false|d1 created 0 true|d2 created 0 true" {
		t.Fatal(got)
	}
}

// Without the wrapper (or without the context) wazero reports quota
// failures as EIO: documented, and checked here so a wazero upgrade that
// changes it is noticed.
func TestWASIQuotaWithoutWrapperIsEIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap bool
		ctx  bool
	}{{"plain wazero WASI", false, true}, {"wrapper without context", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := New(Limits{MaxBytes: 4})
			ctx := context.Background()
			if tc.ctx {
				ctx = NewContext(ctx, ws)
			}
			g := newGuest(t, ctx, ws, tc.wrap)
			fd, e := g.pathOpen("f", oCreat, 0, rightWrite)
			if e != wSuccess {
				t.Fatal(e)
			}
			if _, e := g.write(fd, []byte("12345")); e != wIo {
				t.Fatalf("errno %d, want EIO(%d)", e, wIo)
			}
		})
	}
}
