/* tests/zpage_basic.c - compressed paging (trapkit/zpage.h).
 *
 *   zpage_basic DELIVERY CODEC CASE
 *
 * DELIVERY sigbus|thread, CODEC lz4|zstd|none, CASE:
 *   content  4 threads write, read at random and rewrite a 16 MiB area with a
 *            4 MiB budget (text-like, zero, same-filled and random pages);
 *            every page read is checked against what was last written; a
 *            monitor checks the budget all along; then everything trimmed and
 *            checked again
 *   signal   a timer signal's handler reads (and checks) dropped pages while
 *            the main thread writes and trims
 *   reread   pages written once are read at random by three threads and by
 *            the handler of signals sent to them, under a budget a quarter of
 *            them: every word read is the one written
 *   fork     a child of fork() sees every page, dropped ones included, and
 *            the parent's area goes on working after; a fork handler of the
 *            program's that reads the whole area while the pager is paused
 *            goes on past the budget instead of waiting for it
 *   madvise  a page the program drops itself reads as zeros; tk_zpage_discard
 *            zeroes pages in every state, dropped ones too; read(2) into a
 *            dropped page after tk_prefault
 *   counts   4 threads count in every page of theirs, round after round,
 *            while reading the others' pages, under a budget a quarter of
 *            the area: the pager holds, evicts and brings back pages all
 *            along, and a write that raced with it and was lost shows as a
 *            count short at the end
 *   bad      bad configurations refused with -EINVAL and a message
 *   locked   memory the kernel will not drop: refused under
 *            mlockall(MCL_FUTURE); pages mlock()ed later stay resident with
 *            their data (trim -EBUSY, discard -EINVAL), a thread faulting
 *            far over the budget does not wait for ever, and after munlock
 *            the pager drops them again
 *   swap     pages the kernel swapped out (MADV_PAGEOUT to a swap file of
 *            the test's) are evicted with their data, not as zeros (root)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <trapkit/zpage.h>
#include "testutil.h"

#define PAGE 4096u
#define NPAGES 4096u /* 16 MiB */
#define BUDGET 1024u /* pages: 4 MiB */
#define THREADS 4

static enum tk_zpage_delivery delivery;
static enum tk_zpage_codec codec;
static tk_zpage *z;
static unsigned char *base;
static _Atomic uint32_t version[NPAGES];

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Page i at version v: text-like words, or zeros, or one repeated word, or
 * random bytes. */
static void gen(uint32_t i, uint32_t v, unsigned char *out)
{
    static const char *words[] = {"trap",     "page",      "fault", "kernel",  "memory",   "signal",
                                  "{\"id\":", "\"name\":", "42",    "3.14159", "compress", "the",
                                  "of",       "and",       "\n",    ", "};
    uint64_t h = mix((uint64_t)i << 32 | v);
    if (h % 16 == 3) {
        memset(out, 0, PAGE);
        return;
    }
    if (h % 16 == 7) {
        for (unsigned k = 0; k < PAGE; k += 8) memcpy(out + k, &h, 8);
        return;
    }
    if (h % 16 ==
        11) { /* random bytes: no codec shrinks them (kept as they are: see random_pages) */
        for (unsigned k = 0; k < PAGE; k += 8) {
            h = mix(h + k);
            memcpy(out + k, &h, 8);
        }
        return;
    }
    unsigned n = 0;
    char num[24];
    while (n < PAGE) {
        h = mix(h);
        const char *w = words[h % 16];
        if (h % 7 == 0) {
            snprintf(num, sizeof num, "%u ", (unsigned)(h >> 40));
            w = num;
        }
        for (; *w && n < PAGE; w++) out[n++] = (unsigned char)*w;
        if (n < PAGE) out[n++] = ' ';
    }
}

/* Pages whose current version gen() makes random. */
static uint64_t random_pages(void)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < NPAGES; i++) {
        uint32_t v = atomic_load(&version[i]);
        n += v && mix((uint64_t)i << 32 | v) % 16 == 11;
    }
    return n;
}

static void write_page(uint32_t i, uint32_t v)
{
    unsigned char buf[PAGE];
    gen(i, v, buf);
    memcpy(base + (size_t)i * PAGE, buf, PAGE);
    atomic_store(&version[i], v);
}

