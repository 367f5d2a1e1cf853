/* tests/fastexc_kernel.c - the fast exception path of kernel/fastexc, and
 * Thekkath & Levy's Table 3 for this kernel.
 *
 * On a kernel with the patch (prctl PR_FASTEXC answers), every promise of
 * kernel/fastexc/fastexc.h is checked: the frame holds exactly the
 * interrupted registers and nothing else, every register comes back,
 * ranges catch what they name and nothing more, int3 and ud2 at registered
 * addresses, eager amplification, a signal and a nested fault inside the
 * handler, a registered stack, threads, fork (inherited), exec (cleared),
 * ptrace (the debugger sees the signal, as without the patch), core dumps,
 * a bad handler or stack (SIGSEGV, no oops), bad prctl arguments,
 * protection keys.  On any other kernel the prctl must be refused.
 *
 * Then the round trips side by side: the stock signal with rt_sigreturn,
 * the stock signal with trapkit's user-mode return, and the fast path;
 * with the patch's FASTEXC_STEPS, each step of delivery and return.  The
 * figures are TSC ticks; under qemu -icount shift=0 (make kernel-test) the
 * guest's TSC counts instructions (TK_FASTEXC_UNIT=instructions says so).
 * Lines starting "KT-SAY " are what make kernel-test prints.
 *
 * usage: fastexc_kernel            tests, then the measurements
 *        fastexc_kernel --nr-ranges (exits with the number of ranges; exec test)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <fastexc/fastexc.h>

#include "arch/context.h"
#include "arch/x86_64/fastexc.h"
#include "testutil.h"

static long fx(unsigned long op, unsigned long a, unsigned long b, unsigned long c)
{
    long r = prctl(PR_FASTEXC, op, a, b, c);
    return r < 0 ? -errno : r;
}

static size_t page;
static bool have_fast;

/* ---- the handler ------------------------------------------------------
 * fx_entry (assembly) stamps the TSC, calls fx_handle(frame) as a
 * function (so RBX, RBP, R12-R15 come back), stamps the TSC again and
 * returns with tk__fastexc_return.  fx_handle is compiled without
 * x87/SSE code: nothing else needs saving. */
enum mode { M_SKIP, M_UNPROTECT, M_AMPLIFIED, M_SIGNAL, M_NESTED, M_PKEY };

static volatile int h_mode;
static volatile int h_calls, h_depth, h_max_depth, h_sigs;
static struct fastexc_frame h_last;
static volatile uintptr_t h_frame_at;
static volatile char *h_nested_page;
uint64_t fx_t_entry, fx_t_ret;

void fx_entry(void);
__asm__(".text\n"
        ".globl fx_entry\n"
        "fx_entry:\n"
        "    rdtsc\n"
        "    shl $32, %rdx\n"
        "    or %rdx, %rax\n"
        "    mov %rax, fx_t_entry(%rip)\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "    call fx_handle\n"
        "    mov %rbx, %rdi\n"
        "    pop %rbx\n"
        "    rdtsc\n"
        "    shl $32, %rdx\n"
        "    or %rdx, %rax\n"
        "    mov %rax, fx_t_ret(%rip)\n"
        "    jmp tk__fastexc_return\n");

/* The measurements' null handler: skips the 3-byte store and returns, with
 * the TSC at its first instruction and before its return. */
void fx_null_entry(void);
__asm__(".text\n"
        ".globl fx_null_entry\n"
        "fx_null_entry:\n"
        "    rdtsc\n"
        "    shl $32, %rdx\n"
        "    or %rdx, %rax\n"
        "    mov %rax, fx_t_entry(%rip)\n"
        "    addq $3, (%rdi)\n"
        "    rdtsc\n"
        "    shl $32, %rdx\n"
        "    or %rdx, %rax\n"
        "    mov %rax, fx_t_ret(%rip)\n"
        "    jmp tk__fastexc_return\n");

static long raw_syscall3(long n, long a, long b, long c)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return ret;
}

__attribute__((used, target("general-regs-only"))) void fx_handle(struct fastexc_frame *f)
{
    h_calls++;
    h_depth++;
    if (h_depth > h_max_depth) h_max_depth = h_depth;
    h_frame_at = (uintptr_t)f;
    /* word by word: a struct copy could become a call to memcpy, which may
     * use vector registers */
    for (unsigned i = 0; i < sizeof *f / 8; i++)
        ((volatile uint64_t *)&h_last)[i] = ((volatile uint64_t *)f)[i];
    unsigned kind = f->kind & FASTEXC_K_MASK;
    switch (h_mode) {
    case M_SKIP:
        if (kind == FASTEXC_K_READ || kind == FASTEXC_K_WRITE) f->rip += 3;
        if (kind == FASTEXC_K_UD2) f->rip += 2;
        break;
    case M_SIGNAL:
        raw_syscall3(SYS_tgkill, getpid(), raw_syscall3(SYS_gettid, 0, 0, 0), SIGUSR1);
        /* fallthrough */
    case M_UNPROTECT:
        raw_syscall3(SYS_mprotect, (long)(f->addr & ~(page - 1)), (long)page,
                     PROT_READ | PROT_WRITE);
        break;
    case M_NESTED:
        if (h_depth == 1) *h_nested_page = 7; /* a second fast exception */
        raw_syscall3(SYS_mprotect, (long)(f->addr & ~(page - 1)), (long)page,
                     PROT_READ | PROT_WRITE);
        break;
    case M_AMPLIFIED: /* the kernel opened the page: retry as it is */
        break;
    case M_PKEY:
        tk__wrpkru(0);
        break;
    }
    h_depth--;
}

