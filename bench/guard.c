/* bench/guard.c - guard pages instead of compare-and-branch (trapkit/guard.h).
 *
 *   guard/arena            Appel & Li section 3, heap-overflow detection,
 *                          measured: a bump allocator of 16-byte cells in a
 *                          64 KiB nursery that a "collector" empties when
 *                          full (on_full resets the arena and the
 *                          allocation is retried at the base).  ns per
 *                          allocation (params.nursery_kib 64, the seed's,
 *                          and 1024: the trap's cost spread over 16 times
 *                          the allocations), with params.work the dependent ALU
 *                          operations done between two allocations (0: the
 *                          allocation alone; 48: the seed's "a new cell
 *                          every 50 instructions").  mechanism guard-page:
 *                          tk_arena_alloc (no compare; a fault per
 *                          nursery); explicit-check: tk_arena_alloc_checked
 *                          (compare and branch per allocation); no-check:
 *                          the same loop with the limit check hoisted out
 *                          (the nursery's cell count known in advance, so a
 *                          lower bound, not an allocator).  The seed's
 *                          arithmetic (2 instructions of 50 = 4%, a
 *                          1200-cycle trap per 16k cells = 0.3%) is what the
 *                          three rows measure here.
 *   guard/sandbox-kernel   an array-heavy kernel on a sandbox's linear
 *                          memory through 32-bit offsets, as WebAssembly
 *                          code does: a product of two params.n x params.n
 *                          uint32 matrices, then a gather-scatter histogram
 *                          of the result (no data-dependent branches, not
 *                          vectorized).  guard-page: plain loads and stores
 *                          at base + offset (the guard region is the
 *                          check); explicit-check: each access compares
 *                          offset + 4 with the memory's size first (held
 *                          in a local, as an engine keeps it in a
 *                          register).  ns per kernel run; both under
 *                          tk_sandbox_call, with the same checksum.
 *   guard/sandbox-create   sandboxes per second (ops_per_s, all threads
 *                          together) at params.threads 1 and 2, per path
 *                          (mechanism mprotect, madv-guard, uffd), for
 *                          params.op "create" (tk_sandbox_create of 64 KiB
 *                          in a 4 GiB + 2 GiB reservation, first and last
 *                          page written, tk_sandbox_destroy) and "reset" (a
 *                          thread's own sandbox: its 16 pages written,
 *                          grown by 16 pages, those written, then
 *                          tk_sandbox_reset: the cycle of a pooling
 *                          runtime's instance slot).
 *
 * Every figure is the median of the repetitions (after a warm-up one), the
 * competing variants interleaved within each repetition.  Times from
 * CLOCK_MONOTONIC.  Each run checks its result (a checksum, the sorted
 * order, the histogram's total).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <trapkit/error.h>
#include <trapkit/guard.h>

#include "bench.h"

#define KIB ((size_t)1 << 10)

static void die(const char *what, int rc)
{
    fprintf(stderr, "guard: %s: %s (%s)\n", what, tk_strerror(rc), tk_last_error());
    exit(1);
}

/* ---- guard/arena ------------------------------------------------------- */

struct cell {
    uint64_t car;
    struct cell *cdr;
};

static long collections;

static int collect(tk_arena *a, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    collections++;
    tk_arena_reset(a);
    return TK_ARENA_RETRY;
}

/* `work` dependent operations: the mutator's computation between two
 * allocations (an asm barrier keeps the compiler from folding it). */
#define WORK(h, work)                                                                              \
    for (int k_ = 0; k_ < (work); k_++) {                                                          \
        h = (h << 1) ^ (h >> 3);                                                                   \
        __asm__("" : "+r"(h));                                                                     \
    }

__attribute__((noinline)) static uint64_t mutator_guard(tk_arena *a, long n, int work)
{
    uint64_t h = 1;
    struct cell *list = NULL;
    for (long i = 0; i < n; i++) {
        WORK(h, work);
        struct cell *c = tk_arena_alloc(a, sizeof *c);
        c->car = h;
        c->cdr = list;
        list = c;
        h += list->car & 1;
    }
    return h + (uint64_t)(uintptr_t)list->cdr;
}

