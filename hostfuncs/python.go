package hostfuncs

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// pyPrelude is the fixed part of the generated `tools` module: the exception hierarchy and the call helper.
// PythonExceptions is the Python source of the tool exception hierarchy (and _ERRORS, by class name), shared by
// the generated tools module and escalate's container client so the two cannot drift apart.
//
// Its code refers at call time only to names that start with an underscore, which no tool may have, so that a
// tool named like a builtin (super, type, dict) cannot break it.
const PythonExceptions = `_Exception = Exception

class ToolException(Exception):
    """Base class of every tool failure: tool is the tool name, type the error type the host gave."""
    def __init__(self, message, tool=None, type=None):
        _Exception.__init__(self, message)
        self.message = message
        self.tool = tool
        self.type = type or self.__class__.__name__

class ToolDenied(ToolException):
    """The host's policy refused the call; the tool did not run."""

class ApprovalDenied(ToolDenied):
    """The call needed approval and was refused."""

class ApprovalTimeout(ApprovalDenied):
    """The call needed approval and none came in time."""

class BudgetExceeded(ToolDenied):
    """A budget (per-tool cap, cost units, irreversible actions) would be exceeded; the tool did not run."""

class ToolLimitExceeded(ToolDenied):
    """The run's hard limit on tool calls is reached; no further call will run."""

class ToolError(ToolException):
    """The tool ran and failed; the message is the tool's."""

class InvalidToolArguments(ToolError, TypeError):
    """The arguments do not match the tool's parameters."""

class UnknownTool(ToolError, AttributeError):
    """No tool has this name."""

_ERRORS = {c.__name__: c for c in (ToolException, ToolDenied, ApprovalDenied, ApprovalTimeout, BudgetExceeded,
                                   ToolLimitExceeded, ToolError, InvalidToolArguments, UnknownTool)}
`