/* ---- faulting code with known registers -------------------------------
 * fx_probe(p, out): loads a distinct value into every general register but
 * RSP and RDI, sets CF, stores a byte at p (fx_probe_store, 3 bytes), and
 * writes every register (and CF) after the store to out[0..16]. */
void fx_probe(volatile char *p, uint64_t *out);
extern char fx_probe_store[];
uint64_t fx_probe_sp;
__asm__(".text\n"
        ".globl fx_probe, fx_probe_store\n"
        "fx_probe:\n"
        "    push %rbx\n    push %rbp\n    push %r12\n    push %r13\n    push %r14\n    push %r15\n"
        "    push %rsi\n"
        "    mov %rsp, fx_probe_sp(%rip)\n"
        "    movabs $0x0101010101010101, %rax\n"
        "    movabs $0x0202020202020202, %rbx\n"
        "    movabs $0x0303030303030303, %rcx\n"
        "    movabs $0x0404040404040404, %rdx\n"
        "    movabs $0x0505050505050505, %rsi\n"
        "    movabs $0x0606060606060606, %rbp\n"
        "    movabs $0x0808080808080808, %r8\n"
        "    movabs $0x0909090909090909, %r9\n"
        "    movabs $0x0a0a0a0a0a0a0a0a, %r10\n"
        "    movabs $0x0b0b0b0b0b0b0b0b, %r11\n"
        "    movabs $0x0c0c0c0c0c0c0c0c, %r12\n"
        "    movabs $0x0d0d0d0d0d0d0d0d, %r13\n"
        "    movabs $0x0e0e0e0e0e0e0e0e, %r14\n"
        "    movabs $0x0f0f0f0f0f0f0f0f, %r15\n"
        "    stc\n"
        "fx_probe_store:\n"
        "    movb $1, (%rdi)\n"
        "    xchg %rax, (%rsp)\n" /* rax = out; the probe's RAX on the stack */
        "    mov %rbx, 8(%rax)\n    mov %rcx, 16(%rax)\n    mov %rdx, 24(%rax)\n"
        "    mov %rsi, 32(%rax)\n    mov %rdi, 40(%rax)\n    mov %rbp, 48(%rax)\n"
        "    mov %r8, 64(%rax)\n    mov %r9, 72(%rax)\n    mov %r10, 80(%rax)\n"
        "    mov %r11, 88(%rax)\n    mov %r12, 96(%rax)\n    mov %r13, 104(%rax)\n"
        "    mov %r14, 112(%rax)\n    mov %r15, 120(%rax)\n"
        "    setc 128(%rax)\n"
        "    pop %rbx\n"
        "    mov %rbx, 0(%rax)\n"
        "    pop %r15\n    pop %r14\n    pop %r13\n    pop %r12\n    pop %rbp\n    pop %rbx\n"
        "    ret\n");

/* int3 and ud2 sites: fx_int3_site is registered, fx_int3_other is not. */
void fx_int3_site(void), fx_int3_other(void), fx_ud2_site(void);
__asm__(".text\n"
        ".globl fx_int3_site, fx_int3_other, fx_ud2_site\n"
        "fx_int3_site: int3\n    ret\n"
        "fx_int3_other: int3\n    ret\n"
        "fx_ud2_site: ud2\n    ret\n");

/* A store whose TSC before and after are returned (t3) and left in *t0. */
static inline uint64_t timed_store(volatile char *p, uint64_t *t0)
{
    uint64_t lo, hi, a, d;
    __asm__ volatile("rdtsc\n"
                     "mov %%rax, %[lo]\n"
                     "mov %%rdx, %[hi]\n"
                     "movb $1, (%[p])\n"
                     "rdtsc\n"
                     : [lo] "=&r"(lo), [hi] "=&r"(hi), "=&a"(a), "=&d"(d)
                     : [p] "D"(p)
                     : "memory");
    *t0 = lo | (hi << 32);
    return a | (d << 32);
}

/* ---- a signal handler for what is not the fast path's -----------------*/
static volatile int s_count, s_signo, s_resume;
static volatile uintptr_t s_addr;
static uint64_t s_t_entry, s_t_ret;

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
    uint64_t t = __builtin_ia32_rdtsc();
    ucontext_t *uc = ucv;
    s_t_entry = t;
    s_count++;
    s_signo = sig;
    s_addr = (uintptr_t)si->si_addr;
    if (sig == SIGSEGV) uc->uc_mcontext.gregs[REG_RIP] += 3; /* skip the 3-byte access */
    if (sig == SIGILL) uc->uc_mcontext.gregs[REG_RIP] += 2;
    s_t_ret = __builtin_ia32_rdtsc();
    if (s_resume && tk__arch_can_resume(uc, &uc->uc_sigmask)) tk__arch_resume(uc);
}

