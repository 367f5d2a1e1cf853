/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Fast user-level exceptions (Thekkath & Levy, "Hardware and Software
 * Support for Efficient Exception Handling", section 3.2).
 *
 * A process names a handler and address ranges.  A protection fault in a
 * registered range (or an int3/ud2 at a registered address) enters the
 * handler directly: the kernel writes a small frame with the interrupted
 * PC, stack pointer, flags and the registers a function call may clobber,
 * and nothing else; no signal is generated, no extended state is saved and
 * the handler returns in user mode.  Everything else (faults outside the
 * ranges, signals, ptrace, core dumps) is as without it.
 */
#ifndef _UAPI_LINUX_FASTEXC_H
#define _UAPI_LINUX_FASTEXC_H

#include <linux/types.h>

/* prctl(PR_FASTEXC, op, a, b, c) */
#define PR_FASTEXC 0x544b4658 /* "TKFX" */

#define FASTEXC_VERSION 0     /* returns FASTEXC_ABI */
#define FASTEXC_SET_HANDLER 1 /* a: handler's entry, 0 for none; b, c: 0 */
#define FASTEXC_ADD_RANGE 2   /* a: start, b: length, c: FASTEXC_ON_* */
#define FASTEXC_DEL_RANGE 3   /* a: start, b: length, exactly as added */
#define FASTEXC_CLEAR 4       /* no handler, no ranges */
#define FASTEXC_SET_STACK 5   /* calling thread: a: lowest address, b: size; 0, 0: none */
#define FASTEXC_NR_RANGES 6   /* returns the number of ranges */
#define FASTEXC_STEPS 7       /* calling thread: a: 1 stamp the steps, 0 stop; b: __u64[8] */
#define FASTEXC_PASS 8        /* calling thread: its next fault or trap at address a + 1
			       * is a signal, as without this path (a handler that
			       * declines a fault re-runs the instruction after it) */

#define FASTEXC_ABI 1
#define FASTEXC_MAX_RANGES 1024
#define FASTEXC_MIN_STACK 512

/* What a range catches (c of FASTEXC_ADD_RANGE). */
#define FASTEXC_ON_WRITE 0x1  /* a write to a page without write permission */
#define FASTEXC_ON_ACCESS 0x2 /* any protection fault: read, write, execute, key */
#define FASTEXC_ON_TRAP 0x4   /* int3 or ud2 at an address in the range */
#define FASTEXC_EAGER 0x8     /* a write fault: the page is made read-write first */

/* struct fastexc_frame.kind */
#define FASTEXC_K_READ 1
#define FASTEXC_K_WRITE 2
#define FASTEXC_K_EXEC 3
#define FASTEXC_K_INT3 4 /* rip is after the int3, addr the int3 */
#define FASTEXC_K_UD2 5  /* rip and addr are the ud2 */
#define FASTEXC_K_MASK 0xff
#define FASTEXC_K_PKEY 0x100      /* a protection-key fault */
#define FASTEXC_K_AMPLIFIED 0x200 /* FASTEXC_EAGER made the page read-write */

/*
 * The handler is entered with RIP = the handler, RDI = the frame, RSP = the
 * frame - 8 (a zero return address, so RSP + 8 is 16-byte aligned as at a
 * function's entry), DF, TF and RF clear, and every other register as the
 * interrupted code left it.  The frame is 16-byte aligned; on the
 * interrupted stack it ends at least 160 bytes below the interrupted RSP
 * (the 128-byte red zone and 32 bytes left for the return), else at the
 * top of the thread's registered stack.  The extended state (x87, SSE,
 * AVX, PKRU) is not saved: a handler that uses it saves it.
 */
struct fastexc_frame {
	__u64 rip;
	__u64 rsp;
	__u64 rflags;
	__u64 rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11;
	__u64 addr;  /* the fault's address, or the trap instruction's */
	__u32 kind;  /* FASTEXC_K_* */
	__u32 error; /* the page-fault error code; 0 for traps */
};

/* FASTEXC_STEPS: guest TSC stamps of the last delivery and return. */
enum fastexc_step {
	FASTEXC_STEP_ENTRY,    /* the kernel's fault or trap handler began */
	FASTEXC_STEP_DECODED,  /* the fault is known to be a user protection fault */
	FASTEXC_STEP_DISPATCH, /* fast: the range was found; stock: signal delivery began */
	FASTEXC_STEP_SAVED,    /* the frame is written, the registers set for the handler */
	FASTEXC_STEP_RET_ENTRY, /* stock: rt_sigreturn began */
	FASTEXC_STEP_RET_DONE,  /* stock: rt_sigreturn restored the context */
	FASTEXC_NR_STEPS = 8
};

#endif /* _UAPI_LINUX_FASTEXC_H */
