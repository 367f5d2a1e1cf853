/* src/core/region_impl.h - the region object and the per-page state.
 *
 * Per logical page, one byte of state (rg_state[i]):
 *   bits 0-1  the protection the user asked for: TK_PROT_NONE, TK_PROT_READ, TK_PROT_RW
 *   bit 2     PS_TRACK: DIRTY tracking holds the page write-protected because
 *             it has not been written since the last tk_dirty() (trap-based
 *             DIRTY only: posix, uffd-sigbus, uffd-thread)
 *   bit 4     PS_MPROT: the kernel dropped the page's userfaultfd write
 *             protection (madvise behind trapkit's back, seen on uffd-thread):
 *             mprotect holds the page instead, until its next tk_protect
 *   bit 3     PS_DECLINED: a uffd-thread fault on this page was declined; the
 *             page is kept by mprotect so the retried access raises SIGSEGV in
 *             the faulting thread, which is then passed on (core/dispatch.c)
 *
 * What the hardware does follows from the state (hw_of() in vm/protect.c):
 *   posix and the DIRTY-only mechanisms: mprotect(min(user, TRACK ? READ : RW))
 *   uffd-*: mprotect(user == NONE ? NONE : RW) and uffd-wp iff user != RW or TRACK
 *
 * States change, under the region's lock (vm/hwlock.c), before the system
 * call that applies them, so a thread that faults while the state already
 * allows its access is told that another thread resolved it or is resolving
 * it (TK_FAULT_RESOLVED): a retry succeeds once that call completes.
 *
 * Trap-based DIRTY: a write fault on a PS_TRACK page whose user protection is
 * RW is handled inside trapkit (mark dirty, lift the protection, resume) and
 * never reaches the user's handler.  The fault path, tk_protect() and
 * tk_dirty() exclude each other through the region's lock (vm/dirty.c says
 * what that guarantees).
 */
#ifndef TK_CORE_REGION_IMPL_H
#define TK_CORE_REGION_IMPL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "core/internal.h"

#define PS_PROT_MASK 0x3
#define PS_TRACK 0x4
#define PS_DECLINED 0x8
#define PS_MPROT 0x10

struct tk_view {
    void *v_addr;
    struct tk_view *v_next;
};

#define TK_REGION_LIVE 0x74726731u /* rg_magic of a region not yet destroyed */
/* A region's lock is this many stripes at most, each over a run of pages
 * (vm/hwlock.c): a change of one page waits only for changes in its stripe. */
#define TK_HW_STRIPES 64

struct tk_region {
    uint32_t rg_magic;          /* TK_REGION_LIVE until tk_region_destroy */
    uint64_t rg_id;             /* unique per region of the process, never reused */
    uintptr_t rg_start, rg_end; /* [start, end) */
    size_t rg_len;
    size_t rg_page;    /* logical page size */
    unsigned rg_shift; /* log2(rg_page); 63 on pkeys regions (one page, any length) */
    size_t rg_npages;  /* logical pages */
    tk_fault_handler rg_handler;
    void *rg_arg;
    _Atomic(tk_fault_handler) rg_missing; /* tk__region_on_missing: SIGBUS faults */
    void *rg_missing_arg;
    enum tk_mech rg_mech;          /* posix on fast-kernel regions, which differ in delivery */
    bool rg_fastk;                 /* fast-kernel: the range is registered with the kernel */
    unsigned rg_flags;             /* TK_REGION_* */
    bool rg_owned;                 /* trapkit mapped the memory and unmaps it */
    bool rg_trap_dirty;            /* DIRTY by write traps (PS_TRACK), not by the kernel */
    int rg_memfd;                  /* TK_REGION_MAP2: the backing memfd, else -1 */
    int rg_pkey;                   /* pkeys regions: the region's protection key, else -1 */
    bool rg_subpage;               /* logical page smaller than the hardware page (vm/subpage.c) */
    unsigned char *rg_alias;       /* sub-page regions: a read-write view of the memfd */
    atomic_int rg_sub_inflight;    /* sub-page regions: emulations under way */
    bool rg_sub_strict;            /* sub-page regions: never open a hardware page to step an
                                      instruction trapkit cannot emulate (passed on instead):
                                      set by modules whose sub-pages must never be seen open
                                      by another thread (lazy cells) */
    int rg_uffd;                   /* the userfaultfd the range is registered with, -1, or
                                      TK_UFFD_LOST_IN_FORK: in a child of fork() that could
                                      not register it again, served by mprotect (posix) */
    _Atomic(const char *) rg_gone; /* set when the kernel reported the region's memory
                                      unmapped or moved (uffd-thread): why */
    _Atomic uint8_t *rg_state;     /* rg_npages bytes, mmap'd */
    _Atomic uint64_t *rg_dirty;    /* DIRTY: pages to report (vm/dirty.c) */
    _Atomic uint32_t *rg_inflight; /* DIRTY: per page, writes whose fault was handled and
                                      whose instruction has not completed (low 16 bits), and
                                      collections that held the page back for them */
    /* vm/hwlock.c: the lock over states and hardware, one per stripe of
     * 1 << rg_hw_shift pages (at most TK_HW_STRIPES of them) */
    struct tk_hw_stripe {
        atomic_int lock;         /* 0 free, 1 held, 2 contended */
        _Atomic uintptr_t owner; /* the holder's thread token */
    } rg_hw[TK_HW_STRIPES];
    unsigned rg_hw_shift;
    atomic_int rg_degraded; /* trap-based DIRTY fell back to "all dirty" this interval */
    pthread_mutex_t rg_views_lock;
    struct tk_view *rg_views;
    struct tk_region *rg_retired_next;
};

