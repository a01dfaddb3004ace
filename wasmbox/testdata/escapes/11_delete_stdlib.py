# expect: contained
import os
try:
    os.remove("/usr/local/lib/python3.13/json/__init__.py")
    print("ESCAPED")
except OSError:
    print("CONTAINED")
