/* src/arch/x86_64/context.h - reading a fault's context on x86-64 Linux.
 *
 * Shared code reads the signal context only through these macros (after GNU
 * libsigsegv), so it never tests CPU names.  Another architecture provides
 * the same macros in src/arch/<arch>/context.h.
 */
#ifndef TK_ARCH_X86_64_CONTEXT_H
#define TK_ARCH_X86_64_CONTEXT_H

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

/* Page-fault error code bits pushed by the CPU (Intel SDM vol. 3, 4.7). */
#define TK_X86_PF_WRITE 0x2
#define TK_X86_PF_INSTR 0x10

#define TK_CTX_PC(uc) ((void *)((ucontext_t *)(uc))->uc_mcontext.gregs[REG_RIP])
#define TK_CTX_SP(uc) ((uintptr_t)((ucontext_t *)(uc))->uc_mcontext.gregs[REG_RSP])
#define TK_CTX_ERR(uc) ((uint64_t)((ucontext_t *)(uc))->uc_mcontext.gregs[REG_ERR])

/* The access that faulted, from the page-fault error code. */
#define TK_CTX_ACCESS(uc)                                                                          \
    ((TK_CTX_ERR(uc) & TK_X86_PF_INSTR)   ? TK_ACCESS_EXEC                                         \
     : (TK_CTX_ERR(uc) & TK_X86_PF_WRITE) ? TK_ACCESS_WRITE                                        \
                                          : TK_ACCESS_READ)

static inline void tk__cpu_relax(void)
{
    __builtin_ia32_pause();
}

/* ---- protection keys (Intel SDM vol. 3, 4.6.2) -------------------------
 * PKRU holds two bits per key k: access-disable (bit 2k) and write-disable
 * (bit 2k+1), for the current thread.  RDPKRU/WRPKRU are unprivileged and
 * take no system call; they are encoded as bytes so no -mpku is needed.
 * [signal-safe] */
#define TK_HAVE_PKRU 1

static inline uint32_t tk__rdpkru(void)
{
    uint32_t eax, edx;
    __asm__ volatile(".byte 0x0f, 0x01, 0xee" : "=a"(eax), "=d"(edx) : "c"(0));
    return eax;
}

static inline void tk__wrpkru(uint32_t v)
{
    __asm__ volatile(".byte 0x0f, 0x01, 0xef" : : "a"(v), "c"(0), "d"(0) : "memory");
}

/* The PKRU value the interrupted code gets back when the signal handler
 * whose context is uc returns: it lives in the XSAVE area of the signal
 * frame (standard format; offset of state component 9 from CPUID leaf 0xD).
 * tk__ctx_pkru returns a pointer to it, making the component present if the
 * frame has room for it, or NULL.  [signal-safe] */
uint32_t *tk__ctx_pkru(void *uc);

/* Resuming the interrupted code without rt_sigreturn (arch/x86_64/resume.c).
 * tk__arch_can_resume: whether the context allows it, given the first 8
 * bytes of uc_sigmask as they were when the handler was entered.
 * tk__arch_resume does not return.  [signal-safe] */
#include <stdbool.h>
bool tk__arch_can_resume(void *uc, const void *entry_mask);
void tk__arch_resume(void *uc) __attribute__((noreturn));
/* Whether returning without the kernel can work in this process at all (no
 * shadow stack enforced, XSAVE-format frames).  Not signal-safe. */
bool tk__arch_can_fast_return(void);

#endif
