package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// MapFile gives a file's bytes; a mapped file that shrinks under a reader is an error from ReadGuard, not a crash
// of the process.
func TestMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("wasmbox "), 4096) // 32 KiB: several pages
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := MapFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !bytes.Equal(m.Bytes, want) {
		t.Fatal("mapped bytes differ from the file")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	if e, err := MapFile(empty); err != nil || len(e.Bytes) != 0 {
		t.Fatalf("empty file: %v %d", err, len(e.Bytes))
	}
	if _, err := MapFile(t.TempDir()); err == nil {
		t.Fatal("mapped a directory")
	}
	if runtime.GOOS == "windows" {
		return // read, not mapped: nothing can shrink under it
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var sum int
	err = ReadGuard(func() error {
		for _, b := range m.Bytes[len(m.Bytes)-1:] {
			sum += int(b)
		}
		return nil
	})
	if err == nil {
		t.Fatalf("read past the end of a truncated mapping without an error (sum %d)", sum)
	}
	if err := ReadGuard(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
