# expect: contained
# O_EXCL and O_APPEND (even with O_RDONLY) are write flags: every read-only mount refuses them, with the errno a
# read-only Linux mount gives: EEXIST for O_CREAT|O_EXCL on an existing file, ENOENT for a missing file opened
# without O_CREAT, EROFS otherwise.
import errno, os
bad = []
targets = ["/usr/local/lib/python3.13/os.py", "/usr/share/zoneinfo/UTC", "/packages/new.py", "/new", "/usr/local/lib/python3.13/new.py"]
for p in targets:
    exists = os.path.exists(p)
    for flags in (os.O_RDONLY | os.O_APPEND, os.O_WRONLY | os.O_APPEND, os.O_CREAT | os.O_EXCL | os.O_WRONLY, os.O_RDONLY | os.O_EXCL):
        if exists:
            want = errno.EEXIST if flags & os.O_CREAT else errno.EROFS
        else:
            want = errno.EROFS if flags & os.O_CREAT else errno.ENOENT
        try:
            os.close(os.open(p, flags))
            bad.append("ESCAPED: %s opened with %#x" % (p, flags))
        except OSError as e:
            if e.errno != want:
                bad.append("WRONG errno %s for %s %#x" % (errno.errorcode.get(e.errno, e.errno), p, flags))
for p in ("/new", "/packages/new.py", "/usr/local/lib/python3.13/new.py"):
    if os.path.exists(p):
        bad.append("ESCAPED: %s exists" % p)
print("\n".join(bad) or "CONTAINED")
