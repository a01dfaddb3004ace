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
