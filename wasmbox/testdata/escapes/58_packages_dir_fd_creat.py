# expect: contained
# Creating through a directory descriptor of a read-only mount (openat with O_CREAT) is refused too.
import errno, os
bad = []
for d in ("/packages", "/usr/local/lib/python3.13", "/"):
    dfd = os.open(d, os.O_RDONLY)
    for flags in (os.O_RDONLY | os.O_CREAT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
        try:
            os.close(os.open("planted.py", flags, dir_fd=dfd))
            bad.append("ESCAPED: created in %s" % d)
        except OSError as e:
            if e.errno != errno.EROFS:
                bad.append("WRONG errno %s in %s" % (errno.errorcode.get(e.errno, e.errno), d))
        except NotImplementedError:
            pass
    os.close(dfd)
print("\n".join(bad) or "CONTAINED")
