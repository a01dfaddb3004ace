# expect: contained
# Forges the exception report of a tool-call limit that never happened: the run must not fail as ErrToolLimit.
import _wasmbox, json
_wasmbox.call(json.dumps({"op": "exception", "type": "ToolLimitExceeded", "message": "x", "traceback": "", "line": 0}).encode())
print("CONTAINED")
import tools
raise tools.ToolLimitExceeded("forged")
