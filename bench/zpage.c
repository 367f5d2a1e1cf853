/* bench/zpage.c - compressed paging (trapkit/zpage.h) beside the kernel's
 * zram swap.
 *
 * Data that compresses like real data, 3 sets of the same size:
 *   kv      a key-value heap of text-like records (JSON with words and
 *           numbers), as a kv-server holds them
 *   python  the anonymous memory of a Python interpreter that has built a
 *           large object graph, read through /proc/PID/mem
 *   doc     the uncompressed text files of /usr/share/doc
 *
 * Figures:
 *   zpage/fault-in-p50, -p99  (mechanisms lz4, zstd, uncompressed - the same
 *       fault path serving a plain copy - lz4-thread, zram): every page of
 *       the set dropped, then each touched once in random order, each touch
 *       timed; per repetition the median and 99th percentile.  zram: the
 *       set in plain memory pushed to swap on /dev/zram0 (lz4) with
 *       MADV_PAGEOUT, then touched the same way.  bare-sigbus and
 *       bare-sigbus-lz4: the floor of a fault path in the faulting thread,
 *       no library - the set's pages missing from an area registered with a
 *       userfaultfd of the benchmark's own (UFFD_FEATURE_SIGBUS), and a
 *       SIGBUS handler that places each page with UFFDIO_COPY from a plain
 *       copy, or after LZ4_decompress_safe into a buffer on its stack.
 *   zpage/fault-in-p50-over-uncompressed (lz4, zstd, lz4-thread, zram;
 *       bare-sigbus-lz4 over bare-sigbus), -over-zram (lz4) and -over-bare
 *       (uncompressed over bare-sigbus; lz4 and zram over bare-sigbus-lz4):
 *       paired, each repetition's p50 over the same repetition's, then the
 *       median [min, max] of those ratios.  Each repetition runs every
 *       mechanism once, starting at another one each time.
 *   zpage/ratio  (lz4, zstd, zram): the set's bytes over the bytes its
 *       compressed form takes (zram: mem_used_total of /sys/block/zram0).
 *   zpage/zipf-throughput  (lz4, zram, unlimited): reads and writes of
 *       256-byte records picked by a Zipfian law (theta 0.99, keys
 *       scattered over the heap) in a child process, the heap under a
 *       budget of 100%, 50% and 25% of its size: a zpage area with that
 *       budget, or plain memory in a memory cgroup (v1) with that limit
 *       swapping to zram.  "unlimited": plain memory, no limit.
 *   zpage/zipf-throughput-over-zram  (lz4): lz4's throughput over zram's,
 *       each repetition's two runs paired (they run one after the other),
 *       then the median [min, max] of those ratios.
 *   zpage/zipf-fault-ins-per-op  (lz4, zram; budgets 50% and 25%): pages
 *       brought back per op in those runs (zpage's fault-ins; zram's
 *       swap-ins, the child's major faults); zpage/zipf-time-per-fault-in:
 *       the run's time per op over the unlimited run's of the same
 *       repetition, per page brought back (what a fault-in costs the
 *       workload, eviction and waits included);
 *       zpage/zipf-sampling-faults-per-op (lz4): the clock hand's faults;
 *       zpage/zipf-resident-pages: the heap's pages in memory at the end
 *       (zpage's count; mincore for zram's plain heap).
 *
 * zram needs root, /dev/zram0 unused and a memory cgroup v1 hierarchy; the
 * benchmark sets it up (lz4, swap on it at a high priority) and puts it back
 * as it found it.  Where it cannot, the zram figures are null with the
 * reason.  The cgroup's limit is the budget plus 1 MiB for what else the
 * child holds (the pages it shares with its parent stay charged to the
 * parent's cgroup: v1 moves no charges; zipf-resident-pages shows the heap
 * getting about 2% over the budget, where 8 MiB gave it 24% at 50% and
 * 49% at 25%); its plain heap has transparent huge pages off, as the zpage
 * area has (userfaultfd places 4 KiB pages).  Under this thrashing cgroup v1
 * reclaim sometimes gives up and the OOM killer ends the child although swap
 * has room: such a run is run again (up to 3 times; "oom_kills" counts them).
 *
 * TK_BENCH_ZIPF_ONLY=1 runs the Zipfian part alone, TK_BENCH_FAULT_ONLY=1 the
 * kv set's fault-ins alone (TK_BENCH_FAULT_REPS=N repetitions of them, up to
 * 64); TK_BENCH_VERBOSE=1 prints each repetition's fault-in p50s and each
 * zpage child's counts (fault-ins, evictions, samples, waits).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/userfaultfd.h>
#include <lz4.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <trapkit/error.h>
#include <trapkit/zpage.h>
#include "bench.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define PAGE 4096u

static struct bench_opts opts;
static size_t set_pages; /* pages per data set */

/* ---- data sets ---------------------------------------------------------- */

