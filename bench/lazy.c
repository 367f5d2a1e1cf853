/* bench/lazy.c - memory that materialises on first touch (trapkit/lazy.h,
 * Thekkath & Levy 4.2) beside the explicit check a program would otherwise
 * make before each access.
 *
 *   lazy/materialise   ns per page brought into being.
 *     structure "array": a fresh lazily computed array of NP pages read
 *     once, a word a page, in order; the callback writes 8 words of the
 *     page (the rest is zero).  trap: the array of trapkit/lazy.h on each
 *     backend (params.backend: uffd-missing, posix, uffd-sigbus,
 *     uffd-thread).  explicit-check: fresh anonymous memory and a byte of
 *     flag per page, tested before each read; a clear flag runs the same
 *     callback into the page in place.
 *     structure "stack": NP pages of 8-byte pushes onto a stack trimmed
 *     back to nothing before each repetition (untimed).  trap: the lazy
 *     stack (params.backend: posix, uffd-sigbus, uffd-thread); no bound is
 *     tested, the guard page's fault grows it.  explicit-check: a
 *     reservation of inaccessible pages, each push compares the stack
 *     pointer with the limit and, at it, opens the next page with mprotect.
 *     Both include the kernel's own first-touch fault of each page (a zero
 *     page), as any fresh memory does.
 *   lazy/future-read   ns per read of a cell (a future).
 *     state "full": 8-byte reads of 4,096 full cells, round and round.
 *     trap: plain loads of the cells (their pages open: nothing traps).
 *     explicit-check: an acquire load of the cell's state, compared with
 *     FULL, before each load of its value.
 *     state "full-beside-empty" (trap, posix only): the same reads, of full
 *     64-byte cells that share each hardware page with an empty one, so
 *     each load faults and trapkit's sub-page emulation completes it.
 *     state "empty": a consumer reads an empty cell; a producer thread waits
 *     until the consumer is blocked on it (tk_lazy_cell_waiting), then
 *     fills it; ns per read, from the read to its return (a fault, a futex
 *     wait, the producer's tk_lazy_cell_put, a wake-up).  explicit-check:
 *     the same hand-off with the state word tested and a futex wait on it,
 *     the producer storing the value and waking.
 *
 * Each figure is the median of the repetitions (after a warm-up), the trap
 * and explicit variants run one after the other in every repetition
 * (interleaved A B A B); every read is checked against the value written.
 * Times from CLOCK_MONOTONIC around the whole loop.  The producer of the
 * "empty" figures spins while it waits (one busy thread besides the blocked
 * consumer: two CPUs are enough).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <trapkit/lazy.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"

static size_t ps;

static void fail(const char *what)
{
    fprintf(stderr, "lazy: %s: %s\n", what, tk_last_error());
    exit(1);
}

/* ---- lazy/materialise: the array ------------------------------------------- */

static int fill_page(void *page, size_t index, void *arg)
{
    (void)arg;
    uint64_t *p = page;
    for (int w = 0; w < 8; w++) p[w] = index * 8 + (uint64_t)w + 1;
    return 0;
}

static void check_sum(uint64_t sum, size_t np)
{
    uint64_t want = 0;
    for (size_t i = 0; i < np; i++) want += i * 8 + 1;
    if (sum != want) {
        fprintf(stderr, "lazy: wrong checksum %llu, expected %llu\n", (unsigned long long)sum,
                (unsigned long long)want);
        exit(1);
    }
}

/* ns per page of a trapkit lazy array (NULL: created fine) or a reason. */
static double array_trap(enum tk_lazy_backend b, enum tk_mech m, size_t np, const char **reason)
{
    tk_lazy_array *a;
    tk_lazy_array_config cfg = {.len = np * ps, .fill = fill_page, .backend = b, .mech = m};
    if (tk_lazy_array_create(&cfg, &a)) {
        *reason = tk_last_error();
        return 0;
    }
    const volatile uint64_t *base = tk_lazy_array_base(a);
    uint64_t sum = 0, t0 = bench_now_ns();
    for (size_t i = 0; i < np; i++) sum += base[i * ps / 8];
    uint64_t t1 = bench_now_ns();
    check_sum(sum, np);
    tk_lazy_array_destroy(a);
    return (double)(t1 - t0) / (double)np;
}

