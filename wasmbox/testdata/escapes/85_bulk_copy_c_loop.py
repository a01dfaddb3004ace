# expect: timeout
# A C-level loop whose every iteration is one memcpy of 40 MB (one memory.copy instruction with bulk memory):
# the deadline must stop it although it runs few loop iterations.
import collections
import itertools

b = bytearray(40 << 20)
collections.deque(map(bytes, itertools.repeat(b)), maxlen=0)
