package wasmbox_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// writeWheel writes a pure-Python wheel NAME-VERSION-py3-none-any.whl with the given module files.
func writeWheel(t *testing.T, dir, name, version string, requires []string, files map[string]string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	info := fmt.Sprintf("%s-%s.dist-info", name, version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	all := map[string]string{info + "/METADATA": meta, info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
	for k, v := range files {
		all[k] = v
	}
	var record strings.Builder
	for path, body := range all {
		w, _ := zw.Create(path)
		w.Write([]byte(body))
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", path, base64.RawURLEncoding.EncodeToString(sum[:]), len(body))
	}
	record.WriteString(info + "/RECORD,,\n")
	w, _ := zw.Create(info + "/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
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
