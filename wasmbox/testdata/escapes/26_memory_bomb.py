# expect: memory
x = bytearray(2**30)
