/* A stand-in host for testing wasmboxmodule.c natively (pyruntime/c/test/run.sh): the "call" import answers
 * with the request's argument text ("T" name "\n" arguments), or with the response set by shim_respond. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *pending;
static int32_t pending_len;
static char *forced;
static int32_t forced_len = -1;
static int forced_error;
static char last[1 << 16];
static int32_t last_len;
static int32_t into_calls, fetch_calls;

/* Copies the last request's argument text into buf; returns its length. */
int32_t shim_last_arguments(char *buf, int32_t cap)
{
    int32_t n = last_len < cap ? last_len : cap;
    memcpy(buf, last, n);
    return n;
}

void shim_respond(const char *s, int32_t n, int is_error)
{
    free(forced);
    forced = malloc(n > 0 ? n : 1);
    memcpy(forced, s, n);
    forced_len = n;
    forced_error = is_error;
}

int32_t wasmbox_host_call(const void *req, int32_t req_len)
{
    free(pending);
    const char *nl0 = memchr(req, '\n', req_len);
    int32_t off0 = nl0 ? (int32_t)(nl0 - (const char *)req) + 1 : req_len;
    last_len = req_len - off0 < (int32_t)sizeof last ? req_len - off0 : (int32_t)sizeof last;
    memcpy(last, (const char *)req + off0, last_len);
    if (forced_len >= 0) {
        pending = forced, pending_len = forced_len;
        forced = NULL, forced_len = -1;
        return forced_error ? -pending_len : pending_len;
    }
    const char *nl = memchr(req, '\n', req_len);
    int32_t off = nl ? (int32_t)(nl - (const char *)req) + 1 : req_len;
    pending_len = req_len - off;
    pending = malloc(pending_len + 1);
    memcpy(pending, (const char *)req + off, pending_len);
    return pending_len;
}

int32_t wasmbox_host_fetch(void *buf, int32_t n)
{
    fetch_calls++;
    if (n != pending_len) {
        return -1;
    }
    memcpy(buf, pending, n);
    return n;
}

/* With shim_bad_buffer(1), call_into answers as a host that finds the buffer outside memory. */
static int bad_buffer;
void shim_bad_buffer(int on) { bad_buffer = on; }
int32_t shim_into_calls(void) { return into_calls; }
int32_t shim_fetch_calls(void) { return fetch_calls; }

int32_t wasmbox_host_call_into(const void *req, int32_t req_len, void *buf, int32_t buf_len)
{
    into_calls++;
    if (bad_buffer) {
        return INT32_MIN;
    }
    int32_t n = wasmbox_host_call(req, req_len);
    int32_t len = n < 0 ? -n : n;
    if (len <= buf_len) {
        memcpy(buf, pending, len);
        free(pending);
        pending = NULL, pending_len = 0;
    }
    return n;
}

int32_t wasmbox_host_tick(void) { return 1000; }
