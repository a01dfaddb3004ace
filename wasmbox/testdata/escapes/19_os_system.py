# expect: contained
import os
if hasattr(os, "system"):
    try:
        os.system("id")
        print("ESCAPED")
    except OSError:
        print("CONTAINED")
else:
    print("CONTAINED")
