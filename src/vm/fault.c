/* src/vm/fault.c - what a fault in a region means (core/dispatch.c and the
 * uffd service threads deliver it here).
 *
 * A write held back only by DIRTY tracking is DIRTY's (vm/dirty.c); then
 * eager amplification opens the page before the user's handler runs, if the
 * region asks for it; then the region's handler decides.  The handler is
 * called outside the region table's reader section, since it may never
 * return (see core/dispatch.c, "Escapes").
 */
#include "arch/context.h"
#include "core/region_impl.h"
#include "trapkit/fast.h"

/* Calls r's handler outside the table's reader section (it may never
 * return).  *gone is set if r was destroyed while the handler ran: r must not
 * be used again.  Called and returns inside the reader section.
 * [signal-safe] */
static tk_action call_handler(struct tk_region *r, const tk_fault *f, bool *gone)
{
    uint64_t id = r->rg_id;
    tk_fault_handler h = r->rg_handler;
    void *arg = r->rg_arg;
    tk__table_leave();
    tk_action act = h(f, arg);
    tk__table_enter();
    *gone = tk__table_find((uintptr_t)f->addr) != r || r->rg_id != id;
    return act;
}

/* [signal-safe] */
static bool effective_allows(uint8_t st, enum tk_access access)
{
    int user = st & PS_PROT_MASK;
    if (access == TK_ACCESS_WRITE) return user == TK_PROT_RW && !(st & PS_TRACK);
    return user != TK_PROT_NONE;
}

/* [signal-safe] */
tk_action tk__handle_fault(struct tk_region *r, uintptr_t addr, enum tk_access access, void *pc,
                           void *ucontext, enum tk_mech via, unsigned flags)
{
    size_t page = tk__page_index(r, addr);
    uint8_t st = atomic_load(&r->rg_state[page]);

    if (st & PS_DECLINED) return TK_DECLINE;

    /* A write the user allows, held back only by DIRTY tracking. */
    if (r->rg_trap_dirty && access != TK_ACCESS_READ && (st & PS_TRACK) &&
        (st & PS_PROT_MASK) == TK_PROT_RW) {
        if (tk__dirty_fault(r, page, via == TK_MECH_UFFD_THREAD ? NULL : ucontext))
            return TK_RESUME;
        st = atomic_load(&r->rg_state[page]);
    }

    /* uffd write-protect faults are writes; a SIGSEGV may be either.  (pkeys
     * rights are the faulting thread's own: no other thread resolves them.) */
    if (r->rg_mech != TK_MECH_PKEYS &&
        effective_allows(st, access == TK_ACCESS_UNKNOWN ? TK_ACCESS_READ : access))
        flags |= TK_FAULT_RESOLVED;

    if (!r->rg_handler) return (flags & TK_FAULT_RESOLVED) ? TK_RESUME : TK_DECLINE;

    /* Eager amplification: open the page for this access first. */
    int eager_from = -1, eager_to = 0;
    if ((r->rg_flags & TK_REGION_EAGER) && !(flags & TK_FAULT_RESOLVED) &&
        access != TK_ACCESS_EXEC) {
        eager_from = r->rg_mech == TK_MECH_PKEYS ? tk__pkeys_protection(r) : st & PS_PROT_MASK;
        eager_to =
            access == TK_ACCESS_READ && eager_from == TK_PROT_NONE ? TK_PROT_READ : TK_PROT_RW;
        if (tk_fast_paths() & TK_FAST_EAGER) {
            if (tk_protect(r, (void *)(r->rg_start + (page << r->rg_shift)),
                           r->rg_mech == TK_MECH_PKEYS ? r->rg_len : r->rg_page, eager_to) == 0)
                flags |= TK_FAULT_AMPLIFIED;
            else
                eager_from = -1;
        }
    }

    tk_fault f = {
        .addr = (void *)addr,
        .page = (void *)(r->rg_start + (page << r->rg_shift)),
        .pc = pc,
        .region = r,
        .access = access,
        .flags = flags,
        .mech = via,
        .ucontext = ucontext,
    };
    bool gone = false;
    tk_action act = call_handler(r, &f, &gone);
    /* Destroyed meanwhile: its memory is now ordinary (or unmapped), and the
     * retried access meets whatever it is. */
    if (gone) return TK_RESUME;
    if (eager_from >= 0) {
        void *pg = (void *)(r->rg_start + (page << r->rg_shift));
        size_t len = r->rg_mech == TK_MECH_PKEYS ? r->rg_len : r->rg_page;
        if (act == TK_DECLINE && (flags & TK_FAULT_AMPLIFIED)) {
            /* not ours after all: the retry must fault as before */
            (void)tk_protect(r, pg, len, eager_from);
        } else if (act == TK_RESUME && !(flags & TK_FAULT_AMPLIFIED)) {
            /* eager amplification switched off: open the page now, unless
             * the handler already set a protection that allows the access */
            int now = r->rg_mech == TK_MECH_PKEYS
                          ? tk__pkeys_protection(r)
                          : (atomic_load(&r->rg_state[page]) & PS_PROT_MASK);
            if (now == eager_from) (void)tk_protect(r, pg, len, eager_to);
        }
    }
    return act;
}

/* The light path: a SIGSEGV in a TK_REGION_LIGHT region goes straight to
 * its handler, before any of the general path's bookkeeping (DIRTY, eager
 * amplification, declined marks).  [signal-safe] */
tk_action tk__light_fault(struct tk_region *r, uintptr_t addr, void *uc)
{
    size_t page = tk__page_index(r, addr);
    uint8_t st = atomic_load(&r->rg_state[page]);
    enum tk_access access = TK_CTX_ACCESS(uc);
    tk_fault f = {
        .addr = (void *)addr,
        .page = (void *)(r->rg_start + (page << r->rg_shift)),
        .pc = TK_CTX_PC(uc),
        .region = r,
        .access = access,
        .flags =
            (r->rg_mech != TK_MECH_PKEYS && effective_allows(st, access)) ? TK_FAULT_RESOLVED : 0,
        .mech = r->rg_mech == TK_MECH_PKEYS ? TK_MECH_PKEYS : TK_MECH_POSIX,
        .ucontext = uc,
    };
    bool gone = false;
    tk_action act = call_handler(r, &f, &gone);
    return gone ? TK_RESUME : act;
}
