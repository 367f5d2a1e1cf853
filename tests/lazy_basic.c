/* tests/lazy_basic.c BACKEND - memory that materialises on first touch
 * (trapkit/lazy.h), on one backend: uffd-missing (the array's own
 * userfaultfd; the stack and the cells then take trapkit's choice), posix,
 * uffd-sigbus or uffd-thread.
 *
 *  - a lazily computed array read by 4 threads at once, from different
 *    ends: every checksum right, every page computed once;
 *  - computed pages dropped with MADV_DONTNEED (whole, in part, several
 *    read at once): computed again on uffd-missing, kept on a region;
 *  - a callback that fails: the reader blocks (never reads wrong data), the
 *    error function is told, tk_lazy_array_retry() computes the page and
 *    wakes the reader; tk_lazy_array_fill() and _retry() return the
 *    error themselves (with or without an error function); without an
 *    error function a waiting reader's page aborts the process with a
 *    message;
 *  - a stack grown past 300 pages by pushes and popped back, trimmed and
 *    grown again; two threads growing one stack at once; children of
 *    fork() made while another thread grows and trims a stack grow it
 *    further (never wait for the parent's thread, new pages read zeros);
 *  - a callback that faults on another structure (it grows a lazy stack)
 *    on the array's helper thread;
 *  - cells filled by 2 producer threads while 4 consumers read them with
 *    plain loads: every value right, nobody left waiting; full cells of a
 *    page that still has empty ones read right; four readers blocked on
 *    one empty cell all get its value; take empties and put waits while
 *    full;
 *  - bad configurations refused with -EINVAL and a message;
 *  - faults that are not the structures' (elsewhere, above the stack's
 *    guard, a byte past a full stack's reservation, a store to a cell, an
 *    array page not computed in a child of fork(), which has no thread to
 *    compute it, or one the program dropped before the fork, a load of a
 *    cell empty at the fork in a child, where put and take are refused,
 *    an AVX load of a 64-byte cell, which trapkit does not emulate, a jump
 *    into a stack, an array or a full cell) kill a forked child with
 *    SIGSEGV;
 *  - every structure destroyed while idle. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <trapkit/lazy.h>
#include <unistd.h>

#include "testutil.h"

static enum tk_lazy_backend backend;
static enum tk_mech mech; /* of the array with TK_LAZY_REGION; the others' */
static size_t PS;

/* ---- the array ------------------------------------------------------------ */

static uint64_t word_of(size_t page, size_t w)
{
    return page * 1000003u + w * 7u + 1;
}

static atomic_int fills; /* callbacks run */

/* arg: the page size, if not the hardware page's */
static int fill_ok(void *page, size_t index, void *arg)
{
    size_t ps = arg ? *(const size_t *)arg : PS;
    atomic_fetch_add(&fills, 1);
    uint64_t *p = page;
    for (size_t w = 0; w < ps / 8; w++) p[w] = word_of(index, w);
    return 0;
}

enum { APAGES = 256, READERS = 4 };
static tk_lazy_array *arr;

static void *array_reader(void *arg)
{
    long t = (long)arg;
    const uint64_t *base = tk_lazy_array_base(arr);
    uint64_t sum = 0, want = 0;
    for (size_t k = 0; k < APAGES; k++) {
        size_t i = t & 1 ? APAGES - 1 - k : (k + (size_t)t * 37) % APAGES;
        for (size_t w = 0; w < PS / 8; w += 61) {
            sum += base[i * PS / 8 + w] * (w + 1);
            want += word_of(i, w) * (w + 1);
        }
    }
    CHECK(sum == want);
    return NULL;
}

static tk_lazy_array_config array_cfg(size_t len, tk_lazy_fill_fn fill, void *arg,
                                      tk_lazy_error_fn on_error)
{
    tk_lazy_array_config c = {
        .len = len, .fill = fill, .arg = arg, .on_error = on_error, .backend = backend};
    if (backend == TK_LAZY_REGION) c.mech = mech;
    return c;
}

static void test_array(void)
{
    tk_lazy_array_config cfg = array_cfg(APAGES * PS, fill_ok, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&cfg, &arr));
    CHECK(tk_lazy_array_len(arr) == APAGES * PS && tk_lazy_array_page_size(arr) == PS);
    printf("array backend %s\n", tk_lazy_array_backend(arr));
    pthread_t th[READERS];
    for (long t = 0; t < READERS; t++)
        CHECK(pthread_create(&th[t], NULL, array_reader, (void *)t) == 0);
    for (int t = 0; t < READERS; t++) pthread_join(th[t], NULL);
    CHECK(tk_lazy_array_computed(arr) == APAGES);
    CHECK(atomic_load(&fills) == APAGES);
    CHECK(tk_lazy_array_failed(arr) == 0);
    /* explicit fill of pages computed already: nothing runs again */
    CHECK_OK(tk_lazy_array_fill(arr, 0, APAGES));
    CHECK(atomic_load(&fills) == APAGES);
    /* the array is ordinary memory once computed: writable */
    uint64_t *b = tk_lazy_array_base(arr);
    b[3] = 42;
    CHECK(b[3] == 42);
    CHECK_OK(tk_lazy_array_destroy(arr));

    /* larger logical pages: 4 hardware pages computed at once */
    tk_lazy_array *big;
    atomic_store(&fills, 0);
    size_t big_ps = 4 * PS;
    cfg = array_cfg(16 * big_ps, fill_ok, &big_ps, NULL);
    cfg.page_size = big_ps;
    CHECK_OK(tk_lazy_array_create(&cfg, &big));
    const uint64_t *bb = tk_lazy_array_base(big);
    for (size_t i = 0; i < 16; i++)
        CHECK(bb[i * big_ps / 8 + big_ps / 8 - 1] == word_of(i, big_ps / 8 - 1));
    CHECK(atomic_load(&fills) == 16);
    CHECK_OK(tk_lazy_array_destroy(big));

    /* destroyed while idle, never touched */
    cfg = array_cfg(8 * PS, fill_ok, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&cfg, &big));
    CHECK_OK(tk_lazy_array_destroy(big));
}

