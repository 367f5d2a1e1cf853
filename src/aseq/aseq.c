/* src/aseq/aseq.c - rollforward atomic sequences (trapkit/aseq.h).
 *
 * Registry.  Every object's tk_aseq records are checked once, when it is
 * registered (its constructor): each sequence is found by its end address
 * (records at both ends name it), its code decoded with Zydis from its
 * first instruction to its last, and the verdict kept in an open-addressing
 * table keyed by the end address.  Tables are published with one atomic
 * pointer store and never freed, so the signal handler reads them without
 * a lock.  Zydis was chosen because it is a maintained, complete decoder
 * of every x86-64 extension (AVX-512, APX-free), packaged by Debian
 * (libzydis-dev), that reports for every operand whether it is read or
 * written, including implicit ones: exactly the facts the check needs.
 *
 * Signals.  tk_aseq_signal installs dispatch() for the signal.  dispatch()
 * finds whether the interrupted context is inside a sequence:
 *   Dyn schemes: in_as != 0 (exact; Dyn/Fault also needs the PC before the
 *     load that may fault, found from the sequence's record);
 *   Hyb/Jump: r11 is the end of a registered sequence and the PC lies
 *     between its first instruction and its final jump.
 * If so, and the sequence passed the check and its priority covers the
 * signal, the signal is deferred: its siginfo and the mask its handler
 * needs are kept in the thread, the return from dispatch() raises the
 * kernel's mask to block every tk_aseq signal (the kernel holds any that
 * come during the rollforward, however many, of whatever kind), and the
 * sequence's end is redirected: dest (Dyn/Jump) or r11 (Hyb/Jump) to
 * tk__aseq_landing, false_or_fault (Dyn/Fault) to an inaccessible page.
 * At the end, the landing (or the fault handler) runs the handler with its
 * siginfo and mask, restores the mask, and resumes at the sequence's end;
 * the signals the kernel held are delivered then, outside any sequence.
 */
#include <Zydis/Zydis.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "aseq/aseq_impl.h"
#include "core/internal.h"
#include "os/linux/os.h"
#include "trapkit/aseq.h"
#include "trapkit/region.h"

__thread struct tk_aseq_thread tk__aseq_self
    __attribute__((tls_model("initial-exec"))) = {.false_or_fault = &tk__aseq_false};
const long tk__aseq_false = 0;

/* ---- registry ------------------------------------------------------------ */

struct seq {
    uintptr_t end;   /* key */
    uintptr_t start; /* first instruction (Dyn: after the registration) */
    uintptr_t last;  /* Hyb: the jump; Dyn/Fault: the load that may fault; Dyn/Jump: the jump */
    int kind;        /* TK_ASEQ_REC_HYB_JUMP, _DYN_FAULT, _DYN_JUMP */
    int prio;
    bool safe;
    bool checked; /* check() ran (kept when the table is copied to a larger one) */
    const char *file;
    int line;
    char why[80];
};

struct table {
    size_t cap; /* a power of two */
    size_t n;
    struct seq *slot;                      /* end == 0: empty */
    struct table *prev;                    /* replaced, kept: a signal handler may still read it */
    const struct tk_aseq_rec *objects[64]; /* the record arrays registered (to skip repeats) */
    size_t nobjects;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct table *) current;
static atomic_ulong n_unsafe;

static size_t hash_addr(uintptr_t a)
{
    return (size_t)((a * 0x9e3779b97f4a7c15ull) >> 20);
}

/* [signal-safe] */
static const struct seq *lookup(uintptr_t end)
{
    struct table *t = atomic_load_explicit(&current, memory_order_acquire);
    if (!t || !end) return NULL;
    for (size_t i = hash_addr(end) & (t->cap - 1), k = 0; k < t->cap;
         i = (i + 1) & (t->cap - 1), k++) {
        if (t->slot[i].end == end) return &t->slot[i];
        if (t->slot[i].end == 0) return NULL;
    }
    return NULL;
}

static struct seq *insert(struct table *t, uintptr_t end)
{
    for (size_t i = hash_addr(end) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (t->slot[i].end == end) return &t->slot[i];
        if (t->slot[i].end == 0) {
            t->slot[i].end = end;
            t->n++;
            return &t->slot[i];
        }
    }
}

static uintptr_t rec_addr(const int32_t *field)
{
    return (uintptr_t)field + (intptr_t)*field;
}

