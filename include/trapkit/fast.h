/* trapkit/fast.h - fast user-level exception delivery (Thekkath & Levy,
 * "Hardware and Software Support for Efficient Exception Handling",
 * sections 2-3), as close as user space on a stock kernel gets.
 *
 * The fast paths, each of which can be switched off (the behaviour a
 * program sees is the same either way; only the cost differs):
 *
 *   TK_FAST_RETURN   A handler that returns TK_RESUME goes back to the
 *                    faulting instruction without rt_sigreturn: trapkit
 *                    restores the general registers, flags, stack pointer
 *                    and the extended state (x87/SSE/AVX/AVX-512/PKRU, from
 *                    the XSAVE area of the signal frame) in user mode and
 *                    jumps.  Taken only when that is exact: the kernel
 *                    delivered the signal straight to trapkit's handler
 *                    (not through another handler that chains to it), the
 *                    handler left uc_sigmask alone, no single-step is
 *                    pending, the alternate stack is not SS_AUTODISARM,
 *                    and (after a switch to the alternate stack) the three
 *                    words it writes below the interrupted code's red zone
 *                    fall in that stack's current page; otherwise the
 *                    kernel returns as usual.  Not
 *                    taken where the CPU enforces a shadow stack.  A
 *                    handler must leave the thread's signal mask as it
 *                    found it (edit uc_sigmask in f->ucontext instead: that
 *                    takes the kernel's return, which applies it).
 *   TK_FAST_EAGER    Eager amplification (seed 3.2.3) for regions made with
 *                    TK_REGION_EAGER: the page is opened for the faulting
 *                    access before the handler runs, so a handler that only
 *                    records the fault makes no system call of its own.
 *                    Off: the handler runs first and trapkit opens the page
 *                    after it returns TK_RESUME.
 *   TK_FAST_SUBPAGE  Sub-page regions (tk_region_config.page_size below the
 *                    hardware page) complete an access to an unprotected
 *                    sub-page of a protected hardware page by emulating the
 *                    instruction through a second view of the memory, when
 *                    it is one trapkit decodes (scalar and SSE moves,
 *                    arithmetic, atomics, REP MOVS/STOS/LODS; not VEX/EVEX,
 *                    so not glibc's AVX memcpy): no system call, and other
 *                    threads never see the page open.  Off, or for an
 *                    instruction it does not decode: the hardware page is
 *                    opened, the instruction single-stepped with the trap
 *                    flag and the page closed in the SIGTRAP after it;
 *                    meanwhile other threads can read and write every
 *                    sub-page of that hardware page.  Either way an access
 *                    touching a protected sub-page reaches the region's
 *                    handler at its first protected byte (for an
 *                    instruction not decoded, only the fault address is
 *                    checked).  See src/vm/subpage.c.
 *
 * All are on by default where the machine supports them.  The
 * TRAPKIT_FAST environment variable, read by tk_init() and region
 * creation, overrides that: "off" (none), "all", or a comma-separated list
 * of "return", "eager", "subpage".
 */
#ifndef TRAPKIT_FAST_H
#define TRAPKIT_FAST_H

#include <stdint.h>

#include <trapkit/region.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TK_FAST_RETURN 0x1u
#define TK_FAST_EAGER 0x2u
#define TK_FAST_SUBPAGE 0x4u
#define TK_FAST_ALL (TK_FAST_RETURN | TK_FAST_EAGER | TK_FAST_SUBPAGE)

/* The fast paths in use now.  Async-signal-safe. */
unsigned tk_fast_paths(void);

/* The fast paths this machine and build can use. */
unsigned tk_fast_paths_available(void);

/* Switches fast paths on (bits set) and off (bits clear), for the whole
 * process, from the next fault on.  Returns 0, or -EINVAL (unknown bits) or
 * -EOPNOTSUPP (a path this machine cannot use; tk_last_error() says why),
 * changing nothing. */
int tk_set_fast_paths(unsigned mask);

/* How many faults and traps the calling thread has resumed by the fast
 * return so far.  Async-signal-safe. */
uint64_t tk_fast_return_count(void);

/* Parses a TRAPKIT_FAST value into *mask; returns 0 or -EINVAL. */
int tk_fast_parse(const char *text, unsigned *mask);

/* ---- user-level handlers for other synchronous exceptions ---------------
 * Page-protection faults go to regions (trapkit/region.h).  The other
 * exceptions a program may use on purpose - a breakpoint (int3: SIGTRAP),
 * an illegal instruction (ud2: SIGILL), a division fault (SIGFPE) - get
 * the same delivery: the handler runs in the faulting thread, in a signal
 * handler (so only async-signal-safe calls), with the signal's siginfo and
 * ucontext (siginfo_t *, ucontext_t *).  TK_RESUME resumes the context as the handler left it (a
 * handler of a faulting instruction must move the PC past it, or fix its
 * cause), by the fast return when on; TK_DECLINE passes the signal to the
 * disposition in place before tk_trap_install (the default action if
 * none: the process dies of the signal as without trapkit).  Sent signals
 * (kill, raise) go the same way. */
typedef tk_action (*tk_trap_handler)(int sig, void *siginfo, void *ucontext, void *arg);

/* Installs h for sig (SIGTRAP, SIGILL or SIGFPE), replacing an earlier
 * tk_trap_install for it.  Returns 0, or -EINVAL (another signal; SIGSEGV
 * and SIGBUS belong to regions).  Not async-signal-safe. */
int tk_trap_install(int sig, tk_trap_handler h, void *arg);
/* Removes the handler: the signal goes to the disposition that was in
 * place before tk_trap_install (restored, unless trapkit itself still needs
 * SIGTRAP for sub-page regions, in which case it passes the signal on). */
int tk_trap_remove(int sig);

#ifdef __cplusplus
}
#endif
#endif
