/* tools/ckpt_stall.c - where a writer's time goes while a snapshot runs.
 *
 * A model of a server thread: requests arrive on a fixed schedule (open
 * loop, --rate per second); the thread wakes every --tick-us, serves every
 * request that is due - --work-us of CPU, then one 8-byte write to a
 * random page of the area - and sleeps until the next tick.  A request's
 * latency runs from its scheduled arrival to the end of its write, so a
 * stall delays every request queued behind it.  --busy threads with the
 * same duty cycle stand for the other programs of the machine (the load
 * generator).  After --steady seconds the server thread itself starts a
 * snapshot (as kv-server's BGSAVE does), and --after seconds after the
 * snapshot ends the run stops.
 *
 * It prints latency percentiles before, during and after the snapshot, the
 * ten longest requests with when they were due (relative to the start of
 * the snapshot), the time the server thread spent inside stores that faulted
 * (a store slower than 1 us), and the checkpointer's statistics with the
 * breakdown of the write-fault path (TK_CKPT_TIMING).
 *
 *   ckpt_stall [--mech M] [--mib N] [--rate R] [--work-us W] [--tick-us T]
 *              [--busy B] [--busy-duty PCT] [--steady S] [--after S]
 *              [--incremental] [--async] [--watch MS] [--file PATH]
 *
 * --busy-duty sets the busy threads' share of a CPU (default: the server
 * thread's).  --mech precopy runs a model of iterative pre-copy instead of
 * the library (below): the same writer, the same latencies, for comparing
 * what a snapshot costs the writer either way.
 *
 * --watch MS prints every thread's kernel stack when the server thread has
 * served nothing for MS milliseconds (run as root).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <trapkit/checkpoint.h>
#include <trapkit/error.h>

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
    uint64_t end = now() + ns;
    while (now() < end) {
    }
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Latencies, log-linear: 32 sub-buckets per power of two. */
#define SUB 32
struct hist {
    uint64_t n, max, b[64 * SUB];
};

static void hist_add(struct hist *h, uint64_t v)
{
    h->n++;
    if (v > h->max) h->max = v;
    unsigned e = v < SUB ? 0 : 63 - (unsigned)__builtin_clzll(v) - 5;
    unsigned i = v < SUB ? (unsigned)v : e * SUB + (unsigned)(v >> e);
    if (i >= 64 * SUB) i = 64 * SUB - 1;
    h->b[i]++;
}

static uint64_t bucket_value(unsigned i)
{
    if (i < SUB) return i;
    unsigned e = i / SUB - 1;
    return ((uint64_t)(i % SUB + SUB) << e) + (1ull << e) - 1; /* bucket's upper bound */
}

static uint64_t hist_pct(const struct hist *h, double p)
{
    if (!h->n) return 0;
    uint64_t want = (uint64_t)ceil(p * (double)h->n), seen = 0;
    for (unsigned i = 0; i < 64 * SUB; i++) {
        seen += h->b[i];
        if (seen >= want) return bucket_value(i) < h->max ? bucket_value(i) : h->max;
    }
    return h->max;
}

static void hist_print(const char *name, const struct hist *h)
{
    printf("  %-8s %9" PRIu64 " requests  p50 %8.1f  p99 %8.1f  p99.9 %8.1f  max %9.1f us\n", name,
           h->n, hist_pct(h, 0.5) / 1e3, hist_pct(h, 0.99) / 1e3, hist_pct(h, 0.999) / 1e3,
           h->max / 1e3);
}

static atomic_bool stop;
static _Atomic uint64_t progress; /* requests served */
static int watch_ms;              /* --watch: dump the threads' kernel stacks in a stall */

/* Every millisecond: if the server thread has served nothing for watch_ms
 * while requests were due, prints every thread's state and kernel stack
 * (root only: /proc/self/task/T/stack), once per stall. */
static void *watch_main(void *arg)
{
    (void)arg;
    uint64_t last = 0, since = now();
    bool told = false;
    while (!atomic_load(&stop)) {
        usleep(1000);
        uint64_t p = atomic_load(&progress), n = now();
        if (p != last) {
            last = p, since = n, told = false;
            continue;
        }
        if (told || n - since < (uint64_t)watch_ms * 1000000u) continue;
        told = true;
        printf("  -- no request served for %d ms; the threads:\n", watch_ms);
        char path[64], buf[4096];
        for (int tid = getpid(); tid < getpid() + 64; tid++) {
            snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            if (fgets(buf, sizeof buf, f)) {
                char *e = strrchr(buf, ')');
                printf("  %d %.*s state %c\n", tid, (int)(e ? e - buf + 1 : 0), buf,
                       e ? e[2] : '?');
            }
            fclose(f);
            snprintf(path, sizeof path, "/proc/self/task/%d/stack", tid);
            if ((f = fopen(path, "r"))) {
                int lines = 0;
                while (fgets(buf, sizeof buf, f) && lines++ < 12) printf("      %s", buf);
                fclose(f);
            }
        }
        fflush(stdout);
    }
    return NULL;
}
static uint64_t tick_ns, work_ns, busy_pct;