static void unsafe(struct seq *s, const char *fmt, unsigned long a)
{
    if (s->safe) atomic_fetch_add(&n_unsafe, 1);
    s->safe = false;
    snprintf(s->why, sizeof s->why, fmt, a);
}

/* The safety check of one sequence: from start to last (inclusive), only
 * forward branches to inside [start, last], no call, return, system call,
 * interrupt, REP prefix or indirect branch but the last, no use of r11
 * (Hyb) before the last, at most TK_ASEQ_MAX_INSNS instructions; the last
 * is what the scheme puts there. */
static void check(struct seq *s)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    if (s->start > s->last || s->last >= s->end) {
        unsafe(s, "its ends are out of order (the compiler moved code around it)%.0lu", 0);
        return;
    }
    uintptr_t pc = s->start;
    for (int n = 0;; n++) {
        if (n > TK_ASEQ_MAX_INSNS) {
            unsafe(s, "longer than %lu instructions", TK_ASEQ_MAX_INSNS);
            return;
        }
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, (const void *)pc, 15, &in, op))) {
            unsafe(s, "undecodable instruction at +%lu", pc - s->start);
            return;
        }
        bool is_last = pc == s->last;
        if (pc > s->last) {
            unsafe(s, "an instruction straddles its last one at +%lu", pc - s->start);
            return;
        }
        if (is_last) {
            bool ok = false;
            if (s->kind == TK_ASEQ_REC_HYB_JUMP)
                ok = in.mnemonic == ZYDIS_MNEMONIC_JMP &&
                     op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                     op[0].reg.value == ZYDIS_REGISTER_R11;
            else if (s->kind == TK_ASEQ_REC_DYN_FAULT)
                ok = in.mnemonic == ZYDIS_MNEMONIC_MOV && op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
                     op[1].mem.base == ZYDIS_REGISTER_R11;
            if (!ok) unsafe(s, "its last instruction is not the scheme's (at +%lu)", pc - s->start);
            return;
        }
        switch (in.meta.category) {
        case ZYDIS_CATEGORY_CALL:
            unsafe(s, "a call at +%lu", pc - s->start);
            return;
        case ZYDIS_CATEGORY_RET:
            unsafe(s, "a return at +%lu", pc - s->start);
            return;
        case ZYDIS_CATEGORY_SYSCALL:
        case ZYDIS_CATEGORY_INTERRUPT:
        case ZYDIS_CATEGORY_SYSTEM:
            unsafe(s, "a system call, interrupt or system instruction at +%lu", pc - s->start);
            return;
        default:
            break;
        }
        if (in.attributes &
            (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) {
            unsafe(s, "a repeated string instruction at +%lu", pc - s->start);
            return;
        }
        if (in.meta.category == ZYDIS_CATEGORY_COND_BR ||
            in.meta.category == ZYDIS_CATEGORY_UNCOND_BR || in.mnemonic == ZYDIS_MNEMONIC_LOOP ||
            in.mnemonic == ZYDIS_MNEMONIC_LOOPE || in.mnemonic == ZYDIS_MNEMONIC_LOOPNE ||
            in.mnemonic == ZYDIS_MNEMONIC_JRCXZ) {
            ZyanU64 target;
            if (!(in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) ||
                !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], pc, &target))) {
                unsafe(s, "an indirect branch at +%lu", pc - s->start);
                return;
            }
            if (target <= pc || target > s->last) {
                unsafe(s, "a branch backwards or out of the sequence at +%lu", pc - s->start);
                return;
            }
        }
        if (s->kind == TK_ASEQ_REC_HYB_JUMP) {
            for (unsigned i = 0; i < in.operand_count; i++) {
                ZydisRegister r[3] = {ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE,
                                      ZYDIS_REGISTER_NONE};
                if (op[i].type == ZYDIS_OPERAND_TYPE_REGISTER) r[0] = op[i].reg.value;
                if (op[i].type == ZYDIS_OPERAND_TYPE_MEMORY) {
                    r[1] = op[i].mem.base;
                    r[2] = op[i].mem.index;
                }
                for (int k = 0; k < 3; k++)
                    if (r[k] != ZYDIS_REGISTER_NONE &&
                        ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r[k]) ==
                            ZYDIS_REGISTER_R11) {
                        unsafe(s, "a use of r11 at +%lu", pc - s->start);
                        return;
                    }
            }
        }
        pc += in.length;
    }
}

