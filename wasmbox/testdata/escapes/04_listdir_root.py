# expect: contained
import os
names = set(os.listdir("/"))
# only the sandbox's own mounts may be visible
print("CONTAINED" if names <= {"usr", "workspace", "tmp", "packages", "dev"} and os.listdir("/dev") == ["null"] else "ESCAPED %r" % sorted(names))