static double array_explicit(size_t np)
{
    unsigned char *mem = mmap(NULL, np * ps, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    unsigned char *flag = calloc(np, 1);
    if (mem == MAP_FAILED || !flag) {
        fprintf(stderr, "lazy: out of memory\n");
        exit(1);
    }
    uint64_t sum = 0, t0 = bench_now_ns();
    for (size_t i = 0; i < np; i++) {
        unsigned char *page = mem + i * ps;
        if (!((volatile unsigned char *)flag)[i]) {
            fill_page(page, i, NULL);
            flag[i] = 1;
        }
        sum += *(volatile uint64_t *)page;
    }
    uint64_t t1 = bench_now_ns();
    check_sum(sum, np);
    munmap(mem, np * ps);
    free(flag);
    return (double)(t1 - t0) / (double)np;
}

/* ---- lazy/materialise: the stack ------------------------------------------- */

static double stack_trap(tk_lazy_stack *s, size_t np)
{
    if (tk_lazy_stack_trim(s, 0)) fail("tk_lazy_stack_trim");
    uint64_t *sp = tk_lazy_stack_base(s);
    size_t n = np * ps / 8;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) *(volatile uint64_t *)sp++ = i;
    uint64_t t1 = bench_now_ns();
    if (tk_lazy_stack_pages(s) != np || sp[-1] != n - 1) {
        fprintf(stderr, "lazy: the stack holds %zu pages, expected %zu\n", tk_lazy_stack_pages(s),
                np);
        exit(1);
    }
    return (double)(t1 - t0) / (double)np;
}

static double stack_explicit(size_t np)
{
    size_t max = (np + 1) * ps;
    uint64_t *res = mmap(NULL, max, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED) {
        fprintf(stderr, "lazy: out of memory\n");
        exit(1);
    }
    uint64_t *sp = res, *limit = res;
    size_t n = np * ps / 8;
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (sp == limit) {
            if (mprotect(limit, ps, PROT_READ | PROT_WRITE)) {
                perror("lazy: mprotect");
                exit(1);
            }
            limit += ps / 8;
        }
        *(volatile uint64_t *)sp++ = i;
    }
    uint64_t t1 = bench_now_ns();
    if (sp[-1] != n - 1) exit(1);
    munmap(res, max);
    return (double)(t1 - t0) / (double)np;
}

/* ---- lazy/future-read -------------------------------------------------------- */

enum { NFULL = 4096 };

static double full_trap(tk_lazy_cells *c, size_t stride, long rounds)
{
    const unsigned char *base = tk_lazy_cell_addr(c, 0);
    size_t size = tk_lazy_cells_cell_size(c);
    uint64_t sum = 0, t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < NFULL; i += stride)
            sum += *(volatile const uint64_t *)(base + i * size);
    uint64_t t1 = bench_now_ns();
    uint64_t want = 0;
    for (size_t i = 0; i < NFULL; i += stride) want += i + 1;
    if (sum != want * (uint64_t)rounds) {
        fprintf(stderr, "lazy: wrong values read from cells\n");
        exit(1);
    }
    return (double)(t1 - t0) / (double)(rounds * (long)(NFULL / stride));
}

/* The explicit representation: a state word and a value per cell. */
struct xcell {
    atomic_int state; /* 0 empty, 2 full */
    atomic_int waiting;
    uint64_t value;
};

static struct xcell *xcells;

static void xwait(atomic_int *w, int v)
{
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void xwake(atomic_int *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0);
}

