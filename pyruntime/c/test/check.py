"""Native check of _wasmbox.call_tool's direct JSON paths (run by run.sh): every value must come back as
json.loads(json.dumps(value)) would give it, byte for byte on the wire, and every response text must decode as
json.loads decodes it, errors included."""
import ctypes, json, math, random, sys
import _json as cjson
import _wasmbox

shim = ctypes.CDLL(_wasmbox.__file__)
MISSING = object()
calls = []

def not_json(o):
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)

enc = cjson.make_encoder({}, not_json, cjson.encode_basestring, None, ":", ",", False, False, False)
scan = json.JSONDecoder().scan_once

class Invalid(Exception): pass
class Failed(Exception): pass

def fallback(kind, name, payload):
    calls.append(kind)
    if kind == 0:
        raise Invalid(str(payload))
    if kind == 1:
        raise Failed(payload)
    return json.loads(payload.decode("utf-8"))

# The json module's encoder and scanner, counted: the common shapes must never reach them.
slow = {"encode": 0, "scan": 0}
def counted_enc(o, i):
    slow["encode"] += 1
    return enc(o, i)
def counted_scan(s, i):
    slow["scan"] += 1
    return scan(s, i)

_wasmbox.tool_setup(counted_enc, counted_scan, MISSING, fallback)

def roundtrip(v):
    return _wasmbox.call_tool("echo", {"v": v})["v"]

failures = 0
def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)

def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b

r = random.Random(7)
def rstr():
    alphabet = ['a', 'Z', '0', ' ', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\x00', '\x1f', '\x7f', '\xe9',
                '\u2028', '\uffff', '\U0001F600', '<', '&', "'"]
    return "".join(r.choice(alphabet) for _ in range(r.randrange(0, 12)))

def rval(d=0):
    k = r.randrange(12 if d < 5 else 7)
    if k == 0: return None
    if k == 1: return r.random() < 0.5
    if k == 2: return r.randrange(-10**19, 10**19)
    if k == 3: return r.choice([0, -1, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 10**18, -10**18, 10**30])
    if k == 4: return r.choice([0.0, -0.0, 1.5, 1e16, 1e-7, 1e22, 5e-324, 1.7976931348623157e308, 0.1, r.random() * 10 ** r.randrange(-30, 30)])
    if k == 5: return rstr()
    if k == 6: return r.randrange(-1000, 1000)
    if k in (7, 8): return [rval(d + 1) for _ in range(r.randrange(0, 4))]
    if k == 9: return tuple(rval(d + 1) for _ in range(r.randrange(0, 3)))
    return {rstr(): rval(d + 1) for _ in range(r.randrange(0, 4))}

for i in range(20000):
    v = rval()
    want = json.loads(json.dumps(v, separators=(",", ":"), ensure_ascii=False))
    got = roundtrip(v)
    check(same(got, want), "roundtrip %r: got %r" % (v, got))

# What reaches the host, byte for byte, equals the json module's encoding.
def sent():
    buf = ctypes.create_string_buffer(1 << 16)
    n = shim.shim_last_arguments(buf, len(buf))
    return buf.raw[:n].decode("utf-8")

for v in [{"a": 1}, {"s": "\x00\"\\\n\u2028\U0001F600\x7f"}, {"f": [1.0, -0.0, 1e22, 0.1, 5e-324, 1e16]},
          {"n": None, "b": [True, False]}, {"t": (1, (2,)), "e": [], "d": {}}, {}, {"i": [-2**63, 2**63 - 1, 0, -7]}]:
    calls.clear()
    slow.update(encode=0, scan=0)
    got = _wasmbox.call_tool("echo", dict(v))
    check(slow == {"encode": 0, "scan": 0}, "the direct path left %r to the json module: %r" % (v, slow))
    want = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    check(sent() == want, "wire %r: sent %r, json.dumps %r" % (v, sent(), want))
    check(same(got, json.loads(want)), "wire %r: decoded %r" % (v, got))
    check(calls == [], "the direct path fell back for %r: %r" % (v, calls))

for i in range(3000):
    v = {"v": rval()}
    try:
        want = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        continue
    _wasmbox.call_tool("echo", v)
    check(sent() == want or len(want) >= 1 << 16, "wire %r: sent %r" % (v, sent()))

