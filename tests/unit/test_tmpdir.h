/* test_tmpdir.h — a unit test file's scratch directory under /tmp (g_dir): tmpdir_make creates
 * it, tmpdir_remove deletes it with everything in it; setup_dir / teardown_dir are the two as
 * cmocka group fixtures. A test file defines TEST_TMPDIR_NAME (the directory's name before its
 * random suffix) before including it. */
#ifndef SI_TESTS_UNIT_TEST_TMPDIR_H
#define SI_TESTS_UNIT_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

#ifndef TEST_TMPDIR_NAME
#error "define TEST_TMPDIR_NAME before including test_tmpdir.h"
#endif

static char g_dir[256];

static inline int tmpdir_make(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/%s_XXXXXX", TEST_TMPDIR_NAME);
    return mkdtemp(g_dir) ? 0 : -1;
}

static inline int tmpdir_remove(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline int setup_dir(void **state) {
    (void)state;
    return tmpdir_make();
}

static inline int teardown_dir(void **state) {
    (void)state;
    return tmpdir_remove();
}
#endif