static void on_usr1(int sig)
{
    h_sigs++;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    CHECK(sigaction(SIGTRAP, &sa, NULL) == 0);
    CHECK(sigaction(SIGILL, &sa, NULL) == 0);
    struct sigaction su;
    memset(&su, 0, sizeof su);
    su.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &su, NULL) == 0);
}

static char *map_pages(size_t n, int prot)
{
    char *p = mmap(NULL, n * page, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* ---- the tests ---------------------------------------------------------*/
static void test_prctl_args(void)
{
    char *p = map_pages(2, PROT_READ);
    CHECK(fx(FASTEXC_VERSION, 1, 0, 0) == -EINVAL);
    CHECK(fx(99, 0, 0, 0) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, 0, FASTEXC_ON_WRITE) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, 0) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_EAGER) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, 0x100) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)-page, 2 * page, FASTEXC_ON_WRITE) == -EINVAL);
    CHECK(fx(FASTEXC_ADD_RANGE, 0xffff880000000000ul, page, FASTEXC_ON_WRITE) == -EINVAL);
    CHECK(fx(FASTEXC_SET_HANDLER, 0xffffffff81000000ul, 0, 0) == -EINVAL);
    CHECK(fx(FASTEXC_SET_STACK, (uintptr_t)p, 64, 0) == -EINVAL);
    CHECK(fx(FASTEXC_SET_STACK, 0, 4096, 0) == -EINVAL);
    long base = fx(FASTEXC_NR_RANGES, 0, 0, 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, 2 * page, FASTEXC_ON_WRITE) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p + page, page, FASTEXC_ON_WRITE) == -EEXIST);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p - page, 2 * page, FASTEXC_ON_WRITE) == -EEXIST);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == -ENOENT);
    CHECK(fx(FASTEXC_NR_RANGES, 0, 0, 0) == base + 1);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, 2 * page, 0) == 0);
    CHECK(fx(FASTEXC_NR_RANGES, 0, 0, 0) == base);
    /* the limit: 1-byte ranges far from anything else */
    uintptr_t far = 0x500000000000ul;
    long added = 0, rc = 0;
    while ((rc = fx(FASTEXC_ADD_RANGE, far + 2 * added, 1, FASTEXC_ON_TRAP)) == 0) added++;
    CHECK(rc == -ENOSPC);
    CHECK(base + added == FASTEXC_MAX_RANGES);
    for (long i = 0; i < added; i++) CHECK(fx(FASTEXC_DEL_RANGE, far + 2 * i, 1, 0) == 0);
    CHECK(fx(FASTEXC_NR_RANGES, 0, 0, 0) == base);
    munmap(p, 2 * page);
}

/* Paints the stack below the caller with a pattern, and says where. */
static uintptr_t painted_lo, painted_hi;
__attribute__((noinline)) static void paint_below(void)
{
    unsigned char buf[4096];
    memset(buf, 0xa5, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
    painted_lo = (uintptr_t)buf;
    painted_hi = (uintptr_t)buf + sizeof buf;
}

/* The frame and every register, on a write fault. */
static void test_frame(void)
{
    char *p = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE) == 0);
    h_mode = M_UNPROTECT;
    h_calls = 0;
    uint64_t out[17];
    memset(out, 0, sizeof out);
    /* a pattern where the frame and the gap above it will be */
    paint_below();
    fx_probe(p, out);
    CHECK(h_calls == 1);
    CHECK(p[0] == 1);
    /* after the return, every register as the probe left it, CF too */
    static const uint64_t want[16] = {0x0101010101010101, 0x0202020202020202,
                                      0x0303030303030303, 0x0404040404040404,
                                      0x0505050505050505, 0,
                                      0x0606060606060606, 0,
                                      0x0808080808080808, 0x0909090909090909,
                                      0x0a0a0a0a0a0a0a0a, 0x0b0b0b0b0b0b0b0b,
                                      0x0c0c0c0c0c0c0c0c, 0x0d0d0d0d0d0d0d0d,
                                      0x0e0e0e0e0e0e0e0e, 0x0f0f0f0f0f0f0f0f};
    for (int i = 0; i < 16; i++) {
        if (i == 5 || i == 7) continue; /* RDI (p), slot 7 unused */
        if (out[i] != want[i]) {
            fprintf(stderr, "register %d after the return: %#lx, expected %#lx\n", i,
                    (unsigned long)out[i], (unsigned long)want[i]);
            exit(1);
        }
    }
    CHECK(out[5] == (uintptr_t)p);
    CHECK((out[16] & 0xff) == 1);
    /* the frame: exactly the interrupted state */
    struct fastexc_frame *f = &h_last;
    CHECK(f->rip == (uintptr_t)fx_probe_store);
    CHECK(f->rsp == fx_probe_sp);
    CHECK(f->rflags & 1);
    CHECK(f->rax == want[0] && f->rcx == want[2] && f->rdx == want[3] && f->rsi == want[4]);
    CHECK(f->rdi == (uintptr_t)p);
    CHECK(f->r8 == want[8] && f->r9 == want[9] && f->r10 == want[10] && f->r11 == want[11]);
    CHECK(f->addr == (uintptr_t)p);
    CHECK(f->kind == FASTEXC_K_WRITE);
    CHECK((f->error & ~1u) == 0x6); /* write, user (present if the page was) */
    /* where: 16-byte aligned, at least 160 bytes below the interrupted
     * RSP, a zero return address below it, and the pattern untouched
     * between the frame's end and the words the return writes */
    uintptr_t at = h_frame_at;
    CHECK(at % 16 == 0);
    CHECK(at + sizeof(struct fastexc_frame) <= f->rsp - 160);
    CHECK(at + sizeof(struct fastexc_frame) + 32 > f->rsp - 160);
    CHECK(at - 8 >= painted_lo && f->rsp - 128 <= painted_hi);
    {
        /* (the return writes RSP - 152 .. RSP - 129 itself) */
        for (uintptr_t a = at + sizeof(struct fastexc_frame); a < f->rsp - 152; a++)
            if (*(unsigned char *)a != 0xa5) {
                fprintf(stderr, "the kernel wrote %#x at RSP - %lu, above the frame\n",
                        *(unsigned char *)a, (unsigned long)(f->rsp - a));
                exit(1);
            }
    }
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap(p, page);
    printf("frame: exact, every register back, nothing else written\n");
}

