// kernel/cxx/rt/eh.cpp - the module's C++ exception runtime: __cxa_throw and
// the catch entry points g++ calls, and the walk up the stack that finds
// the handler, reading the module's own .eh_frame (its FDEs sorted into a
// table at load: a module has no .eh_frame_hdr) with trapkit's CFI reader
// (cxx/cfi.cpp) and the call-site tables g++ writes (.gcc_except_table,
// laid out as libstdc++'s personality routine reads them).
//
// The seed's three optimisations are switches (tkcxx_opts): one walk that
// runs cleanups as it meets them, instead of a search walk and a second,
// cleaning one; the raise in-lined into __cxa_throw, so the walk starts at
// the thrower; and the frame-state cache, each call site's frame state and
// call-site record kept by PC.
//
// Calls into the module's C++ are one at a time (tkcxx_call, module.c's
// mutex): the exceptions being handled are the module's, not a thread's.
#include <new>
#include <string.h>
#include <tkcxx.h>
#include <typeinfo>

#include "../../../cxx/lsda.hpp"
#include "../../../cxx/unwind.hpp"
#include "abi.hpp"
#include "rt.hpp"

using namespace tk::unw;

struct tkcxx_opts tkcxx_opts = {1, 1, 1, 0};
uint64_t tkcxx_stamps[TKCXX_T_N];

namespace
{

inline void stamp(int at)
{
    if (!tkcxx_opts.trace) return;
    uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    tkcxx_stamps[at] = static_cast<uint64_t>(hi) << 32 | lo;
}

// ---- the exception ----
// What precedes the thrown object (16-byte aligned): the pointer the
// landing pads get, and pass to __cxa_begin_catch and _Unwind_Resume, is
// the header's.
struct exc {
    const std::type_info *type;
    void (*dtor)(void *);
    exc *next_caught; // the next older exception being handled
    exc *live_prev, *live_next;
    unsigned long serial; // (which boundary it belongs to)
    int handlers;         // handlers active (negative: rethrown)
    int selector;         // two walks: the handler's selector
    uint64_t target_sp;   // two walks: the handler frame's stack pointer
    void *adjusted;       // what the handler receives
    bool cleaning;        // two walks: the second is under way
};
constexpr size_t HDR = (sizeof(exc) + 15) & ~size_t{15};
void *object(exc *e)
{
    return reinterpret_cast<char *>(e) + HDR;
}
exc *header(void *obj)
{
    return reinterpret_cast<exc *>(static_cast<char *>(obj) - HDR);
}

exc *caught;       // innermost first
int uncaught;      // thrown, not yet caught
exc *live;         // every exception allocated and not freed
long n_exceptions; // (its length)
unsigned long serial;
tkcxx_counts counts;

// The registers eh.S saves, and what tkcxx_install loads.
struct regs {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip;
};
struct target {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip, rax, rdx;
};

// ---- the boundary (tkcxx_call) ----
struct jmp {
    uint64_t w[8];
};
struct boundary {
    jmp j;
    boundary *prev;
    exc *caught;
    int uncaught;
    unsigned long serial;
    int why; // what tkcxx_longjmp brings
};
boundary *top;

} // namespace

// eh.S
extern "C" {
[[noreturn]] void tkcxx_install(const target *);
int tkcxx_setjmp(jmp *) __attribute__((returns_twice));
[[noreturn]] void tkcxx_longjmp(jmp *);
[[noreturn]] void tkcxx_raise(exc *);
}

namespace
{

// ---- the module's FDEs, sorted ----
struct fde_entry {
    uintptr_t start, end;
    const uint8_t *fde;
};
fde_entry *fdes;
size_t n_fdes;

const uint8_t *find_fde(uintptr_t pc)
{
    size_t lo = 0, hi = n_fdes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fdes[mid].end <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n_fdes && fdes[lo].start <= pc && pc < fdes[lo].end) return fdes[lo].fde;
    return nullptr;
}

// ---- a call site: its frame state and what its LSDA says ----
struct site : call_site {
    uintptr_t pc = 0;
    frame_state fs;
};
constexpr unsigned CACHE_BITS = 8;
site cache[1u << CACHE_BITS];

extern "C" int __gxx_personality_v0();

bool compute_site(uintptr_t pc, site *s)
{
    const uint8_t *fde = find_fde(pc);
    if (!fde || !fde_state(fde, pc, &s->fs)) return false;
    s->pc = pc;
    s->what = W_NOTHING;
    if (s->fs.lsda && s->fs.personality == reinterpret_cast<uintptr_t>(&__gxx_personality_v0))
        return decode_lsda(reinterpret_cast<const uint8_t *>(s->fs.lsda), s->fs.func_start, pc, s);
    return true;
}

