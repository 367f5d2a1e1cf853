/* pkeys regions: protection by WRPKRU, per thread and per region.  A
 * protected region faults with SEGV_PKUERR; the handler's tk_unprot opens the
 * region for the interrupted code (the PKRU in the signal frame) and the
 * access completes.  Rights are the calling thread's; a view made by MAP2
 * stays accessible; keys run out with a clear error.  Skips (77) where the
 * CPU or kernel has no protection keys. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include "testutil.h"

struct seen {
    int faults;
    void *addr;
    enum tk_access access;
    enum tk_mech mech;
    unsigned flags;
    int prot_before, prot_after; /* tk_protection() inside the handler */
};
static volatile struct seen s;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    s.faults++;
    s.addr = f->addr;
    s.access = f->access;
    s.mech = f->mech;
    s.flags = f->flags;
    s.prot_before = tk_protection(f->region, f->addr);
    if (tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0) return TK_DECLINE;
    s.prot_after = tk_protection(f->region, f->addr);
    return TK_RESUME;
}

static tk_action decline(const tk_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    return TK_DECLINE;
}

static tk_region *shared;

static void *child_thread(void *arg)
{
    (void)arg;
    volatile char *p = tk_region_base(shared);
    /* created after main protected NONE: inherits that */
    int inherited = tk_protection(shared, (void *)p);
    int before = s.faults;
    p[5] = 5; /* faults here, handler opens it for this thread only */
    CHECK(s.faults == before + 1);
    CHECK(tk_protection(shared, (void *)p) == TK_PROT_RW);
    return (void *)(intptr_t)inherited;
}

static pthread_barrier_t bar;
static void *early_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&bar); /* the region is made meanwhile */
    volatile char *p = tk_region_base(shared);
    CHECK_OK(tk_protect(shared, (void *)p, tk_region_len(shared), TK_PROT_RW));
    int before = s.faults;
    p[0] = 1;
    CHECK(s.faults == before); /* opened by its own tk_protect */
    pthread_barrier_wait(&bar);
    return NULL;
}

static void declined(void *arg)
{
    tk_region *r;
    tk_region_config c = {.len = (size_t)(uintptr_t)arg, .mech = TK_MECH_PKEYS, .handler = decline};
    CHECK_OK(tk_region_create(&c, &r));
    CHECK_OK(tk_protect(r, tk_region_base(r), tk_region_len(r), TK_PROT_READ));
    ((volatile char *)tk_region_base(r))[0] = 1;
    exit(0);
}