/* What a range catches, and what it leaves to signals. */
static void test_ranges(void)
{
    char *w = map_pages(1, PROT_READ), *a = map_pages(1, PROT_NONE), *o = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)w, page, FASTEXC_ON_WRITE) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)a, page, FASTEXC_ON_ACCESS) == 0);
    h_mode = M_SKIP;
    uint64_t t0;
    /* a write in the write range: fast */
    h_calls = s_count = 0;
    timed_store(w, &t0);
    CHECK(h_calls == 1 && s_count == 0);
    CHECK(h_last.kind == FASTEXC_K_WRITE && h_last.addr == (uintptr_t)w);
    /* a read and a write of the no-access page: fast */
    __asm__ volatile("movzbl (%%rdi), %%eax" : : "D"(a) : "rax", "memory"); /* 3 bytes */
    CHECK(h_calls == 2 && h_last.kind == FASTEXC_K_READ && h_last.addr == (uintptr_t)a);
    timed_store(a + 100, &t0);
    CHECK(h_calls == 3 && h_last.kind == FASTEXC_K_WRITE && h_last.addr == (uintptr_t)a + 100);
    CHECK(s_count == 0);
    /* a write outside every range: a signal */
    timed_store(o, &t0);
    CHECK(h_calls == 3 && s_count == 1 && s_signo == SIGSEGV && s_addr == (uintptr_t)o);
    /* a write to an unmapped page in a range: a signal (SEGV_MAPERR is
     * never the fast path's) */
    char *hole = map_pages(1, PROT_NONE);
    CHECK(munmap(hole, page) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)hole, page, FASTEXC_ON_ACCESS) == 0);
    timed_store(hole, &t0);
    CHECK(h_calls == 3 && s_count == 2 && s_addr == (uintptr_t)hole);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)hole, page, 0) == 0);
    /* a range taken away: signals again */
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)w, page, 0) == 0);
    timed_store(w, &t0);
    CHECK(h_calls == 3 && s_count == 3 && s_addr == (uintptr_t)w);
    /* a write range does not catch a read of a no-access page */
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)o, page, FASTEXC_ON_WRITE) == 0);
    CHECK(mprotect(o, page, PROT_NONE) == 0);
    __asm__ volatile("movzbl (%%rdi), %%eax" : : "D"(o) : "rax", "memory");
    CHECK(h_calls == 3 && s_count == 4 && s_addr == (uintptr_t)o);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)o, page, 0) == 0);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)a, page, 0) == 0);
    munmap(w, page);
    munmap(a, page);
    munmap(o, page);
    printf("ranges: write and access ranges fast, the rest signals\n");
}

static void test_traps(void)
{
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)fx_int3_site, 1, FASTEXC_ON_TRAP) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)fx_ud2_site, 2, FASTEXC_ON_TRAP) == 0);
    h_mode = M_SKIP;
    h_calls = s_count = 0;
    fx_int3_site();
    CHECK(h_calls == 1 && s_count == 0);
    CHECK((h_last.kind & FASTEXC_K_MASK) == FASTEXC_K_INT3);
    CHECK(h_last.addr == (uintptr_t)fx_int3_site && h_last.rip == (uintptr_t)fx_int3_site + 1);
    fx_ud2_site();
    CHECK(h_calls == 2 && s_count == 0);
    CHECK(h_last.kind == FASTEXC_K_UD2 && h_last.addr == (uintptr_t)fx_ud2_site &&
          h_last.rip == (uintptr_t)fx_ud2_site);
    fx_int3_other();
    CHECK(h_calls == 2 && s_count == 1 && s_signo == SIGTRAP);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)fx_ud2_site, 2, 0) == 0);
    fx_ud2_site();
    CHECK(h_calls == 2 && s_count == 2 && s_signo == SIGILL);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)fx_int3_site, 1, 0) == 0);
    printf("traps: int3 and ud2 at registered addresses fast, others signals\n");
}

