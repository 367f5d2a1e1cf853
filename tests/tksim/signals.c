/* Signals: the program's handlers entered and returned from, as Linux on
 * riscv64 does - raise, kill and sigqueue with their siginfo, every
 * register and fcsr as they were after the handler returns (from a system
 * call, and from a timer's expiry in the middle of a loop), the frame's
 * ucontext, nested handlers (SA_NODEFER), sa_mask, the order of several
 * signals unblocked at once, real-time signals queued, SA_RESETHAND, the
 * alternate stack (sigaltstack, SA_ONSTACK), waits a handler interrupts
 * (pause, sigsuspend, nanosleep, select, sigtimedwait, read on a pipe, with
 * and without SA_RESTART), and the faults a handler takes: SIGSEGV on
 * memory not mapped, not readable or not writable (left by siglongjmp,
 * fixed by mprotect and retried, skipped by the handler moving the saved
 * pc on), SIGILL, SIGTRAP (ebreak), SIGBUS (a misaligned atomic, a shared
 * file mapping past the file's end).  With an argument, the program ends
 * by a signal: "segv" (a store to a page not mapped, no handler), "blocked"
 * (the same with SIGSEGV blocked: its handler is not entered), "nested" (a
 * fault inside the SIGSEGV handler), "abort" (abort() with a SIGABRT
 * handler that returns), "term" (a SIGTERM handler reset by SA_RESETHAND,
 * then SIGTERM again), "pipe" (a write to a pipe no one reads).  The output and the exit status
 * must equal qemu-riscv64's; addresses and times are not printed, only checks on them. Build:
 * riscv64-linux-gnu-gcc -O2 -static -o signals signals.c -lm */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fenv.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "guest.h"

/* the output: write(2) on descriptor 1, one line a check (a handler's
 * lines too: vsnprintf and write may be called from one) */

static const char *res(int r) /* a glibc call's answer: "ok" or errno's name */
{
    return r >= 0 ? "ok" : errname(errno);
}

/* sig's handler fn, with SA_SIGINFO and flags, and masked (unless 0) in
 * its sa_mask.  (qemu-riscv64 7.2 reads sa_mask 8 bytes further on than
 * Linux does, where glibc passes the mask of signals 65-128, 0: the mask is
 * there too, so that both block it.) */
static void on(int sig, void (*fn)(int, siginfo_t *, void *), int flags, int masked)
{
    struct sigaction sa = {0};
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (masked) {
        sigaddset(&sa.sa_mask, masked);
        sa.sa_mask.__val[1] = sa.sa_mask.__val[0];
    }
    if (sigaction(sig, &sa, NULL) != 0) _exit(98);
}

static void dfl(int sig)
{
    signal(sig, SIG_DFL);
}

static int blocked(int sig) /* sig is blocked now */
{
    sigset_t s;
    sigprocmask(SIG_BLOCK, NULL, &s);
    return sigismember(&s, sig);
}

static void mask(int how, int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(how, &s, NULL);
}

