# expect: crash_or_contained
import sys
sys.setrecursionlimit(10**6)
def f(n):
    return f(n + 1) + 1
try:
    f(0)
except (RecursionError, MemoryError):
    print("CONTAINED")
