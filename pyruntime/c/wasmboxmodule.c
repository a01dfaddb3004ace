/*
 * _wasmbox: the interpreter's side of the wasmbox guest<->host ABI (version 1).
 *
 * Compiled into the interpreter as a builtin module. It declares every import of the one versioned import module
 * "wasmbox_v1" (see hostfuncs/abi.go and docs/ABI.md; the two must agree):
 *
 *   call(req_ptr, req_len) -> i32   host handles a JSON request, keeps the response; returns its length,
 *                                   or the negated length of an error response
 *   fetch(buf_ptr, buf_len) -> i32  host copies the pending response into a buffer the guest allocated
 *   call_into(req_ptr, req_len, buf_ptr, buf_len) -> i32
 *                                   call, and the response written into [buf_ptr, +buf_len) when it fits
 *                                   (nothing pending then); INT32_MIN if that buffer is outside memory
 *   tick() -> i32                   called by the build-time loop instrumentation; returns the next counter
 *                                   value, negative to ask for a KeyboardInterrupt
 *
 * and exports wasmbox_interrupt(), which the instrumentation calls when tick() returns a negative value. The host
 * never calls into the guest from a host function and never writes guest memory from another goroutine.
 */
#include "Python.h"
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define WASMBOX_ABI_VERSION 1

#define WASMBOX_IMPORT(name) __attribute__((import_module("wasmbox_v1"), import_name(name)))

WASMBOX_IMPORT("call") int32_t wasmbox_host_call(const void *req, int32_t req_len);
WASMBOX_IMPORT("fetch") int32_t wasmbox_host_fetch(void *buf, int32_t buf_len);
WASMBOX_IMPORT("call_into") int32_t wasmbox_host_call_into(const void *req, int32_t req_len, void *buf, int32_t buf_len);
WASMBOX_IMPORT("tick") int32_t wasmbox_host_tick(void);

/* Responses larger than this are refused on the guest side too (the host enforces its own, smaller cap). */
#define WASMBOX_MAX_RESPONSE (64 * 1024 * 1024)

__attribute__((export_name("wasmbox_abi_version"))) int32_t
wasmbox_abi_version(void)
{
    return WASMBOX_ABI_VERSION;
}

/* Async-signal-safe: only sets flags that the eval loop checks at its next eval-breaker check. */
__attribute__((export_name("wasmbox_interrupt"))) void
wasmbox_interrupt(void)
{
    (void)PyErr_SetInterruptEx(SIGINT);
}

PyDoc_STRVAR(call_doc,
"call(request: bytes) -> tuple[bool, bytes]\n\n"
"Send one request to the host. Returns (ok, response): ok is False when the host answered with an error.");

