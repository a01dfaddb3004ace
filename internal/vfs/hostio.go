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
	if f.frozen {
		return &PathError{Op: "copy in", Path: hostDir, Err: sys.EROFS}
	}
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
	// os.Root never lets a link escape hostDir, and openHostNoFollow refuses
	// links we see anyway (hostopen_*.go: O_NOFOLLOW, or a check after open).
	hf, err := openHostNoFollow(root, rel)
	if err != nil {
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

// WriteBackOptions are the rules of WriteBack. The zero value is the safe
// default: no hidden paths, no execute bits, no deletions.
type WriteBackOptions struct {
	// AllowHidden lists hidden paths WriteBack may write (and, with Delete,
	// delete). A path is hidden when any of its components starts with "."
	// (".git/config", "src/.env", ".github"); every other hidden path is
	// refused. Each entry is a slash-separated path relative to hostDir and
	// allows itself and everything below it: ".github" allows
	// ".github/workflows/ci.yml". Never list ".git" for a program you do not
	// trust: git runs hooks and configured commands from there.
	AllowHidden []string
	// Only, when not empty, restricts WriteBack to these paths (each allows
	// itself, everything below it and the directories above it); everything
	// else is refused. Same syntax as AllowHidden.
	Only []string
	// Executable keeps the execute bits the program gave its files. Without
	// it, WriteBack never sets an execute bit: a new file gets the
	// program's read/write bits (at least owner read/write), and a file that
	// already exists on the host keeps the execute bits it has there.
	Executable bool
	// Delete applies the program's deletions: each regular file it deleted
	// is removed from hostDir, then each directory it deleted if that leaves
	// the directory empty on the host (a directory that still holds host
	// files is reported in NotDeleted). Without Delete, deletions are only
	// reported (NotDeleted). A file is deleted whatever its host content is
	// now.
	Delete bool
}

// WriteBackReport says what WriteBack did, as slash-separated paths relative
// to hostDir, in the order it did it.
type WriteBackReport struct {
	Written    []string           // regular files written (created or replaced)
	Dirs       []string           // directories the program created, now present on the host
	Deleted    []string           // host entries removed (only with Delete)
	NotDeleted []string           // deletions not applied: Delete is off, or a directory is not empty on the host
	Refused    []WriteBackRefusal // changes the rules refused; nothing was done for them
}

// WriteBackRefusal is one change WriteBack refused.
type WriteBackRefusal struct {
	Path   string
	Kind   ChangeKind
	Reason string // "hidden path", "outside the allowed paths"
}

// ErrRefused is wrapped by the error WriteBack returns when its rules
// refused at least one change (the others were applied; the report lists
// both).
var ErrRefused = errors.New("changes refused by the writeback rules")

// WriteBack applies Changes to the host directory hostDir (created if
// missing) under opts: directories are created, files are written whole,
// and deletions are applied only with opts.Delete. Hidden paths, paths
// outside opts.Only and execute bits are refused unless opts allows them.
// It trusts the program's output: whatever the program wrote to an allowed
// path lands on the host.
//
// Safety: everything goes through an os.Root on hostDir, so nothing outside
// it can be written or removed even if the host tree changes meanwhile.
// Symbolic links in the target are never followed: a link as a parent
// directory, as the file to write or as the entry to delete is an error
// (ErrHostSymlink). Each file is written to a fresh temporary file in the
// same directory and renamed over the target, so an existing hard link is
// replaced, not written through. Group and other never get write access.
//
// Deletions run first (deepest first), then creations and writes (parents
// first). It stops at the first I/O error, returning what it did so far;
// ctx is checked between entries. When the rules refused changes, it does
// everything else and returns an error wrapping ErrRefused.
func (f *FS) WriteBack(ctx context.Context, hostDir string, opts WriteBackOptions) (*WriteBackReport, error) {
	type item struct {
		rel  string
		dir  bool
		data []byte
		perm fs.FileMode
	}
	rep := &WriteBackReport{}
	var writes, deletes []item
	f.mu.Lock()
	f.diffLocked(func(c Change) bool {
		if reason := opts.refuse(c.Path, c.IsDir); reason != "" {
			rep.Refused = append(rep.Refused, WriteBackRefusal{Path: c.Path, Kind: c.Kind, Reason: reason})
			return true
		}
		if c.Kind == Deleted {
			if !opts.Delete {
				rep.NotDeleted = append(rep.NotDeleted, c.Path)
				return true
			}
			deletes = append(deletes, item{rel: c.Path, dir: c.IsDir})
			return true
		}
		n, errno := f.lookup(strings.Split(c.Path, "/"))
		if errno != 0 {
			return true // cannot happen: changes are computed under the lock
		}
		mask := fs.FileMode(0o644)
		if opts.Executable {
			mask = 0o755
		}
		writes = append(writes, item{
			rel: c.Path, dir: n.isDir(),
			data: append([]byte(nil), n.data...),
			perm: n.mode.Perm()&mask | 0o600,
		})
		return true
	}, func() bool { return true })
	f.mu.Unlock()

	fail := func(err error) (*WriteBackReport, error) {
		return rep, fmt.Errorf("vfs: write back %q: %w", hostDir, err)
	}
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return fail(err)
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	for i := len(deletes) - 1; i >= 0; i-- {
		it := deletes[i]
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		removed, err := removeHost(root, it.rel, it.dir)
		switch {
		case err != nil:
			return fail(err)
		case removed:
			rep.Deleted = append(rep.Deleted, it.rel)
		case it.dir:
			rep.NotDeleted = append(rep.NotDeleted, it.rel)
		}
	}
	for _, it := range writes {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if it.dir {
			if err := ensureHostDir(root, it.rel); err != nil {
				return fail(err)
			}
			rep.Dirs = append(rep.Dirs, it.rel)
			continue
		}
		if err := writeHostFile(root, it.rel, it.data, it.perm, opts.Executable); err != nil {
			return fail(err)
		}
		rep.Written = append(rep.Written, it.rel)
	}
	if len(rep.Refused) > 0 {
		r := rep.Refused[0]
		return fail(fmt.Errorf("%w: %d change(s), the first %s %q (%s)", ErrRefused, len(rep.Refused), r.Kind, r.Path, r.Reason))
	}
	return rep, nil
}

// refuse says why the rules refuse a change at rel ("" if they allow it).
func (o WriteBackOptions) refuse(rel string, isDir bool) string {
	if hidden(rel) && !underAny(rel, o.AllowHidden, false) {
		return "hidden path"
	}
	if len(o.Only) > 0 && !underAny(rel, o.Only, isDir) {
		return "outside the allowed paths"
	}
	return ""
}

func hidden(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// underAny reports whether rel is one of roots or below one (or, with
// ancestors, a directory above one).
func underAny(rel string, roots []string, ancestors bool) bool {
	for _, r := range roots {
		r = strings.Trim(path.Clean("/"+r), "/")
		if r == "" {
			continue
		}
		if rel == r || strings.HasPrefix(rel, r+"/") || ancestors && strings.HasPrefix(r, rel+"/") {
			return true
		}
	}
	return false
}

// lstatNoLink is root.Lstat(p) with a missing entry as (nil, nil) and a symlink as ErrHostSymlink: removals
// never go through or remove a link.
func lstatNoLink(root *os.Root, p string) (fs.FileInfo, error) {
	st, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%q: %w", p, ErrHostSymlink)
	}
	return st, nil
}

// removeHost removes rel (a regular file, or an empty directory when dir)
// if it exists; every parent must be a real directory. A directory that is
// not empty is left in place (false, nil).
func removeHost(root *os.Root, rel string, dir bool) (bool, error) {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		st, err := lstatNoLink(root, strings.Join(parts[:i], "/"))
		if st == nil || err != nil || !st.IsDir() {
			return false, err // a parent that is gone or replaced holds nothing of ours
		}
	}
	st, err := lstatNoLink(root, rel)
	switch {
	case st == nil || err != nil:
		return false, err
	case dir != st.IsDir() || !dir && !st.Mode().IsRegular():
		return false, fmt.Errorf("%q has another type on the host: %w", rel, ErrHostIrregular)
	}
	if err := root.Remove(rel); err != nil {
		if dir && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) {
			return false, nil
		}
		return false, err
	}
	return true, nil
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

// writeHostFile writes rel whole. Unless exec, a file that exists keeps its
// execute bits and perm's are dropped.
func writeHostFile(root *os.Root, rel string, data []byte, perm fs.FileMode, exec bool) error {
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
	if !exec {
		perm &^= 0o111
		if err == nil {
			perm |= st.Mode().Perm() & 0o111
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".vfs-writeback-"+hex.EncodeToString(rnd[:]))
	tf, err := createHostExcl(root, tmp, perm)
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
