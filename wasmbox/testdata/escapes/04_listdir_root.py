# expect: contained
import os
names = set(os.listdir("/"))
# only the sandbox's own mounts may be visible
print("CONTAINED" if names <= {"usr", "workspace", "tmp", "packages"} else "ESCAPED %r" % sorted(names))
