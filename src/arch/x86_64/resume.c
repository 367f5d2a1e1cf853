/* src/arch/x86_64/resume.c - returning from a signal handler without the
 * kernel (Thekkath & Levy: "return by jumping to the faulting PC").
 *
 * rt_sigreturn restores the interrupted context from the signal frame: the
 * general registers, flags, stack pointer and PC, the extended state (x87,
 * SSE, AVX, AVX-512, PKRU: the XSAVE area of the frame), the signal mask and
 * the alternate-stack settings.  tk__arch_resume() does the same in user
 * mode:
 *
 *   1. XRSTOR the frame's XSAVE area with the features the kernel saved
 *      (FXRSTOR where the frame has no XSAVE header).
 *   2. Write the target RDI, RFLAGS and RIP just below the interrupted
 *      code's red zone (target RSP - 152, - 144, - 136), where only the
 *      signal frame itself was (tk__arch_can_resume checks that this memory
 *      is sure to be there when the frame is on the alternate stack); the
 *      red zone [RSP - 128, RSP) is never touched.
 *   3. Load the other general registers, switch to RSP - 152 with one
 *      instruction, POP RDI, POPFQ, and `ret $128`: RIP and RSP come back
 *      together.
 *
 * A signal arriving meanwhile is delivered below the current stack pointer
 * and returns normally, so every step may be interrupted.  What is not
 * restored, and so must not have changed (tk__arch_can_resume checks what it
 * can): the signal mask (trapkit's handler runs with SA_NODEFER and an empty
 * sa_mask, so the kernel did not change it; a handler that edits
 * uc_sigmask gets the slow path), the alternate-stack settings (restored by
 * rt_sigreturn from uc_stack), and the trap flag (a single-step must be
 * delivered by the kernel's return).  [signal-safe]
 */
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "arch/context.h"
#include "arch/x86_64/fastexc.h"
#include "arch/x86_64/xsave.h"
#include "os/linux/os.h"

#define X86_EFLAGS_TF 0x100
#define XFEATURE_PKRU (1ull << 9)
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif

_Static_assert(REG_R8 == 0 && REG_RIP == 16 && REG_EFL == 17 && REG_RSP == 15 && REG_CR2 == 22,
               "glibc's x86-64 gregs layout");

/* tk__x86_resume(gregs, xsave area, feature mask or 0 for FXRSTOR): declared
 * in arch/x86_64/fastexc.h, whose kernel path resumes through it too */

__asm__(".text\n"
        ".globl tk__x86_resume\n"
        ".hidden tk__x86_resume\n"
        ".type tk__x86_resume, @function\n"
        "tk__x86_resume:\n"
        "    test %rdx, %rdx\n"
        "    jz 1f\n"
        "    mov %edx, %eax\n"
        "    shr $32, %rdx\n"
        "    xrstor64 (%rsi)\n"
        "    jmp 2f\n"
        "1:  fxrstor64 (%rsi)\n"
        "2:  mov 15*8(%rdi), %rax\n" /* target RSP */
        "    lea -152(%rax), %rax\n"
        "    mov %rax, 22*8(%rdi)\n" /* the new RSP, in the frame's unused CR2 slot */
        "    mov 8*8(%rdi), %rcx\n"  /* RDI */
        "    mov %rcx, 0(%rax)\n"
        "    mov 17*8(%rdi), %rcx\n" /* RFLAGS */
        "    mov %rcx, 8(%rax)\n"
        "    mov 16*8(%rdi), %rcx\n" /* RIP */
        "    mov %rcx, 16(%rax)\n"
        "    mov 0*8(%rdi), %r8\n"
        "    mov 1*8(%rdi), %r9\n"
        "    mov 2*8(%rdi), %r10\n"
        "    mov 3*8(%rdi), %r11\n"
        "    mov 4*8(%rdi), %r12\n"
        "    mov 5*8(%rdi), %r13\n"
        "    mov 6*8(%rdi), %r14\n"
        "    mov 7*8(%rdi), %r15\n"
        "    mov 9*8(%rdi), %rsi\n"
        "    mov 10*8(%rdi), %rbp\n"
        "    mov 11*8(%rdi), %rbx\n"
        "    mov 12*8(%rdi), %rdx\n"
        "    mov 13*8(%rdi), %rax\n"
        "    mov 14*8(%rdi), %rcx\n"
        /* One instruction moves RSP below the three words; from here on
         * a signal is delivered below them, and may overwrite the old signal
         * frame: nothing is read from it any more. */
        "    mov 22*8(%rdi), %rsp\n"
        "    pop %rdi\n"
        "    popfq\n"
        "    ret $128\n"
        ".size tk__x86_resume, . - tk__x86_resume\n");

/* [signal-safe] */
bool tk__arch_can_resume(void *ucv, const void *entry_mask)
{
    ucontext_t *uc = ucv;
    if (!uc->uc_mcontext.fpregs) return false;
    if (uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF) return false;
    /* the kernel's mask is the first 64 bits of sigset_t */
    if (memcmp(&uc->uc_sigmask, entry_mask, 8) != 0) return false;
    /* An alternate stack set up with SS_AUTODISARM is re-armed only by
     * rt_sigreturn. */
    if ((unsigned)uc->uc_stack.ss_flags & SS_AUTODISARM) return false;
    /* The three words go at T - 152 .. T - 128 (T: the interrupted RSP).
     * When the frame is on the same stack, the kernel wrote there already;
     * after a switch to the alternate stack, only within T's own page is
     * it sure to be mapped. */
    uintptr_t t = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    bool same_stack = (uintptr_t)uc < t - 128 && (uintptr_t)uc > t - 128 - (1u << 20);
    if (!same_stack && ((t - 152) >> 12) != (t >> 12)) return false;
    /* PKRU listed as saved but absent from the header would be restored to
     * its init value (all keys open): leave that to the kernel. */
    const void *fx = uc->uc_mcontext.fpregs;
    if ((tk__xsave_features(fx) & XFEATURE_PKRU) && !(tk__xsave_bv(fx) & XFEATURE_PKRU))
        return false;
    return true;
}

/* [signal-safe] */
void tk__arch_resume(void *ucv)
{
    ucontext_t *uc = ucv;
    void *fx = uc->uc_mcontext.fpregs;
    tk__x86_resume(uc->uc_mcontext.gregs, fx, tk__xsave_features(fx));
}

#ifndef ARCH_SHSTK_STATUS
#define ARCH_SHSTK_STATUS 0x5005
#endif
#define ARCH_SHSTK_SHSTK (1ull << 0)

bool tk__arch_can_fast_return(void)
{
    /* `ret` to the faulting PC would not match a CET shadow stack. */
    unsigned long features = 0;
    if (tk__arch_prctl(ARCH_SHSTK_STATUS, &features) == 0 && (features & ARCH_SHSTK_SHSTK))
        return false;
    return true;
}
