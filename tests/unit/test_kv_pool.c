/* test_kv_pool.c — the KV block pool: allocation until dry, reference counts, the free queue's
 * order (plain blocks before cached ones, cached ones least recently freed first), prefix-map
 * look-ups that compare tokens and parents (not only hashes), eviction, and a random sequence of
 * operations with kv_pool_check after each one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/kv_pool.h"

static void fill(int32_t *t, int32_t base) {
    for (int i = 0; i < KV_BLOCK_SIZE; i++) t[i] = base + i;
}

static void test_alloc_until_dry(void **state) {
    (void)state;
    kv_pool *p;
    assert_int_equal(kv_pool_create(8, &p), SI_OK);
    int32_t got[8];
    for (int i = 0; i < 8; i++) {
        got[i] = kv_pool_alloc(p);
        assert_true(got[i] >= 0 && got[i] < 8);
        for (int j = 0; j < i; j++) assert_int_not_equal(got[i], got[j]);
        kv_pool_check(p);
    }
    assert_int_equal(kv_pool_alloc(p), -1);
    assert_int_equal(kv_pool_n_free(p), 0);
    kv_pool_ref(p, got[3]);
    kv_pool_unref(p, got[3]);
    assert_int_equal(kv_pool_n_free(p), 0);
    kv_pool_unref(p, got[3]);
    assert_int_equal(kv_pool_n_free(p), 1);
    assert_int_equal(kv_pool_alloc(p), got[3]);
    for (int i = 0; i < 8; i++) kv_pool_unref(p, got[i]);
    kv_pool_check(p);
    assert_int_equal(kv_pool_get_stats(p).n_used, 0);
    kv_pool_free(p);
    assert_int_equal(kv_pool_create(0, &p), SI_ERR_INVALID_ARG);
}

static void test_prefix_map_and_lru(void **state) {
    (void)state;
    kv_pool *p;
    assert_int_equal(kv_pool_create(4, &p), SI_OK);
    int32_t b[4], t[4][KV_BLOCK_SIZE];
    uint64_t h[4];
    uint64_t parent = KV_HASH_ROOT;
    for (int i = 0; i < 4; i++) {
        b[i] = kv_pool_alloc(p);
        fill(t[i], 100 * i);
    }
    for (int i = 0; i < 2; i++) { /* blocks 0 and 1 hold a two-block prefix */
        h[i] = kv_pool_block_hash(parent, t[i]);
        kv_pool_publish(p, b[i], h[i], parent, t[i]);
        parent = h[i];
    }
    kv_pool_check(p);
    assert_int_equal(kv_pool_lookup(p, h[0], KV_HASH_ROOT, t[0]), b[0]);
    assert_int_equal(kv_pool_lookup(p, h[1], h[0], t[1]), b[1]);
    /* same hash but other tokens or parent: never a hit */
    assert_int_equal(kv_pool_lookup(p, h[1], h[0], t[2]), -1);
    assert_int_equal(kv_pool_lookup(p, h[1], KV_HASH_ROOT, t[1]), -1);
    /* a second copy of a cached block is not published */
    kv_pool_publish(p, b[2], h[0], KV_HASH_ROOT, t[0]);
    assert_int_equal(kv_pool_get_stats(p).n_cached, 2);

    /* free in reverse order as a sequence does; then plain blocks come back first, and cached
     * ones in the order they were freed (the tail block b[1] first) */
    for (int i = 3; i >= 0; i--) kv_pool_unref(p, b[i]);
    kv_pool_check(p);
    assert_int_equal(kv_pool_get_stats(p).n_cached, 2);
    int32_t a0 = kv_pool_alloc(p), a1 = kv_pool_alloc(p);
    assert_true((a0 == b[2] || a0 == b[3]) && (a1 == b[2] || a1 == b[3]));
    assert_int_equal(kv_pool_get_stats(p).evictions, 0);
    /* a hit on a free cached block takes it off the free queue */
    kv_pool_ref(p, b[0]);
    assert_int_equal(kv_pool_n_free(p), 1);
    kv_pool_check(p);
    int32_t a2 = kv_pool_alloc(p);
    assert_int_equal(a2, b[1]);
    assert_int_equal(kv_pool_get_stats(p).evictions, 1);
    assert_int_equal(kv_pool_lookup(p, h[1], h[0], t[1]), -1);
    assert_int_equal(kv_pool_lookup(p, h[0], KV_HASH_ROOT, t[0]), b[0]);
    kv_pool_check(p);
    kv_pool_unref(p, a0);
    kv_pool_unref(p, a1);
    kv_pool_unref(p, a2);
    kv_pool_unref(p, b[0]);
    kv_pool_count(p, 3, 2);
    assert_int_equal(kv_pool_get_stats(p).hits, 3);
    assert_int_equal(kv_pool_get_stats(p).misses, 2);
    kv_pool_check(p);
    kv_pool_free(p);
}

/* Random alloc / ref / unref / publish with a check after every operation; the map must keep
 * finding every published block (backward-shift deletion must not break probe chains). */
static void test_random_ops(void **state) {
    (void)state;
    enum { N = 37, OPS = 20000 };
    kv_pool *p;
    assert_int_equal(kv_pool_create(N, &p), SI_OK);
    int32_t held[4 * N], n_held = 0;
    uint32_t r = 7;
    for (int op = 0; op < OPS; op++) {
        r = r * 1103515245u + 12345u;
        uint32_t k = (r >> 16) % 4;
        if ((k == 0 || n_held == 0) && n_held < 4 * N) {
            int32_t b = kv_pool_alloc(p);
            if (b >= 0) held[n_held++] = b;
            else assert_int_equal(kv_pool_n_free(p), 0);
        } else if (k == 1 && n_held < 4 * N) {
            int32_t b = held[(r >> 3) % (uint32_t)n_held];
            kv_pool_ref(p, b);
            held[n_held++] = b;
        } else if (k == 2 || n_held == 4 * N) {
            int32_t i = (int32_t)((r >> 5) % (uint32_t)n_held);
            kv_pool_unref(p, held[i]);
            held[i] = held[--n_held];
        } else {
            int32_t b = held[(r >> 7) % (uint32_t)n_held], t[KV_BLOCK_SIZE];
            fill(t, (int32_t)((r >> 9) % 50)); /* few distinct contents: duplicates happen */
            kv_pool_publish(p, b, kv_pool_block_hash(KV_HASH_ROOT, t), KV_HASH_ROOT, t);
        }
        kv_pool_check(p);
    }
    while (n_held) kv_pool_unref(p, held[--n_held]);
    kv_pool_check(p);
    assert_int_equal(kv_pool_get_stats(p).n_free, N);
    kv_pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_until_dry),
        cmocka_unit_test(test_prefix_map_and_lru),
        cmocka_unit_test(test_random_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
