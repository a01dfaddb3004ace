/*
 * The C++ exception entry points for a build without wasm exception handling. libc++abi for wasm32 is built
 * without exceptions and defines none of them. Package C++ that is compiled with -fexceptions (Cython's
 * `except +` wrappers in pandas) keeps its throw sites but loses its try blocks; a throw reaches __cxa_throw
 * here, which reports it and aborts the guest (the run fails; the host is unaffected).
 */
#include <stdio.h>
#include <stdlib.h>

void *
__cxa_allocate_exception(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL) {
        abort();
    }
    return p;
}

void
__cxa_free_exception(void *p)
{
    free(p);
}

_Noreturn static void
cxx_exception(const char *what)
{
    fprintf(stderr, "wasmbox sci: a C++ exception was %s; this interpreter has no C++ exception support\n", what);
    fflush(stderr);
    abort();
}

_Noreturn void
__cxa_throw(void *obj, void *tinfo, void (*dest)(void *))
{
    (void)obj;
    (void)tinfo;
    (void)dest;
    cxx_exception("thrown");
}

_Noreturn void
__cxa_rethrow(void)
{
    cxx_exception("rethrown");
}