static void test_eager(void)
{
    volatile char *p = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE | FASTEXC_EAGER) == 0);
    h_mode = M_AMPLIFIED;
    h_calls = 0;
    p[5] = 3;
    CHECK(h_calls == 1 && p[5] == 3);
    CHECK(h_last.kind == (FASTEXC_K_WRITE | FASTEXC_K_AMPLIFIED));
    p[6] = 4; /* the page stays writable */
    CHECK(h_calls == 1);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap((void *)p, page);
    printf("eager amplification: the page writable on entry\n");
}

static void test_signal_and_nesting(void)
{
    char *p = map_pages(2, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, 2 * page, FASTEXC_ON_WRITE) == 0);
    h_mode = M_SIGNAL;
    h_calls = h_sigs = 0;
    uint64_t out[17];
    fx_probe(p, out);
    CHECK(h_calls == 1 && h_sigs == 1 && p[0] == 1);
    CHECK(out[0] == 0x0101010101010101 && out[11] == 0x0b0b0b0b0b0b0b0b);
    CHECK(mprotect(p, 2 * page, PROT_READ) == 0);
    h_mode = M_NESTED;
    h_calls = h_max_depth = 0;
    h_nested_page = p + page;
    fx_probe(p, out);
    CHECK(h_calls == 2 && h_max_depth == 2 && p[0] == 1 && p[page] == 7);
    CHECK(out[2] == 0x0303030303030303 && out[15] == 0x0f0f0f0f0f0f0f0f);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, 2 * page, 0) == 0);
    munmap(p, 2 * page);
    printf("a signal and a nested fast exception inside the handler\n");
}

static char *stack_region;
enum { STACK_SIZE = 64 * 1024 };

static void *thread_no_stack(void *arg)
{
    /* a new thread does not inherit its creator's registered stack */
    char *p = arg;
    h_mode = M_SKIP;
    uint64_t t0;
    timed_store(p, &t0);
    uintptr_t at = h_frame_at;
    return (void *)(uintptr_t)(at >= (uintptr_t)stack_region &&
                               at < (uintptr_t)stack_region + STACK_SIZE);
}

static void test_stack(void)
{
    char *p = map_pages(1, PROT_READ);
    stack_region = map_pages(STACK_SIZE / page, PROT_READ | PROT_WRITE);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE) == 0);
    CHECK(fx(FASTEXC_SET_STACK, (uintptr_t)stack_region, STACK_SIZE, 0) == 0);
    h_mode = M_SKIP;
    h_calls = 0;
    uint64_t t0;
    timed_store(p, &t0);
    CHECK(h_calls == 1);
    CHECK(h_frame_at >= (uintptr_t)stack_region &&
          h_frame_at + sizeof(struct fastexc_frame) <= (uintptr_t)stack_region + STACK_SIZE);
    pthread_t t;
    void *on_region;
    CHECK(pthread_create(&t, NULL, thread_no_stack, p) == 0);
    CHECK(pthread_join(t, &on_region) == 0);
    CHECK(on_region == NULL && h_calls == 2);
    CHECK(fx(FASTEXC_SET_STACK, 0, 0, 0) == 0);
    timed_store(p, &t0);
    CHECK(h_calls == 3 && !(h_frame_at >= (uintptr_t)stack_region &&
                            h_frame_at < (uintptr_t)stack_region + STACK_SIZE));
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap(p, page);
    munmap(stack_region, STACK_SIZE);
    printf("registered stack: used, not inherited by threads\n");
}

enum { THREADS = 4 };
static char *thread_pages;
static int thread_rounds;

static void *thread_faults(void *arg)
{
    long i = (long)arg;
    char *p = thread_pages + i * page;
    uint64_t out[17];
    for (int r = 0; r < thread_rounds; r++) {
        CHECK(mprotect(p, page, PROT_READ) == 0);
        fx_probe(p, out);
        CHECK(p[0] == 1 && out[0] == 0x0101010101010101 && out[15] == 0x0f0f0f0f0f0f0f0f);
        p[0] = 0;
    }
    return NULL;
}

static void test_threads(void)
{
    thread_rounds = (int)tk_test_scaled(2000);
    thread_pages = map_pages(THREADS, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)thread_pages, THREADS * page, FASTEXC_ON_WRITE) == 0);
    h_mode = M_UNPROTECT;
    h_calls = s_count = 0;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_faults, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(s_count == 0);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)thread_pages, THREADS * page, 0) == 0);
    munmap(thread_pages, THREADS * page);
    printf("threads: %d x %d faults, every register back each time\n", THREADS, thread_rounds);
}