/* a timer of ITIMER_REAL (SIGALRM) in us; 0 disarms it */
static void alarm_us(long us)
{
    struct itimerval v = {{0, 0}, {us / 1000000, us % 1000000}};
    setitimer(ITIMER_REAL, &v, NULL);
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* ---- raise, kill, sigqueue: the handler's arguments and frame ---- */
static volatile int got_sig, got_code, got_value, got_args, got_frame;

static void on_basic(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    uintptr_t sp;
    __asm__ volatile("mv %0, sp" : "=r"(sp));
    got_sig = si->si_signo;
    got_code = si->si_code;
    got_value = si->si_code == SI_QUEUE ? si->si_value.sival_int : 0;
    /* a0 the signal, sp 16-byte aligned; the saved pc after the ecall, the
     * signal blocked now and not in the mask to restore */
    got_args = sig == si->si_signo && (sp & 15) == 0 && si->si_pid == getpid();
    uint32_t before = *(uint32_t *)(uc->uc_mcontext.__gregs[REG_PC] - 4);
    got_frame = before == 0x00000073 && blocked(sig) && !sigismember(&uc->uc_sigmask, sig) &&
                uc->uc_link == NULL;
}

static void basics(void)
{
    on(SIGUSR1, on_basic, 0, 0);
    out("raise: %s", res(raise(SIGUSR1)));
    out(", handler: signal %d, SI_TKILL %d, arguments %d, frame %d\n", got_sig,
        got_code == SI_TKILL, got_args, got_frame);
    on(SIGUSR2, on_basic, 0, 0);
    out("kill: %s", res(kill(getpid(), SIGUSR2)));
    out(", handler: signal %d, SI_USER %d, arguments %d, frame %d\n", got_sig, got_code == SI_USER,
        got_args, got_frame);
    union sigval v = {.sival_int = 42};
    out("sigqueue: %s", res(sigqueue(getpid(), SIGUSR1, v)));
    out(", handler: signal %d, SI_QUEUE %d, value %d\n", got_sig, got_code == SI_QUEUE, got_value);
    out("after the handlers: SIGUSR1 blocked %d\n", blocked(SIGUSR1));
    dfl(SIGUSR1);
    dfl(SIGUSR2);
}

/* ---- every register kept ---- */
/* the registers' values: x1-x31 at 8 * n (sp, gp, tp not set), f0-f31 at
 * 256 + 8 * n, fcsr at 512; what they hold after at 1024 on */
uint64_t sig_regs[256] __attribute__((aligned(16))); /* (named in the asm below) */
#define regs sig_regs
static volatile uint64_t flag;
static int frame_kept;

static int settable(int n) /* set and checked: not sp, gp, tp, nor t6 (the buffer) */
{
    return n != 0 && n != 2 && n != 3 && n != 4 && n != 31;
}

/* a handler that changes what it can: the caller-saved registers (its C
 * code), the floating-point ones and fcsr's rounding mode and flags */
static void on_regs(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    (void)sig;
    (void)si;
    int ok = 1;
    for (int n = 1; n < 31; n++)
        if (settable(n) && n != 10 && n != 30 && uc->uc_mcontext.__gregs[n] != regs[n]) ok = 0;
    for (int n = 0; n < 32; n++)
        if (uc->uc_mcontext.__fpregs.__d.__f[n] != regs[32 + n]) ok = 0;
    if (uc->uc_mcontext.__fpregs.__d.__fcsr != regs[64]) ok = 0;
    frame_kept = ok;
    fesetround(FE_DOWNWARD);
    volatile double d = 1.0;
    for (int k = 0; k < 10; k++) d = d / 3.0 + 0.1;
    __asm__ volatile("fmv.d.x ft0, zero\n fmv.d.x fs0, zero\n fmv.d.x fa0, zero\n" ::
                         : "ft0", "fs0", "fa0");
    flag = 1;
}

#define SAVE_REGS(at)                                                                              \
    "sd x1, " #at "+8(t6)\n sd x5, " #at "+40(t6)\n sd x6, " #at "+48(t6)\n"                       \
    "sd x7, " #at "+56(t6)\n sd x8, " #at "+64(t6)\n sd x9, " #at "+72(t6)\n"                      \
    "sd x10, " #at "+80(t6)\n sd x11, " #at "+88(t6)\n sd x12, " #at "+96(t6)\n"                   \
    "sd x13, " #at "+104(t6)\n sd x14, " #at "+112(t6)\n sd x15, " #at "+120(t6)\n"                \
    "sd x16, " #at "+128(t6)\n sd x17, " #at "+136(t6)\n sd x18, " #at "+144(t6)\n"                \
    "sd x19, " #at "+152(t6)\n sd x20, " #at "+160(t6)\n sd x21, " #at "+168(t6)\n"                \
    "sd x22, " #at "+176(t6)\n sd x23, " #at "+184(t6)\n sd x24, " #at "+192(t6)\n"                \
    "sd x25, " #at "+200(t6)\n sd x26, " #at "+208(t6)\n sd x27, " #at "+216(t6)\n"                \
    "sd x28, " #at "+224(t6)\n sd x29, " #at "+232(t6)\n sd x30, " #at "+240(t6)\n"
#define FP_REGS(op, at)                                                                            \
#op " f0, " #at "+256(t6)\n " #op " f1, " #at "+264(t6)\n " #op " f2, " #at "+272(t6)\n " #op  \
        " f3, " #at "+280(t6)\n " #op " f4, " #at "+288(t6)\n " #op " f5, " #at "+296(t6)\n " #op  \
        " f6, " #at "+304(t6)\n " #op " f7, " #at "+312(t6)\n " #op " f8, " #at "+320(t6)\n " #op  \
        " f9, " #at "+328(t6)\n " #op " f10, " #at "+336(t6)\n " #op " f11, " #at                  \
        "+344(t6)\n " #op " f12, " #at "+352(t6)\n " #op " f13, " #at "+360(t6)\n " #op            \
        " f14, " #at "+368(t6)\n " #op " f15, " #at "+376(t6)\n " #op " f16, " #at                 \
        "+384(t6)\n " #op " f17, " #at "+392(t6)\n " #op " f18, " #at "+400(t6)\n " #op            \
        " f19, " #at "+408(t6)\n " #op " f20, " #at "+416(t6)\n " #op " f21, " #at                 \
        "+424(t6)\n " #op " f22, " #at "+432(t6)\n " #op " f23, " #at "+440(t6)\n " #op            \
        " f24, " #at "+448(t6)\n " #op " f25, " #at "+456(t6)\n " #op " f26, " #at                 \
        "+464(t6)\n " #op " f27, " #at "+472(t6)\n " #op " f28, " #at "+480(t6)\n " #op            \
        " f29, " #at "+488(t6)\n " #op " f30, " #at "+496(t6)\n " #op " f31, " #at "+504(t6)\n"
#define LOAD_REGS                                                                                  \
    "ld x1, 8(t6)\n ld x5, 40(t6)\n ld x6, 48(t6)\n ld x7, 56(t6)\n ld x8, 64(t6)\n"               \
    "ld x9, 72(t6)\n ld x10, 80(t6)\n ld x11, 88(t6)\n ld x12, 96(t6)\n ld x13, 104(t6)\n"         \
    "ld x14, 112(t6)\n ld x15, 120(t6)\n ld x16, 128(t6)\n ld x17, 136(t6)\n ld x18, 144(t6)\n"    \
    "ld x19, 152(t6)\n ld x20, 160(t6)\n ld x21, 168(t6)\n ld x22, 176(t6)\n ld x23, 184(t6)\n"    \
    "ld x24, 192(t6)\n ld x25, 200(t6)\n ld x26, 208(t6)\n ld x27, 216(t6)\n ld x28, 224(t6)\n"    \
    "ld x29, 232(t6)\n ld x30, 240(t6)\n"
#define CLOBBERS                                                                                   \
    "ra", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "s2",      \
        "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "ft0", "ft1",    \
        "ft2", "ft3", "ft4", "ft5", "ft6", "ft7", "fs0", "fs1", "fa0", "fa1", "fa2", "fa3", "fa4", \
        "fa5", "fa6", "fa7", "fs2", "fs3", "fs4", "fs5", "fs6", "fs7", "fs8", "fs9", "fs10",       \
        "fs11", "ft8", "ft9", "ft10", "ft11", "memory"

/* the values, then (async 0) tgkill(getpid(), gettid(), SIGUSR1) by ecall
 * with them in place, or (async 1) a loop on flag (t5 its address, then its
 * value) until SIGALRM's handler sets it; then how many differ */
static int kept(int async)
{
    uint64_t fcsr = 1 << 5 | 0x3; /* round towards zero; NX and UF set */
    for (int n = 0; n < 32; n++) {
        regs[n] = 0x0101010101010101ull * (uint64_t)n ^ 0x8000000000000000ull;
        regs[32 + n] = 0x4000000000000000ull + ((uint64_t)n << 44) + (uint64_t)n * 12345;
    }
    regs[64] = fcsr;
    flag = 0;
    if (!async) { /* a0-a2, a7: tgkill's arguments; a0 after: its answer */
        regs[10] = (uint64_t)getpid();
        regs[11] = (uint64_t)gettid();
        regs[12] = SIGUSR1;
        regs[17] = SYS_tgkill;
    }
    regs[30] = (uint64_t)(uintptr_t)&flag; /* t5: the flag's address */
    regs[65] = (uint64_t)async;
    if (async) alarm_us(2000);
    __asm__ volatile("la t6, sig_regs\n"
                     "ld t0, 512(t6)\n csrw fcsr, t0\n" FP_REGS(
                         fld, 0) "ld t0, 520(t6)\n"
                                 "bnez t0, 1f\n" LOAD_REGS "ecall\n"
                                 "j 3f\n"
                                 "1:\n" LOAD_REGS
                                 "2: ld t5, 0(t5)\n bnez t5, 3f\n ld t5, 240(t6)\n j 2b\n"
                                 "3:\n" SAVE_REGS(1024)
                                     FP_REGS(fsd, 1024) "csrr t0, fcsr\n sd t0, 1024+512(t6)\n"
                                                        "csrw fcsr, zero\n"
                     :
                     :
                     : "t6", CLOBBERS);
    int differ = 0;
    for (int n = 0; n < 32; n++) {
        uint64_t want = n == 10 && !async ? 0 : regs[n]; /* (a0: tgkill's 0) */
        if (settable(n) && n != 30 && regs[128 + n] != want) differ++;
        if (regs[128 + 32 + n] != regs[32 + n]) differ++;
    }
    if (regs[128 + 64] != fcsr) differ++;
    return differ;
}

static void registers(void)
{
    on(SIGUSR1, on_regs, 0, 0);
    int d = kept(0);
    out("registers after a handler (tgkill by ecall): the frame had them %d, %d differ, "
        "handler ran %d\n",
        frame_kept, d, (int)flag);
    on(SIGALRM, on_regs, 0, 0);
    d = kept(1);
    out("registers after a handler (SIGALRM in a loop): the frame had them %d, %d differ, "
        "handler ran %d\n",
        frame_kept, d, (int)flag);
    dfl(SIGUSR1);
    dfl(SIGALRM);
}

/* ---- a computation across many handlers ---- */
static volatile int ticks;
static void on_tick(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    fesetround(FE_UPWARD);
    volatile double x = 1.0;
    for (int k = 0; k < 5; k++) x = x * 1.1 + 0.3;
    errno = EDOM;
    ticks++;
}

static void checksum(void)
{
    on(SIGUSR1, on_tick, 0, 0);
    double x = 1.0, y = 0.5;
    unsigned long s = 7;
    for (int i = 0; i < 200; i++) {
        x = x * 1.0001 + y / 3.0;
        s = s * 31 + (unsigned long)i;
        errno = 0;
        raise(SIGUSR1);
        if (errno != 0) s++; /* (the handler's errno stays) */
        y = y * 0.999 + x * 1e-6;
    }
    out("checksum across %d handlers: %.17g %.17g %lu, rounding to nearest %d\n", ticks, x, y, s,
        fegetround() == FE_TONEAREST);
    dfl(SIGUSR1);
}

/* ---- nesting, masks, order ---- */
static char log_buf[256];
static void note(const char *s)
{
    strcat(log_buf, s);
}

static volatile int depth, entries;
static void on_usr2_nested(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    note(depth ? " usr2-inside" : " usr2");
}
static void on_usr1_nested(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    depth++;
    note(" usr1{");
    raise(SIGUSR2);
    if (++entries == 1) raise(sig); /* pending (the signal is blocked) until the return */
    note(" }");
    depth--;
}
static void on_nodefer(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    char b[16];
    snprintf(b, sizeof b, " d%d{", ++depth);
    note(b);
    if (depth < 3) raise(sig); /* SA_NODEFER: entered again at once */
    note(" }");
    depth--;
}
static void on_masking(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    note(" usr1{");
    raise(SIGUSR2); /* sa_mask blocks it: it waits */
    note(" }");
}
static void on_order(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    char b[16];
    snprintf(b, sizeof b, " %d", sig);
    note(b);
}

static void nesting(void)
{
    on(SIGUSR1, on_usr1_nested, 0, 0);
    on(SIGUSR2, on_usr2_nested, 0, 0);
    log_buf[0] = 0;
    raise(SIGUSR1);
    out("nested:%s\n", log_buf);

    on(SIGUSR1, on_nodefer, SA_NODEFER, 0);
    log_buf[0] = 0;
    raise(SIGUSR1);
    out("SA_NODEFER:%s\n", log_buf);

    on(SIGUSR1, on_masking, 0, SIGUSR2);
    log_buf[0] = 0;
    raise(SIGUSR1);
    out("sa_mask SIGUSR2:%s\n", log_buf);

    /* several pending, unblocked at once: each entered in turn, the lowest
     * first, so the highest runs first; then one whose sa_mask holds back
     * another */
    on(SIGUSR1, on_order, 0, 0);
    on(SIGUSR2, on_order, 0, 0);
    on(SIGRTMIN, on_order, 0, 0);
    on(SIGURG, on_order, 0, 0);
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGUSR2);
    sigaddset(&s, SIGRTMIN);
    sigaddset(&s, SIGURG);
    sigprocmask(SIG_BLOCK, &s, &old);
    raise(SIGUSR2);
    raise(SIGRTMIN);
    raise(SIGUSR1);
    raise(SIGURG);
    log_buf[0] = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    out("unblocked at once:%s\n", log_buf);
    on(SIGUSR1, on_order, 0, SIGUSR2);
    sigprocmask(SIG_BLOCK, &s, &old);
    raise(SIGUSR2);
    raise(SIGUSR1);
    log_buf[0] = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    out("unblocked at once, SIGUSR1's sa_mask holding SIGUSR2:%s\n", log_buf);

    /* a real-time signal queues */
    mask(SIG_BLOCK, SIGRTMIN);
    for (int k = 0; k < 3; k++) raise(SIGRTMIN);
    log_buf[0] = 0;
    mask(SIG_UNBLOCK, SIGRTMIN);
    out("SIGRTMIN raised 3 times while blocked:%s\n", log_buf);
    dfl(SIGUSR1);
    dfl(SIGUSR2);
    dfl(SIGRTMIN);
    dfl(SIGURG);
}

