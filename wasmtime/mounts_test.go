package wasmtime

import (
	"testing"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

const readOnlyScript = `
import errno, os
def err(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def opener(p, fl):
    return lambda: os.close(os.open(p, fl))
out = []
for p in ("/packages/mod.py", "/packages/new.py", "/usr/local/lib/python3.13/os.py", "/usr/share/zoneinfo/UTC", "/new"):
    for fl in (os.O_RDONLY | os.O_CREAT, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_APPEND, os.O_WRONLY,
               os.O_CREAT | os.O_EXCL | os.O_WRONLY):
        out.append(err(opener(p, fl)))
for fn in (lambda: os.mkdir("/packages/d"), lambda: os.rename("/packages/mod.py", "/packages/m.py"),
           lambda: os.unlink("/packages/mod.py"), lambda: os.rmdir("/usr/share/zoneinfo/Europe"),
           lambda: os.utime("/packages/mod.py", (1, 1)), lambda: os.truncate("/usr/local/lib/python3.13/os.py", 0)):
    out.append(err(fn))
print(" ".join(sorted(set(out))), sorted(os.listdir("/packages")), open("/packages/mod.py").read())
fds = []
paths = ["/usr/local/lib/python3.13/os.py", "/usr/share/zoneinfo/UTC", "/packages/mod.py", "/", "/workspace", "/tmp"]
try:
    for i in range(5000):
        fds.append(os.open(paths[i % len(paths)], os.O_RDONLY))
except OSError as e:
    print(errno.errorcode[e.errno], len(fds) <= 1024)
for fd in fds:
    os.close(fd)
print(err(opener("/usr/local/lib/python3.13/os.py", os.O_RDONLY)))
`

// TestReadOnlyMountsBothEngines: every read-only mount refuses every write flag and mutating operation with
// EROFS (or what Linux answers first: EEXIST for O_CREAT|O_EXCL on an existing file, ENOENT for a missing one
// opened without O_CREAT), and one descriptor limit covers all mounts, identically on both engines.
func TestReadOnlyMountsBothEngines(t *testing.T) {
	const want = "EEXIST ENOENT EROFS ['mod.py'] x = 1\n\nEMFILE True\nok\n"
	for _, kind := range []string{"wasmtime", "wazero"} {
		it := loadInterp(t, kind)
		pkgs := vfs.New(vfs.Limits{})
		if err := pkgs.WriteFile("mod.py", []byte("x = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := newGuest(t, it, guestOpts{packages: pkgs})
		g.boot()
		if out := g.mustExec(readOnlyScript); out != want {
			t.Errorf("%s: %q, want %q", kind, out, want)
		}
		if b, _ := pkgs.ReadFile("mod.py"); string(b) != "x = 1\n" || len(pkgs.List()) != 1 {
			t.Errorf("%s: package layer changed: %q %v", kind, b, pkgs.List())
		}
	}
}
