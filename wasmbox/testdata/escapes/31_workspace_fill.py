# expect: contained
import errno
try:
    with open("/workspace/big", "wb") as f:
        while True:
            f.write(b"\0" * (1 << 20))
except OSError as e:
    print("CONTAINED" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "WRONG %r" % e)
