// Package assets ships the wasmbox interpreter: CPython 3.13 built for WASI preview 1 by pyruntime/build.sh,
// instrumented for the hard deadline, with its pruned, precompiled standard library and Debian's tzdata.
//
// The files are embedded; nothing is read or decompressed until Load is called (no init() side effects).
// SHA256SUMS lists the checksum of every artifact and Load verifies them, so a corrupted or swapped file is an
// error, never a silently different interpreter. BUILDINFO records the exact inputs, flags and sizes.
//
// Rebuild and compare with `make verify-interpreter` (see pyruntime/README.md).
package assets

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
)

// The artifacts are embedded as byte slices, not read from an embed.FS: ReadFile would copy 15 MB at every
// process start.
var (
	//go:embed python.wasm.gz
	pythonWasmGz []byte
	//go:embed stdlib.zip
	stdlibZip []byte
	//go:embed tzdata.zip
	tzdataZip []byte
	//go:embed BUILDINFO
	buildInfo []byte
	//go:embed SHA256SUMS
	sha256sums []byte
)

// files is the embedded artifacts as a file system (no copies).
var files = bytesFS{"python.wasm.gz": pythonWasmGz, "stdlib.zip": stdlibZip, "tzdata.zip": tzdataZip,
	"BUILDINFO": buildInfo, "SHA256SUMS": sha256sums}

// ErrChecksum reports an artifact whose SHA-256 differs from SHA256SUMS.
var ErrChecksum = errors.New("assets: checksum mismatch")

// Interpreter is the loaded, verified interpreter.
type Interpreter struct {
	// Wasm is the decompressed, instrumented python.wasm (reactor model).
	Wasm []byte
	// WasmSHA256 is the hex SHA-256 of Wasm (decompressed).
	WasmSHA256 string
	// Stdlib is a zip of lib/python3.13, mounted read-only at /usr/local/lib/python3.13.
	Stdlib []byte
	// TZData is a zip of /usr/share/zoneinfo.
	TZData []byte
	// BuildInfo is the text of BUILDINFO.
	BuildInfo string
}

// PythonVersion is the CPython version of the shipped interpreter.
const PythonVersion = "3.13.5"

var (
	loadOnce sync.Once
	loaded   *Interpreter
	loadErr  error
)

// Load verifies and decompresses the embedded interpreter once per process and returns it. The returned value
// is shared: do not modify its byte slices.
func Load() (*Interpreter, error) {
	loadOnce.Do(func() { loaded, loadErr = load(files) })
	return loaded, loadErr
}

// Verify checks every embedded file against SHA256SUMS.
func Verify() error {
	_, err := readVerified(files)
	return err
}

func readVerified(fsys fs.FS) (map[string][]byte, error) {
	sums, err := fs.ReadFile(fsys, "SHA256SUMS")
	if err != nil {
		return nil, fmt.Errorf("assets: %w", err)
	}
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			return nil, fmt.Errorf("assets: malformed SHA256SUMS line %q", sc.Text())
		}
		name := strings.TrimPrefix(fields[1], "*")
		if strings.Contains(name, "/") {
			continue // a file of a sub-package (uninstrumented/), verified there
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("assets: %s: %w", name, err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != fields[0] {
			return nil, fmt.Errorf("%w: %s", ErrChecksum, name)
		}
		out[name] = data
	}
	for _, name := range []string{"python.wasm.gz", "stdlib.zip", "tzdata.zip", "BUILDINFO"} {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("assets: %s is not listed in SHA256SUMS", name)
		}
	}
	return out, nil
}

func load(fsys fs.FS) (*Interpreter, error) {
	m, err := readVerified(fsys)
	if err != nil {
		return nil, err
	}
	wasm, err := Gunzip(m["python.wasm.gz"])
	if err != nil {
		return nil, fmt.Errorf("assets: python.wasm.gz: %w", err)
	}
	sum := sha256.Sum256(wasm)
	return &Interpreter{
		Wasm:       wasm,
		WasmSHA256: hex.EncodeToString(sum[:]),
		Stdlib:     m["stdlib.zip"],
		TZData:     m["tzdata.zip"],
		BuildInfo:  string(m["BUILDINFO"]),
	}, nil
}

// Gunzip decompresses a gzip stream held in memory.
func Gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

// SHA256SUMS returns the embedded checksum list.
func SHA256SUMS() []byte { return append([]byte(nil), sha256sums...) }

// bytesFS serves in-memory files; ReadFile returns them without copying (callers must not modify them).
type bytesFS map[string][]byte

func (b bytesFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid} // only ReadFile is used
}

func (b bytesFS) ReadFile(name string) ([]byte, error) {
	d, ok := b[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return d, nil
}
