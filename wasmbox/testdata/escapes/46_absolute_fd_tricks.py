# expect: contained
import os
try:
    fd = os.open("/workspace", os.O_RDONLY)
    try:
        os.open("../etc/passwd", os.O_RDONLY, dir_fd=fd)
        print("ESCAPED")
    except (OSError, NotImplementedError):
        print("CONTAINED")
except OSError:
    print("CONTAINED")
