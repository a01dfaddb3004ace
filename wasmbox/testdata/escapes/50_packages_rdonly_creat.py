# expect: contained
# /packages is read-only: O_CREAT must not create a file there, whatever the access mode (a Run's file would be
# seen by every later Run).
import errno, os
bad = []
for flags in (os.O_RDONLY | os.O_CREAT, os.O_WRONLY | os.O_CREAT, os.O_RDWR | os.O_CREAT | os.O_EXCL):
    try:
        os.close(os.open("/packages/x.py", flags))
        bad.append("ESCAPED: created with %#x" % flags)
    except OSError as e:
        if e.errno != errno.EROFS:
            bad.append("WRONG errno %s for %#x" % (errno.errorcode.get(e.errno, e.errno), flags))
if os.listdir("/packages") or os.path.exists("/packages/x.py"):
    bad.append("ESCAPED: /packages holds %r" % os.listdir("/packages"))
print("\n".join(bad) or "CONTAINED")
