/* tests/dsm_basic.c - trapkit/dsm.h under mpirun, one case per run:
 *   dsm_basic PROTOCOL CASE
 * PROTOCOL ivy or rc; CASE one of:
 *   counter   every rank adds to two counters (on pages homed elsewhere)
 *             under two locks; the sums must be exact
 *   false     every rank writes its own bytes of one shared page (bytes
 *             r, r+N, r+2N, ...: byte-level false sharing), rounds apart
 *             by barriers; every rank checks every byte each round
 *   prodcons  a producer (rank round mod N) fills 5 pages; a barrier; every
 *             rank checks them; a barrier; 20 rounds
 *   sc        (ivy) message passing without barriers or locks: rank 0
 *             writes data then a flag, the others spin on the flag and
 *             must see the data (sequential consistency)
 *   mismatch  tk_dsm_alloc with a size that differs on one rank must fail
 *             on every rank with EINVAL and say so; a good one still works
 *   kill      the last rank kills itself (SIGKILL) in the middle of the
 *             counter loop; tests/dsm_run.sh checks that mpirun ends with
 *             an error that says so, in time
 *   threads   two threads per rank fault on the same pages at once
 *   signals   a timer signal's handler reads shared memory every 300 us
 *             while the thread takes and gives back a lock
 *   stress    random increments of 64 pages' counters under 16 locks: each
 *             counter holds exactly the increments made to it
 *   fork      a child of fork() touching a page its parent never had dies
 *             of SIGSEGV; the parent goes on
 *   layout    the ranks' address spaces differ (the gap between program
 *             and mmap area taken on all ranks but 0, mappings of each
 *             rank's own): allocations of 1-64 MiB get one range anyway
 *   single    MPI initialised without MPI_THREAD_MULTIPLE: tk_dsm_init
 *             refuses with ENOTSUP, saying why
 *   config    the ranks ask for different protocols, or a bad page size:
 *             refused on every rank; then a good init works
 * Exit 0 on success; a failed check prints and exits 1. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <trapkit/dsm.h>
#include <trapkit/error.h>

static int rank, size;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, #c);   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

static size_t ps;

static void counter(int kill_at)
{
    /* two counters on different pages, homed on the last pages (block:
     * the last rank's) so every rank but one works remotely */
    size_t n = 8 * ps;
    char *m = tk_dsm_alloc(n);
    CHECK(m, "alloc: %s", tk_last_error());
    volatile long *c0 = (long *)(m + n - ps), *c1 = (long *)(m + n - 2 * ps);
    const int iters = 200;
    for (int i = 0; i < iters; i++) {
        if (kill_at && rank == size - 1 && i == kill_at) raise(SIGKILL);
        CHECK(tk_dsm_lock(0) == 0, "lock: %s", tk_last_error());
        (*c0)++;
        CHECK(tk_dsm_unlock(0) == 0, "unlock: %s", tk_last_error());
        CHECK(tk_dsm_lock(1) == 0, "lock: %s", tk_last_error());
        *c1 += 2;
        CHECK(tk_dsm_unlock(1) == 0, "unlock: %s", tk_last_error());
    }
    tk_dsm_barrier();
    CHECK(*c0 == (long)iters * size, "counter 0 is %ld, not %ld", *c0, (long)iters * size);
    CHECK(*c1 == 2L * iters * size, "counter 1 is %ld, not %ld", *c1, 2L * iters * size);
    /* an unlock of a lock not held is refused */
    CHECK(tk_dsm_unlock(5) == -EINVAL, "unlock of a free lock accepted");
    CHECK(tk_dsm_lock(TK_DSM_LOCKS) == -EINVAL, "a lock id out of range accepted");
    tk_dsm_barrier();
    CHECK(tk_dsm_free(m) == 0, "free: %s", tk_last_error());
}