int main(void)
{
    size_t ps = tk_test_page(), len = 16 * ps;
    tk_region *r;
    tk_region_config c = {.len = len, .mech = TK_MECH_PKEYS, .handler = on_fault};
    int err = tk_region_create(&c, &r);
    if (err == -EOPNOTSUPP) tk_test_unavailable("pkeys");
    CHECK_OK(err);
    CHECK(tk_region_mech(r) == TK_MECH_PKEYS);
    CHECK(tk_region_page_size(r) == len);
    volatile char *p = tk_region_base(r);
    CHECK(tk_protection(r, (void *)p) == TK_PROT_RW);
    p[0] = 1;

    /* read-only: reads pass, a write faults once */
    CHECK_OK(tk_protect(r, (void *)p, len, TK_PROT_READ));
    CHECK(tk_protection(r, (void *)(p + 3 * ps)) == TK_PROT_READ);
    CHECK(p[0] == 1 && s.faults == 0);
    p[7 * ps + 3] = 42;
    CHECK(s.faults == 1);
    CHECK(s.addr == p + 7 * ps + 3);
    CHECK(s.access == TK_ACCESS_WRITE && s.mech == TK_MECH_PKEYS);
    CHECK(!(s.flags & TK_FAULT_RESOLVED));
    CHECK(s.prot_before == TK_PROT_READ && s.prot_after == TK_PROT_RW);
    CHECK(p[7 * ps + 3] == 42);
    CHECK(tk_protection(r, (void *)p) == TK_PROT_RW);
    p[1] = 2;
    CHECK(s.faults == 1);

    /* no access: a read faults */
    CHECK_OK(tk_protn(r, (void *)p, len, TK_PROT_NONE));
    CHECK(p[7 * ps + 3] == 42);
    CHECK(s.faults == 2 && s.access == TK_ACCESS_READ && s.prot_before == TK_PROT_NONE);

    /* many rounds */
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(tk_protect(r, (void *)p, len, i % 2 ? TK_PROT_READ : TK_PROT_NONE));
        p[(size_t)i * 61 % len] = (char)i;
    }
    CHECK(s.faults == 1002);

    /* the region is protected as a whole */
    CHECK_ERR(tk_protect(r, (void *)p, ps, TK_PROT_READ), -EINVAL);
    CHECK(strstr(tk_last_error(), "as a whole") != NULL);
    CHECK_ERR(tk_protect(r, (void *)p, len, 5), -EINVAL);

    /* per-thread rights: a new thread inherits main's, and its fault opens
     * the region for itself only */
    shared = r;
    CHECK_OK(tk_protect(r, (void *)p, len, TK_PROT_NONE));
    pthread_t th;
    void *inherited;
    CHECK(pthread_create(&th, NULL, child_thread, NULL) == 0);
    pthread_join(th, &inherited);
    CHECK((intptr_t)inherited == TK_PROT_NONE);
    CHECK(tk_protection(r, (void *)p) == TK_PROT_NONE); /* main: unchanged */
    int before = s.faults;
    CHECK(p[5] == 5);
    CHECK(s.faults == before + 1);
    CHECK_OK(tk_region_destroy(r));

    /* a thread that existed before the region sets its own rights */
    pthread_barrier_init(&bar, NULL, 2);
    CHECK(pthread_create(&th, NULL, early_thread, NULL) == 0);
    CHECK_OK(tk_region_create(&c, &shared));
    p = tk_region_base(shared);
    CHECK_OK(tk_protect(shared, (void *)p, len, TK_PROT_READ));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    pthread_join(th, NULL);
    CHECK(tk_protection(shared, (void *)p) == TK_PROT_READ);
    CHECK(p[0] == 1);
    CHECK_OK(tk_region_destroy(shared));

    /* MAP2: the view carries no key and stays accessible */
    c.flags = TK_REGION_MAP2;
    CHECK_OK(tk_region_create(&c, &r));
    p = tk_region_base(r);
    char *view;
    CHECK_OK(tk_map2(r, TK_PROT_RW, (void **)&view));
    CHECK_OK(tk_protect(r, (void *)p, len, TK_PROT_NONE));
    before = s.faults;
    view[100] = 9;
    CHECK(view[100] == 9 && s.faults == before);
    CHECK(p[100] == 9 && s.faults == before + 1);
    CHECK_OK(tk_region_destroy(r));

    /* DIRTY cannot be expressed */
    c.flags = TK_REGION_DIRTY;
    CHECK_ERR(tk_region_create(&c, &r), -EOPNOTSUPP);
    CHECK(strstr(tk_last_error(), "DIRTY") != NULL);
    c.flags = 0;

    /* keys run out with a clear error; freeing one makes room again */
    tk_region *all[32];
    int n = 0;
    for (; n < 32; n++) {
        err = tk_region_create(&c, &all[n]);
        if (err) break;
    }
    CHECK(n >= 1 && n <= 15);
    CHECK_ERR(err, -ENOSPC);
    CHECK(strstr(tk_last_error(), "no protection key left") != NULL);
    for (int i = 0; i < n; i++) /* each still works */
        CHECK_OK(tk_protect(all[i], tk_region_base(all[i]), len, TK_PROT_READ));
    CHECK_OK(tk_region_destroy(all[--n]));
    CHECK_OK(tk_region_create(&c, &all[n++]));
    for (int i = 0; i < n; i++) CHECK_OK(tk_region_destroy(all[i]));

    /* a declined fault crashes with SIGSEGV */
    int status = tk_test_in_child(declined, (void *)(uintptr_t)len);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

    printf("pkeys: ok: %d faults, %d keys available to regions\n", s.faults, n);
    return 0;
}
