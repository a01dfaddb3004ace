# expect: contained
# unlink, utime, truncate and writes through a read-only descriptor all fail on the read-only mounts. (WASI has
# no chmod: wasi-libc's is a no-op that never reaches the host.)
import errno, os
bad = []
def attempt(what, fn, errnos=(errno.EROFS,)):
    try:
        fn()
        bad.append("ESCAPED: " + what)
    except OSError as e:
        if e.errno not in errnos:
            bad.append("WRONG errno %s for %s" % (errno.errorcode.get(e.errno, e.errno), what))
stdfile = "/usr/local/lib/python3.13/os.py"
st = os.stat(stdfile)
attempt("unlink stdlib", lambda: os.unlink(stdfile))
attempt("unlink zoneinfo", lambda: os.unlink("/usr/share/zoneinfo/UTC"))
attempt("utime stdlib", lambda: os.utime(stdfile, (1, 1)))
attempt("utime packages", lambda: os.utime("/packages", (1, 1)))
attempt("truncate stdlib", lambda: os.truncate(stdfile, 0))
fd = os.open(stdfile, os.O_RDONLY)
attempt("write on a read-only fd", lambda: os.write(fd, b"pwned"), (errno.EBADF, errno.EROFS))
attempt("ftruncate on a read-only fd", lambda: os.ftruncate(fd, 0), (errno.EBADF, errno.EROFS, errno.EINVAL))
attempt("futimens on a read-only fd", lambda: os.utime(fd, (1, 1)), (errno.EROFS, errno.EBADF))
os.close(fd)
after = os.stat(stdfile)
if after.st_size != st.st_size or after.st_mtime != st.st_mtime:
    bad.append("ESCAPED: stdlib file changed")
print("\n".join(bad) or "CONTAINED")
