# expect: memory
chunks = []
while True:
    chunks.append(bytearray(8 << 20))