__attribute__((noinline)) static uint64_t mutator_checked(tk_arena *a, long n, int work)
{
    uint64_t h = 1;
    struct cell *list = NULL;
    for (long i = 0; i < n; i++) {
        WORK(h, work);
        struct cell *c = tk_arena_alloc_checked(a, sizeof *c);
        c->car = h;
        c->cdr = list;
        list = c;
        h += list->car & 1;
    }
    return h + (uint64_t)(uintptr_t)list->cdr;
}

/* the limit check hoisted: a nursery's worth of cells at a time */
__attribute__((noinline)) static uint64_t mutator_nocheck(tk_arena *a, long n, int work)
{
    uint64_t h = 1;
    struct cell *list = NULL;
    for (long i = 0; i < n;) {
        long k = (long)((size_t)(a->limit - a->top) / sizeof(struct cell));
        if (k == 0) {
            collect(a, sizeof(struct cell), NULL);
            continue;
        }
        if (k > n - i) k = n - i;
        char *top = a->top;
        for (long j = 0; j < k; j++) {
            WORK(h, work);
            struct cell *c = (struct cell *)top;
            top += sizeof *c;
            c->car = h;
            c->cdr = list;
            list = c;
            h += list->car & 1;
        }
        a->top = top;
        i += k;
    }
    return h + (uint64_t)(uintptr_t)list->cdr;
}

enum { A_GUARD, A_CHECKED, A_NOCHECK, A_N };
static const char *const arena_mech[A_N] = {"guard-page", "explicit-check", "no-check"};

static void bench_arena(const struct bench_opts *o)
{
    static const int works[] = {0, 48};
    static const size_t nurseries_kib[] = {64, 1024};
    for (size_t nk = 0; nk < 2; nk++)
        for (size_t w = 0; w < sizeof works / sizeof works[0]; w++) {
            int work = works[w];
            size_t nursery = nurseries_kib[nk] * KIB;
            tk_arena_config cfg = {.max_size = nursery, .chunk = nursery, .on_full = collect};
            tk_arena *a;
            int rc = tk_arena_create(&cfg, &a);
            if (rc) die("tk_arena_create", rc);
            long n = (o->quick ? 1000000L : 20000000L) / (work ? 4 : 1);
            struct bench_fig fig[A_N];
            memset(fig, 0, sizeof fig);
            uint64_t want = 0;
            long colls[A_N] = {0};
            bench_progress("guard/arena: %ld allocations of 16 bytes, work %d, %zu KiB nursery, %d "
                           "repetitions",
                           n, work, nurseries_kib[nk], o->reps);
            for (int r = -1; r < o->reps; r++) {
                for (int v = 0; v < A_N; v++) {
                    int m = (v + (r & 1)) % A_N; /* alternate the order */
                    tk_arena_reset(a);
                    collections = 0;
                    uint64_t t0 = bench_now_ns();
                    uint64_t sum = m == A_GUARD     ? mutator_guard(a, n, work)
                                   : m == A_CHECKED ? mutator_checked(a, n, work)
                                                    : mutator_nocheck(a, n, work);
                    uint64_t t1 = bench_now_ns();
                    /* the same cells with the same values, whatever the check */
                    uint64_t h = sum - (uint64_t)(uintptr_t)((struct cell *)a->top - 1)->cdr;
                    if (r < 0 && v == 0) want = h;
                    if (h != want) {
                        fprintf(stderr, "guard/arena: checksum of %s differs\n", arena_mech[m]);
                        exit(1);
                    }
                    colls[m] = collections;
                    if (r >= 0) bench_add(&fig[m], (double)(t1 - t0) / (double)n);
                }
            }
            for (int m = 0; m < A_N; m++) {
                if (colls[m] != colls[0]) {
                    fprintf(stderr, "guard/arena: %s collected %ld times, %s %ld\n", arena_mech[m],
                            colls[m], arena_mech[0], colls[0]);
                    exit(1);
                }
                char params[128], extra[256];
                snprintf(params, sizeof params,
                         "\"object_bytes\": 16, \"nursery_kib\": %zu, \"work\": %d",
                         nurseries_kib[nk], work);
                snprintf(
                    extra, sizeof extra,
                    "\"allocations\": %ld, \"collections\": %ld, \"clock\": \"CLOCK_MONOTONIC\"", n,
                    colls[m]);
                bench_emit_ex("guard/arena", arena_mech[m], params, "time", "ns", &fig[m], extra);
            }
            tk_arena_destroy(a);
        }
}