/* ---- SA_RESETHAND ---- */
static volatile int urg;
static void on_urg(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    urg++;
}

static void resethand(void)
{
    on(SIGURG, on_urg, SA_RESETHAND, 0);
    raise(SIGURG);
    struct sigaction o;
    sigaction(SIGURG, NULL, &o);
    raise(SIGURG); /* (SIG_DFL: ignored) */
    out("SA_RESETHAND: handler ran %d, SIG_DFL after %d\n", urg, o.sa_handler == SIG_DFL);
}

/* ---- the alternate stack ---- */
static char alt[65536] __attribute__((aligned(16)));
static int on_alt, alt_flag, alt_change;
static void on_stack(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    char here;
    on_alt = &here >= alt && &here < alt + sizeof alt;
    stack_t now, ss = {alt, 0, sizeof alt};
    sigaltstack(NULL, &now);
    alt_flag = now.ss_flags;
    alt_change = sigaltstack(&ss, NULL) == 0 ? 0 : errno;
}

static void altstack(void)
{
    stack_t ss = {alt, 0, sizeof alt}, o;
    out("sigaltstack: 64 KiB = %s", res(sigaltstack(&ss, &o)));
    out(", it was disabled %d", o.ss_flags == SS_DISABLE);
    stack_t small = {alt, 0, 1024};
    out(", 1 KiB = %s\n", sigaltstack(&small, NULL) == 0 ? "ok" : errno == ENOMEM ? "ENOMEM" : "?");
    on(SIGUSR1, on_stack, SA_ONSTACK, 0);
    raise(SIGUSR1);
    out("SA_ONSTACK: on the alternate stack %d, SS_ONSTACK %d, a change meanwhile EPERM %d\n",
        on_alt, alt_flag == SS_ONSTACK, alt_change == EPERM);
    on(SIGUSR1, on_stack, 0, 0);
    raise(SIGUSR1);
    out("without SA_ONSTACK: on the alternate stack %d, flags %d\n", on_alt, alt_flag);
    sigaltstack(NULL, &o);
    out("after: flags %d", o.ss_flags);
    ss.ss_flags = SS_DISABLE;
    out(", disabled = %s\n", res(sigaltstack(&ss, NULL)));
    dfl(SIGUSR1);
}

