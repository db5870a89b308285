/* error.c — the thread-local error message and status names. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SI_ERROR_CAP 1024

static _Thread_local char error_msg[SI_ERROR_CAP];

const char *si_last_error(void) { return error_msg; }

si_status si_error(si_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_msg, sizeof error_msg, fmt, ap);
    va_end(ap);
    return s;
}

si_status si_error_wrap(si_status s, const char *fmt, ...) {
    char old[SI_ERROR_CAP];
    memcpy(old, error_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(error_msg, sizeof error_msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof error_msg)
        snprintf(error_msg + n, sizeof error_msg - (size_t)n, "%s", old);
    return s;
}

void si_clear_error(void) { error_msg[0] = '\0'; }

const char *si_status_name(si_status s) {
    switch (s) {
    case SI_OK: return "SI_OK";
    case SI_ERR_IO: return "SI_ERR_IO";
    case SI_ERR_FORMAT: return "SI_ERR_FORMAT";
    case SI_ERR_UNSUPPORTED: return "SI_ERR_UNSUPPORTED";
    case SI_ERR_INVALID_ARG: return "SI_ERR_INVALID_ARG";
    case SI_ERR_NOMEM: return "SI_ERR_NOMEM";
    case SI_ERR_NOT_FOUND: return "SI_ERR_NOT_FOUND";
    case SI_ERR_CONTEXT_FULL: return "SI_ERR_CONTEXT_FULL";
    case SI_ERR_INTERNAL: return "SI_ERR_INTERNAL";
    }
    return "SI_ERR_UNKNOWN";
}

void si_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "swiftinfer: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}
