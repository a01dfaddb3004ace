# expect: contained
# /dev holds only null: it reads empty, drops what is written, keeps nothing; no other device opens.
import os
bad = []
for p in ("/dev/urandom", "/dev/zero", "/dev/tty", "/dev/sda", "/dev/stdin", "/dev/fd/0", "/dev/shm/x"):
    try:
        open(p, "rb")
        bad.append("ESCAPED " + p)
    except OSError:
        pass
with open("/dev/null", "wb") as f:
    f.write(b"secret" * 1000)
with open("/dev/null", "rb") as f:
    if f.read() != b"":
        bad.append("ESCAPED: /dev/null kept data")
for p, mode in (("/dev/null2", "w"), ("/dev/x/y", "w")):
    try:
        open(p, mode)
        bad.append("ESCAPED: created " + p)
    except OSError:
        pass
if os.listdir("/dev") != ["null"]:
    bad.append("ESCAPED: /dev holds %r" % os.listdir("/dev"))
print("\n".join(bad) or "CONTAINED")