static PyObject *
wasmbox_call(PyObject *module, PyObject *arg)
{
    Py_buffer req;
    if (PyObject_GetBuffer(arg, &req, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (req.len > INT32_MAX) {
        PyBuffer_Release(&req);
        PyErr_SetString(PyExc_ValueError, "wasmbox: request too large");
        return NULL;
    }
    int32_t n = wasmbox_host_call(req.buf, (int32_t)req.len);
    PyBuffer_Release(&req);
    int ok = n >= 0;
    int64_t len = ok ? (int64_t)n : -(int64_t)n;
    if (len > WASMBOX_MAX_RESPONSE) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: host response too large");
        return NULL;
    }
    PyObject *resp = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (resp == NULL) {
        return NULL;
    }
    if (len > 0) {
        int32_t got = wasmbox_host_fetch(PyBytes_AS_STRING(resp), (int32_t)len);
        if (got != (int32_t)len) {
            Py_DECREF(resp);
            PyErr_Format(PyExc_RuntimeError, "wasmbox: fetch returned %d, expected %d", (int)got, (int)len);
            return NULL;
        }
    }
    return Py_BuildValue("(NN)", PyBool_FromLong(ok), resp);
}

/*
 * The tool call path in C (one call per tool call, no Python frame): the generated tools module calls
 * tool_setup once, then call_tool(name, kwargs) for every call. The state is per module object.
 */
typedef struct {
    PyObject *encoder;  /* _json.make_encoder(...) instance: encoder(obj, 0) -> (str,) */
    PyObject *scan;     /* json.JSONDecoder().scan_once: scan(str, 0) -> (value, end) */
    PyObject *missing;  /* the sentinel of omitted optional parameters */
    PyObject *fallback; /* fallback(kind, name, payload): 0 encode error (payload: exception), 1 host error
                           response (payload: bytes), 2 response the fast decoder refused (payload: bytes) */
    PyObject *tool_type; /* the type of the objects tool() makes */
    PyObject *keys[64];  /* the keys of decoded objects, by a hash of their text (fast_decode_key) */
} wasmbox_state;

static inline wasmbox_state *
get_state(PyObject *module)
{
    return (wasmbox_state *)PyModule_GetState(module);
}

PyDoc_STRVAR(tool_setup_doc,
"tool_setup(encoder, scan_once, missing, fallback) -> None\n\n"
"Install the JSON encoder and scanner call_tool uses, the sentinel of omitted arguments, and the Python\n"
"fallback(kind, name, payload) for the slow paths: kind 0 an argument encoding error (payload: the exception;\n"
"must raise), 1 an error response of the host (payload: bytes; must raise), 2 a response the fast decoder\n"
"refused (payload: bytes; returns the decoded value or raises).");

static PyObject *
wasmbox_tool_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "tool_setup expects 4 arguments");
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        if (i != 2 && !PyCallable_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "tool_setup: argument %d must be callable", i + 1);
            return NULL;
        }
    }
    wasmbox_state *st = get_state(module);
    Py_XSETREF(st->encoder, Py_NewRef(args[0]));
    Py_XSETREF(st->scan, Py_NewRef(args[1]));
    Py_XSETREF(st->missing, Py_NewRef(args[2]));
    Py_XSETREF(st->fallback, Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

/* Calls fallback(kind, name, payload); steals payload. */
static PyObject *
call_fallback(wasmbox_state *st, int kind, PyObject *name, PyObject *payload)
{
    if (payload == NULL) {
        return NULL;
    }
    PyObject *k = PyLong_FromLong(kind);
    if (k == NULL) {
        Py_DECREF(payload);
        return NULL;
    }
    PyObject *fargs[3] = {k, name, payload};
    PyObject *r = PyObject_Vectorcall(st->fallback, fargs, 3, NULL);
    Py_DECREF(k);
    Py_DECREF(payload);
    return r;
}

#define WASMBOX_STACK_BUF 4096

/*
 * The direct JSON paths of call_tool. The common shapes of tool arguments and results (exact dicts with str keys,
 * lists, tuples, str, int, float, bool, None) are written and read here with no Python object in between; any
 * other value, any nesting deeper than WASMBOX_FAST_DEPTH and anything unusual in a response goes to the json
 * module's C encoder and scanner as before, so the result is always what json.dumps/json.loads would give.
 */
#define WASMBOX_FAST_DEPTH 32

/* An output buffer that starts on the caller's stack and moves to the heap when it must grow. */
typedef struct {
    char *p;
    size_t len, cap;
    char *stack;
} wbuf;

static int
wbuf_reserve(wbuf *b, size_t n)
{
    if (b->len + n <= b->cap) {
        return 0;
    }
    if (n > (size_t)INT32_MAX / 2 || b->len > (size_t)INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "wasmbox: request too large");
        return -1;
    }
    size_t cap = b->cap * 2;
    while (cap < b->len + n) {
        cap *= 2;
    }
    char *p = b->p == b->stack ? PyMem_Malloc(cap) : PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->p == b->stack) {
        memcpy(p, b->p, b->len);
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int
wbuf_put(wbuf *b, const char *s, size_t n)
{
    if (wbuf_reserve(b, n) < 0) {
        return -1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static inline int
wbuf_byte(wbuf *b, char c)
{
    if (b->len == b->cap && wbuf_reserve(b, 1) < 0) {
        return -1;
    }
    b->p[b->len++] = c;
    return 0;
}

static void
wbuf_free(wbuf *b)
{
    if (b->p != b->stack) {
        PyMem_Free(b->p);
    }
}

/* Writes o, an exact str, as a JSON string (1 done, 0 a lone surrogate, -1 an error), with the escapes of json's
   encode_basestring (ensure_ascii=False): '"', '\\', the five short control escapes, \u00XX for the
   other control characters; everything else as is. */
static int
fast_encode_str(wbuf *b, PyObject *o)
{
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s == NULL) {
        PyErr_Clear(); /* a lone surrogate: the json module's encoder reports it */
        return 0;
    }
    if (wbuf_byte(b, '"') < 0) {
        return -1;
    }
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        if (wbuf_put(b, s + run, (size_t)(i - run)) < 0) {
            return -1;
        }
        run = i + 1;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t elen = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[4] = Py_hexdigits[c >> 4];
            esc[5] = Py_hexdigits[c & 0xF];
            elen = 6;
        }
        if (wbuf_put(b, esc, elen) < 0) {
            return -1;
        }
    }
    if (wbuf_put(b, s + run, (size_t)(n - run)) < 0) {
        return -1;
    }
    return wbuf_byte(b, '"') < 0 ? -1 : 1;
}

/* Writes o as JSON: 1 done, 0 a value this path does not handle (nothing to undo: the caller starts over with
   the json module), -1 an error (set). missing, at depth 0, marks dict items to leave out. */
static int
fast_encode(wbuf *b, PyObject *o, int depth, PyObject *missing)
{
    if (o == Py_None) {
        return wbuf_put(b, "null", 4) < 0 ? -1 : 1;
    }
    if (o == Py_True) {
        return wbuf_put(b, "true", 4) < 0 ? -1 : 1;
    }
    if (o == Py_False) {
        return wbuf_put(b, "false", 5) < 0 ? -1 : 1;
    }
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        char digits[24];
        int i = (int)sizeof digits;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do {
            digits[--i] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (v < 0) {
            digits[--i] = '-';
        }
        return wbuf_put(b, digits + i, sizeof digits - (size_t)i) < 0 ? -1 : 1;
    }
    if (PyFloat_CheckExact(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        if (!isfinite(d)) {
            return 0; /* allow_nan=False: the json module raises */
        }
        char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__, as json does */
        if (r == NULL) {
            return -1;
        }
        int err = wbuf_put(b, r, strlen(r));
        PyMem_Free(r);
        return err < 0 ? -1 : 1;
    }
    if (PyUnicode_CheckExact(o)) {
        return fast_encode_str(b, o);
    }
    if (depth >= WASMBOX_FAST_DEPTH) {
        return 0;
    }
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        /* No Python code runs below (exact types only), so the sequence cannot change under us. */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        if (wbuf_byte(b, '[') < 0) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i > 0 && wbuf_byte(b, ',') < 0) {
                return -1;
            }
            int r = fast_encode(b, items[i], depth + 1, NULL);
            if (r <= 0) {
                return r;
            }
        }
        return wbuf_byte(b, ']') < 0 ? -1 : 1;
    }
    if (PyDict_CheckExact(o)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        int first = 1;
        if (wbuf_byte(b, '{') < 0) {
            return -1;
        }
        while (PyDict_Next(o, &pos, &key, &value)) {
            if (missing != NULL && value == missing) {
                continue;
            }
            if (!PyUnicode_CheckExact(key)) {
                return 0; /* the json module converts or refuses other keys */
            }
            if (!first && wbuf_byte(b, ',') < 0) {
                return -1;
            }
            first = 0;
            int r = fast_encode_str(b, key);
            if (r <= 0) {
                return r;
            }
            if (wbuf_byte(b, ':') < 0) {
                return -1;
            }
            r = fast_encode(b, value, depth + 1, NULL);
            if (r <= 0) {
                return r;
            }
        }
        return wbuf_byte(b, '}') < 0 ? -1 : 1;
    }
    return 0;
}