static const char *words[] = {
    "the",     "of",     "and",     "to",      "in",     "is",      "for",     "that",
    "with",    "on",     "as",      "it",      "by",     "from",    "at",      "this",
    "user",    "order",  "item",    "price",   "status", "active",  "pending", "shipped",
    "memory",  "page",   "server",  "request", "cache",  "session", "token",   "region",
    "London",  "Paris",  "Berlin",  "Tokyo",   "Oslo",   "Lima",    "Cairo",   "Delhi",
    "alpha",   "beta",   "gamma",   "delta",   "red",    "green",   "blue",    "black",
    "quickly", "slowly", "network", "storage", "kernel", "signal",  "thread",  "process"};
#define NWORDS (sizeof words / sizeof words[0])

/* One text-like record of at most n bytes at out; returns its length. */
static size_t record(uint64_t *rng, char *out, size_t n)
{
    char buf[512];
    uint64_t r = bench_rand(rng);
    int len =
        snprintf(buf, sizeof buf,
                 "{\"id\":%llu,\"user\":\"%s_%s%u\",\"city\":\"%s\",\"score\":%u.%02u,"
                 "\"status\":\"%s\",\"text\":\"",
                 (unsigned long long)(r % 10000000), words[r % NWORDS], words[(r >> 8) % NWORDS],
                 (unsigned)(r >> 20) % 1000, words[32 + (r >> 30) % 8], (unsigned)(r >> 36) % 100,
                 (unsigned)(r >> 44) % 100, words[20 + (r >> 50) % 4]);
    /* words by a skewed law, as text has them */
    while (len < (int)n - 40) {
        uint64_t w = bench_rand(rng);
        unsigned k = (unsigned)((w % NWORDS) * ((w >> 32) % NWORDS) / NWORDS);
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%s ", words[k]);
    }
    len += snprintf(buf + len, sizeof buf - (size_t)len, "\"}\n");
    if ((size_t)len > n) len = (int)n;
    memcpy(out, buf, (size_t)len);
    return (size_t)len;
}

static void make_kv(unsigned char *d, size_t len)
{
    uint64_t rng = 12345;
    for (size_t off = 0; off + 256 <= len; off += 256) {
        size_t n = record(&rng, (char *)d + off, 256);
        memset(d + off + n, 0, 256 - n);
    }
}

/* The anonymous memory of a Python that built an object graph.  Returns
 * the bytes read (< len if it had fewer), or 0 with *why set. */
