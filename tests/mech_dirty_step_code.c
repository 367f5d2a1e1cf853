/* DIRTY's single-steps when the trace trap comes with another si_code.
 *
 * A write trapkit does not emulate (an x87 store) is completed by
 * single-stepping it (src/vm/dirty.c, "Writes in flight"): the trap flag is
 * set and the SIGTRAP after the instruction counts the write complete.  The
 * kernel reports a debug exception whose status register (DR6) says nothing
 * as an icebp instruction, TRAP_BRKPT, and a virtual machine that does not
 * keep the guest's DR6 turns a single-step into one.  Here a runtime's own
 * SIGTRAP handler, installed after trapkit's, passes every trace trap on to
 * trapkit's as TRAP_BRKPT: the program must go on (the default action of a
 * SIGTRAP trapkit does not take is to die), every write be reported once,
 * and the trap flag be cleared (no further traps).  Where the faulting
 * thread takes the fault (posix, uffd-sigbus) the writes must have been
 * stepped; elsewhere the kernel or a service thread completes them and the
 * writes are only checked to be reported. */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"

#define NPAGES 64
#define ROUNDS 20

static struct sigaction trapkit_sa;
static atomic_long traps, passed_on;

static void runtime_trap(int sig, siginfo_t *si, void *uc)
{
    atomic_fetch_add(&traps, 1);
    siginfo_t copy = *si;
    if (copy.si_code == TRAP_TRACE) {
        copy.si_code = TRAP_BRKPT; /* as the kernel says it when DR6 is empty */
        atomic_fetch_add(&passed_on, 1);
    }
    if (trapkit_sa.sa_flags & SA_SIGINFO)
        trapkit_sa.sa_sigaction(sig, &copy, uc);
    else
        _exit(3); /* trapkit's handler must be the one before */
}

static void x87_store(double *at, double v)
{
    __asm__ volatile("fldl %1\n\tfstpl %0" : "=m"(*at) : "m"(v) : "memory");
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    char *base = tk_region_base(r);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = runtime_trap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGTRAP, &sa, &trapkit_sa) == 0);
    CHECK((trapkit_sa.sa_flags & SA_SIGINFO) && trapkit_sa.sa_sigaction != NULL);

    CHECK(tk_test_dirty_is(r, m, 0)); /* (a clean start) */
    uint64_t rng = 77;
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t want = tk_test_rand(&rng);
        if (round == 0) want = ~(uint64_t)0;
        for (int p = 0; p < NPAGES; p++)
            if (want >> p & 1) x87_store((double *)(base + (size_t)p * ps) + p, round + 0.5);
        long before = atomic_load(&traps);
        /* with the trap flag left set, each of these would trap */
        volatile long sink = 0;
        for (int i = 0; i < 100; i++) sink += i;
        CHECK(atomic_load(&traps) == before);
        if (!tk_test_dirty_is(r, m, want)) {
            fprintf(stderr, "FAIL: round %d: the writes were not reported exactly\n", round);
            return 1;
        }
        for (int p = 0; p < NPAGES; p++)
            if (want >> p & 1) CHECK(((double *)(base + (size_t)p * ps))[p] == round + 0.5);
    }
    bool stepped = m == TK_MECH_POSIX || m == TK_MECH_UFFD_SIGBUS;
    if (stepped && atomic_load(&passed_on) == 0) {
        fprintf(stderr, "FAIL: no write was single-stepped on %s\n", argv[1]);
        return 1;
    }
    printf("%s: %ld trace traps passed on as TRAP_BRKPT, writes reported once\n", argv[1],
           atomic_load(&passed_on));
    CHECK(sigaction(SIGTRAP, &trapkit_sa, NULL) == 0);
    tk_region_destroy(r);
    return 0;
}
