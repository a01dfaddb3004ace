/*
 * The reactor entry points of the wasmbox interpreter (replaces Programs/python.c).
 *
 * A host instantiates the module, calls _initialize once (wasi-libc constructors), then wasmbox_init once, then
 * wasmbox_prepare with code to run before a snapshot, and wasmbox_exec for each run. Because a snapshot of linear
 * memory taken after prepare is restored for every fresh run, exec must reset everything that init froze:
 * the process-clock start (below), randomness, tempfile names, __main__ (done by the Python driver that prepare
 * installs as the module _wasmbox_boot).
 */
#include "Python.h"
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <wasi/api.h>

#define EXPORT(name) __attribute__((export_name(name)))

/*
 * wasi-libc's emulated clock() measures from a start time taken by a constructor, which a snapshot freezes. This
 * object defines __clock and clock itself so that libc's clock.o is never linked, and resets the start per run.
 */
static __wasi_timestamp_t wasmbox_clock_start;

clock_t
__clock(void)
{
    __wasi_timestamp_t now = 0;
    (void)__wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 0, &now);
    return (clock_t)(now - wasmbox_clock_start);
}

clock_t
clock(void)
{
    return __clock();
}

static void
wasmbox_reset_clock(void)
{
    (void)__wasi_clock_time_get(__WASI_CLOCKID_MONOTONIC, 0, &wasmbox_clock_start);
}

EXPORT("wasmbox_alloc") void *
wasmbox_alloc(int32_t n)
{
    if (n < 0) {
        return NULL;
    }
    return malloc(n ? (size_t)n : 1);
}

EXPORT("wasmbox_free") void
wasmbox_free(void *p)
{
    free(p);
}

static int wasmbox_initialized;

static int
set_path(PyConfig *config, const char *path)
{
    wchar_t *w = Py_DecodeLocale(path, NULL);
    if (w == NULL) {
        return -1;
    }
    PyStatus st = PyWideStringList_Append(&config->module_search_paths, w);
    PyMem_RawFree(w);
    return PyStatus_Exception(st) ? -1 : 0;
}

/*
 * wasmbox_init: initialise CPython with an isolated configuration. Nothing is read from the environment; the
 * stdlib is at /usr/local/lib/python3.13 (read-only mount), pure-Python packages at /packages (read-only mount).
 * Returns 0 on success, 1 if already initialised, 2 on failure (the reason is written to stderr).
 */
EXPORT("wasmbox_init") int32_t
wasmbox_init(void)
{
    if (wasmbox_initialized) {
        return 1;
    }
    wasmbox_reset_clock();
    /* UTF-8 mode: WASI has no locale, and without it stdio, open() and file names would all be ASCII. */
    PyPreConfig preconfig;
    PyPreConfig_InitIsolatedConfig(&preconfig);
    preconfig.utf8_mode = 1;
    PyStatus prestatus = Py_PreInitialize(&preconfig);
    if (PyStatus_Exception(prestatus)) {
        fprintf(stderr, "wasmbox_init: %s\n", prestatus.err_msg ? prestatus.err_msg : "pre-initialisation failed");
        fflush(stderr);
        return 2;
    }
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.site_import = 0;          /* no site: paths are set below; saves ~11 ms per start */
    config.write_bytecode = 0;       /* the stdlib is read-only and precompiled */
    config.install_signal_handlers = 1; /* SIGINT -> KeyboardInterrupt, used by wasmbox_interrupt */
    config.parse_argv = 0;
    config.user_site_directory = 0;
    config.module_search_paths_set = 1;
    PyStatus status;
    status = PyConfig_SetString(&config, &config.program_name, L"python3.13");
    if (PyStatus_Exception(status)) {
        goto fail;
    }
    status = PyConfig_SetString(&config, &config.home, L"/usr/local");
    if (PyStatus_Exception(status)) {
        goto fail;
    }
    /* sys._stdlib_dir: the frozen stdlib modules (os, abc, codecs, io, stat, posixpath, ...) get __file__ from it,
       so inspect.getsource and linecache find their source as on Linux. */
    status = PyConfig_SetString(&config, &config.stdlib_dir, L"/usr/local/lib/python3.13");
    if (PyStatus_Exception(status)) {
        goto fail;
    }
    if (set_path(&config, "/usr/local/lib/python3.13") < 0 ||
        set_path(&config, "/usr/local/lib/python3.13/lib-dynload") < 0 ||
        set_path(&config, "/packages") < 0) {
        PyConfig_Clear(&config);
        fprintf(stderr, "wasmbox_init: cannot set module search paths\n");
        return 2;
    }
    status = Py_InitializeFromConfig(&config);
    if (PyStatus_Exception(status)) {
        goto fail;
    }
    PyConfig_Clear(&config);
    wasmbox_initialized = 1;
    return 0;
fail:
    PyConfig_Clear(&config);
    fprintf(stderr, "wasmbox_init: %s%s%s\n", status.func ? status.func : "", status.func ? ": " : "",
            status.err_msg ? status.err_msg : "initialisation failed");
    fflush(stderr);
    return 2;
}

/*
 * wasmbox_prepare: run source code (UTF-8, not NUL-terminated) in a private namespace, e.g. to install the
 * _wasmbox_boot driver and pre-import modules before a snapshot. Returns 0 on success, 1 on a Python exception
 * (printed to stderr), 2 if not initialised.
 */
EXPORT("wasmbox_prepare") int32_t
wasmbox_prepare(const char *src, int32_t len)
{
    if (!wasmbox_initialized) {
        return 2;
    }
    PyObject *code_str = PyUnicode_DecodeUTF8(src, len, "strict");
    if (code_str == NULL) {
        PyErr_Print();
        return 1;
    }
    const char *utf8 = PyUnicode_AsUTF8(code_str);
    PyObject *globals = PyDict_New();
    int rc = 1;
    if (utf8 != NULL && globals != NULL &&
        PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0 &&
        PyDict_SetItemString(globals, "__name__", PyUnicode_FromString("__wasmbox_prepare__")) == 0) {
        PyObject *res = PyRun_String(utf8, Py_file_input, globals, globals);
        if (res != NULL) {
            Py_DECREF(res);
            rc = 0;
        }
    }
    if (rc != 0) {
        PyErr_Print();
    }
    Py_XDECREF(globals);
    Py_DECREF(code_str);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

/*
 * wasmbox_exec: one run. The request (marshal's format, see docs/ABI.md) is passed as bytes to _wasmbox_boot.run, which
 * returns the exit code. Returns 125 if the driver itself fails (printed to stderr), 126 if not prepared.
 */
EXPORT("wasmbox_exec") int32_t
wasmbox_exec(const char *req, int32_t len)
{
    if (!wasmbox_initialized) {
        return 126;
    }
    wasmbox_reset_clock();
    PyObject *mod = PyImport_ImportModule("_wasmbox_boot");
    if (mod == NULL) {
        PyErr_Print();
        fflush(stderr);
        return 126;
    }
    PyObject *res = PyObject_CallMethod(mod, "run", "y#", req, (Py_ssize_t)len);
    Py_DECREF(mod);
    int32_t rc = 125;
    if (res != NULL) {
        long v = PyLong_AsLong(res);
        Py_DECREF(res);
        if (!(v == -1 && PyErr_Occurred())) {
            rc = (int32_t)v;
        }
    }
    if (PyErr_Occurred()) {
        PyErr_Print();
        rc = 125;
    }
    fflush(stdout);
    fflush(stderr);
    return rc;
}
