package wasmbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// The end of a program is CPython's: what a program left for shutdown (open files, atexit callbacks, an
// excepthook, finalizers, logging's handlers) happens before the run's result is read, so the workspace and
// FilesChanged show everything it wrote.

func wsFile(t *testing.T, res *wasmbox.Result, name string) string {
	t.Helper()
	b, err := res.Workspace.ReadFile(name)
	if err != nil {
		t.Fatalf("%s: %v (stderr %q)", name, err, res.Stderr)
	}
	return string(b)
}

func changed(res *wasmbox.Result, name string) (wasmbox.FileChange, bool) {
	for _, c := range res.FilesChanged {
		if c.Path == name {
			return c, true
		}
	}
	return wasmbox.FileChange{}, false
}

func TestEndOfRunClosesOpenFiles(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	cases := []struct{ name, code, file, want string }{
		{"global", `f = open("out.txt", "w"); f.write("hello")`, "out.txt", "hello"},
		{"binary", `f = open("out.bin", "wb"); f.write(b"\x00\x01" * 5000)`, "out.bin", strings.Repeat("\x00\x01", 5000)},
		{"held by another module", "import sys\nsys.keep = open('k.txt', 'w')\nsys.keep.write('kept')", "k.txt", "kept"},
		{"in a cycle", "a = []\na.append(a)\na.append(open('c.txt', 'w'))\na[1].write('cyc')\ndel a", "c.txt", "cyc"},
		{"function local after an exception", "def f():\n    g = open('e.txt', 'w')\n    g.write('before')\n    raise ValueError('x')\nf()", "e.txt", "before"},
		{"after sys.exit", "import sys\nf = open('x.txt', 'w')\nf.write('exit')\nsys.exit(3)", "x.txt", "exit"},
		{"text over a buffer", "import io\nraw = open('t.txt', 'wb')\nw = io.TextIOWrapper(raw, encoding='utf-8')\nw.write('wrapped é')", "t.txt", "wrapped é"},
		// Opened after the first look for open files: by the finalizer of a cycle the last collection frees, and
		// by a gc callback during that collection (which may find nothing at all).
		{"opened by a cycle's finalizer", "import builtins\nclass D:\n    def __del__(self, b=builtins):\n        b.late = open('fin.txt', 'w')\n        b.late.write('late')\nd = D()\nd.me = d\ndel d", "fin.txt", "late"},
		{"opened by a gc callback at the end", "import atexit, builtins, gc\natexit.register(setattr, builtins, 'ending', True)\ndef cb(phase, info, b=builtins):\n    if phase == 'stop' and getattr(b, 'ending', False) and not hasattr(b, 'cbf'):\n        b.cbf = open('cb.txt', 'w')\n        b.cbf.write('callback')\ngc.callbacks.append(cb)", "cb.txt", "callback"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := sb.Run(t.Context(), c.code)
			if err != nil {
				t.Fatal(err)
			}
			if got := wsFile(t, res, c.file); got != c.want {
				t.Fatalf("%s holds %q, want %q", c.file, got, c.want)
			}
			if ch, ok := changed(res, c.file); !ok || ch.Size != int64(len(c.want)) {
				t.Fatalf("FilesChanged %+v: want %s with size %d", res.FilesChanged, c.file, len(c.want))
			}
		})
	}
}

func TestEndOfRunAtexitExcepthookFinalizers(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `import atexit; atexit.register(print, "bye"); atexit.register(print, "first"); print("main")`)
	if res.Stdout != "main\nfirst\nbye\n" {
		t.Fatalf("atexit: stdout %q", res.Stdout)
	}
	res = run(t, sb, `import sys; sys.excepthook = lambda t, v, tb: print("hook:", v); raise ValueError("boom")`)
	if res.Stdout != "hook: boom\n" || res.Stderr != "" || res.ExitCode != 1 {
		t.Fatalf("excepthook: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Exception == nil || res.Exception.Type != "ValueError" {
		t.Fatalf("the host's report must not depend on the hook: %+v", res.Exception)
	}
	res = run(t, sb, `import sys; sys.excepthook = lambda *a: 1/0; raise ValueError("boom")`)
	for _, want := range []string{"Error in sys.excepthook:", "ZeroDivisionError", "Original exception was:", "ValueError: boom"} {
		if !strings.Contains(res.Stderr, want) {
			t.Fatalf("failing excepthook: stderr lacks %q:\n%s", want, res.Stderr)
		}
	}
	if strings.Contains(res.Stderr, "wasmbox_boot") {
		t.Fatalf("the driver's frames leak into the hook's traceback:\n%s", res.Stderr)
	}
	res = run(t, sb, "class D:\n    def __del__(self):\n        open('del.txt', 'w').write('finalized')\nd = D()\n")
	if got := wsFile(t, res, "del.txt"); got != "finalized" {
		t.Fatalf("del.txt %q", got)
	}
	// logging.shutdown (registered with atexit by logging) flushes a buffering handler.
	res = run(t, sb, `
import logging, logging.handlers
target = logging.FileHandler("log.txt")
logging.getLogger().addHandler(logging.handlers.MemoryHandler(100, target=target))
logging.warning("kept")
`)
	if got := wsFile(t, res, "log.txt"); got != "kept\n" {
		t.Fatalf("log.txt %q", got)
	}
	// An exception in an atexit callback is reported and the others still run, as natively.
	res = run(t, sb, "import atexit\natexit.register(print, 'second')\natexit.register(lambda: 1/0)\n")
	if res.Stdout != "second\n" || !strings.Contains(res.Stderr, "ZeroDivisionError") {
		t.Fatalf("failing atexit callback: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// Shutdown runs inside the run's deadline: a callback that never returns is stopped on time.
func TestEndOfRunKeepsTheDeadline(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Timeout: 500 * time.Millisecond})
	start := time.Now()
	res, err := sb.Run(t.Context(), "import atexit\n@atexit.register\ndef spin():\n    while True: pass\nprint('main')")
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the run took %v past a 500 ms deadline", el)
	}
	if res == nil || !strings.Contains(res.Stdout, "main") {
		t.Fatalf("result %+v", res)
	}
	// __del__ that never returns, too.
	_, err = sb.Run(t.Context(), "class D:\n    def __del__(self):\n        while True: pass\nd = D()\n")
	if !errors.Is(err, wasmbox.ErrTimeout) {
		t.Fatalf("spinning finalizer: err %v, want ErrTimeout", err)
	}
}

