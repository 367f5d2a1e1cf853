/* TRAPKIT_PROBE_MASK hides kernel features from trapkit, as an older kernel
 * would lack them: the probe reports them absent, the automatic choice and
 * forced mechanisms follow, an unknown name is reported on stderr, and
 * userfaultfd write protection without WP_UNPOPULATED still catches the
 * first write to pages never touched (they are populated before they are
 * protected). */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif

static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&faults, 1);
    return tk_test_open(f);
}

/* Every page of a never-touched region protected read-only: each first
 * write is caught, then lands. */
static void untouched_pages_caught(enum tk_mech m)
{
    enum { N = 64 };
    size_t ps = tk_test_page();
    tk_region_config c = {.len = N * ps, .mech = m, .handler = on_fault};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    char *b = tk_region_base(r);
    CHECK_OK(tk_protn(r, b, N * ps, TK_PROT_READ));
    atomic_store(&faults, 0);
    for (int i = 0; i < N; i++) b[i * ps + 1] = (char)(i + 1);
    CHECK(atomic_load(&faults) == N);
    for (int i = 0; i < N; i++) CHECK(b[i * ps + 1] == (char)(i + 1));
    /* dropped pages come back protected */
    CHECK_OK(tk_protn(r, b, N * ps, TK_PROT_READ));
    CHECK_OK(tk_discard(r, b, N * ps));
    atomic_store(&faults, 0);
    for (int i = 0; i < N; i++) b[i * ps + 2] = 1;
    CHECK(atomic_load(&faults) == N);
    /* no access to read-only: still caught */
    CHECK_OK(tk_protn(r, b, N * ps, TK_PROT_NONE));
    CHECK_OK(tk_protn(r, b, N * ps, TK_PROT_READ));
    atomic_store(&faults, 0);
    b[5 * ps] = 3;
    CHECK(atomic_load(&faults) == 1);
    CHECK_OK(tk_region_destroy(r));
}

int main(void)
{
    /* stderr into a file, to read the warning back */
    char path[] = "/tmp/tk_probe_mask.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    int saved = dup(2);
    CHECK(dup2(fd, 2) == 2);
    setenv("TRAPKIT_PROBE_MASK",
           "wp_unpopulated,wp_async, pagemap_scan,move,no_such_thing wp_writable", 1);

    tk_probe_info p;
    tk_probe(&p);
    fflush(stderr);
    dup2(saved, 2);
    char err[4096] = "";
    ssize_t n = pread(fd, err, sizeof err - 1, 0);
    CHECK(n > 0);
    CHECK(strstr(err, "unknown feature 'no_such_thing'"));
    CHECK(strstr(err, "wp_unpopulated")); /* the known names are listed */

    CHECK(!(p.uffd_features &
            (UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_MOVE)));
    CHECK(!(p.uffd_ioctls & (UINT64_C(1) << 0x05))); /* _UFFDIO_MOVE */
    CHECK(!p.pagemap_scan);
    CHECK(!p.uffd_wp_unprotect_writable);
    CHECK(p.mech_dirty != TK_MECH_PAGEMAP_SCAN);
    char json[8192];
    CHECK(tk_probe_json(&p, json, sizeof json) > 0);
    CHECK(strstr(json, "\"probe_mask\":\"wp_unpopulated"));

    /* a forced pagemap-scan region says why it cannot be */
    tk_region_config c = {
        .len = tk_test_page(), .mech = TK_MECH_PAGEMAP_SCAN, .flags = TK_REGION_DIRTY};
    tk_region *r;
    CHECK_ERR(tk_region_create(&c, &r), -EOPNOTSUPP);
    CHECK(strstr(tk_last_error(), "WP_ASYNC") || strstr(tk_last_error(), "PAGEMAP_SCAN"));

    bool wp = p.uffd_access != TK_UFFD_NONE && (p.uffd_features & UFFD_FEATURE_PAGEFAULT_FLAG_WP);
    untouched_pages_caught(TK_MECH_POSIX);
    if (wp) {
        untouched_pages_caught(TK_MECH_UFFD_SIGBUS);
        untouched_pages_caught(TK_MECH_UFFD_THREAD);
    }
    printf("probe mask: features hidden, warning given, %s\n",
           wp ? "uffd-sigbus and uffd-thread protect never-touched pages without WP_UNPOPULATED"
              : "no userfaultfd write-protect here: only posix checked");
    return 0;
}