// The site of pc: from the cache, or computed (and kept).
const site *site_for(uintptr_t pc, site *scratch)
{
    if (!tkcxx_opts.cache) {
        counts.cache_misses++;
        return compute_site(pc, scratch) ? scratch : nullptr;
    }
    site &e = cache[(pc * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS)];
    if (e.pc == pc) {
        counts.cache_hits++;
        return &e;
    }
    counts.cache_misses++;
    if (!compute_site(pc, scratch)) return nullptr;
    if (!e.pc) counts.frames_cached++;
    e = *scratch;
    return &e;
}

// The handler among the site's actions for e: its selector (> 0), 0 for
// a cleanup only, -1 for none; *adjusted gets what the handler receives.
int match_actions(const site &s, exc *e, void **adjusted, bool *terminate)
{
    reader r{s.action};
    bool cleanup = false;
    size_t size = encoded_size(s.ttype_enc);
    for (;;) {
        int64_t filter = r.sleb();
        const uint8_t *at = r.p;
        int64_t disp = r.sleb();
        if (filter > 0) {
            reader t{s.ttype - static_cast<size_t>(filter) * size};
            uintptr_t ti;
            if (!t.ptr(s.ttype_enc, 0, 0, &ti)) {
                *terminate = true;
                return -1;
            }
            void *obj = object(e);
            if (tkcxx::catches(reinterpret_cast<const std::type_info *>(ti), e->type, &obj)) {
                *adjusted = obj;
                return static_cast<int>(filter);
            }
        } else if (filter == 0) {
            cleanup = true;
        } else { // an exception specification (throw(...)): none allowed here
            *terminate = true;
            return -1;
        }
        if (disp == 0) break;
        r.p = at + disp;
    }
    return cleanup ? 0 : -1;
}

[[noreturn]] void escape(int why);

// The landing pad entered with the frame's registers; the stack pointer
// is the call site's with the arguments it pushed (DW_CFA_GNU_args_size)
// popped, as after the call.
[[noreturn]] void install(const context &c, uintptr_t lp, exc *e, int selector, int64_t args_size)
{
    target t = {c.reg[RBX],
                c.reg[RBP],
                c.reg[R12],
                c.reg[R13],
                c.reg[R14],
                c.reg[R15],
                c.reg[RSP] + static_cast<uint64_t>(args_size),
                lp,
                reinterpret_cast<uint64_t>(e),
                static_cast<uint64_t>(selector)};
    tkcxx_install(&t);
}

context from_regs(const regs *r)
{
    context c;
    const uint64_t v[] = {r->rbx, r->rbp, r->r12, r->r13, r->r14, r->r15, r->rsp, r->rip};
    const int at[] = {RBX, RBP, R12, R13, R14, R15, RSP, RA};
    for (int i = 0; i < 8; i++) {
        c.reg[at[i]] = v[i];
        c.valid[at[i]] = true;
    }
    return c;
}

[[noreturn]] void no_handler(exc *e)
{
    char line[160];
    tkk_snprintf(line, sizeof line, "tkcxx: an exception of type %s left the module's C++ code",
                 e->type->name());
    tkk_warn(line);
    escape(-71); // -EPROTO
}

// The search walk: the handler's frame (its stack pointer) and selector;
// false if none; a function that may not throw is std::terminate.
bool search(exc *e, context c)
{
    site scratch;
    for (;;) {
        uintptr_t pc = c.reg[RA] - (c.pc_exact ? 0 : 1);
        const site *s = site_for(pc, &scratch);
        if (!s) return false;
        if (s->what == W_TERMINATE) {
            tkk_warn("tkcxx: an exception left a function that may not throw (noexcept)");
            std::terminate();
        }
        if (s->what == W_ACTIONS) {
            void *adj;
            bool term = false;
            int sel = match_actions(*s, e, &adj, &term);
            if (term) std::terminate();
            if (sel > 0) {
                e->target_sp = c.reg[RSP];
                e->selector = sel;
                e->adjusted = adj;
                return true;
            }
        }
        uint64_t cfa;
        if (!step(c, s->fs, &cfa)) return false;
    }
}

