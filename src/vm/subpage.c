/* src/vm/subpage.c - sub-page protection (Thekkath & Levy 3.2.4): regions
 * whose logical page is smaller than the hardware page.
 *
 * Each sub-page has its own state; a hardware page gets the most restrictive
 * protection among its sub-pages (any no-access sub-page makes it
 * inaccessible, else any read-only one makes it read-only).  So every access
 * the user protected faults, and so do some the user allowed: an access to
 * an unprotected sub-page of a protected hardware page.  On such a fault
 * trapkit decodes the instruction (arch/x86_64/insn.c) to learn every byte
 * it touches:
 *
 *   - if any byte lies in a sub-page whose protection forbids the access,
 *     the region's handler gets the fault, at the first such byte (an
 *     access that straddles an open and a protected sub-page reaches the
 *     handler, not half done);
 *   - otherwise the access completes without the handler.  With
 *     TK_FAST_SUBPAGE (the default) trapkit emulates the instruction,
 *     reaching the protected hardware page through a second, read-write
 *     view of the region's memfd: no system call, and the page never opens,
 *     so no other thread can slip through.  For an instruction it does not
 *     decode, or with TK_FAST_SUBPAGE off, it opens the hardware page (for
 *     reading only, if the instruction only reads), single-steps the
 *     instruction with the trap flag and re-protects it in the SIGTRAP that
 *     follows.  While the page is open (one instruction of this thread,
 *     plus any signal handler that runs meanwhile), other threads can make
 *     the same kind of access to every sub-page of that hardware page
 *     without faulting: that is the window the single-step path has and
 *     the emulation path does not.  For an instruction that is not
 *     decoded, only the first byte of the access (the fault address) is
 *     checked.  Memory outside the region that an instruction also touches
 *     (the source of a MOVS) is never reached by the emulator: such
 *     instructions are single-stepped, so a fault there is the program's.
 *
 * Ordering against tk_protect: the step's page is opened under the
 * region's lock after its accesses are checked again; an emulation counts
 * itself in before it reads the states, and tk_protect waits for those
 * counted in after it changed them.  So no access that a returned
 * tk_protect forbids completes.
 *
 * String instructions (REP MOVS/STOS/LODS) are emulated element by element
 * and stop before the first element that touches a protected sub-page; the
 * CPU then re-executes the instruction from there and faults on it.
 * [signal-safe] unless noted.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "arch/context.h"
#include "arch/x86_64/insn.h"
#include "core/region_impl.h"
#include "os/linux/os.h"
#include "trapkit/fast.h"

#define X86_EFLAGS_TF 0x100

static size_t hw_size(void)
{
    static size_t hw;
    if (!hw) hw = (size_t)sysconf(_SC_PAGESIZE);
    return hw;
}

/* The user protection a hardware page gets from its sub-pages, with the
 * sub-pages [first, first + n) taken as `prot` (or as they are, prot < 0). */
static int hw_user_prot(struct tk_region *r, uintptr_t hwpage, size_t first, size_t n, int prot)
{
    size_t per = hw_size() >> r->rg_shift;
    size_t s0 = tk__page_index(r, hwpage);
    int min = TK_PROT_RW;
    for (size_t s = s0; s < s0 + per; s++) {
        int p = (prot >= 0 && s >= first && s < first + n)
                    ? prot
                    : (atomic_load(&r->rg_state[s]) & PS_PROT_MASK);
        if (p < min) min = p;
    }
    return min;
}

/* Makes the hardware pages covering sub-pages [first, first+n) match
 * their states (or the states they would have with `prot`).  One mprotect
 * per run of pages getting the same protection. */
static int apply_hw(struct tk_region *r, size_t first, size_t n, int prot)
{
    size_t hw = hw_size();
    uintptr_t a = (r->rg_start + (first << r->rg_shift)) & ~(uintptr_t)(hw - 1);
    uintptr_t end = r->rg_start + ((first + n) << r->rg_shift);
    uintptr_t run = a;
    int run_prot = -1;
    for (; a < end || run_prot >= 0; a += hw) {
        int p = a < end ? hw_user_prot(r, a, first, n, prot) : -1;
        if (p != run_prot || a >= end) {
            if (run_prot >= 0) {
                int err = tk__mprotect((void *)run, a - run, tk__prot_of_user[run_prot]);
                if (err) return err;
            }
            run = a;
            run_prot = p;
            if (a >= end) break;
        }
    }
    return 0;
}

