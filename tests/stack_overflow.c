/* Stack overflow caught on the alternate signal stack, as libsigsegv does:
 * runaway recursion faults below the stack, trapkit's overflow handler runs
 * on the alternate stack and leaves by siglongjmp; the thread goes on.
 * Without a handler (or when it declines) the overflow still kills with
 * SIGSEGV. */
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"

static sigjmp_buf escape;
static volatile int overflows;
static volatile void *fault_addr;
static volatile uintptr_t handler_sp;

static tk_action on_overflow(const tk_fault *f, void *arg)
{
    (void)arg;
    char here;
    handler_sp = (uintptr_t)&here;
    fault_addr = f->addr;
    overflows++;
    siglongjmp(escape, 1);
}

static tk_action decline(const tk_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    return TK_DECLINE;
}

static volatile long sink;
static volatile long depth_limit = 1L << 40; /* never reached: the stack ends first */

static long recurse(long n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    pad[511] = (char)n;
    if (n > depth_limit) return 0;
    long r = recurse(n + 1) + pad[0] + pad[511];
    sink = r;
    return r;
}

static void overflow_then_die(void *arg)
{
    (void)arg;
    CHECK_OK(tk_altstack_install());
    CHECK_OK(tk_on_stack_overflow(decline, NULL));
    sink = recurse(0);
    exit(0);
}

int main(void)
{
    /* a small stack keeps the test quick */
    struct rlimit rl = {8 << 20, 8 << 20};
    setrlimit(RLIMIT_STACK, &rl);

    CHECK_OK(tk_altstack_install());
    stack_t ss;
    CHECK(sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE));
    CHECK(ss.ss_size >= getauxval(AT_MINSIGSTKSZ));
    CHECK_OK(tk_altstack_install()); /* idempotent */
    CHECK_OK(tk_on_stack_overflow(on_overflow, NULL));

    char top;
    for (int round = 1; round <= 3; round++) {
        if (sigsetjmp(escape, 1) == 0) {
            sink = recurse(0);
            CHECK(!"recursion returned");
        }
        CHECK(overflows == round);
        /* the handler ran on the alternate stack */
        CHECK(handler_sp >= (uintptr_t)ss.ss_sp && handler_sp < (uintptr_t)ss.ss_sp + ss.ss_size);
        /* and the fault was far below where we started */
        CHECK((uintptr_t)fault_addr < (uintptr_t)&top - (1u << 20));
    }

    /* Declining gives the default action. */
    int status = tk_test_in_child(overflow_then_die, NULL);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

    CHECK_OK(tk_on_stack_overflow(NULL, NULL));
    printf("stack overflow: ok: caught %d times on the alternate stack, declined one crashed\n",
           overflows);
    return 0;
}
