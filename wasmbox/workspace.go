package wasmbox

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// Workspace is the sandbox's one writable directory, /workspace in the guest: an in-memory file system with byte
// and file-count quotas. It is never a host directory: files move in and out only through CopyIn, WriteFile,
// ReadFile and WriteBack, which refuse symlinks and paths that leave the workspace.
//
// A Workspace may be passed to several runs one after another (Program.Workspace), but not to concurrent runs.
type Workspace struct {
	fs *vfs.FS
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
	if err := w.fs.MkdirAll(parentOf(name), 0o755); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	if err := w.fs.WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return nil
}

// ReadFile returns the content of a file of the workspace.
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	b, err := w.fs.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return b, nil
}

// Files lists every file and directory of the workspace.
func (w *Workspace) Files() []FileInfo { return w.fs.List() }

// CopyIn copies a host directory tree into the workspace (symlinks in it are refused; quotas apply).
func (w *Workspace) CopyIn(ctx context.Context, hostDir string) error {
	if err := w.fs.CopyIn(ctx, hostDir); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return nil
}

// WriteBack writes the files changed since the last run started (or since seeding) to hostDir and deletes the
// ones the program deleted. It never follows symlinks in hostDir and never writes outside it.
func (w *Workspace) WriteBack(ctx context.Context, hostDir string) error {
	if err := w.fs.WriteBack(ctx, hostDir); err != nil {
		return fmt.Errorf("wasmbox: workspace: %w", err)
	}
	return nil
}

// Usage reports the bytes and files in use.
func (w *Workspace) Usage() (bytes int64, files int) { return w.fs.Usage() }

func (w *Workspace) changes() []FileChange {
	var out []FileChange
	for _, c := range w.fs.Changes() {
		out = append(out, FileChange{Path: c.Path, Kind: c.Kind.String(), Size: c.Size, IsDir: c.IsDir})
	}
	return out
}

func parentOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return "."
}
