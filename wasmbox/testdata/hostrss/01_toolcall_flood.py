# hostrss: tool-call argument flood: 1 MiB arguments to a tool that does not exist, until the deadline
import _wasmbox
req = b'Tnot_a_tool\n"' + b"x" * (1 << 20) + b'"'
while True:
    _wasmbox.call(req)
