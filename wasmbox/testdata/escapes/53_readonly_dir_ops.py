# expect: contained
# mkdir, rename and rmdir on every read-only mount fail with EROFS.
import errno, os
bad = []
def attempt(what, fn):
    try:
        fn()
        bad.append("ESCAPED: " + what)
    except OSError as e:
        if e.errno != errno.EROFS:
            bad.append("WRONG errno %s for %s" % (errno.errorcode.get(e.errno, e.errno), what))
for root in ("/", "/packages", "/usr/local/lib/python3.13", "/usr/share/zoneinfo"):
    attempt("mkdir in " + root, lambda: os.mkdir(os.path.join(root, "newdir")))
attempt("rename stdlib file", lambda: os.rename("/usr/local/lib/python3.13/os.py", "/usr/local/lib/python3.13/os2.py"))
attempt("rename stdlib dir", lambda: os.rename("/usr/local/lib/python3.13/json", "/usr/local/lib/python3.13/json2"))
attempt("rename zoneinfo file", lambda: os.rename("/usr/share/zoneinfo/UTC", "/usr/share/zoneinfo/GMT0x"))
attempt("rmdir stdlib dir", lambda: os.rmdir("/usr/local/lib/python3.13/json"))
attempt("rmdir zoneinfo dir", lambda: os.rmdir("/usr/share/zoneinfo/Europe"))
if not os.path.exists("/usr/local/lib/python3.13/os.py") or os.path.exists("/packages/newdir"):
    bad.append("ESCAPED: the tree changed")
print("\n".join(bad) or "CONTAINED")
