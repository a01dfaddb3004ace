# expect: contained
import os
try:
    os.symlink("/etc", "/workspace/etc")
    print("ESCAPED" if os.path.exists("/workspace/etc/passwd") else "CONTAINED")
except OSError:
    print("CONTAINED")