/* ---- waits a handler interrupts ---- */
static volatile int alarms;
static int alrm_pipe = -1, alrm_blocked_in_handler, saved_mask_alrm;
static void on_alrm(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    (void)sig;
    alarms++;
    got_code = si->si_code;
    alrm_blocked_in_handler = blocked(SIGUSR2);
    saved_mask_alrm = sigismember(&uc->uc_sigmask, SIGALRM);
    if (alrm_pipe >= 0 && write(alrm_pipe, "!", 1) != 1) _exit(97);
}

static void waits(void)
{
    on(SIGALRM, on_alrm, 0, 0);
    alarm(1);
    int r = pause();
    out("alarm(1), pause: %d %s, handler ran %d, SI_KERNEL %d, alarm() left %u\n", r, res(r),
        alarms, got_code == SI_KERNEL, alarm(0));
    alarm_us(10000);
    r = pause();
    out("setitimer 10 ms, pause: %d %s, handler ran %d\n", r, res(r), alarms);

    /* sigsuspend: SIGALRM blocked, then let through (SIGUSR2 blocked instead);
     * the handler runs with sigsuspend's mask, and the old one is back after */
    mask(SIG_BLOCK, SIGALRM);
    alarm_us(10000);
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    r = sigsuspend(&m);
    out("sigsuspend: %d %s, handler ran %d, SIGUSR2 blocked there %d, SIGALRM in its saved "
        "mask %d, blocked after %d\n",
        r, res(r), alarms, alrm_blocked_in_handler, saved_mask_alrm, blocked(SIGALRM));
    mask(SIG_UNBLOCK, SIGALRM);

    struct timespec five = {5, 0}, rem = {0, 0};
    alarm_us(10000);
    r = nanosleep(&five, &rem);
    long left = rem.tv_sec * 1000000000L + rem.tv_nsec;
    out("nanosleep 5 s: %d %s, handler ran %d, 4.9 s to 5 s left %d\n", r, res(r), alarms,
        left > 4900000000L && left < 5000000000L);

    struct timeval tv = {5, 0};
    alarm_us(10000);
    r = select(0, NULL, NULL, NULL, &tv);
    out("select 5 s: %d %s, handler ran %d\n", r, res(r), alarms);

    sigset_t w;
    sigemptyset(&w);
    sigaddset(&w, SIGUSR2);
    mask(SIG_BLOCK, SIGUSR2);
    siginfo_t si;
    alarm_us(10000);
    r = sigwaitinfo(&w, &si);
    out("sigwaitinfo for SIGUSR2: %d %s, handler ran %d\n", r, res(r), alarms);
    mask(SIG_UNBLOCK, SIGUSR2);

    /* read on an empty pipe: the handler writes a byte to it */
    int p[2];
    if (pipe(p) != 0) _exit(96);
    alrm_pipe = p[1];
    char c = 0;
    long t0 = now_ns();
    alarm_us(10000);
    r = (int)read(p[0], &c, 1);
    out("read on an empty pipe: %d %s, handler ran %d", r, res(r), alarms);
    r = (int)read(p[0], &c, 1);
    out(", the byte read after %d '%c'\n", r, c);
    on(SIGALRM, on_alrm, SA_RESTART, 0);
    alarm_us(10000);
    c = 0;
    r = (int)read(p[0], &c, 1);
    out("read with SA_RESTART: %d '%c', handler ran %d, 10 ms went by %d\n", r, c, alarms,
        now_ns() - t0 >= 20000000);
    alrm_pipe = -1;
    close(p[0]);
    close(p[1]);

    /* a write to a pipe no one reads: SIGPIPE, then EPIPE */
    if (pipe(p) != 0) _exit(96);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    r = (int)write(p[1], "x", 1);
    out("write to a pipe no one reads, SIGPIPE ignored: %d %s", r, errno == EPIPE ? "EPIPE" : "?");
    on(SIGPIPE, on_basic, 0, 0);
    got_sig = 0;
    r = (int)write(p[1], "x", 1);
    out(", a handler: %d %s, signal %d, SI_USER %d\n", r, errno == EPIPE ? "EPIPE" : "?", got_sig,
        got_code == SI_USER);
    close(p[1]);
    dfl(SIGPIPE);

    /* a POSIX timer's signal: SI_TIMER and its value */
    timer_t t;
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    ev.sigev_value.sival_int = 77;
    on(SIGUSR1, on_basic, 0, 0);
    got_sig = 0;
    timer_create(CLOCK_MONOTONIC, &ev, &t);
    struct itimerspec its = {{0, 0}, {0, 5000000}};
    timer_settime(t, 0, &its, NULL);
    while (!got_sig) {
    }
    out("timer_create: signal %d, SI_TIMER %d\n", got_sig, got_code == SI_TIMER);
    timer_delete(t);
    dfl(SIGUSR1);
    dfl(SIGALRM);
}

