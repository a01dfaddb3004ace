package wasmbox_test

import (
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// Behaviours where the interpreter once differed from CPython on Linux (found by CPython's own test suite run
// in the sandbox). Each program prints lines that must all end in " ok".
func checkLines(t *testing.T, res *wasmbox.Result, want int) {
	t.Helper()
	if res.Exception != nil {
		t.Fatalf("exception: %s", res.Exception.Traceback)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != want {
		t.Fatalf("%d lines, want %d:\n%s\nstderr: %s", len(lines), want, res.Stdout, res.Stderr)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " ok") {
			t.Errorf("%s", l)
		}
	}
}

// pydoc imports _pyrepl.pager at module level: without _pyrepl in the stdlib, `import pydoc`, help() and
// `import enum`'s doc tests failed. help() without a terminal pages to stdout, as natively.
func TestPydocAndHelp(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import pydoc, enum
help(len)
`)
	if res.Exception != nil {
		t.Fatalf("exception: %s", res.Exception.Traceback)
	}
	if !strings.Contains(res.Stdout, "Help on built-in function len in module builtins") {
		t.Fatalf("help(len) printed %q", res.Stdout)
	}
}

// site.py is not run, so the boot driver installs what site adds to builtins.
func TestSiteBuiltins(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import builtins
for n in ("help", "exit", "quit", "copyright", "credits", "license"):
    print(n, "ok" if hasattr(builtins, n) else "missing")
print("repr", "ok" if repr(exit) == "Use exit() or Ctrl-D (i.e. EOF) to exit" else repr(exit))
`)
	checkLines(t, res, 7)
	res = run(t, sb, "print('before')\nquit(7)\nprint('after')")
	if res.ExitCode != 7 || res.Stdout != "before\n" || res.Exception != nil {
		t.Fatalf("quit(7): exit %d, stdout %q, exception %v", res.ExitCode, res.Stdout, res.Exception)
	}
	// exit() does not close stdin: a Session's next run can still read it.
	sess, err := sb.NewSession(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(t.Context())
	if r, err := sess.Exec(t.Context(), "exit(0)"); err != nil || r.ExitCode != 0 {
		t.Fatalf("exit(0): %v %+v", err, r)
	}
	r, err := sess.Exec(t.Context(), "import sys; print(sys.stdin.closed)")
	if err != nil || strings.TrimSpace(r.Stdout) != "False" {
		t.Fatalf("stdin after exit(): %v %q %v", err, r.Stdout, r.Exception)
	}
}

// sys._stdlib_dir is set, so frozen stdlib modules have __file__ and inspect finds their source. (Functions of
// frozen modules keep "<frozen NAME>" as their file, natively too, so getsource of one fails on Linux as well.)
func TestStdlibDirAndFrozenSource(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import sys, os, abc, inspect, _collections_abc, codecs
print("stdlib_dir", "ok" if sys._stdlib_dir == "/usr/local/lib/python3.13" else sys._stdlib_dir)
print("os.__file__", "ok" if os.__file__ == "/usr/local/lib/python3.13/os.py" else getattr(os, "__file__", None))
print("getsource(abc)", "ok" if "class ABCMeta" in inspect.getsource(abc) else "wrong")
print("getsource(_collections_abc)", "ok" if "class Sized" in inspect.getsource(_collections_abc) else "wrong")
print("getsourcefile(codecs)", "ok" if inspect.getsourcefile(codecs) == "/usr/local/lib/python3.13/codecs.py" else inspect.getsourcefile(codecs))
`)
	checkLines(t, res, 5)
}

// A second connection reads while another holds a write transaction (SQLite's "unix" VFS with in-process
// locks; WASI's default unix-dotfile VFS said "database is locked"), and two writers still exclude each other.
func TestSQLiteReadDuringWriteTransaction(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import sqlite3
c1 = sqlite3.connect("t.db", timeout=0)
c1.execute("create table t(x)")
c1.execute("insert into t values (1)")
c1.commit()
c1.execute("insert into t values (2)")          # opens a write transaction (RESERVED lock)
print("in_transaction", "ok" if c1.in_transaction else "no")
c2 = sqlite3.connect("t.db", timeout=0)
print("read during write", "ok" if c2.execute("select x from t").fetchall() == [(1,)] else "wrong")
try:
    c2.execute("insert into t values (3)")
    print("second writer", "not excluded")
except sqlite3.OperationalError as e:
    print("second writer", "ok" if "locked" in str(e) else str(e))
c2.rollback()
c1.commit()
print("after commit", "ok" if c2.execute("select x from t").fetchall() == [(1,), (2,)] else "wrong")
# A writer cannot commit while a reader holds its shared lock mid-statement, and can once it is done.
cur = c2.execute("select x from t")
cur.fetchone()
c1.execute("insert into t values (4)")
try:
    c1.commit()
    print("commit under reader", "not excluded")
except sqlite3.OperationalError as e:
    print("commit under reader", "ok" if "locked" in str(e) else str(e))
cur.fetchall()
c1.commit()
print("commit after reader", "ok" if c2.execute("select count(*) from t").fetchone() == (3,) else "wrong")
print("vfs", "ok" if sqlite3.connect("u.db").execute("pragma integrity_check").fetchone() == ("ok",) else "bad")
`)
	checkLines(t, res, 7)
}

