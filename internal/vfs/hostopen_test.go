package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckOpenedNotLink runs the Windows no-follow check (checkOpenedNotLink) here, where links and renames
// behave the same: a link at the path is refused, and so is a file that is no longer the one at the path.
func TestCheckOpenedNotLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	open := func(name string) *os.File {
		f, err := root.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	if err := checkOpenedNotLink(root, "a", open("a")); err != nil {
		t.Fatalf("a regular file: %v", err)
	}
	// A link: open follows it (as Windows' open does), the check refuses it.
	if err := checkOpenedNotLink(root, "link", open("link")); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("a link: %v", err)
	}
	// Swapped after the open: the entry at "a" is now another file (here b renamed over it; a link would be
	// refused by the Lstat check above).
	fa := open("a")
	if err := os.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if err := checkOpenedNotLink(root, "a", fa); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("a file swapped after the open: %v", err)
	}
	// Swapped before the open: a link at the path when the open happened, a regular file by the check.
	if err := os.Remove(filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fl := open("link")
	if err := os.Remove(filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "link"), []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkOpenedNotLink(root, "link", fl); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("a link replaced by a file after the open: %v", err)
	}
}
