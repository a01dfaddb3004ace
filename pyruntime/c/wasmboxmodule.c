/*
 * _wasmbox: the interpreter's side of the wasmbox guest<->host ABI (version 1).
 *
 * Compiled into the interpreter as a builtin module. It declares every import of the one versioned import module
 * "wasmbox_v1" (see hostfuncs/abi.go and docs/ABI.md; the two must agree):
 *
 *   call(req_ptr, req_len) -> i32   host handles a JSON request, keeps the response; returns its length,
 *                                   or the negated length of an error response
 *   fetch(buf_ptr, buf_len) -> i32  host copies the pending response into a buffer the guest allocated
 *   tick() -> i32                   called by the build-time loop instrumentation; returns the next counter
 *                                   value, negative to ask for a KeyboardInterrupt
 *
 * and exports wasmbox_interrupt(), which the instrumentation calls when tick() returns a negative value. The host
 * never calls into the guest from a host function and never writes guest memory from another goroutine.
 */
#include "Python.h"
#include <signal.h>
#include <stdint.h>
#include <string.h>

#define WASMBOX_ABI_VERSION 1

#define WASMBOX_IMPORT(name) __attribute__((import_module("wasmbox_v1"), import_name(name)))

WASMBOX_IMPORT("call") int32_t wasmbox_host_call(const void *req, int32_t req_len);
WASMBOX_IMPORT("fetch") int32_t wasmbox_host_fetch(void *buf, int32_t buf_len);
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

PyDoc_STRVAR(call_tool_doc,
"call_tool(name: str, kwargs: dict) -> object\n\n"
"Call one tool through the host (the ABI's tool fast path): encode kwargs as JSON (dropping arguments that are\n"
"the missing sentinel), send \"T\" name \"\\n\" arguments, and decode the JSON result. Failures go through the\n"
"fallback given to tool_setup, which raises the tool exception.");

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
    /* Drop omitted optional arguments (a copy only when there are any). */
    PyObject *key, *value, *filtered = NULL;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        if (value == st->missing) {
            filtered = PyDict_New();
            if (filtered == NULL) {
                return NULL;
            }
            Py_ssize_t p2 = 0;
            while (PyDict_Next(kwargs, &p2, &key, &value)) {
                if (value != st->missing && PyDict_SetItem(filtered, key, value) < 0) {
                    Py_DECREF(filtered);
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
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            return call_fallback(st, 0, name, PyErr_GetRaisedException());
        }
        return NULL;
    }
    if (!PyTuple_Check(enc) || PyTuple_GET_SIZE(enc) != 1 || !PyUnicode_Check(PyTuple_GET_ITEM(enc, 0))) {
        Py_DECREF(enc);
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: unexpected result from the JSON encoder");
        return NULL;
    }
    Py_ssize_t name_len, args_len;
    const char *name_s = PyUnicode_AsUTF8AndSize(name, &name_len);
    const char *args_s = name_s ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(enc, 0), &args_len) : NULL;
    if (args_s == NULL) {
        Py_DECREF(enc);
        return NULL;
    }
    if (name_len > INT32_MAX / 2 || args_len > INT32_MAX / 2) {
        Py_DECREF(enc);
        PyErr_SetString(PyExc_ValueError, "wasmbox: request too large");
        return NULL;
    }
    /* "T" name "\n" arguments */
    size_t req_len = 2 + (size_t)name_len + (size_t)args_len;
    char stack_req[WASMBOX_STACK_BUF];
    char *req = req_len <= sizeof stack_req ? stack_req : PyMem_Malloc(req_len);
    if (req == NULL) {
        Py_DECREF(enc);
        return PyErr_NoMemory();
    }
    req[0] = 'T';
    memcpy(req + 1, name_s, (size_t)name_len);
    req[1 + name_len] = '\n';
    memcpy(req + 2 + name_len, args_s, (size_t)args_len);
    int32_t n = wasmbox_host_call(req, (int32_t)req_len);
    if (req != stack_req) {
        PyMem_Free(req);
    }
    Py_DECREF(enc);

    int ok = n >= 0;
    int64_t len = ok ? (int64_t)n : -(int64_t)n;
    if (len > WASMBOX_MAX_RESPONSE) {
        PyErr_SetString(PyExc_RuntimeError, "wasmbox: host response too large");
        return NULL;
    }
    char stack_resp[WASMBOX_STACK_BUF];
    char *resp = len <= (int64_t)sizeof stack_resp ? stack_resp : PyMem_Malloc((size_t)len);
    if (resp == NULL) {
        return PyErr_NoMemory();
    }
    if (len > 0) {
        int32_t got = wasmbox_host_fetch(resp, (int32_t)len);
        if (got != (int32_t)len) {
            if (resp != stack_resp) {
                PyMem_Free(resp);
            }
            PyErr_Format(PyExc_RuntimeError, "wasmbox: fetch returned %d, expected %d", (int)got, (int)len);
            return NULL;
        }
    }
    PyObject *result = NULL;
    if (!ok) {
        result = call_fallback(st, 1, name, PyBytes_FromStringAndSize(resp, (Py_ssize_t)len));
        goto done;
    }
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
    {NULL, NULL, 0, NULL},
};

static int
wasmbox_exec_module(PyObject *m)
{
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