/* Whether r is a region not yet destroyed (a pointer to a destroyed one stays
 * readable for a while: see the quarantine in core/table.c). [signal-safe] */
static inline bool tk__region_live(const struct tk_region *r)
{
    return r && r->rg_magic == TK_REGION_LIVE;
}

/* 0, or -EINVAL with the message for a NULL or a destroyed region.
 * [signal-safe] */
static inline int tk__check_region(const struct tk_region *r, const char *null_msg,
                                   const char *dead_msg)
{
    if (!r) return tk__fail(-EINVAL, null_msg);
    if (!tk__region_live(r)) return tk__fail(-EINVAL, dead_msg);
    return 0;
}

#define TK_UFFD_LOST_IN_FORK (-2)

static inline size_t tk__page_index(const struct tk_region *r, uintptr_t a)
{
    return (a - r->rg_start) >> r->rg_shift;
}

/* ---- region table (core/table.c) ---------------------------------------
 * Readers (fault paths) bracket their use of a region with
 * tk__table_enter/leave; lookups are lock-free. [signal-safe] */
void tk__table_enter(void);
void tk__table_leave(void);
struct tk_region *tk__table_find(uintptr_t addr);
/* fork(): tk__table_fork_begin takes the writer lock and returns the listed
 * regions (*n of them); tk__table_fork_end releases it, in the parent and in
 * the child (core/fork.c). */
struct tk_region *const *tk__table_fork_begin(size_t *n);
void tk__table_fork_end(bool child);
/* Registers trapkit's fork() handlers (core/fork.c).  Idempotent. */
void tk__fork_init(void);
/* Writers (not signal-safe, serialised internally). */
int tk__table_insert(struct tk_region *r);
/* Whether [start, end) overlaps a region in the table. */
bool tk__table_overlaps(uintptr_t start, uintptr_t end);
/* Unlists r: 0, -EINVAL if r is not listed (destroyed already, or not a
 * region), or -ENOMEM if it could not (r then stays listed with an empty
 * range and must never be freed). */
int tk__table_remove(struct tk_region *r);
/* Frees an unlisted region once no reader can still be looking at it.  Freed
 * regions are kept (dead, rg_magic cleared) in a quarantine of the last
 * TK_REGION_QUARANTINE ones before their memory goes back to malloc, so a
 * stale pointer to a recently destroyed region is recognised instead of
 * naming a new region that got its address. */
void tk__table_retire(struct tk_region *r);
#define TK_REGION_QUARANTINE 256

/* ---- dispatch (core/dispatch.c) ---------------------------------------- */
int tk__install_handlers(void);
/* ---- sub-page regions (vm/subpage.c) ---------------------------------- */
#define TK_SUBPAGE_MIN 64 /* the smallest logical page */
int tk__subpage_protect(struct tk_region *r, size_t first, size_t n, int prot); /* [signal-safe] */
int tk__subpage_apply(struct tk_region *r, size_t first, size_t n);             /* [signal-safe] */
/* A SIGSEGV in a sub-page region.  [signal-safe] */
tk_action tk__subpage_fault(struct tk_region *r, uintptr_t addr, enum tk_access access, void *uc);
/* The SIGTRAP after a single-stepped instruction: re-protects and clears
 * the trap flag; false if this thread was not stepping.  [signal-safe] */