// The walk from the frame c describes: to a landing pad (a handler, or a
// cleanup that resumes the walk by _Unwind_Resume).
[[noreturn]] void walk(exc *e, context c)
{
    site scratch;
    for (;;) {
        uintptr_t pc = c.reg[RA] - (c.pc_exact ? 0 : 1);
        const site *s = site_for(pc, &scratch);
        if (!s) no_handler(e);
        counts.frames++;
        if (s->what == W_TERMINATE) {
            tkk_warn("tkcxx: an exception left a function that may not throw (noexcept)");
            std::terminate();
        }
        if (s->what == W_ACTIONS || s->what == W_CLEANUP) {
            if (!e->cleaning) { // one walk: match as it goes
                void *adj = nullptr;
                bool term = false;
                int sel = s->what == W_CLEANUP ? 0 : match_actions(*s, e, &adj, &term);
                if (term) std::terminate();
                if (sel > 0) {
                    e->adjusted = adj;
                    stamp(TKCXX_T_INSTALL);
                }
                if (sel >= 0) install(c, s->lp, e, sel, s->fs.args_size);
            } else if (c.reg[RSP] == e->target_sp) { // the second walk's handler
                e->cleaning = false;
                stamp(TKCXX_T_INSTALL);
                install(c, s->lp, e, e->selector, s->fs.args_size);
            } else { // the second walk: the cleanups on the way
                void *adj;
                bool term = false;
                if (s->what == W_CLEANUP || match_actions(*s, e, &adj, &term) == 0)
                    install(c, s->lp, e, 0, s->fs.args_size);
            }
        }
        uint64_t cfa;
        if (!step(c, s->fs, &cfa)) no_handler(e);
    }
}

[[noreturn]] void raise(exc *e, context c)
{
    counts.throws++;
    uncaught++;
    stamp(TKCXX_T_RAISE);
    if (!tkcxx_opts.one_phase) {
        if (!search(e, c)) no_handler(e);
        e->cleaning = true;
    } else {
        e->cleaning = false;
    }
    stamp(TKCXX_T_FOUND);
    walk(e, c);
}

void free_exception(exc *e)
{
    (e->live_prev ? e->live_prev->live_next : live) = e->live_next;
    if (e->live_next) e->live_next->live_prev = e->live_prev;
    n_exceptions--;
    tkk_free(e);
}

// Back to the innermost boundary: the exceptions thrown since it began
// are freed (their objects are not destroyed: the frames they would be
// destroyed in are abandoned too).
[[noreturn]] void escape(int why)
{
    boundary *b = top;
    if (!b) tkk_bug("tkcxx: an exception or std::terminate() outside a module call");
    exc *e = live;
    while (e) {
        exc *next = e->live_next;
        if (e->serial > b->serial) free_exception(e);
        e = next;
    }
    caught = b->caught;
    uncaught = b->uncaught;
    b->why = why;
    tkcxx_longjmp(&b->j);
}

} // namespace

