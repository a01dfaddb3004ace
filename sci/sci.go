// Package sci adds the "sci" runtime to a program that imports it: wasmbox's CPython 3.13 with numpy 2.2.4 and
// pandas 2.2.3 (and python-dateutil, pytz and six) built in, their C and C++ extension modules linked statically
// into the same instrumented interpreter as the base runtime, with the same host ABI and limits.
//
//	import _ "github.com/wasmbox/wasmbox/sci"
//
// after which wasmbox.Config{Runtime: "sci"} selects it, and its sandboxes start with numpy and pandas already
// imported (the runtime's default Preload; set Config.Preload to choose others). It is a Go module of its own so
// that programs that do not ask for it never download its artifacts (about 38 MB: the gzipped interpreter and its
// standard library with the packages' Python files). The CLI with this runtime linked in is
// github.com/wasmbox/wasmbox/sci/cmd/wasmbox-sci (`wasmbox-sci run --runtime sci prog.py`).
//
// The artifacts are those of pyruntime/sci/build.sh, embedded with their SHA-256 checksums (SHA256SUMS, checked
// when the runtime is first loaded) and the record of how they were built (BUILDINFO). The time zone database is
// the base runtime's. What works and what does not (threads, BLAS, 32-bit intp) is in docs/compatibility.md.
package sci

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmbox/wasmbox/assets"
)

var (
	//go:embed python.wasm.gz
	pythonWasmGz []byte
	//go:embed stdlib.zip
	stdlibZip []byte
	//go:embed BUILDINFO
	buildInfo []byte
	//go:embed SHA256SUMS
	sha256sums []byte
)

// Name is the runtime's name for wasmbox.Config.Runtime and the CLI's --runtime.
const Name = "sci"

// Packages are the packages built into the runtime, with their versions.
var Packages = map[string]string{
	"numpy": "2.2.4", "pandas": "2.2.3", "python-dateutil": "2.9.0", "pytz": "2025.2", "six": "1.17.0",
}

// ErrChecksum reports an embedded artifact whose SHA-256 differs from SHA256SUMS.
var ErrChecksum = errors.New("sci: checksum mismatch")

func init() {
	assets.RegisterRuntime(assets.Runtime{
		Name:        Name,
		Description: "CPython " + assets.PythonVersion + " with numpy 2.2.4 and pandas 2.2.3 built in",
		Preload:     []string{"numpy", "pandas"},
		Packages:    Packages,
		Load:        Load,
	})
}

// Load verifies the embedded artifacts against SHA256SUMS, decompresses the interpreter (and checks it too) and
// returns it. Programs select the runtime by name instead (wasmbox.Config.Runtime = "sci"), which loads it once
// per process; Load itself does the work on every call.
func Load() (*assets.Interpreter, error) {
	return load(pythonWasmGz, stdlibZip, buildInfo, sha256sums)
}

func load(gz, stdlib, info, sums []byte) (*assets.Interpreter, error) {
	want, err := parseSums(sums)
	if err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"python.wasm.gz": gz, "stdlib.zip": stdlib, "BUILDINFO": info} {
		if err := check(want, name, b); err != nil {
			return nil, err
		}
	}
	wasm, err := assets.Gunzip(gz)
	if err != nil {
		return nil, fmt.Errorf("sci: python.wasm.gz: %w", err)
	}
	if err := check(want, "python.wasm", wasm); err != nil {
		return nil, err
	}
	base, err := assets.LoadVerified()
	if err != nil {
		return nil, fmt.Errorf("sci: the base runtime's time zone data: %w", err)
	}
	return &assets.Interpreter{Wasm: wasm, WasmSHA256: want["python.wasm"], Stdlib: stdlib, TZData: base.TZData,
		BuildInfo: string(info)}, nil
}

func parseSums(sums []byte) (map[string]string, error) {
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || len(f[0]) != 2*sha256.Size {
			return nil, fmt.Errorf("sci: malformed SHA256SUMS line %q", sc.Text())
		}
		want[strings.TrimPrefix(f[1], "*")] = f[0]
	}
	for _, name := range []string{"python.wasm", "python.wasm.gz", "stdlib.zip", "BUILDINFO"} {
		if want[name] == "" {
			return nil, fmt.Errorf("sci: SHA256SUMS does not list %s", name)
		}
	}
	return want, nil
}

func check(want map[string]string, name string, b []byte) error {
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != want[name] {
		return fmt.Errorf("%w: %s", ErrChecksum, name)
	}
	return nil
}

// BuildInfo returns the embedded record of how the artifacts were built (inputs, versions, sizes).
func BuildInfo() string { return string(buildInfo) }
