/*
 * wasmbox_scitest._core._native: a probe extension module for the sci build's static-builtin route. It is shaped
 * like numpy's: a dotted name whose PyModuleDef carries only the leaf name, single-phase init, a C loop (spin) that
 * only the instrumentation can stop, and a call into C++ compiled against libc++ (median).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

double wasmbox_scitest_median(const double *values, size_t n);

/* spin(n): n rounds of integer mixing in C; returns the mix so the loop cannot be removed. */
static PyObject *
spin(PyObject *self, PyObject *arg)
{
    unsigned long long n = PyLong_AsUnsignedLongLong(arg);
    if (n == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (unsigned long long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x += i;
    }
    return PyLong_FromUnsignedLongLong(x);
}

/* median(seq of floats) via std::nth_element in C++. */
static PyObject *
median(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "median() needs a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "median() of an empty sequence");
        return NULL;
    }
    double *v = PyMem_Malloc(sizeof(double) * (size_t)n);
    if (v == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (v[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(v);
            Py_DECREF(seq);
            return NULL;
        }
    }
    double m = wasmbox_scitest_median(v, (size_t)n);
    PyMem_Free(v);
    Py_DECREF(seq);
    return PyFloat_FromDouble(m);
}

static PyMethodDef methods[] = {
    {"spin", spin, METH_O, "spin(n): n rounds of integer mixing in C"},
    {"median", median, METH_O, "median(seq): the median, computed in C++"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&moduledef);
}
