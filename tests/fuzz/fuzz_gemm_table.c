/* fuzz_gemm_table.c — libFuzzer target for the CUDA backend's matmul-table parser
 * (gemm_table_parse, the SI_CUDA_GEMM_TABLE file): any input either parses into entries that the
 * lookup then finds, or is rejected with a message. Any crash, sanitizer report or leak is a
 * finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/gemm_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0; /* an inner NUL just ends the table early */
    gemm_table t;
    char err[160];
    if (gemm_table_parse(&t, text, err, sizeof err) == 0) {
        for (int i = 0; i < t.n; i++) {
            const gemm_table_entry *e = &t.e[i];
            if (!gemm_table_find(&t, e->type, e->M, e->K, e->n)) abort();
        }
        gemm_table_free(&t);
    } else if (t.n != 0 || t.e != NULL || !memchr(err, 0, sizeof err)) {
        abort(); /* a failed parse leaves the table empty and the message terminated */
    }
    free(text);
    return 0;
}
