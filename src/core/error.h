/* error.h — setting the thread-local error message behind si_last_error(), and SI_ASSERT.
 *
 * Bad input (files, flags, requests) is reported with si_error(); SI_ASSERT is only for broken
 * internal invariants and aborts with file:line. */
#ifndef SI_CORE_ERROR_H
#define SI_CORE_ERROR_H

#include "swiftinfer.h"

#if defined(__GNUC__)
#define SI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SI_PRINTF(a, b)
#endif

/* Records a printf-style message for si_last_error() and returns s, so callers can write
 * `return si_error(SI_ERR_FORMAT, "%s: tensor '%s' ...", path, name);`. */
si_status si_error(si_status s, const char *fmt, ...) SI_PRINTF(2, 3);

/* Prefixes the current message with more context ("loading x.gguf: " + old message). */
si_status si_error_wrap(si_status s, const char *fmt, ...) SI_PRINTF(2, 3);

void si_clear_error(void);

_Noreturn void si_assert_fail(const char *expr, const char *file, int line);

#define SI_ASSERT(x) ((x) ? (void)0 : si_assert_fail(#x, __FILE__, __LINE__))

#endif
