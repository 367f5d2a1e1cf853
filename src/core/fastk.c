/* src/core/fastk.c - the fast-kernel mechanism: protection faults delivered
 * by the kernel's fast exception path (kernel/fastexc, prctl PR_FASTEXC)
 * instead of SIGSEGV.
 *
 * A fast-kernel region is a posix region (mprotect protections) whose range
 * is registered with the kernel.  A protection fault in it enters
 * tk__fastexc_entry (arch/x86_64/fastexc.c) with the kernel's small frame;
 * the entry saves the callee-saved registers and the extended state (XSAVE),
 * and tk__fastk_fault builds the ucontext and siginfo a signal would have
 * carried, routes the fault exactly as the SIGSEGV handler does
 * (tk__route_fault) and resumes in user mode.  What differs from a signal:
 * no signal frame, no rt_sigreturn, the signal mask untouched (uc_sigmask
 * reads as empty) and no alternate stack (uc_stack reads as disabled).
 *
 * A fault nobody takes goes where the SIGSEGV handler would send it: to the
 * handler installed before trapkit's (called with this context), or, if
 * there is none, back to the kernel: FASTEXC_PASS makes the instruction's
 * next fault a signal, and the default action and the core dump see the
 * true context.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <ucontext.h>

#include <fastexc/fastexc.h>

#include "arch/context.h"
#include "arch/x86_64/fastexc.h"
#include "core/internal.h"

static pthread_once_t fk_once = PTHREAD_ONCE_INIT;
static const char *fk_why = "not probed";
static bool fk_ok;

static void fk_probe(void)
{
    long v = prctl(PR_FASTEXC, FASTEXC_VERSION, 0, 0, 0);
    if (tk__probe_hides("fastexc")) {
        fk_why = "the fast exception path is hidden by TRAPKIT_PROBE_MASK";
    } else if (v < 0) {
        fk_why = "this kernel has no fast exception path (kernel/fastexc: prctl PR_FASTEXC)";
    } else if (v != FASTEXC_ABI) {
        fk_why = "the kernel's fast exception path speaks another ABI than trapkit's";
    } else if (!tk__arch_can_fast_return()) {
        fk_why = "returning in user mode is not possible here (a shadow stack is enforced)";
    } else if (!tk__fastk_arch_setup()) {
        fk_why = "the CPU's extended state cannot be saved in user mode";
    } else if (prctl(PR_FASTEXC, FASTEXC_SET_HANDLER, (unsigned long)tk__fastexc_entry, 0, 0) < 0) {
        fk_why = "the kernel refused trapkit's fast exception handler";
    } else {
        fk_ok = true;
        fk_why = NULL;
    }
}

bool tk__fastk_usable(const char **why)
{
    pthread_once(&fk_once, fk_probe);
    if (!fk_ok && why) *why = fk_why;
    return fk_ok;
}

int tk__fastk_add(uintptr_t start, size_t len)
{
    if (!tk__fastk_usable(NULL)) return -EOPNOTSUPP;
    return prctl(PR_FASTEXC, FASTEXC_ADD_RANGE, start, len, FASTEXC_ON_ACCESS) < 0 ? -errno : 0;
}

int tk__fastk_del(uintptr_t start, size_t len)
{
    return prctl(PR_FASTEXC, FASTEXC_DEL_RANGE, start, len, 0) < 0 ? -errno : 0;
}

/* Called by tk__fastexc_entry with the kernel's frame, the callee-saved
 * registers it pushed (R15, R14, R13, R12, RBX, RBP) and the XSAVE area
 * it filled.  Does not return.  [signal-safe] */
void tk__fastk_fault(struct fastexc_frame *f, const uint64_t *cs, void *fpstate)
{
    int saved_errno = errno;
    uint64_t features = tk__fastk_arch_fill(fpstate);
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    greg_t *g = uc.uc_mcontext.gregs;
    g[REG_R8] = (greg_t)f->r8;
    g[REG_R9] = (greg_t)f->r9;
    g[REG_R10] = (greg_t)f->r10;
    g[REG_R11] = (greg_t)f->r11;
    g[REG_R12] = (greg_t)cs[3];
    g[REG_R13] = (greg_t)cs[2];
    g[REG_R14] = (greg_t)cs[1];
    g[REG_R15] = (greg_t)cs[0];
    g[REG_RDI] = (greg_t)f->rdi;
    g[REG_RSI] = (greg_t)f->rsi;
    g[REG_RBP] = (greg_t)cs[5];
    g[REG_RBX] = (greg_t)cs[4];
    g[REG_RDX] = (greg_t)f->rdx;
    g[REG_RAX] = (greg_t)f->rax;
    g[REG_RCX] = (greg_t)f->rcx;
    g[REG_RSP] = (greg_t)f->rsp;
    g[REG_RIP] = (greg_t)f->rip;
    g[REG_EFL] = (greg_t)f->rflags;
    g[REG_CSGSFS] = 0x33; /* the user code segment, as a signal frame has it */
    g[REG_ERR] = (greg_t)f->error;
    g[REG_TRAPNO] = 14; /* page fault */
    g[REG_CR2] = (greg_t)f->addr;
    uc.uc_mcontext.fpregs = fpstate;
    uc.uc_stack.ss_flags = SS_DISABLE;

    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGSEGV;
    si.si_code = (f->kind & FASTEXC_K_PKEY) ? SEGV_PKUERR : SEGV_ACCERR;
    si.si_addr = (void *)f->addr;

    /* Nobody took it: to the handler installed before trapkit's, or, if
     * there is none, the instruction again with its fault a signal (the
     * default action, a core dump of the true context). */
    if (!tk__route_fault(SIGSEGV, &si, &uc) && tk__pass_on_segv(&si, &uc) &&
        prctl(PR_FASTEXC, FASTEXC_PASS, f->addr, 0, 0) < 0)
        __builtin_trap(); /* cannot happen with this ABI; crash rather than loop */
    errno = saved_errno;
    tk__x86_resume(uc.uc_mcontext.gregs, fpstate, features);
}
