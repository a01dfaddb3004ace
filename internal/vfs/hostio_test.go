package vfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

func writeHost(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

func readHost(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCopyInWriteBackRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeHost(t, src, "main.py", "print(1)\n")
	writeHost(t, src, "pkg/mod.py", "x = 1\n")
	writeHost(t, src, "pkg/data/keep.txt", "keep")
	must(t, os.MkdirAll(filepath.Join(src, "emptydir"), 0o755))
	must(t, os.Chmod(filepath.Join(src, "main.py"), 0o755))

	f := New(Limits{}, WithClock(fixedClock()))
	must(t, f.CopyIn(ctx, src))
	if b, _ := f.ReadFile("pkg/mod.py"); string(b) != "x = 1\n" {
		t.Fatal(string(b))
	}
	if st, _ := f.Stat("main.py"); st.Mode.Perm() != 0o755 {
		t.Fatal("mode", st.Mode)
	}
	if st, e := f.Stat("emptydir"); e != 0 || !st.Mode.IsDir() {
		t.Fatal("emptydir", e)
	}
	if c := f.Changes(); len(c) != 0 {
		t.Fatal("CopyIn shows as changes", c)
	}

	// Guest work.
	h := open(t, f, "pkg/mod.py", sys.O_WRONLY|sys.O_TRUNC)
	h.Write([]byte("x = 2\n"))
	h.Close()
	errnoOK(t, "mkdir", f.Mkdir("out", 0o755))
	errnoOK(t, "mkdir", f.Mkdir("out/deep", 0o755))
	h = open(t, f, "out/deep/result.json", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte(`{"ok":true}`))
	h.Close()
	errnoOK(t, "mkdir", f.Mkdir("newempty", 0o700))
	errnoOK(t, "unlink", f.Unlink("pkg/data/keep.txt"))

	dst := t.TempDir()
	must(t, writeBack(f, ctx, dst))
	if got := readHost(t, dst, "pkg/mod.py"); got != "x = 2\n" {
		t.Fatal(got)
	}
	if got := readHost(t, dst, "out/deep/result.json"); got != `{"ok":true}` {
		t.Fatal(got)
	}
	if st, err := os.Stat(filepath.Join(dst, "newempty")); err != nil || !st.IsDir() {
		t.Fatal("newempty", err)
	}
	// Unchanged files are not written; deletions are not applied.
	if _, err := os.Stat(filepath.Join(dst, "main.py")); !os.IsNotExist(err) {
		t.Fatal("unchanged file written back", err)
	}
	// Writing back into the source applies the changes there; deleted
	// files stay on the host.
	must(t, writeBack(f, ctx, src))
	if got := readHost(t, src, "pkg/mod.py"); got != "x = 2\n" {
		t.Fatal(got)
	}
	if got := readHost(t, src, "pkg/data/keep.txt"); got != "keep" {
		t.Fatal(got)
	}
	// No temporary files left behind.
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if strings.Contains(d.Name(), ".vfs-writeback-") {
			t.Errorf("leftover %s", p)
		}
		return nil
	})
}

func TestCopyInRefusesHostSymlinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	writeHost(t, outside, "secret", "s3cret")

	for _, tc := range []struct{ name, link, target string }{
		{"file link to outside", "leak", filepath.Join(outside, "secret")},
		{"dir link to outside", "sub/leakdir", outside},
		{"relative link inside", "sub/alias", "../a.txt"},
		{"dangling link", "dangling", "/nonexistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			writeHost(t, src, "a.txt", "a")
			writeHost(t, src, "sub/b.txt", "b")
			lp := filepath.Join(src, filepath.FromSlash(tc.link))
			must(t, os.MkdirAll(filepath.Dir(lp), 0o755))
			must(t, os.Symlink(tc.target, lp))

			f := New(Limits{})
			must(t, f.WriteFile("pre.txt", []byte("pre"), 0o644))
			err := f.CopyIn(ctx, src)
			if !errors.Is(err, ErrHostSymlink) || !strings.HasPrefix(err.Error(), "vfs: ") {
				t.Fatalf("got %v, want ErrHostSymlink", err)
			}
			if !strings.Contains(err.Error(), filepath.Base(tc.link)) {
				t.Fatalf("error does not name the link: %v", err)
			}
			t.Log(err)
			// All or nothing: only the pre-existing file.
			if l := f.List(); len(l) != 1 || l[0].Path != "pre.txt" {
				t.Fatalf("partial copy: %+v", l)
			}
		})
	}
	// A FIFO is refused too (and opening it must not block).
	src := t.TempDir()
	if err := mkfifo(filepath.Join(src, "fifo")); err == nil {
		if err := New(Limits{}).CopyIn(ctx, src); !errors.Is(err, ErrHostIrregular) {
			t.Fatalf("fifo: %v", err)
		}
	}
}