/* ---- pages the program drops ---------------------------------------------- */

static const uint64_t *dropped_base;
static size_t dropped_ps;

static void *read_dropped(void *arg)
{
    size_t i = (size_t)arg;
    CHECK(dropped_base[i * dropped_ps / 8 + 5] == word_of(i, 5));
    return NULL;
}

/* A computed page dropped with MADV_DONTNEED: on uffd-missing it is
 * missing again and computed again on its next touch (read or write, by
 * several threads at once, a logical page dropped in part); a region's
 * memory is shared memory, which keeps the contents. */
static void test_dropped(void)
{
#ifdef __SANITIZE_THREAD__
    /* uffd-thread: the service thread handles the UFFD_EVENT_REMOVE of a
     * MADV_DONTNEED after madvise returns, racing with tk_region_destroy
     * (src/vm: tk__pages_removed against release_memory) */
    if (backend == TK_LAZY_REGION && mech == TK_MECH_UFFD_THREAD) return;
#endif
    tk_lazy_array *a;
    atomic_store(&fills, 0);
    tk_lazy_array_config cfg = array_cfg(8 * PS, fill_ok, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&cfg, &a));
    uint64_t *b = tk_lazy_array_base(a);
    bool again = backend == TK_LAZY_UFFD_MISSING;
    CHECK(((volatile uint64_t *)b)[2 * PS / 8 + 1] == word_of(2, 1));
    CHECK(atomic_load(&fills) == 1);
    CHECK(madvise(b + 2 * PS / 8, PS, MADV_DONTNEED) == 0);
    CHECK(((volatile uint64_t *)b)[2 * PS / 8 + 1] == word_of(2, 1));
    CHECK(atomic_load(&fills) == (again ? 2 : 1));
    CHECK(tk_lazy_array_computed(a) == (again ? 2u : 1u));
    /* dropped again, then written first: computed, then the store lands */
    CHECK(madvise(b + 2 * PS / 8, PS, MADV_DONTNEED) == 0);
    ((volatile uint64_t *)b)[2 * PS / 8 + 3] = 7;
    CHECK(b[2 * PS / 8 + 3] == 7 && b[2 * PS / 8 + 4] == word_of(2, 4));
    CHECK(atomic_load(&fills) == (again ? 3 : 1));
    /* several pages dropped, read by 4 threads at once: each page once */
    CHECK_OK(tk_lazy_array_fill(a, 4, 4));
    int before = atomic_load(&fills);
    CHECK(madvise(b + 4 * PS / 8, 4 * PS, MADV_DONTNEED) == 0);
    dropped_base = b;
    dropped_ps = PS;
    pthread_t th[READERS];
    for (long t = 0; t < READERS; t++)
        CHECK(pthread_create(&th[t], NULL, read_dropped, (void *)(size_t)(4 + t)) == 0);
    for (int t = 0; t < READERS; t++) pthread_join(th[t], NULL);
    for (size_t i = 4; i < 8; i++) read_dropped((void *)i);
    CHECK(atomic_load(&fills) == before + (again ? 4 : 0));
    CHECK(tk_lazy_array_failed(a) == 0);
    CHECK_OK(tk_lazy_array_destroy(a));

    /* a logical page of 4 hardware pages, one of them dropped */
    size_t big_ps = 4 * PS;
    atomic_store(&fills, 0);
    cfg = array_cfg(4 * big_ps, fill_ok, &big_ps, NULL);
    cfg.page_size = big_ps;
    CHECK_OK(tk_lazy_array_create(&cfg, &a));
    b = tk_lazy_array_base(a);
    CHECK_OK(tk_lazy_array_fill(a, 1, 1));
    CHECK(atomic_load(&fills) == 1);
    CHECK(madvise((char *)b + big_ps + 2 * PS, PS, MADV_DONTNEED) == 0);
    for (size_t w = 0; w < big_ps / 8; w += 97)
        CHECK(((volatile uint64_t *)b)[big_ps / 8 + w] == word_of(1, w));
    CHECK(((volatile uint64_t *)b)[big_ps / 8 + big_ps / 8 - 1] == word_of(1, big_ps / 8 - 1));
    CHECK(atomic_load(&fills) == (again ? 2 : 1));
    CHECK_OK(tk_lazy_array_destroy(a));
}

/* A child of fork() writes to an array page computed (read) just before the
 * fork: the page is there in the child (on uffd-missing the handler thread
 * marks a page computed just after placing it: the child used to find it
 * closed), and the store stays in the child (a region-backed array's memory
 * is a memfd the child used to share). */
static void test_array_fork_private(void)
{
    for (int round = 0; round < 16; round++) { /* (a page read just before the fork: racy) */
        tk_lazy_array *a;
        tk_lazy_array_config cfg = array_cfg(4 * PS, fill_ok, NULL, NULL);
        CHECK_OK(tk_lazy_array_create(&cfg, &a));
        volatile uint64_t *b = tk_lazy_array_base(a);
        CHECK(b[PS / 8 + 3] == word_of(1, 3));
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            b[PS / 8 + 3] = 12345;
            _exit(b[PS / 8 + 3] == 12345 && b[PS / 8 + 4] == word_of(1, 4) ? 0 : 7);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) printf("child: status 0x%x\n", st);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHECK(b[PS / 8 + 3] == word_of(1, 3));
        /* and the parent's own later store does not need the child */
        b[PS / 8 + 3] = 9;
        CHECK(b[PS / 8 + 3] == 9);
        CHECK_OK(tk_lazy_array_destroy(a));
    }
}