const pyPrelude = `"""Tools of this sandbox. Each function runs on the host, after the host's governance gate allows the call.

Every failure raises a subclass of ToolException:
  ToolDenied (ApprovalDenied, ApprovalTimeout, BudgetExceeded, ToolLimitExceeded): the call did not run.
  ToolError (InvalidToolArguments, UnknownTool): the call ran, or was refused as malformed, and failed.
"""
import json as _json
import _wasmbox
import builtins as _builtins

@@EXCEPTIONS@@
_MISSING = object()

import _json as _cjson

# Tools are module globals and may be named like builtins; the code below refers at call time only to names
# that start with an underscore, which no tool and no parameter may have.
_type, _dict, _TypeError, _ValueError, _StopIteration, _len = (
    _builtins.type, _builtins.dict, _builtins.TypeError, _builtins.ValueError, _builtins.StopIteration, _builtins.len)
_InvalidToolArguments, _ToolError = InvalidToolArguments, ToolError

def _not_json(o):
    raise _TypeError("Object of type %s is not JSON serializable" % _type(o).__name__)

# The C encoder and scanner of the json module, built once: json.dumps/loads rebuild them on every call, which
# cost more than the host call itself.
_c_encode = _cjson.make_encoder({}, _not_json, _cjson.encode_basestring, None, ":", ",", False, False, False)
_scan = _json.JSONDecoder().scan_once
_call = _wasmbox.call

def _encode(o):
    return "".join(_c_encode(o, 0))

def _decode(b):
    s = b.decode("utf-8")
    try:
        value, end = _scan(s, 0)
    except _StopIteration:
        return _json.loads(s)
    if end != _len(s) and s[end:].strip():
        return _json.loads(s)  # raises the usual error for trailing data
    return value

def _fallback(_kind, _name, _payload):
    # The slow paths of _wasmbox.call_tool: 0 arguments that cannot be encoded (_payload: the exception), 1 an
    # error response of the host (bytes), 2 a response the C decoder refused (bytes).
    if _kind == 0:
        raise _InvalidToolArguments("%s: arguments are not JSON-serialisable: %s" % (_name, _payload), _name) from None
    if _kind == 1:
        try:
            err = _json.loads(_payload)
        except _ValueError:
            err = {"type": "ToolError", "message": _payload.decode("utf-8", "replace")}
        raise _ERRORS.get(err.get("type"), _ToolError)(err.get("message", ""), _name)
    return _json.loads(_payload.decode("utf-8"))

def _call_tool_py(_name, _kwargs):
    if _MISSING in _kwargs.values():
        _kwargs = {k: v for k, v in _kwargs.items() if v is not _MISSING}
    try:
        _args = _encode(_kwargs)
    except (_TypeError, _ValueError) as e:
        raise _InvalidToolArguments("%s: arguments are not JSON-serialisable: %s" % (_name, e), _name) from None
    # The tool fast path of the ABI: "T" name "\n" JSON-arguments (no JSON envelope to build or parse).
    ok, resp = _call(("T" + _name + "\n" + _args).encode())
    if ok:
        return _decode(resp)
    _fallback(1, _name, resp)

# The call path in C (encode, host call, decode in one C call) when the interpreter has it; the Python one above
# does the same for an interpreter built without it.
if _builtins.hasattr(_wasmbox, "call_tool"):
    _wasmbox.tool_setup(_c_encode, _scan, _MISSING, _fallback)
    _call_tool = _wasmbox.call_tool
else:
    _call_tool = _call_tool_py

# Each tool function below is replaced by a C callable that binds its arguments as the function would and encodes
# them straight into the request (no Python frame, no dict per call). It carries the function's name, docstring
# and annotations, and the function itself as __wrapped__, which inspect.signature and help() follow.
if _builtins.hasattr(_wasmbox, "tool"):
    import functools as _functools

    def _wrap(_f, _name, _params, _nrequired):
        return _functools.update_wrapper(_wasmbox.tool(_name, _params, _nrequired), _f)
else:
    def _wrap(_f, _name, _params, _nrequired):
        return _f

def call(name, /, **kwargs):
    """Call the tool called name with keyword arguments; returns its JSON-decoded result."""
    return _call_tool(name, kwargs)

def list_tools():
    """Describe every tool: a list of {"name", "description", "parameters"} dicts."""
    return [_dict(t) for t in _TOOLS]
`

// PythonModule generates the source of the `tools` module for the registry: one function per tool with a real
// signature (required parameters positional-or-keyword, optional ones keyword-only), type hints and a docstring
// from the schemas. With the shipped interpreter each function is then replaced by a C callable
// (`_wasmbox.Tool`) that binds arguments exactly as the function would, TypeErrors included, and encodes them
// without a Python frame; it keeps the function's name, docstring and annotations, and the function itself as
// `__wrapped__`, so `inspect.signature` and `help()` show the same signature.
func (r *Registry) PythonModule() string {
	var b strings.Builder
	b.WriteString(strings.Replace(pyPrelude, "@@EXCEPTIONS@@\n", PythonExceptions, 1))
	listing := []map[string]any{}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, name := range r.order {
		e := r.entry(name)
		var params any
		_ = json.Unmarshal(e.Parameters, &params)
		listing = append(listing, map[string]any{"name": name, "description": e.Description, "parameters": params})
		writeFunc(&b, e)
	}
	lj, _ := json.Marshal(listing)
	fmt.Fprintf(&b, "\n_TOOLS = _json.loads(%s)\n__all__ = %s\n", pyStr(string(lj)), pyList(append(append([]string{}, r.order...), "call", "list_tools", "ToolException", "ToolDenied", "ApprovalDenied", "ApprovalTimeout", "BudgetExceeded", "ToolLimitExceeded", "ToolError", "InvalidToolArguments", "UnknownTool")))
	return b.String()
}

// Stubs returns the tools as Python stubs (signatures and docstrings, bodies elided): what a model is shown.
func (r *Registry) Stubs() string {
	var b strings.Builder
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, name := range r.order {
		b.WriteString(signature(r.entry(name)))
		b.WriteString(":\n")
		b.WriteString(docstring(r.entry(name)))
		b.WriteString("    ...\n\n")
	}
	return b.String()
}

