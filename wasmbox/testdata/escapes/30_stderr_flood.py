# expect: output
import sys
block = ("e" * 99 + "\n") * 1000
for _ in range(100):
    sys.stderr.write(block)