/* ---- errors of the callback ------------------------------------------------- */

static atomic_int fail_left; /* page 5 fails this many more times */
static atomic_int errors_told;
static char told[256];

static int fill_flaky(void *page, size_t index, void *arg)
{
    (void)arg;
    if (index == 5 && atomic_load(&fail_left) > 0) {
        atomic_fetch_sub(&fail_left, 1);
        return -EIO;
    }
    return fill_ok(page, index, NULL);
}

static void on_error(int err, size_t index, const char *msg, void *arg)
{
    (void)arg;
    CHECK(err == -EIO && index == 5);
    snprintf(told, sizeof told, "%s", msg);
    atomic_fetch_add(&errors_told, 1);
}

static atomic_uint_fast64_t got5;

static void *read5(void *arg)
{
    const uint64_t *b = arg;
    atomic_store(&got5, b[5 * PS / 8 + 9]); /* blocks until page 5 is computed */
    return NULL;
}

static void test_errors(void)
{
    tk_lazy_array *a;
    atomic_store(&fail_left, 1);
    tk_lazy_array_config cfg = array_cfg(8 * PS, fill_flaky, NULL, on_error);
    CHECK_OK(tk_lazy_array_create(&cfg, &a));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read5, tk_lazy_array_base(a)) == 0);
    while (atomic_load(&errors_told) == 0) sched_yield();
    CHECK(strstr(told, "page 5") != NULL);
    CHECK(tk_lazy_array_failed(a) == 1);
    for (int i = 0; i < 1000; i++) sched_yield();
    CHECK(atomic_load(&got5) == 0); /* still waiting: no wrong data */
    CHECK_OK(tk_lazy_array_retry(a));
    pthread_join(th, NULL);
    CHECK(atomic_load(&got5) == word_of(5, 9));
    CHECK(tk_lazy_array_failed(a) == 0);
    CHECK_OK(tk_lazy_array_destroy(a));

    /* explicit fill returns the error; a later retry recovers */
    atomic_store(&fail_left, 2);
    atomic_store(&errors_told, 0);
    CHECK_OK(tk_lazy_array_create(&cfg, &a));
    CHECK_ERR(tk_lazy_array_fill(a, 0, 8), -EIO);
    CHECK(strstr(tk_last_error(), "page 5") != NULL);
    CHECK(atomic_load(&errors_told) == 1);
    CHECK_ERR(tk_lazy_array_retry(a), -EIO);
    CHECK_OK(tk_lazy_array_retry(a));
    const uint64_t *b = tk_lazy_array_base(a);
    CHECK(b[5 * PS / 8] == word_of(5, 0) && b[7 * PS / 8 + 1] == word_of(7, 1));
    CHECK_OK(tk_lazy_array_destroy(a));

    /* no error function: fill and retry return the error and abort nothing */
    atomic_store(&fail_left, 2);
    tk_lazy_array_config c1 = array_cfg(8 * PS, fill_flaky, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&c1, &a));
    CHECK_ERR(tk_lazy_array_fill(a, 4, 2), -EIO);
    CHECK(tk_lazy_array_failed(a) == 1);
    CHECK_ERR(tk_lazy_array_retry(a), -EIO);
    CHECK_OK(tk_lazy_array_retry(a));
    CHECK(((const uint64_t *)tk_lazy_array_base(a))[5 * PS / 8 + 2] == word_of(5, 2));
    CHECK_OK(tk_lazy_array_destroy(a));

    /* no error function and a reader waiting: a message and abort() */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        atomic_store(&fail_left, 1);
        tk_lazy_array_config c2 = array_cfg(8 * PS, fill_flaky, NULL, NULL);
        if (tk_lazy_array_create(&c2, &a)) _exit(3);
        volatile uint64_t *p = tk_lazy_array_base(a);
        (void)p[5 * PS / 8];
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

/* ---- the stack ------------------------------------------------------------ */

static void test_stack(void)
{
    tk_lazy_stack *s;
    tk_lazy_stack_config cfg = {.max_size = 64u << 20, .mech = mech};
    CHECK_OK(tk_lazy_stack_create(&cfg, &s));
    printf("stack mechanism %s\n", tk_mech_name(tk_lazy_stack_mech(s)));
    CHECK(tk_lazy_stack_pages(s) == 0 && tk_lazy_stack_max(s) == 64u << 20);
    for (int round = 0; round < 2; round++) {
        uint64_t *sp = tk_lazy_stack_base(s);
        size_t n = 300 * PS / 8 + 17;
        for (size_t i = 0; i < n; i++) *sp++ = i * 3 + (uint64_t)round; /* push, unchecked */
        CHECK(tk_lazy_stack_pages(s) == 301);
        for (size_t i = n; i-- > 0;) CHECK(*--sp == i * 3 + (uint64_t)round); /* pop */
        CHECK_OK(tk_lazy_stack_trim(s, 10 * PS));
        CHECK(tk_lazy_stack_pages(s) == 10);
        CHECK(((uint64_t *)tk_lazy_stack_base(s))[5] == 15u + (uint64_t)round);
        CHECK_OK(tk_lazy_stack_trim(s, 0));
        CHECK(tk_lazy_stack_pages(s) == 0);
        /* pages given back read as zeros when touched again */
        CHECK(((volatile uint64_t *)tk_lazy_stack_base(s))[1] == 0);
        CHECK_OK(tk_lazy_stack_trim(s, 0));
    }
    CHECK_ERR(tk_lazy_stack_trim(s, (64u << 20) + 1), -EINVAL);
    CHECK_OK(tk_lazy_stack_destroy(s));
}