/* ---- guard/sandbox-kernel ---------------------------------------------- */

struct kernel_arg {
    uint32_t n;     /* elements */
    uint32_t bound; /* the memory's size, for the explicit checks */
    uint64_t result;
};

static sigjmp_buf oob_jb;

__attribute__((noinline, cold, noreturn)) static void oob(void)
{
    siglongjmp(oob_jb, 1);
}

/* The memory as a WebAssembly function sees it: base + 32-bit offset. */
#define LD_G(off) (*(uint32_t *)(mem + (uint32_t)(off)))
#define ST_G(off, v) (*(uint32_t *)(mem + (uint32_t)(off)) = (v))
#define CHK(off) (__builtin_expect((uint64_t)(uint32_t)(off) + 4 > bound, 0) ? oob() : (void)0)
#define LD_C(off) (CHK(off), *(uint32_t *)(mem + (uint32_t)(off)))
#define ST_C(off, v) (CHK(off), *(uint32_t *)(mem + (uint32_t)(off)) = (v))

/* Layout: matrices A, B and C of n x n uint32s at offsets 0, 4n^2, 8n^2,
 * then 4096 histogram counters.  Loops without data-dependent branches, so
 * the figure is the accesses' cost, not branch prediction; not vectorized
 * (a WebAssembly engine's code is scalar, and a check per access would
 * stop the compiler's vectorizer in one variant only). */
#define KERNEL(name, LD, ST)                                                                       \
    __attribute__((noinline, optimize("no-tree-vectorize"))) static void name(tk_sandbox *sb,      \
                                                                              void *argp)          \
    {                                                                                              \
        struct kernel_arg *ka = argp;                                                              \
        char *mem = tk_sandbox_base(sb);                                                           \
        uint64_t bound = ka->bound;                                                                \
        (void)bound;                                                                               \
        uint32_t n = ka->n, A = 0, B = 4 * n * n, C = 8 * n * n, H = 12 * n * n;                   \
        for (uint32_t i = 0; i < n; i++)                                                           \
            for (uint32_t j = 0; j < n; j++) {                                                     \
                uint32_t s = 0;                                                                    \
                for (uint32_t k = 0; k < n; k++)                                                   \
                    s += LD(A + 4 * (i * n + k)) * LD(B + 4 * (k * n + j));                        \
                ST(C + 4 * (i * n + j), s);                                                        \
            }                                                                                      \
        /* gather-scatter: a histogram of C's low bits */                                          \
        for (uint32_t i = 0; i < 4096; i++) ST(H + 4 * i, 0);                                      \
        for (uint32_t i = 0; i < n * n; i++) {                                                     \
            uint32_t b = H + 4 * (LD(C + 4 * i) & 4095);                                           \
            ST(b, LD(b) + 1);                                                                      \
        }                                                                                          \
        uint64_t sum = 0;                                                                          \
        for (uint32_t i = 0; i < n * n; i++) sum = sum * 31 + LD(C + 4 * i);                       \
        for (uint32_t i = 0; i < 4096; i++) sum += (uint64_t)LD(H + 4 * i) << 32;                  \
        ka->result = sum;                                                                          \
    }

KERNEL(kernel_guard, LD_G, ST_G)
KERNEL(kernel_checked, LD_C, ST_C)

