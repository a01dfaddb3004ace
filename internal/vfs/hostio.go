package vfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tetratelabs/wazero/experimental/sys"
)

type hostFile struct {
	rel  string
	data []byte
	perm fs.FileMode
}

// CopyIn copies the tree under the host directory hostDir into the root of
// the workspace, merging with what is there (same-named files are
// overwritten; a file/directory clash is an error).
//
// Safety: the host tree is read through an os.Root, so nothing outside
// hostDir can be reached. A symbolic link anywhere in the tree is refused
// (ErrHostSymlink), as is any entry that is not a regular file or a directory
// (ErrHostIrregular); links are never followed. File modes keep their
// permission bits; timestamps come from the FS clock, not the host.
//
// It is all or nothing: the host tree is read completely first (reading
// stops early once it cannot fit the quotas), then applied in one step under
// the lock after checking conflicts and quotas. Copied entries become part of
// the change-tracking baseline. ctx is checked between entries.
func (f *FS) CopyIn(ctx context.Context, hostDir string) error {
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("vfs: copy in %q: %w", hostDir, err)
	}
	defer root.Close()

	var (
		dirs  []string
		files []hostFile
		total int64
	)
	budget := f.limits.MaxBytes
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if rel == "." {
			if !d.IsDir() {
				return fmt.Errorf("%q: %w", rel, ErrHostIrregular)
			}
			return nil
		}
		if _, _, errno := parsePath(rel); errno != 0 {
			return &PathError{Op: "copy in", Path: filepath.Join(hostDir, rel), Err: errno}
		}
		if len(dirs)+len(files) >= f.limits.MaxFiles {
			return &PathError{Op: "copy in", Path: hostDir, Err: EDQUOT}
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%q: %w", rel, ErrHostSymlink)
		case t.IsDir():
			dirs = append(dirs, rel)
			return nil
		case !t.IsRegular():
			return fmt.Errorf("%q: %w", rel, ErrHostIrregular)
		}
		data, perm, err := readHostFile(root, rel, budget-total)
		if errors.Is(err, ENOSPC) {
			return &PathError{Op: "copy in", Path: hostDir, Err: ENOSPC}
		}
		if err != nil {
			return err
		}
		total += int64(len(data))
		files = append(files, hostFile{rel: rel, data: data, perm: perm})
		return nil
	})
	if err != nil {
		if pe := (*PathError)(nil); errors.As(err, &pe) {
			return err // already "vfs: copy in <host path>: ..."
		}
		return fmt.Errorf("vfs: copy in %q: %w", hostDir, err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	newFiles, delta := 0, int64(0)
	for _, rel := range dirs {
		n, errno := f.lookup(strings.Split(rel, "/"))
		switch {
		case errno == sys.ENOENT:
			newFiles++
		case errno != 0:
			return &PathError{Op: "copy in", Path: filepath.Join(hostDir, rel), Err: errno}
		case !n.isDir():
			return &PathError{Op: "copy in", Path: filepath.Join(hostDir, rel), Err: sys.EEXIST}
		}
	}
	for _, hf := range files {
		n, errno := f.lookup(strings.Split(hf.rel, "/"))
		switch {
		case errno == sys.ENOENT:
			newFiles++
			delta += int64(len(hf.data))
		case errno != 0:
			return &PathError{Op: "copy in", Path: filepath.Join(hostDir, hf.rel), Err: errno}
		case n.isDir():
			return &PathError{Op: "copy in", Path: filepath.Join(hostDir, hf.rel), Err: sys.EISDIR}
		default:
			delta += int64(len(hf.data)) - int64(len(n.data))
		}
	}
	if errno := f.checkQuotas(newFiles, delta); errno != 0 {
		return &PathError{Op: "copy in", Path: hostDir, Err: errno}
	}
	for _, rel := range dirs { // parents come first (WalkDir order)
		f.mkdirAllLocked(strings.Split(rel, "/"), 0o755)
	}
	for _, hf := range files {
		f.writeFileLocked(strings.Split(hf.rel, "/"), hf.data, hf.perm)
	}
	return nil
}

// readHostFile reads one regular file through root, refusing anything that
// is not a regular file once opened, and at most max bytes (ENOSPC beyond).
func readHostFile(root *os.Root, rel string, max int64) ([]byte, fs.FileMode, error) {
	// O_NONBLOCK: should the entry have been swapped for a FIFO, opening it
	// must not block; O_NOFOLLOW: os.Root never lets a link escape hostDir,
	// and we refuse links we see anyway.
	hf, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, 0, fmt.Errorf("%q: %w", rel, ErrHostSymlink)
		}
		return nil, 0, err
	}
	defer hf.Close()
	st, err := hf.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%q: %w", rel, ErrHostIrregular)
	}
	if st.Size() > max {
		return nil, 0, ENOSPC
	}
	data, err := io.ReadAll(io.LimitReader(hf, max+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > max {
		return nil, 0, ENOSPC
	}
	return data, st.Mode().Perm(), nil
}

// WriteBack writes the Created and Modified entries of Changes into the host
// directory hostDir (created if missing): directories are created, files are
// written whole. Deleted entries are NOT applied to the host; the caller
// decides what to do with them (they are in Changes).
//
// Safety: everything goes through an os.Root on hostDir, so nothing outside
// it can be written even if the host tree changes meanwhile. Symbolic links
// in the target are never followed: a link as a parent directory or as the
// file to write is an error (ErrHostSymlink). Each file is written to a fresh
// temporary file in the same directory and renamed over the target, so an
// existing hard link is replaced, not written through. Host modes are the
// workspace permission bits without group/other write, plus owner read/write.
// It stops at the first error; ctx is checked between entries.
func (f *FS) WriteBack(ctx context.Context, hostDir string) error {
	type item struct {
		rel  string
		dir  bool
		data []byte
		perm fs.FileMode
	}
	var items []item
	f.mu.Lock()
	for _, c := range f.changesLocked() {
		if c.Kind == Deleted {
			continue
		}
		n, errno := f.lookup(strings.Split(c.Path, "/"))
		if errno != 0 {
			continue // cannot happen: changes were computed under the lock
		}
		items = append(items, item{
			rel: c.Path, dir: n.isDir(),
			data: append([]byte(nil), n.data...),
			perm: n.mode.Perm()&0o755 | 0o600,
		})
	}
	f.mu.Unlock()

	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return fmt.Errorf("vfs: write back %q: %w", hostDir, err)
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("vfs: write back %q: %w", hostDir, err)
	}
	defer root.Close()
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("vfs: write back %q: %w", hostDir, err)
		}
		var err error
		if it.dir {
			err = ensureHostDir(root, it.rel)
		} else {
			err = writeHostFile(root, it.rel, it.data, it.perm)
		}
		if err != nil {
			return fmt.Errorf("vfs: write back %q: %w", hostDir, err)
		}
	}
	return nil
}

// ensureHostDir makes every component of rel an existing real directory
// (not a symlink), creating missing ones.
func ensureHostDir(root *os.Root, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		st, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			st, err = root.Lstat(p) // re-check: it may have raced into a link
			if err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%q: %w", p, ErrHostSymlink)
		}
		if !st.IsDir() {
			return fmt.Errorf("%q is not a directory: %w", p, ErrHostIrregular)
		}
	}
	return nil
}

func writeHostFile(root *os.Root, rel string, data []byte, perm fs.FileMode) error {
	dir := path.Dir(rel)
	if err := ensureHostDir(root, dir); err != nil {
		return err
	}
	st, err := root.Lstat(rel)
	switch {
	case err == nil && st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%q: %w", rel, ErrHostSymlink)
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("%q: %w", rel, ErrHostIrregular)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".vfs-writeback-"+hex.EncodeToString(rnd[:]))
	tf, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	_, werr := tf.Write(data)
	if cerr := tf.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Chmod(tmp, perm) // the umask may have narrowed it
	}
	if werr == nil {
		werr = root.Rename(tmp, rel)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return werr
	}
	return nil
}
