# hostrss: benign: uses its whole memory limit once (guest linear memory is host memory by design)
blocks = []
try:
    while True:
        blocks.append(bytearray(8 << 20))
except MemoryError:
    pass
print(len(blocks) * 8, "MiB")