/* ---- faults ---- */
static sigjmp_buf jump;
static volatile int fault_sig, fault_code, fault_at, fixed;
static char *fault_page;
static void on_fault_jump(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    fault_sig = sig;
    fault_code = si->si_code;
    fault_at = (char *)si->si_addr == fault_page + 8;
    siglongjmp(jump, 1);
}
static void on_fault_fix(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    fault_sig = sig;
    fault_code = si->si_code;
    fixed++;
    char *page = (char *)((uintptr_t)si->si_addr & ~(uintptr_t)4095);
    if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0) _exit(95);
}
/* moves the saved pc past the instruction that faulted (2 or 4 bytes) */
static void on_fault_skip(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    fault_sig = sig;
    fault_code = si->si_code;
    uint16_t *pc = (uint16_t *)uc->uc_mcontext.__gregs[REG_PC];
    fault_at = (void *)pc == si->si_addr;
    uc->uc_mcontext.__gregs[REG_PC] += (*pc & 3) == 3 ? 4 : 2;
    uc->uc_mcontext.__gregs[REG_A0 + 5] = 555; /* a5: changed by the handler */
}

static const char *name(int sig)
{
    return sig == SIGSEGV   ? "SIGSEGV"
           : sig == SIGBUS  ? "SIGBUS"
           : sig == SIGILL  ? "SIGILL"
           : sig == SIGTRAP ? "SIGTRAP"
                            : "another";
}

