package engine

import (
	"fmt"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/wasmbox/wasmbox/internal/vfs"
)

// MaxOpenFiles bounds the descriptors one instance holds open at once across all its mounts (EMFILE beyond), on
// every engine: neither wazero nor our wasmtime WASI has a limit of its own, and each descriptor costs host
// memory. It is the same bound as one workspace's (vfs.DefaultMaxOpenFiles).
const MaxOpenFiles = vfs.DefaultMaxOpenFiles

// GuestMounts builds the file system every engine serves for each mount (NewWASI makes them the preopens), in
// order: read-only mounts (fs.FS ones and SysFS ones with ReadOnly) behind vfs.ReadOnly, which refuses every write
// flag and mutating operation with EROFS whatever lies below; writable ones behind vfs.Limited. All of them share
// one vfs.OpenLimit of MaxOpenFiles. Their limit failures are vfs.ENOSPC, vfs.EDQUOT and vfs.EMFILE, which the
// WASI functions report to the guest as wasip1 ENOSPC, EDQUOT and EMFILE (wasiErrno).
func GuestMounts(mounts []Mount) ([]experimentalsys.FS, error) {
	lim := vfs.NewOpenLimit(MaxOpenFiles)
	out := make([]experimentalsys.FS, 0, len(mounts))
	for _, mt := range mounts {
		switch {
		case mt.SysFS != nil && mt.FS != nil:
			return nil, fmt.Errorf("engine: mount %s has two file systems", mt.GuestPath)
		case mt.SysFS != nil && mt.ReadOnly:
			out = append(out, vfs.ReadOnly(mt.SysFS, lim))
		case mt.SysFS != nil:
			out = append(out, vfs.Limited(mt.SysFS, lim))
		case mt.FS != nil:
			out = append(out, vfs.ReadOnly(&sysfs.AdaptFS{FS: mt.FS}, lim))
		default:
			return nil, fmt.Errorf("engine: mount %s has no file system", mt.GuestPath)
		}
	}
	return out, nil
}