static bool page_ok(uint32_t i)
{
    unsigned char buf[PAGE];
    uint32_t v = atomic_load(&version[i]);
    if (v == 0) {
        for (unsigned k = 0; k < PAGE; k++)
            if (base[(size_t)i * PAGE + k]) return false;
        return true;
    }
    gen(i, v, buf);
    return memcmp(base + (size_t)i * PAGE, buf, PAGE) == 0;
}

static void check_page(uint32_t i)
{
    if (!page_ok(i)) {
        fprintf(stderr, "page %u differs from version %u\n", i, version[i]);
        exit(1);
    }
}

static void make(size_t budget_pages)
{
    tk_zpage_config cfg = {.len = (size_t)NPAGES * PAGE,
                           .budget = budget_pages * PAGE,
                           .codec = codec,
                           .level = codec == TK_ZPAGE_ZSTD ? 3 : 0,
                           .delivery = delivery};
    int r = tk_zpage_create(&cfg, &z);
    if (r == -EOPNOTSUPP) {
        printf("SKIP: %s\n", tk_last_error());
        exit(TK_SKIP);
    }
    CHECK_OK(r);
    base = tk_zpage_base(z);
    CHECK(base && tk_zpage_len(z) == (size_t)NPAGES * PAGE);
}

/* ---- content ---- */

static pthread_barrier_t bar;
static atomic_bool monitoring = true;
static atomic_size_t max_resident;

static void *monitor(void *arg)
{
    while (atomic_load(&monitoring)) {
        tk_zpage_stats st;
        tk_zpage_stats_get(z, &st);
        if (st.resident > atomic_load(&max_resident)) atomic_store(&max_resident, st.resident);
        usleep(200);
    }
    return NULL;
}

/* reads per thread: fewer under ThreadSanitizer, where a fault costs a
 * hundred times more (and under TK_TEST_SCALE) */
#if defined(__SANITIZE_THREAD__)
static const long reads_full = 1500;
#else
static const long reads_full = 6000;
#endif

static void *worker(void *arg)
{
    long reads = tk_test_scaled(reads_full);
    uint32_t t = (uint32_t)(uintptr_t)arg;
    uint64_t h = mix(t + 1);
    for (uint32_t i = t; i < NPAGES; i += THREADS) write_page(i, 1);
    pthread_barrier_wait(&bar);
    /* every thread reads every page's current version */
    for (long k = 0; k < reads; k++) {
        h = mix(h);
        /* skewed: half the reads go to an eighth of the pages */
        uint32_t i = (h & 1) ? (uint32_t)(h >> 8) % (NPAGES / 8) : (uint32_t)(h >> 8) % NPAGES;
        check_page(i);
    }
    pthread_barrier_wait(&bar);
    /* rewrite one's own pages, reading them back now and then */
    for (uint32_t i = t; i < NPAGES; i += THREADS) {
        write_page(i, 2 + (i % 3));
        if (i % 7 == 0) check_page(i);
    }
    pthread_barrier_wait(&bar);
    for (uint32_t i = t; i < NPAGES; i += THREADS) check_page(i);
    return NULL;
}

