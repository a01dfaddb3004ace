/*
 * wasmbox_scitest._linalg._lalg: a second probe module in another subpackage (two dotted builtins under one
 * package tree), with a numeric C loop over a buffer (dot).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* dot(a, b): the dot product of two equally long sequences of floats. */
static PyObject *
dot(PyObject *self, PyObject *args)
{
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO", &a, &b)) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Size(a);
    if (n < 0 || PySequence_Size(b) != n) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "dot() needs two sequences of the same length");
        }
        return NULL;
    }
    double s = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_GetItem(a, i), *y = PySequence_GetItem(b, i);
        double dx = x ? PyFloat_AsDouble(x) : -1, dy = y ? PyFloat_AsDouble(y) : -1;
        Py_XDECREF(x);
        Py_XDECREF(y);
        if (PyErr_Occurred()) {
            return NULL;
        }
        s += dx * dy;
    }
    return PyFloat_FromDouble(s);
}

static PyMethodDef methods[] = {
    {"dot", dot, METH_VARARGS, "dot(a, b): the dot product"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_lalg", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__lalg(void)
{
    return PyModule_Create(&moduledef);
}
