# expect: contained
import os
for p in ("/proc/self/environ", "/proc/self/maps", "/proc/1/cmdline", "/sys/class/net", "/dev/mem"):
    if os.path.exists(p):
        print("ESCAPED", p)
        break
else:
    print("CONTAINED")