/* The reading side: a JSON text as the host writes it. 1 with *out set, 0 a text this path does not handle
   (the caller starts over with the json module's scanner), -1 an error (set). */
typedef struct {
    const char *p, *end;
    PyObject **keys; /* 64 slots of the key cache (fast_decode_key) */
} jtext;

static inline void
jskip(jtext *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
        j->p++;
    }
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int
read_hex4(const char *p, const char *end)
{
    if (end - p < 4) {
        return -1;
    }
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) {
            return -1;
        }
        v = v << 4 | h;
    }
    return v;
}

static int
fast_decode_str(jtext *j, PyObject **out)
{
    const char *start = ++j->p; /* after the opening quote */
    int escapes = 0;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) {
            return 0; /* strict json refuses control characters: let the scanner say so */
        }
        if (c == '\\') {
            escapes = 1;
            if (++j->p == j->end) {
                return 0;
            }
        }
        j->p++;
    }
    if (j->p == j->end) {
        return 0;
    }
    const char *stop = j->p++;
    if (!escapes) {
        *out = PyUnicode_DecodeUTF8(start, stop - start, "strict");
        if (*out == NULL) {
            PyErr_Clear(); /* invalid UTF-8: the slow path reports it */
            return 0;
        }
        return 1;
    }
    /* Unescape into UTF-8 (never longer than the escaped text), then decode. */
    char stack[256];
    size_t cap = (size_t)(stop - start);
    char *buf = cap <= sizeof stack ? stack : PyMem_Malloc(cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t n = 0;
    int r = 0;
    for (const char *p = start; p < stop;) {
        if (*p != '\\') {
            buf[n++] = *p++;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case '"': buf[n++] = '"'; continue;
        case '\\': buf[n++] = '\\'; continue;
        case '/': buf[n++] = '/'; continue;
        case 'b': buf[n++] = '\b'; continue;
        case 'f': buf[n++] = '\f'; continue;
        case 'n': buf[n++] = '\n'; continue;
        case 'r': buf[n++] = '\r'; continue;
        case 't': buf[n++] = '\t'; continue;
        case 'u': break;
        default: goto done; /* an invalid escape: the scanner reports it */
        }
        int cp = read_hex4(p, stop);
        if (cp < 0) {
            goto done;
        }
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int lo = (stop - p >= 6 && p[0] == '\\' && p[1] == 'u') ? read_hex4(p + 2, stop) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                goto done; /* a lone surrogate, which json keeps as such: the scanner's job */
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        }
        else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            goto done;
        }
        /* Each escape is at least 6 bytes and its UTF-8 at most 4 (a pair: 12 and 4). */
        if (cp < 0x80) {
            buf[n++] = (char)cp;
        }
        else if (cp < 0x800) {
            buf[n++] = (char)(0xC0 | cp >> 6);
            buf[n++] = (char)(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            buf[n++] = (char)(0xE0 | cp >> 12);
            buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
            buf[n++] = (char)(0x80 | (cp & 0x3F));
        }
        else {
            buf[n++] = (char)(0xF0 | cp >> 18);
            buf[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
            buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
            buf[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    *out = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "strict");
    if (*out == NULL) {
        PyErr_Clear();
    }
    else {
        r = 1;
    }
done:
    if (buf != stack) {
        PyMem_Free(buf);
    }
    return r;
}

static int
fast_decode_number(jtext *j, PyObject **out)
{
    const char *start = j->p, *p = j->p;
    if (p < j->end && *p == '-') {
        p++;
    }
    if (p == j->end || *p < '0' || *p > '9') {
        return 0; /* e.g. -Infinity */
    }
    if (*p == '0') {
        p++;
    }
    else {
        while (p < j->end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    int is_float = 0;
    if (p < j->end && *p == '.') {
        is_float = 1;
        const char *d = ++p;
        while (p < j->end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == d) {
            return 0;
        }
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < j->end && (*p == '+' || *p == '-')) {
            p++;
        }
        const char *d = p;
        while (p < j->end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == d) {
            return 0;
        }
    }
    size_t n = (size_t)(p - start);
    if (!is_float) {
        int neg = *start == '-';
        if (n - (size_t)neg > 19) {
            return 0; /* int() of the digits, with its limits: the scanner's job */
        }
        unsigned long long u = 0; /* 19 digits fit */
        for (const char *q = start + neg; q < p; q++) {
            u = u * 10 + (unsigned long long)(*q - '0');
        }
        if (u > (unsigned long long)INT64_MAX + (unsigned long long)neg) {
            return 0;
        }
        *out = PyLong_FromLongLong(neg ? (long long)(0ULL - u) : (long long)u);
    }
    else {
        char num[64];
        if (n >= sizeof num) {
            return 0;
        }
        memcpy(num, start, n);
        num[n] = 0;
        double d = PyOS_string_to_double(num, NULL, NULL); /* what float(numstr) gives */
        if (d == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        *out = PyFloat_FromDouble(d);
    }
    if (*out == NULL) {
        return -1;
    }
    j->p = p;
    return 1;
}

/* The longest key fast_decode_key keeps. */
#define WASMBOX_KEY_MAX 32

/* Decodes an object's key. A tool's results repeat the same few keys call after call, so a plain ASCII key of at
   most WASMBOX_KEY_MAX bytes (no escape, no control character) is looked up in a small cache of the str
   objects made for earlier keys, by a hash of its text, and compared byte for byte: equal text, the same str
   (immutable, so sharing it is unobservable but for identity). Anything else is decoded as before. */
static int
fast_decode_key(jtext *j, PyObject **out)
{
    const char *s = j->p + 1, *q = s;
    const char *lim = j->end - s > WASMBOX_KEY_MAX ? s + WASMBOX_KEY_MAX : j->end;
    unsigned h = 0;
    while (q < lim && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20 && (unsigned char)*q < 0x80) {
        h = h * 31 + (unsigned char)*q++;
    }
    if (j->keys == NULL || q == j->end || *q != '"') {
        return fast_decode_str(j, out);
    }
    size_t n = (size_t)(q - s);
    PyObject **slot = &j->keys[(h ^ (unsigned)n) & 63];
    PyObject *k = *slot;
    if (k != NULL && (size_t)PyUnicode_GET_LENGTH(k) == n && memcmp(PyUnicode_DATA(k), s, n) == 0) {
        *out = Py_NewRef(k);
    }
    else {
        k = PyUnicode_FromStringAndSize(s, (Py_ssize_t)n); /* ASCII, so valid UTF-8 */
        if (k == NULL) {
            return -1;
        }
        Py_XSETREF(*slot, Py_NewRef(k));
        *out = k;
    }
    j->p = q + 1;
    return 1;
}

static int
fast_decode(jtext *j, PyObject **out, int depth)
{
    jskip(j);
    if (j->p == j->end) {
        return 0;
    }
    switch (*j->p) {
    case '"':
        return fast_decode_str(j, out);
    case 'n':
        if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
            j->p += 4;
            *out = Py_NewRef(Py_None);
            return 1;
        }
        return 0;
    case 't':
        if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
            j->p += 4;
            *out = Py_NewRef(Py_True);
            return 1;
        }
        return 0;
    case 'f':
        if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
            j->p += 5;
            *out = Py_NewRef(Py_False);
            return 1;
        }
        return 0;
    case '[': {
        if (depth >= WASMBOX_FAST_DEPTH) {
            return 0;
        }
        j->p++;
        PyObject *list = PyList_New(0);
        if (list == NULL) {
            return -1;
        }
        jskip(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            *out = list;
            return 1;
        }
        for (;;) {
            PyObject *item;
            int r = fast_decode(j, &item, depth + 1);
            if (r <= 0) {
                Py_DECREF(list);
                return r;
            }
            r = PyList_Append(list, item);
            Py_DECREF(item);
            if (r < 0) {
                Py_DECREF(list);
                return -1;
            }
            jskip(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == ']') {
                j->p++;
                *out = list;
                return 1;
            }
            Py_DECREF(list);
            return 0;
        }
    }
    case '{': {
        if (depth >= WASMBOX_FAST_DEPTH) {
            return 0;
        }
        j->p++;
        PyObject *dict = PyDict_New();
        if (dict == NULL) {
            return -1;
        }
        jskip(j);
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            *out = dict;
            return 1;
        }
        for (;;) {
            PyObject *key, *value;
            jskip(j);
            if (j->p == j->end || *j->p != '"') {
                Py_DECREF(dict);
                return 0;
            }
            int r = fast_decode_key(j, &key);
            if (r <= 0) {
                Py_DECREF(dict);
                return r;
            }
            jskip(j);
            if (j->p == j->end || *j->p != ':') {
                Py_DECREF(key);
                Py_DECREF(dict);
                return 0;
            }
            j->p++;
            r = fast_decode(j, &value, depth + 1);
            if (r <= 0) {
                Py_DECREF(key);
                Py_DECREF(dict);
                return r;
            }
            r = PyDict_SetItem(dict, key, value); /* a repeated key keeps its last value, as in json */
            Py_DECREF(key);
            Py_DECREF(value);
            if (r < 0) {
                Py_DECREF(dict);
                return -1;
            }
            jskip(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == '}') {
                j->p++;
                *out = dict;
                return 1;
            }
            Py_DECREF(dict);
            return 0;
        }
    }
    default:
        return fast_decode_number(j, out);
    }
}

