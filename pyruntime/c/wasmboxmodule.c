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

PyDoc_STRVAR(tick_doc, "tick() -> int\n\nCall the host's deadline check once (for tests); returns its answer.");

static PyObject *
wasmbox_tick(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(wasmbox_host_tick());
}

static PyMethodDef wasmbox_methods[] = {
    {"call", wasmbox_call, METH_O, call_doc},
    {"tick", wasmbox_tick, METH_NOARGS, tick_doc},
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

static struct PyModuleDef wasmbox_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_wasmbox",
    .m_doc = "The interpreter's side of the wasmbox host ABI (import module wasmbox_v1).",
    .m_size = 0,
    .m_methods = wasmbox_methods,
    .m_slots = wasmbox_slots,
};

PyMODINIT_FUNC
PyInit__wasmbox(void)
{
    return PyModuleDef_Init(&wasmbox_module);
}
