/* SPDX-License-Identifier: GPL-2.0 */
/* Fast user-level exceptions: the kernel's side (arch/x86/kernel/fastexc.c). */
#ifndef _LINUX_FASTEXC_H
#define _LINUX_FASTEXC_H

#include <linux/sched.h>
#include <uapi/linux/fastexc.h>

struct mm_struct;
struct pt_regs;

#ifdef CONFIG_FASTEXC
long fastexc_prctl(unsigned long op, unsigned long a, unsigned long b, unsigned long c);
void fastexc_mm_init(struct mm_struct *mm);
int fastexc_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm);
void fastexc_mm_free(struct mm_struct *mm);
void fastexc_thread_reset(struct task_struct *p);
/* A user protection fault (the kernel would send SEGV_ACCERR, or
 * SEGV_PKUERR if pkey), found with mmap_lock held for reading: true if it
 * was delivered to the fast handler instead, mmap_lock released; false,
 * and mmap_lock still held, if not.  Interrupts on. */
bool fastexc_fault(struct pt_regs *regs, unsigned long error_code, unsigned long address,
		   bool pkey);
/* An int3 or ud2 in user mode: true if delivered.  Interrupts on. */
bool fastexc_trap(struct pt_regs *regs, unsigned int kind);
int fastexc_mprotect(unsigned long start, size_t len, unsigned long prot);
/* Whether the current process registered a fast handler. */
bool fastexc_registered(void);
#else
static inline void fastexc_mm_init(struct mm_struct *mm) { }
static inline int fastexc_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm) { return 0; }
static inline void fastexc_mm_free(struct mm_struct *mm) { }
static inline void fastexc_thread_reset(struct task_struct *p) { }
static inline bool fastexc_registered(void) { return false; }
#endif

#ifdef CONFIG_FASTEXC_STEPS
#include <asm/msr.h>
static __always_inline void fastexc_stamp(enum fastexc_step step)
{
	if (unlikely(current->fastexc_steps_on))
		current->fastexc_ts[step] = rdtsc_ordered();
}
#else
static __always_inline void fastexc_stamp(enum fastexc_step step) { }
#endif

#endif /* _LINUX_FASTEXC_H */