static char *fork_page;
static void child_inherits(void *arg)
{
    h_mode = M_SKIP;
    h_calls = s_count = 0;
    uint64_t t0;
    timed_store(fork_page, &t0);
    if (h_calls != 1 || s_count != 0) exit(3);
    if (fx(FASTEXC_NR_RANGES, 0, 0, 0) != 1) exit(4);
    exit(0);
}

static void test_fork_exec(const char *self)
{
    fork_page = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)fork_page, page, FASTEXC_ON_WRITE) == 0);
    int st = tk_test_in_child(child_inherits, NULL);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, self, "--nr-ranges", (char *)NULL);
        _exit(99);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* exec starts with no ranges */
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)fork_page, page, 0) == 0);
    munmap(fork_page, page);
    printf("fork: the child inherits the handler and ranges; exec clears them\n");
}

/* Under ptrace the debugger sees everything exactly as without the patch:
 * single steps, a registered int3 as its breakpoint (SIGTRAP), the fault as
 * a SIGSEGV; passing the SIGSEGV on runs the program's signal handler. */
static void test_ptrace(void)
{
    char *p = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)fx_int3_site, 1, FASTEXC_ON_TRAP) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        h_mode = M_SKIP;
        h_calls = s_count = 0;
        fx_int3_site();
        uint64_t t0;
        timed_store(p, &t0);
        _exit(h_calls == 0 && s_count == 1 ? 0 : 5);
    }
    int st, segv_stops = 0, trap_stops = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    for (int i = 0; i < 3; i++) { /* single steps */
        CHECK(ptrace(PTRACE_SINGLESTEP, pid, 0, 0) == 0);
        CHECK(waitpid(pid, &st, 0) == pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP);
    }
    CHECK(ptrace(PTRACE_CONT, pid, 0, 0) == 0);
    for (;;) {
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFSTOPPED(st)) break;
        int sig = WSTOPSIG(st);
        if (sig == SIGSEGV) segv_stops++;
        if (sig == SIGTRAP) trap_stops++; /* the breakpoint: the debugger's, not passed on */
        CHECK(ptrace(PTRACE_CONT, pid, 0, sig == SIGTRAP ? 0 : sig) == 0);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(segv_stops == 1 && trap_stops == 1);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)fx_int3_site, 1, 0) == 0);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap(p, page);
    printf("ptrace: single steps, the int3 as a breakpoint and the fault as a SIGSEGV\n");
}

static bool plain_core_pattern(void)
{
    char buf[64] = {0};
    FILE *f = fopen("/proc/sys/kernel/core_pattern", "r");
    if (!f) return false;
    bool plain = fgets(buf, sizeof buf, f) && !strcmp(buf, "core\n");
    fclose(f);
    return plain;
}

/* Children that must die by SIGSEGV. */
static void die_outside(void *arg)
{
    char *p = arg;
    signal(SIGSEGV, SIG_DFL);
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &rl);
    p[0] = 1; /* not in a range: a core dump as always */
    _exit(0);
}

static void die_bad_handler(void *arg)
{
    char *p = arg;
    signal(SIGSEGV, SIG_DFL);
    fx(FASTEXC_SET_HANDLER, 0x10000, 0, 0); /* nothing mapped there */
    p[0] = 1;
    _exit(0);
}

static void die_bad_stack(void *arg)
{
    char *p = arg;
    signal(SIGSEGV, SIG_DFL);
    char *s = map_pages(4, PROT_NONE);
    fx(FASTEXC_SET_STACK, (uintptr_t)s, 4 * page, 0);
    p[0] = 1;
    _exit(0);
}

static void test_deaths(void)
{
    char *p = map_pages(1, PROT_READ), *o = map_pages(1, PROT_READ);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE) == 0);
    char dir[] = "/tmp/fastexc.XXXXXX", cwd[4096];
    CHECK(mkdtemp(dir) && getcwd(cwd, sizeof cwd));
    CHECK(chdir(dir) == 0);
    int st = tk_test_in_child(die_outside, o);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    if (plain_core_pattern()) {
        CHECK(WCOREDUMP(st));
        char core[4200];
        snprintf(core, sizeof core, "%s/core", dir);
        CHECK(access(core, F_OK) == 0);
        unlink(core);
    }
    CHECK(chdir(cwd) == 0);
    rmdir(dir);
    st = tk_test_in_child(die_bad_handler, p);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    st = tk_test_in_child(die_bad_stack, p);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap(p, page);
    munmap(o, page);
    printf("a fault outside the ranges dumps core; a bad handler or stack: SIGSEGV\n");
}

