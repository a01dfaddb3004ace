# expect: contained
try:
    import ctypes
    ctypes.CDLL(None)
    print("ESCAPED")
except (ImportError, OSError):
    print("CONTAINED")
