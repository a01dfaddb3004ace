# hostrss: oversized tool calls: requests of exactly the 16 MiB request cap (valid, denied) and one byte over it (refused), until the deadline
import _wasmbox
head, tail = b'Tnot_a_tool\n"', b'"'
at_cap = head + b"x" * ((16 << 20) - len(head) - len(tail)) + tail
over = head + b"x" * ((16 << 20) - len(head) - len(tail) + 1) + tail
while True:
    for req in (at_cap, over):
        try:
            _wasmbox.call(req)
        except Exception:
            pass
