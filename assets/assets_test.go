package assets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestChecksums verifies every shipped artifact against SHA256SUMS (CI runs this on every commit).
func TestChecksums(t *testing.T) {
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
	it, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(it.Wasm, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatal("python.wasm is not a wasm module")
	}
	sum := sha256.Sum256(it.Wasm)
	if it.WasmSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatal("WasmSHA256 does not match the wasm")
	}
	for _, want := range []string{"python_version: " + PythonVersion, "instrument_loops:", "configure_extra: --with-pymalloc --with-lto=thin"} {
		if !strings.Contains(it.BuildInfo, want) {
			t.Errorf("BUILDINFO lacks %q", want)
		}
	}
}

func copyFS(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for _, n := range []string{"python.wasm.gz", "stdlib.zip", "tzdata.zip", "BUILDINFO", "SHA256SUMS"} {
		b, err := files.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m[n] = &fstest.MapFile{Data: b}
	}
	return m
}

// A changed artifact or a missing entry is an error, never a different interpreter.
func TestTamperedArtifacts(t *testing.T) {
	m := copyFS(t)
	if _, err := load(m); err != nil {
		t.Fatalf("pristine copy: %v", err)
	}
	m["stdlib.zip"].Data = append([]byte(nil), m["stdlib.zip"].Data...)
	m["stdlib.zip"].Data[100] ^= 1
	if _, err := load(m); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped bit: %v, want ErrChecksum", err)
	}
	m = copyFS(t)
	m["SHA256SUMS"].Data = bytes.ReplaceAll(m["SHA256SUMS"].Data, []byte("tzdata.zip"), []byte("other.zip"))
	if _, err := load(m); err == nil {
		t.Error("a file missing from SHA256SUMS was accepted")
	}
	m = copyFS(t)
	delete(m, "BUILDINFO")
	if _, err := load(m); err == nil {
		t.Error("a missing artifact was accepted")
	}
}

// TestLoadDir: an interpreter read from a directory (python.wasm.gz here) is the embedded one, byte for byte,
// and a directory without the stdlib is a clear error.
func TestLoadDir(t *testing.T) {
	it, err := LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	emb, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if it.WasmSHA256 != emb.WasmSHA256 || !bytes.Equal(it.Stdlib, emb.Stdlib) || !bytes.Equal(it.TZData, emb.TZData) {
		t.Fatalf("LoadDir(.) differs from the embedded interpreter: %s vs %s", it.WasmSHA256, emb.WasmSHA256)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "python.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "stdlib.zip") {
		t.Fatalf("LoadDir without stdlib.zip: %v", err)
	}
}
