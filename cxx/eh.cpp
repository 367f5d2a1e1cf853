// cxx/eh.cpp - trapkit's C++ throw runtime (libtrapkit_eh.so; see
// include/trapkit/eh.h for what it replaces and how it behaves).
//
// The walk: from the thrower's registers, frame by frame, look up the
// call site's entry in the PC table (computed on a miss: the frame state
// by cxx/unwind.cpp, the call-site record from the function's LSDA, as
// the Itanium C++ ABI and libstdc++'s personality routine define them),
// match the exception against the site's catch clauses, and either enter
// a landing pad (a catch clause, or destructors that end by calling
// _Unwind_Resume, which continues the walk from there) or step to the
// caller.  Matching uses std::type_info's own __do_catch, so classes,
// pointers and qualification conversions match as libstdc++ matches them.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <unwind.h>

#include <cxxabi.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <typeinfo>

#include "trapkit/eh.h"
#include "lsda.hpp"
#include "unwind.hpp"

using namespace tk::unw;

#define TK_EXPORT __attribute__((visibility("default")))

// AddressSanitizer's runtime, when the program has one: the stack below a
// handler is unpoisoned before a throw abandons it (its own __cxa_throw
// interceptor does this; this runtime may be found ahead of it).
extern "C" void __asan_handle_no_return() __attribute__((weak));

extern "C" _Unwind_Reason_Code __gxx_personality_v0(int, _Unwind_Action, _Unwind_Exception_Class,
                                                    _Unwind_Exception *, _Unwind_Context *);

