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

// gitRepo is a host tree like a git checkout: a tracked file, an executable script, a hook sample, a config.
func gitRepo(t *testing.T) string {
	dir := t.TempDir()
	writeHost(t, dir, "main.py", "print(1)\n")
	writeHost(t, dir, "build.sh", "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(dir, "build.sh"), 0o755))
	writeHost(t, dir, "old.txt", "old")
	writeHost(t, dir, "docs/gone.md", "gone")
	writeHost(t, dir, ".git/config", "[core]\n")
	writeHost(t, dir, ".git/hooks/pre-commit.sample", "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit.sample"), 0o755))
	writeHost(t, dir, ".github/workflows/ci.yml", "on: push\n")
	return dir
}

func guestWrite(t *testing.T, f *FS, p, data string, perm os.FileMode) {
	t.Helper()
	h, errno := f.OpenFile(p, sys.O_WRONLY|sys.O_CREAT|sys.O_TRUNC, perm)
	errnoOK(t, "open "+p, errno)
	if _, errno := h.Write([]byte(data)); errno != 0 {
		t.Fatal(errno)
	}
	h.Close()
}

// The attack on writeback: a program edits .git/config (core.fsmonitor) and turns the executable
// pre-commit.sample into pre-commit with new content. By default none of it reaches the host, no execute bit is
// set, and deletions are reported, not applied.
func TestWriteBackDefaultsAreSafe(t *testing.T) {
	ctx := context.Background()
	repo := gitRepo(t)
	f := New(Limits{})
	must(t, f.CopyIn(ctx, repo))
	guestWrite(t, f, ".git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n", 0o644)
	errnoOK(t, "rename", f.Rename(".git/hooks/pre-commit.sample", ".git/hooks/pre-commit"))
	guestWrite(t, f, ".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n", 0o755)
	guestWrite(t, f, ".github/workflows/ci.yml", "on: push\njobs: {evil: {}}\n", 0o644)
	guestWrite(t, f, "main.py", "print(2)\n", 0o644)
	guestWrite(t, f, "tool.sh", "#!/bin/sh\n", 0o755)
	guestWrite(t, f, "build.sh", "#!/bin/sh\necho new\n", 0o755)
	errnoOK(t, "mkdir", f.Mkdir("src", 0o755))
	guestWrite(t, f, "src/.env", "SECRET=1\n", 0o644)
	errnoOK(t, "unlink", f.Unlink("old.txt"))
	errnoOK(t, "unlink", f.Unlink("docs/gone.md"))
	errnoOK(t, "rmdir", f.Rmdir("docs"))

	rep, err := f.WriteBack(ctx, repo, WriteBackOptions{})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("err %v, want ErrRefused", err)
	}
	if got := readHost(t, repo, ".git/config"); got != "[core]\n" {
		t.Errorf(".git/config written: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git/hooks/pre-commit")); !os.IsNotExist(err) {
		t.Errorf("pre-commit hook created: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git/hooks/pre-commit.sample")); err != nil {
		t.Errorf("pre-commit.sample deleted: %v", err)
	}
	if got := readHost(t, repo, ".github/workflows/ci.yml"); got != "on: push\n" {
		t.Errorf("workflow written: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(repo, "src/.env")); !os.IsNotExist(err) {
		t.Errorf("src/.env written: %v", err)
	}
	if got := readHost(t, repo, "main.py"); got != "print(2)\n" {
		t.Errorf("main.py not written: %q", got)
	}
	// No execute bit set by the program; the existing script keeps its own.
	if st, _ := os.Stat(filepath.Join(repo, "tool.sh")); st.Mode().Perm()&0o111 != 0 {
		t.Errorf("tool.sh executable: %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(repo, "build.sh")); st.Mode().Perm() != 0o755 {
		t.Errorf("build.sh lost its mode: %v", st.Mode())
	}
	// Deletions are reported, not applied.
	if readHost(t, repo, "old.txt") != "old" || readHost(t, repo, "docs/gone.md") != "gone" {
		t.Error("a deletion was applied without Delete")
	}
	if got := strings.Join(rep.NotDeleted, ","); got != "docs,docs/gone.md,old.txt" {
		t.Errorf("NotDeleted %q", got)
	}
	var refused []string
	for _, r := range rep.Refused {
		refused = append(refused, r.Kind.String()+" "+r.Path+" ("+r.Reason+")")
	}
	wantRefused := "modified .git/config (hidden path)|created .git/hooks/pre-commit (hidden path)|" +
		"deleted .git/hooks/pre-commit.sample (hidden path)|modified .github/workflows/ci.yml (hidden path)|" +
		"created src/.env (hidden path)"
	if got := strings.Join(refused, "|"); got != wantRefused {
		t.Errorf("refused\n%s\nwant\n%s", got, wantRefused)
	}
	if got := strings.Join(rep.Written, ","); got != "build.sh,main.py,tool.sh" {
		t.Errorf("written %q", got)
	}
	if got := strings.Join(rep.Dirs, ","); got != "src" {
		t.Errorf("dirs %q", got)
	}
}

func TestWriteBackAllowHiddenOnlyDelete(t *testing.T) {
	ctx := context.Background()
	repo := gitRepo(t)
	f := New(Limits{})
	must(t, f.CopyIn(ctx, repo))
	guestWrite(t, f, ".github/workflows/ci.yml", "new\n", 0o644)
	guestWrite(t, f, ".git/config", "evil\n", 0o644)
	errnoOK(t, "mkdir", f.Mkdir("out", 0o755))
	guestWrite(t, f, "out/report.txt", "r", 0o644)
	guestWrite(t, f, "elsewhere.txt", "e", 0o644)
	errnoOK(t, "unlink", f.Unlink("old.txt"))
	errnoOK(t, "unlink", f.Unlink("docs/gone.md"))
	errnoOK(t, "rmdir", f.Rmdir("docs"))
	writeHost(t, repo, "docs/host-only.md", "keep") // a host file the workspace never had

	rep, err := f.WriteBack(ctx, repo, WriteBackOptions{
		AllowHidden: []string{".github"}, Only: []string{"out/report.txt", ".github", "old.txt", "docs"}, Delete: true,
	})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("err %v", err)
	}
	if readHost(t, repo, ".github/workflows/ci.yml") != "new\n" || readHost(t, repo, "out/report.txt") != "r" {
		t.Error("allowed paths not written")
	}
	if readHost(t, repo, ".git/config") != "[core]\n" {
		t.Error(".git/config written though only .github is allowed")
	}
	if _, err := os.Stat(filepath.Join(repo, "elsewhere.txt")); !os.IsNotExist(err) {
		t.Error("a path outside Only was written")
	}
	if _, err := os.Stat(filepath.Join(repo, "old.txt")); !os.IsNotExist(err) {
		t.Error("old.txt not deleted with Delete")
	}
	if _, err := os.Stat(filepath.Join(repo, "docs/gone.md")); !os.IsNotExist(err) {
		t.Error("docs/gone.md not deleted")
	}
	if readHost(t, repo, "docs/host-only.md") != "keep" {
		t.Error("a host file the program never saw was deleted")
	}
	if got := strings.Join(rep.Deleted, ","); got != "old.txt,docs/gone.md" {
		t.Errorf("deleted %q", got)
	}
	if got := strings.Join(rep.NotDeleted, ","); got != "docs" {
		t.Errorf("not deleted %q (the directory still holds a host file)", got)
	}
}