/* Decodes a whole response: 1 with *out, 0 not handled (trailing data included), -1 an error. */
static int
fast_decode_all(PyObject **keys, const char *s, size_t n, PyObject **out)
{
    jtext j = {s, s + n, keys};
    int r = fast_decode(&j, out, 0);
    if (r <= 0) {
        return r;
    }
    jskip(&j);
    if (j.p != j.end) {
        Py_DECREF(*out);
        return 0;
    }
    return 1;
}

/* Sends the tool request in req (freed here) and decodes the host's answer: the result, or the exception the
   fallback raises. */
static PyObject *
tool_send(wasmbox_state *st, PyObject *name, wbuf *req)
{
    /* One crossing when the response fits the stack buffer (call_into writes it there); a larger one stays
       pending in the host, and is fetched into a buffer of its size. */
    char stack_resp[WASMBOX_STACK_BUF];
    int32_t n = wasmbox_host_call_into(req->p, (int32_t)req->len, stack_resp, (int32_t)sizeof stack_resp);
    wbuf_free(req);
    if (n == INT32_MIN) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: the host found the response buffer outside memory");
        return NULL;
    }
    int ok = n >= 0;
    int64_t len = ok ? (int64_t)n : -(int64_t)n;
    if (len > WASMBOX_MAX_RESPONSE) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: host response too large");
        return NULL;
    }
    char *resp = len <= (int64_t)sizeof stack_resp ? stack_resp : PyMem_Malloc((size_t)len);
    if (resp == NULL) {
        return PyErr_NoMemory();
    }
    if (resp != stack_resp) {
        int32_t got = wasmbox_host_fetch(resp, (int32_t)len);
        if (got != (int32_t)len) {
            PyMem_Free(resp);
            PyErr_Format(PyExc_RuntimeError, "wasmbox: fetch returned %d, expected %d", (int)got, (int)len);
            return NULL;
        }
    }
    PyObject *result = NULL;
    if (!ok) {
        result = call_fallback(st, 1, name, PyBytes_FromStringAndSize(resp, (Py_ssize_t)len));
        goto done;
    }
    int fast_r = fast_decode_all(st->keys, resp, (size_t)len, &result);
    if (fast_r != 0) {
        goto done; /* decoded, or an error such as MemoryError */
    }
    result = NULL;
    PyObject *text = PyUnicode_DecodeUTF8(resp, (Py_ssize_t)len, "strict");
    if (text == NULL) {
        /* Let the fallback raise the usual decoding error. */
        PyErr_Clear();
        result = call_fallback(st, 2, name, PyBytes_FromStringAndSize(resp, (Py_ssize_t)len));
        goto done;
    }
    PyObject *idx = PyLong_FromLong(0);
    PyObject *sargs[2] = {text, idx};
    PyObject *scanned = idx ? PyObject_Vectorcall(st->scan, sargs, 2, NULL) : NULL;
    Py_XDECREF(idx);
    if (scanned != NULL && PyTuple_Check(scanned) && PyTuple_GET_SIZE(scanned) == 2) {
        Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(scanned, 1));
        Py_ssize_t tlen = PyUnicode_GET_LENGTH(text);
        int trailing = 0;
        if (end == -1 && PyErr_Occurred()) {
            trailing = 1;
            PyErr_Clear();
        }
        for (Py_ssize_t i = end; !trailing && i < tlen; i++) {
            Py_UCS4 c = PyUnicode_READ_CHAR(text, i);
            if (!Py_UNICODE_ISSPACE(c)) {
                trailing = 1;
            }
        }
        if (!trailing) {
            result = Py_NewRef(PyTuple_GET_ITEM(scanned, 0));
            Py_DECREF(scanned);
            Py_DECREF(text);
            goto done;
        }
    }
    else if (scanned == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
            Py_DECREF(text);
            goto done; /* e.g. MemoryError or RecursionError: as json.loads would raise it */
        }
        PyErr_Clear();
    }
    Py_XDECREF(scanned);
    Py_DECREF(text);
    result = call_fallback(st, 2, name, PyBytes_FromStringAndSize(resp, (Py_ssize_t)len));
