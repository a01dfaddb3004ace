# hostrss: bulk-memory copy loop: 110 MiB copies, each one memory.copy instruction, until the deadline
import itertools, collections
b = bytearray(110 << 20)
collections.deque(map(bytes, itertools.repeat(b)), maxlen=0)
