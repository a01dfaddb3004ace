package wasmbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
	"github.com/wasmbox/wasmbox/wheels/wheeltest"
)

// writeWheel writes a pure-Python wheel NAME-VERSION-py3-none-any.whl with the given module files.
func writeWheel(t *testing.T, dir, name, version string, requires []string, files map[string]string) {
	t.Helper()
	if _, err := (wheeltest.Wheel{Name: name, Version: version, Requires: requires, Files: files}).Write(dir); err != nil {
		t.Fatal(err)
	}
}

func wheelhouse(t *testing.T, allow ...string) *wheels.Wheelhouse {
	t.Helper()
	dir := t.TempDir()
	writeWheel(t, dir, "textfmt", "1.0", []string{"widthlib>=0.2"}, map[string]string{
		"textfmt/__init__.py": "from widthlib import width\ndef box(s):\n    return '[' + s.center(width(s) + 2) + ']'\n"})
	writeWheel(t, dir, "widthlib", "0.3", nil, map[string]string{"widthlib.py": "def width(s):\n    return len(s)\n"})
	wh, err := wheels.Open(dir, wheels.Options{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func TestPackagesAtNew(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Wheelhouse: wheelhouse(t, "textfmt", "widthlib"), Packages: []string{"textfmt"}})
	res := run(t, sb, "import textfmt\nprint(textfmt.box('hi'))\nopen('/packages/evil.py', 'w')")
	if res.Stdout != "[ hi ]\n" || res.Exception == nil || res.Exception.Type != "OSError" {
		t.Errorf("stdout %q exception %+v: want the package usable and /packages read-only", res.Stdout, res.Exception)
	}
	if _, err := wasmbox.New(context.Background(), wasmbox.Config{Packages: []string{"x"}}); !errors.Is(err, wasmbox.ErrInvalidConfig) {
		t.Errorf("Packages without a Wheelhouse: %v", err)
	}
}

func TestSessionInstallPackages(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Wheelhouse: wheelhouse(t, "textfmt", "widthlib")})
	ctx := context.Background()
	se, err := sb.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	if res, _ := se.Exec(ctx, "try:\n    import textfmt\nexcept ImportError:\n    print('missing')"); res.Stdout != "missing\n" {
		t.Fatalf("before install: %q", res.Stdout)
	}
	done, err := se.InstallPackages(ctx, "textfmt")
	if err != nil || len(done) != 2 {
		t.Fatalf("install: %v %+v", err, done)
	}
	if res, _ := se.Exec(ctx, "import textfmt\nprint(textfmt.box('ok'))"); res.Stdout != "[ ok ]\n" {
		t.Fatalf("after install: %q %v", res.Stdout, res.Exception)
	}
	// Other runs of the sandbox do not see the session's packages.
	if res := run(t, sb, "import importlib.util\nprint(importlib.util.find_spec('textfmt'))"); res.Stdout != "None\n" {
		t.Errorf("a fresh run sees the session's package: %q", res.Stdout)
	}
	// The allow-list is checked first, so nothing about the wheelhouse leaks to a request the policy refuses.
	if _, err := se.InstallPackages(ctx, "nosuch"); !errors.Is(err, wasmbox.ErrPackage) || !errors.Is(err, wheels.ErrNotAllowed) {
		t.Errorf("package outside the allow-list: %v", err)
	}
}

func TestPackagesPolicy(t *testing.T) {
	_, err := wasmbox.New(context.Background(), wasmbox.Config{Wheelhouse: wheelhouse(t, "textfmt"), Packages: []string{"textfmt"}})
	if !errors.Is(err, wheels.ErrNotAllowed) {
		t.Errorf("a dependency outside the allow-list: %v, want ErrNotAllowed", err)
	}
}

// The package layer is read-only to every program and immutable across runs: O_CREAT (with O_RDONLY) creates
// nothing, O_RDONLY|O_TRUNC empties nothing, and the next run sees the layer as New left it. A Session's layer is
// read-only to its programs too, while its InstallPackages still works.
func TestPackagesReadOnlyAcrossRuns(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Wheelhouse: wheelhouse(t, "textfmt", "widthlib"), Packages: []string{"textfmt"}})
	attack := `import errno, os
res = []
for p, fl in (("/packages/x.py", os.O_RDONLY | os.O_CREAT), ("/packages/textfmt/__init__.py", os.O_RDONLY | os.O_TRUNC),
              ("/packages/widthlib.py", os.O_WRONLY | os.O_TRUNC), ("/packages/textfmt/__init__.py", os.O_RDONLY | os.O_APPEND)):
    try:
        os.close(os.open(p, fl))
        res.append("opened")
    except OSError as e:
        res.append(errno.errorcode.get(e.errno, str(e.errno)))
for fn in (lambda: os.mkdir("/packages/d"), lambda: os.rename("/packages/widthlib.py", "/packages/w.py"),
           lambda: os.unlink("/packages/widthlib.py")):
    try:
        fn()
        res.append("done")
    except OSError as e:
        res.append(errno.errorcode.get(e.errno, str(e.errno)))
print(" ".join(res))
print(sorted(os.listdir("/packages")), os.path.getsize("/packages/textfmt/__init__.py") > 0)
`
	const want = "EROFS EROFS EROFS EROFS EROFS EROFS EROFS\n"
	for i := 0; i < 2; i++ {
		res := run(t, sb, attack)
		lines := strings.SplitAfterN(res.Stdout, "\n", 2)
		if len(lines) != 2 || lines[0] != want || strings.Contains(lines[1], "x.py") || !strings.Contains(lines[1], "True") {
			t.Fatalf("run %d: %q %v, want %q and an intact layer", i, res.Stdout, res.Exception, want)
		}
	}
	if res := run(t, sb, "import textfmt\nprint(textfmt.box('ok'))"); res.Stdout != "[ ok ]\n" {
		t.Fatalf("package broken after the attacks: %q %v", res.Stdout, res.Exception)
	}

	// A Session installs into its own layer, which its programs cannot write either.
	ctx := context.Background()
	sb2 := newSandbox(t, wasmbox.Config{Wheelhouse: wheelhouse(t, "textfmt", "widthlib")})
	se, err := sb2.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	if _, err := se.InstallPackages(ctx, "textfmt"); err != nil {
		t.Fatalf("InstallPackages on the session's layer: %v", err)
	}
	if res, _ := se.Exec(ctx, attack); !strings.HasPrefix(res.Stdout, want) || strings.Contains(res.Stdout, "x.py") {
		t.Fatalf("session: %q %v", res.Stdout, res.Exception)
	}
	if res, _ := se.Exec(ctx, "import textfmt\nprint(textfmt.box('s'))"); res.Stdout != "[ s ]\n" {
		t.Fatalf("session after install: %q %v", res.Stdout, res.Exception)
	}
}