static void case_content(void)
{
    make(BUDGET);
    pthread_t th[THREADS], mon;
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_create(&mon, NULL, monitor, NULL);
    for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    atomic_store(&monitoring, false);
    pthread_join(mon, NULL);
    tk_zpage_stats st;
    CHECK_OK(tk_zpage_trim(z, (size_t)BUDGET * PAGE)); /* the pager at rest: counts agree */
    CHECK_OK(tk_zpage_stats_get(z, &st));
    printf("resident %llu (max %zu, budget %u), compressed %llu, markers %llu, stored %llu B, "
           "fault-ins %llu, evictions %llu, samples %llu, waits %llu\n",
           (unsigned long long)st.resident, atomic_load(&max_resident), BUDGET,
           (unsigned long long)st.compressed, (unsigned long long)st.markers,
           (unsigned long long)st.stored_bytes, (unsigned long long)st.fault_ins,
           (unsigned long long)st.evictions, (unsigned long long)st.sample_faults,
           (unsigned long long)st.waits);
    /* the budget: the pager's slack and one page per faulting thread */
    CHECK(atomic_load(&max_resident) <= BUDGET + BUDGET / 8 + THREADS);
    CHECK(st.evictions > NPAGES / 2 && st.fault_ins > 1000);
    CHECK(st.markers > 0 && st.compressed > 0);
    CHECK(st.compressed + st.markers + st.resident == NPAGES);
    /* compressed to under 3/4, but random pages, which stay whole (and
     * the text pages come close to 3/4: room for them) */
    if (codec != TK_ZPAGE_NONE)
        CHECK(st.stored_bytes <
              (uint64_t)st.compressed * PAGE * 3 / 4 + random_pages() * (PAGE / 2 + 64));

    /* all out, all back */
    CHECK_OK(tk_zpage_trim(z, 0));
    CHECK_OK(tk_zpage_stats_get(z, &st));
    CHECK(st.resident == 0 && st.compressed + st.markers == NPAGES);
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    CHECK_OK(tk_zpage_stats_get(z, &st));
    CHECK(st.resident == NPAGES || st.resident <= BUDGET + BUDGET / 8 + 1);
    /* pages only read since they came back keep their copy (where the
     * kernel has userfaultfd write protection); written ones lose it, and
     * what is read back after another trim is what was written */
    if (!getenv("TRAPKIT_ZPAGE_NO_CLEAN")) CHECK(st.clean > 0);
    CHECK(st.clean <= st.resident);
    for (uint32_t i = 0; i < NPAGES; i += 5) write_page(i, 7);
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);

    /* a budget change takes effect */
    CHECK_OK(tk_zpage_set_budget(z, 256 * PAGE));
    for (uint32_t i = 0; i < NPAGES; i += 2) check_page(i);
    CHECK_OK(tk_zpage_stats_get(z, &st));
    CHECK(st.resident <= 256 + 256 / 8 + 1);
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- signal ---- */

static atomic_ulong sig_reads, main_writes;
static void on_alarm(int sig)
{
    static uint64_t h = 99;
    /* only after the program wrote a page since the last time: where a
     * handler's faults take longer than the timer's period (an emulated
     * machine), the handlers would otherwise leave the program no time */
    static unsigned long seen;
    unsigned long w = atomic_load(&main_writes);
    if (w == seen) return;
    seen = w;
    for (int k = 0; k < 4; k++) {
        h = mix(h);
        uint32_t i = (uint32_t)(h % (NPAGES / 2)); /* the half nobody writes meanwhile */
        if (!page_ok(i)) {
            static const char m[] = "signal handler read a wrong page\n";
            write(2, m, sizeof m - 1);
            _exit(1);
        }
    }
    atomic_fetch_add(&sig_reads, 1);
}