// ---- the entry points ----
extern "C" {

int __gxx_personality_v0()
{
    // (named by every CIE of the module's C++ code; the walk reads the
    // tables itself and never calls it)
    tkk_warn("tkcxx: __gxx_personality_v0 called");
    return 0;
}

void *__cxa_allocate_exception(size_t size) noexcept
{
    stamp(TKCXX_T_ALLOC0);
    exc *e = static_cast<exc *>(tkk_alloc(HDR + size));
    if (!e) {
        tkk_warn("tkcxx: no memory for an exception");
        std::terminate();
    }
    memset(e, 0, HDR);
    e->serial = ++serial;
    e->live_next = live;
    if (live) live->live_prev = e;
    live = e;
    n_exceptions++;
    stamp(TKCXX_T_ALLOC1);
    return object(e);
}

void __cxa_free_exception(void *obj) noexcept
{
    free_exception(header(obj));
}

[[noreturn]] void tkcxx_throw_core(void *obj, std::type_info *type, void (*dtor)(void *),
                                   const regs *r)
{
    exc *e = header(obj);
    e->type = type;
    e->dtor = dtor;
    raise(e, from_regs(r));
}

[[noreturn]] void tkcxx_raise_core(exc *e, const regs *r)
{
    raise(e, from_regs(r));
}

// __cxa_throw with inline_raise off: the raise is a call of its own, and
// the walk starts in this function's frame.
[[noreturn, gnu::noinline]] void tkcxx_throw_outlined(void *obj, std::type_info *type,
                                                      void (*dtor)(void *))
{
    exc *e = header(obj);
    e->type = type;
    e->dtor = dtor;
    tkcxx_raise(e);
}

[[noreturn]] void tkcxx_resume_core(exc *e, const regs *r)
{
    walk(e, from_regs(r));
}

[[noreturn]] void tkcxx_rethrow_core(const regs *r)
{
    exc *e = caught;
    if (!e) {
        tkk_warn("tkcxx: throw; with no exception being handled");
        std::terminate();
    }
    e->handlers = -e->handlers;
    raise(e, from_regs(r));
}

void *__cxa_get_exception_ptr(void *ue) noexcept
{
    return static_cast<exc *>(ue)->adjusted;
}

void *__cxa_begin_catch(void *ue) noexcept
{
    stamp(TKCXX_T_BEGIN);
    exc *e = static_cast<exc *>(ue);
    int h = e->handlers;
    e->handlers = h < 0 ? -h + 1 : h + 1;
    if (e != caught) {
        e->next_caught = caught;
        caught = e;
    }
    uncaught--;
    return e->adjusted;
}

void __cxa_end_catch()
{
    exc *e = caught;
    if (!e) return;
    int h = e->handlers;
    if (h < 0) { // rethrown: it lives on, no longer handled here
        if (++h == 0) caught = e->next_caught;
    } else if (--h == 0) {
        caught = e->next_caught;
        if (e->dtor) e->dtor(object(e));
        free_exception(e);
        stamp(TKCXX_T_END);
        return;
    }
    e->handlers = h;
    stamp(TKCXX_T_END);
}

std::type_info *__cxa_current_exception_type() noexcept
{
    return caught ? const_cast<std::type_info *>(caught->type) : nullptr;
}

int __cxa_uncaught_exceptions() noexcept
{
    return uncaught;
}

// ---- the module's side ----
void tkcxx_get_counts(struct tkcxx_counts *c)
{
    *c = counts;
    c->news = tkcxx::news;
    c->exceptions = n_exceptions;
}

void tkcxx_flush_cache(void)
{
    memset(static_cast<void *>(cache), 0, sizeof cache);
    counts.frames_cached = 0;
}

int tkcxx_call(int (*fn)(void *), void *arg)
{
    boundary b;
    b.prev = top;
    b.caught = caught;
    b.uncaught = uncaught;
    b.serial = serial;
    b.why = 0;
    top = &b;
    if (tkcxx_setjmp(&b.j)) {
        top = b.prev;
        return b.why;
    }
    int r;
    try {
        r = fn(arg);
    } catch (...) {
        char line[160];
        tkk_snprintf(line, sizeof line, "tkcxx: an exception of type %s was not caught",
                     __cxa_current_exception_type()->name());
        tkk_warn(line);
        r = -71; // -EPROTO
    }
    top = b.prev;
    return r;
}

// The module's .eh_frame, between two symbols kcxx.lds defines, the end
// a zero word.
extern const uint8_t __tk_eh_frame_start[], __tk_eh_frame_end[];

int tkcxx_load(void)
{
    // count the FDEs, then sort them by address
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        const uint8_t *p = __tk_eh_frame_start;
        while (p + 4 <= __tk_eh_frame_end) {
            uint32_t len;
            memcpy(&len, p, 4);
            if (len == 0) break;
            if (len == 0xffffffff) {
                tkk_print("tkcxx: 64-bit DWARF in .eh_frame");
                return -22;
            }
            uint32_t id;
            memcpy(&id, p + 4, 4);
            uintptr_t start, range;
            if (id != 0 && fde_range(p, &start, &range) && range) {
                if (pass == 1) fdes[n] = {start, start + range, p};
                n++;
            }
            p += 4 + len;
        }
        if (pass == 0) {
            fdes = static_cast<fde_entry *>(tkk_alloc((n ? n : 1) * sizeof(fde_entry)));
            if (!fdes) return -12;
        }
    }
    for (size_t i = 1; i < n; i++) { // (insertion sort: g++ writes them nearly in order)
        fde_entry x = fdes[i];
        size_t j = i;
        while (j > 0 && fdes[j - 1].start > x.start) {
            fdes[j] = fdes[j - 1];
            j--;
        }
        fdes[j] = x;
    }
    n_fdes = n;
    tkcxx_flush_cache();
    int r = tkcxx::run_constructors();
    if (r) {
        tkk_free(fdes);
        fdes = nullptr;
        n_fdes = 0;
    }
    return r;
}

void tkcxx_unload(void)
{
    tkcxx::run_destructors();
    tkk_free(fdes);
    fdes = nullptr;
    n_fdes = 0;
}

} // extern "C"

namespace std
{
[[noreturn]] void terminate() noexcept
{
    tkk_warn("tkcxx: std::terminate() called");
    escape(-125); // -ECANCELED
}
} // namespace std