static inline uint64_t xread(struct xcell *x)
{
    if (atomic_load_explicit(&x->state, memory_order_acquire) != 2) {
        atomic_fetch_add(&x->waiting, 1);
        int s;
        while ((s = atomic_load_explicit(&x->state, memory_order_acquire)) != 2)
            xwait(&x->state, s);
        atomic_fetch_sub(&x->waiting, 1);
    }
    return x->value;
}

static double full_explicit(long rounds)
{
    uint64_t sum = 0, t0 = bench_now_ns();
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < NFULL; i++) sum += xread(&xcells[i]);
    uint64_t t1 = bench_now_ns();
    uint64_t want = 0;
    for (size_t i = 0; i < NFULL; i++) want += i + 1;
    if (sum != want * (uint64_t)rounds) exit(1);
    return (double)(t1 - t0) / (double)(rounds * NFULL);
}

/* The "empty" hand-off. */
struct handoff {
    tk_lazy_cells *c; /* NULL: the explicit cells */
    size_t n;
    atomic_bool go;
};

static void *producer(void *arg)
{
    struct handoff *h = arg;
    while (!atomic_load(&h->go)) {
    }
    for (size_t i = 0; i < h->n; i++) {
        uint64_t v = i * 3 + 1;
        if (h->c) {
            while (tk_lazy_cell_waiting(h->c, i) == 0) {
            }
            if (tk_lazy_cell_put(h->c, i, &v, sizeof v)) fail("tk_lazy_cell_put");
        } else {
            struct xcell *x = &xcells[i];
            while (atomic_load(&x->waiting) == 0) {
            }
            x->value = v;
            atomic_store_explicit(&x->state, 2, memory_order_release);
            xwake(&x->state);
        }
    }
    return NULL;
}

static double empty_run(tk_lazy_cells *c, size_t n)
{
    struct handoff h = {.c = c, .n = n};
    if (!c) memset(xcells, 0, n * sizeof *xcells);
    pthread_t t;
    if (pthread_create(&t, NULL, producer, &h)) exit(1);
    atomic_store(&h.go, true);
    uint64_t sum = 0, t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++)
        sum += c ? *(volatile const uint64_t *)tk_lazy_cell_addr(c, i) : xread(&xcells[i]);
    uint64_t t1 = bench_now_ns();
    pthread_join(t, NULL);
    if (sum != 3 * (uint64_t)n * (n - 1) / 2 + n) {
        fprintf(stderr, "lazy: wrong values read from cells filled by the producer\n");
        exit(1);
    }
    return (double)(t1 - t0) / (double)n;
}

static double empty_trap(enum tk_mech m, size_t n, const char **reason)
{
    tk_lazy_cells *c;
    tk_lazy_cells_config cfg = {.ncells = n, .mech = m};
    if (tk_lazy_cells_create(&cfg, &c)) {
        *reason = tk_last_error();
        return 0;
    }
    double v = empty_run(c, n);
    tk_lazy_cells_destroy(c);
    return v;
}

/* ---- the run ----------------------------------------------------------------- */

struct variant {
    const char *exp, *mech, *params;
    struct bench_fig fig;
    char reason[300];
};

