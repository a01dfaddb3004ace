# expect: contained
import os
try:
    os.link("/usr/local/lib/python3.13/os.py", "/workspace/os.py")
    print("ESCAPED")
except OSError:
    print("CONTAINED")