done:
    if (resp != stack_resp) {
        PyMem_Free(resp);
    }
    return result;
}

PyDoc_STRVAR(call_tool_doc,
"call_tool(name: str, kwargs: dict) -> object\n\n"
"Call one tool through the host (the ABI's tool fast path): encode kwargs as JSON (dropping arguments that are\n"
"the missing sentinel), send \"T\" name \"\\n\" arguments, and decode the JSON result. Failures go through the\n"
"fallback given to tool_setup, which raises the tool exception.");

static PyObject *tool_call_kwargs(wasmbox_state *st, PyObject *name, PyObject *kwargs);

static PyObject *
wasmbox_call_tool(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "call_tool expects 2 arguments");
        return NULL;
    }
    wasmbox_state *st = get_state(module);
    if (st->encoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: call_tool before tool_setup");
        return NULL;
    }
    PyObject *name = args[0], *kwargs = args[1];
    if (!PyUnicode_Check(name) || !PyDict_Check(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "call_tool expects a str and a dict");
        return NULL;
    }
    return tool_call_kwargs(st, name, kwargs);
}

/* call_tool(name, kwargs) once its arguments are checked: name a str, kwargs a dict. */
static PyObject *
tool_call_kwargs(wasmbox_state *st, PyObject *name, PyObject *kwargs)
{
    /* "T" name "\n" arguments, built in place. */
    Py_ssize_t name_len;
    const char *name_s = PyUnicode_AsUTF8AndSize(name, &name_len);
    if (name_s == NULL) {
        return NULL;
    }
    char stack_req[WASMBOX_STACK_BUF];
    wbuf req = {stack_req, 0, sizeof stack_req, stack_req};
    if (wbuf_byte(&req, 'T') < 0 || wbuf_put(&req, name_s, (size_t)name_len) < 0 || wbuf_byte(&req, '\n') < 0) {
        wbuf_free(&req);
        return NULL;
    }
    size_t head = req.len;
    int fast = fast_encode(&req, kwargs, 0, st->missing);
    if (fast < 0) {
        wbuf_free(&req);
        return NULL;
    }
    if (fast == 0) {
        /* A value the direct path does not handle: the json module's encoder, on the arguments without the
           omitted optional ones (a copy only when there are any). */
        req.len = head;
        PyObject *key, *value, *filtered = NULL;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            if (value == st->missing) {
                filtered = PyDict_New();
                if (filtered == NULL) {
                    wbuf_free(&req);
                    return NULL;
                }
                Py_ssize_t p2 = 0;
                while (PyDict_Next(kwargs, &p2, &key, &value)) {
                    if (value != st->missing && PyDict_SetItem(filtered, key, value) < 0) {
                        Py_DECREF(filtered);
                        wbuf_free(&req);
                        return NULL;
                    }
                }
                kwargs = filtered;
                break;
            }
        }
        PyObject *zero = PyLong_FromLong(0);
        PyObject *eargs[2] = {kwargs, zero};
        PyObject *enc = zero ? PyObject_Vectorcall(st->encoder, eargs, 2, NULL) : NULL;
        Py_XDECREF(zero);
        Py_XDECREF(filtered);
        if (enc == NULL) {
            wbuf_free(&req);
            if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
                return call_fallback(st, 0, name, PyErr_GetRaisedException());
            }
            return NULL;
        }
        if (!PyTuple_Check(enc) || PyTuple_GET_SIZE(enc) != 1 || !PyUnicode_Check(PyTuple_GET_ITEM(enc, 0))) {
            Py_DECREF(enc);
            wbuf_free(&req);
            PyErr_SetString(PyExc_RuntimeError, "wasmbox: unexpected result from the JSON encoder");
            return NULL;
        }
        Py_ssize_t args_len;
        const char *args_s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(enc, 0), &args_len);
        if (args_s == NULL || wbuf_put(&req, args_s, (size_t)args_len) < 0) {
            Py_DECREF(enc);
            wbuf_free(&req);
            return NULL; /* e.g. a lone surrogate in a string: UnicodeEncodeError, as before */
        }
        Py_DECREF(enc);
    }
    return tool_send(st, name, &req);
}