static void jumped(const char *what, int code)
{
    out("%s: %s, si_code %d %d, si_addr %d\n", what, name(fault_sig), fault_code,
        fault_code == code, fault_at);
    fault_sig = fault_code = fault_at = 0;
}

static void faults(void)
{
    on(SIGSEGV, on_fault_jump, 0, 0);
    on(SIGBUS, on_fault_jump, 0, 0);
    char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) _exit(94);
    munmap(m + 4096, 4096);
    fault_page = m + 4096;
    if (!sigsetjmp(jump, 1)) *(volatile int *)(fault_page + 8) = 1;
    jumped("a store to a page not mapped", SEGV_MAPERR);
    out("SIGSEGV unblocked after siglongjmp %d\n", !blocked(SIGSEGV));
    if (!sigsetjmp(jump, 1)) (void)*(volatile int *)(fault_page + 8);
    jumped("a load from a page not mapped", SEGV_MAPERR);
    fault_page = m + 2 * 4096;
    mprotect(fault_page, 4096, PROT_NONE);
    if (!sigsetjmp(jump, 1)) (void)*(volatile int *)(fault_page + 8);
    jumped("a load from a PROT_NONE page", SEGV_ACCERR);
    if (!sigsetjmp(jump, 1)) *(volatile int *)(fault_page + 8) = 1;
    jumped("a store to a PROT_NONE page", SEGV_ACCERR);
    fault_page = m;
    mprotect(m, 4096, PROT_READ);
    if (!sigsetjmp(jump, 1)) *(volatile int *)(m + 8) = 1;
    jumped("a store to a PROT_READ page", SEGV_ACCERR);
    out("the PROT_READ page still reads %d\n", *(volatile int *)(m + 8));

    /* fixed by the handler, the store runs again */
    on(SIGSEGV, on_fault_fix, 0, 0);
    *(volatile int *)(m + 8) = 1234;
    out("a store to a PROT_READ page, made writable by the handler: %s, handled %d, "
        "SEGV_ACCERR %d, the value %d\n",
        name(fault_sig), fixed, fault_code == SEGV_ACCERR, *(volatile int *)(m + 8));

    /* skipped by the handler: the saved pc moved on, a5 changed */
    on(SIGSEGV, on_fault_skip, 0, 0);
    on(SIGILL, on_fault_skip, 0, 0);
    on(SIGTRAP, on_fault_skip, 0, 0);
    on(SIGBUS, on_fault_skip, 0, 0);
    long a0 = 11, a5 = 0;
    __asm__ volatile("mv a0, %2\n li a5, 0\n lw a0, 8(a0)\n mv %0, a0\n mv %1, a5\n"
                     : "=&r"(a0), "=&r"(a5)
                     : "r"(fault_page + 2 * 4096)
                     : "a0", "a5", "memory");
    out("a load from a PROT_NONE page, skipped: %s, SEGV_ACCERR %d, the target register kept "
        "%d, a5 from the frame %ld\n",
        name(fault_sig), fault_code == SEGV_ACCERR, a0 == (long)(uintptr_t)(fault_page + 2 * 4096),
        a5);
    fault_sig = 0;
    __asm__ volatile(".option push\n .option norvc\n li a5, 0\n unimp\n mv %0, a5\n .option pop"
                     : "=r"(a5)
                     :
                     : "a5");
    out("an illegal instruction, skipped: %s, ILL_ILLOPC %d, si_addr the pc %d, a5 %ld\n",
        name(fault_sig), fault_code == ILL_ILLOPC, fault_at, a5);
    __asm__ volatile(".option push\n .option norvc\n li a5, 0\n ebreak\n mv %0, a5\n .option pop"
                     : "=r"(a5)
                     :
                     : "a5");
    out("ebreak, skipped: %s, TRAP_BRKPT %d, si_addr the pc %d, a5 %ld\n", name(fault_sig),
        fault_code == TRAP_BRKPT, fault_at, a5);
    __asm__ volatile(".option push\n .option rvc\n li a5, 0\n c.ebreak\n mv %0, a5\n .option pop"
                     : "=r"(a5)
                     :
                     : "a5");
    out("c.ebreak, skipped: %s, a5 %ld\n", name(fault_sig), a5);
    static uint64_t words[2];
    long r = 0;
    __asm__ volatile("li a5, 0\n amoadd.w %0, %2, (%3)\n mv %1, a5\n"
                     : "=&r"(r), "=&r"(a5)
                     : "r"(1L), "r"((char *)words + 2)
                     : "a5", "memory");
    out("a misaligned amoadd.w, skipped: %s, BUS_ADRALN %d, a5 %ld\n", name(fault_sig),
        fault_code == BUS_ADRALN, a5);

    /* a shared mapping of a file past the file's end */
    on(SIGBUS, on_fault_jump, 0, 0);
    int fd = open("/proc/self/exe", O_RDONLY);
    off_t size = lseek(fd, 0, SEEK_END);
    char *f = mmap(NULL, (size_t)size + 2 * 4096, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    fault_page = f + ((size + 4095) & ~4095L);
    if (!sigsetjmp(jump, 1)) (void)*(volatile int *)(fault_page + 8);
    jumped("a load past the end of a shared file mapping", BUS_ADRERR);
    volatile char last = f[size - 1];
    (void)last;
    out("its last page reads, the first byte 0x7f %d\n", f[0] == 0x7f);
    munmap(f, (size_t)size + 2 * 4096);
    munmap(m, 3 * 4096);
    dfl(SIGSEGV);
    dfl(SIGBUS);
    dfl(SIGILL);
    dfl(SIGTRAP);
}