static void false_sharing(void)
{
    unsigned char *m = tk_dsm_alloc(3 * ps);
    CHECK(m, "alloc: %s", tk_last_error());
    unsigned char *pg = m + ps; /* the middle page: rank 0's or 1's home */
    for (int round = 1; round <= 30; round++) {
        for (size_t i = (size_t)rank; i < ps; i += (size_t)size)
            pg[i] = (unsigned char)(round * 7 + i);
        tk_dsm_barrier();
        for (size_t i = 0; i < ps; i++)
            CHECK(pg[i] == (unsigned char)(round * 7 + i), "round %d byte %zu is %u, not %u", round,
                  i, pg[i], (unsigned char)(round * 7 + i));
        tk_dsm_barrier();
    }
    tk_dsm_stats s;
    tk_dsm_get_stats(&s);
    if (tk_dsm_protocol() == TK_DSM_RC && size > 1 && rank != tk_dsm_home(pg))
        CHECK(s.diffs_sent >= 30, "%llu diffs sent", (unsigned long long)s.diffs_sent);
    CHECK(tk_dsm_free(m) == 0, "free: %s", tk_last_error());
}

static void prodcons(void)
{
    size_t n = 5 * ps;
    uint32_t *m = tk_dsm_alloc(n);
    CHECK(m, "alloc: %s", tk_last_error());
    for (int round = 0; round < 20; round++) {
        if (round % size == rank)
            for (size_t i = 0; i < n / 4; i++) m[i] = (uint32_t)(round * 1000003u + i);
        tk_dsm_barrier();
        for (size_t i = 0; i < n / 4; i++)
            CHECK(m[i] == (uint32_t)(round * 1000003u + i), "round %d word %zu is %u", round, i,
                  m[i]);
        tk_dsm_barrier();
    }
    tk_dsm_stats s;
    tk_dsm_get_stats(&s);
    if (size > 1) CHECK(s.pages_in > 0, "no page moved to rank %d", rank);
    CHECK(tk_dsm_free(m) == 0, "free: %s", tk_last_error());
}

static void sc(void)
{
    size_t n = 4 * ps;
    char *m = tk_dsm_alloc(n);
    CHECK(m, "alloc: %s", tk_last_error());
    volatile long *data = (long *)(m + ps), *flag = (long *)(m + 3 * ps);
    for (long round = 1; round <= 50; round++) {
        if (rank == 0) {
            *data = round * 11;
            *flag = round;
        } else {
            while (*flag < round) {
            }
            CHECK(*data >= round * 11, "round %ld: saw the flag before the data (%ld)", round,
                  *data);
        }
        /* (rank 0 must not run ahead of a reader by more than one round) */
        tk_dsm_barrier();
    }
    CHECK(tk_dsm_free(m) == 0, "free: %s", tk_last_error());
}

static void mismatch(void)
{
    size_t want = 4 * ps + (rank == size - 1 ? ps : 0);
    errno = 0;
    void *m = tk_dsm_alloc(want);
    CHECK(m == NULL, "an allocation whose size differs between ranks was made");
    CHECK(errno == EINVAL, "errno %d", errno);
    CHECK(strstr(tk_last_error(), "different sizes"), "message: %s", tk_last_error());
    errno = 0;
    CHECK(tk_dsm_alloc(0) == NULL && errno == EINVAL, "size 0 accepted");
    /* the failure left nothing behind: a good allocation works */
    long *g = tk_dsm_alloc(4 * ps);
    CHECK(g, "alloc: %s", tk_last_error());
    if (rank == 0) g[0] = 42;
    tk_dsm_barrier();
    CHECK(g[0] == 42, "%ld", g[0]);
    tk_dsm_barrier();
    CHECK(tk_dsm_free(g) == 0, "free");
    CHECK(tk_dsm_free(g) == -EINVAL, "a second free accepted");
}

/* The ranks' address spaces differ (as their randomised layouts do, more
 * so): every rank but 0 has the range between its program and its mmap
 * area taken, and each rank holds mappings of its own of different sizes.
 * Allocations of 1 to 64 MiB, some freed and some kept, still get one
 * range on every rank, and a rank's write reaches the others. */
