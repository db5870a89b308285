/* engine.h — internals of the engine (include/swiftinfer.h, "Engine") that are worth testing on
 * their own: the stop-string scan that decides which generated text may be released. */
#ifndef SI_ENGINE_ENGINE_H
#define SI_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

/* Scans text (len bytes, not NUL-terminated) for the stop strings. Returns the offset of the
 * earliest complete occurrence of any of them, or -1. When there is none, *safe is the length of
 * the longest prefix of text that can be released: text minus its longest tail that is a proper
 * prefix of some stop string (that tail may still grow into a stop string). */
int64_t engine_stop_scan(const char *text, size_t len, const char *const *stop, int32_t n_stop,
                         size_t *safe);

#endif