static size_t make_python(unsigned char *d, size_t len, const char **why)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return (*why = "pipe failed", 0);
    char nobj[32];
    snprintf(nobj, sizeof nobj, "%zu", len / 160);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execlp("python3", "python3", "-c",
               "import sys\n"
               "n = int(sys.argv[1])\n"
               "g = {}\n"
               "for i in range(n):\n"
               "    g['key%d' % i] = {'name': 'item %d' % i, 'price': i * 0.25,\n"
               "                      'tags': ['t%d' % (i % 97), 'c%d' % (i % 13)],\n"
               "                      'next': g.get('key%d' % (i // 2))}\n"
               "print('ready', flush=True)\n"
               "sys.stdin.read()\n",
               nobj, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char line[16] = {0};
    ssize_t got = read(out[0], line, sizeof line - 1);
    size_t n = 0;
    if (got <= 0 || strncmp(line, "ready", 5) != 0) {
        *why = "python3 did not start";
    } else {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
        FILE *maps = fopen(path, "r");
        snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
        int mem = open(path, O_RDONLY);
        char l[512];
        while (maps && mem >= 0 && n < len && fgets(l, sizeof l, maps)) {
            unsigned long lo, hi;
            char perm[8];
            int name = 0;
            if (sscanf(l, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perm, &name) < 3) continue;
            const char *nm = l + name;
            bool anon = *nm == '\n' || *nm == 0 || strncmp(nm, "[heap]", 6) == 0;
            if (strncmp(perm, "rw", 2) != 0 || !anon) continue;
            for (unsigned long a = lo; a < hi && n < len; a += PAGE) {
                if (pread(mem, d + n, PAGE, (off_t)a) == PAGE) n += PAGE;
            }
        }
        if (maps) fclose(maps);
        if (mem >= 0) close(mem);
        if (n == 0) *why = "cannot read the interpreter's memory";
    }
    close(in[1]);
    close(out[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return n;
}

static size_t read_docs(const char *dir, unsigned char *d, size_t n, size_t len)
{
    DIR *dp = opendir(dir);
    if (!dp) return n;
    struct dirent *e;
    while (n < len && (e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            n = read_docs(path, d, n, len);
        } else if (S_ISREG(st.st_mode)) {
            size_t l = strlen(e->d_name);
            if (l > 3 &&
                (strcmp(e->d_name + l - 3, ".gz") == 0 || strcmp(e->d_name + l - 3, ".xz") == 0))
                continue;
            int fd = open(path, O_RDONLY);
            if (fd < 0) continue;
            ssize_t r;
            while (n < len && (r = read(fd, d + n, len - n)) > 0) n += (size_t)r;
            close(fd);
        }
    }
    closedir(dp);
    return n;
}

/* ---- percentiles -------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t k = (size_t)(p * (double)(n - 1));
    return (double)v[k];
}

/* Touches every page of [p, p + pages) once in a random order, timing each
 * (ns); the times in t. */
static void touch_all(volatile unsigned char *p, size_t pages, uint64_t *t, uint64_t seed)
{
    size_t *order = malloc(pages * sizeof *order);
    for (size_t i = 0; i < pages; i++) order[i] = i;
    for (size_t i = pages - 1; i > 0; i--) {
        size_t j = bench_rand(&seed) % (i + 1);
        size_t x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    for (size_t k = 0; k < pages; k++) {
        uint64_t t0 = bench_now_ns();
        (void)p[order[k] * PAGE + 64];
        t[k] = bench_now_ns() - t0;
    }
    free(order);
}

/* ---- zram --------------------------------------------------------------- */

static const char *zram_why; /* why there is no zram figure, or NULL */
static bool zram_ours;       /* we set it up: tear it down */
static char cg_dir[512];     /* our memory cgroup for the limited runs */

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -errno;
    ssize_t r = write(fd, s, strlen(s));
    int e = r < 0 ? -errno : 0;
    close(fd);
    return e;
}

static int read_str(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -errno;
    ssize_t r = read(fd, buf, n - 1);
    close(fd);
    if (r < 0) return -errno;
    buf[r] = 0;
    return 0;
}

static int run(const char *cmd)
{
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void zram_down(void)
{
    if (cg_dir[0]) rmdir(cg_dir);
    if (!zram_ours) return;
    swapoff("/dev/zram0");
    write_str("/sys/block/zram0/reset", "1");
    zram_ours = false;
}

static void zram_up(size_t bytes)
{
    char buf[256];
    if (geteuid() != 0) {
        zram_why = "zram needs root";
        return;
    }
    if (read_str("/sys/block/zram0/disksize", buf, sizeof buf) != 0) {
        zram_why = "no /dev/zram0 (the kernel's zram module)";
        return;
    }
    if (strtoull(buf, NULL, 10) != 0) {
        zram_why = "/dev/zram0 is in use";
        return;
    }
    write_str("/sys/block/zram0/comp_algorithm", "lz4");
    snprintf(buf, sizeof buf, "%zu", bytes);
    if (write_str("/sys/block/zram0/disksize", buf) != 0) {
        zram_why = "cannot size /dev/zram0";
        return;
    }
    zram_ours = true;
    if (run("mkswap /dev/zram0 >/dev/null 2>&1") != 0 ||
        swapon("/dev/zram0", SWAP_FLAG_PREFER | (32767 << SWAP_FLAG_PRIO_SHIFT)) != 0) {
        zram_why = "cannot swap on /dev/zram0 (mkswap, swapon)";
        zram_down();
        return;
    }
    /* a memory cgroup (v1) beside ours */
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], mine[400] = "";
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, ":memory:");
        if (p) {
            snprintf(mine, sizeof mine, "%s", p + 8);
            mine[strcspn(mine, "\n")] = 0;
        }
    }
    if (f) fclose(f);
    snprintf(cg_dir, sizeof cg_dir, "/sys/fs/cgroup/memory%s/tk-zpage-bench", mine);
    if (mkdir(cg_dir, 0755) != 0 && errno != EEXIST) {
        cg_dir[0] = 0;
        zram_why = "no memory cgroup v1 to limit the process with";
        return;
    }
    /* reclaim takes anonymous memory (there is little else in the group) */
    snprintf(buf, sizeof buf, "%s/memory.swappiness", cg_dir);
    write_str(buf, "100");
}

struct zram_stat {
    uint64_t orig, compr, used, same;
};

static void zram_stat(struct zram_stat *s)
{
    char buf[256];
    memset(s, 0, sizeof *s);
    if (read_str("/sys/block/zram0/mm_stat", buf, sizeof buf) == 0)
        sscanf(buf, "%lu %lu %lu %*u %*u %lu", (unsigned long *)&s->orig,
               (unsigned long *)&s->compr, (unsigned long *)&s->used, (unsigned long *)&s->same);
}

/* Whether every page of [p, p+len) is out of memory (swapped). */
static size_t resident_pages(void *p, size_t len)
{
    size_t n = len / PAGE, c = 0;
    unsigned char *v = malloc(n);
    if (mincore(p, len, v) == 0)
        for (size_t i = 0; i < n; i++) c += v[i] & 1;
    free(v);
    return c;
}

/* ---- fault-in latency and ratio ----------------------------------------- */

enum { M_LZ4, M_ZSTD, M_NONE, M_LZ4_THREAD, M_BARE, M_BARE_LZ4, M_ZRAM, NMECH };
static const char *mech_name[NMECH] = {
    "lz4", "zstd", "uncompressed", "lz4-thread", "bare-sigbus", "bare-sigbus-lz4", "zram"};

struct figs {
    struct bench_fig p50[NMECH], p99[NMECH], ratio[NMECH];
};

