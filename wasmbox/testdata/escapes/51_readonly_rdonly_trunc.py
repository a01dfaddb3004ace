# expect: contained
# O_RDONLY|O_TRUNC on a read-only mount must fail with EROFS and leave the file whole.
import errno, os
bad = []
for p in ("/usr/local/lib/python3.13/os.py", "/usr/share/zoneinfo/UTC", "/packages", "/usr/local/lib/python3.13/json/__init__.py"):
    size = os.stat(p).st_size
    try:
        os.close(os.open(p, os.O_RDONLY | os.O_TRUNC))
        bad.append("ESCAPED: opened %s with O_TRUNC" % p)
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EISDIR):
            bad.append("WRONG errno %s for %s" % (errno.errorcode.get(e.errno, e.errno), p))
    if os.stat(p).st_size != size:
        bad.append("ESCAPED: %s truncated" % p)
print("\n".join(bad) or "CONTAINED")