static void layout(void)
{
    /* where rank 0's kernel would put its next mappings */
    uint64_t near0 = 0;
    if (rank == 0) {
        void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED, "mmap");
        near0 = (uint64_t)(uintptr_t)p;
        munmap(p, 4096);
    }
    MPI_Bcast(&near0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        /* 16-80 TiB: no range of the gap */
        void *g = mmap((void *)((uintptr_t)16 << 40), (size_t)64 << 40, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (g == MAP_FAILED) printf("rank %d: the gap could not be taken here\n", rank);
        /* and none of the 8 GiB around rank 0's next mappings (in pieces:
         * this rank's own mappings there stay) */
        size_t piece = (size_t)2 << 20, taken = 0;
        for (uint64_t a = (near0 & ~(uint64_t)(piece - 1)) - ((uint64_t)4 << 30);
             a < near0 + ((uint64_t)4 << 30); a += piece)
            taken += mmap((void *)(uintptr_t)a, piece, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
                          0) != MAP_FAILED;
        CHECK(taken > 1024, "only %zu pieces of 2 MiB near rank 0's mappings free here", taken);
    }
    for (int i = 0; i <= rank; i++) /* mappings of this rank's own */
        CHECK(mmap(NULL, ((size_t)1 << 20) << (3 * i), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) != MAP_FAILED,
              "mmap");
    long *kept[12];
    for (int k = 0; k < 12; k++) {
        size_t len = ((size_t)1 << 20) << (k % 7);
        long *m = tk_dsm_alloc(len);
        CHECK(m, "allocation %d of %zu bytes: %s", k, len, tk_last_error());
        size_t at = (size_t)k * 1000 % (len / sizeof(long));
        if (rank == k % size) m[at] = 1000 + k;
        tk_dsm_barrier();
        CHECK(m[at] == 1000 + k, "allocation %d: %ld", k, m[at]);
        tk_dsm_barrier();
        kept[k] = m;
        if (k % 3 == 1) {
            CHECK(tk_dsm_free(m) == 0, "free");
            kept[k] = NULL;
        }
    }
    for (int k = 0; k < 12; k++)
        if (kept[k]) CHECK(tk_dsm_free(kept[k]) == 0, "free");
}

/* A timer signal's handler reads shared memory while the thread it
 * interrupts takes locks (acquires and releases: under rc each acquire
 * drops the copies the handler then faults in again), possibly inside a
 * fault of its own. */
static volatile long *sig_pages;
static volatile sig_atomic_t sig_reads, sig_bad;
static void on_alarm(int sig)
{
    (void)sig;
    long v = sig_pages[(size_t)(sig_reads % 8) * ps / sizeof(long)];
    if (v != 4242) sig_bad = 1;
    sig_reads++;
}

static void signals(void)
{
    sig_pages = tk_dsm_alloc(8 * ps);
    long *ctr = tk_dsm_alloc(2 * ps);
    CHECK(sig_pages && ctr, "alloc: %s", tk_last_error());
    if (rank == 0)
        for (int p = 0; p < 8; p++) sig_pages[(size_t)p * ps / sizeof(long)] = 4242;
    tk_dsm_barrier();
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 300}, {0, 300}};
    setitimer(ITIMER_REAL, &it, NULL);
    const int iters = 300;
    for (int i = 0; i < iters; i++) {
        CHECK(tk_dsm_lock(3) == 0, "lock: %s", tk_last_error());
        ctr[ps / sizeof(long)]++;
        CHECK(tk_dsm_unlock(3) == 0, "unlock");
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    tk_dsm_barrier();
    CHECK(ctr[ps / sizeof(long)] == (long)iters * size, "counter %ld", ctr[ps / sizeof(long)]);
    CHECK(!sig_bad, "a handler read a wrong value");
    CHECK(sig_reads > 20, "only %d handler reads", (int)sig_reads);
    printf("rank %d: %d reads by the signal handler\n", rank, (int)sig_reads);
    tk_dsm_barrier();
    tk_dsm_free(ctr);
    tk_dsm_free((void *)sig_pages);
}