static void one_zpage(int m, const unsigned char *data, size_t pages, uint64_t *t, struct figs *fg,
                      uint64_t seed)
{
    tk_zpage_config cfg = {.len = pages * PAGE,
                           .codec = m == M_ZSTD   ? TK_ZPAGE_ZSTD
                                    : m == M_NONE ? TK_ZPAGE_NONE
                                                  : TK_ZPAGE_LZ4,
                           .level = m == M_ZSTD ? 3 : 0,
                           .delivery = m == M_LZ4_THREAD ? TK_ZPAGE_THREAD : TK_ZPAGE_SIGBUS};
    tk_zpage *z;
    if (tk_zpage_create(&cfg, &z) != 0) {
        fprintf(stderr, "zpage: %s\n", tk_last_error());
        exit(1);
    }
    unsigned char *b = tk_zpage_base(z);
    memcpy(b, data, pages * PAGE);
    tk_zpage_trim(z, 0);
    tk_zpage_stats st;
    tk_zpage_stats_get(z, &st);
    if (st.stored_bytes) bench_add(&fg->ratio[m], (double)(pages * PAGE) / (double)st.stored_bytes);
    touch_all(b, pages, t, seed);
    bench_add(&fg->p50[m], pct(t, pages, 0.5));
    bench_add(&fg->p99[m], pct(t, pages, 0.99));
    tk_zpage_destroy(z);
}

/* The floor: what serving a missing page in the faulting thread costs with
 * nothing but the kernel's part and the copy (or the decompression).  The
 * handler is the benchmark's own for the run; trapkit's comes back after. */
static struct {
    int uffd;
    unsigned char *base;
    const unsigned char *plain; /* the set, uncompressed */
    char **cz;                  /* each page's LZ4 form (bare-sigbus-lz4) */
    int *clen;
} bare;

static void bare_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr & ~(uintptr_t)(PAGE - 1);
    size_t i = (a - (uintptr_t)bare.base) / PAGE;
    unsigned char buf[PAGE] __attribute__((aligned(64)));
    const void *src = bare.plain + i * PAGE;
    if (bare.cz) {
        if (LZ4_decompress_safe(bare.cz[i], (char *)buf, bare.clen[i], PAGE) != PAGE) abort();
        src = buf;
    }
    struct uffdio_copy c = {.dst = a, .src = (uintptr_t)src, .len = PAGE};
    if (ioctl(bare.uffd, UFFDIO_COPY, &c) != 0 && errno != EEXIST) abort();
}

/* Returns NULL, or why this repetition has no bare figure. */
static const char *one_bare(int m, const unsigned char *data, size_t pages, uint64_t *t,
                            struct figs *fg, uint64_t seed)
{
    size_t len = pages * PAGE;
    const char *why = NULL;
    memset(&bare, 0, sizeof bare);
    bare.plain = data;
    if (m == M_BARE_LZ4) {
        bare.cz = calloc(pages, sizeof *bare.cz);
        bare.clen = calloc(pages, sizeof *bare.clen);
        if (!bare.cz || !bare.clen) abort();
        for (size_t i = 0; i < pages; i++) {
            char tmp[LZ4_COMPRESSBOUND(PAGE)];
            bare.clen[i] =
                LZ4_compress_default((const char *)data + i * PAGE, tmp, PAGE, (int)sizeof tmp);
            if (bare.clen[i] <= 0 || !(bare.cz[i] = malloc((size_t)bare.clen[i]))) abort();
            memcpy(bare.cz[i], tmp, (size_t)bare.clen[i]);
        }
    }
    bare.base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bare.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_SIGBUS};
    struct uffdio_register reg = {.range = {.start = (uintptr_t)bare.base, .len = len},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (bare.base == MAP_FAILED || bare.uffd < 0 || ioctl(bare.uffd, UFFDIO_API, &api) != 0 ||
        ioctl(bare.uffd, UFFDIO_REGISTER, &reg) != 0) {
        why = "no userfaultfd with UFFD_FEATURE_SIGBUS";
    } else {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = bare_handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &old);
        touch_all(bare.base, pages, t, seed);
        sigaction(SIGBUS, &old, NULL);
        bench_add(&fg->p50[m], pct(t, pages, 0.5));
        bench_add(&fg->p99[m], pct(t, pages, 0.99));
    }
    if (bare.uffd >= 0) close(bare.uffd);
    if (bare.base != MAP_FAILED) munmap(bare.base, len);
    if (bare.cz)
        for (size_t i = 0; i < pages; i++) free(bare.cz[i]);
    free(bare.cz);
    free(bare.clen);
    return why;
}

/* Returns NULL, or why this repetition has no zram figure. */
static const char *one_zram(const unsigned char *data, size_t pages, uint64_t *t, struct figs *fg,
                            uint64_t seed)
{
    size_t len = pages * PAGE;
    unsigned char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memcpy(b, data, len);
    struct zram_stat s0, s1;
    zram_stat(&s0);
    for (int k = 0; k < 10 && resident_pages(b, len) > 0; k++) {
        if (k) usleep(10000);
        madvise(b, len, MADV_PAGEOUT);
    }
    zram_stat(&s1);
    size_t left = resident_pages(b, len);
    if (left > pages / 100) {
        munmap(b, len);
        return "MADV_PAGEOUT left pages in memory";
    }
    if (s1.used > s0.used) bench_add(&fg->ratio[M_ZRAM], (double)len / (double)(s1.used - s0.used));
    touch_all(b, pages, t, seed);
    bench_add(&fg->p50[M_ZRAM], pct(t, pages, 0.5));
    bench_add(&fg->p99[M_ZRAM], pct(t, pages, 0.99));
    munmap(b, len);
    return NULL;
}

