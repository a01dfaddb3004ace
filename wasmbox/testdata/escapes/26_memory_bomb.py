# expect: memory
x = bytearray(2**31 - 1)
