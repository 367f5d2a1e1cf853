// cxx/eh_x86_64.S - the entry points of trapkit's throw runtime (eh.cpp).
//
// Each entry takes its caller's registers as they are at the call: the
// callee-saved ones (rbx, rbp, r12-r15) are still the caller's, the
// caller's stack pointer is ours + 8 and its PC is the return address.
// The walk starts at the caller's frame, so no frame of the runtime is
// ever unwound.  The saved words, in the order of struct tk_eh_regs:
//   rbx rbp r12 r13 r14 r15 rsp rip
        .text

#include "eh_regs.inc"

// void __cxa_throw(void *obj, std::type_info *type, void (*dest)(void *))
        .globl  __cxa_throw
        .type   __cxa_throw, @function
__cxa_throw:
        .cfi_startproc
        SAVE_REGS
        mov     %rsp, %rcx
        call    tk_eh_throw_core        // does not return
        ud2
        .cfi_endproc
        .size   __cxa_throw, .-__cxa_throw

// void std::terminate(): its caller's registers to tk_eh_terminate_core,
// which catches an exception whose cleanup calls it (eh.cpp), then calls
// libstdc++'s.
        .globl  _ZSt9terminatev
        .type   _ZSt9terminatev, @function
_ZSt9terminatev:
        .cfi_startproc
        SAVE_REGS
        mov     %rsp, %rdi
        call    tk_eh_terminate_core    // does not return
        ud2
        .cfi_endproc
        .size   _ZSt9terminatev, .-_ZSt9terminatev

// ENTRY name mode real: calls tk_eh_walk(exception, regs, mode); a result
// of -1 means "not ours": the frame is dropped and the call goes on to
// libgcc's function (real) with the caller's arguments and registers.
.macro ENTRY name mode real
        .globl  \name
        .type   \name, @function
\name:
        .cfi_startproc
        SAVE_REGS
        mov     %rdi, 64(%rsp)
        mov     %rsp, %rsi
        mov     $\mode, %edx
        call    tk_eh_walk
        cmp     $-1, %eax
        je      1f
        add     $72, %rsp
        .cfi_adjust_cfa_offset -72
        ret
1:
        .cfi_adjust_cfa_offset 72
        mov     64(%rsp), %rdi
        add     $72, %rsp
        .cfi_adjust_cfa_offset -72
        jmp     *\real(%rip)
        .cfi_endproc
        .size   \name, .-\name
.endm

        ENTRY   _Unwind_RaiseException, 1, tk_eh_real_raise
        ENTRY   _Unwind_Resume, 2, tk_eh_real_resume
        ENTRY   _Unwind_Resume_or_Rethrow, 3, tk_eh_real_rethrow

// void tk_eh_install(const struct tk_eh_target *t): the handler frame's
// registers, then its landing pad.  Everything is loaded before the stack
// switch, so nothing below the new stack pointer is read after it.
        .globl  tk_eh_install
        .hidden tk_eh_install
        INSTALL tk_eh_install

// Entered as if called from the frame the walk stopped at (its return
// address on the stack), with the exception in rax: libgcc's
// _Unwind_RaiseException takes the throw from that frame on.  If it
// returns, no handler exists.
        .globl  tk_eh_handoff
        .hidden tk_eh_handoff
        .type   tk_eh_handoff, @function
tk_eh_handoff:
        .cfi_startproc
        sub     $8, %rsp
        .cfi_adjust_cfa_offset 8
        mov     %rax, (%rsp)
        mov     %rax, %rdi
        call    *tk_eh_real_raise(%rip)
        mov     (%rsp), %rdi
        call    tk_eh_no_handler        // does not return
        ud2
        .cfi_endproc
        .size   tk_eh_handoff, .-tk_eh_handoff

        .section .note.GNU-stack, "", @progbits