static void fill_matrices(tk_sandbox *sb, uint32_t n, uint64_t seed)
{
    uint32_t *a = tk_sandbox_base(sb);
    for (uint32_t i = 0; i < 2 * n * n; i++) a[i] = (uint32_t)bench_rand(&seed) & 0xffff;
}

static void bench_kernel(const struct bench_opts *o)
{
    uint32_t n = o->quick ? 96 : 256;
    size_t bytes = ((size_t)n * n * 12 + 4096 * 4 + 65535) & ~(size_t)65535;
    tk_sandbox_config cfg = {.size = bytes, .path = TK_SANDBOX_MPROTECT};
    tk_sandbox *sb;
    int rc = tk_sandbox_create(&cfg, &sb);
    if (rc) die("tk_sandbox_create", rc);
    struct bench_fig fig[2];
    memset(fig, 0, sizeof fig);
    static const char *const mech[2] = {"guard-page", "explicit-check"};
    bench_progress("guard/sandbox-kernel: %ux%u uint32 matrix product and a histogram of it, %d "
                   "repetitions",
                   n, n, o->reps);
    if (sigsetjmp(oob_jb, 1)) {
        fprintf(stderr, "guard/sandbox-kernel: an explicit check failed\n");
        exit(1);
    }
    fill_matrices(sb, n, 42);
    uint64_t want = 0;
    for (int r = -1; r < o->reps; r++) {
        for (int v = 0; v < 2; v++) {
            int m = (v + (r & 1)) & 1;
            struct kernel_arg ka = {.n = n, .bound = (uint32_t)bytes};
            tk_sandbox_trap t;
            uint64_t t0 = bench_now_ns();
            rc = tk_sandbox_call(sb, m == 0 ? kernel_guard : kernel_checked, &ka, &t);
            uint64_t t1 = bench_now_ns();
            if (rc) die("the kernel went out of bounds", rc);
            if (r < 0 && v == 0) want = ka.result;
            if (ka.result != want) {
                fprintf(stderr, "guard/sandbox-kernel: %s's checksum differs\n", mech[m]);
                exit(1);
            }
            if (r >= 0) bench_add(&fig[m], (double)(t1 - t0));
        }
    }
    char params[96];
    snprintf(params, sizeof params, "\"kernel\": \"matmul+histogram\", \"n\": %u", n);
    for (int m = 0; m < 2; m++)
        bench_emit_ex("guard/sandbox-kernel", mech[m], params, "time", "ns", &fig[m],
                      "\"clock\": \"CLOCK_MONOTONIC\", \"path\": \"mprotect\"");
    tk_sandbox_destroy(sb);
}

/* ---- guard/sandbox-create ---------------------------------------------- */

struct worker {
    pthread_t t;
    enum tk_sandbox_path path;
    int op; /* 0 create, 1 reset */
    long ops;
    atomic_int *go;
    int err;
};

static size_t page;

static void touch(tk_sandbox *sb, size_t from, size_t to)
{
    char *b = tk_sandbox_base(sb);
    for (size_t off = from; off < to; off += page) b[off] = 1;
}

static void *worker_run(void *p)
{
    struct worker *w = p;
    tk_sandbox_config cfg = {.size = 64 * KIB, .path = w->path};
    while (!atomic_load(w->go)) {
    }
    if (w->op == 0) {
        for (long i = 0; i < w->ops; i++) {
            tk_sandbox *sb;
            int rc = tk_sandbox_create(&cfg, &sb);
            if (rc) {
                w->err = rc;
                return NULL;
            }
            char *b = tk_sandbox_base(sb);
            b[0] = 1;
            b[64 * KIB - 1] = 1;
            tk_sandbox_destroy(sb);
        }
    } else {
        tk_sandbox *sb;
        int rc = tk_sandbox_create(&cfg, &sb);
        if (rc) {
            w->err = rc;
            return NULL;
        }
        for (long i = 0; i < w->ops; i++) {
            touch(sb, 0, 64 * KIB);
            if ((rc = tk_sandbox_grow(sb, 128 * KIB)) != 0) break;
            touch(sb, 64 * KIB, 128 * KIB);
            if ((rc = tk_sandbox_reset(sb)) != 0) break;
        }
        w->err = rc;
        tk_sandbox_destroy(sb);
    }
    return NULL;
}