static void case_signal(void)
{
    make(BUDGET / 4);
    for (uint32_t i = 0; i < NPAGES; i++) write_page(i, 1);
    struct sigaction sa = {.sa_handler = on_alarm};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {.it_interval = {0, 2000}, .it_value = {0, 2000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int round = 0; round < 8 || atomic_load(&sig_reads) < 50; round++) {
        for (uint32_t i = NPAGES / 2; i < NPAGES; i++) {
            write_page(i, 2 + (uint32_t)round % 5);
            atomic_fetch_add(&main_writes, 1);
        }
        if (round % 4 == 0) CHECK_OK(tk_zpage_trim(z, 0));
        CHECK(round < 2000);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    printf("%lu signal handlers read dropped pages\n", (unsigned long)atomic_load(&sig_reads));
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- reread ---- */

/* Pages written once and then only read, three threads reading them at
 * random under a budget a quarter of them, while signals interrupt the
 * readers and their handler reads the area too (and spins a while, as a
 * profiler's might): every word read is the one written.  A fault that
 * found its page brought back by another thread, and the pager taking it
 * again before the fault placed anything, once put a zero page over data
 * the pager kept. */
#define REREAD_PAGES 256u
static unsigned char *reread_expect; /* the pages' contents */
static atomic_bool reread_stop;
static atomic_ulong reread_wrong, reread_reads, reread_handled;

static bool reread_word(uint64_t *h)
{
    *h = mix(*h);
    size_t off = (size_t)(*h % (REREAD_PAGES * PAGE / 8)) * 8;
    return memcmp(base + off, reread_expect + off, 8) == 0;
}

static void on_reread_signal(int sig)
{
    (void)sig;
    static _Thread_local uint64_t h;
    if (!h) h = (uintptr_t)&h;
    for (int k = 0; k < 2; k++)
        if (!reread_word(&h)) atomic_fetch_add(&reread_wrong, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000);
    atomic_fetch_add(&reread_handled, 1);
}

static void *rereader(void *arg)
{
    uint64_t h = 17 + (uintptr_t)arg;
    while (!atomic_load(&reread_stop)) {
        if (!reread_word(&h)) atomic_fetch_add(&reread_wrong, 1);
        atomic_fetch_add(&reread_reads, 1);
    }
    return NULL;
}

static void case_reread(void)
{
    make(64);
    reread_expect = malloc((size_t)REREAD_PAGES * PAGE);
    CHECK(reread_expect);
    for (uint32_t i = 0; i < REREAD_PAGES; i++) {
        write_page(i, 1);
        gen(i, 1, reread_expect + (size_t)i * PAGE);
    }
    struct sigaction sa = {.sa_handler = on_reread_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    pthread_t th[3];
    for (uintptr_t t = 0; t < 3; t++) CHECK(pthread_create(&th[t], NULL, rereader, (void *)t) == 0);
    uint64_t h = 5;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long ms = tk_test_scaled(6000);
    do {
        h = mix(h);
        pthread_kill(th[h % 3], SIGUSR1);
        usleep(30);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < ms &&
             !atomic_load(&reread_wrong));
    atomic_store(&reread_stop, true);
    for (int k = 0; k < 3; k++) CHECK(pthread_join(th[k], NULL) == 0);
    tk_zpage_stats st;
    CHECK_OK(tk_zpage_stats_get(z, &st));
    printf("%lu reads, %lu handlers, %llu fault-ins, %lu wrong\n",
           (unsigned long)atomic_load(&reread_reads), (unsigned long)atomic_load(&reread_handled),
           (unsigned long long)st.fault_ins, (unsigned long)atomic_load(&reread_wrong));
    CHECK(atomic_load(&reread_wrong) == 0);
    CHECK(st.fault_ins > 0);
    for (uint32_t i = 0; i < REREAD_PAGES; i++) check_page(i);
    free(reread_expect);
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- fork ---- */

/* A fork handler of the program's that reads the whole area (registered
 * before the area, so it runs with the pager paused for the fork): its
 * fault-ins go on past the budget instead of waiting for the pager. */
static atomic_bool prepare_reads;
static uint64_t prepare_sum;

static void prepare_read_all(void)
{
    if (!atomic_load(&prepare_reads)) return;
    for (uint32_t i = 0; i < NPAGES; i++) prepare_sum += base[(size_t)i * PAGE + 9];
}

static void case_fork(void)
{
    pthread_atfork(prepare_read_all, NULL, NULL);
    make(BUDGET);
    for (uint32_t i = 0; i < NPAGES; i++) write_page(i, 1);
    CHECK_OK(tk_zpage_trim(z, 100 * PAGE));
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (uint32_t i = 0; i < NPAGES; i++)
            if (!page_ok(i)) _exit(2);
        for (uint32_t i = 0; i < NPAGES; i += 3) write_page(i, 9);
        for (uint32_t i = 0; i < NPAGES; i++)
            if (!page_ok(i)) _exit(3);
        _exit(tk_zpage_destroy(z) == 0 ? 0 : 4);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the parent's pages are its own, and the area still pages */
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    for (uint32_t i = 0; i < NPAGES; i += 2) write_page(i, 5);
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    /* the prepare handler brings back every page (4 times the budget)
     * while the pager is paused */
    atomic_store(&prepare_reads, true);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(0);
    atomic_store(&prepare_reads, false);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- madvise ---- */

/* Pages brought back by a read and by a write leave the thread's signal
 * mask as it was (the fault path defers the asynchronous signals while it
 * owns a page). */
static void check_mask_kept(void)
{
    sigset_t want, got;
    sigemptyset(&want);
    sigaddset(&want, SIGUSR2);
    CHECK(pthread_sigmask(SIG_SETMASK, &want, NULL) == 0);
    CHECK_OK(tk_zpage_trim(z, 0));
    check_page(0);
    write_page(1, 3);
    CHECK(pthread_sigmask(SIG_SETMASK, NULL, &got) == 0);
    for (int sig = 1; sig < 32; sig++) CHECK(sigismember(&got, sig) == sigismember(&want, sig));
    sigemptyset(&want);
    CHECK(pthread_sigmask(SIG_SETMASK, &want, NULL) == 0);
}

static void case_madvise(void)
{
    make(BUDGET);
    for (uint32_t i = 0; i < 64; i++) write_page(i, 1);
    /* the program drops a resident page: zeros */
    CHECK(madvise(base + 5 * PAGE, PAGE, MADV_DONTNEED) == 0);
    atomic_store(&version[5], 0);
    check_page(5);
    /* and one the area keeps compressed: its data */
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < 64; i++) check_page(i);
    CHECK(madvise(base + 6 * PAGE, PAGE, MADV_DONTNEED) == 0);
    atomic_store(&version[6], 0);
    CHECK_OK(tk_zpage_trim(z, 0));
    check_page(6);
    /* read(2) into a dropped page, made present first */
    CHECK_OK(tk_zpage_trim(z, 0));
    int fds[2];
    CHECK(pipe(fds) == 0);
    unsigned char src[PAGE];
    gen(7, 77, src);
    CHECK(write(fds[1], src, PAGE) == PAGE);
    CHECK_OK(tk_prefault(base + 7 * PAGE, PAGE, TK_ACCESS_WRITE));
    CHECK(read(fds[0], base + 7 * PAGE, PAGE) == PAGE);
    atomic_store(&version[7], 77);
    for (uint32_t i = 0; i < 64; i++) check_page(i);
    /* read(2) into a page brought back by a read (clean, write-protected by
     * the userfaultfd), made writable first: what it wrote is what comes
     * back after the next trim */
    CHECK_OK(tk_zpage_trim(z, 0));
    check_page(8);
    gen(8, 88, src);
    CHECK(write(fds[1], src, PAGE) == PAGE);
    CHECK_OK(tk_prefault(base + 8 * PAGE, PAGE, TK_ACCESS_WRITE));
    CHECK(read(fds[0], base + 8 * PAGE, PAGE) == PAGE);
    atomic_store(&version[8], 88);
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < 64; i++) check_page(i);
    close(fds[0]);
    close(fds[1]);
    check_mask_kept();

    /* tk_zpage_discard: dropped pages (madvise cannot reach them: their
     * data would come back), pages in memory, clean ones, never touched
     * ones: all read as zeros, and the counts agree */
    for (uint32_t i = 0; i < 64; i++) write_page(i, 4);
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 20; i < 24; i++) check_page(i); /* back by a read: clean */
    for (uint32_t i = 24; i < 28; i++) write_page(i, 6);
    CHECK_OK(tk_zpage_discard(z, base + 16 * PAGE, 16 * PAGE));
    CHECK_OK(tk_zpage_discard(z, base + 200 * PAGE, 2 * PAGE)); /* never touched */
    for (uint32_t i = 16; i < 32; i++) atomic_store(&version[i], 0);
    tk_zpage_stats st;
    CHECK_OK(tk_zpage_trim(z, 0));
    CHECK_OK(tk_zpage_stats_get(z, &st));
    CHECK(st.resident == 0 && st.compressed + st.markers == 64 - 16);
    for (uint32_t i = 0; i < 64; i++) check_page(i);
    for (uint32_t i = 16; i < 32; i++) write_page(i, 7); /* and used again */
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < 64; i++) check_page(i);
    CHECK_ERR(tk_zpage_discard(z, base + 1, PAGE), -EINVAL);
    CHECK_ERR(tk_zpage_discard(z, base, PAGE + 1), -EINVAL);
    CHECK_ERR(tk_zpage_discard(z, base + (size_t)NPAGES * PAGE, PAGE), -EINVAL);
    CHECK_ERR(tk_zpage_discard(z, base - PAGE, PAGE), -EINVAL);
    CHECK_ERR(tk_zpage_discard(NULL, base, PAGE), -EINVAL);
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- locked ---- */

/* Whether this system keeps locked pages: madvise(MADV_DONTNEED) of a
 * locked page fails with EINVAL on Linux; an environment that accepts
 * mlock and mlockall without locking anything cannot run this case. */
static bool locking_holds(bool call_mlock)
{
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return true; /* (over the limit of locked memory) */
    p[0] = 1;
    bool held = (call_mlock && mlock(p, PAGE) != 0) || madvise(p, PAGE, MADV_DONTNEED) != 0;
    munmap(p, PAGE);
    return held;
}

static void case_locked(void)
{
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_MEMLOCK, &rl); /* (root may; others keep their limit) */
    if (!locking_holds(true)) {
        printf("SKIP: pages locked by mlock can be dropped here\n");
        exit(TK_SKIP);
    }
    if (mlockall(MCL_FUTURE) != 0) {
        printf("SKIP: mlockall: %s\n", strerror(errno));
        exit(TK_SKIP);
    }
    if (!locking_holds(false)) {
        printf("SKIP: mlockall(MCL_FUTURE) does not lock new mappings here\n");
        exit(TK_SKIP);
    }
    tk_zpage_config cfg = {.len = (size_t)NPAGES * PAGE,
                           .budget = 64 * PAGE,
                           .codec = codec,
                           .level = codec == TK_ZPAGE_ZSTD ? 3 : 0,
                           .delivery = delivery};
    tk_zpage *locked;
    CHECK_ERR(tk_zpage_create(&cfg, &locked), -EOPNOTSUPP);
    CHECK(strstr(tk_last_error(), "mlockall"));
    CHECK(munlockall() == 0);

    /* (a process that may not raise its limit locks what fits in it) */
    getrlimit(RLIMIT_MEMLOCK, &rl);
    uint32_t n = 512;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / PAGE < n + 16)
        n = rl.rlim_cur / PAGE > 16 ? (uint32_t)(rl.rlim_cur / PAGE - 16) : 0;
    if (n < 128) {
        printf("SKIP: RLIMIT_MEMLOCK of %llu bytes\n", (unsigned long long)rl.rlim_cur);
        exit(TK_SKIP);
    }
    make(64);
    for (uint32_t i = 0; i < n; i++) write_page(i, 1);
    CHECK_OK(tk_zpage_trim(z, 0));
    /* (under SIGBUS the kernel's own touches of dropped pages fail: mlock's
     * too, so they are brought back first, with no budget meanwhile) */
    CHECK_OK(tk_zpage_set_budget(z, 0));
    CHECK_OK(tk_prefault(base, n * PAGE, TK_ACCESS_READ));
    if (mlock(base, n * PAGE) != 0) {
        printf("SKIP: mlock: %s\n", strerror(errno));
        exit(TK_SKIP);
    }
    /* eight times the budget: the pager cannot drop them, and the faults do
     * not wait for it */
    CHECK_OK(tk_zpage_set_budget(z, 64 * PAGE));
    for (uint32_t i = 0; i < n; i++) check_page(i);
    for (uint32_t i = 0; i < n; i += 2) write_page(i, 2);
    tk_zpage_stats st;
    CHECK_ERR(tk_zpage_trim(z, 0), -EBUSY);
    CHECK(strstr(tk_last_error(), "mlock"));
    CHECK_OK(tk_zpage_stats_get(z, &st));
    printf("locked: %llu pages resident, budget 64\n", (unsigned long long)st.resident);
    CHECK(st.resident >= n);
    for (uint32_t i = 0; i < n; i++) check_page(i);
    CHECK_ERR(tk_zpage_discard(z, base, 16 * PAGE), -EINVAL);
    for (uint32_t i = 0; i < n; i++) check_page(i); /* (their data kept) */
    /* unlocked: the pager drops them again (after its second's wait) */
    CHECK(munlock(base, n * PAGE) == 0);
    usleep(1100 * 1000);
    CHECK_OK(tk_zpage_trim(z, 0));
    CHECK_OK(tk_zpage_stats_get(z, &st));
    CHECK(st.resident == 0);
    for (uint32_t i = 0; i < n; i++) check_page(i);
    CHECK_OK(tk_zpage_discard(z, base, 16 * PAGE));
    for (uint32_t i = 0; i < 16; i++) atomic_store(&version[i], 0);
    for (uint32_t i = 0; i < n; i++) check_page(i);
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- swap ---- */

/* Pages the kernel swaps out are the area's all along: the pager reads
 * them back to compress them (mincore() calls them "not resident", as it
 * does a page the program dropped).  Needs root (a swap file of its own;
 * skipped elsewhere, and where the kernel swaps none of them out). */
static void case_swap(void)
{
    tk_test_swap_on("zpage");
    make(BUDGET);
    for (uint32_t i = 0; i < 256; i++) write_page(i, 3);
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < 128; i++) check_page(i); /* back by a read: clean */
    for (uint32_t i = 128; i < 256; i++) write_page(i, 8);
    CHECK(madvise(base, 256 * PAGE, MADV_PAGEOUT) == 0);
    unsigned char vec[256];
    CHECK(mincore(base, 256 * PAGE, vec) == 0);
    unsigned out = 0;
    for (unsigned i = 0; i < 256; i++) out += !(vec[i] & 1);
    printf("%u of 256 pages swapped out\n", out);
    if (out == 0) {
        printf("skip: the kernel swapped none of them out\n");
        exit(TK_SKIP);
    }
    CHECK_OK(tk_zpage_trim(z, 0));
    for (uint32_t i = 0; i < NPAGES; i++) check_page(i);
    CHECK_OK(tk_zpage_destroy(z));
    tk_test_swap_off();
}

/* ---- counts ---- */

/* rounds per thread: fewer under ThreadSanitizer (and TK_TEST_SCALE) */
#if defined(__SANITIZE_THREAD__)
static const long rounds_full = 6;
#else
static const long rounds_full = 30;
#endif

static uint64_t *counter(uint32_t page, unsigned k)
{
    return (uint64_t *)(base + (size_t)page * PAGE) + k * (PAGE / 8 / 4);
}

static void *counting(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg;
    long rounds = tk_test_scaled(rounds_full);
    uint64_t h = mix(t + 77), seen = 0;
    pthread_barrier_wait(&bar);
    for (long r = 0; r < rounds; r++)
        for (uint32_t i = t; i < NPAGES; i += THREADS) {
            /* four words of the page, so that a lost write of any part
             * of it shows */
            for (unsigned k = 0; k < 4; k++) {
                uint64_t *c = counter(i, k);
                __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
            }
            /* another thread's page, read (it comes back clean) */
            h = mix(h);
            seen += __atomic_load_n(counter((uint32_t)(h % NPAGES), (unsigned)(h >> 62)),
                                    __ATOMIC_RELAXED);
        }
    return (void *)(uintptr_t)(seen & 1);
}

static void case_counts(void)
{
    make(BUDGET);
    pthread_t th[THREADS];
    pthread_barrier_init(&bar, NULL, THREADS);
    for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, counting, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    uint64_t want = (uint64_t)tk_test_scaled(rounds_full);
    tk_zpage_stats st;
    CHECK_OK(tk_zpage_stats_get(z, &st));
    printf("%lu rounds: fault-ins %llu, evictions %llu, samples %llu\n", (unsigned long)want,
           (unsigned long long)st.fault_ins, (unsigned long long)st.evictions,
           (unsigned long long)st.sample_faults);
    CHECK(st.evictions > NPAGES && st.fault_ins > NPAGES);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < NPAGES; i++)
            for (unsigned k = 0; k < 4; k++)
                if (*counter(i, k) != want) {
                    fprintf(stderr, "page %u word %u counts %llu, not %llu\n", i, k,
                            (unsigned long long)*counter(i, k), (unsigned long long)want);
                    exit(1);
                }
        CHECK_OK(tk_zpage_trim(z, 0)); /* and once more from their compressed copies */
    }
    CHECK_OK(tk_zpage_destroy(z));
}