static void *busy_main(void *arg)
{
    (void)arg;
    uint64_t t = now();
    while (!atomic_load(&stop)) {
        t += tick_ns;
        sleep_until(t);
        /* about the server's duty, or --busy-duty percent */
        uint64_t w = busy_pct ? tick_ns * busy_pct / 100 : tick_ns * work_ns / (work_ns + 2000);
        spin_ns(w);
    }
    return NULL;
}

/* ---- --mech precopy: a model of iterative pre-copy ----------------------
 * Not the library: what a snapshot costs the writer when its writes are
 * tracked by the kernel alone (userfaultfd's asynchronous write protection,
 * UFFD_FEATURE_WP_ASYNC, Linux 6.7: a write to a protected page is
 * resolved in the kernel, no signal, and PAGEMAP_SCAN reports it and
 * protects it again), as virtual machines are migrated: a background
 * thread writes every page to the image while the writer runs, then again
 * the pages written meanwhile, round after round, until few are left; the
 * writer then takes the instant itself between two requests (it is the
 * only writer): it scans the pages written since the last round and
 * copies them into memory (stop-and-copy), and the thread writes those
 * last.  The image is the pages at their places in the file. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef PAGEMAP_SCAN
#define PAGE_IS_WRITTEN (1 << 1)
struct page_region {
    uint64_t start, end, categories;
};
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif
#define PC_FINAL 2048 /* pages written in a round below which the writer takes the instant */
#define PC_BUF 4096   /* pages of memory populated ahead for the instant's copies */
#define PC_ROUNDS 12
#define PC_RUN 64

struct precopy {
    unsigned char *area;
    size_t len, ps;
    int uffd, pmfd, fd, dfd;
    _Atomic int state; /* 1 rounds, 2 ready for the instant, 3 final copy handed over, 4 done */
    struct page_region *vec;
    size_t nvec;
    unsigned char *final_buf;
    size_t *final_idx, final_n;
    size_t round_pages[PC_ROUNDS + 1];
    int rounds;
    uint64_t copied, t_start, t_end, pause_ns, thread_cpu;
};