/* ops per second of `threads` threads doing ops each */
static double run_create(enum tk_sandbox_path path, int op, int threads, long ops, int *err)
{
    struct worker w[2];
    atomic_int go = 0;
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){.path = path, .op = op, .ops = ops, .go = &go};
        if (pthread_create(&w[i].t, NULL, worker_run, &w[i]) != 0) {
            fprintf(stderr, "guard: pthread_create failed\n");
            exit(1);
        }
    }
    uint64_t t0 = bench_now_ns();
    atomic_store(&go, 1);
    for (int i = 0; i < threads; i++) pthread_join(w[i].t, NULL);
    uint64_t t1 = bench_now_ns();
    *err = 0;
    for (int i = 0; i < threads; i++)
        if (w[i].err) *err = w[i].err;
    return (double)threads * (double)ops / ((double)(t1 - t0) / 1e9);
}

static void bench_create(const struct bench_opts *o)
{
    static const enum tk_sandbox_path paths[] = {TK_SANDBOX_MPROTECT, TK_SANDBOX_MADV_GUARD,
                                                 TK_SANDBOX_UFFD};
    enum { NP = 3 };
    static const char *const ops_name[2] = {"create", "reset"};
    int ncpus = bench_ncpus();
    const char *reason[NP] = {0};
    char reason_buf[NP][256];
    for (int p = 0; p < NP; p++) {
        tk_sandbox_config cfg = {.size = 64 * KIB, .path = paths[p]};
        tk_sandbox *sb;
        int rc = tk_sandbox_create(&cfg, &sb);
        if (rc) {
            snprintf(reason_buf[p], sizeof reason_buf[p], "%s", tk_last_error());
            reason[p] = reason_buf[p];
        } else {
            tk_sandbox_destroy(sb);
        }
    }
    for (int op = 0; op < 2; op++) {
        long ops = o->quick ? 500 : (op == 0 ? 10000 : 2500); /* a reset costs 4x a create */
        for (int threads = 1; threads <= 2; threads++) {
            struct bench_fig fig[NP];
            memset(fig, 0, sizeof fig);
            bench_progress("guard/sandbox-create: op %s, %d thread%s, %ld each, %d repetitions",
                           ops_name[op], threads, threads > 1 ? "s" : "", ops, o->reps);
            bool too_many = threads > ncpus;
            for (int r = -1; r < o->reps && !too_many; r++) {
                for (int v = 0; v < NP; v++) {
                    int p = (v + r + 1) % NP;
                    if (reason[p]) continue;
                    int err;
                    double rate = run_create(paths[p], op, threads, ops, &err);
                    if (err) die("sandbox create/reset", err);
                    if (r >= 0) bench_add(&fig[p], rate);
                }
            }
            char params[96];
            snprintf(params, sizeof params, "\"threads\": %d, \"op\": \"%s\"", threads,
                     ops_name[op]);
            for (int p = 0; p < NP; p++) {
                const char *name = tk_sandbox_path_name(paths[p]);
                if (too_many)
                    bench_emit_null("guard/sandbox-create", name, params, "ops_per_s", "ops/s",
                                    "more threads than CPUs");
                else if (reason[p])
                    bench_emit_null("guard/sandbox-create", name, params, "ops_per_s", "ops/s",
                                    reason[p]);
                else
                    bench_emit_ex("guard/sandbox-create", name, params, "ops_per_s", "ops/s",
                                  &fig[p],
                                  op == 0 ? "\"size_kib\": 64, \"reservation_gib\": 6"
                                          : "\"size_kib\": 64, \"grown_kib\": 128");
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    page = (size_t)sysconf(_SC_PAGESIZE);
    bench_arena(&o);
    bench_kernel(&o);
    bench_create(&o);
    return 0;
}
