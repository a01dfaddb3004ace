# expect: contained
import os
try:
    os.chdir("/workspace")
    for _ in range(10):
        os.chdir("..")
    names = set(os.listdir("."))
    print("CONTAINED" if names <= {"usr", "workspace", "tmp", "packages"} else "ESCAPED %r" % names)
except OSError:
    print("CONTAINED")