static int pc_setup(struct precopy *p, unsigned char *area, size_t len, size_t ps, int fd,
                    const char *path)
{
    p->area = area, p->len = len, p->ps = ps, p->fd = fd;
    p->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (p->uffd < 0) return perror("userfaultfd"), -1;
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
    if (ioctl(p->uffd, UFFDIO_API, &api)) return perror("UFFDIO_API (WP_ASYNC)"), -1;
    struct uffdio_register reg = {.range = {(uintptr_t)area, len}, .mode = UFFDIO_REGISTER_MODE_WP};
    if (ioctl(p->uffd, UFFDIO_REGISTER, &reg)) return perror("UFFDIO_REGISTER"), -1;
    p->pmfd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (p->pmfd < 0) return perror("pagemap"), -1;
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    p->dfd = open(path ? path : fdpath, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (p->dfd < 0) p->dfd = fd;
    p->nvec = 65536;
    p->vec = malloc(p->nvec * sizeof *p->vec);
    if (fallocate(fd, 0, 0, (off_t)len)) perror("fallocate");
    p->final_buf = mmap(NULL, PC_BUF * ps, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    p->final_idx = malloc(PC_BUF * sizeof(size_t));
    return p->vec ? 0 : -1;
}

/* The runs of pages written since the last scan, protected again: fills
 * p->vec and returns how many, and the pages in *pages. */
static size_t pc_scan(struct precopy *p, size_t *pages)
{
    size_t n = 0;
    *pages = 0;
    uintptr_t at = (uintptr_t)p->area, end = at + p->len;
    while (at < end && n < p->nvec) {
        struct pm_scan_arg a = {.size = sizeof a,
                                .flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                                .start = at,
                                .end = end,
                                .vec = (uintptr_t)(p->vec + n),
                                .vec_len = p->nvec - n,
                                .category_mask = PAGE_IS_WRITTEN,
                                .return_mask = PAGE_IS_WRITTEN};
        long r = ioctl(p->pmfd, PAGEMAP_SCAN, &a);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("PAGEMAP_SCAN");
            exit(1);
        }
        for (long k = 0; k < r; k++) *pages += (p->vec[n + k].end - p->vec[n + k].start) / p->ps;
        n += (size_t)r;
        at = (uintptr_t)a.walk_end;
    }
    return n;
}

static void pc_write(struct precopy *p, const void *src, size_t bytes, uint64_t off, bool direct)
{
    while (bytes) {
        ssize_t w = pwrite(direct ? p->dfd : p->fd, src, bytes, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return perror("pwrite"), exit(1);
        src = (const char *)src + w, bytes -= (size_t)w, off += (uint64_t)w;
    }
}

static void *pc_main(void *arg)
{
    struct precopy *p = arg;
    struct sched_param sp = {0};
    sched_setscheduler(0, SCHED_IDLE, &sp);
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    /* round 0: every page, protected first */
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)p->area, p->len},
                                     .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    if (ioctl(p->uffd, UFFDIO_WRITEPROTECT, &wp)) return perror("UFFDIO_WRITEPROTECT"), NULL;
    for (size_t off = 0; off < p->len; off += PC_RUN * p->ps) {
        size_t n = p->len - off < PC_RUN * p->ps ? p->len - off : PC_RUN * p->ps;
        pc_write(p, p->area + off, n, off, true);
    }
    p->round_pages[0] = p->len / p->ps;
    p->copied = p->len / p->ps;
    int r = 1;
    for (; r <= PC_ROUNDS; r++) {
        size_t pages, n = pc_scan(p, &pages);
        p->round_pages[r] = pages;
        for (size_t k = 0; k < n; k++) {
            size_t bytes = p->vec[k].end - p->vec[k].start;
            /* long runs straight from memory, short ones through the page cache */
            pc_write(p, (void *)(uintptr_t)p->vec[k].start, bytes,
                     p->vec[k].start - (uintptr_t)p->area, bytes >= 16 * p->ps);
        }
        p->copied += pages;
        if (pages <= PC_FINAL) break;
    }
    p->rounds = r;
    atomic_store(&p->state, 2);
    while (atomic_load(&p->state) != 3) usleep(100);
    for (size_t k = 0; k < p->final_n; k++)
        pc_write(p, p->final_buf + k * p->ps, p->ps, p->final_idx[k] * p->ps, false);
    fdatasync(p->fd);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    p->thread_cpu =
        (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)(c1.tv_nsec - c0.tv_nsec);
    p->t_end = now();
    atomic_store(&p->state, 4);
    return NULL;
}

/* The instant, in the writer between two requests: the pages written since
 * the last round, copied into memory. */
static void pc_instant(struct precopy *p)
{
    uint64_t t0 = now();
    size_t pages, n = pc_scan(p, &pages);
    if (pages > PC_BUF) {
        p->final_buf = malloc(pages * p->ps);
        p->final_idx = malloc(pages * sizeof(size_t));
    }
    size_t j = 0;
    for (size_t k = 0; k < n; k++)
        for (uint64_t a = p->vec[k].start; a < p->vec[k].end; a += p->ps, j++) {
            memcpy(p->final_buf + j * p->ps, (void *)(uintptr_t)a, p->ps);
            p->final_idx[j] = (a - (uintptr_t)p->area) / p->ps;
        }
    p->final_n = j;
    p->pause_ns = now() - t0;
    atomic_store(&p->state, 3);
}

struct slow {
    uint64_t lat, due; /* due: relative to the snapshot's start */
};

