"""Tools from inside an escalated wasmbox container.

The same calls as the wasm sandbox's ``tools`` module: every call goes to the host over a unix socket
(/run/wasmbox/tools.sock, mounted read-only; the container has no network), where the host's governance Gate
decides, runs the tool and audits it::

    import wasmbox_tools as tools
    rows = tools.call("search", query="gVisor", limit=3)
    rows = tools.search(query="gVisor", limit=3)  # the same call

Errors raise the same exception classes as the wasm sandbox's ``tools`` module, all subclasses of ToolException:

    ToolDenied         the call did not run: ApprovalDenied (ApprovalTimeout), BudgetExceeded, ToolLimitExceeded
    ToolError          the call ran, or was refused as malformed, and failed: InvalidToolArguments, UnknownTool
    ProtocolError      the host could not be reached or answered something unreadable

Pure Python, standard library only; one connection per process, calls are serialised.
"""

import json
import os
import socket
import threading

__all__ = [
    "call", "ToolException", "ToolDenied", "ApprovalDenied", "ApprovalTimeout", "BudgetExceeded",
    "ToolLimitExceeded", "ToolError", "InvalidToolArguments", "UnknownTool", "ProtocolError",
]

PROTOCOL_VERSION = 1
SOCKET = os.environ.get("WASMBOX_TOOLS_SOCKET", "/run/wasmbox/tools.sock")
_MAX_RESPONSE = 16 << 20


# @@EXCEPTIONS@@ (replaced by hostfuncs.PythonExceptions when the client is embedded)


class ProtocolError(ToolException):
    """The host could not be reached or its answer could not be read."""


_TYPES = dict(_ERRORS, ProtocolError=ProtocolError)

_lock = threading.Lock()
_conn = None
_next_id = 0


def _connect():
    global _conn
    if _conn is None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(SOCKET)
        except OSError as e:
            s.close()
            raise ProtocolError("cannot reach the tool socket %s: %s" % (SOCKET, e)) from None
        _conn = (s, s.makefile("rb"))
    return _conn


def _request(line):
    """Sends one request line and returns the decoded response object (the caller holds _lock).

    The host closes a connection that stayed idle too long without reading anything from it; a reused
    connection that ends before any byte of an answer is therefore opened again and the request sent once more
    (the host never read it)."""
    global _conn
    reused = _conn is not None
    s, r = _connect()
    try:
        s.sendall(line.encode() + b"\n")
        resp = r.readline(_MAX_RESPONSE + 1)
    except OSError as e:
        _conn = None
        s.close()
        if reused:
            return _request(line)
        raise ProtocolError("tool socket: %s" % e) from None
    if not resp and reused:
        _conn = None
        s.close()
        return _request(line)
    if not resp.endswith(b"\n"):
        _conn = None
        raise ProtocolError("tool socket closed or response too large")
    try:
        return json.loads(resp)
    except ValueError:
        _conn = None
        raise ProtocolError("unreadable response from the host") from None


def call(tool, _args=None, /, **kwargs):
    """Calls a tool on the host with keyword arguments (or one dict) and returns its decoded JSON result."""
    global _next_id
    if not isinstance(tool, str) or not tool:
        raise TypeError("tool name must be a non-empty string")
    if _args is not None:
        if not isinstance(_args, dict) or kwargs:
            raise InvalidToolArguments("pass the arguments as keywords or as one dict", tool)
        kwargs = _args
    with _lock:
        _next_id += 1
        try:
            line = json.dumps({"v": PROTOCOL_VERSION, "id": _next_id, "op": "call", "tool": tool, "args": kwargs},
                              separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise InvalidToolArguments("%s: arguments are not JSON-serialisable: %s" % (tool, e), tool) from None
        resp = _request(line)
    if resp.get("ok"):
        return resp.get("result")
    err = resp.get("error") or {}
    typ = err.get("type") or "ToolError"
    raise _TYPES.get(typ, ToolError)(err.get("message", ""), tool=tool, type=typ)


def __getattr__(name):
    # tools.search(query=...) is tools.call("search", query=...).
    if name.startswith("__"):
        raise AttributeError(name)

    def tool(_args=None, /, **kwargs):
        return call(name, _args, **kwargs)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = "Calls the host tool %r (see wasmbox_tools.call)." % name
    return tool