/* ---- the ends ---- */
static void on_segv_again(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    out("SIGSEGV handler: fault at the page %d; a store there again\n",
        (char *)si->si_addr == fault_page);
    *(volatile int *)fault_page = 2;
    out("not ended\n");
}
static void on_abrt(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    out("SIGABRT handler: returns\n");
}
static void on_term(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    out("SIGTERM handler, once\n");
}

static int ends(const char *how)
{
    fault_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(fault_page, 4096);
    if (strcmp(how, "segv") == 0) {
        out("segv: a store to a page not mapped, SIGSEGV's default action\n");
        *(volatile int *)fault_page = 1;
    } else if (strcmp(how, "blocked") == 0) {
        on(SIGSEGV, on_segv_again, 0, 0);
        mask(SIG_BLOCK, SIGSEGV);
        out("blocked: a store to a page not mapped, SIGSEGV blocked\n");
        *(volatile int *)fault_page = 1;
    } else if (strcmp(how, "nested") == 0) {
        on(SIGSEGV, on_segv_again, 0, 0);
        out("nested: a store to a page not mapped, then in the handler\n");
        *(volatile int *)fault_page = 1;
    } else if (strcmp(how, "abort") == 0) {
        on(SIGABRT, on_abrt, 0, 0);
        out("abort: a SIGABRT handler that returns\n");
        abort();
    } else if (strcmp(how, "pipe") == 0) {
        int p[2];
        if (pipe(p) != 0) _exit(96);
        close(p[0]);
        out("pipe: a write to a pipe no one reads, SIGPIPE's default action\n");
        if (write(p[1], "x", 1) != 1) out("the write failed\n");
    } else if (strcmp(how, "term") == 0) {
        on(SIGTERM, on_term, SA_RESETHAND, 0);
        raise(SIGTERM);
        out("term: SIGTERM again\n");
        raise(SIGTERM);
    }
    out("%s: not ended\n", how);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2) return ends(argv[1]);
    basics();
    registers();
    checksum();
    nesting();
    resethand();
    altstack();
    waits();
    faults();
    out("done\n");
    return 0;
}
