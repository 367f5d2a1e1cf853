/* tests/mech_noaccess.c MECH - a region made with TK_REGION_NOACCESS is as
 * one made read-write and then protected no-access as a whole: every page
 * faults on a read and on a write, tk_protection says TK_PROT_NONE, and
 * after tk_protect each page behaves as the new protection says (a page
 * made read-only takes a write fault, the write protection really there on
 * the userfaultfd mechanisms); bad combinations are refused. */
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "testutil.h"

enum { PAGES = 64 };
/* (written by the handler: on uffd-thread, trapkit's service thread) */
static _Atomic int faults;
static _Atomic enum tk_access last;

static tk_action handler(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    last = f->access;
    /* open what the access needs */
    int p = f->access == TK_ACCESS_READ && tk_protection(f->region, f->page) == TK_PROT_NONE
                ? TK_PROT_READ
                : TK_PROT_RW;
    return tk_prot1(f->region, f->page, p) ? TK_DECLINE : TK_RESUME;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    if (m == TK_MECH_PKEYS) return TK_SKIP;
    size_t ps = tk_test_page();
    tk_region_config c = {
        .len = PAGES * ps, .handler = handler, .mech = m, .flags = TK_REGION_NOACCESS};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    volatile char *b = tk_region_base(r);
    for (int i = 0; i < PAGES; i++) CHECK(tk_protection(r, (char *)b + i * ps) == TK_PROT_NONE);
    /* a read of each even page: one fault, then read-only */
    for (int i = 0; i < PAGES; i += 2) {
        int f0 = faults;
        CHECK(b[i * ps] == 0);
        CHECK(faults == f0 + 1);
        CHECK(tk_protection(r, (char *)b + i * ps) == TK_PROT_READ);
    }
    /* a write to each even page now: one write fault each (the write
     * protection is there), then it is open */
    for (int i = 0; i < PAGES; i += 2) {
        int f0 = faults;
        b[i * ps + 1] = 7;
        CHECK(faults == f0 + 1);
        CHECK(last == TK_ACCESS_WRITE || last == TK_ACCESS_UNKNOWN);
        CHECK(b[i * ps + 1] == 7);
    }
    /* a write to each odd page: it faults (no-access) and is opened */
    for (int i = 1; i < PAGES; i += 2) {
        int f0 = faults;
        b[i * ps] = 9;
        CHECK(faults >= f0 + 1);
        CHECK(b[i * ps] == 9);
        CHECK(tk_protection(r, (char *)b + i * ps) == TK_PROT_RW);
    }
    /* read-only by tk_protect after all that: writes fault again */
    CHECK_OK(tk_protect(r, (void *)b, PAGES * ps, TK_PROT_READ));
    for (int i = 0; i < PAGES; i++) {
        int f0 = faults;
        CHECK(b[i * ps] == (i % 2 ? 9 : 0));
        CHECK(faults == f0);
        b[i * ps + 2] = 1;
        CHECK(faults == f0 + 1);
    }
    /* no-access again: reads fault */
    CHECK_OK(tk_protect(r, (void *)b, PAGES * ps, TK_PROT_NONE));
    int f0 = faults;
    CHECK(b[3 * ps] == 9);
    CHECK(faults == f0 + 1);
    CHECK_OK(tk_region_destroy(r));

    /* an existing mapping */
    void *mem = mmap(NULL, PAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    memset(mem, 5, PAGES * ps);
    c.addr = mem;
    CHECK_OK(tk_region_create(&c, &r));
    f0 = faults;
    CHECK(((volatile char *)mem)[ps * 10] == 5);
    CHECK(faults == f0 + 1);
    CHECK_OK(tk_region_destroy(r));
    CHECK(((volatile char *)mem)[ps * 11] == 5); /* read-write again */
    munmap(mem, PAGES * ps);

    /* refused combinations */
    c.addr = NULL;
    c.flags = TK_REGION_NOACCESS | TK_REGION_DIRTY;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.flags = TK_REGION_NOACCESS;
    c.page_size = 1024;
    c.mech = TK_MECH_POSIX;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    printf("mech_noaccess %s: passed (%d faults)\n", tk_mech_name(m), faults);
    return 0;
}