bool tk__subpage_step_done(void *uc);
/* Makes sure trapkit handles SIGTRAP (core/trap.c).  Not signal-safe. */
int tk__trap_claim(int sig);

/* Reads TRAPKIT_FAST once (core/fast.c). */
void tk__fast_init(void);

/* ---- returning from trapkit's signal handlers (core/fast.c) -------------
 * tk__kernel_restorer is the signal trampoline glibc gives the kernel; a
 * handler whose return address is it was called by the kernel, not by
 * another handler chaining to it, so the thread's signal mask is the
 * interrupted code's (SA_NODEFER, empty sa_mask).  Use the macro in the
 * handler function itself. */
extern void *tk__kernel_restorer;
#define TK_DELIVERED_BY_KERNEL()                                                                   \
    (tk__kernel_restorer && __builtin_return_address(0) == tk__kernel_restorer)
/* Resumes uc without rt_sigreturn if TK_FAST_RETURN is on and the context
 * allows it (entry_mask: uc_sigmask's first 8 bytes at handler entry);
 * returns if not.  [signal-safe] */
struct sigaction;
void tk__fast_return(void *uc, const uint64_t *entry_mask);
/* Passes a signal on to the disposition old, or the default action; true
 * if it reset the disposition for the faulting instruction to fault again
 * (the default action), false if a handler ran or nothing remains to do. */
bool tk__chain(const struct sigaction *old, int sig, siginfo_t *si, void *uc);
/* Handles a fault at addr in r (reader section held).  ucontext is NULL on
 * the uffd handler thread.  Returns TK_RESUME or TK_DECLINE. [signal-safe] */
tk_action tk__handle_fault(struct tk_region *r, uintptr_t addr, enum tk_access access, void *pc,
                           void *ucontext, enum tk_mech via, unsigned flags);
/* A SIGSEGV in a TK_REGION_LIGHT region (vm/fault.c).  [signal-safe] */
tk_action tk__light_fault(struct tk_region *r, uintptr_t addr, void *uc);

/* ---- userfaultfd contexts (os/linux/uffd_ctx.c) ------------------------
 * One userfaultfd per delivery mode, shared by every region of that mode,
 * created on first use.  Returns the fd or a negative errno (tk_last_error
 * set). */
int tk__uffd_for(enum tk_mech m);
/* True on a uffd service thread while it runs a region's handler or hands
 * it pages the kernel dropped: lifting write protection then does not wake
 * the threads faulting there, each of which resumes when its own fault
 * event has been served. */
extern __thread bool tk__uffd_serving __attribute__((tls_model("initial-exec")));
/* Handles one userfaultfd event on a uffd-thread service thread
 * (vm/uffd_serve.c); depth: how many handlers deep a page fault was raised
 * (1: by the program).  Returns the length of the range the service thread
 * must then wake, from *wake_addr (0: none). */
struct uffd_msg;
size_t tk__uffd_serve(const struct uffd_msg *msg, int depth, uintptr_t *wake_addr);

/* The ucontext of the fault this thread's trapkit handler is handling, or
 * NULL outside one. [signal-safe] */
void *tk__current_fault_uc(void);

/* ---- pkeys regions (vm/pkeys.c) ----------------------------------------- */
int tk__pkeys_attach(struct tk_region *r);
void tk__pkeys_detach(struct tk_region *r);
int tk__pkeys_protect(struct tk_region *r, void *addr, size_t len, int prot); /* [signal-safe] */
int tk__pkeys_protection(struct tk_region *r);                                /* [signal-safe] */

/* ---- primitives (vm/) --------------------------------------------------- */
/* Applies the state of pages [first, first+n) to the hardware, grouping runs
 * of equal settings into one system call each. [signal-safe] */
int tk__apply(struct tk_region *r, size_t first, size_t n);
/* [addr, addr+len) inside r and aligned to its logical page: its first
 * page and count, or -EINVAL (with tk_protect's reason).  [signal-safe] */
int tk__check_range(struct tk_region *r, const void *addr, size_t len, size_t *first, size_t *n);
/* mprotect's protection for a user protection TK_PROT_* (vm/protect.c). */
extern const int tk__prot_of_user[4];
/* Changes the hardware of pages [first, first+n), all in state `from`, to
 * what state `to` needs, with only the system calls that differ. [signal-safe] */
