package vfs

import (
	"errors"
	"io/fs"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// Quota errnos.
//
// wazero v1.12.0's sys.Errno has no ENOSPC, EDQUOT or EMFILE. The workspace
// reports limit failures with these distinct values so that host code can
// tell them apart (errors.Is(err, vfs.ENOSPC)), and the WASI layer serving the
// guest (internal/engine) maps them to wasip1 ENOSPC (51), EDQUOT (19) and
// EMFILE (33).
//
// The numeric values are private to this package (high bit set so they never
// collide with wazero's own small constants); compare with ==, never by number.
const (
	// ENOSPC: the byte quota (Limits.MaxBytes) would be exceeded.
	ENOSPC sys.Errno = 0x8000 | 51
	// EDQUOT: the file-count quota (Limits.MaxFiles) would be exceeded.
	EDQUOT sys.Errno = 0x8000 | 19
	// EMFILE: too many open handles (Limits.MaxOpenFiles).
	EMFILE sys.Errno = 0x8000 | 33
)

// ErrHostSymlink is wrapped by CopyIn and WriteBack errors when a host path
// they would traverse or write is a symbolic link; they never follow one.
// (Sentinels are only returned wrapped, inside a "vfs: ..." message.)
var ErrHostSymlink = errors.New("symbolic link refused")

// ErrHostIrregular is wrapped by CopyIn errors for host entries that are
// neither regular files nor directories (devices, FIFOs, sockets), and by
// WriteBack when the target exists with the wrong type.
var ErrHostIrregular = errors.New("not a regular file or directory")

// PathError is the error returned by the host-side API for a failed
// operation on a workspace path. Its message starts with "vfs: ".
//
// errors.Is works both with the sys.Errno (errors.Is(err, sys.ENOENT),
// errors.Is(err, vfs.ENOSPC)) and with the io/fs sentinel it corresponds to
// (errors.Is(err, fs.ErrNotExist)).
type PathError struct {
	Op   string
	Path string
	Err  sys.Errno
}

func (e *PathError) Error() string {
	return "vfs: " + e.Op + " " + quote(e.Path) + ": " + errnoString(e.Err)
}

// Unwrap returns the Errno and, where one exists, the io/fs sentinel.
func (e *PathError) Unwrap() []error {
	if std := stdErr(e.Err); std != nil {
		return []error{e.Err, std}
	}
	return []error{e.Err}
}

func quote(p string) string {
	if p == "" {
		return `"."`
	}
	b := make([]byte, 0, len(p)+2)
	b = append(b, '"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

func errnoString(e sys.Errno) string {
	switch e {
	case ENOSPC:
		return "no space left on device (workspace byte quota)"
	case EDQUOT:
		return "disk quota exceeded (workspace file-count quota)"
	case EMFILE:
		return "too many open files (workspace handle limit)"
	}
	return e.Error()
}

func stdErr(e sys.Errno) error {
	switch e {
	case sys.ENOENT:
		return fs.ErrNotExist
	case sys.EEXIST:
		return fs.ErrExist
	case sys.EPERM, sys.EACCES:
		return fs.ErrPermission
	case sys.EINVAL:
		return fs.ErrInvalid
	case sys.EBADF:
		return fs.ErrClosed
	}
	return nil
}

func pathErr(op, path string, e sys.Errno) error {
	if e == 0 {
		return nil
	}
	return &PathError{Op: op, Path: path, Err: e}
}
