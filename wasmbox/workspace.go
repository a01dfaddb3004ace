package wasmbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// Workspace is the sandbox's one writable directory, /workspace in the guest: an in-memory file system with byte
// and file-count quotas. It is never a host directory: files move in and out only through CopyIn, WriteFile,
// ReadFile and WriteBack, which refuse symlinks and paths that leave the workspace.
//
// A Workspace may be passed to several runs one after another (Program.Workspace), but not to concurrent runs.
// The zero value is an empty workspace with the default quotas (DefaultWorkspaceBytes, DefaultWorkspaceFiles),
// as NewWorkspace(0, 0) returns. A Workspace must not be copied after first use.
type Workspace struct {
	once sync.Once
	fs   *vfs.FS
}

// files returns the file system, creating the default one for a zero Workspace.
func (w *Workspace) files() *vfs.FS {
	w.once.Do(func() {
		if w.fs == nil {
			w.fs = vfs.New(vfs.Limits{MaxBytes: DefaultWorkspaceBytes, MaxFiles: DefaultWorkspaceFiles})
		}
	})
	return w.fs
}

// FileChange is one file the program created, modified or deleted.
type FileChange struct {
	Path  string `json:"path"`
	Kind  string `json:"kind"` // "created", "modified" or "deleted"
	Size  int64  `json:"size"`
	IsDir bool   `json:"is_dir,omitempty"`
}

// FileInfo describes one file of a Workspace.
type FileInfo = vfs.FileInfo

// NewWorkspace returns an empty workspace with the given quotas (zero means the defaults of Config).
func NewWorkspace(maxBytes int64, maxFiles int) *Workspace {
	return newWorkspace(maxBytes, maxFiles, nil)
}

func newWorkspace(maxBytes int64, maxFiles int, now func() time.Time) *Workspace {
	if maxBytes <= 0 {
		maxBytes = DefaultWorkspaceBytes
	}
	if maxFiles <= 0 {
		maxFiles = DefaultWorkspaceFiles
	}
	return &Workspace{fs: vfs.New(vfs.Limits{MaxBytes: maxBytes, MaxFiles: maxFiles}, vfs.WithClock(now))}
}

// WriteFile creates or replaces a file (parent directories are created). name is relative to /workspace.
func (w *Workspace) WriteFile(name string, data []byte) error {
	if err := w.files().MkdirAll(parentOf(name), 0o755); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	if err := w.files().WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return nil
}

// ReadFile returns the content of a file of the workspace.
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	b, err := w.files().ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return b, nil
}

// Files lists every file and directory of the workspace.
func (w *Workspace) Files() []FileInfo { return w.files().List() }

// CopyIn copies a host directory tree into the workspace (symlinks in it are refused; quotas apply).
func (w *Workspace) CopyIn(ctx context.Context, hostDir string) error {
	if err := w.files().CopyIn(ctx, hostDir); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return nil
}

// WriteBackOptions are the rules of WriteBackWith; the zero value is the safe default (what WriteBack uses):
//
//   - AllowHidden []string: hidden paths (any component starting with ".", such as .git/config, .env or
//     .github/workflows/ci.yml) are refused unless they are, or are below, one of these slash-separated paths
//     relative to hostDir. Never allow ".git" for a program you do not trust: git runs hooks and configured
//     commands from there.
//   - Only []string: when set, every path that is not one of these, below one or a directory above one is
//     refused.
//   - Executable: keep the execute bits the program set. Without it no execute bit is ever set: a new file gets
//     the program's read/write bits, and a file that exists on the host keeps the execute bits it had.
//   - Delete: remove from hostDir the files (and then the directories, when empty on the host) the program
//     deleted. Without it deletions are only reported (WriteBackReport.NotDeleted).
type WriteBackOptions = vfs.WriteBackOptions

// WriteBackReport lists what WriteBackWith wrote, created, deleted, left in place and refused (paths relative to
// hostDir).
type WriteBackReport = vfs.WriteBackReport

// WriteBackRefusal is one change a WriteBackReport lists as refused, with the rule that refused it.
type WriteBackRefusal = vfs.WriteBackRefusal

// ErrWriteBackRefused is wrapped by WriteBack and WriteBackWith errors when the rules refused some changes; the
// others were still applied.
var ErrWriteBackRefused = vfs.ErrRefused

// WriteBack is WriteBackWith under the default rules: it writes the files and directories the program created or
// modified since the last run started (or since seeding) into hostDir, refusing hidden paths (such as anything
// under .git), never setting execute bits and never deleting host files. Deletions and refusals are not lost: when
// something was refused the error wraps ErrWriteBackRefused and names it; use WriteBackWith for the full report.
func (w *Workspace) WriteBack(ctx context.Context, hostDir string) error {
	_, err := w.WriteBackWith(ctx, hostDir, WriteBackOptions{})
	return err
}

// WriteBackWith writes the workspace's changes since the last run started (or since seeding) into hostDir under
// opts, and reports what it did.
//
// Writeback trusts the program's output: whatever the program wrote to an allowed path lands on the host as it
// is, so review it (or restrict it with Only) before writing into anything that runs code, such as a repository
// with hooks or build scripts. Within those rules it never follows a symlink in hostDir, never writes or removes
// anything outside it, replaces files instead of writing through hard links, and gives group and other no write
// access. Deletions run first (deepest first), then writes (parents first). It stops at the first I/O error,
// returning what it did until then; refusals do not stop it (the error then wraps ErrWriteBackRefused).
func (w *Workspace) WriteBackWith(ctx context.Context, hostDir string, opts WriteBackOptions) (*WriteBackReport, error) {
	rep, err := w.files().WriteBack(ctx, hostDir, opts)
	if err != nil {
		return rep, fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return rep, nil
}

// Usage reports the bytes and files in use.
func (w *Workspace) Usage() (bytes int64, files int) { return w.files().Usage() }

// MaxFilesChanged bounds Result.FilesChanged: a program can change at most twice the workspace's file quota of
// paths, each up to 4096 bytes, and the list is kept in every Result. Changes past the bound are counted, not
// listed.
const MaxFilesChanged = 1000

// changesN lists the first max changes (in workspace walk order: parents first, names sorted) and counts them
// all; only the listed ones cost a path.
func (w *Workspace) changesN(max int) ([]FileChange, int) {
	cs, total := w.files().ChangesN(max)
	var out []FileChange
	for _, c := range cs {
		out = append(out, FileChange{Path: c.Path, Kind: c.Kind.String(), Size: c.Size, IsDir: c.IsDir})
	}
	return out, total
}

// ChangeCount reports how many changes the workspace holds since the last run started (or since seeding), listed
// or not in Result.FilesChanged (which keeps at most MaxFilesChanged).
func (w *Workspace) ChangeCount() int {
	_, total := w.files().ChangesN(0)
	return total
}

func parentOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return "."
}
