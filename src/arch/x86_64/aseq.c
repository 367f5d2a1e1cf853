/* src/arch/x86_64/aseq.c - the landing of a rolled-forward atomic sequence
 * (see src/aseq/aseq.c).
 *
 * The sequence's end jumps here (Dyn/Jump through its destination word,
 * Hyb/Jump through r11) with the program's registers as the sequence left
 * them.  The landing steps below the red zone, pushes the flags and the
 * general registers in the order of glibc's gregs (r8 ... rcx, then
 * rflags), saves the extended state (XSAVE with every enabled feature:
 * x87, SSE, AVX, AVX-512, PKRU; FXSAVE on machines without XSAVE), calls
 * tk__aseq_land, restores everything and jumps to the sequence's end with
 * r11 holding that address, as if the sequence had ended normally (r11 is
 * the schemes' scratch register).  It returns by a jump, not a return, so
 * a shadow stack stays balanced.
 */
#include <cpuid.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "aseq/aseq_impl.h"

uint64_t tk__aseq_xsave_size __attribute__((visibility("hidden"))) = 512 + 64;
unsigned char tk__aseq_use_xsave __attribute__((visibility("hidden")));

__attribute__((constructor)) static void aseq_xsave_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return;
    if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b < 576) return;
    tk__aseq_xsave_size = b;
    tk__aseq_use_xsave = 1;
}

__asm__(".text\n"
        ".globl tk__aseq_landing\n"
        ".hidden tk__aseq_landing\n"
        ".type tk__aseq_landing, @function\n"
        "tk__aseq_landing:\n\t"
        "lea -128(%rsp), %rsp\n\t" /* the red zone stays as the sequence left it */
        "pushfq\n\t"
        "push %rcx\n\tpush %rax\n\tpush %rdx\n\tpush %rbx\n\tpush %rbp\n\tpush %rsi\n\t"
        "push %rdi\n\tpush %r15\n\tpush %r14\n\tpush %r13\n\tpush %r12\n\tpush %r11\n\t"
        "push %r10\n\tpush %r9\n\tpush %r8\n\t"
        "mov %rsp, %rbx\n\t"
        "cld\n\t"
        "sub tk__aseq_xsave_size(%rip), %rsp\n\t"
        "and $-64, %rsp\n\t"
        "mov %rsp, %r12\n\t"
        "xor %eax, %eax\n\t" /* the XSAVE header must start zeroed */
        "mov %rax, 512(%rsp)\n\tmov %rax, 520(%rsp)\n\tmov %rax, 528(%rsp)\n\t"
        "mov %rax, 536(%rsp)\n\tmov %rax, 544(%rsp)\n\tmov %rax, 552(%rsp)\n\t"
        "mov %rax, 560(%rsp)\n\tmov %rax, 568(%rsp)\n\t"
        "cmpb $0, tk__aseq_use_xsave(%rip)\n\t"
        "je 1f\n\t"
        "mov $-1, %eax\n\tmov $-1, %edx\n\t"
        "xsave64 (%rsp)\n\t"
        "jmp 2f\n"
        "1:\tfxsave64 (%rsp)\n"
        "2:\tmov %rbx, %rdi\n\t"
        "mov %r12, %rsi\n\t"
        "call tk__aseq_land\n\t"
        "mov %rax, 24(%rbx)\n\t" /* the saved r11: where to resume */
        "cmpb $0, tk__aseq_use_xsave(%rip)\n\t"
        "je 3f\n\t"
        "mov $-1, %eax\n\tmov $-1, %edx\n\t"
        "xrstor64 (%r12)\n\t"
        "jmp 4f\n"
        "3:\tfxrstor64 (%r12)\n"
        "4:\tmov %rbx, %rsp\n\t"
        "pop %r8\n\tpop %r9\n\tpop %r10\n\tpop %r11\n\tpop %r12\n\tpop %r13\n\tpop %r14\n\t"
        "pop %r15\n\tpop %rdi\n\tpop %rsi\n\tpop %rbp\n\tpop %rbx\n\tpop %rdx\n\tpop %rax\n\t"
        "pop %rcx\n\t"
        "popfq\n\t"
        "lea 128(%rsp), %rsp\n\t"
        "jmp *%r11\n"
        ".size tk__aseq_landing, .-tk__aseq_landing\n");

_Static_assert(REG_R8 == 0 && REG_R11 == 3 && REG_RCX == 14 && REG_RSP == 15 && REG_RIP == 16 &&
                   REG_EFL == 17,
               "glibc's x86-64 gregs layout");

void tk__aseq_fill_context(ucontext_t *uc, const uint64_t *saved, void *xsave, uintptr_t pc)
{
    for (int i = 0; i <= REG_RCX; i++) uc->uc_mcontext.gregs[i] = (greg_t)saved[i];
    uc->uc_mcontext.gregs[REG_RSP] = (greg_t)((uintptr_t)(saved + 16) + 128);
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
    uc->uc_mcontext.gregs[REG_EFL] = (greg_t)saved[15];
    uc->uc_mcontext.fpregs = xsave; /* its first 512 bytes are in FXSAVE's format */
}