static void test_pkeys(void)
{
    int key = (int)syscall(SYS_pkey_alloc, 0, 0);
    if (key < 0) {
        printf("protection keys: not on this machine (pkey_alloc: %s)\n", strerror(errno));
        return;
    }
    volatile char *p = map_pages(1, PROT_READ | PROT_WRITE);
    CHECK(syscall(SYS_pkey_mprotect, p, page, PROT_READ | PROT_WRITE, key) == 0);
    CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_ACCESS) == 0);
    h_mode = M_PKEY;
    h_calls = s_count = 0;
    uint32_t old = tk__rdpkru();
    tk__wrpkru(old | (1u << (2 * key))); /* access disabled */
    p[9] = 9;
    CHECK(h_calls == 1 && s_count == 0 && p[9] == 9);
    CHECK(h_last.kind == (FASTEXC_K_WRITE | FASTEXC_K_PKEY));
    tk__wrpkru(old);
    CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    munmap((void *)p, page);
    syscall(SYS_pkey_free, key);
    printf("protection keys: a key fault in an access range is fast\n");
}

/* ---- the measurements -------------------------------------------------*/
enum { ROUNDS = 201 };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[n / 2];
}

enum {
    S_ENTRY,
    S_DECODE,
    S_DISPATCH,
    S_SAVE,
    S_VECTOR,
    S_HANDLER,
    S_RET_IN,
    S_RET_RESTORE,
    S_RET_OUT,
    S_NSTEPS
};

/* One path's figures: the round trip (median, least, most) and, where
 * stamped, each step's median. */
struct path {
    const char *name;
    const char *id; /* the mechanism of its results */
    uint64_t round, round_min, round_max;
    uint64_t step[S_NSTEPS], step_min[S_NSTEPS], step_max[S_NSTEPS];
    bool steps;
};
static const char *step_ids[S_NSTEPS] = {"entry",   "decode", "dispatch",    "save",   "vector",
                                         "handler", "ret-in", "ret-restore", "ret-out"};
static const char *step_names[S_NSTEPS] = {
    "exception entry (fault to the kernel's handler)",
    "decode (a user protection fault)",
    "dispatch (signal generation and delivery / range lookup)",
    "state save (signal frame / 112-byte frame)",
    "vector to user (to the handler's first instruction)",
    "null handler",
    "return: to the kernel (rt_sigreturn)",
    "return: restore (rt_sigreturn)",
    "return: back to the faulting code",
};

/* kind: 0 fast, 1 signal + rt_sigreturn, 2 signal + user-mode return */
static void measure(int kind, char *p, struct path *out, bool steps)
{
    uint64_t round[ROUNDS], st[S_NSTEPS][ROUNDS];
    h_mode = M_SKIP;
    s_resume = kind == 2;
    bool stamped = steps && fx(FASTEXC_STEPS, 1, 0, 0) == 0;
    for (int i = -20; i < ROUNDS; i++) {
        uint64_t t0, t3, k[8] = {0};
        t3 = timed_store(p, &t0);
        if (stamped) fx(FASTEXC_STEPS, 1, (uintptr_t)k, 0);
        if (i < 0) continue;
        round[i] = t3 - t0;
        uint64_t te = kind ? s_t_entry : fx_t_entry, tr = kind ? s_t_ret : fx_t_ret;
        if (stamped) {
            st[S_ENTRY][i] = k[FASTEXC_STEP_ENTRY] - t0;
            st[S_DECODE][i] = k[FASTEXC_STEP_DECODED] - k[FASTEXC_STEP_ENTRY];
            st[S_DISPATCH][i] = k[FASTEXC_STEP_DISPATCH] - k[FASTEXC_STEP_DECODED];
            st[S_SAVE][i] = k[FASTEXC_STEP_SAVED] - k[FASTEXC_STEP_DISPATCH];
            st[S_VECTOR][i] = te - k[FASTEXC_STEP_SAVED];
            if (kind == 1) {
                st[S_RET_IN][i] = k[FASTEXC_STEP_RET_ENTRY] - tr;
                st[S_RET_RESTORE][i] = k[FASTEXC_STEP_RET_DONE] - k[FASTEXC_STEP_RET_ENTRY];
                st[S_RET_OUT][i] = t3 - k[FASTEXC_STEP_RET_DONE];
            } else {
                st[S_RET_IN][i] = st[S_RET_RESTORE][i] = 0;
                st[S_RET_OUT][i] = t3 - tr;
            }
        }
        st[S_HANDLER][i] = tr - te;
    }
    if (stamped) fx(FASTEXC_STEPS, 0, 0, 0);
    out->round = median(round, ROUNDS);
    out->round_min = round[0];
    out->round_max = round[ROUNDS - 1];
    out->steps = stamped;
    for (int s = 0; s < S_NSTEPS && stamped; s++) {
        out->step[s] = median(st[s], ROUNDS);
        out->step_min[s] = st[s][0];
        out->step_max[s] = st[s][ROUNDS - 1];
    }
    s_resume = 0;
}