// Deletions never follow a symlink out of hostDir, and never remove a symlink the program did not make.
func TestWriteBackDeleteNeverFollowsSymlinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	writeHost(t, outside, "victim.txt", "precious")
	src := t.TempDir()
	writeHost(t, src, "sub/victim.txt", "copy")
	writeHost(t, src, "victim.txt", "copy")
	f := New(Limits{})
	must(t, f.CopyIn(ctx, src))
	errnoOK(t, "unlink", f.Unlink("sub/victim.txt"))
	errnoOK(t, "unlink", f.Unlink("victim.txt"))

	dst := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(dst, "sub")))
	if _, err := f.WriteBack(ctx, dst, WriteBackOptions{Delete: true}); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("delete through a symlinked parent: %v", err)
	}
	dst = t.TempDir()
	must(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(dst, "victim.txt")))
	if _, err := f.WriteBack(ctx, dst, WriteBackOptions{Delete: true}); !errors.Is(err, ErrHostSymlink) {
		t.Fatalf("delete of a symlink: %v", err)
	}
	if readHost(t, outside, "victim.txt") != "precious" {
		t.Fatal("a file outside hostDir was deleted")
	}
	if _, err := os.Lstat(filepath.Join(dst, "victim.txt")); err != nil {
		t.Fatal("the host symlink was removed")
	}
}