/* Two threads grow one stack at once, each touching a page only after the
 * one below it: the one that finds the guard being opened by the other
 * waits for it, never takes its page for one above the guard. */
static tk_lazy_stack *race_stack;
static atomic_int race_go;

static void *grower(void *arg)
{
    volatile char *b = tk_lazy_stack_base(race_stack);
    while (!atomic_load(&race_go)) sched_yield();
    for (size_t i = 0; i < 2000; i++) b[i * PS + (uintptr_t)arg] = 1;
    return NULL;
}

static void test_stack_race(void)
{
    for (int round = 0; round < 10; round++) {
        tk_lazy_stack_config cfg = {.max_size = 4096 * PS, .mech = mech};
        CHECK_OK(tk_lazy_stack_create(&cfg, &race_stack));
        atomic_store(&race_go, 0);
        pthread_t t[2];
        for (uintptr_t i = 0; i < 2; i++)
            CHECK(pthread_create(&t[i], NULL, grower, (void *)i) == 0);
        atomic_store(&race_go, 1);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        CHECK(tk_lazy_stack_pages(race_stack) == 2000);
        CHECK_OK(tk_lazy_stack_destroy(race_stack));
    }
}

/* fork() while another thread grows the stack and trims it back (the only
 * thread using it): the fork may land while that thread opens a guard page
 * or trims, which the child has no thread to finish.  Each child grows the
 * stack 8 pages further from where it finds it; every new page reads as
 * zeros.  (A child that waited for the parent's thread would never exit:
 * the alarm makes that a death by SIGALRM.) */
static tk_lazy_stack *fork_stack;
static atomic_int fork_stop;

static void *grow_and_trim(void *arg)
{
    (void)arg;
    volatile char *b = tk_lazy_stack_base(fork_stack);
    while (!atomic_load(&fork_stop)) {
        for (size_t i = 0; i < 64; i++) b[i * PS] = 1;
        CHECK_OK(tk_lazy_stack_trim(fork_stack, 0));
    }
    return NULL;
}

static void test_stack_fork(void)
{
    tk_lazy_stack_config cfg = {.max_size = 1024 * PS, .mech = mech};
    CHECK_OK(tk_lazy_stack_create(&cfg, &fork_stack));
    atomic_store(&fork_stop, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, grow_and_trim, NULL) == 0);
    fflush(NULL);
    for (int k = 0; k < 200; k++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(60);
            volatile char *b = tk_lazy_stack_base(fork_stack);
            size_t top = tk_lazy_stack_pages(fork_stack);
            if (top > 64) _exit(3);
            for (size_t i = 0; i + 1 < top; i++) /* (the last one's store may be under way) */
                if (b[i * PS] != 1) _exit(4);
            for (size_t i = top; i < top + 8; i++) {
                if (b[i * PS] != 0) _exit(5);
                b[i * PS] = 2;
            }
            _exit(tk_lazy_stack_pages(fork_stack) == top + 8 ? 0 : 6);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "fork %d: child status 0x%x\n", k, st);
            exit(1);
        }
    }
    atomic_store(&fork_stop, 1);
    pthread_join(t, NULL);
    CHECK_OK(tk_lazy_stack_destroy(fork_stack));
}

/* A callback that faults on another structure (it grows a lazy stack):
 * the array's helper thread takes the fault like any thread. */
static tk_lazy_stack *cb_stack;

static int fill_via_stack(void *page, size_t index, void *arg)
{
    (void)arg;
    uint64_t *st = (uint64_t *)((char *)tk_lazy_stack_base(cb_stack) + index * PS);
    *st = word_of(index, 3); /* page `index` of the stack is its guard: it grows */
    return fill_ok(page, index, NULL);
}

static void test_callback_faults(void)
{
    tk_lazy_stack_config sc = {.max_size = 64 * PS, .mech = mech};
    CHECK_OK(tk_lazy_stack_create(&sc, &cb_stack));
    tk_lazy_array *a;
    tk_lazy_array_config cfg = array_cfg(8 * PS, fill_via_stack, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&cfg, &a));
    const volatile uint64_t *b = tk_lazy_array_base(a);
    for (size_t i = 0; i < 8; i++) CHECK(b[i * PS / 8 + 3] == word_of(i, 3));
    CHECK(tk_lazy_stack_pages(cb_stack) == 8);
    CHECK(((uint64_t *)tk_lazy_stack_base(cb_stack))[7 * PS / 8] == word_of(7, 3));
    CHECK_OK(tk_lazy_array_destroy(a));
    CHECK_OK(tk_lazy_stack_destroy(cb_stack));
}

/* ---- the cells --------------------------------------------------------------- */

enum { NCELLS = 512, CONSUMERS = 4, PRODUCERS = 2 };
static tk_lazy_cells *cells;

static uint64_t cell_value(size_t i)
{
    return i * 0x9E3779B97F4A7C15ull + 5;
}

static void *consumer(void *arg)
{
    long t = (long)arg;
    for (size_t k = 0; k < NCELLS; k++) {
        size_t i = t & 1 ? NCELLS - 1 - k : (k * 7 + (size_t)t * 101) % NCELLS;
        volatile const uint64_t *p = tk_lazy_cell_addr(cells, i);
        CHECK(p[0] == cell_value(i)); /* a plain load: blocks while empty */
        CHECK(p[1] == ~cell_value(i));
    }
    return NULL;
}

