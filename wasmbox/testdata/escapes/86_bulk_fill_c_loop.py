# expect: timeout
# A C-level loop whose every iteration is one memset of 40 MB (bytearray(n) zero-fills: one memory.fill).
import collections
import itertools

collections.deque(map(bytearray, itertools.repeat(40 << 20)), maxlen=0)