# Omitted optional arguments are left out, at the top level only.
got = _wasmbox.call_tool("echo", {"a": 1, "b": MISSING, "c": 2})
check(got == {"a": 1, "c": 2}, "missing: %r" % (got,))

# Values the direct path leaves to the json module: the same result or the same error as before.
class S(str): pass
class I(int): pass
for v, want in [({"k": S("x")}, {"k": "x"}), ({"k": I(3)}, {"k": 3}), ({1: "int key"}, {"1": "int key"}),
                ({"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
                 {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}),
                ({"big": 10**40}, {"big": 10**40})]:
    check(same(_wasmbox.call_tool("echo", v), want), "fallback value %r" % (v,))
for v, exc in [({"nan": float("nan")}, Invalid), ({"inf": float("-inf")}, Invalid), ({"o": object()}, Invalid),
               ({"s": "\ud800"}, UnicodeEncodeError), ({"b": b"x"}, Invalid)]:
    try:
        _wasmbox.call_tool("echo", v)
        check(False, "no error for %r" % (v,))
    except exc:
        pass

# Response texts: each decodes exactly as json.loads does (value or exception type).
texts = ['1', '-0', '0', '01', '-', '1.', '.5', '1e5', '1E+5', '1e-5', '-1.5e-300', '1e400', '-1e400', '123456789012345678',
         '1234567890123456789', '-123456789012345678', '99999999999999999999999', 'NaN', 'Infinity', '-Infinity',
         'true', 'false', 'null', 'nul', 'truex', ' 5 ', '\t[1,2]\n', '[1,2,]', '[,]', '[]', '{}', '{"a":1,"a":2}',
         '{"a" : [ 1 , {"b" : null} ] }', '{"a":1,}', '{a:1}', '"\\u00e9\\u0041"', '"\\ud83d\\ude00"', '"\\ud800"',
         '"\\udc00x"', '"\\ud800\\u0041"', '"\\x"', '"\\u12"', '"a\\/b"', '"tab\there"', '"\xe9"', '"\\"\\\\"',
         '[' * 40 + ']' * 40, '[' * 40 + ']' * 39, '{"k":' * 35 + '1' + '}' * 35, '"' + 'x' * 10000 + '"',
         '[1] [2]', '', ' ', '"\\u003c\\u003e\\u0026"', '1.0e+02', '-0.0', '0e0', '1e', '1e+', '[1.5,-2,"\\n"]']
def decodes_as_json(t):
    """The response text t decodes as json.loads decodes it: the same value, or the same exception type."""
    try:
        want = ("ok", json.loads(t))
    except Exception as e:
        want = ("err", type(e))
    raw = t.encode("utf-8", "surrogatepass")
    shim.shim_respond(raw, len(raw), 0)
    try:
        got = ("ok", _wasmbox.call_tool("echo", {}))
    except Exception as e:
        got = ("err", type(e))
    check(got[0] == want[0] and (same(got[1], want[1]) if got[0] == "ok" else got[1] == want[1]),
          "text %r: got %r want %r" % (t, got, want))

for t in texts:
    decodes_as_json(t)
# Object keys go through a small cache of str objects: every response still decodes as json.loads does, call
# after call, whatever the cache held before (lengths around its limit of 32 bytes, keys that share a slot,
# escapes, non-ASCII, control characters, text that ends inside a key).
keytexts = ['{"%s":%d}' % ("k" * n, n) for n in (0, 1, 31, 32, 33, 64)]
keytexts += ['{"ab":1,"ba":2,"abc":3}', '{"\x7f":1}', '{"a\x01":1}', '{"a\\u0062":1,"ab":2}', '{"\xe9":1,"e":2}',
             '{"abc', '{"abc"', '{"abc":', '{"' + "y" * 32, '{"' + "y" * 31, '{"a\\"b":1}', '{"a\\\\":1}',
             '[{"id":1,"name":"x"},{"id":2,"name":"y"}]']
keytexts += ['{"k%d":%d,"v":[%d]}' % (i, i, i) for i in range(300)]
for _ in range(3):
    for t in keytexts:
        decodes_as_json(t)
for raw in [b'"\xff"', b'"\xed\xa0\x80"', b'[1, "\xc3"]']:
    shim.shim_respond(raw, len(raw), 0)
    try:
        _wasmbox.call_tool("echo", {})
        check(False, "invalid UTF-8 accepted: %r" % raw)
    except UnicodeDecodeError:
        pass

# An error response goes to the fallback with its bytes.
shim.shim_respond(b'{"type":"ToolDenied"}', 21, 1)
try:
    _wasmbox.call_tool("echo", {})
    check(False, "error response returned a value")
except Failed as e:
    check(e.args[0] == b'{"type":"ToolDenied"}', "error payload %r" % (e.args,))

# Tool objects bind their arguments exactly as the Python function they replace (results, wire bytes, and the
# type and message of every binding error), and send the same request.
import functools, inspect

def make_py(params, nrequired):
    req, opt = params[:nrequired], params[nrequired:]
    sig = ", ".join(list(req) + (["*"] + ["%s=MISSING" % p for p in opt] if opt else []))
    body = "{%s}" % ", ".join("%r: %s" % (p, p) for p in params)
    ns = {"MISSING": MISSING, "_wasmbox": _wasmbox}
    exec("def echo(%s):\n    'Doc of echo.'\n    return _wasmbox.call_tool('echo', %s)\n" % (sig, body), ns)
    return ns["echo"]

def outcome(f, a, k):
    try:
        return ("ok", f(*a, **k), sent())
    except Exception as e:
        return ("err", type(e), str(e))

shapes = [((), 0), (("a",), 1), (("a",), 0), (("a", "b"), 2), (("a", "b", "c"), 1), (("a", "b", "c"), 0),
          (("a", "b", "c", "d"), 3), (tuple("p%d" % i for i in range(20)), 18)]
keys = ["a", "b", "c", "d", "z", "p0", "p19"]
for params, nreq in shapes:
    py = make_py(params, nreq)
    t = functools.update_wrapper(_wasmbox.tool("echo", params, nreq), py)
    for i in range(400):
        a = tuple(r.randrange(100) for _ in range(r.randrange(0, len(params) + 2)))
        k = {kk: r.choice([r.randrange(100), "s", [1.5], {"x": None}, MISSING]) for kk in r.sample(keys, r.randrange(0, 4))}
        if r.random() < 0.1:
            k = {**k, "a": {1: "int key"}}  # a value the direct path leaves to the json module
        want, got = outcome(py, a, k), outcome(t, a, k)
        check(want == got, "tool%r/%d(*%r, **%r): %r, the Python function %r" % (params, nreq, a, k, got, want))
check(inspect.signature(t) == inspect.signature(py), "signature %s" % inspect.signature(t))
check(t.__doc__ == "Doc of echo." and t.__name__ == "echo" and t.__wrapped__ is py, "wrapper attributes")
check(repr(t) == "<tool echo>", "repr %r" % t)
class Holder:
    m = t
check(Holder.m is t, "class attribute")
check(outcome(Holder().m, tuple(range(17)), {}) == outcome(py, (Holder(),) + tuple(range(17)), {}), "bound as a method")

# A response that fits the guest's buffer costs one crossing; a larger one is fetched.
t1 = _wasmbox.tool("echo", ("v",), 1)
i0, f0 = shim.shim_into_calls(), shim.shim_fetch_calls()
check(t1("x" * 100) == {"v": "x" * 100}, "small response")
check((shim.shim_into_calls() - i0, shim.shim_fetch_calls() - f0) == (1, 0), "small response: crossings")
check(t1("x" * 10000) == {"v": "x" * 10000}, "large response")
check((shim.shim_into_calls() - i0, shim.shim_fetch_calls() - f0) == (2, 1), "large response: crossings")
shim.shim_bad_buffer(1)
try:
    t1(1)
    check(False, "a host that refuses the buffer: no error")
except RuntimeError as e:
    check("outside memory" in str(e), "bad buffer message %r" % e)
shim.shim_bad_buffer(0)
for bad in [(1, ("a",), 1), ("n", ["a"], 1), ("n", (1,), 1), ("n", ("a",), 2), ("n", ("a",), -1)]:
    try:
        _wasmbox.tool(*bad)
        check(False, "tool%r accepted" % (bad,))
    except (TypeError, ValueError):
        pass

print("native check:", "FAILED %d" % failures if failures else "ok")
sys.exit(1 if failures else 0)
