# hostrss: output flood: large and tiny writes to stdout and stderr, through print and os.write, until the deadline
import os, sys
big = "o" * (64 << 20)
sys.stdout.write(big)
sys.stderr.write(big)
del big
chunk = b"x" * (1 << 20)
while True:
    for _ in range(100):
        os.write(1, chunk)
        os.write(2, chunk)
    for _ in range(10000):
        os.write(1, b"y")
        print("z", file=sys.stderr, flush=True)
