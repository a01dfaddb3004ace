package wasmbox

// fileIdentity is what a verified cache entry records about its file: a file replaced, truncated, rewritten in
// place (the change time moves, and a user cannot set it back) or restored from elsewhere no longer matches.
// Where the system offers no inode or change time, size and modification time only.
type fileIdentity struct {
	Dev, Ino         uint64
	Size             int64
	MtimeNs, CtimeNs int64
}