static void note(struct variant *v, double value, const char *reason, int rep)
{
    if (reason) {
        if (!v->reason[0]) snprintf(v->reason, sizeof v->reason, "%s", reason);
        return;
    }
    if (rep >= 0) bench_add(&v->fig, value);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t np = o.quick ? 128 : 2048;
    long rounds = o.quick ? 20 : 400;
    size_t nempty = o.quick ? 200 : 2000;

    static const struct {
        const char *name;
        enum tk_lazy_backend b;
        enum tk_mech m;
    } arrays[] = {{"uffd-missing", TK_LAZY_UFFD_MISSING, TK_MECH_AUTO},
                  {"posix", TK_LAZY_REGION, TK_MECH_POSIX},
                  {"uffd-sigbus", TK_LAZY_REGION, TK_MECH_UFFD_SIGBUS},
                  {"uffd-thread", TK_LAZY_REGION, TK_MECH_UFFD_THREAD}};
    static const struct {
        const char *name;
        enum tk_mech m;
    } mechs[] = {{"posix", TK_MECH_POSIX},
                 {"uffd-sigbus", TK_MECH_UFFD_SIGBUS},
                 {"uffd-thread", TK_MECH_UFFD_THREAD}};
    enum { NA = 4, NM = 3 };

    char params[64][128];
    int np_ = 0;
    struct variant v_arr[NA], v_arr_x, v_stk[NM], v_stk_x, v_full, v_full_x, v_mixed, v_mixed_x,
        v_empty[NM], v_empty_x;
    memset(v_arr, 0, sizeof v_arr);
    memset(v_stk, 0, sizeof v_stk);
    memset(v_empty, 0, sizeof v_empty);
    memset(&v_arr_x, 0, sizeof v_arr_x);
    memset(&v_stk_x, 0, sizeof v_stk_x);
    memset(&v_full, 0, sizeof v_full);
    memset(&v_full_x, 0, sizeof v_full_x);
    memset(&v_mixed, 0, sizeof v_mixed);
    memset(&v_mixed_x, 0, sizeof v_mixed_x);
    memset(&v_empty_x, 0, sizeof v_empty_x);
    for (int i = 0; i < NA; i++) {
        snprintf(params[np_], sizeof params[0], "\"structure\": \"array\", \"backend\": \"%s\"",
                 arrays[i].name);
        v_arr[i] = (struct variant){"lazy/materialise", "trap", params[np_++], {{0}, 0}, ""};
    }
    v_arr_x = (struct variant){
        "lazy/materialise", "explicit-check", "\"structure\": \"array\"", {{0}, 0}, ""};
    for (int i = 0; i < NM; i++) {
        snprintf(params[np_], sizeof params[0], "\"structure\": \"stack\", \"backend\": \"%s\"",
                 mechs[i].name);
        v_stk[i] = (struct variant){"lazy/materialise", "trap", params[np_++], {{0}, 0}, ""};
        snprintf(params[np_], sizeof params[0], "\"state\": \"empty\", \"backend\": \"%s\"",
                 mechs[i].name);
        v_empty[i] = (struct variant){"lazy/future-read", "trap", params[np_++], {{0}, 0}, ""};
    }
    v_stk_x = (struct variant){
        "lazy/materialise", "explicit-check", "\"structure\": \"stack\"", {{0}, 0}, ""};
    v_full = (struct variant){"lazy/future-read", "trap", "\"state\": \"full\"", {{0}, 0}, ""};
    v_full_x =
        (struct variant){"lazy/future-read", "explicit-check", "\"state\": \"full\"", {{0}, 0}, ""};
    v_mixed = (struct variant){"lazy/future-read",
                               "trap",
                               "\"state\": \"full-beside-empty\", \"backend\": \"posix\"",
                               {{0}, 0},
                               ""};
    v_mixed_x = (struct variant){
        "lazy/future-read", "explicit-check", "\"state\": \"full-beside-empty\"", {{0}, 0}, ""};
    v_empty_x = (struct variant){
        "lazy/future-read", "explicit-check", "\"state\": \"empty\"", {{0}, 0}, ""};

    /* the stacks, kept across repetitions (trimmed before each) */
    tk_lazy_stack *stacks[NM] = {NULL};
    for (int i = 0; i < NM; i++) {
        tk_lazy_stack_config sc = {.max_size = (np + 16) * ps, .mech = mechs[i].m};
        if (tk_lazy_stack_create(&sc, &stacks[i]))
            snprintf(v_stk[i].reason, sizeof v_stk[i].reason, "%s", tk_last_error());
    }
    /* full cells: 4,096 of them, all full (64-byte cells: whole pages full) */
    tk_lazy_cells *full = NULL, *mixed = NULL;
    tk_lazy_cells_config fc = {.ncells = NFULL};
    if (tk_lazy_cells_create(&fc, &full)) fail("tk_lazy_cells_create");
    for (size_t i = 0; i < NFULL; i++) {
        uint64_t v = i + 1;
        if (tk_lazy_cell_put(full, i, &v, sizeof v)) fail("tk_lazy_cell_put");
    }
    /* every other 64-byte cell full: each hardware page keeps empty ones */
    tk_lazy_cells_config mc = {.ncells = NFULL, .cell_size = 64, .mech = TK_MECH_POSIX};
    if (tk_lazy_cells_create(&mc, &mixed)) {
        snprintf(v_mixed.reason, sizeof v_mixed.reason, "%s", tk_last_error());
    } else {
        for (size_t i = 0; i < NFULL; i += 2) {
            uint64_t v = i + 1;
            if (tk_lazy_cell_put(mixed, i, &v, sizeof v)) fail("tk_lazy_cell_put");
        }
    }
    xcells = calloc(NFULL > nempty ? NFULL : nempty, sizeof *xcells);
    if (!xcells) exit(1);

    bench_progress("lazy: materialising %zu pages (array, stack) and reading futures full and "
                   "empty, trap beside explicit check (%d repetitions)",
                   np, o.reps);
    const char *why;
    for (int r = -1; r < o.reps; r++) { /* r = -1: warm-up */
        for (int i = 0; i < NA; i++) {
            why = NULL;
            double t = array_trap(arrays[i].b, arrays[i].m, np, &why);
            note(&v_arr[i], t, why, r);
            note(&v_arr_x, array_explicit(np), NULL, r);
        }
        for (int i = 0; i < NM; i++) {
            if (stacks[i]) note(&v_stk[i], stack_trap(stacks[i], np), NULL, r);
            note(&v_stk_x, stack_explicit(np), NULL, r);
        }
        for (size_t i = 0; i < NFULL; i++) {
            xcells[i].state = 2;
            xcells[i].waiting = 0;
            xcells[i].value = i + 1;
        }
        note(&v_full, full_trap(full, 1, rounds), NULL, r);
        note(&v_full_x, full_explicit(rounds), NULL, r);
        if (mixed) {
            note(&v_mixed, full_trap(mixed, 2, rounds / 20 + 1), NULL, r);
            note(&v_mixed_x, full_explicit(rounds / 20 + 1), NULL, r);
        }
        for (int i = 0; i < NM; i++) {
            why = NULL;
            double t = empty_trap(mechs[i].m, nempty, &why);
            note(&v_empty[i], t, why, r);
            note(&v_empty_x, empty_run(NULL, nempty), NULL, r);
        }
        if (r >= 0) bench_progress("  repetition %d/%d done", r + 1, o.reps);
    }

    struct variant *all[] = {&v_arr[0],   &v_arr[1], &v_arr[2],  &v_arr[3],   &v_arr_x,
                             &v_stk[0],   &v_stk[1], &v_stk[2],  &v_stk_x,    &v_full,
                             &v_full_x,   &v_mixed,  &v_mixed_x, &v_empty[0], &v_empty[1],
                             &v_empty[2], &v_empty_x};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        struct variant *v = all[i];
        if (v->fig.n == 0)
            bench_emit_null(v->exp, v->mech, v->params, "time", "ns",
                            v->reason[0] ? v->reason : "not measured");
        else
            bench_emit(v->exp, v->mech, v->params, "time", "ns", &v->fig);
    }
    for (int i = 0; i < NM; i++)
        if (stacks[i]) tk_lazy_stack_destroy(stacks[i]);
    if (full) tk_lazy_cells_destroy(full);
    if (mixed) tk_lazy_cells_destroy(mixed);
    free(xcells);
    return 0;
}
