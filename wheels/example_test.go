package wheels_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmbox/wasmbox/wheels"
)

// writeWheel writes a minimal pure-Python wheel into dir: the package files plus a .dist-info with METADATA, WHEEL
// and a RECORD that hashes them, which is all a wheel is.
func writeWheel(dir, name, version string, requires []string, files map[string]string) error {
	distInfo := name + "-" + version + ".dist-info/"
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files[distInfo+"METADATA"] = meta
	files[distInfo+"WHEEL"] = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

	f, err := os.Create(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"))
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	var record strings.Builder
	for path, content := range files {
		w, err := zw.Create(path)
		if err != nil {
			return err
		}
		w.Write([]byte(content))
		sum := sha256.Sum256([]byte(content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", path, base64.RawURLEncoding.EncodeToString(sum[:]), len(content))
	}
	record.WriteString(distInfo + "RECORD,,\n")
	w, err := zw.Create(distInfo + "RECORD")
	if err != nil {
		return err
	}
	w.Write([]byte(record.String()))
	return zw.Close()
}

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wheelhouse")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// A wheelhouse: a table formatter in two versions, each needing a width library, and a native-only package.
	writeWheel(dir, "textfmt", "1.0", []string{"wcwidthlite>=0.1"}, map[string]string{"textfmt/__init__.py": "VERSION = 1\n"})
	writeWheel(dir, "textfmt", "2.0", []string{"wcwidthlite>=0.2", `winterm; sys_platform == "win32"`},
		map[string]string{"textfmt/__init__.py": "VERSION = 2\n"})
	writeWheel(dir, "wcwidthlite", "0.2", nil, map[string]string{"wcwidthlite.py": "def width(s): return len(s)\n"})
	os.WriteFile(filepath.Join(dir, "numpy-2.1.0-cp313-cp313-manylinux_2_17_x86_64.whl"), nil, 0o644)

	wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"textfmt", "wcwidthlite", "numpy"}})
	if err != nil {
		panic(err)
	}
	plan, err := wh.Resolve(ctx, "textfmt", ">=1,<3")
	if err != nil {
		panic(err)
	}
	for _, w := range plan.Wheels() {
		fmt.Println("plan:", w.Name, w.Version, w.File)
	}

	layer := new(wheels.MemLayer) // an fs.FS: mount it at /packages
	installed, err := plan.Install(ctx, layer)
	if err != nil {
		panic(err)
	}
	fmt.Println("installed:", len(installed), "wheels,", len(layer.Paths()), "files")
	src, _ := layer.ReadFile("textfmt/__init__.py")
	fmt.Printf("textfmt/__init__.py: %s", src)

	_, err = wh.Resolve(ctx, "numpy", "")
	fmt.Println(err)
	_, err = wh.Resolve(ctx, "requests", "")
	fmt.Println(err)
	// Output:
	// plan: wcwidthlite 0.2 wcwidthlite-0.2-py3-none-any.whl
	// plan: textfmt 2.0 textfmt-2.0-py3-none-any.whl
	// installed: 2 wheels, 10 files
	// textfmt/__init__.py: VERSION = 2
	// wheels: needs native code: numpy: no pure-Python wheel; only platform-specific wheels or source distributions, which cannot run in the wasm sandbox (escalate to a container where the policy allows): numpy-2.1.0-cp313-cp313-manylinux_2_17_x86_64.whl
	// wheels: not allowed by policy: requests: not on the policy's allow-list (Options.Allow)
}