static void fault_in(const char *set, const unsigned char *data, size_t pages)
{
    struct figs fg;
    memset(&fg, 0, sizeof fg);
    uint64_t *t = malloc(pages * sizeof *t);
    const char *zr_why = zram_why;            /* why a repetition had no zram figure */
    const char *bare_why = NULL;              /* ... no bare-sigbus figure */
    int reps = opts.reps < 5 ? opts.reps : 5; /* 8,192 faults each */
    if (opts.quick) reps = 3;
    if (getenv("TK_BENCH_FAULT_REPS")) reps = atoi(getenv("TK_BENCH_FAULT_REPS"));
    if (reps < 1 || reps > 64) reps = reps < 1 ? 1 : 64; /* (a figure holds 64) */
    /* paired per repetition: lz4 (and the others) over the same
     * repetition's uncompressed run, zram's, and the bare floor's */
    struct bench_fig over_none[NMECH], over_zram[NMECH], over_bare[NMECH];
    memset(over_none, 0, sizeof over_none);
    memset(over_zram, 0, sizeof over_zram);
    memset(over_bare, 0, sizeof over_bare);
    for (int rep = 0; rep < reps; rep++) {
        uint64_t seed = 77 + (uint64_t)rep;
        int had[NMECH];
        for (int m = 0; m < NMECH; m++) had[m] = fg.p50[m].n;
        /* each repetition starts at another mechanism, so that none is
         * always first (or always right after zram's swapping) */
        for (int k = 0; k < NMECH; k++) {
            int m = (k + rep) % NMECH;
            if (m == M_ZRAM) {
                if (!zram_why) {
                    const char *why = one_zram(data, pages, t, &fg, seed);
                    if (why) zr_why = why;
                }
            } else if (m == M_BARE || m == M_BARE_LZ4) {
                const char *why = one_bare(m, data, pages, t, &fg, seed);
                if (why) bare_why = why;
            } else {
                one_zpage(m, data, pages, t, &fg, seed);
            }
        }
        double now[NMECH];
        for (int m = 0; m < NMECH; m++)
            now[m] = fg.p50[m].n > had[m] ? fg.p50[m].v[fg.p50[m].n - 1] : 0;
        if (getenv("TK_BENCH_VERBOSE")) {
            fprintf(stderr, "rep %d:", rep);
            for (int m = 0; m < NMECH; m++) fprintf(stderr, " %s %.0f", mech_name[m], now[m]);
            fprintf(stderr, "\n");
        }
        for (int m = 0; m < NMECH; m++) {
            if (!now[m]) continue;
            bool coded = m == M_LZ4 || m == M_ZSTD || m == M_LZ4_THREAD || m == M_ZRAM;
            if (coded && now[M_NONE]) bench_add(&over_none[m], now[m] / now[M_NONE]);
            if (m == M_BARE_LZ4 && now[M_BARE]) bench_add(&over_none[m], now[m] / now[M_BARE]);
        }
        if (now[M_LZ4] && now[M_ZRAM]) bench_add(&over_zram[M_LZ4], now[M_LZ4] / now[M_ZRAM]);
        if (now[M_NONE] && now[M_BARE]) bench_add(&over_bare[M_NONE], now[M_NONE] / now[M_BARE]);
        if (now[M_BARE_LZ4])
            for (int m = 0; m < NMECH; m++)
                if ((m == M_LZ4 || m == M_ZRAM) && now[m])
                    bench_add(&over_bare[m], now[m] / now[M_BARE_LZ4]);
    }
    char params[64];
    snprintf(params, sizeof params, "\"data\": \"%s\", \"pages\": %zu", set, pages);
    for (int m = 0; m < NMECH; m++) {
        if (m == M_ZRAM && !fg.p50[m].n) {
            const char *why = zr_why ? zr_why : "no repetition completed";
            bench_emit_null("zpage/fault-in-p50", "zram", params, "time", "ns", why);
            bench_emit_null("zpage/fault-in-p99", "zram", params, "time", "ns", why);
            bench_emit_null("zpage/ratio", "zram", params, "ratio", "x", why);
            continue;
        }
        if ((m == M_BARE || m == M_BARE_LZ4) && !fg.p50[m].n) {
            const char *why = bare_why ? bare_why : "no repetition completed";
            bench_emit_null("zpage/fault-in-p50", mech_name[m], params, "time", "ns", why);
            bench_emit_null("zpage/fault-in-p99", mech_name[m], params, "time", "ns", why);
            continue;
        }
        bench_emit("zpage/fault-in-p50", mech_name[m], params, "time", "ns", &fg.p50[m]);
        bench_emit("zpage/fault-in-p99", mech_name[m], params, "time", "ns", &fg.p99[m]);
        if (m == M_LZ4 || m == M_ZSTD || m == M_ZRAM)
            bench_emit("zpage/ratio", mech_name[m], params, "ratio", "x", &fg.ratio[m]);
    }
    for (int m = 0; m < NMECH; m++) {
        if (over_none[m].n)
            bench_emit("zpage/fault-in-p50-over-uncompressed", mech_name[m], params, "ratio", "x",
                       &over_none[m]);
        if (over_bare[m].n)
            bench_emit("zpage/fault-in-p50-over-bare", mech_name[m], params, "ratio", "x",
                       &over_bare[m]);
        if (over_zram[m].n)
            bench_emit("zpage/fault-in-p50-over-zram", mech_name[m], params, "ratio", "x",
                       &over_zram[m]);
    }
    free(t);
}