int tk__change(struct tk_region *r, size_t first, size_t n, uint8_t from, uint8_t to);
/* A userfaultfd write-protect fault on page was declined: mark the page
 * PS_DECLINED and hold it read-only by mprotect, so the retried access raises
 * an ordinary SIGSEGV (SEGV_ACCERR), which trapkit passes on to the previous
 * handler or the default action as any declined fault.  The next tk_protect
 * of the page clears the mark. [signal-safe] */
void tk__decline_wp(struct tk_region *r, size_t page);
/* The kernel dropped pages [first, first+n) behind trapkit's back
 * (UFFD_EVENT_REMOVE): hold those that need write protection by mprotect
 * (PS_MPROT).  Called on a uffd service thread.  [signal-safe] */
void tk__pages_removed(struct tk_region *r, size_t first, size_t n);
/* The trap-based DIRTY fault path: called for a write fault on a page that
 * may be PS_TRACK.  uc is the faulting thread's context when the fault was
 * delivered to it (posix, uffd-sigbus), NULL on a uffd service thread.
 * Returns true if it handled the fault. [signal-safe] */
bool tk__dirty_fault(struct tk_region *r, size_t page, void *uc);
/* The SIGTRAP after an instruction tk__dirty_fault single-stepped: counts
 * its writes complete and clears the trap flag (unless the program had set
 * it).  Returns true if this thread was stepping for DIRTY and the program
 * had not set the flag itself.  [signal-safe] */
bool tk__dirty_step_done(void *uc);
/* In a child of fork(): no thread of the child is inside an instruction
 * stepped for DIRTY.  Called by vm/fork.c. */
void tk__dirty_after_fork_child(struct tk_region *r);
/* Around fork(): the list of soft-dirty regions is not half-changed. */
void tk__dirty_before_fork(void);
void tk__dirty_after_fork(void);
/* How writes in flight are followed (vm/dirty.c); for benchmarks only. */
extern int tk__dirty_inflight;
/* Sets up DIRTY for a new region (all pages clean). */
int tk__dirty_start(struct tk_region *r);
/* Frees what a region's struct points to (page states, DIRTY's bitmap) once
 * no fault path can look at it (vm/region.c; core/table.c's reclaim). */
void tk__region_free_meta(struct tk_region *r);
/* Maps and frees DIRTY's bitmap of pages to report (rg_dirty: trap-based
 * DIRTY, and tk_discard'ed pages on pagemap-scan); marks pages
 * [first, first+n) in it ([signal-safe]). */
void tk__dirty_mark(struct tk_region *r, size_t first, size_t n);
int tk__dirty_alloc(struct tk_region *r);
void tk__dirty_free(struct tk_region *r);
/* The region's lock over states and hardware (vm/hwlock.c), in stripes of
 * pages.  tk__hw_lock_pages defers the thread's asynchronous signals and
 * takes the stripes holding pages [first, first+n) (or, nested in this
 * thread's own holding, goes ahead without them); tk__hw_lock takes every
 * stripe; tk__hw_unlock releases them, re-applying pages [first, first+n) if
 * a nested call went ahead, and restores the signal mask.  [signal-safe] */
typedef struct tk_hw_guard {
    uint64_t old_mask; /* the thread's signal mask before */
    bool deferred;     /* signals were blocked by tk__hw_lock */
    bool held;         /* the stripes were taken (not nested) */
    unsigned s0, s1;   /* the stripes held: [s0, s1) */
} tk_hw_guard;
void tk__hw_lock(struct tk_region *r, tk_hw_guard *g);
void tk__hw_lock_pages(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n);
/* The stripes' size for a region of npages pages: their shift; and how many
 * stripes r has.  [signal-safe] */
unsigned tk__hw_stripe_shift(size_t npages);
unsigned tk__hw_stripes(const struct tk_region *r);
int tk__hw_unlock(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n);
/* Blocks every asynchronous signal of the thread, saving the old mask, and
 * restores it.  [signal-safe] */
void tk__defer_signals(uint64_t *old);
void tk__restore_signals(const uint64_t *old);
/* Set on threads that keep asynchronous signals blocked (the uffd handler
 * thread): tk__hw_lock then needs no system call. */
extern __thread bool tk__async_signals_blocked __attribute__((tls_model("initial-exec")));
/* Benchmarks only: false makes tk__hw_lock skip the signal deferral (the lock
 * as it was before it, unsafe against signal handlers re-entering trapkit). */
extern bool tk__hwlock_defer_signals;

#endif