// time.tzset exists and local time follows TZ: zone files from the tzdata mount, POSIX rules, and changes of
// os.environ["TZ"] within a run; TZ unset or empty is UTC.
func TestTimeZones(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Env: map[string]string{"TZ": "Europe/Paris"}})
	res := run(t, sb, `
import time, os, datetime
def show(name, got, want):
    print(name, "ok" if got == want else "got %r want %r" % (got, want))
t = 1719835200  # 2024-07-01 12:00 UTC
lt = time.localtime(t)
show("paris summer", (lt.tm_hour, lt.tm_isdst, lt.tm_zone), (14, 1, "CEST"))
lt = time.localtime(1704110400)  # 2024-01-01 12:00 UTC
show("paris winter", (lt.tm_hour, lt.tm_isdst), (13, 0))
show("constants", (time.timezone, time.altzone, time.daylight, time.tzname), (-3600, -7200, 1, ("CET", "CEST")))
show("mktime", time.mktime(time.localtime(t)), t)
show("far future (footer rule)", time.localtime(4102488000).tm_hour, 13)  # 2100-01-01 12:00 UTC
show("datetime", datetime.datetime.fromtimestamp(t).hour, 14)
os.environ["TZ"] = "EST5EDT,M3.2.0,M11.1.0"; time.tzset()
show("posix rule", (time.localtime(t).tm_hour, time.localtime(1704110400).tm_hour, time.tzname), (8, 7, ("EST", "EDT")))
os.environ["TZ"] = "Australia/Sydney"; time.tzset()
show("southern", (time.localtime(1704110400).tm_hour, time.localtime(1704110400).tm_isdst), (23, 1))
os.environ["TZ"] = "<+0530>-5:30"; time.tzset()
show("quoted name", (time.localtime(t).tm_hour, time.localtime(t).tm_min, time.tzname[0]), (17, 30, "+0530"))
os.environ["TZ"] = "Nowhere/Atlantis"; time.tzset()
show("unknown is UTC", time.localtime(t).tm_hour, 12)
os.environ["TZ"] = "../../../etc/passwd"; time.tzset()
show("no escape", time.localtime(t).tm_hour, 12)
del os.environ["TZ"]; time.tzset()
show("unset is UTC", (time.localtime(t).tm_hour, time.timezone), (12, 0))
`)
	checkLines(t, res, 12)
	// The next run without TZ is UTC again (the constants are recomputed for the new environment).
	sbUTC := newSandbox(t, wasmbox.Config{})
	res = run(t, sbUTC, `import time; print("utc", "ok" if (time.localtime(0).tm_hour, time.timezone, time.tzname[0]) == (0, 0, "UTC") else (time.localtime(0), time.timezone, time.tzname))`)
	checkLines(t, res, 1)
}