// A Session flushes its open files at the end of every Exec (they stay open) and ends its program at Close.
func TestSessionFlushesEachExecAndEndsAtClose(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	ws := wasmbox.NewWorkspace(0, 0)
	sess, err := sb.NewSession(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Exec(t.Context(), "import atexit\nf = open('s.txt', 'w')\nf.write('one')\natexit.register(lambda: open('bye.txt', 'w').write('closed'))")
	if err != nil {
		t.Fatal(err)
	}
	if got := wsFile(t, res, "s.txt"); got != "one" {
		t.Fatalf("after exec 1: %q", got)
	}
	if _, ok := changed(res, "s.txt"); !ok {
		t.Fatalf("FilesChanged %+v lacks s.txt", res.FilesChanged)
	}
	res, err = sess.Exec(t.Context(), "f.write(' two'); print(f.closed)")
	if err != nil || res.Stdout != "False\n" {
		t.Fatalf("exec 2: %v %q %v", err, res.Stdout, res.Exception)
	}
	if got := wsFile(t, res, "s.txt"); got != "one two" {
		t.Fatalf("after exec 2: %q", got)
	}
	if _, err := ws.ReadFile("bye.txt"); err == nil {
		t.Fatal("atexit ran at the end of an Exec, not at Close")
	}
	if err := sess.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b, err := ws.ReadFile("bye.txt"); err != nil || string(b) != "closed" {
		t.Fatalf("atexit at Close: %q %v", b, err)
	}
}

// Modes: the workspace stores them, os.stat reports them, os.chmod and os.fchmod set them, and the stdlib's
// archivers and shutil carry them.
func TestFileModes(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import os, stat, shutil, tarfile, zipfile
m = lambda p: oct(stat.S_IMODE(os.stat(p).st_mode))
open("m.txt", "w").close(); os.mkdir("d")
print("defaults", m("m.txt"), m("d"), m("/usr/local/lib/python3.13/os.py"), m("/tmp"))
os.chmod("m.txt", 0o755); print("chmod", m("m.txt"))
with open("m.txt") as f:
    os.fchmod(f.fileno(), 0o600)
    print("fchmod", oct(stat.S_IMODE(os.fstat(f.fileno()).st_mode)))
open("/tmp/t", "w").close(); os.chmod("/tmp/t", 0o700); print("tmp", m("/tmp/t"))
open("c.txt", "w").close(); os.chmod("m.txt", 0o751); shutil.copymode("m.txt", "c.txt"); print("copymode", m("c.txt"))
with tarfile.open("a.tar", "w") as t: t.add("m.txt")
with tarfile.open("a.tar") as t: print("tarinfo", oct(t.getmember("m.txt").mode)); t.extractall("x", filter="data")
print("tar", m("x/m.txt"))
with zipfile.ZipFile("a.zip", "w") as z: z.write("m.txt")
print("zip", oct(zipfile.ZipFile("a.zip").getinfo("m.txt").external_attr >> 16 & 0o777))
try:
    os.chmod("/usr/local/lib/python3.13/os.py", 0o777)
except OSError as e:
    print("readonly", e.errno == __import__("errno").EROFS)
print("samefile", os.path.samefile("m.txt", "./m.txt"), os.stat("m.txt").st_dev == os.stat("d").st_dev)
os.makedirs("e/f", 0o555); print("mkdir", m("e/f"), m("e"))
import tempfile; fd, name = tempfile.mkstemp(dir="."); os.close(fd); print("mkstemp", m(name)); os.remove(name)
os.close(os.open("o", os.O_CREAT | os.O_WRONLY)); print("os.open", m("o"))
shutil.copytree("e", "g"); print("copytree", m("g/f"))
print("scandir", sorted((e.name, oct(stat.S_IMODE(e.stat().st_mode))) for e in os.scandir(".") if e.name in "de"))
`)
	want := "defaults 0o644 0o755 0o644 0o755\nchmod 0o755\nfchmod 0o600\ntmp 0o700\ncopymode 0o751\n" +
		"tarinfo 0o751\ntar 0o751\nzip 0o751\nreadonly True\nsamefile True True\n" +
		"mkdir 0o555 0o755\nmkstemp 0o600\nos.open 0o755\ncopytree 0o555\nscandir [('d', '0o755'), ('e', '0o755')]\n"
	if res.Stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, want, res.Stderr)
	}
	info := map[string]uint32{}
	for _, f := range res.Workspace.Files() {
		info[f.Path] = uint32(f.Mode.Perm())
	}
	if info["m.txt"] != 0o751 || info["c.txt"] != 0o751 || info["d"] != 0o755 {
		t.Fatalf("the workspace stores %o %o %o", info["m.txt"], info["c.txt"], info["d"])
	}
}