static void *producer(void *arg)
{
    long t = (long)arg;
    uint64_t seed = 88172645463325252ull + (uint64_t)t;
    for (size_t k = (size_t)t; k < NCELLS; k += PRODUCERS) {
        size_t i = (k * 193) % NCELLS; /* 193 is coprime to 512: each cell once */
        uint64_t v[2] = {cell_value(i), ~cell_value(i)};
        CHECK_OK(tk_lazy_cell_put(cells, i, v, sizeof v));
        if (tk_test_xorshift(&seed) % 4 == 0) sched_yield();
    }
    return NULL;
}

static void test_cells(void)
{
    tk_lazy_cells_config cfg = {.ncells = NCELLS, .mech = mech};
    CHECK_OK(tk_lazy_cells_create(&cfg, &cells));
    size_t cs = tk_lazy_cells_cell_size(cells);
    printf("cells mechanism %s, %zu bytes a cell\n", tk_mech_name(tk_lazy_cells_mech(cells)), cs);
    CHECK(tk_lazy_cells_count(cells) == NCELLS);
    CHECK(tk_lazy_cell_addr(cells, NCELLS) == NULL);
    pthread_t c[CONSUMERS], p[PRODUCERS];
    for (long t = 0; t < CONSUMERS; t++)
        CHECK(pthread_create(&c[t], NULL, consumer, (void *)t) == 0);
    /* let some consumers block on empty cells first */
    for (int i = 0;
         i < 200 && tk_lazy_cell_waiting(cells, 0) + tk_lazy_cell_waiting(cells, NCELLS - 1) == 0;
         i++)
        usleep(1000);
    for (long t = 0; t < PRODUCERS; t++)
        CHECK(pthread_create(&p[t], NULL, producer, (void *)t) == 0);
    for (int t = 0; t < PRODUCERS; t++) pthread_join(p[t], NULL);
    for (int t = 0; t < CONSUMERS; t++) pthread_join(c[t], NULL);
    for (size_t i = 0; i < NCELLS; i++) {
        CHECK(tk_lazy_cell_waiting(cells, i) == 0);
        CHECK(tk_lazy_cell_full(cells, i) == 1);
    }
    /* take empties; the value comes out; put again */
    uint64_t out[2] = {0, 0};
    CHECK_OK(tk_lazy_cell_take(cells, 3, out, sizeof out));
    CHECK(out[0] == cell_value(3) && out[1] == ~cell_value(3));
    CHECK(tk_lazy_cell_full(cells, 3) == 0);
    uint64_t v = 77;
    CHECK_OK(tk_lazy_cell_put(cells, 3, &v, sizeof v));
    volatile const uint64_t *p3 = tk_lazy_cell_addr(cells, 3);
    CHECK(p3[0] == 77 && p3[1] == 0);
    CHECK_OK(tk_lazy_cells_destroy(cells));

    /* full cells beside empty ones on the same hardware page */
    cfg.ncells = 2 * PS / cs + 2;
    CHECK_OK(tk_lazy_cells_create(&cfg, &cells));
    for (size_t i = 0; i < cfg.ncells; i += 2) {
        uint64_t w = cell_value(i);
        CHECK_OK(tk_lazy_cell_put(cells, i, &w, sizeof w));
    }
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < cfg.ncells; i += 2) {
            volatile const uint64_t *q = tk_lazy_cell_addr(cells, i);
            CHECK(q[0] == cell_value(i));
            CHECK(tk_lazy_cell_full(cells, i + 1) == 0);
        }
    /* a reader of an empty cell, a put: the reader gets it */
    for (size_t i = 1; i < cfg.ncells; i += 2) {
        uint64_t w = cell_value(i);
        CHECK_OK(tk_lazy_cell_put(cells, i, &w, sizeof w));
    }
    for (size_t i = 0; i < cfg.ncells; i++)
        CHECK(*(volatile const uint64_t *)tk_lazy_cell_addr(cells, i) == cell_value(i));
    CHECK_OK(tk_lazy_cells_destroy(cells));
}

/* ---- four readers blocked on one empty cell ------------------------------------- */

static void *read_cell7(void *arg)
{
    const volatile uint64_t *p = tk_lazy_cell_addr(arg, 7);
    CHECK(p[0] == 0xFEEDu);
    return NULL;
}

static void *read_cell2(void *arg)
{
    const volatile uint64_t *p = tk_lazy_cell_addr(arg, 2);
    CHECK(p[0] == 0xFEEDu);
    return NULL;
}

static void test_same_cell(void)
{
    tk_lazy_cells *c;
    tk_lazy_cells_config cfg = {.ncells = 16, .mech = mech};
    CHECK_OK(tk_lazy_cells_create(&cfg, &c));
    pthread_t th[4];
    for (int t = 0; t < 4; t++) CHECK(pthread_create(&th[t], NULL, read_cell7, c) == 0);
    while (tk_lazy_cell_waiting(c, 7) < 4) sched_yield(); /* all four blocked in the fault */
    uint64_t v = 0xFEED;
    CHECK_OK(tk_lazy_cell_put(c, 7, &v, sizeof v));
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    CHECK(tk_lazy_cell_waiting(c, 7) == 0);
    CHECK_OK(tk_lazy_cells_destroy(c));
}

/* ---- a reader that gives up: its own SIGALRM handler leaves the load by
 * siglongjmp; the cell counts it until its next put, and then none ---------- */

