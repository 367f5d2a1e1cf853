// SPDX-License-Identifier: GPL-2.0
/*
 * Fast user-level exceptions (Thekkath & Levy, section 3.2), x86-64.
 *
 * A process registers, with prctl(PR_FASTEXC), one handler and address
 * ranges; a thread may register a stack for it.  When a user protection
 * fault in a registered range would become a SIGSEGV, or an int3/ud2 at a
 * registered address a SIGTRAP/SIGILL, fastexc_fault()/fastexc_trap()
 * instead write a struct fastexc_frame (the interrupted RIP, RSP, RFLAGS
 * and the registers a call may clobber; nothing else) to the user stack
 * and point the thread's registers at the handler.  No signal is generated,
 * no extended state saved, and the handler returns in user mode.
 *
 * Not taken, so that everything behaves as without it: in a ptraced
 * thread (the debugger sees the signal), in a 32-bit context, for faults
 * outside the ranges and for SEGV_MAPERR.  A frame that cannot be written
 * gives SIGSEGV, as a signal frame that cannot be written does.
 *
 * The ranges of an mm live in one array, sorted, replaced as a whole under
 * fastexc_lock and read under RCU, so a fault takes no lock.
 */
#include <linux/fastexc.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <asm/processor-flags.h>
#include <asm/ptrace.h>
#include <asm/trap_pf.h>
#include <asm/traps.h>
#include <asm/vdso.h>

struct fastexc_range {
	unsigned long start, end; /* [start, end) */
	unsigned int on;	  /* FASTEXC_ON_* | FASTEXC_EAGER */
};

struct fastexc_mm {
	struct rcu_head rcu;
	unsigned long entry;
	unsigned int nr;
	struct fastexc_range r[];
};

static DEFINE_MUTEX(fastexc_lock);

static struct fastexc_mm *fx_alloc(unsigned int nr)
{
	return kzalloc(struct_size((struct fastexc_mm *)NULL, r, nr), GFP_KERNEL_ACCOUNT);
}

static struct fastexc_mm *fx_get(struct mm_struct *mm)
{
	return rcu_dereference_protected(mm->fastexc, lockdep_is_held(&fastexc_lock));
}

static void fx_replace(struct mm_struct *mm, struct fastexc_mm *nfx)
{
	struct fastexc_mm *old = fx_get(mm);

	rcu_assign_pointer(mm->fastexc, nfx);
	if (old)
		kfree_rcu(old, rcu);
}

static long fx_set_handler(struct mm_struct *mm, unsigned long entry)
{
	struct fastexc_mm *fx = fx_get(mm), *nfx;
	unsigned int nr = fx ? fx->nr : 0;

	if (entry >= TASK_SIZE_MAX)
		return -EINVAL;
	if (!entry && !nr) {
		fx_replace(mm, NULL);
		return 0;
	}
	nfx = fx_alloc(nr);
	if (!nfx)
		return -ENOMEM;
	if (fx)
		memcpy(nfx->r, fx->r, nr * sizeof(fx->r[0]));
	nfx->nr = nr;
	nfx->entry = entry;
	fx_replace(mm, nfx);
	return 0;
}

static long fx_add(struct mm_struct *mm, unsigned long start, unsigned long len, unsigned long on)
{
	struct fastexc_mm *fx = fx_get(mm), *nfx;
	unsigned int nr = fx ? fx->nr : 0, i, at;
	unsigned long end = start + len;

	if (!len || end < start || end > TASK_SIZE_MAX)
		return -EINVAL;
	if (!(on & (FASTEXC_ON_WRITE | FASTEXC_ON_ACCESS | FASTEXC_ON_TRAP)) ||
	    (on & ~(FASTEXC_ON_WRITE | FASTEXC_ON_ACCESS | FASTEXC_ON_TRAP | FASTEXC_EAGER)))
		return -EINVAL;
	if (nr >= FASTEXC_MAX_RANGES)
		return -ENOSPC;
	for (at = 0; at < nr && fx->r[at].start < start; at++)
		;
	if ((at > 0 && fx->r[at - 1].end > start) || (at < nr && fx->r[at].start < end))
		return -EEXIST;
	nfx = fx_alloc(nr + 1);
	if (!nfx)
		return -ENOMEM;
	nfx->entry = fx ? fx->entry : 0;
	for (i = 0; i < at; i++)
		nfx->r[i] = fx->r[i];
	nfx->r[at] = (struct fastexc_range){ start, end, on };
	for (i = at; i < nr; i++)
		nfx->r[i + 1] = fx->r[i];
	nfx->nr = nr + 1;
	fx_replace(mm, nfx);
	return 0;
}

static long fx_del(struct mm_struct *mm, unsigned long start, unsigned long len)
{
	struct fastexc_mm *fx = fx_get(mm), *nfx;
	unsigned int i, at;

	for (at = 0; fx && at < fx->nr; at++)
		if (fx->r[at].start == start && fx->r[at].end == start + len)
			break;
	if (!fx || at == fx->nr)
		return -ENOENT;
	if (fx->nr == 1 && !fx->entry) {
		fx_replace(mm, NULL);
		return 0;
	}
	nfx = fx_alloc(fx->nr - 1);
	if (!nfx)
		return -ENOMEM;
	nfx->entry = fx->entry;
	for (i = 0; i < fx->nr; i++)
		if (i != at)
			nfx->r[i - (i > at)] = fx->r[i];
	nfx->nr = fx->nr - 1;
	fx_replace(mm, nfx);
	return 0;
}

