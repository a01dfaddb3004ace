# expect: contained
# Open a stdlib file without closing it until something gives: the read-only zip mounts had no descriptor limit
# (1.5 M opens cost the host 547 MiB). The instance's descriptor limit (1024) must stop it with EMFILE.
import errno, os
fds = []
try:
    for i in range(200000):
        fds.append(os.open("/usr/local/lib/python3.13/os.py", os.O_RDONLY))
    print("ESCAPED: 200000 descriptors")
except OSError as e:
    if e.errno == errno.EMFILE and len(fds) <= 1024:
        print("CONTAINED")
    else:
        print("WRONG %r after %d opens" % (e, len(fds)))
for fd in fds:
    os.close(fd)