/* A child of fork() touching a page its parent never had dies of SIGSEGV;
 * the parent goes on. */
static void forked(void)
{
    long *m = tk_dsm_alloc(4 * ps);
    CHECK(m, "alloc: %s", tk_last_error());
    size_t remote = rank == 0 ? 3 : 0; /* (block placement: another rank's page) */
    if (size > 1) {
        pid_t c = fork();
        if (c == 0) {
            volatile long v = m[remote * ps / sizeof(long)];
            (void)v;
            _exit(0); /* (not reached) */
        }
        int st = 0;
        waitpid(c, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "the child: status %#x", st);
    }
    /* the DSM goes on in the parent */
    if (rank == 0) m[3 * ps / sizeof(long)] = 42;
    tk_dsm_barrier();
    CHECK(m[3 * ps / sizeof(long)] == 42, "after the child: %ld", m[3 * ps / sizeof(long)]);
    tk_dsm_barrier();
    tk_dsm_free(m);
}

/* Random increments of 64 pages' counters under 16 locks (a page's lock
 * its number mod 16), each counter in a different place of its page, and
 * each rank's counts summed at the end: every counter must hold exactly
 * the increments made to it. */
static void stress(void)
{
    enum { PAGES = 64, LOCKS = 16, OPS = 400 };
    char *m = tk_dsm_alloc(PAGES * ps);
    CHECK(m, "alloc: %s", tk_last_error());
    long mine[PAGES] = {0}, all[PAGES];
    unsigned seed = 12345u + (unsigned)rank * 7919u;
    for (int i = 0; i < OPS; i++) {
        seed = seed * 1103515245u + 12345u;
        int p = (int)((seed >> 8) % PAGES);
        volatile long *c = (long *)(m + (size_t)p * ps + (size_t)(p % 8) * 512);
        CHECK(tk_dsm_lock(p % LOCKS) == 0, "lock");
        (*c)++;
        CHECK(tk_dsm_unlock(p % LOCKS) == 0, "unlock");
        mine[p]++;
    }
    MPI_Allreduce(mine, all, PAGES, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    tk_dsm_barrier();
    for (int p = 0; p < PAGES; p++) {
        long v = *(long *)(m + (size_t)p * ps + (size_t)(p % 8) * 512);
        CHECK(v == all[p], "page %d: counter %ld, increments %ld", p, v, all[p]);
    }
    tk_dsm_barrier();
    tk_dsm_free(m);
}

static long *tshared;
static void *tbody(void *arg)
{
    long id = (long)arg;
    /* both threads read every page (many homed elsewhere), then write
     * their own words */
    long sum = 0;
    for (size_t i = 0; i < 16 * ps / sizeof(long); i += ps / sizeof(long)) sum += tshared[i];
    for (size_t pg = 0; pg < 16; pg++)
        tshared[pg * ps / sizeof(long) + 1 + (size_t)rank * 2 + (size_t)id] = rank * 10 + id;
    return (void *)sum;
}

static void threads(void)
{
    tshared = tk_dsm_alloc(16 * ps);
    CHECK(tshared, "alloc: %s", tk_last_error());
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, tbody, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    tk_dsm_barrier();
    for (size_t pg = 0; pg < 16; pg++)
        for (int r = 0; r < size; r++)
            for (int id = 0; id < 2; id++) {
                long v = tshared[pg * ps / sizeof(long) + 1 + (size_t)r * 2 + (size_t)id];
                CHECK(v == r * 10 + id, "page %zu rank %d thread %d: %ld", pg, r, id, v);
            }
    tk_dsm_barrier();
    CHECK(tk_dsm_free(tshared) == 0, "free");
}

int main(int argc, char **argv)
{
    int provided;
    bool single = argc == 3 && !strcmp(argv[2], "single");
    if (single) /* MPI without threads: refused, with the reason */
        MPI_Init(&argc, &argv);
    else
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        fprintf(stderr, "usage: dsm_basic ivy|rc counter|false|prodcons|sc|mismatch|kill|threads|"
                        "signals|stress|fork|layout|single|config\n");
        return 2;
    }
    tk_dsm_config cfg = {.protocol = !strcmp(argv[1], "rc") ? TK_DSM_RC : TK_DSM_IVY};
    if (single) {
        MPI_Query_thread(&provided);
        int rc = tk_dsm_init_config(MPI_COMM_WORLD, &cfg);
        CHECK(provided == MPI_THREAD_MULTIPLE || rc == -ENOTSUP, "init without threads: %d", rc);
        if (rc)
            CHECK(strstr(tk_last_error(), "MPI_THREAD_MULTIPLE"), "message: %s", tk_last_error());
        if (rank == 0)
            printf("without MPI_THREAD_MULTIPLE: %s\n", rc ? tk_last_error() : "accepted");
        if (!rc) tk_dsm_finalize();
        MPI_Finalize();
        return 0;
    }
    if (!strcmp(argv[2], "config")) { /* the ranks disagree: refused on every rank */
        tk_dsm_config other = {.protocol = rank == 0 ? TK_DSM_RC : TK_DSM_IVY};
        int rc = tk_dsm_init_config(MPI_COMM_WORLD, &other);
        CHECK(size == 1 || rc == -EINVAL, "init with different protocols: %d", rc);
        if (size > 1) CHECK(strstr(tk_last_error(), "disagree"), "message: %s", tk_last_error());
        if (rc == 0) tk_dsm_finalize();
        tk_dsm_config bad = {.page_size = 12345};
        CHECK(tk_dsm_init_config(MPI_COMM_WORLD, &bad) == -EINVAL, "page size 12345 accepted");
        errno = 0;
        CHECK(tk_dsm_alloc(4096) == NULL && errno == ENOTCONN, "alloc before init");
    }
    int rc = tk_dsm_init_config(MPI_COMM_WORLD, &cfg);
    CHECK(rc == 0, "tk_dsm_init: %s", tk_last_error());
    ps = tk_dsm_page_size();
    if (rank == 0)
        printf("dsm_basic %s %s: %d ranks, %s, %s\n", argv[1], argv[2], size,
               tk_dsm_protocol_name(tk_dsm_protocol()), tk_dsm_transport());
    const char *c = argv[2];
    if (!strcmp(c, "counter"))
        counter(0);
    else if (!strcmp(c, "kill"))
        counter(60);
    else if (!strcmp(c, "false"))
        false_sharing();
    else if (!strcmp(c, "prodcons"))
        prodcons();
    else if (!strcmp(c, "sc"))
        sc();
    else if (!strcmp(c, "mismatch"))
        mismatch();
    else if (!strcmp(c, "threads"))
        threads();
    else if (!strcmp(c, "stress"))
        stress();
    else if (!strcmp(c, "fork"))
        forked();
    else if (!strcmp(c, "signals"))
        signals();
    else if (!strcmp(c, "layout"))
        layout();
    else if (!strcmp(c, "config")) /* (the good init after the refused ones works) */
        prodcons();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    tk_dsm_stats s;
    tk_dsm_get_stats(&s);
    char ns[64] = "?";
    ssize_t nl = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    if (nl > 0) ns[nl] = 0;
    printf("rank %d (%s, %s): %llu read faults, %llu write faults, %llu pages in, %llu out, %llu "
           "invalidations, %llu diffs\n",
           rank, tk_mech_name(tk_dsm_mech()), ns, (unsigned long long)s.read_faults,
           (unsigned long long)s.write_faults, (unsigned long long)s.pages_in,
           (unsigned long long)s.pages_out, (unsigned long long)s.invalidations,
           (unsigned long long)s.diffs_sent);
    CHECK(tk_dsm_finalize() == 0, "finalize: %s", tk_last_error());
    MPI_Finalize();
    return 0;
}
