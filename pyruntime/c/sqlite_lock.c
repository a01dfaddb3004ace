/*
 * In-process file locking for SQLite in the wasmbox interpreter.
 *
 * SQLite's "unix" VFS arbitrates locks between the connections of one process itself (its unixInodeInfo
 * records, one per file: shared-lock counts and the strongest lock held, the same bookkeeping it uses for
 * threads) and asks fcntl(F_SETLK) only to exclude other processes. WASI has no fcntl locks, so SQLite's WASI
 * default is the "unix-dotfile" VFS, where any lock is exclusive: a second connection cannot even read while
 * another holds a write transaction ("database is locked"), unlike on Linux.
 *
 * The interpreter is one single-threaded process, and a workspace is never used by two runs at once (see
 * wasmbox.Workspace), so there is no other process to exclude: sqlite3.c is compiled with -Dfcntl= this function
 * and the "unix" VFS as default, and the byte-range lock requests succeed here while SQLite's own bookkeeping
 * gives the usual SHARED / RESERVED / PENDING / EXCLUSIVE rules between connections (two writers still exclude
 * each other: this is not SQLite's no-lock "unix-none"). Every other fcntl command goes to wasi-libc.
 */
#include <fcntl.h>
#include <stdarg.h>

/* The values sqlite3.c uses under WASI, where wasi-libc defines none of them. */
#ifndef F_RDLCK
#define F_RDLCK 0
#define F_WRLCK 1
#define F_UNLCK 2
#endif
#ifndef F_GETLK
#if __LONG_MAX == 0x7fffffffL
#define F_GETLK 12
#define F_SETLK 13
#define F_SETLKW 14
#else
#define F_GETLK 5
#define F_SETLK 6
#define F_SETLKW 7
#endif
#endif

int wasmbox_sqlite_fcntl(int fd, int cmd, ...);

int
wasmbox_sqlite_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    if (cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK) {
        struct flock *l = va_arg(ap, struct flock *);
        va_end(ap);
        if (cmd == F_GETLK && l != 0) {
            l->l_type = F_UNLCK; /* no other process holds a lock */
        }
        return 0;
    }
    int arg = va_arg(ap, int);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}
