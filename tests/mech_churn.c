/* The region table under churn: threads fault in their own regions while
 * other threads create and destroy regions around them and a further thread
 * floods the faulting threads with signals whose handler looks regions up.
 * Every fault must reach its own region's handler with its own argument, and
 * every write must land. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

#define FAULTERS 4
#define CHURNERS 2
#define PAGES 8
#define ROUNDS 1500

static enum tk_mech mech;
static atomic_int stop, finished, release;
static atomic_long misrouted, signals_seen, lookups_ok;

struct faulter {
    int id;
    tk_region *r;
    atomic_long faults; /* on uffd-thread, counted on trapkit's threads */
    pthread_t th;
};

static tk_action on_fault(const tk_fault *f, void *arg)
{
    struct faulter *me = arg;
    if (f->region != me->r || tk_region_find(f->addr) != me->r) {
        atomic_fetch_add(&misrouted, 1);
        return TK_DECLINE;
    }
    me->faults++;
    return tk_test_open(f);
}

static tk_action never(const tk_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    atomic_fetch_add(&misrouted, 1);
    return TK_DECLINE;
}

static struct faulter faulters[FAULTERS];

/* [signal handler] looks up every faulter's region */
static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals_seen, 1);
    for (int i = 0; i < FAULTERS; i++) {
        tk_region *r = faulters[i].r;
        if (r && tk_region_find(tk_region_base(r)) == r && tk_protection(r, tk_region_base(r)) >= 0)
            atomic_fetch_add(&lookups_ok, 1);
    }
}

static void *fault_main(void *arg)
{
    struct faulter *me = arg;
    size_t ps = tk_test_page();
    volatile long *base = tk_region_base(me->r);
    long rounds = tk_test_scaled(ROUNDS);
    for (long round = 0; round < rounds; round++) {
        CHECK_OK(tk_protn(me->r, (void *)base, PAGES * ps, TK_PROT_READ));
        for (int p = 0; p < PAGES; p++) base[p * ps / sizeof(long)] += 1;
    }
    for (int p = 0; p < PAGES; p++) CHECK(base[p * ps / sizeof(long)] == rounds);
    /* stay alive until the flood has stopped: signalling a thread that has
     * exited and been joined is undefined (its descriptor may be unmapped) */
    atomic_fetch_add(&finished, 1);
    while (!atomic_load(&release)) sched_yield();
    return NULL;
}

static void *churn_main(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg * 977 + 1;
    size_t ps = tk_test_page();
    long made = 0;
    while (!atomic_load(&stop)) {
        tk_region *rs[8];
        int n = 1 + (int)(tk_test_rand(&seed) % 8);
        for (int i = 0; i < n; i++) {
            tk_region_config c = {
                .len = (1 + tk_test_rand(&seed) % 16) * ps, .handler = never, .mech = mech};
            CHECK_OK(tk_region_create(&c, &rs[i]));
            CHECK(tk_region_find(tk_region_base(rs[i])) == rs[i]);
            made++;
        }
        for (int i = 0; i < n; i++) CHECK_OK(tk_region_destroy(rs[i]));
    }
    return (void *)made;
}

static void *flood_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        for (int i = 0; i < FAULTERS; i++) pthread_kill(faulters[i].th, SIGUSR1);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

    for (int i = 0; i < FAULTERS; i++) {
        faulters[i].id = i;
        faulters[i].r = tk_test_region(mech, PAGES, 0, on_fault, &faulters[i]);
    }
    for (int i = 0; i < FAULTERS; i++)
        CHECK(pthread_create(&faulters[i].th, NULL, fault_main, &faulters[i]) == 0);
    pthread_t churn[CHURNERS], flood;
    for (int i = 0; i < CHURNERS; i++)
        CHECK(pthread_create(&churn[i], NULL, churn_main, (void *)(uintptr_t)i) == 0);
    CHECK(pthread_create(&flood, NULL, flood_main, NULL) == 0);

    while (atomic_load(&finished) < FAULTERS) sched_yield();
    atomic_store(&stop, 1);
    long made = 0;
    for (int i = 0; i < CHURNERS; i++) {
        void *v;
        pthread_join(churn[i], &v);
        made += (long)v;
    }
    pthread_join(flood, NULL);
    atomic_store(&release, 1);
    for (int i = 0; i < FAULTERS; i++) pthread_join(faulters[i].th, NULL);

    CHECK(atomic_load(&misrouted) == 0);
    long faults = 0;
    for (int i = 0; i < FAULTERS; i++) {
        faults += faulters[i].faults;
        CHECK(faulters[i].faults >= tk_test_scaled(ROUNDS) * PAGES);
        CHECK_OK(tk_region_destroy(faulters[i].r));
    }
    CHECK(made > 0);
    printf("churn on %s: ok: %ld faults, %ld regions made and destroyed meanwhile, %ld signals\n",
           tk_mech_name(mech), faults, made, atomic_load(&signals_seen));
    return 0;
}