static void report(bool steps_ok)
{
    const char *unit = getenv("TK_FASTEXC_UNIT") ? getenv("TK_FASTEXC_UNIT") : "TSC ticks";
    char *p = map_pages(1, PROT_READ);
    struct path sig = {"stock signal + rt_sigreturn", "signal+sigreturn"},
                sig_user = {"stock signal + user-mode return", "signal+user-return"},
                fast = {"fast-kernel", "fast-kernel"};
    measure(1, p, &sig, steps_ok);
    bool can_resume = tk__arch_can_fast_return();
    if (can_resume) measure(2, p, &sig_user, false);
    if (have_fast) {
        CHECK(fx(FASTEXC_ADD_RANGE, (uintptr_t)p, page, FASTEXC_ON_WRITE) == 0);
        CHECK(fx(FASTEXC_SET_HANDLER, (uintptr_t)fx_null_entry, 0, 0) == 0);
        measure(0, p, &fast, steps_ok);
        CHECK(fx(FASTEXC_SET_HANDLER, (uintptr_t)fx_entry, 0, 0) == 0);
        CHECK(fx(FASTEXC_DEL_RANGE, (uintptr_t)p, page, 0) == 0);
    }
    munmap(p, page);
    printf("KT-SAY round trips of a write fault to a null handler and back, median of %d, in %s:\n",
           ROUNDS, unit);
    printf("KT-SAY   %-34s %8lu\n", sig.name, (unsigned long)sig.round);
    if (can_resume) printf("KT-SAY   %-34s %8lu\n", sig_user.name, (unsigned long)sig_user.round);
    if (have_fast) printf("KT-SAY   %-34s %8lu\n", fast.name, (unsigned long)fast.round);
    if (sig.steps && fast.steps) {
        printf("KT-SAY Table 3 for this kernel: %s on each step (median of %d)\n", unit, ROUNDS);
        printf("KT-SAY   %-58s %8s %8s\n", "step", "signal", "fast");
        for (int s = 0; s < S_NSTEPS; s++)
            printf("KT-SAY   %-58s %8lu %8lu\n", step_names[s], (unsigned long)sig.step[s],
                   (unsigned long)fast.step[s]);
    }
    /* the same as result records (make kernel-test gives them to the report) */
    const char *u = strcmp(unit, "instructions") ? "tsc" : "insn";
    struct path *all[3] = {&sig, can_resume ? &sig_user : NULL, have_fast ? &fast : NULL};
    for (int i = 0; i < 3; i++) {
        if (!all[i]) continue;
        printf(
            "KT-JSON {\"experiment\": \"thekkath-levy/kernel-round-trip\", \"mechanism\": \"%s\", "
            "\"params\": {}, \"metric\": \"instructions\", \"unit\": \"%s\", \"median\": %lu, "
            "\"min\": %lu, \"max\": %lu, \"n\": %d}\n",
            all[i]->id, u, (unsigned long)all[i]->round, (unsigned long)all[i]->round_min,
            (unsigned long)all[i]->round_max, ROUNDS);
        for (int st = 0; st < S_NSTEPS && all[i]->steps; st++)
            printf("KT-JSON {\"experiment\": \"thekkath-levy/kernel-step\", \"mechanism\": \"%s\", "
                   "\"params\": {\"step\": \"%s\"}, \"metric\": \"instructions\", \"unit\": "
                   "\"%s\", \"median\": %lu, \"min\": %lu, \"max\": %lu, \"n\": %d}\n",
                   all[i]->id, step_ids[st], u, (unsigned long)all[i]->step[st],
                   (unsigned long)all[i]->step_min[st], (unsigned long)all[i]->step_max[st],
                   ROUNDS);
    }
    if (have_fast)
        printf("fast-kernel round trip: %lu %s; stock signal: %lu %s; ratio %.3f\n",
               (unsigned long)fast.round, unit, (unsigned long)sig.round, unit,
               (double)fast.round / (double)sig.round);
}

int main(int argc, char **argv)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    long v = fx(FASTEXC_VERSION, 0, 0, 0);
    if (argc > 1 && !strcmp(argv[1], "--nr-ranges")) {
        long n = v > 0 ? fx(FASTEXC_NR_RANGES, 0, 0, 0) : 0;
        return n < 0 ? 100 : (int)n;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    catch_signals();
    have_fast = v > 0;
    const char *expect = getenv("TK_TEST_EXPECT_FASTEXC");
    if (!have_fast) {
        /* any other kernel refuses the prctl, so a program falls back */
        CHECK(v == -EINVAL);
        printf("this kernel has no fast exception path (prctl PR_FASTEXC: %s)\n", strerror(-v));
        if (expect && !strcmp(expect, "1")) {
            fprintf(stderr, "TK_TEST_EXPECT_FASTEXC=1 but the kernel has no fast path\n");
            return 1;
        }
        report(false);
        return 0;
    }
    CHECK(v == FASTEXC_ABI);
    printf("fast exception path: ABI %ld\n", v);
    test_prctl_args();
    CHECK(fx(FASTEXC_SET_HANDLER, (uintptr_t)fx_entry, 0, 0) == 0);
    test_frame();
    test_ranges();
    test_traps();
    test_eager();
    test_signal_and_nesting();
    test_stack();
    test_threads();
    test_fork_exec("/proc/self/exe");
    test_ptrace();
    test_deaths();
    test_pkeys();
    report(true);
    CHECK(fx(FASTEXC_CLEAR, 0, 0, 0) == 0);
    CHECK(fx(FASTEXC_NR_RANGES, 0, 0, 0) == 0);
    return 0;
}