void tk_aseq_register(const struct tk_aseq_rec *from, const struct tk_aseq_rec *to)
{
    if (!from || to <= from) return;
    pthread_mutex_lock(&reg_lock);
    struct table *old = atomic_load(&current);
    for (size_t i = 0; old && i < old->nobjects; i++)
        if (old->objects[i] == from) { /* every file of an object registers it */
            pthread_mutex_unlock(&reg_lock);
            return;
        }
    size_t need = (old ? old->n : 0) + (size_t)(to - from);
    size_t cap = 64;
    while (cap < 2 * need) cap *= 2;
    struct table *t = calloc(1, sizeof *t);
    struct seq *slot = t ? calloc(cap, sizeof *slot) : NULL;
    if (!slot) {
        free(t);
        pthread_mutex_unlock(&reg_lock);
        tk__fail(-ENOMEM,
                 "tk_aseq_register: out of memory: these sequences are not rolled forward");
        return;
    }
    t->cap = cap;
    t->slot = slot;
    t->prev = old;
    if (old) {
        memcpy(t->objects, old->objects, sizeof t->objects);
        t->nobjects = old->nobjects;
    }
    if (t->nobjects < sizeof t->objects / sizeof t->objects[0]) t->objects[t->nobjects++] = from;
    if (old)
        for (size_t i = 0; i < old->cap; i++)
            if (old->slot[i].end) *insert(t, old->slot[i].end) = old->slot[i];
    /* the end records first (they say the kind), then the entries */
    for (int pass = 0; pass < 2; pass++) {
        for (const struct tk_aseq_rec *r = from; r < to; r++) {
            bool entry = r->kind == TK_ASEQ_REC_DYN_ENTRY || r->kind == TK_ASEQ_REC_HYB_ENTRY;
            if (entry != (pass == 1)) continue;
            uintptr_t at = rec_addr(&r->at), end = rec_addr(&r->end);
            struct seq *s = insert(t, end);
            if (!entry) {
                if (s->kind) continue; /* the same object registered twice */
                s->kind = r->kind;
                s->last = at;
                s->prio = r->prio;
                s->line = r->line;
                s->file = (const char *)rec_addr(&r->file);
                s->safe = true;
                continue;
            }
            if (!s->kind) {
                /* an entry whose end is no sequence's: the compiler split
                 * or duplicated the end of a sequence */
                s->kind = -1;
                s->line = r->line;
                s->file = (const char *)rec_addr(&r->file);
                s->safe = true;
                unsafe(s, "its end was duplicated or moved by the compiler%.0lu", 0);
                continue;
            }
            if (s->start && s->start != at) {
                unsafe(s, "two entries share its end (the compiler duplicated it)%.0lu", 0);
                continue;
            }
            s->start = at;
            s->prio = r->prio;
        }
    }
    for (size_t i = 0; i < t->cap; i++) {
        struct seq *s = &t->slot[i];
        if (!s->end || s->kind <= 0 || !s->safe || s->why[0]) continue;
        if (!s->start) {
            unsafe(s, "its entry is missing%.0lu", 0);
            continue;
        }
        /* Dyn/Jump: anything may be inside; the others once each */
        if (s->kind == TK_ASEQ_REC_DYN_JUMP || s->checked) continue;
        check(s);
        s->checked = true;
    }
    atomic_store_explicit(&current, t, memory_order_release);
    pthread_mutex_unlock(&reg_lock);
}

int tk_aseq_check(int fd)
{
    struct table *t = atomic_load(&current);
    int n = 0;
    for (size_t i = 0; t && i < t->cap; i++) {
        const struct seq *s = &t->slot[i];
        if (!s->end || s->safe) continue;
        n++;
        if (fd >= 0)
            dprintf(fd, "%s:%d: atomic sequence is not safe to roll forward: %s\n",
                    s->file ? s->file : "?", s->line, s->why);
    }
    return n;
}

/* ---- per-thread state ------------------------------------------------------ */

static __thread struct aseq_priv priv __attribute__((tls_model("initial-exec")));

/* [signal-safe] */
struct aseq_priv *tk__aseq_priv(void)
{
    return &priv;
}

void tk_aseq_get_stats(tk_aseq_stats *st)
{
    if (!st) return;
    struct aseq_priv *p = tk__aseq_priv();
    memset(st, 0, sizeof *st);
    st->signals = p->n_signals;
    st->at_once = p->n_at_once;
    st->rollforwards = p->n_rollforwards;
    for (int i = 0; i < 3; i++) st->rolled[i] = p->n_rolled[i];
    st->refused = p->n_refused;
    st->held = p->n_held;
    struct table *t = atomic_load(&current);
    for (size_t i = 0; t && i < t->cap; i++)
        if (t->slot[i].end && t->slot[i].kind > 0) st->sequences++;
    st->unsafe = atomic_load(&n_unsafe);
}

