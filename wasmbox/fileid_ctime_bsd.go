//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package wasmbox

import "syscall"

func statCtime(st *syscall.Stat_t) (sec, nsec int64) {
	return int64(st.Ctimespec.Sec), int64(st.Ctimespec.Nsec)
}
