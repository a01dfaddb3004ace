// Package vfs is the sandbox's writable workspace: an in-memory file system
// implementing wazero's experimental sys.FS, mounted in the guest at
// "/workspace".
//
// # Security role
//
// It is the only writable place the guest has, and it is not backed by any
// host path (wazero's host directory mounts can be escaped through symlinks,
// so wasmbox never mounts a host directory). Here:
//
//   - Every path is relative to the workspace root. Leading "/", "." and
//     empty components are dropped; ".." is resolved lexically and any path
//     that would climb above the root ("..", "a/../../b") is refused with
//     EPERM (as wazero's own path check does); a NUL byte is EINVAL; names
//     over 255 bytes, paths over 4096 bytes and paths of more than 256
//     components are ENAMETOOLONG.
//   - Every entry always obeys those bounds (MaxPathLen, MaxDepth): a
//     create, mkdir or rename whose result would break them is
//     ENAMETOOLONG, so renaming deep trees under deep directories cannot
//     build paths whose cost the host pays on every Walk, Changes or
//     WriteBack. Directories cache upper bounds of their subtree's height
//     and longest path, so a rename checks the moved subtree without
//     walking it.
//   - There are no links at all: Symlink and Link are refused with EPERM
//     (the answer Linux gives for a file system that does not support them,
//     and what CPython turns into PermissionError); Readlink gives EINVAL for
//     any existing path (it is not a link) and ENOENT otherwise. So no path
//     can ever lead outside the tree.
//   - Quotas bound the total bytes of file contents (ENOSPC) and the
//     number of files plus directories (EDQUOT). A write, truncate, create or
//     mkdir that would pass a quota fails without any partial effect. Files
//     unlinked while still open stay charged until their last close, so
//     open-unlink-write cannot dodge the quota. At most MaxOpenFiles handles
//     may be open at once (EMFILE), since wazero itself has no fd limit and
//     every handle costs host memory; a directory handle keeps no copy of
//     its entries. The zero Limits means 64 MiB, 10,000 entries and 1,024
//     open handles.
//   - Permission bits are stored (chmod, create mode) and reported, never
//     enforced: the guest acts as the owner of everything. An open without
//     write access never changes an existing file (O_RDONLY|O_TRUNC is
//     EINVAL).
//   - Read-only mounts: ReadOnly wraps any sys.FS (this one, or an adapted
//     fs.FS) so that every open asking for write access, O_CREAT, O_EXCL,
//     O_TRUNC or O_APPEND, and every mutating operation, fails before the FS
//     below sees it, as a read-only Linux mount does: EROFS, or EISDIR,
//     EEXIST, ENOENT or ENOTDIR where Linux answers those first; Freeze
//     makes an FS itself immutable for guest and host alike (a layer many
//     guests share). OpenLimit bounds the handles one guest holds across all
//     the mounts it wraps (ReadOnly, Limited), since neither wazero nor a
//     frozen FS counts them.
//   - Dev is the guest's /dev: only "null", which reads empty and drops
//     every write, with no state at all.
//   - O_NONBLOCK (fcntl, os.set_blocking) is recorded and reported on every
//     handle, of this FS and of the ReadOnly and Limited wrappers, and has
//     no effect, as on Linux for regular files: both engines answer ENOSYS
//     for a handle that is not a sys.PollableFile.
//   - Each FS has its own mutex and shares nothing with other FS values:
//     give every Run a fresh FS (or a Clone of a seeded one).
//     The only thing a Clone shares with its original is the clock function
//     from WithClock, which must therefore be safe for concurrent use.
//
// # Errno choices
//
// wazero v1.12.0's sys.Errno has no ENOSPC, EDQUOT or EMFILE, so the FS
// returns this package's ENOSPC, EDQUOT and EMFILE values for its limit
// failures (as do OpenLimit and the ReadOnly and Limited wrappers for
// EMFILE). Host code sees them as such; the WASI layer serving the guest
// (internal/engine) maps them to wasip1 ENOSPC (51), EDQUOT (19) and
// EMFILE (33).
//
// Other choices follow Linux: Unlink of a directory is EISDIR; Rmdir of a
// file is ENOTDIR, of a non-empty directory ENOTEMPTY, of the root EINVAL;
// Mkdir of any existing path is EEXIST; Rename follows POSIX (EISDIR file
// over directory, ENOTDIR directory over file, ENOTEMPTY, EINVAL into its own
// subtree or of the root); a trailing slash on a non-directory is ENOTDIR;
// open with O_CREAT and a trailing slash is EISDIR.
//
// # Mounting
//
// The guest never sees wazero's own WASI: both engines serve
// wasi_snapshot_preview1 with internal/engine's implementation (NewWASI),
// whose preopens are the file systems engine.GuestMounts builds from the
// instance's mounts. The workspace is a writable mount:
//
//	ws := vfs.New(vfs.Limits{})
//	cfg := engine.InstanceConfig{Mounts: []engine.Mount{{GuestPath: "/workspace", SysFS: ws}}}
//	inst, err := mod.Instantiate(ctx, cfg)
//
// GuestMounts puts every read-only mount (an fs.FS, or an FS mounted with
// ReadOnly, such as a frozen package layer) behind ReadOnly and every
// writable one behind Limited, all sharing one OpenLimit, so the handle
// limit covers all the mounts of one instance together. Limit failures reach
// the guest as wasip1 ENOSPC, EDQUOT and EMFILE (see Errno choices), which
// CPython raises as OSError with errno.ENOSPC, errno.EDQUOT and errno.EMFILE.
//
// # Host side
//
// WriteFile, MkdirAll and CopyIn seed the workspace; ReadFile, Walk and List
// read it; Changes reports what the guest created, modified or deleted
// since the baseline (Mark, plus whatever the host seeded), and ChangesN
// the first few of them with a count, building only those paths (the
// baseline is a tree of names, not of paths); WriteBack applies those
// changes to a host directory under WriteBackOptions (hidden paths, execute
// bits and deletions refused unless allowed) without ever following a
// symlink or leaving it, and reports what it did; Clone deep-copies a
// workspace (sessions, snapshots); Reset empties it. Host-side errors start with "vfs: " and wrap a *PathError or
// the underlying error with %w.
package vfs