/* ---- signals ------------------------------------------------------------- */

struct action {
    _Atomic(tk_aseq_handler) fn;
    int flags;     /* its sigaction flags */
    sigset_t mask; /* the handler's mask, with sig unless SA_NODEFER */
    int prio;
};
static struct action actions[NSIG];
static sigset_t managed; /* every signal installed here */
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;

static void *fault_page;
static tk_region *fault_region;

static uint64_t bit(int sig)
{
    return 1ull << (sig - 1);
}

/* Keeps the signal for later, with the mask its handler must run with,
 * and makes the return from dispatch() block every managed signal.
 * [signal-safe] */
static void hold(struct aseq_priv *p, int sig, const siginfo_t *si, ucontext_t *uc)
{
    p->sig = sig;
    p->info = *si;
    p->orig_mask = uc->uc_sigmask;
    sigorset(&p->handler_mask, &uc->uc_sigmask, &actions[sig].mask);
    sigorset(&uc->uc_sigmask, &uc->uc_sigmask, &managed);
}

/* Runs the held signal's handler with its mask, then puts the mask the
 * sequence had back (uc: NULL to set it now, else the frame to return
 * through).  [signal-safe] */
static void run_held(struct aseq_priv *p, ucontext_t *handler_uc, ucontext_t *frame)
{
    int sig = p->sig;
    siginfo_t info = p->info;
    sigset_t orig = p->orig_mask;
    p->sig = 0;
    tk__sigmask(SIG_SETMASK, &p->handler_mask, NULL);
    tk_aseq_handler fn = atomic_load(&actions[sig].fn);
    if (fn) fn(sig, &info, handler_uc);
    if (frame)
        frame->uc_sigmask = orig;
    else
        tk__sigmask(SIG_SETMASK, &orig, NULL);
}

/* Called by the landing with the registers the sequence ended with; runs
 * the held handler and returns where to resume.  [signal-safe] */
uintptr_t tk__aseq_land(uint64_t *saved, void *xsave)
{
    struct aseq_priv *p = tk__aseq_priv();
    uintptr_t resume = p->resume;
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    tk__aseq_fill_context(&uc, saved, xsave, resume);
    uc.uc_sigmask = p->orig_mask;
    p->rolling = false;
    run_held(p, &uc, NULL);
    return resume;
}

/* Dyn/Fault: the end's load from the inaccessible page.  [signal-safe] */
static tk_action on_fault_page(const tk_fault *f, void *arg)
{
    struct aseq_priv *p = tk__aseq_priv();
    ucontext_t *uc = f->ucontext;
    if (!uc || !p->rolling) return TK_DECLINE;
    tk__aseq_self.false_or_fault = &tk__aseq_false;
    tk__aseq_self.in_as = 0;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)p->resume; /* skip the load and the store */
    uc->uc_mcontext.gregs[REG_R11] = tk__aseq_false;    /* what the load would have loaded */
    p->rolling = false;
    run_held(p, uc, uc);
    return TK_RESUME;
}