func TestGetuser(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `import getpass; print("default", "ok" if getpass.getuser() == "wasmbox" else getpass.getuser())`)
	checkLines(t, res, 1)
	sb = newSandbox(t, wasmbox.Config{Env: map[string]string{"USER": "alice"}})
	res = run(t, sb, `import getpass; print("from env", "ok" if getpass.getuser() == "alice" else getpass.getuser())`)
	checkLines(t, res, 1)
}

// The network is off by design, and every client learns it from one OSError raised by the socket module.
func TestNetworkDisabledError(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import socket, urllib.request, urllib.error, http.client
MSG = "network access is disabled in this sandbox by design"
def expect(name, f, cls):
    try:
        f()
        print(name, "no error")
    except cls as e:
        print(name, "ok" if MSG in str(e) and isinstance(e, OSError) else repr(e))
    except BaseException as e:
        print(name, "wrong exception", repr(e))
expect("getaddrinfo", lambda: socket.getaddrinfo("example.com", 80), socket.gaierror)
expect("gethostbyname", lambda: socket.gethostbyname("example.com"), socket.gaierror)
expect("create_connection", lambda: socket.create_connection(("example.com", 80)), OSError)
expect("socket()", lambda: socket.socket(), PermissionError)
expect("urlopen", lambda: urllib.request.urlopen("http://example.com/"), urllib.error.URLError)
expect("http.client", lambda: http.client.HTTPConnection("example.com").request("GET", "/"), OSError)
`)
	checkLines(t, res, 6)
}

// 5,000 nested parentheses are a SyntaxError (the tokenizer's limit of 200), as natively, not a MemoryError
// from a parser stack sized for wasmtime's small default stack.
func TestDeepParenthesesSyntaxError(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
for n in (199, 5000):
    src = "(" * n + ")" * n
    try:
        compile(src, "<s>", "eval")
        print(n, "ok" if n < 200 else "compiled")
    except SyntaxError as e:
        print(n, "ok" if "too many nested parentheses" in str(e) else repr(e))
    except BaseException as e:
        print(n, repr(e))
`)
	checkLines(t, res, 2)
}

// math.fma returns the correctly signed zero when the exact result underflows or cancels (wasi-libc's fma
// returned +0.0 for negative results that underflow).
func TestFmaSignedZero(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
import math
cases = [
    ((-1e-300, 1e-300, 0.0), -0.0), ((1e-300, -1e-300, -0.0), -0.0), ((1e-300, 1e-300, -0.0), 0.0),
    ((-1e-300, -1e-300, 0.0), 0.0), ((1.0, 1.0, -1.0), 0.0), ((-0.0, 1.0, -0.0), -0.0),
    ((0.0, 1.0, -0.0), 0.0), ((-5e-324, 0.5, 0.0), -0.0), ((2.0, 3.0, -6.0), 0.0),
    ((0.1, 0.1, -0.1 * 0.1), -8.326672684688674e-19), ((1e308, 10.0, -math.inf), -math.inf),
]
for args, want in cases:
    got = math.fma(*args)
    same = got == want and math.copysign(1, got) == math.copysign(1, want)
    print(args, "ok" if same else "got %r want %r" % (got, want))
`)
	checkLines(t, res, 11)
}

// f-strings: the debug form (=) keeps its exact source text with the lexer that copies each expression once
// (it copied the whole rest of the source at every '{'; the speed-up is measured, not asserted here).
func TestFStringDebugText(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `
x, width = 1, 5
def show(name, got, want):
    print(name, "ok" if got == want else "got %r want %r" % (got, want))
show("=", f"{x=}", "x=1")
show("spaces", f"{x = }", "x = 1")
show("conversion and spec", f"{x=!r:^{width}}", "x=  1  ")
show("spec", f"{x=:>3}", "x=  1")
show("nested", f"{f'{x=}'=}", "f'{x=}'='x=1'")
show("multi-line", eval('f"""{x\n=}"""'), "x\n=1")
show("comment", eval('f"""{x # note\n=}"""'), "x \n=1")
show("two", f"{x=} {x + 1 = }", "x=1 x + 1 = 2")
show("concat", eval("f'{x=}' 'a' f'{x*2=}'"), "x=1ax*2=2")
show("long", eval(("f'" + "{x} " * 255 + "' ") * 2), "1 " * 510)
`)
	checkLines(t, res, 10)
}
