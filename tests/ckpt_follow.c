/* tests/ckpt_follow.c - the checkpointer's threads follow the writer's CPU,
 * and do not starve there.
 *
 * 1. The writer (this thread, kept on one CPU) starts a snapshot and writes
 *    now and then while the background thread is slowed down (its progress
 *    callback sleeps): a thread of the checkpointer is seen kept on the
 *    writer's CPU alone (its Cpus_allowed_list), where a page-table change of
 *    the writer interrupts no other CPU (docs/design.md).
 * 2. The writer keeps its CPU busy for the whole snapshot: the threads kept
 *    there at SCHED_IDLE would get almost none of it; they go back to every
 *    CPU after a period of waiting (a thread seen kept on the writer's CPU
 *    is seen allowed every CPU again), so the snapshot ends (well before
 *    the minute it would take starved, unless other programs keep the other
 *    CPUs busy too: then it is let end after 30 s, with a word) and the
 *    image holds the instant's data.
 * Per mechanism (uffd-sigbus, uffd-thread, posix); skipped on one CPU.
 */
#include <dirent.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

static atomic_int slow; /* ms the progress callback sleeps */

static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    (void)arg;
    if (st->running && atomic_load(&slow)) usleep((useconds_t)atomic_load(&slow) * 1000);
}

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The threads of this process other than the caller seen kept on one CPU
 * alone, and then allowed more again. */
struct watch {
    int cpu, n;
    struct {
        int tid;
        bool kept, released;
    } t[64];
};

static void watch_scan(struct watch *w)
{
    char want[16];
    snprintf(want, sizeof want, "%d", w->cpu);
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        int tid = atoi(e->d_name);
        if (e->d_name[0] == '.' || tid == gettid()) continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* ended meanwhile */
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) {
                char *v = line + 18;
                while (*v == ' ' || *v == '\t') v++;
                v[strcspn(v, "\n")] = 0;
                int i = 0;
                while (i < w->n && w->t[i].tid != tid) i++;
                if (i == w->n && w->n < 64) w->t[w->n++].tid = tid;
                if (i >= 64) break;
                if (!strcmp(v, want))
                    w->t[i].kept = true;
                else if (w->t[i].kept)
                    w->t[i].released = true;
            }
        fclose(f);
    }
    closedir(d);
}

static bool watch_released(const struct watch *w)
{
    for (int i = 0; i < w->n; i++)
        if (w->t[i].released) return true;
    return false;
}

/* Whether a thread of this process other than the caller may run on `cpu`
 * alone. */
static bool other_thread_on(int cpu)
{
    struct watch w = {.cpu = cpu};
    watch_scan(&w);
    for (int i = 0; i < w.n; i++)
        if (w.t[i].kept) return true;
    return false;
}

/* Idle time of every CPU but `cpu` so far (/proc/stat), in clock ticks. */
static unsigned long long idle_elsewhere(int cpu)
{
    FILE *f = fopen("/proc/stat", "r");
    CHECK(f);
    char line[512];
    unsigned long long idle = 0;
    while (fgets(line, sizeof line, f)) {
        int n;
        unsigned long long v[5];
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu", &n, &v[0], &v[1], &v[2], &v[3], &v[4]) ==
                6 &&
            n != cpu)
            idle += v[3] + v[4];
    }
    fclose(f);
    return idle;
}

/* Keeps this thread on `cpu` (-1: on every CPU of `all`).  Done after
 * tk_ckpt_start, whose threads inherit their creator's affinity: a program
 * that keeps its writer on one CPU before it starts a snapshot keeps them
 * there too, with or without following. */
static cpu_set_t all;
static void keep_on(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, cpu < 0 ? &all : &one) == 0);
}

