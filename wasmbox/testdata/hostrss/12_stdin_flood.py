# hostrss: stdin flood: an endless stdin read in chunks, by lines and then to the end (MemoryError in the guest)
# stdin: endless
import sys, time
start = time.monotonic()
n = 0
while time.monotonic() - start < 1.5:
    n += len(sys.stdin.buffer.read(1 << 20))
for line in sys.stdin:
    if time.monotonic() - start > 3:
        break
    n += len(line)
data = sys.stdin.buffer.read()
