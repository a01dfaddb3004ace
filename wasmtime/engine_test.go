package wasmtime

import (
	"archive/zip"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/testcache"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/enginetest"
	"github.com/wasmbox/wasmbox/internal/execreq"
	"github.com/wasmbox/wasmbox/internal/vfs"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
	"github.com/wasmbox/wasmbox/internal/zipfs"
	"github.com/wasmbox/wasmbox/pyruntime/py"
)

// The interpreter, compiled once per engine kind for the whole test binary.
type testInterp struct {
	eng            engine.Engine
	mod            engine.Module
	compile        time.Duration
	stdlib, tzdata fs.FS
	root           fs.FS
	wasm           []byte
}

var (
	interpOnce   sync.Map // engine name -> *onceInterp
	cacheDirMade atomic.Bool
	cacheDir     = sync.OnceValue(func() string {
		d, err := os.MkdirTemp("", "wasmbox-wasmtime-test-")
		if err != nil {
			panic(err)
		}
		cacheDirMade.Store(true)
		return d
	})
)

// TestMain gives the sandboxes a temporary cache (testcache: never the user's) and removes the compiled code the
// engine tests made (over 100 MB) when they end.
func TestMain(m *testing.M) { testcache.Main(removingCache{m}) }

type removingCache struct{ m *testing.M }

func (r removingCache) Run() int {
	code := r.m.Run()
	if cacheDirMade.Load() {
		os.RemoveAll(cacheDir())
	}
	return code
}

type onceInterp struct {
	once sync.Once
	it   *testInterp
	err  error
}