static sigjmp_buf timeout_jmp;

static void on_timeout(int sig)
{
    (void)sig;
    siglongjmp(timeout_jmp, 1);
}

static void test_timeout(void)
{
    tk_lazy_cells *c;
    tk_lazy_cells_config cfg = {.ncells = 4, .mech = mech};
    CHECK_OK(tk_lazy_cells_create(&cfg, &c));
    struct sigaction sa = {.sa_handler = on_timeout}, old;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, &old) == 0);
    const volatile uint64_t *p = tk_lazy_cell_addr(c, 2);
    int leave = 3;
#ifdef __SANITIZE_THREAD__
    /* TSan runs a signal's handler at the thread's next call it intercepts,
     * and the wait is a futex system call it does not see: the timer's
     * handler would never run */
    leave = 0;
#endif
    for (int k = 0; k < leave; k++) {
        if (sigsetjmp(timeout_jmp, 1) == 0) {
            struct itimerval it = {.it_value = {0, 20000}};
            CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
            uint64_t x = p[0];
            printf("FAIL: a load of an empty cell returned %llu\n", (unsigned long long)x);
            exit(1);
        }
        CHECK(tk_lazy_cell_waiting(c, 2) == k + 1);
    }
    uint64_t v = 5;
    CHECK_OK(tk_lazy_cell_put(c, 2, &v, sizeof v));
    CHECK(tk_lazy_cell_waiting(c, 2) == 0);
    CHECK(p[0] == 5);
    CHECK_OK(tk_lazy_cell_take(c, 2, NULL, 0));
    /* and a reader that waits to the end is counted, then not */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read_cell2, c) == 0);
    while (tk_lazy_cell_waiting(c, 2) < 1) sched_yield();
    v = 0xFEED;
    CHECK_OK(tk_lazy_cell_put(c, 2, &v, sizeof v));
    pthread_join(th, NULL);
    CHECK(tk_lazy_cell_waiting(c, 2) == 0);
    CHECK(sigaction(SIGALRM, &old, NULL) == 0);
    CHECK_OK(tk_lazy_cells_destroy(c));
}

/* ---- put waits while full; take waits while empty ------------------------------ */

static void *taker(void *arg)
{
    tk_lazy_cells *c = arg;
    for (uint64_t k = 1; k <= 200; k++) {
        uint64_t v = 0;
        CHECK_OK(tk_lazy_cell_take(c, 0, &v, sizeof v));
        CHECK(v == k);
    }
    return NULL;
}

static void test_handoff(void)
{
    tk_lazy_cells *c;
    tk_lazy_cells_config cfg = {.ncells = 1, .mech = mech};
    CHECK_OK(tk_lazy_cells_create(&cfg, &c));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, taker, c) == 0);
    for (uint64_t k = 1; k <= 200; k++) CHECK_OK(tk_lazy_cell_put(c, 0, &k, sizeof k));
    pthread_join(th, NULL);
    CHECK(tk_lazy_cell_full(c, 0) == 0);
    CHECK_OK(tk_lazy_cells_destroy(c));
}

/* ---- bad configurations ---------------------------------------------------------- */

#define REFUSED(call, err, text)                                                                   \
    do {                                                                                           \
        CHECK_ERR(call, err);                                                                      \
        if (!strstr(tk_last_error(), text)) {                                                      \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,            \
                    tk_last_error(), text);                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void test_bad_config(void)
{
    tk_lazy_array *a;
    tk_lazy_array_config ac = {.len = 4 * PS, .fill = NULL};
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "fill callback");
    ac.fill = fill_ok;
    ac.len = PS + 1;
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "multiple of the page size");
    ac.len = 0;
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "positive multiple");
    ac.len = 4 * PS;
    ac.page_size = 3 * PS;
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "power-of-two");
    ac.page_size = 0;
    ac.mech = TK_MECH_POSIX; /* with the default backend */
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "TK_LAZY_REGION");
    ac.backend = TK_LAZY_REGION;
    ac.mech = TK_MECH_PKEYS;
    REFUSED(tk_lazy_array_create(&ac, &a), -EOPNOTSUPP, "pkeys");
    ac.mech = (enum tk_mech)99;
    REFUSED(tk_lazy_array_create(&ac, &a), -EINVAL, "unknown mechanism 99");
    REFUSED(tk_lazy_array_create(NULL, &a), -EINVAL, "configuration");
    REFUSED(tk_lazy_array_fill(NULL, 0, 1), -EINVAL, "NULL");
    ac.backend = TK_LAZY_AUTO;
    ac.mech = TK_MECH_AUTO;
    CHECK_OK(tk_lazy_array_create(&ac, &a));
    REFUSED(tk_lazy_array_fill(a, 3, SIZE_MAX), -EINVAL, "from page 3 lie outside");
    CHECK_OK(tk_lazy_array_destroy(a));

    tk_lazy_cells *c;
    tk_lazy_cells_config cc = {.ncells = 0};
    REFUSED(tk_lazy_cells_create(&cc, &c), -EINVAL, "ncells");
    cc.ncells = 4;
    cc.cell_size = 100;
    REFUSED(tk_lazy_cells_create(&cc, &c), -EINVAL, "power of two");
    cc.cell_size = 32;
    REFUSED(tk_lazy_cells_create(&cc, &c), -EINVAL, "power of two");
    cc.cell_size = 64;
    cc.mech = TK_MECH_UFFD_SIGBUS;
    REFUSED(tk_lazy_cells_create(&cc, &c), -EINVAL, "sub-page");
    cc.mech = TK_MECH_SOFT_DIRTY;
    REFUSED(tk_lazy_cells_create(&cc, &c), -EOPNOTSUPP, "soft-dirty");
    cc.mech = (enum tk_mech)99;
    REFUSED(tk_lazy_cells_create(&cc, &c), -EINVAL, "unknown mechanism 99");
    cc.mech = TK_MECH_AUTO;
    CHECK_OK(tk_init());
    if (!(tk_fast_paths() & TK_FAST_SUBPAGE)) /* TRAPKIT_FAST=off: no 64-byte cells */
        REFUSED(tk_lazy_cells_create(&cc, &c), -EOPNOTSUPP, "TK_FAST_SUBPAGE");
    cc.cell_size = 0;
    CHECK_OK(tk_lazy_cells_create(&cc, &c));
    char big[8192] = {0};
    REFUSED(tk_lazy_cell_put(c, 0, big, tk_lazy_cells_cell_size(c) + 1), -EINVAL, "do not fit");
    REFUSED(tk_lazy_cell_put(c, 4, big, 8), -EINVAL, "no cell 4");
    REFUSED(tk_lazy_cell_take(c, 9, big, 8), -EINVAL, "no cell 9");
    REFUSED(tk_lazy_cell_put(c, 0, NULL, 8), -EINVAL, "value is NULL");
    REFUSED(tk_lazy_cell_take(c, 0, NULL, 8), -EINVAL, "buffer is NULL");
    CHECK_ERR(tk_lazy_cell_full(c, 4), -EINVAL);
    CHECK_OK(tk_lazy_cells_destroy(c));

    tk_lazy_stack *s;
    tk_lazy_stack_config sc = {.mech = TK_MECH_PAGEMAP_SCAN};
    REFUSED(tk_lazy_stack_create(&sc, &s), -EOPNOTSUPP, "pagemap-scan");
    sc.mech = (enum tk_mech)99;
    REFUSED(tk_lazy_stack_create(&sc, &s), -EINVAL, "unknown mechanism 99");
    REFUSED(tk_lazy_stack_destroy(NULL), -EINVAL, "NULL");
    REFUSED(tk_lazy_cells_destroy(NULL), -EINVAL, "NULL");
    REFUSED(tk_lazy_array_destroy(NULL), -EINVAL, "NULL");
}