long fastexc_prctl(unsigned long op, unsigned long a, unsigned long b, unsigned long c)
{
	struct mm_struct *mm = current->mm;
	struct task_struct *t = current;
	long ret;

	if (!mm)
		return -EINVAL;
	switch (op) {
	case FASTEXC_VERSION:
		return (a || b || c) ? -EINVAL : FASTEXC_ABI;
	case FASTEXC_SET_STACK:
		if (c || (a && b < FASTEXC_MIN_STACK) || (!a && b) || a + b < a ||
		    a + b > TASK_SIZE_MAX)
			return -EINVAL;
		t->fastexc_stack = a;
		t->fastexc_stack_size = b;
		return 0;
	case FASTEXC_PASS:
		if (b || c || a + 1 >= TASK_SIZE_MAX)
			return -EINVAL;
		t->fastexc_pass = a + 1;
		return 0;
	case FASTEXC_STEPS:
#ifdef CONFIG_FASTEXC_STEPS
		if (a > 1 || c)
			return -EINVAL;
		if (b && copy_to_user((void __user *)b, t->fastexc_ts, sizeof(t->fastexc_ts)))
			return -EFAULT;
		memset(t->fastexc_ts, 0, sizeof(t->fastexc_ts));
		t->fastexc_steps_on = a;
		return 0;
#else
		return -EOPNOTSUPP;
#endif
	case FASTEXC_SET_HANDLER:
	case FASTEXC_ADD_RANGE:
	case FASTEXC_DEL_RANGE:
	case FASTEXC_CLEAR:
	case FASTEXC_NR_RANGES:
		break;
	default:
		return -EINVAL;
	}
	mutex_lock(&fastexc_lock);
	switch (op) {
	case FASTEXC_SET_HANDLER:
		ret = (b || c) ? -EINVAL : fx_set_handler(mm, a);
		break;
	case FASTEXC_ADD_RANGE:
		ret = fx_add(mm, a, b, c);
		break;
	case FASTEXC_DEL_RANGE:
		ret = c ? -EINVAL : fx_del(mm, a, b);
		break;
	case FASTEXC_CLEAR:
		ret = (a || b || c) ? -EINVAL : 0;
		if (!ret)
			fx_replace(mm, NULL);
		break;
	default: /* FASTEXC_NR_RANGES */
		ret = fx_get(mm) ? fx_get(mm)->nr : 0;
		break;
	}
	mutex_unlock(&fastexc_lock);
	return ret;
}

void fastexc_mm_init(struct mm_struct *mm)
{
	RCU_INIT_POINTER(mm->fastexc, NULL);
}

/* fork: the child gets the parent's handler and ranges (its memory is a
 * copy, the handler's code with it). */
int fastexc_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm)
{
	struct fastexc_mm *fx, *nfx = NULL;

	RCU_INIT_POINTER(mm->fastexc, NULL);
	mutex_lock(&fastexc_lock);
	fx = fx_get(oldmm);
	if (fx) {
		nfx = fx_alloc(fx->nr);
		if (nfx) {
			nfx->entry = fx->entry;
			nfx->nr = fx->nr;
			memcpy(nfx->r, fx->r, fx->nr * sizeof(fx->r[0]));
		}
	}
	mutex_unlock(&fastexc_lock);
	if (fx && !nfx)
		return -ENOMEM;
	RCU_INIT_POINTER(mm->fastexc, nfx);
	return 0;
}

void fastexc_mm_free(struct mm_struct *mm)
{
	kfree(rcu_dereference_protected(mm->fastexc, 1));
	RCU_INIT_POINTER(mm->fastexc, NULL);
}

/* A thread that shares its parent's memory starts without a stack, as it
 * starts without a sigaltstack. */
void fastexc_thread_reset(struct task_struct *p)
{
	p->fastexc_stack = 0;
	p->fastexc_stack_size = 0;
	p->fastexc_pass = 0;
}

/* The handler and what the range at addr catches, or 0. */
static unsigned long fx_lookup(unsigned long addr, unsigned int *on)
{
	struct fastexc_mm *fx;
	unsigned long entry = 0;
	unsigned int lo, hi, mid;

	rcu_read_lock();
	fx = rcu_dereference(current->mm->fastexc);
	if (fx && fx->entry) {
		lo = 0;
		hi = fx->nr;
		while (lo < hi) {
			mid = (lo + hi) / 2;
			if (addr < fx->r[mid].start)
				hi = mid;
			else if (addr >= fx->r[mid].end)
				lo = mid + 1;
			else {
				*on = fx->r[mid].on;
				entry = fx->entry;
				break;
			}
		}
	}
	rcu_read_unlock();
	return entry;
}

bool fastexc_registered(void)
{
	return current->mm && rcu_access_pointer(current->mm->fastexc);
}

