# hostrss: a Session with many Execs, each leaving state: globals, files, denied tool calls, output
# mode: session
# execs: 100
import _wasmbox, os
try:
    keep
except NameError:
    keep = []
    count = 0
count += 1
try:
    keep.append(bytearray(2 << 20))
except MemoryError:
    keep.clear()
with open(f"/workspace/state{count}", "wb") as f:
    f.write(b"s" * (512 << 10))
for _ in range(20):
    _wasmbox.call(b'Tnot_a_tool\n"' + b"x" * (256 << 10) + b'"')
print("x" * (256 << 10))