namespace
{

// ---- libstdc++'s exception header (libsupc++/unwind-cxx.h) ----
struct cxa_exception {
    std::type_info *exceptionType; // a dependent exception: its primary exception
    void (*exceptionDestructor)(void *);
    void (*unexpectedHandler)();
    void (*terminateHandler)();
    cxa_exception *nextException;
    int handlerCount;
    int handlerSwitchValue;
    const unsigned char *actionRecord;
    const unsigned char *languageSpecificData;
    _Unwind_Ptr catchTemp;
    void *adjustedPtr;
    _Unwind_Exception unwindHeader;
};
struct cxa_refcounted_exception {
    int referenceCount;
    cxa_exception exc;
};
struct cxa_eh_globals {
    cxa_exception *caughtExceptions;
    unsigned int uncaughtExceptions;
};
static_assert(offsetof(cxa_exception, unwindHeader) == 80, "libstdc++'s __cxa_exception");
static_assert(sizeof(cxa_refcounted_exception) == 128, "libstdc++'s __cxa_refcounted_exception");

constexpr uint64_t GXX_CLASS = 0x474e5543432b2b00ull; // "GNUCC++\0"; "\1": dependent

bool is_gxx(const _Unwind_Exception *ue)
{
    return (ue->exception_class >> 8) == (GXX_CLASS >> 8) && (ue->exception_class & 0xff) <= 1;
}
cxa_exception *header_of(_Unwind_Exception *ue)
{
    return reinterpret_cast<cxa_exception *>(reinterpret_cast<char *>(ue) -
                                             offsetof(cxa_exception, unwindHeader));
}
// The thrown object (a dependent exception's primary one) and its type.
void *object_of(_Unwind_Exception *ue)
{
    if ((ue->exception_class & 0xff) == 1) return header_of(ue)->exceptionType; // primaryException
    return ue + 1;
}
const std::type_info *type_of(void *obj)
{
    return (reinterpret_cast<cxa_exception *>(obj) - 1)->exceptionType;
}

// private_2 of an exception this runtime is propagating (private_1 stays 0,
// which is what libgcc's copy expects of an exception that is not forced).
char marker;
_Unwind_Word our_mark()
{
    return reinterpret_cast<_Unwind_Word>(&marker);
}

// ---- per-thread state: counts, and the exceptions whose cleanups run ----
// The counts are kept per thread and moved into `ended` when the thread
// ends (by a pthread key's destructor, which glibc runs after every C++
// thread_local destructor, so a throw in one of those is counted too).
// A thread is in `live` from its first throw until then, so the line
// written at exit can add the threads still running; a move zeroes the
// thread's counts, so nothing is counted twice whatever runs first.
// The lock is never held by code that can fault, and no throw starts in
// a signal handler (cxx/fault.cpp raises after the handler returns).

// An exception that entered a landing pad for destructors (cleanups) in
// the frame whose CFA is kept, and has not resumed since.
struct cleanup_frame {
    _Unwind_Exception *ue;
    uint64_t cfa;
};
constexpr unsigned MAX_CLEANUPS = 8; // exceptions thrown inside destructors, nested

struct thread_data {
    tk_eh_stats s;            // counts since the last move (generation unused)
    thread_data *prev, *next; // in `live` while linked
    bool registered;          // set up (the key holds this: moved when the thread ends)
    bool linked;              // in `live`
    bool moved;               // moved once: the thread is ending
    unsigned ncleanups;       // innermost last
    cleanup_frame cleanups[MAX_CLEANUPS];
};
// Zero-initialized, no constructor or destructor.  initial-exec: the
// runtime is linked or preloaded, so it is in the static TLS block, and an
// access is one instruction, not a call to __tls_get_addr.
__attribute__((tls_model("initial-exec"))) thread_local thread_data local;

std::mutex stats_lock; // guards ended, live and every thread's links
tk_eh_stats ended{};
thread_data *live;
pthread_key_t move_key;
bool key_tried, have_key;

// The per-thread counts (generation is global, not summed).  Another
// thread's counts may change while they are read: each field is one load.
void add(tk_eh_stats *to, const tk_eh_stats &s)
{
    auto get = [](const uint64_t &v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
    to->throws += get(s.throws);
    to->frames += get(s.frames);
    to->cache_hits += get(s.cache_hits);
    to->cache_misses += get(s.cache_misses);
    to->cleanups += get(s.cleanups);
    to->handlers += get(s.handlers);
    to->handed_off += get(s.handed_off);
}

void unlink_thread(thread_data *t)
{
    if (!t->linked) return;
    (t->prev ? t->prev->next : live) = t->next;
    if (t->next) t->next->prev = t->prev;
    t->prev = t->next = nullptr;
    t->linked = false;
}

// The key's destructor: the ending thread's counts into `ended`.
void move_thread(void *p)
{
    auto *t = static_cast<thread_data *>(p);
    std::lock_guard<std::mutex> g(stats_lock);
    add(&ended, t->s);
    t->s = tk_eh_stats{};
    unlink_thread(t);
    t->registered = false;
    t->moved = true;
}

// On a thread's first throw.  A throw after the move (in another key's
// destructor) sets the key again, so glibc moves the counts again on its
// next round; the thread is not linked again, its storage going away.
__attribute__((noinline, cold)) void register_thread()
{
    std::lock_guard<std::mutex> g(stats_lock);
    if (!key_tried) {
        key_tried = true;
        have_key = pthread_key_create(&move_key, move_thread) == 0;
    }
    local.registered = true;
    // without the key a thread could not be unlinked when it ends: its
    // counts are then seen only by itself (tk_eh_get_stats, or the line
    // at exit if it is the thread that exits)
    if (!have_key || pthread_setspecific(move_key, &local) != 0 || local.moved) return;
    local.next = live;
    if (live) live->prev = &local;
    live = &local;
    local.linked = true;
}

// This thread's state, registered.
thread_data &self()
{
    thread_data &t = local;
    if (__builtin_expect(!t.registered, 0)) register_thread();
    return t;
}

// A forked child counts its own throws: the parent's threads are not
// its, and their counts are the parent's.
void before_fork()
{
    stats_lock.lock();
}
void after_fork_parent()
{
    stats_lock.unlock();
}
void after_fork_child()
{
    ended = tk_eh_stats{};
    local.s = tk_eh_stats{};
    live = nullptr;
    if (local.linked) {
        local.prev = local.next = nullptr;
        live = &local;
    }
    stats_lock.unlock();
}

__attribute__((constructor)) void init_stats()
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

// ---- the exceptions whose cleanups run ----
// A noexcept function whose catch clauses do not match is compiled (by
// GCC before 14) to a landing pad entered as a cleanup that calls
// std::terminate itself.  libgcc's search phase finds no handler first
// and calls std::terminate with the exception caught, as [except.handle]
// requires; this runtime has entered the landing pad before it can know.
// So std::terminate is defined here too (eh_x86_64.S): called from the
// frame of the innermost exception's cleanup, it catches that exception
// first.

// Drops ue and every exception after it (thrown during its cleanups and
// since ended): ue resumes, or is thrown again.
void drop_cleanup(thread_data &t, _Unwind_Exception *ue)
{
    for (unsigned i = t.ncleanups; i-- > 0;) {
        if (t.cleanups[i].ue == ue) {
            t.ncleanups = i;
            return;
        }
    }
}

void push_cleanup(thread_data &t, _Unwind_Exception *ue, uint64_t cfa)
{
    // an entry at this frame or deeper is stale: its frame is gone
    while (t.ncleanups && t.cleanups[t.ncleanups - 1].cfa <= cfa) t.ncleanups--;
    if (!cfa) return;
    if (t.ncleanups == MAX_CLEANUPS) { // the outermost is forgotten
        memmove(t.cleanups, t.cleanups + 1, sizeof t.cleanups[0] * (MAX_CLEANUPS - 1));
        t.ncleanups--;
    }
    t.cleanups[t.ncleanups++] = {ue, cfa};
}

// ---- the PC table ----
std::atomic<uint32_t> generation{0}; // bumped before and after each dlclose

enum : uint8_t { P_NONE, P_GXX, P_OTHER }; // personality
// Everything a throw needs of one call site.
// (call_site: what its LSDA says of it)
struct site : call_site {
    uintptr_t pc = 0; // the looked-up PC (a return address - 1, or an exact PC)
    uint32_t gen = 0;
    bool compact = false; // the frame state is cfa = reg + off, saved = *(cfa + off)
    uint8_t personality = P_NONE;
    uint8_t cfa_reg = RSP, nsaved = 0;
    int32_t cfa_off = 0;
    int32_t args_size = 0;
    uint8_t sreg[7] = {};
    int32_t soff[7] = {};
    const uint8_t *lsda = nullptr;
};

struct slot {
    std::atomic<uint32_t> seq{0}; // odd while written
    site s;
};
constexpr unsigned TABLE_BITS = 12; // 4096 slots, in 2048 pairs
slot table[1u << TABLE_BITS];

// Two slots per PC (a pair), so two call sites of one throw path whose
// hashes meet do not keep evicting each other.
size_t index_for(uintptr_t pc)
{
    return (pc * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS);
}

// Reads sl's site if it is pc's and of this generation.
bool slot_get(slot &sl, uintptr_t pc, uint32_t gen, site *out)
{
    uint32_t s1 = sl.seq.load(std::memory_order_acquire);
    if (s1 & 1) return false;
    if (__atomic_load_n(&sl.s.pc, __ATOMIC_RELAXED) != pc) return false;
    memcpy(static_cast<void *>(out), &sl.s, sizeof *out);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (sl.seq.load(std::memory_order_relaxed) != s1) return false;
    return out->pc == pc && out->gen == gen;
}

bool table_get(uintptr_t pc, uint32_t gen, site *out)
{
    size_t i = index_for(pc);
    return slot_get(table[i], pc, gen, out) || slot_get(table[i ^ 1], pc, gen, out);
}

void table_put(const site &s)
{
    // the slot of the pair that is free, stale or already this PC's; else
    // the first
    size_t i = index_for(s.pc);
    slot *sl = &table[i];
    for (size_t j : {i, i ^ 1}) {
        uintptr_t pc = __atomic_load_n(&table[j].s.pc, __ATOMIC_RELAXED);
        uint32_t gen = __atomic_load_n(&table[j].s.gen, __ATOMIC_RELAXED);
        if (pc == 0 || pc == s.pc || gen != s.gen) {
            sl = &table[j];
            break;
        }
    }
    uint32_t s1 = sl->seq.load(std::memory_order_relaxed);
    if ((s1 & 1) || !sl->seq.compare_exchange_strong(s1, s1 + 1, std::memory_order_acquire))
        return; // another thread is writing it: leave it
    std::atomic_thread_fence(std::memory_order_release);
    memcpy(static_cast<void *>(&sl->s), &s, sizeof s);
    sl->seq.store(s1 + 2, std::memory_order_release);
}

// The site of pc, computed: its frame state and, for a C++ frame, its
// call-site record.
bool compute_site(uintptr_t pc, uint32_t gen, site *s)
{
    frame_state fs;
    if (!compute(pc, &fs)) return false;
    s->pc = pc;
    s->gen = gen;
    s->args_size = static_cast<int32_t>(fs.args_size);
    // compact: CFA from a register, callee-saved registers and the return
    // address at offsets from it, nothing else
    bool compact = !fs.cfa_expr && !fs.signal_frame && fs.ra_column == RA && fs.cfa_reg < NREGS &&
                   fs.regs[RA].kind == OFFSET;
    uint8_t n = 0;
    for (int i = 0; i < NREGS && compact; i++) {
        const rule &ru = fs.regs[i];
        if (ru.kind == SAME) continue;
        bool callee_saved = i == RBX || i == RBP || (i >= R12 && i <= R15) || i == RA;
        if (ru.kind != OFFSET || !callee_saved || n == 7) {
            compact = false;
            break;
        }
        s->sreg[n] = static_cast<uint8_t>(i);
        s->soff[n] = static_cast<int32_t>(ru.off);
        n++;
    }
    s->compact = compact;
    s->nsaved = n;
    s->cfa_reg = fs.cfa_reg;
    s->cfa_off = static_cast<int32_t>(fs.cfa_off);
    if (!fs.personality) {
        s->personality = P_NONE;
    } else if (fs.personality == reinterpret_cast<uintptr_t>(&__gxx_personality_v0)) {
        s->personality = P_GXX;
        s->lsda = reinterpret_cast<const uint8_t *>(fs.lsda);
        if (!s->lsda)
            s->what = W_NOTHING;
        else if (!decode_lsda(s->lsda, fs.func_start, pc, s))
            s->personality = P_OTHER;
    } else {
        s->personality = P_OTHER;
    }
    return true;
}

} // namespace

// ---- libgcc's functions, for what is not ours ----
extern "C" {
__attribute__((visibility("hidden"))) void *tk_eh_real_raise, *tk_eh_real_resume,
    *tk_eh_real_rethrow;
}

namespace
{

void resolve_real()
{
    if (__atomic_load_n(&tk_eh_real_rethrow, __ATOMIC_ACQUIRE)) return;
    void *raise = dlsym(RTLD_NEXT, "_Unwind_RaiseException");
    void *resume = dlsym(RTLD_NEXT, "_Unwind_Resume");
    void *rethrow = dlsym(RTLD_NEXT, "_Unwind_Resume_or_Rethrow");
    if (!raise || !resume || !rethrow) {
        static const char msg[] = "trapkit eh: libgcc's unwinder (libgcc_s.so.1) not found\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
    }
    __atomic_store_n(&tk_eh_real_raise, raise, __ATOMIC_RELAXED);
    __atomic_store_n(&tk_eh_real_resume, resume, __ATOMIC_RELAXED);
    __atomic_store_n(&tk_eh_real_rethrow, rethrow, __ATOMIC_RELEASE);
}

std::atomic<void (*)(int)> trace{nullptr};

struct entry_regs {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip;
};
struct target {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip, rax, rdx;
};

} // namespace

extern "C" {
[[noreturn]] void tk_eh_install(const target *t) __attribute__((visibility("hidden")));
void tk_eh_handoff() __attribute__((visibility("hidden")));
[[noreturn]] void tk_eh_no_handler(_Unwind_Exception *ue) __attribute__((visibility("hidden")));
}

namespace
{

enum mode { THROW = 0, RAISE = 1, RESUME = 2, RETHROW = 3 };

[[noreturn]] void enter(const context &c, uintptr_t rip, _Unwind_Exception *ue, int64_t sw,
                        int64_t args_size)
{
    target t;
    t.rbx = c.reg[RBX];
    t.rbp = c.reg[RBP];
    t.r12 = c.reg[R12];
    t.r13 = c.reg[R13];
    t.r14 = c.reg[R14];
    t.r15 = c.reg[R15];
    t.rsp = c.reg[RSP] + static_cast<uint64_t>(args_size);
    t.rip = rip;
    t.rax = reinterpret_cast<uint64_t>(ue);
    t.rdx = static_cast<uint64_t>(sw);
    if (void (*fn)(int) = trace.load(std::memory_order_relaxed)) fn(TK_EH_TRACE_INSTALL);
    tk_eh_install(&t);
}

// libgcc takes the throw from frame c on: the frame is made to look as if
// it had called tk_eh_handoff.
[[noreturn]] void hand_off(const context &c, _Unwind_Exception *ue, tk_eh_stats &st)
{
    resolve_real();
    st.handed_off++;
    ue->private_2 = 0;
    uint64_t *sp = reinterpret_cast<uint64_t *>(c.reg[RSP]) - 1;
    // libgcc looks up a return address - 1: a frame interrupted by a signal
    // (its PC exact) gets its PC + 1, so the lookup lands on that very PC
    *sp = c.reg[RA] + (c.pc_exact ? 1 : 0);
    context d = c;
    d.reg[RSP] = reinterpret_cast<uint64_t>(sp);
    enter(d, reinterpret_cast<uintptr_t>(&tk_eh_handoff), ue, 0, 0);
}

bool adjust(const std::type_info *catch_type, const std::type_info *throw_type, void **thrown)
{
    void *p = *thrown;
    if (throw_type->__is_pointer_p()) p = *static_cast<void **>(p);
    if (catch_type->__do_catch(throw_type, &p, 1)) {
        *thrown = p;
        return true;
    }
    return false;
}

const std::type_info *ttype_entry(const site &s, int64_t i)
{
    reader r{s.ttype - static_cast<size_t>(i) * encoded_size(s.ttype_enc)};
    uintptr_t v = 0;
    r.ptr(s.ttype_enc, 0, 0, &v);
    return reinterpret_cast<const std::type_info *>(v);
}

// A dynamic exception specification (filter < 0) admits the type.
bool spec_admits(const site &s, const std::type_info *throw_type, void *thrown, int64_t filter)
{
    reader r{s.ttype - filter - 1};
    for (;;) {
        uint64_t i = r.uleb();
        if (i == 0) return false;
        void *p = thrown;
        if (adjust(ttype_entry(s, static_cast<int64_t>(i)), throw_type, &p)) return true;
    }
}

// One frame step; false at the end of the stack.
bool step_frame(context &c, const site &s)
{
    if (s.compact) {
        uint64_t cfa = c.reg[s.cfa_reg] + static_cast<uint64_t>(static_cast<int64_t>(s.cfa_off));
        for (unsigned i = 0; i < s.nsaved; i++) {
            c.reg[s.sreg[i]] = *reinterpret_cast<const uint64_t *>(
                cfa + static_cast<uint64_t>(int64_t{s.soff[i]}));
            c.valid[s.sreg[i]] = true;
        }
        c.reg[RSP] = cfa;
        c.pc_exact = false;
        return c.reg[RA] != 0;
    }
    frame_state fs;
    uint64_t cfa;
    return state_for(s.pc, &fs) && step(c, fs, &cfa);
}

// The frame's CFA (its caller's stack pointer): the same at every PC of
// the frame, so it names the frame.  0 when it cannot be found.
uint64_t frame_cfa(const context &c, const site &s)
{
    if (s.compact) return c.reg[s.cfa_reg] + static_cast<uint64_t>(int64_t{s.cfa_off});
    frame_state fs;
    if (!state_for(s.pc, &fs)) return 0;
    if (!fs.cfa_expr) {
        if (fs.cfa_reg >= NREGS || !c.valid[fs.cfa_reg]) return 0;
        return c.reg[fs.cfa_reg] + static_cast<uint64_t>(fs.cfa_off);
    }
    context d = c;
    uint64_t cfa = 0;
    return step(d, fs, &cfa) ? cfa : 0;
}

[[noreturn]] void enter_cleanup(thread_data &t, const context &c, const site &s,
                                _Unwind_Exception *ue)
{
    t.s.cleanups++;
    push_cleanup(t, ue, frame_cfa(c, s));
    enter(c, s.lp, ue, 0, s.args_size);
}

context context_of(const entry_regs *er)
{
    context c;
    c.reg[RBX] = er->rbx;
    c.reg[RBP] = er->rbp;
    c.reg[R12] = er->r12;
    c.reg[R13] = er->r13;
    c.reg[R14] = er->r14;
    c.reg[R15] = er->r15;
    c.reg[RSP] = er->rsp;
    c.reg[RA] = er->rip;
    for (int r : {RBX, RBP, R12, R13, R14, R15, RSP, RA}) c.valid[r] = true;
    return c;
}

std::atomic<void (*)()> real_terminate_fn{nullptr};

// libstdc++'s std::terminate: the terminate handler now in effect.
[[noreturn]] void real_terminate()
{
    void (*fn)() = real_terminate_fn.load(std::memory_order_acquire);
    if (!fn) {
        fn = reinterpret_cast<void (*)()>(dlsym(RTLD_NEXT, "_ZSt9terminatev"));
        if (!fn) abort();
        real_terminate_fn.store(fn, std::memory_order_release);
    }
    fn();
    abort();
}

// What libstdc++'s personality routine does at a call site that must not
// throw (__cxa_call_terminate): the exception is caught by the implicit
// handler, and the terminate handler in effect when it was thrown is
// called.
[[noreturn]] void call_terminate(_Unwind_Exception *ue) noexcept
{
    __cxxabiv1::__cxa_begin_catch(ue);
    std::terminate_handler h = header_of(ue)->terminateHandler;
    try {
        if (h) h();
    } catch (...) {
    }
    abort(); // a terminate handler must not return
}

} // namespace

// The walk.  Returns only when the exception is not ours (-1: the entry
// point goes on to libgcc) or, for _Unwind_RaiseException and
// _Unwind_Resume_or_Rethrow, when no handler exists
// (_URC_END_OF_STACK; nothing has been unwound).
extern "C" __attribute__((visibility("hidden"))) int tk_eh_walk(_Unwind_Exception *ue,
                                                                const entry_regs *er, int mode)
{
    thread_data &t = self();
    tk_eh_stats &st = t.s;
    switch (mode) {
    case RESUME:
        if (ue->private_1 != 0 || ue->private_2 != our_mark()) {
            resolve_real();
            return -1;
        }
        if (t.ncleanups) drop_cleanup(t, ue);
        break;
    case RAISE:
    case RETHROW:
        if ((mode == RETHROW && ue->private_1 != 0) || !is_gxx(ue)) {
            resolve_real();
            st.handed_off++;
            return -1;
        }
        if (t.ncleanups) drop_cleanup(t, ue);
        ue->private_1 = 0;
        ue->private_2 = our_mark();
        st.throws++;
        break;
    default:
        ue->private_1 = 0;
        ue->private_2 = our_mark();
        st.throws++;
        break;
    }
    if (mode != RESUME && __asan_handle_no_return) __asan_handle_no_return();
    void *obj = object_of(ue);
    const std::type_info *throw_type = type_of(obj);
    cxa_exception *xh = header_of(ue);

    context c = context_of(er);
    uint32_t gen = generation.load(std::memory_order_acquire);
    for (;;) {
        uintptr_t pc = c.pc_exact ? c.reg[RA] : c.reg[RA] - 1;
        site s;
        if (table_get(pc, gen, &s)) {
            st.cache_hits++;
        } else {
            if (!compute_site(pc, gen, &s)) break; // no frame information: the end
            table_put(s);
            st.cache_misses++;
        }
        if (s.personality == P_OTHER) hand_off(c, ue, st);
        if (s.personality == P_GXX) {
            switch (s.what) {
            case W_NOTHING:
                break;
            case W_CLEANUP:
                enter_cleanup(t, c, s, ue);
            case W_TERMINATE:
                call_terminate(ue);
            case W_ACTIONS: {
                const uint8_t *a = s.action;
                bool cleanup = false;
                for (;;) {
                    reader r{a};
                    int64_t filter = r.sleb();
                    const uint8_t *disp_at = r.p;
                    int64_t disp = r.sleb();
                    void *thrown = obj;
                    bool handler = false;
                    if (filter == 0)
                        cleanup = true;
                    else if (filter > 0) {
                        const std::type_info *ct = ttype_entry(s, filter);
                        handler = !ct || adjust(ct, throw_type, &thrown);
                    } else {
                        handler = !spec_admits(s, throw_type, thrown, filter);
                    }
                    if (handler) {
                        xh->handlerSwitchValue = static_cast<int>(filter);
                        xh->actionRecord = a;
                        xh->languageSpecificData = s.lsda;
                        xh->adjustedPtr = thrown;
                        xh->catchTemp = filter < 0 ? 0 : s.lp; // the type table's base, for
                                                               // __cxa_call_unexpected
                        st.handlers++;
                        enter(c, s.lp, ue, filter, s.args_size);
                    }
                    if (disp == 0) break;
                    a = disp_at + disp;
                }
                if (cleanup) enter_cleanup(t, c, s, ue);
                break;
            }
            }
        }
        st.frames++;
        if (!step_frame(c, s)) break;
    }
    // no handler
    ue->private_2 = 0;
    if (mode == RAISE || mode == RETHROW) return _URC_END_OF_STACK;
    tk_eh_no_handler(ue);
}

extern "C" {

// What libstdc++'s __cxa_throw does when libgcc finds no handler.
void tk_eh_no_handler(_Unwind_Exception *ue)
{
    __cxxabiv1::__cxa_begin_catch(ue);
    real_terminate();
}

// std::terminate's body (the entry is in eh_x86_64.S, er: its caller's
// registers).  Called from the frame whose cleanup the innermost
// exception of this thread entered, it is the compiled noexcept
// function's std::terminate: the exception is caught first, as by the
// implicit handler.  Anything else (a destructor calling std::terminate,
// a call with no exception) goes on as it is.
__attribute__((visibility("hidden"))) [[noreturn]] void tk_eh_terminate_core(const entry_regs *er)
{
    thread_data &t = local;
    if (t.ncleanups) {
        context c = context_of(er);
        uint32_t gen = generation.load(std::memory_order_acquire);
        uintptr_t pc = er->rip - 1;
        site s;
        uint64_t cfa = 0;
        if (table_get(pc, gen, &s) || compute_site(pc, gen, &s)) cfa = frame_cfa(c, s);
        while (cfa && t.ncleanups) {
            cleanup_frame top = t.cleanups[t.ncleanups - 1];
            if (top.cfa > cfa) break; // the caller is a function the cleanup called
            t.ncleanups--;            // the caller's, or stale (its frame is gone)
            if (top.cfa == cfa) {
                if (header_of(top.ue)->handlerCount <= 0) __cxxabiv1::__cxa_begin_catch(top.ue);
                break;
            }
        }
    }
    real_terminate();
}

// __cxa_throw's body (the entry is in eh_x86_64.S): what libstdc++'s does,
// then the walk.
__attribute__((visibility("hidden"))) [[noreturn]] void
tk_eh_throw_core(void *obj, std::type_info *type, void (*dest)(void *), const entry_regs *er)
{
    auto *g = reinterpret_cast<cxa_eh_globals *>(__cxxabiv1::__cxa_get_globals());
    g->uncaughtExceptions++;
    auto *h = reinterpret_cast<cxa_refcounted_exception *>(
        __cxxabiv1::__cxa_init_primary_exception(obj, type, dest));
    h->referenceCount = 1;
    if (void (*fn)(int) = trace.load(std::memory_order_relaxed)) fn(TK_EH_TRACE_THROW);
    tk_eh_walk(&h->exc.unwindHeader, er, THROW);
    __builtin_unreachable();
}

// Every dlclose empties the PC table: an object loaded later at the same
// address must not find the old one's entries.
TK_EXPORT int dlclose(void *handle)
{
    static int (*real)(void *) = reinterpret_cast<int (*)(void *)>(dlsym(RTLD_NEXT, "dlclose"));
    generation.fetch_add(1, std::memory_order_acq_rel);
    int r = real(handle);
    generation.fetch_add(1, std::memory_order_acq_rel);
    return r;
}

TK_EXPORT void tk_eh_get_stats(struct tk_eh_stats *out)
{
    tk_eh_stats s{};
    {
        std::lock_guard<std::mutex> g(stats_lock);
        s = ended;
        add(&s, local.s);
    }
    s.generation = generation.load() / 2;
    *out = s;
}

// TRAPKIT_EH_STATS=FILE: the counts of every thread, appended to FILE
// when the program ends (for a program that cannot call tk_eh_get_stats
// itself).
__attribute__((destructor)) static void write_stats_at_exit()
{
    const char *path = getenv("TRAPKIT_EH_STATS");
    if (!path || !*path) return;
    tk_eh_stats s{};
    {
        std::lock_guard<std::mutex> g(stats_lock);
        s = ended;
        for (thread_data *t = live; t; t = t->next) add(&s, t->s);
        if (!local.linked) add(&s, local.s); // this thread's, if not among them
    }
    s.generation = generation.load() / 2;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f,
            "throws %llu frames %llu cache_hits %llu cache_misses %llu cleanups %llu handlers %llu "
            "handed_off %llu generation %llu\n",
            (unsigned long long)s.throws, (unsigned long long)s.frames,
            (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
            (unsigned long long)s.cleanups, (unsigned long long)s.handlers,
            (unsigned long long)s.handed_off, (unsigned long long)s.generation);
    fclose(f);
}

TK_EXPORT void tk_eh_set_trace(void (*fn)(int point))
{
    trace.store(fn, std::memory_order_relaxed);
}

} // extern "C"
