# expect: output
import sys
chunk = "x" * 65536
for _ in range(200):
    sys.stdout.write(chunk)