int main(int argc, char **argv)
{
    const char *mech = "auto", *path = NULL;
    double mib = 256, rate = 20000, steady = 1, after = 1;
    double work_us = 2, tick_us = 100;
    int busy = 1;
    bool incremental = false, async = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--async")) { /* TK_CKPT_ASYNC_START */
            async = true;
            continue;
        }
        if (!strcmp(a, "--incremental")) {
            incremental = true;
            continue;
        }
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--mech"))
            mech = v;
        else if (!strcmp(a, "--mib"))
            mib = atof(v);
        else if (!strcmp(a, "--rate"))
            rate = atof(v);
        else if (!strcmp(a, "--work-us"))
            work_us = atof(v);
        else if (!strcmp(a, "--tick-us"))
            tick_us = atof(v);
        else if (!strcmp(a, "--busy"))
            busy = atoi(v);
        else if (!strcmp(a, "--steady"))
            steady = atof(v);
        else if (!strcmp(a, "--after"))
            after = atof(v);
        else if (!strcmp(a, "--busy-duty"))
            busy_pct = (uint64_t)atoi(v);
        else if (!strcmp(a, "--watch"))
            watch_ms = atoi(v);
        else if (!strcmp(a, "--file"))
            path = v;
        else
            goto usage;
    }
    bool pre = !strcmp(mech, "precopy");
    enum tk_ckpt_mech m = pre ? TK_CKPT_AUTO : tk_ckpt_mech_parse(mech);
    if (m == TK_CKPT_COUNT_ || (pre && incremental)) goto usage;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (size_t)(mib * 1048576) / ps * ps, npages = len / ps;
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return perror("mmap"), 1;
    uint64_t seed = 88172645463325252ull;
    for (size_t i = 0; i < len; i += 8) { /* incompressible, every page present */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        memcpy(area + i, &seed, 8);
    }
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar,
                          .nareas = 1,
                          .mech = m,
                          .flags = TK_CKPT_TIMING | (incremental ? TK_CKPT_TRACK : 0)};
    tk_ckpt *c = NULL;
    int err = pre ? 0 : tk_ckpt_create(&cfg, &c);
    if (err) return fprintf(stderr, "tk_ckpt_create: %s\n", tk_last_error()), 1;
    char tmp[] = "/var/tmp/ckpt-stall-XXXXXX";
    int fd = path ? open(path, O_RDWR | O_CREAT | O_TRUNC, 0600) : mkstemp(tmp);
    if (fd < 0) return perror("image"), 1;
    static struct precopy pc;
    pthread_t pc_thread;
    if (pre && pc_setup(&pc, area, len, ps, fd, path ? path : tmp)) return 1;
    if (!path) unlink(tmp);
    if (incremental) { /* a full image first; the measured one is incremental */
        if (tk_ckpt_snapshot(c, fd, 0, NULL))
            return fprintf(stderr, "snapshot: %s\n", tk_last_error()), 1;
    }

    tick_ns = (uint64_t)(tick_us * 1e3);
    work_ns = (uint64_t)(work_us * 1e3);
    pthread_t th[16];
    if (busy > 16) busy = 16;
    for (int b = 0; b < busy; b++) pthread_create(&th[b], NULL, busy_main, NULL);
    pthread_t watcher;
    if (watch_ms) pthread_create(&watcher, NULL, watch_main, NULL);

    static struct hist h[3];
    enum { BEFORE, DURING, AFTER };
    static const char *const names[3] = {"before", "during", "after"};
    struct slow worst[10] = {{0, 0}};
    double period = 1e9 / rate;
    uint64_t t0 = now(), snap_at = t0 + (uint64_t)(steady * 1e9), snap_end = UINT64_MAX;
    uint64_t stop_at = UINT64_MAX, k = 0, faulted = 0, fault_ns = 0, fault_max = 0;
    uint64_t snap_start = 0, start_ns = 0;
    bool started = false;
    volatile uint64_t sink = 0;
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    for (uint64_t tick = t0;; tick += tick_ns) {
        sleep_until(tick);
        uint64_t n = now();
        if (n >= stop_at) break;
        if (!started && n >= snap_at) {
            started = true;
            snap_start = n;
            if (pre) {
                pc.t_start = n;
                atomic_store(&pc.state, 1);
                pthread_create(&pc_thread, NULL, pc_main, &pc);
                start_ns = now() - n;
                goto serve;
            }
            err = tk_ckpt_start(
                c, fd, (incremental ? TK_CKPT_INCREMENTAL : 0) | (async ? TK_CKPT_ASYNC_START : 0));
            start_ns = now() - n;
            if (err) return fprintf(stderr, "tk_ckpt_start: %s\n", tk_last_error()), 1;
        }
        if (pre && started && atomic_load(&pc.state) == 2) pc_instant(&pc);
        if (started && snap_end == UINT64_MAX &&
            (pre ? atomic_load(&pc.state) == 4 : tk_ckpt_poll(c, NULL) == 0)) {
            snap_end = n;
            stop_at = n + (uint64_t)(after * 1e9);
        }
    serve:
        /* every request due by now */
        for (;; k++) {
            uint64_t due = t0 + (uint64_t)((double)k * period);
            if (due > now()) break;
            spin_ns(work_ns);
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            size_t page = (size_t)(rnd % npages), off = (size_t)(rnd >> 40) % (ps / 8) * 8;
            uint64_t s0 = now();
            __atomic_store_n((uint64_t *)(area + page * ps + off), k, __ATOMIC_RELAXED);
            uint64_t s1 = now();
            sink += s1;
            int ph = !started || due < snap_start ? BEFORE : due < snap_end ? DURING : AFTER;
            if (ph == DURING && s1 - s0 > 1000) {
                faulted++;
                fault_ns += s1 - s0;
                if (s1 - s0 > fault_max) fault_max = s1 - s0;
            }
            atomic_store_explicit(&progress, k, memory_order_relaxed);
            uint64_t lat = s1 - due;
            hist_add(&h[ph], lat);
            if (ph == DURING && lat > worst[9].lat) {
                int j = 9;
                while (j > 0 && worst[j - 1].lat < lat) {
                    worst[j] = worst[j - 1];
                    j--;
                }
                worst[j] = (struct slow){lat, due - snap_start};
            }
        }
    }
    atomic_store(&stop, true);
    for (int b = 0; b < busy; b++) pthread_join(th[b], NULL);
    if (watch_ms) pthread_join(watcher, NULL);
    if (pre) {
        pthread_join(pc_thread, NULL);
        printf("precopy (model), %.0f MiB, %.0f writes/s, %.1f us of work each, a %.0f us tick, "
               "%d busy\n",
               mib, rate, work_us, tick_us, busy);
        for (int p = 0; p < 3; p++) hist_print(names[p], &h[p]);
        printf("  slowest during (latency us @ due ms after start):");
        for (int j = 0; j < 10 && worst[j].lat; j++)
            printf(" %.0f@%.1f", worst[j].lat / 1e3, (double)(int64_t)worst[j].due / 1e6);
        printf("\n  stores that faulted: %" PRIu64 ", %.1f ms in all, longest %.1f us\n", faulted,
               fault_ns / 1e6, fault_max / 1e3);
        printf("  snapshot: %.0f ms, pause %.2f ms, %zu pages copied at the instant, %" PRIu64
               " pages written in all; pages per round:",
               (pc.t_end - pc.t_start) / 1e6, pc.pause_ns / 1e6, pc.final_n, pc.copied);
        for (int r = 0; r <= pc.rounds && r <= PC_ROUNDS; r++) printf(" %zu", pc.round_pages[r]);
        printf("\n  background thread: %.0f ms CPU\n", pc.thread_cpu / 1e6);
        return 0;
    }
    tk_ckpt_stats st;
    if (tk_ckpt_wait(c, &st)) return fprintf(stderr, "snapshot: %s\n", tk_last_error()), 1;

    printf(
        "%s, %.0f MiB, %.0f writes/s, %.1f us of work each, a %.0f us tick, %d busy thread%s%s\n",
        tk_ckpt_mech_name(m), mib, rate, work_us, tick_us, busy, busy == 1 ? "" : "s",
        incremental ? ", incremental" : "");
    for (int p = 0; p < 3; p++) hist_print(names[p], &h[p]);
    printf("  slowest during (latency us @ due ms after start):");
    for (int j = 0; j < 10 && worst[j].lat; j++)
        printf(" %.0f@%.1f", worst[j].lat / 1e3, (double)(int64_t)worst[j].due / 1e6);
    printf("\n  tk_ckpt_start took %.2f ms in the server thread\n", start_ns / 1e6);
    printf("  stores that faulted: %" PRIu64 ", %.1f ms in all, longest %.1f us\n", faulted,
           fault_ns / 1e6, fault_max / 1e3);
    printf("  snapshot: %.0f ms, pause %.2f ms, %" PRIu64 " of %" PRIu64 " pages saved, %" PRIu64
           " by writers, %" PRIu64 " faults, longest stall %.1f us\n",
           st.duration_ns / 1e6, st.pause_ns / 1e6, st.pages_saved, st.pages_total,
           st.pages_by_writers, st.faults, st.max_stall_ns / 1e3);
    printf("  background thread: %.0f ms CPU, %.0f ms in write system calls\n",
           st.thread_cpu_ns / 1e6, st.thread_io_ns / 1e6);
    printf("  fault path (sums): %.2f ms in all: pause %.2f, page %.2f, copy %.2f, unprot %.2f;"
           " delivery (store time - handler time) %.2f ms\n",
           st.stall_total_ns / 1e6, st.stall_pause_ns / 1e6, st.stall_page_ns / 1e6,
           st.stall_copy_ns / 1e6, st.stall_unprot_ns / 1e6,
           ((double)fault_ns - (double)st.stall_total_ns) / 1e6);
    tk_ckpt_destroy(c);
    (void)sink;
    return 0;
usage:
    fprintf(stderr, "usage: ckpt_stall [--mech M|precopy] [--mib N] [--rate R] [--work-us W] "
                    "[--tick-us T] [--busy B] [--busy-duty PCT] [--steady S] [--after S] "
                    "[--incremental] [--async] [--watch MS] [--file PATH]\n");
    return 2;
}
