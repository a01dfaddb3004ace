# hostrss: tool-call count flood: millions of tiny calls, each one a record (ToolCalls, the audit)
# timeout: 15s
import _wasmbox
while True:
    for name in (b"Tnot_a_tool\n{}", b"Tx\n1", b'{"op":"tool","name":"nope","args":{}}'):
        try:
            _wasmbox.call(name)
        except Exception:
            pass
