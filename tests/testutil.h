/* tests/testutil.h - helpers for trapkit's test programs.
 * Exit codes: 0 pass, 1 fail, 77 skipped (the reason is printed). */
#ifndef TK_TESTUTIL_H
#define TK_TESTUTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <trapkit/trapkit.h>

#define TK_SKIP 77

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Checks that a trapkit call returned 0 (or >= 0), printing its error. */
#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        long rc_ = (long)(call);                                                                   \
        if (rc_ < 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s = %ld (%s: %s)\n", __FILE__, __LINE__, #call, rc_,          \
                    tk_strerror((int)rc_), tk_last_error());                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_ERR(call, err)                                                                       \
    do {                                                                                           \
        long rc_ = (long)(call);                                                                   \
        if (rc_ != (err)) {                                                                        \
            fprintf(stderr, "%s:%d: %s = %ld, expected %s (%d)\n", __FILE__, __LINE__, #call, rc_, \
                    #err, (int)(err));                                                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Exits 77 saying `what` (a mechanism or scheme) is not available here, as
 * tk_last_error() explains; exits 1 instead if TK_TEST_EXPECT_MECHS (a
 * comma-separated list) names it. */
void tk_test_unavailable(const char *what);

/* The mechanism a mech_* test runs on (argv[1]); exits 77 if this machine
 * cannot create a region of that mechanism with the given flags. */
enum tk_mech tk_test_mech(int argc, char **argv, unsigned region_flags);

/* Creates a region of n hardware pages owned by trapkit, or exits 1. */
tk_region *tk_test_region(enum tk_mech m, size_t npages, unsigned flags, tk_fault_handler h,
                          void *arg);

size_t tk_test_page(void);

/* n divided by TK_TEST_SCALE (a whole number, default 1), at least 1: the
 * rounds, faults and seconds of a long test, made fewer where the machine is
 * an emulator many times slower (make kernel-test). */
long tk_test_scaled(long n);

/* The process's mappings now (lines of /proc/self/maps), or exits 1. */
long tk_test_mappings(void);

/* Whether tk_dirty(r) (a region of at most 64 pages, mechanism m) reported
 * exactly the pages of want (soft-dirty: at least those: it may report
 * more); if not, says what it reported on stderr. */
bool tk_test_dirty_is(tk_region *r, enum tk_mech m, uint64_t want);

/* A xorshift64 step: reproducible pseudo-random test data. */
static inline uint64_t tk_test_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The usual end of a test handler: open the faulting logical page and resume
 * (decline if that fails). */
static inline tk_action tk_test_open(const tk_fault *f)
{
    return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0 ? TK_DECLINE
                                                                             : TK_RESUME;
}

/* xorshift64* random numbers, deterministic per seed. */
uint64_t tk_test_rand(uint64_t *state);

/* Runs fn(arg) in a forked child and returns its wait status. */
int tk_test_in_child(void (*fn)(void *), void *arg);

/* Turns on a 64 MiB swap file of this process's (named after `name`, in
 * /var/tmp), taken off again by tk_test_swap_off or at exit; exits 77
 * without root or where swapon fails.  Other tests running meanwhile see
 * the swap: such tests take RESOURCE_LOCK report, so never beside the
 * report's zram measurements. */
void tk_test_swap_on(const char *name);
void tk_test_swap_off(void);

/* Lowers RLIMIT_FSIZE to `bytes` (SIGXFSZ ignored: a write past it fails
 * with EFBIG, as on a full disk) and returns true, saving the limit before
 * in *was; returns false where the limit is already that low. */
bool tk_test_fsize_limit(unsigned long bytes, struct rlimit *was);

#endif
