# expect: contained
import errno
try:
    for i in range(1000000):
        open("/workspace/f%d" % i, "w").close()
except OSError as e:
    print("CONTAINED" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "WRONG %r" % e)