/* ---- the Zipfian key-value workload ------------------------------------- */

#define REC 256u
/* what the child itself charges to the cgroup beside its heap (the stack
 * and libraries' data it writes, page tables): added to the limit */
#define SLACK (1u << 20)

struct zipf {
    double theta, zetan, alpha, eta;
    uint64_t n;
};

static void zipf_init(struct zipf *z, uint64_t n, double theta)
{
    double zeta2 = 0;
    z->zetan = 0;
    for (uint64_t i = 1; i <= n; i++) z->zetan += 1.0 / pow((double)i, theta);
    for (uint64_t i = 1; i <= 2; i++) zeta2 += 1.0 / pow((double)i, theta);
    z->theta = theta;
    z->n = n;
    z->alpha = 1.0 / (1.0 - theta);
    z->eta = (1 - pow(2.0 / (double)n, 1 - theta)) / (1 - zeta2 / z->zetan);
}

/* Gray et al.'s generator: rank 0 is the most popular. */
static uint64_t zipf_next(const struct zipf *z, uint64_t *rng)
{
    double u = (double)(bench_rand(rng) >> 11) / 9007199254740992.0;
    double uz = u * z->zetan;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + pow(0.5, z->theta)) return 1;
    uint64_t r = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1, z->alpha));
    return r < z->n ? r : z->n - 1;
}

/* What a run measured: ops/s, and per op the pages brought back (zpage's
 * fault-ins; for plain memory the major faults, zram's swap-ins) and
 * zpage's sampling faults (the clock hand's; the kernel's reclaim reads
 * accessed bits instead, which costs the program no fault). */
struct kv_result {
    double rate, fault_ins, samples;
    double resident; /* heap pages in memory at the end */
};

/* f[0]: pages brought back so far, f[1]: sampling faults (zpage only). */
static void kv_faults(tk_zpage *z, uint64_t f[2])
{
    if (z) {
        tk_zpage_stats st;
        tk_zpage_stats_get(z, &st);
        f[0] = st.fault_ins;
        f[1] = st.sample_faults;
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        f[0] = (uint64_t)ru.ru_majflt;
        f[1] = 0;
    }
}

/* The heap's pages in memory: zpage's count, or mincore's for plain memory
 * (a page swapped out to zram is not in memory). */
static size_t heap_resident(tk_zpage *z, unsigned char *heap, size_t len)
{
    if (z) {
        tk_zpage_stats st;
        tk_zpage_stats_get(z, &st);
        return st.resident;
    }
    size_t n = len / PAGE, in = 0;
    unsigned char *vec = malloc(n);
    if (!vec || mincore(heap, len, vec) != 0) {
        free(vec);
        return 0;
    }
    for (size_t i = 0; i < n; i++) in += vec[i] & 1;
    free(vec);
    return in;
}

/* The child: fills a heap of nrec records and runs the workload for
 * `secs`; writes its kv_result to fd.  how: 0 plain memory, 1 zpage
 * (budget). */
static unsigned char *kv_image; /* the heap's records, made once by the parent */