/*
 * Tool objects: the functions of the generated tools module. tool(name, params, nrequired) makes one; the module
 * copies the Python function it replaces onto it (functools.update_wrapper: name, docstring, annotations and
 * __wrapped__, which inspect.signature and help() follow). A call binds its arguments as that function would
 * (the first nrequired parameters positional or keyword and required, the rest keyword-only and optional) and
 * encodes them straight into the request: no Python frame and no dict per call.
 */
typedef struct {
    PyObject_HEAD
    PyObject *name;       /* the tool's name: str */
    PyObject *params;     /* tuple of str: the parameters in signature order */
    Py_ssize_t nrequired; /* how many of them, from the first, are required */
    PyObject *module;     /* _wasmbox, whose state holds the encoder and the fallback */
    PyObject *dict;       /* __dict__ */
    vectorcallfunc vectorcall;
    PyObject *prefix;     /* bytes: "T" name "\n{", the start of every request; NULL if not made */
    PyObject *keys;       /* tuple of bytes: each parameter as a JSON string and ':'; NULL if not made */
} ToolObject;

#define WASMBOX_TOOL_STACK_PARAMS 16

/* Raises CPython's TypeError for missing required arguments: "f() missing 1 required positional argument: 'x'",
   "... 2 required positional arguments: 'x' and 'y'", "... 3 ...: 'x', 'y', and 'z'". */
static void
tool_missing_error(ToolObject *self, PyObject **vals)
{
    PyObject *names = PyList_New(0);
    if (names == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < self->nrequired; i++) {
        if (vals[i] != NULL) {
            continue;
        }
        PyObject *r = PyObject_Repr(PyTuple_GET_ITEM(self->params, i));
        if (r == NULL || PyList_Append(names, r) < 0) {
            Py_XDECREF(r);
            Py_DECREF(names);
            return;
        }
        Py_DECREF(r);
    }
    Py_ssize_t n = PyList_GET_SIZE(names);
    PyObject *text = NULL;
    if (n == 1) {
        text = Py_NewRef(PyList_GET_ITEM(names, 0));
    }
    else if (n == 2) {
        text = PyUnicode_FromFormat("%U and %U", PyList_GET_ITEM(names, 0), PyList_GET_ITEM(names, 1));
    }
    else {
        PyObject *sep = PyUnicode_FromString(", ");
        PyObject *head = sep ? PyList_GetSlice(names, 0, n - 1) : NULL;
        PyObject *joined = head ? PyUnicode_Join(sep, head) : NULL;
        text = joined ? PyUnicode_FromFormat("%U, and %U", joined, PyList_GET_ITEM(names, n - 1)) : NULL;
        Py_XDECREF(sep);
        Py_XDECREF(head);
        Py_XDECREF(joined);
    }
    if (text != NULL) {
        PyErr_Format(PyExc_TypeError, "%U() missing %zd required positional argument%s: %U", self->name, n,
                     n == 1 ? "" : "s", text);
        Py_DECREF(text);
    }
    Py_DECREF(names);
}

