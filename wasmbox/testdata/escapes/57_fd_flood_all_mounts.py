# expect: contained
# The descriptor limit is per instance across every mount, read-only and writable: spreading opens over the
# stdlib, zoneinfo, /, /packages and the workspace must not get past 1024 in total.
import errno, os
open("/workspace/f", "w").close()
paths = ["/usr/local/lib/python3.13/os.py", "/usr/share/zoneinfo/UTC", "/", "/packages", "/workspace/f", "/tmp"]
fds = []
try:
    for i in range(6000):
        fds.append(os.open(paths[i % len(paths)], os.O_RDONLY))
    print("ESCAPED: 6000 descriptors")
except OSError as e:
    if e.errno == errno.EMFILE and len(fds) <= 1024:
        print("CONTAINED")
    else:
        print("WRONG %r after %d opens" % (e, len(fds)))
for fd in fds:
    os.close(fd)
