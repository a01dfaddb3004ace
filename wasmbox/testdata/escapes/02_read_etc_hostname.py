# expect: contained
import os
print("ESCAPED" if os.path.exists("/etc/hostname") else "CONTAINED")