static bool run(enum tk_ckpt_mech m)
{
    size_t ps = tk_test_page(), npages = 65536, len = npages * ps; /* 256 MiB */
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    for (size_t p = 0; p < npages; p++) memset(area + p * ps, (int)(p * 13 + 1), 64);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .progress = on_progress};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here (%s)\n", tk_ckpt_mech_name(m), tk_last_error());
        munmap(area, len);
        return false;
    }
    CHECK_OK(err);
    char path[] = "/tmp/tk-ckfollow-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);

    unsigned modes[] = {0, TK_CKPT_ASYNC_START | TK_CKPT_CALLER_INSTANT};
    for (size_t mi = 0; mi < 2; mi++) {
        unsigned flags = modes[mi];
        const char *how = flags ? " (the program's instant)" : "";
        CHECK(ftruncate(fd, 0) == 0);
        /* 1: a thread kept on the writer's CPU */
        atomic_store(&slow, 3);
        int cpu = sched_getcpu();
        CHECK_OK(tk_ckpt_start(c, fd, flags));
        keep_on(cpu);
        bool seen = false;
        uint64_t seed = 1;
        tk_ckpt_stats st;
        bool instant = false;
        while (tk_ckpt_poll(c, &st) == 1) {
            if (!instant) instant = tk_ckpt_instant(c) == 1;
            area[(tk_test_rand(&seed) % npages) * ps + 100] ^= 1;
            if (!seen) seen = other_thread_on(cpu);
            usleep(500);
        }
        atomic_store(&slow, 0);
        CHECK_OK(tk_ckpt_wait(c, &st));
        keep_on(-1);
        printf("%s%s: a thread of the checkpointer kept on the writer's CPU %d: %s\n",
               tk_ckpt_mech_name(m), how, cpu, seen ? "yes" : "no");
        CHECK(seen);

        /* 2: the writer's CPU busy all along */
        unsigned char *want = malloc(len / 2);
        CHECK(want);
        memcpy(want, area + len / 2, len / 2);
        CHECK(ftruncate(fd, 0) == 0);
        double t0 = secs();
        cpu = sched_getcpu();
        CHECK_OK(tk_ckpt_start(c, fd, flags));
        keep_on(cpu);
        size_t writes = 0;
        instant = false;
        struct watch w = {.cpu = cpu};
        unsigned long long idle0 = idle_elsewhere(cpu);
        double scanned = 0;
        while (tk_ckpt_poll(c, &st) == 1 && secs() - t0 < 30) {
            if (!instant) instant = tk_ckpt_instant(c) == 1;
            /* (looked at every 10 ms even while the writes fault: 1,000 of
             * them can take a second in an emulated guest, longer than a
             * thread stays kept) */
            for (int k = 0; k < 1000; k++, writes++) {
                area[(tk_test_rand(&seed) % (npages / 2)) * ps + 200] ^= 1; /* the first half */
                if (k % 50 == 0 && secs() - scanned > 0.01) {
                    watch_scan(&w);
                    scanned = secs();
                }
            }
        }
        double took = secs() - t0;
        /* the other CPUs' idle share meanwhile */
        double idle = (double)(idle_elsewhere(cpu) - idle0) / (double)sysconf(_SC_CLK_TCK) / took /
                      (double)(CPU_COUNT(&all) - 1);
        keep_on(-1);
        printf("%s%s: with the writer's CPU busy (%zu writes), the snapshot took %.2f s; a "
               "thread kept on it let go: %s; the other CPUs %.0f%% idle\n",
               tk_ckpt_mech_name(m), how, writes, took, watch_released(&w) ? "yes" : "no",
               idle * 100);
        if (took < 1) {
            /* ended before a starved thread's period was over */
        } else {
            CHECK(watch_released(&w));
        }
        if (took >= 30 && idle < 0.5)
            printf("  (other programs kept the other CPUs busy: the snapshot's end is not "
                   "timed)\n");
        else
            CHECK(took < 30);
        CHECK_OK(tk_ckpt_wait(c, &st));
        CHECK(st.pages_saved == npages);
        unsigned char *back =
            mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(back != MAP_FAILED);
        struct tk_ckpt_area tgt = {back, len};
        CHECK_OK(tk_ckpt_restore(&tgt, 1, &fd, 1));
        CHECK(memcmp(back + len / 2, want, len / 2) == 0);
        munmap(back, len);
        free(want);
    }
    CHECK_OK(tk_ckpt_destroy(c));
    close(fd);
    munmap(area, len);
    return true;
}

int main(int argc, char **argv)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("SKIP: one CPU: there is no other CPU to interrupt\n");
        return 77;
    }
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    if (CPU_COUNT(&all) < 2) {
        printf("SKIP: this process may use one CPU only\n");
        return 77;
    }
    enum tk_ckpt_mech ms[] = {TK_CKPT_UFFD_SIGBUS, TK_CKPT_UFFD_THREAD, TK_CKPT_POSIX};
    int ran = 0;
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        if (argc > 1 && strcmp(argv[1], tk_ckpt_mech_name(ms[i]))) continue;
        ran += run(ms[i]);
    }
    if (!ran) {
        printf("SKIP: no mechanism ran\n");
        return 77;
    }
    return 0;
}
