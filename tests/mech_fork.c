/* Regions in a child of fork() keep their protections and handlers, as
 * mprotect'ed memory does.  The parent protects pages (read-only, no access)
 * of a region with DIRTY tracking and forks; in the child a write to the
 * read-only page and a read of the inaccessible one run the handler, which
 * opens the page with tk_unprot (it must succeed: a handler written like the
 * README's would loop forever otherwise), tk_protect keeps working, and
 * tk_dirty reports what the child wrote (on pagemap-scan the child's first
 * interval reports every page).  Nothing written in the child reaches the
 * parent, whose region works on as before.  A grandchild does the same. */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES 8

static tk_region *region;
static size_t ps;
static enum tk_mech mech;
static atomic_int faults, failed_unprot;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&faults, 1);
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    if (tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0) {
        atomic_fetch_add(&failed_unprot, 1);
        return TK_DECLINE;
    }
    return TK_RESUME;
}

static uint64_t bm[1];

/* Protects pages 1 (read-only) and 2 (no access), then forks `levels`
 * deep; every process checks the behaviour. */
static void check_process(int level)
{
    char *base = tk_region_base(region);
    CHECK_OK(tk_prot1(region, base + 1 * ps, TK_PROT_READ));
    CHECK_OK(tk_prot1(region, base + 2 * ps, TK_PROT_NONE));
    if (level == 0) CHECK_OK(tk_dirty(region, bm, 64)); /* a new interval */
    fflush(NULL);
    pid_t pid = level < 2 ? fork() : -1;
    CHECK(level == 2 || pid >= 0);
    if (pid == 0) {
        atomic_store(&faults, 0);
        check_process(level + 1);
        _exit(0);
    }
    /* this process: parent (pid > 0) or the deepest child (pid == -1) */
    int before = atomic_load(&faults);
    CHECK(base[1 * ps] == 'p');
    base[1 * ps] = (char)('a' + level); /* write fault */
    CHECK(atomic_load(&faults) == before + 1);
    CHECK(base[2 * ps] == 'q'); /* read fault */
    CHECK(atomic_load(&faults) == before + 2);
    CHECK(tk_protection(region, base + 1 * ps) == TK_PROT_RW);
    CHECK(atomic_load(&failed_unprot) == 0);
    /* protections still work both ways */
    CHECK_OK(tk_prot1(region, base + 3 * ps, TK_PROT_READ));
    base[3 * ps] = 'x';
    CHECK(atomic_load(&faults) == before + 3);
    base[5 * ps] = 'y';
    CHECK_OK(tk_dirty(region, bm, 64));
    uint64_t want = (1u << 1) | (1u << 3) | (1u << 5);
    if (mech == TK_MECH_PAGEMAP_SCAN && level > 0)
        CHECK(bm[0] == (1u << NPAGES) - 1); /* a child's first interval: every page */
    else
        CHECK(bm[0] == want);
    /* the next interval is exact everywhere */
    base[6 * ps] = 'z';
    CHECK(tk_dirty(region, bm, 64) == 1 && bm[0] == (1u << 6));
    if (pid > 0) {
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL: the child at level %d %s %d\n", level + 1,
                    WIFEXITED(st) ? "exited with" : "died of signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            exit(1);
        }
        /* the child's writes stayed in the child */
        CHECK(base[1 * ps] == (char)('a' + level));
    }
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    ps = tk_test_page();
    region = tk_test_region(mech, NPAGES, TK_REGION_DIRTY, on_fault, NULL);
    char *base = tk_region_base(region);
    memset(base, 0, NPAGES * ps);
    base[1 * ps] = 'p';
    base[2 * ps] = 'q';
    alarm(60); /* a hang in a child is a failure, not a stuck test */
    /* the deepest child checks first; its parent's pages were protected
     * again before each fork */
    check_process(0);
    printf("%s: parent, child and grandchild each handled their faults\n", argv[1]);
    CHECK_OK(tk_region_destroy(region));
    return 0;
}