static void kv_child(int how, size_t nrec, size_t budget, double secs, int fd)
{
    size_t len = nrec * REC;
    unsigned char *heap;
    tk_zpage *z = NULL;
    if (how == 1) {
        tk_zpage_config cfg = {.len = len, .budget = budget};
        if (tk_zpage_create(&cfg, &z) != 0) _exit(3);
        heap = tk_zpage_base(z);
    } else {
        heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (heap == MAP_FAILED) _exit(3);
        /* 4 KiB pages, as the zpage area has (userfaultfd places small
         * pages): the comparison is of paging, not of TLB reach */
        madvise(heap, len, MADV_NOHUGEPAGE);
    }
    memcpy(heap, kv_image, len);
    struct zipf zf;
    zipf_init(&zf, nrec, 0.99);
    uint64_t rng = 4242;
    uint64_t ops = 0, sum = 0;
    uint64_t f0[2] = {0, 0};
    /* warm-up: a second's worth, then measure */
    for (int phase = 0; phase < 2; phase++) {
        if (phase) kv_faults(z, f0);
        uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)((phase ? secs : secs / 3) * 1e9);
        ops = 0;
        while (bench_now_ns() < end) {
            for (int k = 0; k < 256; k++) {
                uint64_t key = zipf_next(&zf, &rng);
                /* keys scattered over the heap: a multiplicative hash */
                size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) % nrec);
                unsigned char *r = heap + slot * REC;
                if ((bench_rand(&rng) & 15) == 0) {
                    r[8] = (unsigned char)(r[8] + 1); /* an update, 1 in 16 */
                } else {
                    for (unsigned i = 0; i < REC; i += 8) {
                        uint64_t v;
                        memcpy(&v, r + i, 8);
                        sum += v;
                    }
                }
            }
            ops += 256;
        }
        if (phase) {
            double s = (double)(bench_now_ns() - t0) / 1e9;
            uint64_t f1[2];
            kv_faults(z, f1);
            struct kv_result res = {
                .rate = (double)ops / s,
                .fault_ins = (double)(f1[0] - f0[0]) / (double)ops,
                .samples = (double)(f1[1] - f0[1]) / (double)ops,
                .resident = (double)heap_resident(z, heap, len),
            };
            if (write(fd, &res, sizeof res) != sizeof res) _exit(4);
        }
    }
    if (sum == 42) fprintf(stderr, " ");
    if (z && getenv("TK_BENCH_VERBOSE")) {
        tk_zpage_stats st;
        tk_zpage_stats_get(z, &st);
        fprintf(stderr,
                "  budget %zu pages: %llu ops, resident %llu, fault-ins %llu, evictions %llu, "
                "samples %llu, waits %llu\n",
                budget / PAGE, (unsigned long long)ops, (unsigned long long)st.resident,
                (unsigned long long)st.fault_ins, (unsigned long long)st.evictions,
                (unsigned long long)st.sample_faults, (unsigned long long)st.waits);
    }
    if (z) tk_zpage_destroy(z);
    _exit(0);
}

/* Runs kv_child in a child process; with limit > 0 inside our memory cgroup
 * limited to that many bytes.  Returns ops/s; -2 when the kernel killed the
 * child before it measured (the memory cgroup's OOM killer: under this
 * thrashing, cgroup v1 reclaim sometimes gives up although swap has room);
 * -1 on another failure. */
