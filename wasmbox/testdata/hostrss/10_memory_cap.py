# hostrss: memory growth to the cap, then a loop that catches MemoryError and tries again until the deadline
blocks = []
try:
    while True:
        blocks.append(bytearray(1 << 20))
except MemoryError:
    pass
n = 0
while True:
    try:
        blocks.append(bytearray(64 << 20))
    except MemoryError:
        n += 1
        if blocks:
            blocks.pop()