int tk__subpage_apply(struct tk_region *r, size_t first, size_t n)
{
    return apply_hw(r, first, n, -1);
}

/* Emulations under way in this thread (a signal handler interrupting one
 * may call tk_protect, which must not wait for its own thread). */
static __thread int own_emulations __attribute__((tls_model("initial-exec")));

int tk__subpage_protect(struct tk_region *r, size_t first, size_t n, int prot)
{
    tk_hw_guard g;
    tk__hw_lock(r, &g);
    /* The hardware first, from the states the call will leave; if the
     * kernel refuses, put back what the current states say and change
     * nothing. */
    int err = apply_hw(r, first, n, prot);
    if (err) {
        (void)apply_hw(r, first, n, -1);
        tk__hw_unlock(r, &g, first, n);
        if (err == -ENOMEM)
            return tk__fail(err, "tk_protect: mprotect failed with ENOMEM: splitting the mapping "
                                 "would exceed vm.max_map_count");
        return tk__fail(err, "tk_protect: the system call changing the protection failed");
    }
    for (size_t i = first; i < first + n; i++) {
        uint8_t old = atomic_load(&r->rg_state[i]), nst;
        do {
            nst = (uint8_t)((old & ~PS_PROT_MASK) | prot);
        } while (!atomic_compare_exchange_weak(&r->rg_state[i], &old, nst));
    }
    /* An emulated access that read the old states may still be storing
     * through the second view: wait for it (not for this thread's own). */
    while (atomic_load(&r->rg_sub_inflight) > own_emulations) tk__cpu_relax();
    return tk__hw_unlock(r, &g, first, n);
}

/* ---- the fault path ---------------------------------------------------- */
static bool allows(int user, bool write)
{
    return write ? user == TK_PROT_RW : user != TK_PROT_NONE;
}

/* The first byte of [addr, addr+len) that r's sub-pages forbid, or 0. */
static uintptr_t first_forbidden(struct tk_region *r, uintptr_t addr, size_t len, bool write)
{
    uintptr_t lo = addr < r->rg_start ? r->rg_start : addr;
    uintptr_t hi = addr + len > r->rg_end ? r->rg_end : addr + len;
    for (uintptr_t a = lo; a < hi;) {
        size_t s = tk__page_index(r, a);
        if (!allows(atomic_load(&r->rg_state[s]) & PS_PROT_MASK, write)) return a;
        a = r->rg_start + ((s + 1) << r->rg_shift);
    }
    return 0;
}

struct emu_ctx {
    struct tk_region *r;
    unsigned char *alias;
};

static void *emu_map(uintptr_t addr, size_t len, bool write, void *ctx)
{
    (void)write;
    struct emu_ctx *c = ctx;
    struct tk_region *r = c->r;
    if (addr >= r->rg_start && addr + len <= r->rg_end) return c->alias + (addr - r->rg_start);
    /* Memory outside the region is left to the CPU (single-stepping), so a
     * fault there is the program's own, at its own instruction. */
    return NULL;
}

static bool emu_allowed(uintptr_t addr, size_t len, bool write, void *ctx)
{
    struct emu_ctx *c = ctx;
    return first_forbidden(c->r, addr, len, write) == 0;
}

/* The thread's pending single-step: hardware pages opened for one
 * instruction, closed again by the SIGTRAP after it. */
struct step {
    struct tk_region *r;
    uintptr_t pages[4];
    int n;
};
static __thread struct step step __attribute__((tls_model("initial-exec")));

static tk_action deliver(struct tk_region *r, uintptr_t bad, bool write, void *uc)
{
    return tk__handle_fault(r, bad, write ? TK_ACCESS_WRITE : TK_ACCESS_READ, TK_CTX_PC(uc), uc,
                            TK_MECH_POSIX, 0);
}

/* Opens addr's hardware page for one single-stepped instruction.  The
 * accesses are checked again under the region's lock, so a tk_protect that
 * has returned is never stepped past. */
