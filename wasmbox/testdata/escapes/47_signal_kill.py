# expect: contained
import os, signal
try:
    os.kill(1, signal.SIGKILL)
    print("ESCAPED")
except (AttributeError, OSError):
    print("CONTAINED")
