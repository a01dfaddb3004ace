# hostrss: descriptor flood: opens of a stdlib file (the read-only zip mount), never closed, 1.5 million per Exec of one Session (descriptors outlive an Exec)
# mode: session
# execs: 3
# timeout: 10s
import os
n = 0
try:
    for n in range(1_500_000):
        os.open("/usr/local/lib/python3.13/os.py", os.O_RDONLY)
except OSError as e:
    print("stopped:", e)
print("opened", n)