func writeFunc(b *strings.Builder, e *entry) {
	b.WriteString("\n")
	b.WriteString(signature(e))
	b.WriteString(":\n")
	b.WriteString(docstring(e))
	// The body names only its parameters and private module names (no parameter starts with '_'), so no
	// parameter name can shadow what it calls.
	args := make([]string, len(e.params))
	for i, p := range e.params {
		args[i] = fmt.Sprintf("%s: %s", pyStr(p.Name), p.Name)
	}
	fmt.Fprintf(b, "    return _call_tool(%s, {%s})\n", pyStr(e.Name), strings.Join(args, ", "))
	names, required := make([]string, len(e.params)), 0
	for i, p := range e.params {
		names[i] = pyStr(p.Name) + ","
		if p.Required {
			required++
		}
	}
	fmt.Fprintf(b, "%s = _wrap(%s, %s, (%s), %d)\n", e.Name, e.Name, pyStr(e.Name), strings.Join(names, " "), required)
}

func signature(e *entry) string {
	var parts []string
	kwOnly := false
	for _, p := range e.params {
		if !p.Required && !kwOnly {
			parts = append(parts, "*")
			kwOnly = true
		}
		s := p.Name + ": " + quoteAny(pyType(p.Schema))
		if !p.Required {
			s += " = _MISSING"
		}
		parts = append(parts, s)
	}
	ret := "Any"
	if len(e.Result) > 0 {
		var rs map[string]any
		if json.Unmarshal(e.Result, &rs) == nil {
			ret = pyType(rs)
		}
	}
	return fmt.Sprintf("def %s(%s) -> %s", e.Name, strings.Join(parts, ", "), quoteAny(ret))
}

func quoteAny(t string) string {
	if t == "Any" {
		return `"Any"`
	}
	return t
}

func docstring(e *entry) string {
	var d strings.Builder
	desc := strings.TrimSpace(e.Description)
	if desc == "" {
		desc = "Tool " + e.Name + "."
	}
	d.WriteString(desc)
	if len(e.params) > 0 {
		d.WriteString("\n\nArgs:")
		for _, p := range e.params {
			fmt.Fprintf(&d, "\n    %s (%s%s)", p.Name, pyType(p.Schema), map[bool]string{true: "", false: ", optional"}[p.Required])
			if s, ok := p.Schema["description"].(string); ok && s != "" {
				d.WriteString(": " + strings.TrimSpace(s))
			}
			if en, ok := p.Schema["enum"].([]any); ok {
				vals, _ := json.Marshal(en)
				d.WriteString(" One of " + string(vals) + ".")
			}
		}
	}
	text := strings.ReplaceAll(d.String(), `\`, `\\`)
	text = strings.ReplaceAll(text, `"""`, `\"\"\"`)
	lines := strings.Split(text, "\n")
	for i := range lines {
		if lines[i] != "" {
			lines[i] = "    " + lines[i]
		}
	}
	return "    \"\"\"" + strings.TrimPrefix(strings.Join(lines, "\n"), "    ") + "\n    \"\"\"\n"
}

// pyType maps a JSON Schema to a Python annotation (JSON types only; "Any" when unknown).
func pyType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return jsonToPy(t, s)
	case []any:
		var names []string
		seen := map[string]bool{}
		for _, x := range t {
			if n, ok := x.(string); ok && !seen[n] {
				seen[n] = true
				names = append(names, jsonToPy(n, s))
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			return strings.Join(names, " | ")
		}
	}
	return "Any"
}

func jsonToPy(t string, s map[string]any) string {
	switch t {
	case "string":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "null":
		return "None"
	case "object":
		return "dict"
	case "array":
		if items, ok := s["items"].(map[string]any); ok {
			if it := pyType(items); it != "Any" {
				return "list[" + it + "]"
			}
		}
		return "list"
	}
	return "Any"
}

func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func pyList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = pyStr(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