func TestCopyInQuotaAndConflicts(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeHost(t, src, "a", strings.Repeat("a", 60))
	writeHost(t, src, "d/b", strings.Repeat("b", 60))

	f := New(Limits{MaxBytes: 100})
	if err := f.CopyIn(ctx, src); !errors.Is(err, ENOSPC) {
		t.Fatal(err)
	}
	if len(f.List()) != 0 {
		t.Fatal("partial copy", f.List())
	}
	f = New(Limits{MaxFiles: 2})
	if err := f.CopyIn(ctx, src); !errors.Is(err, EDQUOT) {
		t.Fatal(err)
	}
	if len(f.List()) != 0 {
		t.Fatal("partial copy", f.List())
	}
	// Existing content counts: 90 bytes already there, 120 incoming, 90 replaced by "a".
	f = New(Limits{MaxBytes: 150})
	must(t, f.WriteFile("a", make([]byte, 90), 0o644))
	if err := f.CopyIn(ctx, src); err != nil { // 90 - 90 + 60 + 60 = 120 <= 150
		t.Fatal(err)
	}
	if ub, _ := f.Usage(); ub != 120 {
		t.Fatal(ub)
	}
	// A file where the host has a directory (and vice versa) is a conflict.
	f = New(Limits{})
	must(t, f.WriteFile("d", []byte("file"), 0o644))
	if err := f.CopyIn(ctx, src); !errors.Is(err, sys.EEXIST) {
		t.Fatal(err)
	}
	if l := f.List(); len(l) != 1 {
		t.Fatal("partial copy", l)
	}
	f = New(Limits{})
	must(t, f.MkdirAll("a", 0o755))
	if err := f.CopyIn(ctx, src); !errors.Is(err, sys.EISDIR) {
		t.Fatal(err)
	}
	// Cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := New(Limits{}).CopyIn(cctx, src); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// Missing host dir.
	if err := New(Limits{}).CopyIn(ctx, filepath.Join(src, "nope")); err == nil || !strings.HasPrefix(err.Error(), "vfs: ") {
		t.Fatal(err)
	}
}

func TestWriteBackNeverFollowsSymlinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	writeHost(t, outside, "victim.txt", "original")

	f := New(Limits{})
	must(t, f.WriteFile("seed", nil, 0o644))
	h := open(t, f, "victim.txt", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte("pwned"))
	h.Close()
	errnoOK(t, "mkdir", f.Mkdir("sub", 0o755))
	h = open(t, f, "sub/victim.txt", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte("pwned"))
	h.Close()

	// Target file is a symlink to outside.
	dst := t.TempDir()
	must(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(dst, "victim.txt")))
	if err := writeBack(f, ctx, dst); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("file symlink: %v", err)
	}
	if got := readHost(t, outside, "victim.txt"); got != "original" {
		t.Fatal("wrote through a symlink:", got)
	}

	// A parent directory is a symlink to outside.
	dst = t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(dst, "sub")))
	err := writeBack(f, ctx, dst)
	if !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("dir symlink: %v", err)
	}
	if got := readHost(t, outside, "victim.txt"); got != "original" {
		t.Fatal("wrote through a dir symlink:", got)
	}

	// A hard link in the target is replaced, not written through.
	dst = t.TempDir()
	if err := os.Link(filepath.Join(outside, "victim.txt"), filepath.Join(dst, "victim.txt")); err == nil {
		f2 := New(Limits{})
		h := open(t, f2, "victim.txt", sys.O_WRONLY|sys.O_CREAT)
		h.Write([]byte("new"))
		h.Close()
		must(t, writeBack(f2, ctx, dst))
		if got := readHost(t, outside, "victim.txt"); got != "original" {
			t.Fatal("wrote through a hard link:", got)
		}
		if got := readHost(t, dst, "victim.txt"); got != "new" {
			t.Fatal(got)
		}
	}

	// A directory where a file should go.
	dst = t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dst, "victim.txt"), 0o755))
	if err := writeBack(f, ctx, dst); !errors.Is(err, ErrHostIrregular) {
		t.Fatalf("dir in the way: %v", err)
	}
}

func TestWriteBackModes(t *testing.T) {
	f := New(Limits{})
	h := open(t, f, "run.sh", sys.O_WRONLY|sys.O_CREAT)
	h.Write([]byte("#!/bin/sh\n"))
	h.Close()
	errnoOK(t, "chmod", f.Chmod("run.sh", 0o777))
	h = open(t, f, "ro", sys.O_WRONLY|sys.O_CREAT)
	h.Close()
	errnoOK(t, "chmod", f.Chmod("ro", 0o000))
	// By default no execute bit is set, and group/other never get write.
	dst := t.TempDir()
	must(t, writeBack(f, context.Background(), dst))
	st, _ := os.Stat(filepath.Join(dst, "run.sh"))
	if st.Mode().Perm() != 0o644 {
		t.Fatal("run.sh", st.Mode())
	}
	st, _ = os.Stat(filepath.Join(dst, "ro"))
	if st.Mode().Perm() != 0o600 {
		t.Fatal("ro", st.Mode())
	}
	// Asked for, the program's execute bits are kept.
	dst = t.TempDir()
	if _, err := f.WriteBack(context.Background(), dst, WriteBackOptions{Executable: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dst, "run.sh")); st.Mode().Perm() != 0o755 {
		t.Fatal("run.sh with Executable", st.Mode())
	}
	// A host file that is already executable stays so; one that is not does not become so.
	dst = t.TempDir()
	writeHost(t, dst, "run.sh", "old")
	must(t, os.Chmod(filepath.Join(dst, "run.sh"), 0o700))
	writeHost(t, dst, "ro", "old")
	must(t, writeBack(f, context.Background(), dst))
	if st, _ := os.Stat(filepath.Join(dst, "run.sh")); st.Mode().Perm() != 0o744 {
		t.Fatal("existing executable run.sh", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(dst, "ro")); st.Mode().Perm() != 0o600 {
		t.Fatal("existing ro", st.Mode())
	}
}

func writeBack(f *FS, ctx context.Context, dst string) error {
	_, err := f.WriteBack(ctx, dst, WriteBackOptions{})
	return err
}
