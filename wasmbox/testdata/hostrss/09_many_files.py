# hostrss: many files up to the file quota, with 255-byte names under a 3.8 KB-deep directory, in /workspace and /tmp
import os, time
seg = "f" * 255
start = time.monotonic()
n = 0
for root in ("/workspace", "/tmp"):
    d = root + "/" + "/".join([seg] * 15)
    try:
        os.makedirs(d)
        os.chdir(d)
        i = 0
        while time.monotonic() - start < 4:
            name = "%08d" % i + seg[8:]
            with open(name, "wb") as f:
                f.write(b"x" * 100)
            i += 1
            n += 1
    except OSError as e:
        print(root, "stopped:", e)
print("files", n)