/* ---- faults that are not ours ------------------------------------------------- */

static tk_lazy_cells *fork_cells; /* (dies_of_segv's case 5) */

static void dies_of_segv(int what)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (what == 0) {
            /* elsewhere: an inaccessible page of no structure */
            volatile char *p = mmap(NULL, PS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            (void)p[1];
        } else if (what == 1) {
            /* above the stack's guard */
            tk_lazy_stack *s;
            tk_lazy_stack_config cfg = {.max_size = 1u << 20, .mech = mech};
            if (tk_lazy_stack_create(&cfg, &s)) _exit(3);
            ((volatile char *)tk_lazy_stack_base(s))[5 * PS] = 1;
        } else if (what == 3) {
            /* in a child of fork(): an array page computed before the fork
             * reads right, one not computed is passed on (no thread here to
             * compute it; never zeros) */
            const volatile uint64_t *b = tk_lazy_array_base(arr);
            if (b[1] != word_of(0, 1)) _exit(4);
            if (tk_lazy_array_fill(arr, 2, 1) != -ECHILD) _exit(5);
            (void)b[3 * PS / 8];
        } else if (what == 4) {
            /* one byte past a stack grown to its reservation: nothing of
             * the program's can be mapped there (the page after it is the
             * stack's, no-access) */
            tk_lazy_stack *s;
            tk_lazy_stack_config cfg = {.max_size = 16 * PS, .mech = mech};
            if (tk_lazy_stack_create(&cfg, &s)) _exit(3);
            volatile char *b = tk_lazy_stack_base(s);
            for (size_t i = 0; i < 16; i++) b[i * PS] = 1;
            void *after = mmap((char *)b + 16 * PS, PS, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (after != MAP_FAILED) _exit(4);
            b[16 * PS] = 1;
        } else if (what == 6) {
            /* an AVX load (as glibc's memcpy makes) from a full 64-byte
             * cell beside an empty one: trapkit cannot emulate it and will
             * not open the page to step it (another thread could read the
             * empty cell as zeros meanwhile): passed on */
            tk_lazy_cells *c;
            tk_lazy_cells_config cfg = {.ncells = 4, .cell_size = 64, .mech = TK_MECH_POSIX};
            if (tk_lazy_cells_create(&cfg, &c)) _exit(3);
            uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
            if (tk_lazy_cell_put(c, 0, v, sizeof v)) _exit(4);
            if (*(volatile uint64_t *)tk_lazy_cell_addr(c, 0) != 1) _exit(5); /* plain: emulated */
            __asm__ volatile("vmovdqu (%0), %%ymm0" ::"r"(tk_lazy_cell_addr(c, 0)) : "xmm0");
        } else if (what == 7 || what == 8 || what == 9) {
            /* a jump into a stack's page, a computed array page or a full
             * cell: none is executable, whatever it holds */
            alarm(60);
            void *at;
            if (what == 7) {
                tk_lazy_stack *s;
                tk_lazy_stack_config cfg = {.max_size = 1u << 20, .mech = mech};
                if (tk_lazy_stack_create(&cfg, &s)) _exit(3);
                at = tk_lazy_stack_base(s);
                *(volatile unsigned char *)at = 0xc3; /* ret */
            } else if (what == 8) {
                at = tk_lazy_array_base(arr);
                if (*(const volatile uint64_t *)at != word_of(0, 0)) _exit(4);
            } else {
                tk_lazy_cells *c;
                tk_lazy_cells_config cfg = {.ncells = 4, .mech = mech};
                if (tk_lazy_cells_create(&cfg, &c)) _exit(3);
                unsigned char ret = 0xc3;
                if (tk_lazy_cell_put(c, 2, &ret, 1)) _exit(4);
                at = tk_lazy_cell_addr(c, 2);
            }
            ((void (*)(void))at)();
            _exit(5);
        } else if (what == 10) {
            /* a page computed, then dropped by the program before the fork
             * (the parent would compute it again): never zeros in the
             * child - the right value (a region-backed array's memory is
             * shared with the child) or passed on */
            const volatile uint64_t *b = tk_lazy_array_base(arr);
            if (b[2 * PS / 8 + 1] != word_of(2, 1)) _exit(4);
            (void)b[5 * PS / 8]; /* not computed */
        } else if (what == 5) {
            /* cells in a child of fork(): the memory is the parent's too, so
             * put and take are refused; a full cell reads; a load of an
             * empty one is passed on instead of waiting for ever */
            uint64_t v = 7;
            if (tk_lazy_cell_put(fork_cells, 1, &v, 8) != -ECHILD) _exit(4);
            if (tk_lazy_cell_take(fork_cells, 0, &v, 8) != -ECHILD) _exit(5);
            if (*(volatile uint64_t *)tk_lazy_cell_addr(fork_cells, 0) != 111) _exit(6);
            (void)*(volatile uint64_t *)tk_lazy_cell_addr(fork_cells, 1);
        } else {
            /* a store to an empty cell */
            tk_lazy_cells *c;
            tk_lazy_cells_config cfg = {.ncells = 4, .mech = mech};
            if (tk_lazy_cells_create(&cfg, &c)) _exit(3);
            *(volatile uint64_t *)tk_lazy_cell_addr(c, 1) = 1;
        }
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)) {
        fprintf(stderr, "case %d: child status 0x%x, expected death by SIGSEGV\n", what, st);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    PS = (size_t)sysconf(_SC_PAGESIZE);
    const char *name = argc > 1 ? argv[1] : "uffd-missing";
    if (!strcmp(name, "uffd-missing")) {
        backend = TK_LAZY_UFFD_MISSING;
        mech = TK_MECH_AUTO;
        tk_probe_info p;
        if (tk_probe(&p) || p.uffd_access == TK_UFFD_NONE) {
            printf("skip: userfaultfd is not available here\n");
            return TK_SKIP;
        }
    } else {
        backend = TK_LAZY_REGION;
        mech = tk_mech_parse(name);
        if (mech != TK_MECH_POSIX && mech != TK_MECH_UFFD_SIGBUS && mech != TK_MECH_UFFD_THREAD) {
            fprintf(stderr, "usage: lazy_basic [uffd-missing|posix|uffd-sigbus|uffd-thread]\n");
            return 1;
        }
        const char *why = NULL;
        if (!tk_mech_available(mech, TK_REGION_NOACCESS | TK_REGION_MAP2, &why)) {
            printf("skip: mechanism %s is not available here: %s\n", name, why ? why : "?");
            return TK_SKIP;
        }
    }
    test_bad_config();
    test_array();
    test_dropped();
    test_array_fork_private();
    test_errors();
    test_stack();
    test_stack_race();
    test_stack_fork();
    test_callback_faults();
    test_cells();
    test_same_cell();
    test_timeout();
    test_handoff();
    for (int what = 0; what < 3; what++) dies_of_segv(what);
    dies_of_segv(4);
    CHECK_OK(tk_init());
    if (__builtin_cpu_supports("avx") && (tk_fast_paths() & TK_FAST_SUBPAGE)) dies_of_segv(6);
    tk_lazy_cells_config cc = {.ncells = 4, .mech = mech};
    CHECK_OK(tk_lazy_cells_create(&cc, &fork_cells));
    uint64_t v = 111;
    CHECK_OK(tk_lazy_cell_put(fork_cells, 0, &v, 8));
    dies_of_segv(5);
    CHECK(*(volatile uint64_t *)tk_lazy_cell_addr(fork_cells, 0) ==
          111); /* the parent's, as it was */
    CHECK(tk_lazy_cell_full(fork_cells, 1) == 0);
    CHECK_OK(tk_lazy_cell_take(fork_cells, 0, &v, 8));
    CHECK(v == 111);
    CHECK_OK(tk_lazy_cells_destroy(fork_cells));
    tk_lazy_array_config cfg = array_cfg(8 * PS, fill_ok, NULL, NULL);
    CHECK_OK(tk_lazy_array_create(&cfg, &arr));
    CHECK(((volatile uint64_t *)tk_lazy_array_base(arr))[1] == word_of(0, 1));
    dies_of_segv(3);
    CHECK(((volatile uint64_t *)tk_lazy_array_base(arr))[3 * PS / 8] == word_of(3, 0));
    for (int what = 7; what <= 9; what++) dies_of_segv(what);
    CHECK(((volatile uint64_t *)tk_lazy_array_base(arr))[2 * PS / 8 + 1] == word_of(2, 1));
    CHECK(madvise((char *)tk_lazy_array_base(arr) + 2 * PS, PS, MADV_DONTNEED) == 0);
    dies_of_segv(10);
    CHECK(((volatile uint64_t *)tk_lazy_array_base(arr))[2 * PS / 8 + 1] == word_of(2, 1));
    CHECK_OK(tk_lazy_array_destroy(arr));
    printf("lazy_basic %s: ok\n", name);
    return 0;
}
