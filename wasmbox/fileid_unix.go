//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package wasmbox

import (
	"os"
	"syscall"
)

func identityOf(fi os.FileInfo) fileIdentity {
	id := fileIdentity{Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(st.Dev), uint64(st.Ino)
		sec, nsec := statCtime(st)
		id.CtimeNs = sec*1e9 + nsec
	}
	return id
}