static PyObject *
tool_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ToolObject *self = (ToolObject *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t np = PyTuple_GET_SIZE(self->params);
    PyObject *stackvals[WASMBOX_TOOL_STACK_PARAMS] = {NULL};
    PyObject **vals = stackvals;
    if (np > WASMBOX_TOOL_STACK_PARAMS && (vals = PyMem_Calloc((size_t)np, sizeof *vals)) == NULL) {
        return PyErr_NoMemory();
    }
    /* Bound in CPython's order, with its messages: positional arguments, then keywords, then the count of
       positional arguments, then what is missing. */
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < nargs && i < self->nrequired; i++) {
        vals[i] = args[i];
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t j = 0;
        while (j < np && PyTuple_GET_ITEM(self->params, j) != key) {
            j++;
        }
        for (Py_ssize_t i = 0; j == np && i < np; i++) {
            int cmp = PyObject_RichCompareBool(PyTuple_GET_ITEM(self->params, i), key, Py_EQ);
            if (cmp < 0) {
                goto done;
            }
            if (cmp) {
                j = i;
            }
        }
        if (j == np) {
            PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument '%S'", self->name, key);
            goto done;
        }
        if (vals[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "%U() got multiple values for argument '%S'", self->name, key);
            goto done;
        }
        vals[j] = args[nargs + k];
    }
    if (nargs > self->nrequired) {
        Py_ssize_t kwonly = 0;
        for (Py_ssize_t i = self->nrequired; i < np; i++) {
            kwonly += vals[i] != NULL;
        }
        PyObject *extra = kwonly == 0 ? PyUnicode_FromString("")
                                      : PyUnicode_FromFormat(" positional argument%s (and %zd keyword-only argument%s)",
                                                             nargs != 1 ? "s" : "", kwonly, kwonly != 1 ? "s" : "");
        if (extra != NULL) {
            PyErr_Format(PyExc_TypeError, "%U() takes %zd positional argument%s but %zd%U %s given", self->name,
                         self->nrequired, self->nrequired == 1 ? "" : "s", nargs, extra,
                         nargs == 1 && kwonly == 0 ? "was" : "were");
            Py_DECREF(extra);
        }
        goto done;
    }
    for (Py_ssize_t i = 0; i < self->nrequired; i++) {
        if (vals[i] == NULL) {
            tool_missing_error(self, vals);
            goto done;
        }
    }
    wasmbox_state *st = get_state(self->module);
    if (st->encoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: tool called before tool_setup");
        goto done;
    }
    char stack_req[WASMBOX_STACK_BUF];
    wbuf req = {stack_req, 0, sizeof stack_req, stack_req};
    int fast = 1;
    if (self->prefix != NULL) {
        fast = wbuf_put(&req, PyBytes_AS_STRING(self->prefix), (size_t)PyBytes_GET_SIZE(self->prefix)) < 0 ? -1 : 1;
    }
    else {
        Py_ssize_t name_len;
        const char *name_s = PyUnicode_AsUTF8AndSize(self->name, &name_len);
        if (name_s == NULL) {
            goto done;
        }
        fast = wbuf_byte(&req, 'T') < 0 || wbuf_put(&req, name_s, (size_t)name_len) < 0 ||
               wbuf_put(&req, "\n{", 2) < 0 ? -1 : 1;
    }
    int first = 1;
    for (Py_ssize_t i = 0; fast > 0 && i < np; i++) {
        PyObject *v = vals[i];
        if (v == NULL || v == st->missing) {
            continue;
        }
        if (!first && wbuf_byte(&req, ',') < 0) {
            fast = -1;
            break;
        }
        first = 0;
        if (self->keys != NULL) {
            PyObject *key = PyTuple_GET_ITEM(self->keys, i);
            fast = wbuf_put(&req, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key)) < 0 ? -1 : 1;
        }
        else {
            fast = fast_encode_str(&req, PyTuple_GET_ITEM(self->params, i));
            if (fast > 0 && wbuf_byte(&req, ':') < 0) {
                fast = -1;
            }
        }
        if (fast > 0) {
            fast = fast_encode(&req, v, 1, NULL);
        }
    }
    if (fast > 0 && wbuf_byte(&req, '}') < 0) {
        fast = -1;
    }
    if (fast > 0) {
        result = tool_send(st, self->name, &req);
        goto done;
    }
    wbuf_free(&req);
    if (fast < 0) {
        goto done;
    }
    /* A value the direct path does not handle: call_tool's path with the same arguments, as a dict. */
    PyObject *kwargs = PyDict_New();
    if (kwargs == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        if (vals[i] != NULL && vals[i] != st->missing && PyDict_SetItem(kwargs, PyTuple_GET_ITEM(self->params, i), vals[i]) < 0) {
            Py_DECREF(kwargs);
            goto done;
        }
    }
    result = tool_call_kwargs(st, self->name, kwargs);
    Py_DECREF(kwargs);
done:
    if (vals != stackvals) {
        PyMem_Free(vals);
    }
    return result;
}

static int
tool_traverse(PyObject *op, visitproc visit, void *arg)
{
    ToolObject *self = (ToolObject *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->name);
    Py_VISIT(self->params);
    Py_VISIT(self->module);
    Py_VISIT(self->dict);
    Py_VISIT(self->prefix);
    Py_VISIT(self->keys);
    return 0;
}

static int
tool_clear(PyObject *op)
{
    ToolObject *self = (ToolObject *)op;
    Py_CLEAR(self->name);
    Py_CLEAR(self->params);
    Py_CLEAR(self->module);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->prefix);
    Py_CLEAR(self->keys);
    return 0;
}

static void
tool_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    (void)tool_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *
tool_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<tool %U>", ((ToolObject *)op)->name);
}

/* Like a Python function: a class attribute binds as a method. */
static PyObject *
tool_descr_get(PyObject *op, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(op);
    }
    return PyMethod_New(op, obj);
}

static PyMemberDef tool_members[] = {
    {"__dictoffset__", Py_T_PYSSIZET, offsetof(ToolObject, dict), Py_READONLY},
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(ToolObject, vectorcall), Py_READONLY},
    {NULL},
};

static PyGetSetDef tool_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyType_Slot tool_slots[] = {
    {Py_tp_doc, "A tool of the sandbox: calls it through the host's governance gate."},
    {Py_tp_dealloc, tool_dealloc},
    {Py_tp_traverse, tool_traverse},
    {Py_tp_clear, tool_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, tool_repr},
    {Py_tp_descr_get, tool_descr_get},
    {Py_tp_members, tool_members},
    {Py_tp_getset, tool_getset},
    {0, NULL},
};

