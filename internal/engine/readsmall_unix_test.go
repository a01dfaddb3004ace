//go:build unix

package engine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadSmallFileRefusesHostileFiles: a record behind a symlink to /dev/zero, a FIFO without a writer and an
// oversized file are refused at once; MapFile refuses a FIFO without blocking too.
func TestReadSmallFileRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("1234"), 0o600)
	if b, err := ReadSmallFile(ok, 4); err != nil || string(b) != "1234" {
		t.Fatalf("a record at its bound: %q %v", b, err)
	}
	if _, err := ReadSmallFile(ok, 3); err == nil {
		t.Error("a record one byte past its bound was read")
	}
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{zero, fifo, dir} {
		done := make(chan error, 2)
		go func() { _, err := ReadSmallFile(p, 1<<10); done <- err }()
		go func() { _, err := MapFile(p); done <- err }()
		for i := 0; i < 2; i++ {
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("%s: %v, want ErrNotRegular", p, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: blocked", p)
			}
		}
	}
}
