# expect: contained
# Many files left open at the end, in a cycle and on module globals: the end of the run closes each one, and
# the workspace quota and the deadline still hold for what they flush.
import os

held = []
for k in range(150):
    f = open("/workspace/f%03d" % k, "w")
    f.write("x" * 1000)
    held.append(f)
held.append(held)
print("CONTAINED")
