/* A region create that fails leaves the regions it overlaps as they were.
 * A region over the caller's memory is protected (a read-only page, and
 * DIRTY where the mechanism has it); creating another region over the same
 * memory fails with -EEXIST, plain, with TK_REGION_MAP2 (which would map a
 * memfd over it) and with TK_REGION_NOACCESS (which would make it
 * inaccessible); after each the first region's contents, protection
 * (the next write is caught), userfaultfd registration and DIRTY are as
 * they were.  And a child of fork() lives on with a region of the
 * mechanism made without DIRTY (the fork handlers once marked such a
 * region's pages written in a record it does not have). */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES 8

static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    atomic_fetch_add(&faults, 1);
    return tk_test_open(f);
}

int main(int argc, char **argv)
{
    enum tk_mech mech = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();
    const char *why = NULL;
    unsigned flags = tk_mech_available(mech, TK_REGION_DIRTY, &why) ? TK_REGION_DIRTY : 0;
    char *mem = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    strcpy(mem, "precious data");
    strcpy(mem + ps, "more");
    tk_region_config c = {
        .addr = mem, .len = NPAGES * ps, .handler = on_fault, .mech = mech, .flags = flags};
    tk_region *r, *r2 = NULL;
    CHECK_OK(tk_region_create(&c, &r));
    bool whole = mech == TK_MECH_PKEYS; /* (protected as a whole) */
    uint64_t bm[1];
    if (flags) CHECK_OK(tk_dirty(r, bm, NPAGES)); /* a fresh interval */
    const unsigned tries[] = {0, TK_REGION_MAP2, TK_REGION_NOACCESS};
    for (unsigned k = 0; k < sizeof tries / sizeof tries[0]; k++) {
        CHECK_OK(tk_protect(r, mem, whole ? NPAGES * ps : ps, TK_PROT_READ));
        atomic_store(&faults, 0);
        tk_region_config o = {.addr = mem, .len = NPAGES * ps, .mech = mech, .flags = tries[k]};
        CHECK_ERR(tk_region_create(&o, &r2), -EEXIST);
        o.addr = mem + ps; /* a part of it */
        o.len = 2 * ps;
        CHECK_ERR(tk_region_create(&o, &r2), -EEXIST);
        CHECK(strcmp(mem, "precious data") == 0 && strcmp(mem + ps, "more") == 0);
        CHECK(tk_protection(r, mem) == TK_PROT_READ);
        ((volatile char *)mem)[100] = 'x'; /* caught, then let through */
        CHECK(atomic_load(&faults) == 1);
        CHECK(mem[100] == 'x');
        if (flags) {
            CHECK_OK(tk_dirty(r, bm, NPAGES));
            CHECK(bm[0] & 1); /* page 0, written */
        }
    }
    CHECK_OK(tk_region_destroy(r));
    CHECK(strcmp(mem, "precious data") == 0);

    /* fork with a region of the mechanism made without DIRTY */
    tk_region *plain = tk_test_region(mech, NPAGES, 0, on_fault, NULL);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        ((volatile char *)tk_region_base(plain))[0] = 1;
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the child of fork() ended with status 0x%x\n", st);
        return 1;
    }
    CHECK_OK(tk_region_destroy(plain));
    printf("%s: a failed create left the region as it was; fork without DIRTY: ok\n", argv[1]);
    return 0;
}
