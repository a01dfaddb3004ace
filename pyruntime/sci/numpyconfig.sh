#!/usr/bin/env bash
# numpyconfig.sh CC... — print numpy's _numpyconfig.h for the target of the given compiler command, from the
# compiler's own predefined macros (numpy's meson build computes the same values with configure checks).
set -euo pipefail
m=$("$@" -dM -E -x c /dev/null)
v() { echo "$m" | awk -v k="$1" '$2 == k {print $3}'; }
ld=$(v __SIZEOF_LONG_DOUBLE__); p=$(v __SIZEOF_POINTER__)
cat <<H
#define NPY_HAVE_ENDIAN_H 1

#define NPY_SIZEOF_SHORT $(v __SIZEOF_SHORT__)
#define NPY_SIZEOF_INT $(v __SIZEOF_INT__)
#define NPY_SIZEOF_LONG $(v __SIZEOF_LONG__)
#define NPY_SIZEOF_FLOAT $(v __SIZEOF_FLOAT__)
#define NPY_SIZEOF_COMPLEX_FLOAT $(( $(v __SIZEOF_FLOAT__) * 2 ))
#define NPY_SIZEOF_DOUBLE $(v __SIZEOF_DOUBLE__)
#define NPY_SIZEOF_COMPLEX_DOUBLE $(( $(v __SIZEOF_DOUBLE__) * 2 ))
#define NPY_SIZEOF_LONGDOUBLE $ld
#define NPY_SIZEOF_COMPLEX_LONGDOUBLE $(( ld * 2 ))
#define NPY_SIZEOF_PY_INTPTR_T $p
#define NPY_SIZEOF_INTP $p
#define NPY_SIZEOF_UINTP $p
#define NPY_SIZEOF_WCHAR_T $(v __SIZEOF_WCHAR_T__)
#define NPY_SIZEOF_OFF_T 8
#define NPY_SIZEOF_PY_LONG_LONG $(v __SIZEOF_LONG_LONG__)
#define NPY_SIZEOF_LONGLONG $(v __SIZEOF_LONG_LONG__)

/* no threads in WASI preview 1 */
#define NPY_NO_SMP 1

#define NPY_VISIBILITY_HIDDEN __attribute__((visibility("hidden")))
#define NPY_ABI_VERSION 0x02000000
#define NPY_API_VERSION 0x00000013

#ifndef __STDC_FORMAT_MACROS
#define __STDC_FORMAT_MACROS 1
#endif
H
