/* src/arch/x86_64/fastexc.c - returning from a fast kernel exception
 * (kernel/fastexc: prctl PR_FASTEXC) in user mode.
 *
 * The kernel enters the handler with a struct fastexc_frame below the
 * interrupted code's red zone: its RIP, RSP and RFLAGS and the registers a
 * function call may clobber (RAX, RCX, RDX, RSI, RDI, R8-R11).  Every other
 * register is still the interrupted code's, so a handler written as a
 * function (which keeps RBX, RBP, R12-R15 and the stack below its frame)
 * and without x87/SSE/AVX code needs nothing more saved.
 *
 * tk__fastexc_return(frame) puts those registers back and resumes at the
 * frame's RIP with its RSP and RFLAGS, as resume.c does for a signal
 * frame: RDI, RFLAGS and RIP are written just below the red zone (RSP - 152
 * .. RSP - 129, which the kernel left free: the frame ends at RSP - 160 or
 * lower), RSP moves there in one instruction, and POP RDI, POPFQ, RET $128
 * finish.  Every step may be interrupted by a signal.  [signal-safe]
 */
#include <stddef.h>

#include <fastexc/fastexc.h>

#include "arch/x86_64/fastexc.h"

_Static_assert(
    offsetof(struct fastexc_frame, rip) == 0 && offsetof(struct fastexc_frame, rsp) == 8 &&
        offsetof(struct fastexc_frame, rflags) == 16 && offsetof(struct fastexc_frame, rax) == 24 &&
        offsetof(struct fastexc_frame, rcx) == 32 && offsetof(struct fastexc_frame, rdx) == 40 &&
        offsetof(struct fastexc_frame, rsi) == 48 && offsetof(struct fastexc_frame, rdi) == 56 &&
        offsetof(struct fastexc_frame, r8) == 64 && offsetof(struct fastexc_frame, r11) == 88 &&
        sizeof(struct fastexc_frame) == 112,
    "the frame layout tk__fastexc_return reads");

__asm__(".text\n"
        ".globl tk__fastexc_return\n"
        ".hidden tk__fastexc_return\n"
        ".type tk__fastexc_return, @function\n"
        "tk__fastexc_return:\n"
        "    mov 8(%rdi), %rax\n" /* the interrupted RSP */
        "    sub $152, %rax\n"
        "    mov 56(%rdi), %rcx\n" /* RDI */
        "    mov %rcx, 0(%rax)\n"
        "    mov 16(%rdi), %rcx\n" /* RFLAGS */
        "    mov %rcx, 8(%rax)\n"
        "    mov 0(%rdi), %rcx\n" /* RIP */
        "    mov %rcx, 16(%rax)\n"
        "    mov 64(%rdi), %r8\n"
        "    mov 72(%rdi), %r9\n"
        "    mov 80(%rdi), %r10\n"
        "    mov 88(%rdi), %r11\n"
        "    mov 48(%rdi), %rsi\n"
        "    mov 40(%rdi), %rdx\n"
        "    mov 32(%rdi), %rcx\n"
        /* From here a signal is delivered below RSP - 152 - 128; the frame's
         * RAX is read after the switch but lies within that red zone (the
         * frame ends at RSP - 160 at the lowest, so its RAX is above
         * RSP - 280), or on the thread's registered stack. */
        "    mov %rax, %rsp\n"
        "    mov 24(%rdi), %rax\n"
        "    pop %rdi\n"
        "    popfq\n"
        "    ret $128\n"
        ".size tk__fastexc_return, . - tk__fastexc_return\n");

/* ---- trapkit's own entry (the fast-kernel mechanism, core/fastk.c) ------
 * The kernel enters tk__fastexc_entry with RDI = the frame and RSP = the
 * frame - 8.  The entry pushes RBP, RBX and R12-R15 (the interrupted code's
 * still), makes a 64-byte aligned XSAVE area below them (its header zeroed,
 * as XRSTOR of the standard format wants), saves the extended state there
 * with the features the OS enabled (FXSAVE where there is no XSAVE), and
 * calls tk__fastk_fault(frame, pushed registers, area), which does not
 * return.  Nothing before the XSAVE touches a vector register. */
#include <cpuid.h>
#include <stdint.h>

#include "arch/x86_64/xsave.h"

uint64_t tk__fastk_xsave_room __attribute__((visibility("hidden")));
uint64_t tk__fastk_xfeatures __attribute__((visibility("hidden")));
/* the software-reserved bytes a signal frame's area carries, so the area
 * reads as one (tk__xsave_features, tk__ctx_pkru) */
static struct tk_xsave_sw xsave_sw;

__asm__(".text\n"
        ".globl tk__fastexc_entry\n"
        ".hidden tk__fastexc_entry\n"
        ".type tk__fastexc_entry, @function\n"
        "tk__fastexc_entry:\n"
        "    push %rbp\n"
        "    mov %rsp, %rbp\n"
        "    push %rbx\n"
        "    push %r12\n"
        "    push %r13\n"
        "    push %r14\n"
        "    push %r15\n"
        "    sub tk__fastk_xsave_room(%rip), %rsp\n"
        "    and $-64, %rsp\n"
        "    xor %eax, %eax\n"
        "    mov %rax, 512(%rsp)\n"
        "    mov %rax, 520(%rsp)\n"
        "    mov %rax, 528(%rsp)\n"
        "    mov %rax, 536(%rsp)\n"
        "    mov %rax, 544(%rsp)\n"
        "    mov %rax, 552(%rsp)\n"
        "    mov %rax, 560(%rsp)\n"
        "    mov %rax, 568(%rsp)\n"
        "    mov tk__fastk_xfeatures(%rip), %rax\n"
        "    test %rax, %rax\n"
        "    jz 1f\n"
        "    mov %rax, %rdx\n"
        "    shr $32, %rdx\n"
        "    xsave64 (%rsp)\n"
        "    jmp 2f\n"
        "1:  fxsave64 (%rsp)\n"
        "2:  mov %rsp, %rdx\n"
        "    lea -40(%rbp), %rsi\n"
        "    call tk__fastk_fault\n"
        "    ud2\n"
        ".size tk__fastexc_entry, . - tk__fastexc_entry\n");

bool tk__fastk_arch_setup(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool osxsave = (c >> 27) & 1;
    if (osxsave && __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && b >= 576) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        /* b: the standard format's size for the features XCR0 enables */
        tk__fastk_xsave_room = (uint64_t)b + 64;
        tk__fastk_xfeatures = (uint64_t)hi << 32 | lo;
        xsave_sw.magic1 = FP_XSTATE_MAGIC1;
        xsave_sw.extended_size = b;
        xsave_sw.xfeatures = tk__fastk_xfeatures;
        xsave_sw.xstate_size = b;
    } else {
        tk__fastk_xsave_room = 512 + 64 + 64; /* FXSAVE, and a header that is never read */
        tk__fastk_xfeatures = 0;
    }
    return true;
}

/* [signal-safe] */
uint64_t tk__fastk_arch_fill(void *fpstate)
{
    if (!tk__fastk_xfeatures) return 0;
    memcpy((unsigned char *)fpstate + 464, &xsave_sw, sizeof xsave_sw);
    return tk__fastk_xfeatures;
}
