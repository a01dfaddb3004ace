package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadDir loads an interpreter that is not the embedded one from a directory: a build's stage or a copy of
// assets/. It reads python.wasm, or python.wasm.gz when there is no python.wasm, plus stdlib.zip and tzdata.zip.
// Unlike Load it checks no SHA256SUMS (a build's stage has none); WasmSHA256 is computed from what was read, so
// compiled code is never confused with the embedded interpreter's. It is for tools that compare builds.
func LoadDir(dir string) (*Interpreter, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("assets: %w", err)
		}
		return b, nil
	}
	wasm, err := read("python.wasm")
	if errors.Is(err, fs.ErrNotExist) {
		var gz []byte
		if gz, err = read("python.wasm.gz"); err == nil {
			if wasm, err = Gunzip(gz); err != nil {
				err = fmt.Errorf("assets: %s: %w", filepath.Join(dir, "python.wasm.gz"), err)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	stdlib, err := read("stdlib.zip")
	if err != nil {
		return nil, err
	}
	tz, err := read("tzdata.zip")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	return &Interpreter{Wasm: wasm, WasmSHA256: hex.EncodeToString(sum[:]), Stdlib: stdlib, TZData: tz,
		BuildInfo: "loaded from " + dir}, nil
}
