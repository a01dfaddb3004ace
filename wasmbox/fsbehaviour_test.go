package wasmbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// The file system answers as Linux does, so the `except` clauses programs write for Linux work: writes to the
// read-only mounts are EROFS (IsADirectoryError for a directory, FileNotFoundError for a missing parent), never
// ENOSYS; /dev/null exists; os.set_blocking works on workspace and stdlib files. On every engine.
func TestFileSystemAnswersLikeLinux(t *testing.T) {
	const code = `import errno, os, sys
def errname(fn):
    try:
        r = fn()
        return "ok" if r is None or not isinstance(r, (str, bytes, int, bool)) else "ok:" + repr(r)
    except OSError as e:
        return type(e).__name__ + ":" + errno.errorcode.get(e.errno, str(e.errno))
stdlib = os.path.join(sys.prefix, "lib", "python3.13", "os.py")
checks = [
    ("stdlib w", lambda: open(stdlib, "w")),
    ("stdlib a", lambda: open(stdlib, "a")),
    ("new under /", lambda: open("/newfile", "w")),
    ("/ as file", lambda: open("/", "w")),
    ("missing parent", lambda: open("/nodir/x", "w")),
    ("packages new", lambda: open("/packages/x.py", "w")),
    ("stdlib excl", lambda: os.open(stdlib, os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
    ("mkdir /x", lambda: os.mkdir("/x")),
    ("devnull w", lambda: open(os.devnull, "w").write("x" * 100000)),
    ("devnull r", lambda: open(os.devnull).read()),
    ("devnull rb+", lambda: open(os.devnull, "rb+").read()),
    ("devnull excl", lambda: os.open(os.devnull, os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
    ("dev new", lambda: open("/dev/zero2", "w")),
    ("dev missing", lambda: open("/dev/zero")),
    ("dev list", lambda: ",".join(os.listdir("/dev"))),
    ("devnull chr", lambda: __import__("stat").S_ISCHR(os.stat(os.devnull).st_mode)),
]
for name, fn in checks:
    print(name, errname(fn))
open("f.txt", "w").write("x")
for name, path in (("workspace", "f.txt"), ("stdlib", stdlib), ("devnull", os.devnull)):
    fd = os.open(path, os.O_RDONLY)
    print("set_blocking " + name, errname(lambda: os.set_blocking(fd, False)), os.get_blocking(fd))
    print("set_blocking again " + name, errname(lambda: os.set_blocking(fd, True)), os.get_blocking(fd))
    os.close(fd)
`
	const want = `stdlib w OSError:EROFS
stdlib a OSError:EROFS
new under / OSError:EROFS
/ as file IsADirectoryError:EISDIR
missing parent FileNotFoundError:ENOENT
packages new OSError:EROFS
stdlib excl FileExistsError:EEXIST
mkdir /x OSError:EROFS
devnull w ok:100000
devnull r ok:''
devnull rb+ ok:b''
devnull excl FileExistsError:EEXIST
dev new OSError:EROFS
dev missing FileNotFoundError:ENOENT
dev list ok:'null'
devnull chr ok:True
set_blocking workspace ok False
set_blocking again workspace ok True
set_blocking stdlib ok False
set_blocking again stdlib ok True
set_blocking devnull ok False
set_blocking again devnull ok True
`
	forEngine(t, func(t *testing.T, engine string) {
		sb, err := wasmbox.New(context.Background(), wasmbox.Config{Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close(context.Background())
		res, err := sb.Run(context.Background(), code)
		if err != nil || res.Exception != nil {
			t.Fatalf("%v %+v\n%s", err, res.Exception, res.Stderr)
		}
		if res.Stdout != want {
			t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
		}
	})
}

// /dev/null keeps nothing: a program that writes to it without end costs no memory and leaves no trace for the
// next run, which reads it as empty.
func TestDevNullKeepsNothing(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `f = open("/dev/null", "wb", buffering=0)
chunk = b"x" * (1 << 20)
for _ in range(2048):  # 2 GiB, far past every quota and the memory limit
    f.write(chunk)
f.seek(1 << 40)
print(f.tell(), len(open("/dev/null", "rb").read()))`)
	if strings.TrimSpace(res.Stdout) != "0 0" {
		t.Fatalf("got %q %+v", res.Stdout, res.Exception)
	}
	res = run(t, sb, `print(len(open("/dev/null", "rb").read()), __import__("os").listdir("/dev"))`)
	if strings.TrimSpace(res.Stdout) != "0 ['null']" {
		t.Fatalf("second run: %q %+v", res.Stdout, res.Exception)
	}
}