static PyType_Spec tool_spec = {
    .name = "_wasmbox.Tool",
    .basicsize = sizeof(ToolObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = tool_slots,
};

PyDoc_STRVAR(tool_doc,
"tool(name: str, params: tuple[str, ...], nrequired: int) -> Tool\n\n"
"Make the callable of one tool: params are its parameter names in signature order, of which the first\n"
"nrequired are required (positional or keyword) and the rest keyword-only. Calls go through call_tool's path.");

/* Encodes once what every request of t starts with (t->prefix) and its parameters as keys (t->keys), the bytes
   tool_vectorcall would otherwise write at each call. A name that the direct path cannot write (a lone
   surrogate) leaves both NULL, and each call takes the path that reports it. 0 done, -1 an error (set). */
static int
tool_encode_fixed(ToolObject *t)
{
    Py_ssize_t np = PyTuple_GET_SIZE(t->params);
    Py_ssize_t name_len;
    const char *name_s = PyUnicode_AsUTF8AndSize(t->name, &name_len);
    if (name_s == NULL) {
        PyErr_Clear();
        return 0;
    }
    char stack[256];
    wbuf b = {stack, 0, sizeof stack, stack};
    if (wbuf_byte(&b, 'T') < 0 || wbuf_put(&b, name_s, (size_t)name_len) < 0 || wbuf_put(&b, "\n{", 2) < 0) {
        wbuf_free(&b);
        return -1;
    }
    PyObject *prefix = PyBytes_FromStringAndSize(b.p, (Py_ssize_t)b.len);
    PyObject *keys = PyTuple_New(np);
    if (prefix == NULL || keys == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        b.len = 0;
        int r = fast_encode_str(&b, PyTuple_GET_ITEM(t->params, i));
        if (r < 0 || (r > 0 && wbuf_byte(&b, ':') < 0)) {
            goto fail;
        }
        if (r == 0) {
            wbuf_free(&b);
            Py_DECREF(prefix);
            Py_DECREF(keys);
            return 0;
        }
        PyObject *key = PyBytes_FromStringAndSize(b.p, (Py_ssize_t)b.len);
        if (key == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(keys, i, key);
    }
    wbuf_free(&b);
    t->prefix = prefix;
    t->keys = keys;
    return 0;
fail:
    wbuf_free(&b);
    Py_XDECREF(prefix);
    Py_XDECREF(keys);
    return -1;
}

static PyObject *
wasmbox_tool(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "tool expects 3 arguments");
        return NULL;
    }
    PyObject *name = args[0], *params = args[1];
    if (!PyUnicode_CheckExact(name) || !PyTuple_CheckExact(params)) {
        PyErr_SetString(PyExc_TypeError, "tool expects a str, a tuple of str and an int");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(params); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(params, i))) {
            PyErr_SetString(PyExc_TypeError, "tool: parameter names must be str");
            return NULL;
        }
    }
    Py_ssize_t nrequired = PyLong_AsSsize_t(args[2]);
    if (nrequired == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (nrequired < 0 || nrequired > PyTuple_GET_SIZE(params)) {
        PyErr_SetString(PyExc_ValueError, "tool: nrequired out of range");
        return NULL;
    }
    wasmbox_state *st = get_state(module);
    ToolObject *t = PyObject_GC_New(ToolObject, (PyTypeObject *)st->tool_type);
    if (t == NULL) {
        return NULL;
    }
    t->name = Py_NewRef(name);
    t->params = Py_NewRef(params);
    t->nrequired = nrequired;
    t->module = Py_NewRef(module);
    t->dict = NULL;
    t->vectorcall = tool_vectorcall;
    t->prefix = NULL;
    t->keys = NULL;
    if (tool_encode_fixed(t) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

PyDoc_STRVAR(tick_doc, "tick() -> int\n\nCall the host's deadline check once (for tests); returns its answer.");

static PyObject *
wasmbox_tick(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(wasmbox_host_tick());
}

static PyMethodDef wasmbox_methods[] = {
    {"call", wasmbox_call, METH_O, call_doc},
    {"tick", wasmbox_tick, METH_NOARGS, tick_doc},
    {"tool_setup", _PyCFunction_CAST(wasmbox_tool_setup), METH_FASTCALL, tool_setup_doc},
    {"call_tool", _PyCFunction_CAST(wasmbox_call_tool), METH_FASTCALL, call_tool_doc},
    {"tool", _PyCFunction_CAST(wasmbox_tool), METH_FASTCALL, tool_doc},
    {NULL, NULL, 0, NULL},
};

static int
wasmbox_exec_module(PyObject *m)
{
    wasmbox_state *st = get_state(m);
    st->tool_type = PyType_FromModuleAndSpec(m, &tool_spec, NULL);
    if (st->tool_type == NULL || PyModule_AddObjectRef(m, "Tool", st->tool_type) < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(m, "ABI_VERSION", WASMBOX_ABI_VERSION) < 0) {
        return -1;
    }
    return PyModule_AddStringConstant(m, "IMPORT_MODULE", "wasmbox_v1");
}

static PyModuleDef_Slot wasmbox_slots[] = {
    {Py_mod_exec, wasmbox_exec_module},
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
    {0, NULL},
};

static int
wasmbox_traverse(PyObject *m, visitproc visit, void *arg)
{
    wasmbox_state *st = get_state(m);
    Py_VISIT(st->encoder);
    Py_VISIT(st->scan);
    Py_VISIT(st->missing);
    Py_VISIT(st->fallback);
    Py_VISIT(st->tool_type);
    for (size_t i = 0; i < sizeof st->keys / sizeof st->keys[0]; i++) {
        Py_VISIT(st->keys[i]);
    }
    return 0;
}

static int
wasmbox_clear(PyObject *m)
{
    wasmbox_state *st = get_state(m);
    Py_CLEAR(st->encoder);
    Py_CLEAR(st->scan);
    Py_CLEAR(st->missing);
    Py_CLEAR(st->fallback);
    Py_CLEAR(st->tool_type);
    for (size_t i = 0; i < sizeof st->keys / sizeof st->keys[0]; i++) {
        Py_CLEAR(st->keys[i]);
    }
    return 0;
}

static void
wasmbox_free_module(void *m)
{
    (void)wasmbox_clear((PyObject *)m);
}

static struct PyModuleDef wasmbox_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_wasmbox",
    .m_doc = "The interpreter's side of the wasmbox host ABI (import module wasmbox_v1).",
    .m_size = sizeof(wasmbox_state),
    .m_methods = wasmbox_methods,
    .m_slots = wasmbox_slots,
    .m_traverse = wasmbox_traverse,
    .m_clear = wasmbox_clear,
    .m_free = wasmbox_free_module,
};

PyMODINIT_FUNC
PyInit__wasmbox(void)
{
    return PyModuleDef_Init(&wasmbox_module);
}
