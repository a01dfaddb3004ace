//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package wasmbox

import "os"

func identityOf(fi os.FileInfo) fileIdentity {
	return fileIdentity{Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}
}
