/* test_thread_pool.c — the worker pool (core/thread_pool.c): every ith runs exactly once per
 * job, for 10k jobs in a row and for pools of 1..4 threads (4 over-subscribes a 2-core machine,
 * which must still make progress); jobs separated by pauses longer than the spin time (workers
 * asleep on the condition variable must still be woken: no lost wake-ups); the spin barrier;
 * creating and freeing pools whose workers are spinning or asleep; two threads giving one pool
 * jobs at once (they take turns). A lost wake-up hangs, so an alarm turns a hang into a
 * failure. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/thread_pool.h"

#define MAX_THREADS 4

typedef struct {
    int job;                   /* the job number, written by the caller before pool_run */
    int runs[MAX_THREADS];     /* how many times each ith ran, over all jobs */
    int seen_job[MAX_THREADS]; /* the job number each ith saw last */
    int bad_nth;               /* set when a call got a wrong nth */
} count_ctx;

static void count_job(void *ctx, int ith, int nth) {
    count_ctx *c = ctx;
    if (nth < 1 || nth > MAX_THREADS || ith < 0 || ith >= nth) {
        c->bad_nth = 1;
        return;
    }
    c->runs[ith]++;
    c->seen_job[ith] = c->job;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs n_jobs jobs on a pool of n threads, pausing pause_ms between jobs, and checks after each
 * one that every ith ran exactly once and saw this job's context. */
static void run_jobs(int n, int n_jobs, int pause_ms) {
    thread_pool *p = NULL;
    assert_int_equal(pool_create(n, &p), SI_OK);
    assert_int_equal(pool_size(p), n);
    count_ctx c;
    memset(&c, 0, sizeof c);
    for (int j = 0; j < n_jobs; j++) {
        c.job = j;
        pool_run(p, count_job, &c);
        assert_int_equal(c.bad_nth, 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(c.runs[i], j + 1);
            assert_int_equal(c.seen_job[i], j);
        }
        if (pause_ms) sleep_ms(pause_ms);
    }
    for (int i = n; i < MAX_THREADS; i++) assert_int_equal(c.runs[i], 0);
    pool_free(p);
}

static void test_10k_jobs(void **state) {
    (void)state;
    for (int n = 1; n <= MAX_THREADS; n++) run_jobs(n, 10000, 0);
}

/* Pauses of 5 ms exceed the 2 ms spin: workers fall asleep before every job. Short pauses land
 * around the spin/sleep transition, where a lost wake-up would hide. */
static void test_jobs_after_sleep(void **state) {
    (void)state;
    for (int n = 2; n <= MAX_THREADS; n++) {
        run_jobs(n, 20, 5);
        run_jobs(n, 40, 2);
        run_jobs(n, 40, 1);
    }
}

typedef struct {
    thread_pool *p;
    int rounds;
    int *slots;     /* [rounds][MAX_THREADS]: ith writes round+1 to its slot in each round */
    int *mismatch;  /* [MAX_THREADS]: set when a thread saw an unwritten slot after a barrier */
} barrier_ctx;

static void barrier_job(void *ctx, int ith, int nth) {
    barrier_ctx *b = ctx;
    for (int r = 0; r < b->rounds; r++) {
        b->slots[r * MAX_THREADS + ith] = r + 1;
        pool_barrier(b->p);
        /* after the barrier every thread's write of this round must be visible */
        for (int i = 0; i < nth; i++)
            if (b->slots[r * MAX_THREADS + i] != r + 1) b->mismatch[ith] = 1;
    }
}

static void test_barrier(void **state) {
    (void)state;
    enum { ROUNDS = 2000 };
    for (int n = 1; n <= MAX_THREADS; n++) {
        thread_pool *p = NULL;
        assert_int_equal(pool_create(n, &p), SI_OK);
        int *slots = calloc(ROUNDS * MAX_THREADS, sizeof *slots);
        int mismatch[MAX_THREADS] = {0};
        assert_non_null(slots);
        barrier_ctx b = {p, ROUNDS, slots, mismatch};
        for (int rep = 0; rep < 5; rep++) {
            memset(slots, 0, ROUNDS * MAX_THREADS * sizeof *slots);
            pool_run(p, barrier_job, &b);
            for (int i = 0; i < n; i++) assert_int_equal(mismatch[i], 0);
        }
        free(slots);
        pool_free(p);
    }
}

/* Freeing must join workers whether they are spinning (just after a job) or asleep. */
static void test_create_free(void **state) {
    (void)state;
    count_ctx c;
    for (int k = 0; k < 50; k++) {
        thread_pool *p = NULL;
        int n = 1 + k % MAX_THREADS;
        assert_int_equal(pool_create(n, &p), SI_OK);
        memset(&c, 0, sizeof c);
        pool_run(p, count_job, &c);
        if (k % 10 == 9) sleep_ms(5);
        pool_free(p);
        for (int i = 0; i < n; i++) assert_int_equal(c.runs[i], 1);
    }
    thread_pool *p = NULL;
    assert_int_equal(pool_create(3, &p), SI_OK); /* never given a job */
    pool_free(p);
}

/* One of two threads that give the same pool 2000 jobs each at once (as two engines on one
 * model do): every job of each must run on every ith exactly once, with its own context. */
typedef struct {
    thread_pool *p;
    count_ctx c;
} caller_arg;

static void *caller_main(void *arg) {
    caller_arg *a = arg;
    for (int j = 0; j < 2000; j++) {
        a->c.job = j;
        pool_run(a->p, count_job, &a->c);
    }
    return NULL;
}

static void test_two_callers(void **state) {
    (void)state;
    thread_pool *p = NULL;
    assert_int_equal(pool_create(3, &p), SI_OK);
    caller_arg a[2];
    pthread_t t[2];
    memset(a, 0, sizeof a);
    for (int k = 0; k < 2; k++) {
        a[k].p = p;
        assert_int_equal(pthread_create(&t[k], NULL, caller_main, &a[k]), 0);
    }
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(a[k].c.bad_nth, 0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(a[k].c.runs[i], 2000);
            assert_int_equal(a[k].c.seen_job[i], 1999);
        }
    }
    pool_free(p);
}

int main(void) {
    alarm(120); /* a lost wake-up hangs: make it a failure instead */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_10k_jobs),    cmocka_unit_test(test_jobs_after_sleep),
        cmocka_unit_test(test_barrier),     cmocka_unit_test(test_create_free),
        cmocka_unit_test(test_two_callers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