static double kv_run(int how, size_t nrec, size_t budget, size_t limit, double secs,
                     struct kv_result *res)
{
    int p[2];
    if (pipe(p)) return -1;
    char lim[32];
    if (limit) {
        char path[600];
        snprintf(path, sizeof path, "%s/memory.limit_in_bytes", cg_dir);
        snprintf(lim, sizeof lim, "%zu", limit);
        if (write_str(path, lim) != 0) return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (limit) {
            char path[600], me[32];
            snprintf(path, sizeof path, "%s/cgroup.procs", cg_dir);
            snprintf(me, sizeof me, "%d", (int)getpid());
            if (write_str(path, me) != 0) _exit(5);
        }
        kv_child(how, nrec, budget, secs, p[1]);
    }
    close(p[1]);
    struct kv_result got;
    bool measured = read(p[0], &got, sizeof got) == sizeof got;
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    if (measured) { /* (what happens to it after does not matter) */
        if (res) *res = got;
        return got.rate;
    }
    if (getenv("TK_BENCH_VERBOSE"))
        fprintf(stderr, "  child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? -2 : -1;
}

/* A run's pages brought back per op, and what each cost the workload: its
 * time per op over the unlimited run's of the same repetition (unl ops/s),
 * divided by the pages brought back per op (eviction, sampling and waits
 * included). */
static void zipf_faults(const struct kv_result *res, double unl, struct bench_fig *fpo,
                        struct bench_fig *tpf)
{
    bench_add(fpo, res->fault_ins);
    if (unl > 0 && res->fault_ins > 0)
        bench_add(tpf, (1e9 / res->rate - 1e9 / unl) / res->fault_ins);
}

static void zipf_throughput(void)
{
    size_t nrec = opts.quick ? (16u << 20) / REC : (64u << 20) / REC;
    size_t len = nrec * REC;
    double secs = opts.quick ? 0.2 : 1.5;
    static const int pcts[] = {100, 50, 25};
    struct bench_fig zp[3], zr[3], none;
    /* [0] lz4, [1] zram: fault-ins per op, time per fault-in; lz4's
     * sampling faults per op */
    struct bench_fig fpo[2][3], tpf[2][3], spo[3], rsd[2][3];
    /* lz4 over zram, each repetition's two runs (one after the other) */
    struct bench_fig paired[3];
    memset(paired, 0, sizeof paired);
    memset(zp, 0, sizeof zp);
    memset(zr, 0, sizeof zr);
    memset(&none, 0, sizeof none);
    memset(fpo, 0, sizeof fpo);
    memset(tpf, 0, sizeof tpf);
    memset(spo, 0, sizeof spo);
    memset(rsd, 0, sizeof rsd);
    const char *zr_why[3] = {zram_why, zram_why, zram_why};
    int oom[3] = {0, 0, 0};
    int reps = opts.reps < 3 ? opts.reps : 3;
    if (opts.quick) reps = 2;
    kv_image = malloc(len);
    if (!kv_image) return;
    make_kv(kv_image, len);
    for (int rep = 0; rep < reps; rep++) {
        double unl = kv_run(0, nrec, 0, 0, secs, NULL);
        if (unl > 0) bench_add(&none, unl);
        for (int b = 0; b < 3; b++) {
            size_t budget = len * (size_t)pcts[b] / 100;
            bench_progress("zipf: %d%% budget, repetition %d", pcts[b], rep + 1);
            struct kv_result res;
            double r = kv_run(1, nrec, budget, 0, secs, &res), r_lz4 = r;
            if (r > 0) {
                bench_add(&zp[b], r);
                zipf_faults(&res, unl, &fpo[0][b], &tpf[0][b]);
                bench_add(&spo[b], res.samples);
                bench_add(&rsd[0][b], res.resident);
            }
            /* the heap's budget plus what else the child keeps in memory;
             * a run the OOM killer ends is run again, up to 3 times */
            for (int attempt = 0; !zr_why[b] && attempt < 3; attempt++) {
                r = kv_run(0, nrec, 0, budget + SLACK, secs, &res);
                if (r > 0) {
                    bench_add(&zr[b], r);
                    if (r_lz4 > 0) bench_add(&paired[b], r_lz4 / r);
                    zipf_faults(&res, unl, &fpo[1][b], &tpf[1][b]);
                    bench_add(&rsd[1][b], res.resident);
                    break;
                }
                if (r == -2) {
                    oom[b]++;
                    if (attempt == 2 && !zr[b].n)
                        zr_why[b] =
                            "the memory cgroup's OOM killer ended every run under the limit";
                } else {
                    zr_why[b] = "the child under the memory cgroup failed";
                }
            }
        }
    }
    char params[96];
    snprintf(params, sizeof params, "\"budget\": \"none\", \"heap_mib\": %zu", len >> 20);
    bench_emit("zpage/zipf-throughput", "unlimited", params, "ops_per_s", "ops/s", &none);
    for (int b = 0; b < 3; b++) {
        snprintf(params, sizeof params, "\"budget\": \"%d%%\", \"heap_mib\": %zu", pcts[b],
                 len >> 20);
        bench_emit("zpage/zipf-throughput", "lz4", params, "ops_per_s", "ops/s", &zp[b]);
        char extra[64];
        snprintf(extra, sizeof extra, "\"oom_kills\": %d", oom[b]);
        if (!zr[b].n)
            bench_emit_null_ex("zpage/zipf-throughput", "zram", params, "ops_per_s", "ops/s",
                               zr_why[b] ? zr_why[b] : "no run completed", extra);
        else
            bench_emit_ex("zpage/zipf-throughput", "zram", params, "ops_per_s", "ops/s", &zr[b],
                          extra);
        if (paired[b].n)
            bench_emit("zpage/zipf-throughput-over-zram", "lz4", params, "ratio", "x", &paired[b]);
        if (pcts[b] == 100) continue; /* (next to nothing brought back) */
        static const char *const who[2] = {"lz4", "zram"};
        for (int w = 0; w < 2; w++) {
            if (!fpo[w][b].n) continue;
            bench_emit("zpage/zipf-fault-ins-per-op", who[w], params, "count", "pages", &fpo[w][b]);
            if (tpf[w][b].n)
                bench_emit("zpage/zipf-time-per-fault-in", who[w], params, "time", "ns",
                           &tpf[w][b]);
            bench_emit("zpage/zipf-resident-pages", who[w], params, "count", "pages", &rsd[w][b]);
        }
        if (spo[b].n)
            bench_emit("zpage/zipf-sampling-faults-per-op", "lz4", params, "count", "faults",
                       &spo[b]);
    }
    free(kv_image);
}

int main(int argc, char **argv)
{
    bench_parse(argc, argv, &opts);
    set_pages = opts.quick ? 1024 : 8192; /* 4 or 32 MiB */
    size_t len = set_pages * PAGE;
    unsigned char *data = malloc(len);
    if (!data) return 1;
    zram_up((size_t)1 << 30);
    atexit(zram_down);
    signal(SIGINT, SIG_DFL);

    if (getenv(
            "TK_BENCH_ZIPF_ONLY")) { /* the Zipfian runs alone (TK_BENCH_VERBOSE: their counts) */
        zipf_throughput();
        return 0;
    }
    bench_progress("kv records");
    make_kv(data, len);
    fault_in("kv", data, set_pages);
    if (getenv("TK_BENCH_FAULT_ONLY")) return 0; /* the kv set's fault-ins alone */

    bench_progress("a Python interpreter's memory");
    const char *why = NULL;
    memset(data, 0, len);
    size_t n = make_python(data, len, &why);
    if (n >= len / 4) {
        fault_in("python", data, n / PAGE);
    } else {
        char params[64];
        snprintf(params, sizeof params, "\"data\": \"python\"");
        bench_emit_null("zpage/ratio", "lz4", params, "ratio", "x",
                        why ? why : "the interpreter had too little memory");
    }

    bench_progress("/usr/share/doc");
    memset(data, 0, len);
    n = read_docs("/usr/share/doc", data, 0, len);
    n -= n % PAGE;
    if (n >= len / 4) fault_in("doc", data, n / PAGE);

    zipf_throughput();
    free(data);
    return 0;
}
