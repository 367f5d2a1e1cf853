/* tests/guard_threads.c - guard pages from several threads at once.
 *
 * Four threads, each on every sandbox path: out-of-bounds accesses to a
 * sandbox of its own and to one all threads share, nested calls across
 * the two, first touches of a shared uffd sandbox racing each other, and
 * an arena per thread whose on_full resets it.  Each thread's faults must
 * come back to its own calls, with its own offsets.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <trapkit/guard.h>

#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define NTHREADS 4

static tk_sandbox *shared[TK_SANDBOX_PATH_COUNT_];
static long rounds;

struct access {
    uint64_t off;
    int write;
    tk_sandbox *other;
    uint64_t other_off;
    int inner_rc;
    tk_sandbox_trap inner;
};

/* The access is an asm instruction, out of ThreadSanitizer's sight: it
 * counts a faulting access as one that happened, and several threads' at
 * one address out of bounds (or in bounds, of the same zero byte) as a
 * race. */
static void do_access(tk_sandbox *sb, void *arg)
{
    struct access *a = arg;
    uint8_t *p = (uint8_t *)tk_sandbox_base(sb) + a->off;
    if (a->write) {
        __asm__ volatile("movb $0, (%0)" ::"r"(p) : "memory");
    } else {
        uint8_t v;
        __asm__ volatile("movb (%1), %0" : "=r"(v) : "r"(p) : "memory");
        (void)v;
    }
}

static void nested(tk_sandbox *sb, void *arg)
{
    (void)sb;
    struct access *a = arg;
    struct access in = {.off = a->other_off, .write = 1};
    a->inner_rc = tk_sandbox_call(a->other, do_access, &in, &a->inner);
    struct access out = {.off = a->off, .write = 1};
    do_access(sb, &out);
}

static int on_full(tk_arena *a, size_t size, void *arg)
{
    (void)size;
    atomic_int *calls = arg;
    atomic_fetch_add(calls, 1);
    tk_arena_reset(a);
    return TK_ARENA_RETRY;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    size_t ps = tk_test_page();
    for (int p = TK_SANDBOX_MPROTECT; p < TK_SANDBOX_PATH_COUNT_; p++) {
        if (!shared[p]) continue;
        tk_sandbox *own;
        tk_sandbox_config c = {.size = 32 * KIB,
                               .max_size = 256 * KIB,
                               .guard = 64 * KIB,
                               .path = (enum tk_sandbox_path)p};
        CHECK_OK(tk_sandbox_create(&c, &own));
        for (long r = 0; r < rounds; r++) {
            tk_sandbox *sb = (r & 1) ? own : shared[p];
            size_t size = tk_sandbox_size(sb);
            uint64_t oob = size + (tk_test_rand(&seed) % 1024) * 64 + (uint64_t)id * 8;
            struct access a = {.off = oob, .write = (int)(r & 2)};
            tk_sandbox_trap t;
            CHECK(tk_sandbox_call(sb, do_access, &a, &t) == -EFAULT);
            CHECK(t.sandbox == sb && t.offset == oob);
            /* in bounds: (uffd: first touches racing the other threads') */
            uint64_t in = (uint64_t)(tk_test_rand(&seed) % (size / 8)) * 8;
            struct access b = {.off = in, .write = 0};
            CHECK_OK(tk_sandbox_call(sb, do_access, &b, NULL));
            /* nested: the inner fault to the inner call, then the outer's */
            struct access n = {.off = tk_sandbox_size(own) + 8,
                               .other = shared[p],
                               .other_off = tk_sandbox_size(shared[p]) + 16 + (uint64_t)id * 8};
            CHECK(tk_sandbox_call(own, nested, &n, &t) == -EFAULT);
            CHECK(n.inner_rc == -EFAULT && n.inner.offset == n.other_off);
            CHECK(t.sandbox == own && t.offset == n.off);
            if (r % 64 == 63) {
                /* grow and reset the thread's own sandbox meanwhile */
                CHECK_OK(tk_sandbox_grow(own, 32 * KIB + ps));
                CHECK(((uint8_t *)tk_sandbox_base(own))[32 * KIB] == 0);
                CHECK_OK(tk_sandbox_reset(own));
            }
        }
        CHECK_OK(tk_sandbox_destroy(own));
    }

    atomic_int calls = 0;
    tk_arena *a;
    tk_arena_config ac = {
        .max_size = 64 * KIB, .chunk = 64 * KIB, .on_full = on_full, .arg = &calls};
    CHECK_OK(tk_arena_create(&ac, &a));
    char *base = tk_arena_base(a);
    for (long i = 0; i < rounds * 100; i++) {
        uint64_t *x = tk_arena_alloc(a, 24);
        CHECK((char *)x >= base && (char *)(x + 3) <= base + 64 * KIB);
        x[0] = (uint64_t)i;
        x[1] = (uint64_t)id;
    }
    CHECK(atomic_load(&calls) >= rounds * 100 * 32 / (64 * 1024) - 1);
    CHECK_OK(tk_arena_destroy(a));
    return NULL;
}

int main(void)
{
    rounds = tk_test_scaled(2000);
    int paths = 0;
    for (int p = TK_SANDBOX_MPROTECT; p < TK_SANDBOX_PATH_COUNT_; p++) {
        tk_sandbox_config c = {.size = 64 * KIB,
                               .max_size = 128 * KIB,
                               .guard = 64 * KIB,
                               .path = (enum tk_sandbox_path)p};
        int rc = tk_sandbox_create(&c, &shared[p]);
        if (rc == -EOPNOTSUPP) {
            printf("path %s unavailable: %s\n", tk_sandbox_path_name(p), tk_last_error());
            shared[p] = NULL;
            continue;
        }
        CHECK_OK(rc);
        paths++;
    }
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < NTHREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int p = 0; p < TK_SANDBOX_PATH_COUNT_; p++)
        if (shared[p]) CHECK_OK(tk_sandbox_destroy(shared[p]));
    printf("%d paths, %d threads, %ld rounds: ok\n", paths, NTHREADS, rounds);
    return 0;
}
