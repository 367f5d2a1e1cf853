/* src/arch/x86_64/fastexc.h - the user-mode half of a fast kernel exception
 * (kernel/fastexc/fastexc.h gives the kernel's interface). */
#ifndef TK_ARCH_X86_64_FASTEXC_H
#define TK_ARCH_X86_64_FASTEXC_H

struct fastexc_frame;

/* Resumes the code a fast exception interrupted, with the registers of
 * frame (which the handler may have changed: RIP to skip an instruction,
 * RAX for a result).  Does not return.  [signal-safe] */
void tk__fastexc_return(const struct fastexc_frame *frame) __attribute__((noreturn));

/* trapkit's handler for the kernel's fast path (the fast-kernel mechanism):
 * the address prctl(FASTEXC_SET_HANDLER) names.  Not to be called. */
void tk__fastexc_entry(void);
/* Measures the extended state for tk__fastexc_entry; false if it cannot be
 * saved.  Not signal-safe. */
#include <stdbool.h>
#include <stdint.h>
bool tk__fastk_arch_setup(void);
/* Makes the area tk__fastexc_entry filled read as a signal frame's; returns
 * the features saved (0: FXSAVE only).  [signal-safe] */
uint64_t tk__fastk_arch_fill(void *fpstate);
/* core/fastk.c: what tk__fastexc_entry calls. */
void tk__fastk_fault(struct fastexc_frame *f, const uint64_t *callee, void *fpstate)
    __attribute__((noreturn));
/* arch/x86_64/resume.c: loads gregs and the extended state, resumes at RIP. */
#include <sys/ucontext.h>
void tk__x86_resume(const greg_t *gregs, void *fpstate, uint64_t xfeatures)
    __attribute__((noreturn));

#endif
