package vfs

import (
	"io/fs"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// WASI preview 1 has no file modes: its stat carries the file type only, and it has no chmod. A workspace
// stores POSIX permission bits anyway (files 0o644 and directories 0o755 when the program makes them, as with
// umask 022, whatever mode WASI's path_open or path_create_directory passes), and reports them to the guest in
// the one stat field that WASI passes through unchanged and that the guest's driver decodes: the device
// number. ModeDev(st.Dev) holds the bits; the rest is the FS's own device number.
const (
	// modeFlag marks a device number that carries permission bits.
	modeFlag = uint64(1) << 63
	// modeShift is where the nine permission bits start.
	modeShift = 48
	// DevMask extracts the device number proper from a stat's Dev.
	DevMask = uint64(1)<<modeShift - 1

	newFilePerm = 0o644
	newDirPerm  = 0o755
)

// nextDev numbers FS instances, so that a device number names one FS (the guest's driver changes a mode by
// device and inode: Chmod by ino).
var nextDev atomic.Uint64

func newDev() uint64 { return devID + nextDev.Add(1) }

// statDev is the Dev a stat of n reports: the FS's device number with n's permission bits.
func (f *FS) statDev(n *node) uint64 {
	return f.dev | modeFlag | uint64(n.mode.Perm())<<modeShift
}

// ModeDev decodes the permission bits a stat's Dev carries (ok false when it carries none).
func ModeDev(dev uint64) (perm fs.FileMode, ok bool) {
	if dev&modeFlag == 0 {
		return 0, false
	}
	return fs.FileMode(dev>>modeShift) & fs.ModePerm, true
}

// Dev is the FS's device number, as stat reports it without the permission bits.
func (f *FS) Dev() uint64 { return f.dev }

// ChmodIno sets the permission bits of the file or directory with inode ino (what the guest's os.chmod and
// os.fchmod do: the guest knows a file by its stat). ENOENT when no linked node has it, EROFS when the FS is
// frozen. The search visits each node once, and the FS holds at most Limits.MaxFiles nodes.
func (f *FS) ChmodIno(ino uint64, perm fs.FileMode) sys.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return sys.EROFS
	}
	n := findIno(f.root, ino)
	if n == nil {
		return sys.ENOENT
	}
	n.mode = n.mode&fs.ModeType | perm&fs.ModePerm
	n.ctim = f.nowNanos()
	return 0
}

func findIno(n *node, ino uint64) *node {
	if n.ino == ino {
		return n
	}
	for _, c := range n.children {
		if m := findIno(c, ino); m != nil {
			return m
		}
	}
	return nil
}
