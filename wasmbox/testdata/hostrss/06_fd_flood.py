# hostrss: descriptor flood: 3 million opens of a stdlib file (the read-only zip mount), never closed; the library's default 30 s timeout
# timeout: 30s
import os
n = 0
try:
    for n in range(3_000_000):
        os.open("/usr/local/lib/python3.13/os.py", os.O_RDONLY)
except OSError as e:
    print("stopped:", e)
print("opened", n)
