# hostrss: deep directory chain by descent: mkdir and open relative to a directory descriptor (1-byte names, then 255-byte names), as deep as the limits allow; the host then lists every change
import os, time

fd = os.open("/workspace", os.O_RDONLY)
depth = 0
start = time.monotonic()
for seg in ("e", "e" * 255):
    try:
        while time.monotonic() - start < 3.5:
            os.mkdir(seg, dir_fd=fd)
            nfd = os.open(seg, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            depth += 1
    except OSError as e:
        print("stopped:", type(e).__name__, e.errno)
print("depth", depth, "in", round(time.monotonic() - start, 2), "s")
