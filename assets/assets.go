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
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/wasmbox/wasmbox/internal/starttrace"
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

	verifiedOnce sync.Once
	verified     *Verified
	verifiedErr  error
)

// Load verifies and decompresses the embedded interpreter once per process and returns it. The returned value
// is shared: do not modify its byte slices.
func Load() (*Interpreter, error) {
	loadOnce.Do(func() {
		v, err := LoadVerified()
		if err != nil {
			loadErr = err
			return
		}
		loaded, loadErr = v.decompress()
	})
	return loaded, loadErr
}

// Verified is the embedded interpreter checked against SHA256SUMS but not decompressed: what a process needs when
// a cache already holds the decompressed interpreter (the fields are those of Interpreter).
type Verified struct {
	// WasmGz is python.wasm.gz as embedded; WasmGzSHA256 its verified hex SHA-256.
	WasmGz       []byte
	WasmGzSHA256 string
	// StdlibSHA256 and TZDataSHA256 are the verified hex SHA-256 of Stdlib and TZData.
	Stdlib, TZData             []byte
	StdlibSHA256, TZDataSHA256 string
	BuildInfo                  string
}

// LoadVerified checks the embedded artifacts against SHA256SUMS once per process and returns them without
// decompressing the interpreter. The returned value is shared: do not modify its byte slices.
func LoadVerified() (*Verified, error) {
	verifiedOnce.Do(func() { verified, verifiedErr = loadVerified(files) })
	return verified, verifiedErr
}

func loadVerified(fsys fs.FS) (*Verified, error) {
	m, sums, err := readVerified(fsys)
	if err != nil {
		return nil, err
	}
	starttrace.Mark("assets: verify embedded (sha256)")
	return &Verified{WasmGz: m["python.wasm.gz"], WasmGzSHA256: sums["python.wasm.gz"], Stdlib: m["stdlib.zip"],
		StdlibSHA256: sums["stdlib.zip"], TZData: m["tzdata.zip"], TZDataSHA256: sums["tzdata.zip"],
		BuildInfo: string(m["BUILDINFO"])}, nil
}

// LoadDeclared returns the embedded artifacts with the hashes SHA256SUMS declares for them, without hashing them:
// for a caller that has proof that this same executable's files were checked against SHA256SUMS before (the
// wasmbox cache keeps such a record per executable file). Everything else should use LoadVerified.
func LoadDeclared() (*Verified, error) {
	out, sums, err := readFiles(files, false)
	if err != nil {
		return nil, err
	}
	starttrace.Mark("assets: embedded, checked by an earlier run of this executable")
	return &Verified{WasmGz: out["python.wasm.gz"], WasmGzSHA256: sums["python.wasm.gz"], Stdlib: out["stdlib.zip"],
		StdlibSHA256: sums["stdlib.zip"], TZData: out["tzdata.zip"], TZDataSHA256: sums["tzdata.zip"],
		BuildInfo: string(out["BUILDINFO"])}, nil
}

// Verify checks every embedded file against SHA256SUMS.
func Verify() error {
	_, _, err := readVerified(files)
	return err
}

func readVerified(fsys fs.FS) (map[string][]byte, map[string]string, error) {
	return readFiles(fsys, true)
}

// readFiles reads the files SHA256SUMS lists, checking each against its hash if check is set.
func readFiles(fsys fs.FS, check bool) (map[string][]byte, map[string]string, error) {
	sums, err := fs.ReadFile(fsys, "SHA256SUMS")
	if err != nil {
		return nil, nil, fmt.Errorf("assets: %w", err)
	}
	out, hexes := map[string][]byte{}, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			return nil, nil, fmt.Errorf("assets: malformed SHA256SUMS line %q", sc.Text())
		}
		name := strings.TrimPrefix(fields[1], "*")
		if strings.Contains(name, "/") {
			continue // a file of a sub-package (uninstrumented/), verified there
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, nil, fmt.Errorf("assets: %s: %w", name, err)
		}
		if len(fields[0]) != 2*sha256.Size {
			return nil, nil, fmt.Errorf("assets: malformed SHA256SUMS line %q", sc.Text())
		}
		if check {
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != fields[0] {
				return nil, nil, fmt.Errorf("%w: %s", ErrChecksum, name)
			}
		}
		out[name], hexes[name] = data, fields[0]
	}
	for _, name := range []string{"python.wasm.gz", "stdlib.zip", "tzdata.zip", "BUILDINFO"} {
		if _, ok := out[name]; !ok {
			return nil, nil, fmt.Errorf("assets: %s is not listed in SHA256SUMS", name)
		}
	}
	return out, hexes, nil
}

func load(fsys fs.FS) (*Interpreter, error) {
	v, err := loadVerified(fsys)
	if err != nil {
		return nil, err
	}
	return v.decompress()
}

// Decompress gunzips the interpreter and returns it with its hex SHA-256.
func (v *Verified) Decompress() (wasm []byte, sha string, err error) {
	wasm, err = Gunzip(v.WasmGz)
	if err != nil {
		return nil, "", fmt.Errorf("assets: python.wasm.gz: %w", err)
	}
	starttrace.Mark("assets: gunzip python.wasm")
	sum := sha256.Sum256(wasm)
	starttrace.Mark("assets: sha256 python.wasm")
	return wasm, hex.EncodeToString(sum[:]), nil
}

func (v *Verified) decompress() (*Interpreter, error) {
	wasm, sha, err := v.Decompress()
	if err != nil {
		return nil, err
	}
	return v.Interpreter(wasm, sha), nil
}

// Interpreter combines v with its decompressed interpreter. The caller vouches that wasmSHA256 is the SHA-256 of
// wasm; wasm may be nil when the caller needs only the other fields.
func (v *Verified) Interpreter(wasm []byte, wasmSHA256 string) *Interpreter {
	return &Interpreter{Wasm: wasm, WasmSHA256: wasmSHA256, Stdlib: v.Stdlib, TZData: v.TZData, BuildInfo: v.BuildInfo}
}

// maxGunzipHint bounds the capacity Gunzip reserves from the size a gzip trailer declares.
const maxGunzipHint = 256 << 20

// Gunzip decompresses a gzip stream held in memory. The output buffer is sized once from the size the stream's
// trailer declares (bounded), instead of growing by doubling.
func Gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var buf bytes.Buffer
	if len(b) >= 4 {
		if n := binary.LittleEndian.Uint32(b[len(b)-4:]); n <= maxGunzipHint {
			buf.Grow(int(n) + bytes.MinRead)
		}
	}
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