static bool fx_eligible(struct pt_regs *regs, unsigned long addr)
{
	struct task_struct *t = current;

	if (!user_mode(regs) || !user_64bit_mode(regs) || !t->mm ||
	    !rcu_access_pointer(t->mm->fastexc) || t->ptrace)
		return false;
	if (unlikely(t->fastexc_pass) && t->fastexc_pass == addr + 1) {
		t->fastexc_pass = 0; /* FASTEXC_PASS: this one is a signal */
		return false;
	}
	return true;
}

/* Writes the frame and points the registers at the handler. */
static bool fx_deliver(struct pt_regs *regs, unsigned long entry, unsigned long addr,
		       unsigned int kind, unsigned int error)
{
	struct task_struct *t = current;
	unsigned long sp, top = t->fastexc_stack + t->fastexc_stack_size;
	struct fastexc_frame __user *uf;

	if (t->fastexc_stack && !(regs->sp > t->fastexc_stack && regs->sp <= top))
		sp = top;
	else
		sp = regs->sp - 128 - 32;
	sp = round_down(sp - sizeof(*uf), 16);
	uf = (struct fastexc_frame __user *)sp;

	/* Known values only: the frame is written field by field (and the
	 * zero return address below it), with one user-access window. */
	if (!user_access_begin((void __user *)(sp - 8), sizeof(*uf) + 8))
		goto fail;
	unsafe_put_user(0ul, (unsigned long __user *)(sp - 8), efault);
	unsafe_put_user(regs->ip, &uf->rip, efault);
	unsafe_put_user(regs->sp, &uf->rsp, efault);
	unsafe_put_user(regs->flags, &uf->rflags, efault);
	unsafe_put_user(regs->ax, &uf->rax, efault);
	unsafe_put_user(regs->cx, &uf->rcx, efault);
	unsafe_put_user(regs->dx, &uf->rdx, efault);
	unsafe_put_user(regs->si, &uf->rsi, efault);
	unsafe_put_user(regs->di, &uf->rdi, efault);
	unsafe_put_user(regs->r8, &uf->r8, efault);
	unsafe_put_user(regs->r9, &uf->r9, efault);
	unsafe_put_user(regs->r10, &uf->r10, efault);
	unsafe_put_user(regs->r11, &uf->r11, efault);
	unsafe_put_user(addr, &uf->addr, efault);
	unsafe_put_user(kind, &uf->kind, efault);
	unsafe_put_user(error, &uf->error, efault);
	user_access_end();

	regs->ip = entry;
	regs->sp = sp - 8;
	regs->di = sp;
	regs->flags &= ~(X86_EFLAGS_DF | X86_EFLAGS_RF | X86_EFLAGS_TF);
	fastexc_stamp(FASTEXC_STEP_SAVED);
	return true;

efault:
	user_access_end();
fail:
	/* as when a signal frame cannot be written */
	force_sigsegv(SIGSEGV);
	return true;
}

bool fastexc_fault(struct pt_regs *regs, unsigned long error_code, unsigned long address,
		   bool pkey)
{
	unsigned int on = 0, kind;
	unsigned long entry;

	if (!fx_eligible(regs, address))
		return false;
	fastexc_stamp(FASTEXC_STEP_DECODED);
	kind = (error_code & X86_PF_INSTR)   ? FASTEXC_K_EXEC
	       : (error_code & X86_PF_WRITE) ? FASTEXC_K_WRITE
					     : FASTEXC_K_READ;
	entry = fx_lookup(address, &on);
	if (!entry)
		return false;
	if (!(on & FASTEXC_ON_ACCESS) && !((on & FASTEXC_ON_WRITE) && kind == FASTEXC_K_WRITE))
		return false;
	fastexc_stamp(FASTEXC_STEP_DISPATCH);
	mmap_read_unlock(current->mm);
	/* a fault in the vDSO's exception table (SGX) is the vDSO's */
	if (fixup_vdso_exception(regs, X86_TRAP_PF, error_code, address))
		return true;
	if (pkey)
		kind |= FASTEXC_K_PKEY;
	else if ((on & FASTEXC_EAGER) && kind == FASTEXC_K_WRITE &&
		 fastexc_mprotect(address & PAGE_MASK, PAGE_SIZE, PROT_READ | PROT_WRITE) == 0)
		kind |= FASTEXC_K_AMPLIFIED;
	return fx_deliver(regs, entry, address, kind, error_code);
}

bool fastexc_trap(struct pt_regs *regs, unsigned int kind)
{
	unsigned long addr = regs->ip - (kind == FASTEXC_K_INT3 ? 1 : 0), entry;
	unsigned int on = 0;

	fastexc_stamp(FASTEXC_STEP_ENTRY);
	if (!fx_eligible(regs, addr))
		return false;
	fastexc_stamp(FASTEXC_STEP_DECODED);
	entry = fx_lookup(addr, &on);
	if (!entry || !(on & FASTEXC_ON_TRAP))
		return false;
	fastexc_stamp(FASTEXC_STEP_DISPATCH);
	return fx_deliver(regs, entry, addr, kind, 0);
}
