/* The lock over a region's page states and hardware, in stripes
 * (src/vm/hwlock.c): while a thread holds one stripe, changes of pages in
 * the other stripes - tk_protect, a fault whose handler opens its page -
 * go on, and a change of a page in the held stripe, or of a range that
 * reaches it, or of the whole region, waits until it is released.  A region
 * of any size has at most TK_HW_STRIPES stripes, and they cover every page.
 * (On pkeys a protection is the region's key, changed without the lock:
 * skipped.) */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/region_impl.h"
#include "testutil.h"

static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    return tk_test_open(f);
}

/* A thread holding stripes, as trapkit's own changes do, until told. */
struct holder {
    tk_region *r;
    size_t first, n;
    pthread_t t;
    atomic_int state; /* 1 holding, 2 told to release, 3 released */
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    tk_hw_guard g;
    tk__hw_lock_pages(h->r, &g, h->first, h->n);
    atomic_store(&h->state, 1);
    while (atomic_load(&h->state) != 2) usleep(200);
    tk__hw_unlock(h->r, &g, 0, 0);
    atomic_store(&h->state, 3);
    return NULL;
}

static void hold_start(struct holder *h, tk_region *r, size_t first, size_t n)
{
    h->r = r;
    h->first = first;
    h->n = n;
    atomic_store(&h->state, 0);
    CHECK(pthread_create(&h->t, NULL, hold, h) == 0);
    while (atomic_load(&h->state) != 1) usleep(200);
}

static void hold_end(struct holder *h)
{
    atomic_store(&h->state, 2);
    CHECK(pthread_join(h->t, NULL) == 0);
}

/* A change made by another thread: a protection, or a write. */
struct change {
    tk_region *r;
    char *addr;
    size_t len;
    int prot; /* -1: a write to addr */
    pthread_t t;
    atomic_int done;
    int err;
};

static void *do_change(void *arg)
{
    struct change *c = arg;
    if (c->prot < 0)
        *(volatile char *)c->addr = 7;
    else
        c->err = tk_protect(c->r, c->addr, c->len, c->prot);
    atomic_store(&c->done, 1);
    return NULL;
}

static void change_start(struct change *c, tk_region *r, char *addr, size_t len, int prot)
{
    c->r = r;
    c->addr = addr;
    c->len = len;
    c->prot = prot;
    c->err = 0;
    atomic_store(&c->done, 0);
    CHECK(pthread_create(&c->t, NULL, do_change, c) == 0);
}

/* Whether the change finished within `ms` milliseconds (it is joined if so). */
static bool change_done_within(struct change *c, long ms)
{
    for (long i = 0; i < ms * 5; i++) {
        if (atomic_load(&c->done)) {
            CHECK(pthread_join(c->t, NULL) == 0);
            CHECK_OK(c->err);
            return true;
        }
        usleep(200);
    }
    return false;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    if (m == TK_MECH_PKEYS) {
        printf("SKIP: pkeys changes the region's key, without the lock\n");
        return 77;
    }

    /* the stripes of regions of any size: at most TK_HW_STRIPES, each as
     * small as that allows */
    size_t sizes[] = {1, 2, 63, 64, 65, 1000, 16384, (size_t)1 << 20, (size_t)1 << 30};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        unsigned s = tk__hw_stripe_shift(sizes[k]);
        CHECK(((sizes[k] - 1) >> s) < TK_HW_STRIPES);
        CHECK(s == 0 || ((sizes[k] - 1) >> (s - 1)) >= TK_HW_STRIPES);
    }

    size_t ps = tk_test_page();
    enum { N = 1024 };
    tk_region *r = tk_test_region(m, N, 0, on_fault, NULL);
    char *base = tk_region_base(r);
    for (size_t i = 0; i < N; i++) base[i * ps] = (char)i;
    const size_t S = (size_t)1 << r->rg_hw_shift; /* pages per stripe */
    CHECK(S > 1 && N / S >= 8 && N / S <= TK_HW_STRIPES);

    struct holder h;
    struct change c;
    /* stripe 0 held: a protection and a fault in stripe 5 go on */
    hold_start(&h, r, 0, 1);
    change_start(&c, r, base + 5 * S * ps, S * ps, TK_PROT_READ);
    CHECK(change_done_within(&c, 30000));
    change_start(&c, r, base + 5 * S * ps, 0, -1);
    CHECK(change_done_within(&c, 30000));
    CHECK(faults == 1);
    CHECK(base[5 * S * ps] == 7);
    /* a range from stripe 1 to 3 goes on too */
    change_start(&c, r, base + S * ps, 3 * S * ps, TK_PROT_READ);
    CHECK(change_done_within(&c, 30000));
    /* a change in stripe 0 waits for it */
    change_start(&c, r, base + (S - 1) * ps, ps, TK_PROT_READ);
    CHECK(!change_done_within(&c, 100));
    hold_end(&h);
    CHECK(change_done_within(&c, 30000));
    /* a range reaching the held stripe waits */
    hold_start(&h, r, 4 * S + 3, 2);
    change_start(&c, r, base + 2 * S * ps, 2 * S * ps + ps, TK_PROT_RW);
    CHECK(!change_done_within(&c, 100));
    hold_end(&h);
    CHECK(change_done_within(&c, 30000));
    /* and so does a change of the whole region */
    hold_start(&h, r, N - 1, 1);
    change_start(&c, r, base, N * ps, TK_PROT_READ);
    CHECK(!change_done_within(&c, 100));
    hold_end(&h);
    CHECK(change_done_within(&c, 30000));
    /* every page protected, and each write opens its own page */
    int before = faults;
    for (size_t i = 0; i < N; i += S / 2) base[i * ps] = 1;
    CHECK(faults - before == (int)(2 * N / S));
    /* fork holds every stripe of every region across the call (vm/fork.c)
     * and lets them all go, in the parent and in the child */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        base[(N - 1) * ps] = 2; /* a fault; its handler opens the page */
        _exit(tk_protect(r, base, N * ps, TK_PROT_RW) == 0 && base[(N - 1) * ps] == 2 ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(tk_protect(r, base, N * ps, TK_PROT_RW));
    CHECK_OK(tk_region_destroy(r));
    printf("%s: %zu pages in stripes of %zu: changes in other stripes went on, those in the "
           "held one waited\n",
           tk_mech_name(m), (size_t)N, S);
    return 0;
}
