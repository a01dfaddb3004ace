package wasmbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

func hostFile(t *testing.T, dir, rel, data string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func readHostFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// The writeback attack on a git checkout: the program sets core.fsmonitor in .git/config, turns git's executable
// pre-commit.sample into pre-commit, does the same with a script outside .git, and deletes a file. The default
// WriteBack refuses everything under .git, sets no execute bit and deletes nothing; WriteBackWith applies what
// its options allow.
func TestWriteBackRefusesGitAndExecBits(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	hostFile(t, repo, ".git/config", "[core]\n", 0o644)
	hostFile(t, repo, ".git/hooks/pre-commit.sample", "#!/bin/sh\n", 0o755)
	hostFile(t, repo, "scripts/release.sample", "#!/bin/sh\n", 0o755)
	hostFile(t, repo, "notes.txt", "keep me", 0o644)
	hostFile(t, repo, "main.py", "print(1)\n", 0o644)
	ws := wasmbox.NewWorkspace(0, 0)
	if err := ws.CopyIn(ctx, repo); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, wasmbox.Config{})
	res, err := sb.RunProgram(ctx, wasmbox.Program{Workspace: ws, Code: `import os
os.chdir("/workspace")
with open(".git/config", "a") as f:
    f.write("\tfsmonitor = touch /tmp/pwned\n")
os.rename(".git/hooks/pre-commit.sample", ".git/hooks/pre-commit")
with open(".git/hooks/pre-commit", "w") as f:
    f.write("#!/bin/sh\ntouch /tmp/pwned\n")
os.rename("scripts/release.sample", "scripts/release")
with open("scripts/release", "w") as f:
    f.write("#!/bin/sh\ntouch /tmp/pwned\n")
with open("main.py", "w") as f:
    f.write("print(2)\n")
os.remove("notes.txt")
print("done")
`})
	if err != nil || res.Stdout != "done\n" {
		t.Fatalf("run: %v %q %v", err, res.Stdout, res.Exception)
	}
	err = ws.WriteBack(ctx, repo)
	if !errors.Is(err, wasmbox.ErrWriteBackRefused) {
		t.Fatalf("WriteBack: %v, want ErrWriteBackRefused", err)
	}
	if got := readHostFile(t, repo, ".git/config"); got != "[core]\n" {
		t.Errorf(".git/config written: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git/hooks/pre-commit")); !os.IsNotExist(err) {
		t.Errorf(".git/hooks/pre-commit written: %v", err)
	}
	if got := readHostFile(t, repo, "main.py"); got != "print(2)\n" {
		t.Errorf("main.py: %q", got)
	}
	st, err := os.Stat(filepath.Join(repo, "scripts/release"))
	if err != nil || st.Mode().Perm()&0o111 != 0 {
		t.Errorf("scripts/release: %v %v, want written without execute bits", st, err)
	}
	if got := readHostFile(t, repo, "notes.txt"); got != "keep me" {
		t.Errorf("notes.txt deleted by the default WriteBack: %q", got)
	}

	// Deletions are opt-in; .git stays refused unless allowed.
	rep, err := ws.WriteBackWith(ctx, repo, wasmbox.WriteBackOptions{Delete: true})
	if !errors.Is(err, wasmbox.ErrWriteBackRefused) || rep == nil {
		t.Fatalf("WriteBackWith: %v", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.txt")); !os.IsNotExist(err) {
		t.Errorf("notes.txt not deleted with Delete: %v", err)
	}
	if len(rep.Deleted) != 2 || rep.Deleted[0] != "scripts/release.sample" || rep.Deleted[1] != "notes.txt" {
		t.Errorf("deleted %v", rep.Deleted)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git/hooks/pre-commit.sample")); err != nil {
		t.Errorf("a deletion under .git was applied: %v", err)
	}
	if len(rep.Refused) != 3 {
		t.Errorf("refused %+v, want .git/config, .git/hooks/pre-commit and the deleted sample", rep.Refused)
	}
}

// Result.FilesChanged lists at most MaxFilesChanged entries; the workspace still counts them all.
func TestFilesChangedIsCapped(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{})
	res := run(t, sb, `import os
for i in range(1500):
    open("/workspace/f%04d" % i, "w").close()`)
	if len(res.FilesChanged) != wasmbox.MaxFilesChanged {
		t.Fatalf("%d files changed listed, want %d", len(res.FilesChanged), wasmbox.MaxFilesChanged)
	}
	if res.FilesChanged[0].Path != "f0000" || res.Workspace.ChangeCount() != 1500 {
		t.Fatalf("first %q, count %d", res.FilesChanged[0].Path, res.Workspace.ChangeCount())
	}
}