/* [signal-safe] */
static void dispatch(int sig, siginfo_t *si, void *ucv)
{
    tk__asan_signal_frame(si, ucv);
    int saved_errno = errno;
    ucontext_t *uc = ucv;
    struct aseq_priv *p = tk__aseq_priv();
    struct tk_aseq_thread *t = &tk__aseq_self;
    struct action *a = &actions[sig];
    p->n_signals++;
    greg_t *g = uc->uc_mcontext.gregs;
    uintptr_t pc = (uintptr_t)g[REG_RIP];

    if (sig < 65 && (t->vmask & bit(sig))) {
        /* held by tk_aseq_sigprocmask: the kernel holds the rest */
        if (!p->vsig) {
            p->vsig = sig;
            p->vinfo = *si;
            p->n_held++;
            t->pending_unblock |= t->vmask;
            for (int s = 1; s < 65 && s < NSIG; s++)
                if ((t->vmask & bit(s)) && sigismember(&managed, s)) sigaddset(&uc->uc_sigmask, s);
            goto out;
        }
    }
    if (!p->rolling) {
        const struct seq *s = NULL;
        int kind = 0;
        if (t->in_as) {
            s = lookup((uintptr_t)t->dest);
            if (s && s->kind == TK_ASEQ_REC_DYN_JUMP) kind = TK_ASEQ_REC_DYN_JUMP;
            if (s && s->kind == TK_ASEQ_REC_DYN_FAULT && pc >= s->start && pc <= s->last)
                kind = TK_ASEQ_REC_DYN_FAULT;
            /* no record (an object never registered): kind stays 0, at once */
            if (kind && t->in_as - 1 < a->prio) kind = 0;
        } else {
            s = lookup((uintptr_t)g[REG_R11]);
            if (s && s->kind == TK_ASEQ_REC_HYB_JUMP && pc >= s->start && pc <= s->last &&
                s->prio >= a->prio)
                kind = TK_ASEQ_REC_HYB_JUMP;
        }
        if (kind && s && !s->safe) {
            p->n_refused++;
            kind = 0;
        }
        if (kind) {
            p->n_rollforwards++;
            p->rolling = true;
            hold(p, sig, si, uc);
            p->n_rolled[kind == TK_ASEQ_REC_DYN_JUMP ? 0 : kind == TK_ASEQ_REC_DYN_FAULT ? 1 : 2]++;
            if (kind == TK_ASEQ_REC_HYB_JUMP) {
                p->resume = (uintptr_t)g[REG_R11];
                g[REG_R11] = (greg_t)(uintptr_t)tk__aseq_landing;
            } else if (kind == TK_ASEQ_REC_DYN_JUMP) {
                p->resume = (uintptr_t)t->dest;
                t->dest = (void *)(uintptr_t)tk__aseq_landing;
            } else {
                p->resume = (uintptr_t)t->dest;
                t->false_or_fault = fault_page;
                /* at the load itself, r11 already holds the old pointer */
                if (pc == s->last) g[REG_R11] = (greg_t)(uintptr_t)fault_page;
            }
            goto out;
        }
    }
    p->n_at_once++;
    tk_aseq_handler fn = atomic_load(&a->fn);
    if (fn) {
        /* dispatch() runs with every managed signal blocked (one landing
         * now must not run inside the sequence this one interrupted); the
         * handler runs with its own mask */
        sigset_t m = uc->uc_sigmask;
        sigorset(&m, &m, &a->mask);
        /* the interrupted code may be between a Dyn sequence's two
         * registration stores; the handler's own sequences overwrite them */
        void *dest = t->dest;
        long in_as = t->in_as;
        tk__sigmask(SIG_SETMASK, &m, NULL);
        fn(sig, si, ucv);
        t->dest = dest;
        t->in_as = in_as;
    }
out:
    errno = saved_errno;
}

static bool installable(int sig)
{
    return sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP && sig != SIGSEGV &&
           sig != SIGBUS && sig != SIGILL && sig != SIGFPE && sig != SIGTRAP;
}

static int ensure_fault_page(void)
{
    if (fault_region) return 0;
    long ps = sysconf(_SC_PAGESIZE);
    void *pg = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) return tk__fail(-errno, "tk_aseq_signal: cannot map the Dyn/Fault page");
    tk_region_config rc = {
        .addr = pg, .len = (size_t)ps, .handler = on_fault_page, .mech = TK_MECH_POSIX};
    tk_region *r;
    int err = tk_region_create(&rc, &r);
    if (!err) err = tk_protect(r, pg, (size_t)ps, TK_PROT_NONE);
    if (err) {
        munmap(pg, (size_t)ps);
        return err;
    }
    fault_page = pg;
    fault_region = r;
    return 0;
}

