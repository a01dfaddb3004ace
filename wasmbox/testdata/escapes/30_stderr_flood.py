# expect: output
import sys
for _ in range(100000):
    print("e" * 100, file=sys.stderr)