/* ---- bad ---- */

static void expect_bad(tk_zpage_config cfg, const char *what)
{
    tk_zpage *x = NULL;
    int r = tk_zpage_create(&cfg, &x);
    if (r != -EINVAL) {
        fprintf(stderr, "%s: %d, expected -EINVAL\n", what, r);
        exit(1);
    }
    CHECK(x == NULL);
    CHECK(strlen(tk_last_error()) > 10);
    printf("%s: %s\n", what, tk_last_error());
}

static void case_bad(void)
{
    tk_zpage_config ok = {.len = 1 << 20, .codec = codec, .delivery = delivery};
    tk_zpage_config c;
    c = ok, c.len = 0, expect_bad(c, "len 0");
    c = ok, c.len = 12345, expect_bad(c, "len unaligned");
    c = ok, c.budget = 4096, expect_bad(c, "budget below 64 pages");
    c = ok, c.codec = (enum tk_zpage_codec)7, expect_bad(c, "codec 7");
    c = ok, c.codec = TK_ZPAGE_LZ4, c.level = 3, expect_bad(c, "lz4 level 3");
    c = ok, c.codec = TK_ZPAGE_ZSTD, c.level = 25, expect_bad(c, "zstd level 25");
    c = ok, c.delivery = (enum tk_zpage_delivery)5, expect_bad(c, "delivery 5");
    c = ok, c.flags = 1, expect_bad(c, "flags 1");
    CHECK(tk_zpage_create(NULL, &z) == -EINVAL);
    CHECK(tk_zpage_destroy(NULL) == -EINVAL);
    CHECK(tk_zpage_trim(NULL, 0) == -EINVAL);
    make(BUDGET);
    CHECK(tk_zpage_set_budget(z, 100) == -EINVAL);
    CHECK(tk_zpage_stats_get(z, NULL) == -EINVAL);
    CHECK_OK(tk_zpage_destroy(z));
    /* out of file descriptors, with one left (taken by /proc/self/mem, and
     * none for the userfaultfd, nor for the handler thread's eventfd):
     * -EMFILE, said so */
    for (int left = 1; left <= 3; left++) {
        struct rlimit old_lim, lim;
        CHECK(getrlimit(RLIMIT_NOFILE, &old_lim) == 0);
        int lowest = dup(0);
        CHECK(lowest >= 0);
        close(lowest);
        lim = old_lim;
        lim.rlim_cur = (rlim_t)(lowest + left);
        CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
        tk_zpage *zz = NULL;
        int r = tk_zpage_create(&ok, &zz);
        CHECK(setrlimit(RLIMIT_NOFILE, &old_lim) == 0);
        if (r == 0) {
            CHECK_OK(tk_zpage_destroy(zz));
            continue;
        }
        printf("%d descriptor(s) left: %d (%s)\n", left, r, tk_last_error());
        CHECK(r == -EMFILE);
        CHECK(strstr(tk_last_error(), "Too many open files"));
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: zpage_basic sigbus|thread lz4|zstd|none CASE\n");
        return 2;
    }
    delivery = strcmp(argv[1], "thread") == 0 ? TK_ZPAGE_THREAD : TK_ZPAGE_SIGBUS;
    codec = strcmp(argv[2], "zstd") == 0   ? TK_ZPAGE_ZSTD
            : strcmp(argv[2], "none") == 0 ? TK_ZPAGE_NONE
                                           : TK_ZPAGE_LZ4;
    const char *c = argv[3];
    if (!strcmp(c, "content"))
        case_content();
    else if (!strcmp(c, "signal"))
        case_signal();
    else if (!strcmp(c, "reread"))
        case_reread();
    else if (!strcmp(c, "fork"))
        case_fork();
    else if (!strcmp(c, "madvise"))
        case_madvise();
    else if (!strcmp(c, "counts"))
        case_counts();
    else if (!strcmp(c, "bad"))
        case_bad();
    else if (!strcmp(c, "swap"))
        case_swap();
    else if (!strcmp(c, "locked"))
        case_locked();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    printf("ok\n");
    return 0;
}
