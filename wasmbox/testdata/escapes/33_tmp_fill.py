# expect: contained
import errno, tempfile
try:
    with tempfile.TemporaryFile() as f:
        while True:
            f.write(b"\0" * (1 << 20))
except OSError as e:
    print("CONTAINED" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "WRONG %r" % e)
