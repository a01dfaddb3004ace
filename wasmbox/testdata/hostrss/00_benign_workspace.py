# hostrss: benign: fills the byte quotas of /workspace and /tmp and writes its output limits
import os, sys
chunk = b"w" * (1 << 20)
for root in ("/workspace", "/tmp"):
    i = 0
    try:
        while True:
            with open(f"{root}/f{i}", "wb") as f:
                f.write(chunk)
            i += 1
    except OSError:
        pass
sys.stdout.write("o" * (1 << 20))
sys.stderr.write("e" * (1 << 20))
