# expect: contained
import os
try:
    open("/workspace/../../etc/passwd").read()
    print("ESCAPED")
except OSError:
    print("CONTAINED")
