# expect: contained
# Nest directory trees bottom-up through renames (every path stays short), then move the result under a directory
# whose path is near 4 KB. Unbounded, this builds trees thousands of levels deep whose full paths the host
# materialises on every run (O(depth^2) host memory). The move must be refused with ENAMETOOLONG.
import errno, os
W = "/workspace"
deep = W
for i in range(16):
    deep += "/" + "n" * 240
    os.mkdir(deep)
def chain(top, name, n):
    p = top
    for i in range(n):
        p += "/" + name
        os.mkdir(p)
    return p
os.mkdir(W + "/acc")
chain(W + "/acc", "a", 9)
result = "CONTAINED?"
try:
    for r in range(12):
        bottom = chain(W, "t", 12)
        os.rename(W + "/acc", bottom + "/acc")
        os.rename(W + "/t", W + "/acc")
    os.rename(W + "/acc", deep + "/acc")
    result = "ESCAPED: a tree %d levels deep moved under a %d-byte path" % (10 + 12 * 12, len(deep))
except OSError as e:
    result = "CONTAINED" if e.errno == errno.ENAMETOOLONG else "WRONG %r" % e
print(result)
