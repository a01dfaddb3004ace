# hostrss: benign: everything a program may legitimately hold at once: full /workspace and /tmp, full output, then its whole memory limit
import os, sys
chunk = b"w" * (1 << 20)
for root in ("/workspace", "/tmp"):
    i = 0
    try:
        while True:
            with open(f"{root}/f{i}", "wb") as f:
                f.write(chunk)
            i += 1
    except OSError:
        pass
del chunk
sys.stdout.write("o" * (1 << 20))
sys.stderr.write("e" * (1 << 20))
blocks = []
try:
    while True:
        blocks.append(bytearray(4 << 20))
except MemoryError:
    pass
print(len(blocks) * 4, "MiB")
