/* tools/ckpt_restore.c - lazy against eager restore of one image, side by
 * side: the time until the first page touched is answered, and until every
 * page is in place.
 *
 *   ckpt_restore [--mib N] [--file PATH] [--compress] [--reps R]
 *                [--cache warm|dropped|both] [--keep]
 *
 * It fills an area of N MiB (default 1024: half random pages, half text, as
 * a store of values holds), takes a full image of it into PATH (default
 * /var/tmp/tk-restore.img; --keep reuses one that is there), then, R times
 * (default 3) and interleaved, restores it into fresh memory:
 *   eager  tk_ckpt_restore; the first page is answered when it returns
 *   lazy   tk_ckpt_restore_lazy, then one read of a random page (the first
 *          request), then tk_ckpt_lazy_wait
 * with the image in the page cache (warm) and after
 * `echo 3 > /proc/sys/vm/drop_caches` (dropped; root only).  Each run is a
 * line of JSON: {"mode", "cache", "size_mib", "first_ms", "resident_ms",
 * "faults"}; the last lines are the medians, min and max per mode and cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <trapkit/error.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0) return -errno;
    int r = write(fd, "3\n", 2) == 2 ? 0 : -errno;
    close(fd);
    return r;
}

static void make_image(const char *path, size_t len, bool compress)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    uint64_t s = 88172645463325252ull;
    for (size_t p = 0; p < len / ps; p++) {
        unsigned char *pg = a + p * ps;
        if (p % 2 == 0) {
            for (size_t i = 0; i < ps; i += 8) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                memcpy(pg + i, &s, 8);
            }
        } else {
            for (size_t i = 0; i < ps; i++) pg[i] = (unsigned char)("key:value:"[(i + p) % 10]);
        }
    }
    struct tk_ckpt_area ar = {a, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1};
    tk_ckpt *c;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || tk_ckpt_create(&cfg, &c) < 0 ||
        tk_ckpt_snapshot(c, fd, compress ? TK_CKPT_COMPRESS : 0, NULL) < 0) {
        fprintf(stderr, "ckpt_restore: writing %s failed: %s\n", path,
                fd < 0 ? strerror(errno) : tk_last_error());
        exit(1);
    }
    tk_ckpt_destroy(c);
    fsync(fd);
    close(fd);
    munmap(a, len);
}

struct run {
    double first, resident;
};

static struct run one(const char *path, size_t len, bool lazy, uint64_t *faults)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    int fd = open(path, O_RDONLY);
    unsigned char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fd < 0 || a == MAP_FAILED) {
        perror(path);
        exit(1);
    }
    struct tk_ckpt_area ar = {a, len};
    struct run r;
    volatile unsigned char sink;
    size_t page = (size_t)(now_ms() * 1000) % (len / ps);
    double t0 = now_ms();
    if (!lazy) {
        if (tk_ckpt_restore(&ar, 1, &fd, 1) < 0) {
            fprintf(stderr, "ckpt_restore: %s\n", tk_last_error());
            exit(1);
        }
        sink = a[page * ps];
        r.first = r.resident = now_ms() - t0;
        *faults = 0;
    } else {
        tk_ckpt_lazy_config cfg = {.areas = &ar, .nareas = 1, .fds = &fd, .nfds = 1};
        tk_ckpt_lazy *l;
        if (tk_ckpt_restore_lazy(&cfg, &l) < 0) {
            fprintf(stderr, "ckpt_restore: %s\n", tk_last_error());
            exit(1);
        }
        sink = a[page * ps];
        r.first = now_ms() - t0;
        tk_ckpt_lazy_stats st;
        if (tk_ckpt_lazy_wait(l, &st) < 0) {
            fprintf(stderr, "ckpt_restore: %s\n", tk_last_error());
            exit(1);
        }
        r.resident = now_ms() - t0;
        *faults = st.pages_by_fault;
        tk_ckpt_lazy_destroy(l);
    }
    (void)sink;
    munmap(a, len);
    close(fd);
    return r;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void summary(const char *mode, const char *cache, size_t mib, double *v, int n,
                    const char *what)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("{\"summary\": \"%s\", \"mode\": \"%s\", \"cache\": \"%s\", \"size_mib\": %zu, "
           "\"median_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f, \"n\": %d}\n",
           what, mode, cache, mib, v[n / 2], v[0], v[n - 1], n);
}

int main(int argc, char **argv)
{
    size_t mib = 1024;
    const char *path = "/var/tmp/tk-restore.img", *cache = "warm";
    int reps = 3;
    bool compress = false, keep = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--file") && i + 1 < argc)
            path = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
            cache = argv[++i];
        else if (!strcmp(argv[i], "--compress"))
            compress = true;
        else if (!strcmp(argv[i], "--keep"))
            keep = true;
        else {
            fprintf(stderr, "usage: ckpt_restore [--mib N] [--file PATH] [--compress] [--reps R] "
                            "[--cache warm|dropped|both] [--keep]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 100 || mib == 0) return 2;
    size_t len = mib << 20;
    struct stat sb;
    if (!keep || stat(path, &sb) < 0) make_image(path, len, compress);
    const char *caches[2];
    int nc = 0;
    if (!strcmp(cache, "warm") || !strcmp(cache, "both")) caches[nc++] = "warm";
    if (!strcmp(cache, "dropped") || !strcmp(cache, "both")) caches[nc++] = "dropped";
    double first[2][2][100], res[2][2][100];
    for (int rep = 0; rep < reps; rep++)
        for (int c = 0; c < nc; c++)
            for (int m = 0; m < 2; m++) {
                int lazy = (rep + m) % 2; /* the order alternates */
                if (!strcmp(caches[c], "dropped")) {
                    int e = drop_caches();
                    if (e) {
                        fprintf(stderr, "ckpt_restore: dropping the page cache: %s (root?)\n",
                                strerror(-e));
                        return 1;
                    }
                } else {
                    uint64_t f;
                    if (rep == 0 && m == 0) one(path, len, false, &f); /* into the cache */
                }
                uint64_t faults;
                struct run r = one(path, len, lazy, &faults);
                first[c][lazy][rep] = r.first;
                res[c][lazy][rep] = r.resident;
                printf(
                    "{\"mode\": \"%s\", \"cache\": \"%s\", \"size_mib\": %zu, \"compressed\": %s, "
                    "\"first_ms\": %.3f, \"resident_ms\": %.3f, \"faults\": %lu}\n",
                    lazy ? "lazy" : "eager", caches[c], mib, compress ? "true" : "false", r.first,
                    r.resident, (unsigned long)faults);
                fflush(stdout);
            }
    for (int c = 0; c < nc; c++)
        for (int lazy = 0; lazy < 2; lazy++) {
            summary(lazy ? "lazy" : "eager", caches[c], mib, first[c][lazy], reps, "first");
            summary(lazy ? "lazy" : "eager", caches[c], mib, res[c][lazy], reps, "resident");
        }
    return 0;
}