func zipFSOf(t testing.TB, b []byte) fs.FS {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zipfs.New(zr)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func loadInterp(t testing.TB, kind string) *testInterp {
	t.Helper()
	v, _ := interpOnce.LoadOrStore(kind, &onceInterp{})
	o := v.(*onceInterp)
	o.once.Do(func() {
		ctx := context.Background()
		a, err := assets.Load()
		if err != nil {
			o.err = err
			return
		}
		var eng engine.Engine
		switch kind {
		case "wasmtime":
			eng, err = newWasmtime(ctx, wasmtimeConfig{CacheDir: filepath.Join(cacheDir(), "wasmtime")})
		case "wazero":
			eng, err = engine.NewWazero(ctx, engine.WazeroConfig{CacheDir: filepath.Join(cacheDir(), "wazero")})
		}
		if err != nil {
			o.err = err
			return
		}
		start := time.Now()
		mod, err := eng.Compile(ctx, a.Wasm)
		if err != nil {
			o.err = err
			return
		}
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, d := range []string{"packages/", "tmp/", "usr/local/lib/python3.13/", "usr/share/zoneinfo/", "workspace/"} {
			_, _ = zw.Create(d)
		}
		_ = zw.Close()
		o.it = &testInterp{eng: eng, mod: mod, compile: time.Since(start), wasm: a.Wasm,
			stdlib: zipFSOf(t, a.Stdlib), tzdata: zipFSOf(t, a.TZData), root: zipFSOf(t, buf.Bytes())}
	})
	if o.err != nil {
		t.Fatalf("%s interpreter: %v", kind, o.err)
	}
	return o.it
}

// testHost serves wasmbox_v1 for a test guest: exceptions are recorded; Tick kills at once when ctx is done.
type testHost struct {
	exception map[string]any
	ticks     int
	fss       []*vfs.FS // the writable file systems whose modes chmod changes (as wasmbox's host does)
}

func (h *testHost) Call(_ context.Context, req []byte) ([]byte, bool) {
	var r map[string]any
	if err := json.Unmarshal(req, &r); err != nil {
		return hostfuncs.ErrorResponse("ABIError", err.Error()), true
	}
	switch r["op"] {
	case "exception":
		h.exception = r
	case "unwinding":
	case "chmod":
		// As wasmbox's host (wasmbox/guest.go): the file by its device and inode, on a writable file system.
		var c struct {
			Dev, Ino uint64
			Mode     uint32
		}
		if err := json.Unmarshal(req, &c); err != nil {
			return hostfuncs.ErrorResponse("ABIError", err.Error()), true
		}
		for _, f := range h.fss {
			if f.Dev() == c.Dev {
				if errno := f.ChmodIno(c.Ino, fs.FileMode(c.Mode)&fs.ModePerm); errno != 0 {
					return []byte(`"ENOENT"`), false
				}
				return []byte(`"ok"`), false
			}
		}
		return []byte(`"EROFS"`), false
	default:
		return hostfuncs.ErrorResponse("ABIError", fmt.Sprintf("unknown op %v", r["op"])), true
	}
	return []byte("null"), false
}

func (h *testHost) Tick(ctx context.Context) (int32, bool) {
	h.ticks++
	if ctx.Err() != nil {
		return 0, true
	}
	return hostfuncs.TickInterval, false
}

type testGuest struct {
	t              testing.TB
	inst           engine.Instance
	host           *testHost
	stdout, stderr bytes.Buffer
	ws, tmp        *vfs.FS
}

type guestOpts struct {
	ws       *vfs.FS
	memory   engine.MemoryAllocator
	mod      engine.Module
	packages *vfs.FS // mounted read-only at /packages (an empty fs.FS if nil)
}

// newGuest instantiates the interpreter in wasmbox's mount layout (wasmbox/interp.go, guest.go).
func newGuest(t testing.TB, it *testInterp, o guestOpts) *testGuest {
	t.Helper()
	g, cfg := newGuestState(t, it, o)
	mod := o.mod
	if mod == nil {
		mod = it.mod
	}
	inst, err := mod.Instantiate(context.Background(), cfg)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	g.inst = inst
	t.Cleanup(func() { _ = inst.Close(context.Background()) })
	return g
}

// newGuestState is a guest with new output buffers, host, /tmp and (unless o has one) workspace, and the
// instance configuration that gives them to an instance; the instance is still to be made or reused.
func newGuestState(t testing.TB, it *testInterp, o guestOpts) (*testGuest, engine.InstanceConfig) {
	g := &testGuest{t: t, host: &testHost{}, ws: o.ws, tmp: vfs.New(vfs.Limits{})}
	if g.ws == nil {
		g.ws = vfs.New(vfs.Limits{})
	}
	g.host.fss = []*vfs.FS{g.ws, g.tmp}
	pkgs := engine.Mount{GuestPath: "/packages", FS: embed.FS{}}
	if o.packages != nil {
		pkgs = engine.Mount{GuestPath: "/packages", SysFS: o.packages, ReadOnly: true}
	}
	start := time.Now()
	cfg := engine.InstanceConfig{
		Stdout: &g.stdout,
		Stderr: &g.stderr,
		Mounts: []engine.Mount{
			{GuestPath: "/", FS: it.root},
			{GuestPath: "/usr/local/lib/python3.13", FS: it.stdlib},
			{GuestPath: "/usr/share/zoneinfo", FS: it.tzdata},
			pkgs,
			{GuestPath: "/workspace", SysFS: g.ws},
			{GuestPath: "/tmp", SysFS: g.tmp},
		},
		Walltime:  func() (int64, int32) { n := time.Now(); return n.Unix(), int32(n.Nanosecond()) },
		Nanotime:  func() int64 { return int64(time.Since(start)) },
		Nanosleep: func(ns int64) { time.Sleep(time.Duration(ns)) },
		Rand:      strings.NewReader(strings.Repeat("0123456789abcdef", 1<<16)),
		Memory:    o.memory,
		Host:      g.host,
	}
	return g, cfg
}

func (g *testGuest) call(ctx context.Context, fn string, params ...uint64) []uint64 {
	g.t.Helper()
	res, err := g.inst.Call(ctx, fn, params...)
	if err != nil {
		g.t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", fn, err, g.stdout.String(), g.stderr.String())
	}
	return res
}

// callWithBytes copies data into the guest and calls fn(ptr, len).
func (g *testGuest) callWithBytes(ctx context.Context, fn string, data []byte) (int32, error) {
	res, err := g.inst.Call(ctx, hostfuncs.ExportAlloc, uint64(len(data)))
	if err != nil {
		return 0, err
	}
	ptr := uint32(res[0])
	if ptr == 0 || !g.inst.Write(ptr, data) {
		return 0, errors.New("guest allocation failed")
	}
	res, err = g.inst.Call(ctx, fn, uint64(ptr), uint64(len(data)))
	if err != nil {
		return 0, err
	}
	if _, err := g.inst.Call(ctx, hostfuncs.ExportFree, uint64(ptr)); err != nil {
		return 0, err
	}
	return int32(res[0]), nil
}

// boot runs _initialize, init and prepare (the run driver), as wasmbox's initGuest does.
func (g *testGuest) boot() {
	g.t.Helper()
	ctx := context.Background()
	g.call(ctx, hostfuncs.ExportInitialize)
	if v := int32(g.call(ctx, hostfuncs.ExportABIVersion)[0]); v != hostfuncs.ABIVersion {
		g.t.Fatalf("ABI %d, want %d", v, hostfuncs.ABIVersion)
	}
	if rc := int32(g.call(ctx, hostfuncs.ExportInit)[0]); rc != 0 {
		g.t.Fatalf("init: %d\n%s%s", rc, g.stdout.String(), g.stderr.String())
	}
	g.prepare()
}

func (g *testGuest) prepare() {
	g.t.Helper()
	var b strings.Builder
	b.WriteString("import sys, types\n")
	b.WriteString("m = types.ModuleType('_wasmbox_boot')\nm.__file__ = '<wasmbox_boot>'\n")
	src, _ := json.Marshal(py.Boot)
	fmt.Fprintf(&b, "exec(compile(%s, '<wasmbox_boot>', 'exec'), m.__dict__)\n", src)
	b.WriteString("sys.modules['_wasmbox_boot'] = m\nm.install()\ndel m\n")
	b.WriteString("import gc\ngc.collect()\ngc.freeze()\nsys.stdout.flush()\nsys.stderr.flush()\n")
	rc, err := g.callWithBytes(context.Background(), hostfuncs.ExportPrepare, []byte(b.String()))
	if err != nil || rc != 0 {
		g.t.Fatalf("prepare: rc=%d err=%v\n%s%s", rc, err, g.stdout.String(), g.stderr.String())
	}
	g.stdout.Reset()
	g.stderr.Reset()
}

// exec runs one program; it returns the exit code and the call's error (a kill, an exit).
func (g *testGuest) exec(ctx context.Context, code string) (int32, error) {
	g.stdout.Reset()
	g.stderr.Reset()
	g.host.exception = nil
	return g.callWithBytes(ctx, hostfuncs.ExportExec, execRequest(code))
}

// execRequest is the run request of docs/ABI.md for code, as the sandbox encodes it.
func execRequest(code string) []byte {
	b, err := (&execreq.Request{Code: code, Filename: "<test>", Argv: []string{"<test>"}, Env: map[string]string{}}).Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func (g *testGuest) mustExec(code string) string {
	g.t.Helper()
	rc, err := g.exec(context.Background(), code)
	if err != nil || rc != 0 {
		g.t.Fatalf("exec: rc=%d err=%v exception=%v\nstdout: %s\nstderr: %s", rc, err, g.host.exception, g.stdout.String(), g.stderr.String())
	}
	return g.stdout.String()
}

func TestWasmtimeProvidesEveryImport(t *testing.T) {
	a, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmbin.Decode(a.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range wasiFunctionNames() {
		have[n] = true
	}
	var wasi []string
	for _, im := range m.Imports() {
		switch im.Module {
		case "wasi_snapshot_preview1":
			wasi = append(wasi, im.Name)
			if !have[im.Name] {
				t.Errorf("the interpreter imports %s.%s, which the wasmtime engine does not define", im.Module, im.Name)
			}
		case hostfuncs.ImportModule:
		default:
			t.Errorf("unexpected import %s.%s", im.Module, im.Name)
		}
	}
	sort.Strings(wasi)
	t.Logf("%d WASI imports: %s", len(wasi), strings.Join(wasi, " "))
}

func TestWasmtimePrint(t *testing.T) {
	it := loadInterp(t, "wasmtime")
	t.Logf("compile (or cache load): %v", it.compile)
	start := time.Now()
	g := newGuest(t, it, guestOpts{})
	g.boot()
	t.Logf("instantiate + init + prepare: %v", time.Since(start))
	if out := g.mustExec("print(1)"); out != "1\n" {
		t.Fatalf("stdout %q", out)
	}
	// The standard library, zoneinfo, the clocks and the environment all work.
	out := g.mustExec(`
import os, sys, json, zoneinfo, datetime, time, random, hashlib
print(os.getcwd(), sys.platform)
print(sorted(os.listdir("/")))
print(len(os.listdir("/usr/local/lib/python3.13")) > 100)
print(datetime.datetime(2024, 7, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).utcoffset())
t = time.monotonic(); time.sleep(0.01); print(time.monotonic() - t >= 0.01)
print(time.time() > 1.7e9, len(os.urandom(8)))
print(hashlib.sha256(b"x").hexdigest()[:8])
`)
	want := "/workspace wasi\n['packages', 'tmp', 'usr', 'workspace']\nTrue\n2:00:00\nTrue\nTrue 8\n2d711642\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	// An exception reaches the host through the call import.
	rc, err := g.exec(context.Background(), "1/0")
	if err != nil || rc != 1 || g.host.exception["type"] != "ZeroDivisionError" {
		t.Fatalf("rc=%d err=%v exception=%v", rc, err, g.host.exception)
	}
}

const workspaceScript = `
import os, shutil, tempfile, errno
def name(e): return errno.errorcode.get(e.errno, e.errno)
print(open("/workspace/in.txt").read())
os.makedirs("sub/deeper", exist_ok=True)
with open("sub/deeper/out.txt", "w") as f:
    f.write("hello\n" * 3)
with open("sub/deeper/out.txt", "a") as f:
    f.write("more")
print(os.path.getsize("sub/deeper/out.txt"), sorted(os.listdir("sub")), sorted(os.listdir(".")))
os.rename("sub/deeper/out.txt", "moved.txt")
with open("moved.txt", "r+b") as f:
    f.seek(6); print(f.read(5)); f.truncate(6)
print(open("moved.txt").read() == "hello\n")
print(sorted(e.name for e in os.scandir("/workspace")), [p for p, _, _ in os.walk(".")])
shutil.rmtree("sub")
print(sorted(os.listdir(".")), os.path.exists("sub"))
with tempfile.NamedTemporaryFile(dir="/tmp") as f:
    f.write(b"x"); f.flush(); print(os.stat(f.name).st_size)
st = os.stat("moved.txt"); print(st.st_size, oct(st.st_mode), os.path.isdir("/usr"))
fd = os.open("moved.txt", os.O_RDONLY); print(os.pread(fd, 3, 1), os.lseek(fd, 0, os.SEEK_END)); os.close(fd)
os.utime("moved.txt", (1, 2)); print(os.stat("moved.txt").st_mtime)
print(sys.stdout.isatty() if (sys := __import__("sys")) else 0, os.get_terminal_size if False else "")
for p, m in (("/usr/local/lib/python3.13/os.py", "w"), ("/nonexistent/x", "r"), ("/usr", "w"), ("in.txt/x", "r")):
    try:
        open(p, m)
    except OSError as x:
        print(p, type(x).__name__, name(x))
for fn, args in ((os.symlink, ("in.txt", "link")), (os.link, ("in.txt", "link")), (os.mkdir, ("/usr/x",)),
                 (os.rename, ("in.txt", "/tmp/in.txt")), (os.rmdir, ("in.txt",)), (os.unlink, ("nope",)),
                 (os.readlink, ("in.txt",)), (os.mkdir, ("moved.txt",))):
    try:
        fn(*args); print(fn.__name__, "ok")
    except OSError as x:
        print(fn.__name__, name(x))
import socket
try:
    socket.socket()
except OSError as x:
    print("socket", name(x))
`

// TestWasmtimeWorkspace runs file operations on both engines: the guest must see the same results.
func TestWasmtimeWorkspace(t *testing.T) {
	outs := map[string]string{}
	for _, kind := range []string{"wasmtime", "wazero"} {
		it := loadInterp(t, kind)
		ws := vfs.New(vfs.Limits{})
		if err := ws.WriteFile("in.txt", []byte("from the host"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := newGuest(t, it, guestOpts{ws: ws})
		g.boot()
		outs[kind] = g.mustExec(workspaceScript)
		b, err := ws.ReadFile("moved.txt")
		if err != nil || string(b) != "hello\n" {
			t.Fatalf("%s: host sees %q, %v", kind, b, err)
		}
	}
	t.Logf("guest output:\n%s", outs["wasmtime"])
	if outs["wasmtime"] != outs["wazero"] {
		t.Fatalf("wasmtime:\n%s\nwazero:\n%s", outs["wasmtime"], outs["wazero"])
	}
}

func TestWasmtimeQuotaErrnos(t *testing.T) {
	it := loadInterp(t, "wasmtime")
	ws := vfs.New(vfs.Limits{MaxBytes: 4096, MaxFiles: 3})
	g := newGuest(t, it, guestOpts{ws: ws})
	g.boot()
	out := g.mustExec(`
import errno
def attempt(fn):
    try:
        fn(); return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
def big():
    with open("big", "wb") as f:
        f.write(b"x" * 10000)
def files():
    for i in range(10):
        open("f%d" % i, "w").close()
print(attempt(big), attempt(files))
`)
	if out != "ENOSPC EDQUOT\n" {
		t.Fatalf("stdout %q", out)
	}
}

func TestWasmtimeTickKill(t *testing.T) {
	it := loadInterp(t, "wasmtime")
	g := newGuest(t, it, guestOpts{})
	g.boot()
	for _, code := range []string{"while True: pass", "sum(range(10**13))"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		_, err := g.exec(ctx, code)
		cancel()
		if !errors.Is(err, engine.ErrKilled) {
			t.Fatalf("%s: err %v, want ErrKilled", code, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: killed after %v", code, d)
		} else {
			t.Logf("%s: killed after %v", code, d)
		}
		// The instance is unusable; a fresh one runs.
		if _, err := g.inst.Call(context.Background(), hostfuncs.ExportABIVersion); !errors.Is(err, engine.ErrKilled) {
			t.Fatalf("call after kill: %v", err)
		}
		g = newGuest(t, it, guestOpts{})
		g.boot()
		if out := g.mustExec("print(2)"); out != "2\n" {
			t.Fatalf("after kill: %q", out)
		}
	}
}

func TestWasmtimeExitAndLimits(t *testing.T) {
	it := loadInterp(t, "wasmtime")
	g := newGuest(t, it, guestOpts{memory: engine.LimitedAllocator(128 << 20)})
	g.boot()
	out := g.mustExec(`
import sys
try:
    x = bytearray(512 << 20)
except MemoryError:
    print("MemoryError")
def f(n): return f(n + 1)
try:
    f(0)
except RecursionError:
    print("RecursionError")
`)
	if out != "MemoryError\nRecursionError\n" {
		t.Fatalf("stdout %q", out)
	}
	if sz := g.inst.MemorySize(); sz > 128<<20 {
		t.Fatalf("memory %d past the limit", sz)
	}
	_, err := g.exec(context.Background(), "import os; os._exit(3)")
	var ee *engine.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("err %v, want exit 3", err)
	}
}

// TestWasmtimeSnapshot starts guests from a memory image of an initialised one, as wasmbox's snapshots do (the
// image is mapped copy-on-write on both engines where it lives in a file, and copied in by wasmtime from an
// allocator that only gives its bytes; the timings are logged).
func TestWasmtimeSnapshot(t *testing.T) {
	for _, kind := range []string{"wasmtime", "wazero"} {
		it := loadInterp(t, kind)
		start := time.Now()
		g, mod, image := snapshotOf(t, it)
		t.Logf("%s: image %d MiB, boot, snapshot and compile %v", kind, image.Size()>>20, time.Since(start))
		var times []string
		for k := range 5 {
			start := time.Now()
			s := newGuest(t, it, guestOpts{mod: mod, memory: image.Allocator(256 << 20)})
			out := s.mustExec(fmt.Sprintf("print(%d * 7)", k))
			if out != fmt.Sprintf("%d\n", k*7) {
				t.Fatalf("%s snapshot guest: %q", kind, out)
			}
			_ = s.inst.Close(context.Background())
			times = append(times, time.Since(start).Round(100*time.Microsecond).String())
		}
		t.Logf("%s: snapshot instance + print(…) + close: %s", kind, strings.Join(times, " "))
		if kind == "wasmtime" && runtime.GOOS == "linux" {
			// The image is mapped copy-on-write over wasmtime's memory, not copied: a new instance has written
			// none of it, and what one instance writes no other sees.
			a := newGuest(t, it, guestOpts{mod: mod, memory: image.Allocator(256 << 20)})
			private, err := engine.PrivateBytes(a.inst.MemoryBytes()[:image.Size()])
			if err != nil {
				t.Fatal(err)
			}
			if private > 64<<10 {
				t.Fatalf("a new instance holds %d private bytes of a %d-byte image: the image was copied, not mapped", private, image.Size())
			}
			if out := a.mustExec("import sys\nsys.LEAK = 1\nbig = bytearray(b'x' * (8 << 20))\nprint(sys.LEAK, len(big))"); out != "1 8388608\n" {
				t.Fatalf("the writing instance: %q", out)
			}
			if private, _ = engine.PrivateBytes(a.inst.MemoryBytes()[:image.Size()]); private == 0 {
				t.Fatal("an instance that wrote its memory holds no private page: the accounting above proves nothing")
			}
			b := newGuest(t, it, guestOpts{mod: mod, memory: image.Allocator(256 << 20)})
			if out := b.mustExec("import sys\nprint(hasattr(sys, 'LEAK'))"); out != "False\n" {
				t.Fatalf("an instance saw another's write: %q", out)
			}
		}
		if kind == "wasmtime" {
			// An allocator that states its limit and image (the optional methods memorySource looks for).
			a := imageBytesAllocator{MemoryAllocator: image.Allocator(256 << 20), limit: 256 << 20, image: g.inst.MemoryBytes()}
			start := time.Now()
			s := newGuest(t, it, guestOpts{mod: mod, memory: a})
			if out := s.mustExec("print(6 * 7)"); out != "42\n" {
				t.Fatalf("ImageBytes snapshot guest: %q", out)
			}
			t.Logf("%s: snapshot instance + print with ImageBytes: %v", kind, time.Since(start))
		}
	}
}

// snapshotOf boots a guest of it and makes what wasmbox's snapshots are: the image of its memory and the module
// rewritten to start from it (with wasmbin.ResetSection). The image is closed when the test ends.
func snapshotOf(t *testing.T, it *testInterp) (*testGuest, engine.Module, engine.Image) {
	t.Helper()
	g := newGuest(t, it, guestOpts{memory: engine.LimitedAllocator(256 << 20)})
	g.boot()
	sp, ok := g.inst.Global(hostfuncs.ExportStackPtr)
	if !ok {
		t.Fatal("no stack pointer")
	}
	image, err := engine.NewImage(g.inst.MemoryBytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = image.Close() })
	wasm, err := wasmbin.RewriteForSnapshot(it.wasm, map[string]uint64{
		hostfuncs.ExportStackPtr: sp, hostfuncs.ExportFuel: hostfuncs.TickInterval,
	}, 0, []string{hostfuncs.ExportInitialize})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := it.eng.Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return g, mod, image
}

type imageBytesAllocator struct {
	engine.MemoryAllocator
	limit uint64
	image []byte
}

func (a imageBytesAllocator) Limit() uint64      { return a.limit }
func (a imageBytesAllocator) ImageBytes() []byte { return a.image }

const w1 = `
import time
t = time.perf_counter()
s = 0
for i in range(3_000_000):
    s += i*i
print(time.perf_counter() - t)
`

// TestW1 times the W1 loop (compute-speed.md) on both engines, interleaved; the minimum of 5 runs is the figure
// to compare (the machine may be shared).
func TestW1(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	kinds := []string{"wasmtime", "wazero"}
	guests := map[string]*testGuest{}
	for _, kind := range kinds {
		g := newGuest(t, loadInterp(t, kind), guestOpts{})
		g.boot()
		guests[kind] = g
	}
	res := map[string][]float64{}
	for range 5 {
		for _, kind := range kinds {
			var v float64
			if _, err := fmt.Sscan(guests[kind].mustExec(w1), &v); err != nil {
				t.Fatal(err)
			}
			res[kind] = append(res[kind], v)
		}
	}
	for _, kind := range kinds {
		t.Logf("W1 %-8s min %.3fs  runs %.3f  [compile/cache load %v]", kind, slicesMin(res[kind]), res[kind], loadInterp(t, kind).compile)
	}
	t.Logf("W1 wazero/wasmtime: %.2fx", slicesMin(res["wazero"])/slicesMin(res["wasmtime"]))
}

func slicesMin(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// TestWasmtimeCache loads the module serialized by the first compile into a new engine.
func TestWasmtimeCache(t *testing.T) {
	it := loadInterp(t, "wasmtime") // compiled into cacheDir()/wasmtime
	ctx := context.Background()
	eng, err := newWasmtime(ctx, wasmtimeConfig{CacheDir: filepath.Join(cacheDir(), "wasmtime")})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	start := time.Now()
	mod, err := eng.Compile(ctx, it.wasm)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("cache load: %v (first compile %v)", d, it.compile)
	if d > time.Second {
		t.Errorf("cache load took %v", d)
	}
	g := newGuest(t, it, guestOpts{mod: mod})
	g.boot()
	if out := g.mustExec("print(1)"); out != "1\n" {
		t.Fatalf("stdout %q", out)
	}
}

// TestWasmtimeDeepRecursion: C-level recursion ends in CPython's own errors, not in a trap of the wasm stack.
func TestWasmtimeDeepRecursion(t *testing.T) {
	g := newGuest(t, loadInterp(t, "wasmtime"), guestOpts{})
	g.boot()
	out := g.mustExec(`
import json, sys
def attempt(fn):
    try:
        fn(); return "ok"
    except (RecursionError, MemoryError, SyntaxError) as e:
        return type(e).__name__
a = []
for _ in range(100000): a = [a]
print(attempt(lambda: json.dumps(a)), attempt(lambda: repr(a)), attempt(lambda: eval("(" * 5000 + ")" * 5000)))
sys.setrecursionlimit(100000)
def f(n): return f(n + 1)
print(attempt(lambda: f(0)))
`)
	if out != "RecursionError RecursionError SyntaxError\nRecursionError\n" {
		t.Fatalf("stdout %q", out)
	}
}

// TestWasmtimeConcurrent runs guests in parallel while another goroutine allocates (GC cycles must not wait for
// a goroutine in wasm), one of them killed by its deadline.
func TestWasmtimeConcurrent(t *testing.T) {
	it := loadInterp(t, "wasmtime")
	stop := make(chan struct{})
	var sink [][]byte
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				sink = append(sink, make([]byte, 1<<16))
				if len(sink) > 256 {
					sink = nil
				}
			}
		}
	}()
	defer close(stop)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newGuest(t, it, guestOpts{memory: engine.LimitedAllocator(256 << 20)})
			g.boot()
			if k == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				if _, err := g.exec(ctx, "while True: pass"); !errors.Is(err, engine.ErrKilled) {
					errs <- fmt.Errorf("guest 0: %v, want ErrKilled", err)
				}
				return
			}
			for range 3 {
				rc, err := g.exec(context.Background(), fmt.Sprintf("print(sum(range(%d)))", 100000*k))
				if want := fmt.Sprintf("%d\n", (100000*k)*(100000*k-1)/2); err != nil || rc != 0 || g.stdout.String() != want {
					errs <- fmt.Errorf("guest %d: rc=%d err=%v out=%q", k, rc, err, g.stdout.String())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestWasmtimeCallIntoBounds: the same bounds as the wazero engine's (enginetest.CheckCallInto).
func TestWasmtimeCallIntoBounds(t *testing.T) {
	ctx := context.Background()
	eng, err := newWasmtime(ctx, wasmtimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	enginetest.CheckCallIntoOn(t, eng)
}
