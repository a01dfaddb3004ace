# expect: contained
try:
    x = [0] * (1 << 28)
except MemoryError:
    print("CONTAINED")
