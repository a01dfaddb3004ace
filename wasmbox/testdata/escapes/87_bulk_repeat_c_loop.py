# expect: timeout
# bytes repetition doubles with memcpy: a few large memory.copy instructions per iteration, in a C loop.
import collections
import itertools

collections.deque(map(b"x".__mul__, itertools.repeat(40 << 20)), maxlen=0)
