# expect: contained
import os
try:
    os.symlink("../../../../", "/workspace/up")
    print("ESCAPED", os.listdir("/workspace/up"))
except OSError:
    print("CONTAINED")
