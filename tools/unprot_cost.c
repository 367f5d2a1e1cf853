/* tools/unprot_cost.c - what opening one page costs, by what else of the
 * program runs meanwhile.
 *
 * A change of a page table flushes the TLB of every other CPU that is
 * running a thread of the program at that moment: an inter-processor
 * interrupt, whose cost on a virtual machine is that of an exit to the
 * hypervisor on both sides.  This times tk_unprot of one page at a time (a
 * region write-protected whole, on the mechanism given, uffd-sigbus by
 * default) with the program's other threads
 *
 *   alone     none,
 *   sleeping  one that wakes every 50 us and sleeps again (mostly off CPU),
 *   running   one that spins on another CPU all along (as a checkpoint's
 *             background thread does while it writes),
 *
 * and the TLB shootdowns the machine counted meanwhile (/proc/interrupts).
 * docs/design.md (checkpointing) has the figures of this machine.
 *
 *   unprot_cost [--mech M] [--pages N]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <trapkit/error.h>
#include <trapkit/region.h>

static atomic_int stop;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    }
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) usleep(50);
    return NULL;
}

/* The machine's TLB shootdown interrupts so far, all CPUs (0 if unknown). */
static unsigned long long shootdowns(void)
{
    FILE *f = fopen("/proc/interrupts", "r");
    if (!f) return 0;
    char line[4096];
    unsigned long long sum = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ') p++;
        if (strncmp(p, "TLB:", 4)) continue;
        p += 4;
        for (;;) {
            char *end;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p) break;
            sum += v;
            p = end;
        }
    }
    fclose(f);
    return sum;
}

int main(int argc, char **argv)
{
    const char *mech = "uffd-sigbus";
    size_t pages = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mech") && i + 1 < argc)
            mech = argv[++i];
        else if (!strcmp(argv[i], "--pages") && i + 1 < argc)
            pages = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--mech M] [--pages N]\n", argv[0]);
            return 2;
        }
    }
    enum tk_mech m = tk_mech_parse(mech);
    if (m == TK_MECH_COUNT_) {
        fprintf(stderr, "unprot_cost: unknown mechanism %s\n", mech);
        return 2;
    }
    if (pages == 0) {
        fprintf(stderr, "unprot_cost: --pages must be at least 1\n");
        return 2;
    }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    tk_region_config cfg = {.len = pages * ps, .mech = m};
    tk_region *r = NULL;
    if (tk_region_create(&cfg, &r) < 0) {
        fprintf(stderr, "unprot_cost: %s\n", tk_last_error());
        return 1;
    }
    char *base = tk_region_base(r);
    memset(base, 1, pages * ps);
    printf("tk_unprot of one page, %zu pages, %s, %ld CPUs online\n", pages, mech,
           sysconf(_SC_NPROCESSORS_ONLN));
    const char *names[] = {"alone", "sleeping", "running"};
    for (int k = 0; k < 3; k++) {
        if (tk_protn(r, base, pages * ps, TK_PROT_READ) < 0) {
            fprintf(stderr, "unprot_cost: %s\n", tk_last_error());
            return 1;
        }
        atomic_store(&stop, 0);
        pthread_t t;
        if (k && pthread_create(&t, NULL, k == 1 ? sleeper : spinner, NULL) != 0) {
            fprintf(stderr, "unprot_cost: pthread_create failed\n");
            return 1;
        }
        usleep(20000);
        unsigned long long s0 = shootdowns();
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < pages; i++)
            if (tk_unprot(r, base + i * ps, ps) < 0) {
                fprintf(stderr, "unprot_cost: %s\n", tk_last_error());
                return 1;
            }
        uint64_t t1 = now_ns();
        unsigned long long s1 = shootdowns();
        atomic_store(&stop, 1);
        if (k) pthread_join(t, NULL);
        printf("  %-8s %7.2f us a page, %llu TLB shootdowns (%.2f a page)\n", names[k],
               (double)(t1 - t0) / 1e3 / (double)pages, s1 - s0, (double)(s1 - s0) / (double)pages);
    }
    tk_region_destroy(r);
    return 0;
}