static tk_action open_for_step(struct tk_region *r, uintptr_t addr, void *uc,
                               const struct tk_insn_access *acc, int na)
{
    size_t hw = hw_size();
    uintptr_t page = addr & ~(uintptr_t)(hw - 1);
    if (r->rg_sub_strict) {
        tk__write_stderr("trapkit: an instruction trapkit does not emulate (an AVX or AVX-512 "
                         "access, as glibc's memcpy makes) touched a sub-page that no other "
                         "thread may see opened (a lazy cell smaller than a page): passed on\n");
        return TK_DECLINE;
    }
    if (step.n && step.r != r) return TK_DECLINE; /* one region per instruction */
    bool known = false;
    for (int i = 0; i < step.n; i++) known |= step.pages[i] == page;
    if (!known && step.n == (int)(sizeof step.pages / sizeof step.pages[0])) return TK_DECLINE;
    size_t first = tk__page_index(r, page), n = hw >> r->rg_shift;
    tk_hw_guard g;
    tk__hw_lock(r, &g);
    for (int i = 0; i < na; i++) {
        uintptr_t bad = first_forbidden(r, acc[i].addr, acc[i].len, acc[i].write);
        if (bad) {
            tk__hw_unlock(r, &g, first, n);
            return deliver(r, bad, acc[i].write, uc);
        }
    }
    /* only as open as the instruction needs: a read step leaves writes
     * of other threads faulting */
    bool any_write = false;
    for (int i = 0; i < na; i++) any_write |= acc[i].write;
    int err = tk__mprotect((void *)page, hw, any_write ? PROT_READ | PROT_WRITE : PROT_READ);
    tk__hw_unlock(r, &g, first, n);
    if (err) return TK_DECLINE;
    if (!known) {
        step.r = r;
        step.pages[step.n++] = page;
    }
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
    return TK_RESUME;
}

bool tk__subpage_step_done(void *uc)
{
    if (!step.n) return false;
    struct tk_region *r = step.r;
    size_t hw = hw_size();
    for (int i = 0; i < step.n; i++) {
        size_t first = tk__page_index(r, step.pages[i]), n = hw >> r->rg_shift;
        tk_hw_guard g;
        tk__hw_lock(r, &g);
        (void)apply_hw(r, first, n, -1);
        tk__hw_unlock(r, &g, first, n);
    }
    step.n = 0;
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
    return true;
}

tk_action tk__subpage_fault(struct tk_region *r, uintptr_t addr, enum tk_access access, void *uc)
{
    /* a jump into the region: nothing to emulate or step (its memory is
     * never executable); the handler sees it as in a region of whole pages */
    if (access == TK_ACCESS_EXEC)
        return tk__handle_fault(r, addr, TK_ACCESS_EXEC, TK_CTX_PC(uc), uc, TK_MECH_POSIX, 0);
    bool write = access == TK_ACCESS_WRITE;
    /* the instruction being single-stepped faults again (another page, or
     * its page was protected meanwhile) */
    if (step.n && (((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF)) {
        struct tk_insn_access one = {addr, 1, write};
        return open_for_step(r, addr, uc, &one, 1);
    }

    struct tk_insn d;
    struct tk_insn_access acc[2];
    int na = 0;
    if (tk__insn_decode(uc, &d)) {
        na = tk__insn_accesses(&d, uc, acc);
        /* the decoded access must be the one that faulted */
        bool covers = false;
        for (int i = 0; i < na; i++)
            covers |= addr >= acc[i].addr && addr - acc[i].addr < acc[i].len;
        if (!covers) na = 0;
    }
    bool decoded = na > 0;
    if (!decoded) {
        acc[0] = (struct tk_insn_access){addr, 1, write};
        na = 1;
    }
    /* Counted in before the states are read: tk__subpage_protect changes
     * the states, then waits for the emulations counted in, so none lands
     * after it returns. */
    atomic_fetch_add(&r->rg_sub_inflight, 1);
    own_emulations++;
    for (int i = 0; i < na; i++) {
        uintptr_t bad = first_forbidden(r, acc[i].addr, acc[i].len, acc[i].write);
        if (bad) {
            own_emulations--;
            atomic_fetch_sub(&r->rg_sub_inflight, 1);
            return deliver(r, bad, acc[i].write, uc);
        }
    }
    bool done = false;
    if (decoded && (tk_fast_paths() & TK_FAST_SUBPAGE) && r->rg_alias) {
        struct emu_ctx c = {r, r->rg_alias};
        struct tk_emu_ops ops = {emu_map, emu_allowed, &c};
        done = tk__insn_emulate(&d, uc, &ops);
    }
    own_emulations--;
    atomic_fetch_sub(&r->rg_sub_inflight, 1);
    if (done) return TK_RESUME;
    return open_for_step(r, addr, uc, acc, na);
}