int tk_aseq_signal(int sig, tk_aseq_handler fn, const sigset_t *mask, int flags, int prio)
{
    if (!installable(sig))
        return tk__failf(-EINVAL,
                         "tk_aseq_signal: signal %d cannot be deferred (SIGKILL, SIGSTOP and the "
                         "synchronous SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP cannot)",
                         sig);
    if (flags & ~(SA_RESTART | SA_ONSTACK | SA_NODEFER))
        return tk__fail(-EINVAL, "tk_aseq_signal: flags may be SA_RESTART, SA_ONSTACK, SA_NODEFER");
    if (prio < 0 || prio > TK_ASEQ_PRIO_MAX)
        return tk__failf(-EINVAL, "tk_aseq_signal: priority %d is not in 0..%d", prio,
                         TK_ASEQ_PRIO_MAX);
    pthread_mutex_lock(&sig_lock);
    int err = fn ? ensure_fault_page() : 0;
    if (err) {
        pthread_mutex_unlock(&sig_lock);
        return err;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (fn) {
        sigset_t m;
        sigemptyset(&m);
        if (mask) m = *mask;
        if (!(flags & SA_NODEFER)) sigaddset(&m, sig);
        actions[sig].mask = m;
        actions[sig].prio = prio;
        atomic_store(&actions[sig].fn, fn);
        sigaddset(&managed, sig);
        sa.sa_sigaction = dispatch;
        sa.sa_flags = SA_SIGINFO | (flags & (SA_RESTART | SA_ONSTACK));
        actions[sig].flags = sa.sa_flags;
    } else {
        sa.sa_handler = SIG_DFL;
        sigdelset(&managed, sig);
        atomic_store(&actions[sig].fn, NULL);
    }
    /* dispatch() runs with every managed signal blocked: each one's
     * sa_mask is the whole managed set */
    sa.sa_mask = managed;
    if (sigaction(sig, &sa, NULL) < 0)
        err = tk__failf(-errno, "tk_aseq_signal: sigaction: %s", strerror(errno));
    for (int s2 = 1; s2 < NSIG && !err; s2++) {
        if (s2 == sig || !sigismember(&managed, s2)) continue;
        struct sigaction o;
        memset(&o, 0, sizeof o);
        o.sa_sigaction = dispatch;
        o.sa_flags = actions[s2].flags;
        o.sa_mask = managed;
        sigaction(s2, &o, NULL);
    }
    pthread_mutex_unlock(&sig_lock);
    return err;
}

/* ---- user-level sigprocmask ------------------------------------------------ */

/* glibc's sigset_t keeps signal sig in bit sig - 1 of its first word */
_Static_assert(sizeof(((sigset_t *)0)->__val[0]) == 8, "glibc's x86-64 sigset_t");

int tk_aseq_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    struct tk_aseq_thread *t = &tk__aseq_self;
    uint64_t prev = t->vmask;
    if (old) {
        memset(old, 0, sizeof *old);
        old->__val[0] = prev;
    }
    if (!set) return 0;
    uint64_t m = set->__val[0];
    switch (how) {
    case SIG_BLOCK:
        __asm__ volatile("orq %1, %0" : "+m"(t->vmask) : "r"(m)); /* one instruction: signal-safe */
        break;
    case SIG_UNBLOCK:
        __asm__ volatile("andq %1, %0" : "+m"(t->vmask) : "r"(~m));
        break;
    case SIG_SETMASK:
        __asm__ volatile("movq %1, %0" : "=m"(t->vmask) : "r"(m));
        break;
    default:
        return tk__fail(-EINVAL, "tk_aseq_sigprocmask: how must be SIG_BLOCK, SIG_UNBLOCK or "
                                 "SIG_SETMASK");
    }
    if (__builtin_expect(t->pending_unblock & ~t->vmask, 0)) tk__aseq_unblock();
    return 0;
}

/* The slow path of tk_aseq_sigprocmask: signals were held while masked
 * here and are now unmasked.  Runs the one dispatch() kept, then lowers
 * the kernel's mask so it delivers the rest.  [signal-safe] */
void tk__aseq_unblock(void)
{
    struct tk_aseq_thread *t = &tk__aseq_self;
    struct aseq_priv *p = tk__aseq_priv();
    sigset_t all, cur;
    sigfillset(&all);
    tk__sigmask(SIG_BLOCK, &all, &cur);
    uint64_t lower = t->pending_unblock & ~t->vmask;
    t->pending_unblock &= t->vmask;
    for (int s = 1; s < 65 && s < NSIG; s++)
        if ((lower & bit(s)) && sigismember(&managed, s)) sigdelset(&cur, s);
    int sig = p->vsig;
    if (sig && !(t->vmask & bit(sig))) {
        siginfo_t info = p->vinfo;
        p->vsig = 0;
        sigset_t hm = cur;
        sigorset(&hm, &hm, &actions[sig].mask);
        tk__sigmask(SIG_SETMASK, &hm, NULL);
        tk_aseq_handler fn = atomic_load(&actions[sig].fn);
        if (fn) {
            ucontext_t uc;
            getcontext(&uc);
            fn(sig, &info, &uc);
        }
    }
    tk__sigmask(SIG_SETMASK, &cur, NULL);
}
