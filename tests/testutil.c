#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

size_t tk_test_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

long tk_test_scaled(long n)
{
    const char *env = getenv("TK_TEST_SCALE");
    long scale = env ? atol(env) : 1;
    if (scale < 1) scale = 1;
    return n / scale > 0 ? n / scale : 1;
}

long tk_test_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f);
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

void tk_test_unavailable(const char *what)
{
    /* TK_TEST_EXPECT_MECHS names what must be available (the runs that
     * hide kernel features, the guest kernels): missing, it fails, not skips */
    const char *expect = getenv("TK_TEST_EXPECT_MECHS");
    size_t n = strlen(what);
    for (const char *at = expect; at && *at;) {
        size_t k = strcspn(at, ",");
        if (k == n && !strncmp(at, what, n)) {
            fprintf(stderr, "FAIL: %s must be available here (TK_TEST_EXPECT_MECHS): %s\n", what,
                    tk_last_error());
            exit(1);
        }
        at += k + (at[k] == ',');
    }
    printf("SKIP: %s is not available here: %s\n", what, tk_last_error());
    exit(TK_SKIP);
}

enum tk_mech tk_test_mech(int argc, char **argv, unsigned flags)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MECHANISM\n", argv[0]);
        exit(1);
    }
    enum tk_mech m = tk_mech_parse(argv[1]);
    if (m == TK_MECH_COUNT_) {
        fprintf(stderr, "unknown mechanism %s\n", argv[1]);
        exit(1);
    }
    tk_region_config cfg = {.len = tk_test_page(), .mech = m, .flags = flags};
    tk_region *r;
    int err = tk_region_create(&cfg, &r);
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    if (err) {
        fprintf(stderr, "creating a %s region: %s (%s)\n", argv[1], tk_strerror(err),
                tk_last_error());
        exit(1);
    }
    CHECK(tk_region_mech(r) == m);
    CHECK_OK(tk_region_destroy(r));
    return m;
}

tk_region *tk_test_region(enum tk_mech m, size_t npages, unsigned flags, tk_fault_handler h,
                          void *arg)
{
    tk_region_config cfg = {
        .len = npages * tk_test_page(), .handler = h, .arg = arg, .mech = m, .flags = flags};
    tk_region *r = NULL;
    CHECK_OK(tk_region_create(&cfg, &r));
    return r;
}

uint64_t tk_test_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int tk_test_in_child(void (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        fn(arg);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    return status;
}

bool tk_test_dirty_is(tk_region *r, enum tk_mech m, uint64_t want)
{
    uint64_t bm[1];
    long n = tk_dirty(r, bm, 64);
    if (n < 0) return false;
    bool ok = m == TK_MECH_SOFT_DIRTY ? (bm[0] & want) == want
                                      : bm[0] == want && n == __builtin_popcountll(want);
    if (!ok)
        fprintf(stderr, "tk_dirty: %ld pages, %#llx; want %#llx\n", n, (unsigned long long)bm[0],
                (unsigned long long)want);
    return ok;
}

static char swapfile[64];

void tk_test_swap_off(void)
{
    if (!swapfile[0]) return;
    swapoff(swapfile);
    unlink(swapfile);
    swapfile[0] = 0;
}

void tk_test_swap_on(const char *name)
{
    if (geteuid() != 0) {
        printf("skip: a swap file needs root\n");
        exit(TK_SKIP);
    }
    snprintf(swapfile, sizeof swapfile, "/var/tmp/tk-%s-swap.%d", name, (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "dd if=/dev/zero of=%s bs=1M count=64 status=none && chmod 600 %s && mkswap %s "
             ">/dev/null 2>&1",
             swapfile, swapfile, swapfile);
    atexit(tk_test_swap_off);
    if (system(cmd) != 0 || swapon(swapfile, 0) != 0) {
        printf("skip: no swap file here (%s)\n", strerror(errno));
        unlink(swapfile);
        swapfile[0] = 0;
        exit(TK_SKIP);
    }
}

bool tk_test_fsize_limit(unsigned long bytes, struct rlimit *was)
{
    CHECK(getrlimit(RLIMIT_FSIZE, was) == 0);
    if (was->rlim_cur != RLIM_INFINITY && was->rlim_cur <= bytes) return false;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {bytes, was->rlim_max};
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    return true;
}
