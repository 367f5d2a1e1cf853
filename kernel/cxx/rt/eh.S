// kernel/cxx/rt/eh.S - the entry points of the module's throw runtime
// (rt/eh.cpp) that need its caller's registers.
//
// Each entry saves its caller's registers as they are at the call: the
// callee-saved ones (rbx, rbp, r12-r15) are still the caller's, the
// caller's stack pointer is ours + 8 and its PC is the return address.
// The words, in the order of struct regs in eh.cpp:
//   rbx rbp r12 r13 r14 r15 rsp rip
        .text

#include "../../../cxx/eh_regs.inc"

// void __cxa_throw(void *obj, std::type_info *type, void (*dest)(void *)):
// the walk starts at the thrower (the raise in-lined), or, with
// tkcxx_opts.inline_raise off, __cxa_throw is tkcxx_throw_outlined, a
// function that calls the raise (tkcxx_raise) as a separate step.
        .globl  __cxa_throw
        .type   __cxa_throw, @function
__cxa_throw:
        .cfi_startproc
        cmpl    $0, tkcxx_opts+4(%rip)
        je      tkcxx_throw_outlined
        SAVE_REGS
        mov     %rsp, %rcx
        call    tkcxx_throw_core        // does not return
        ud2
        .cfi_endproc
        .size   __cxa_throw, .-__cxa_throw

// void tkcxx_raise(struct exc *e): _Unwind_RaiseException's part
        .globl  tkcxx_raise
        .type   tkcxx_raise, @function
tkcxx_raise:
        .cfi_startproc
        SAVE_REGS
        mov     %rsp, %rsi
        call    tkcxx_raise_core        // does not return
        ud2
        .cfi_endproc
        .size   tkcxx_raise, .-tkcxx_raise

// void _Unwind_Resume(void *e): a cleanup has run; the walk goes on from
// the frame that ran it
        .globl  _Unwind_Resume
        .type   _Unwind_Resume, @function
_Unwind_Resume:
        .cfi_startproc
        SAVE_REGS
        mov     %rsp, %rsi
        call    tkcxx_resume_core       // does not return
        ud2
        .cfi_endproc
        .size   _Unwind_Resume, .-_Unwind_Resume

// void __cxa_rethrow(void)
        .globl  __cxa_rethrow
        .type   __cxa_rethrow, @function
__cxa_rethrow:
        .cfi_startproc
        SAVE_REGS
        mov     %rsp, %rdi
        call    tkcxx_rethrow_core      // does not return
        ud2
        .cfi_endproc
        .size   __cxa_rethrow, .-__cxa_rethrow

// void tkcxx_install(const struct target *t): the frame's registers, then
// its landing pad with the exception in rax and the selector in rdx.
// Everything is loaded before the stack switch.
        .globl  tkcxx_install
        INSTALL tkcxx_install

// int tkcxx_setjmp(struct jmp *j): 0, then 1 when tkcxx_longjmp(j) comes
// back to it.  The words: rbx rbp r12 r13 r14 r15 rsp rip.
        .globl  tkcxx_setjmp
        .type   tkcxx_setjmp, @function
tkcxx_setjmp:
        .cfi_startproc
        mov     %rbx, 0(%rdi)
        mov     %rbp, 8(%rdi)
        mov     %r12, 16(%rdi)
        mov     %r13, 24(%rdi)
        mov     %r14, 32(%rdi)
        mov     %r15, 40(%rdi)
        lea     8(%rsp), %rax
        mov     %rax, 48(%rdi)
        mov     (%rsp), %rax
        mov     %rax, 56(%rdi)
        xor     %eax, %eax
        ret
        .cfi_endproc
        .size   tkcxx_setjmp, .-tkcxx_setjmp

        .globl  tkcxx_longjmp
        .type   tkcxx_longjmp, @function
tkcxx_longjmp:
        .cfi_startproc
        mov     0(%rdi), %rbx
        mov     8(%rdi), %rbp
        mov     16(%rdi), %r12
        mov     24(%rdi), %r13
        mov     32(%rdi), %r14
        mov     40(%rdi), %r15
        mov     56(%rdi), %rcx
        mov     48(%rdi), %rsp
        mov     $1, %eax
        jmp     *%rcx
        .cfi_endproc
        .size   tkcxx_longjmp, .-tkcxx_longjmp

        .section .note.GNU-stack, "", @progbits
