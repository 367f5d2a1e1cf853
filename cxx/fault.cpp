// cxx/fault.cpp - processor faults as C++ exceptions (trapkit/exception.hpp).
//
// A fault nobody else claims reaches on_fault() (trapkit's unclaimed-fault
// hook for SIGSEGV and SIGBUS, tk_trap_install for SIGFPE and SIGILL) in
// the faulting thread's signal handler.  If the thread is inside a
// fault_scope and the instruction is not in a library where unwinding is
// unsafe, on_fault() records the fault in the thread, puts the faulting PC
// and stack pointer at the top of the thread's reserve stack and returns
// into raise_thunk on that stack.  The thunk's call frame information says
// that its caller is the faulting instruction itself (a "signal frame", so
// the unwinder looks up that very PC, not the one before it) and that the
// caller's stack pointer is the one saved: to the unwinder, the faulting
// instruction called the thunk.  The thunk calls tk_cxx_raise_fault(),
// which throws the exception, and the C++ runtime unwinds from there.  The
// signal handler itself returns normally, so trapkit's state, the signal
// mask and the alternate stack are all as the kernel expects.
#include <cerrno>
#include <cstdlib>
#include <cxxabi.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <system_error>
#include <trapkit/exception.hpp>
#include <trapkit/fast.h>
#include <trapkit/region.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

namespace
{

struct pending_fault {
    int sig, code;
    void *pc, *addr;
    bool write, overflow;
};

constexpr size_t reserve_size = 256 * 1024;

thread_local int depth;              // fault_scopes alive in this thread
thread_local bool throwing;          // a converted fault is being raised
thread_local bool converting;        // inside convert() (a fault there is not converted)
thread_local pending_fault pending;  // what tk_cxx_raise_fault throws
thread_local unsigned char *reserve; // the thread's reserve stack (top - reserve_size)
thread_local uintptr_t stack_lo;     // the lowest address this thread's stack may reach

// Gives back what thread_setup() took for the thread, when it ends.
struct thread_resources {
    bool altstack = false; // installed here (else the thread had one)
    ~thread_resources()
    {
        // the alternate stack from tk_altstack_install is trapkit's to free
        // (at thread exit, after this); it is only switched off here
        if (altstack) {
            stack_t off{};
            off.ss_flags = SS_DISABLE;
            (void)sigaltstack(&off, nullptr);
        }
        if (reserve) munmap(reserve - 4096, reserve_size + 4096);
        reserve = nullptr;
    }
};
thread_local thread_resources resources;
pthread_once_t installed = PTHREAD_ONCE_INIT;
int install_error;

// Objects whose code must not be unwound out of.  [filled once]
const void *no_convert[8];
int n_no_convert;

void note_object(const void *sym)
{
    Dl_info info;
    struct link_map *lm = nullptr;
    if (!sym || !dladdr1(sym, &info, reinterpret_cast<void **>(&lm), RTLD_DL_LINKMAP) || !lm)
        return;
    if (!lm->l_name || !lm->l_name[0]) return; // linked into the program itself: not told apart
    for (int i = 0; i < n_no_convert; i++)
        if (no_convert[i] == lm) return;
    if (n_no_convert < 8) no_convert[n_no_convert++] = lm;
}

// [signal-safe] (_dl_find_object is)
bool unsafe_to_unwind(void *pc)
{
    struct dl_find_object dlfo;
    if (_dl_find_object(pc, &dlfo) != 0) return false; // not in any object: JIT code, say
    for (int i = 0; i < n_no_convert; i++)
        if (dlfo.dlfo_link_map == no_convert[i]) return true;
    return false;
}

extern "C" void tk_cxx_raise_thunk();
extern "C" [[noreturn]] void tk_cxx_raise_fault();

// AddressSanitizer's runtime, in a program built with it.
extern "C" void __asan_unpoison_memory_region(void const volatile *, size_t) __attribute__((weak));

// [signal-safe]
tk_action convert(int sig, int code, void *addr, void *uc_v, bool overflow)
{
    auto *uc = static_cast<ucontext_t *>(uc_v);
    if (!uc || depth == 0 || throwing || converting || !reserve) return TK_DECLINE;
    greg_t *g = uc->uc_mcontext.gregs;
    void *pc = reinterpret_cast<void *>(g[REG_RIP]);
    converting = true;
    bool unsafe = unsafe_to_unwind(pc);
    converting = false;
    if (unsafe) return TK_DECLINE;
    pending = {sig, code, pc, addr, (g[REG_ERR] & 2) != 0, overflow};
    throwing = true;
    // A sanitizer's shadow of the reserve stack still describes the frames
    // of the previous throw, which ended without returning.
    if (__asan_unpoison_memory_region) __asan_unpoison_memory_region(reserve, reserve_size);
    // The reserve stack's top: [0] the faulting PC, [8] its stack pointer.
    auto *top = reinterpret_cast<uintptr_t *>(reserve + reserve_size - 64);
    top[0] = static_cast<uintptr_t>(g[REG_RIP]);
    top[1] = static_cast<uintptr_t>(g[REG_RSP]);
    g[REG_RSP] = reinterpret_cast<greg_t>(top);
    g[REG_RIP] = reinterpret_cast<greg_t>(&tk_cxx_raise_thunk);
    return TK_RESUME;
}

// SIGSEGV, SIGBUS: faults no region claims.  [signal-safe]
tk_action on_unclaimed(const tk_fault *f, void *)
{
    int sig = static_cast<int>(f->flags >> 16), code = static_cast<int>(f->flags & 0xffff);
    // a stack overflow: below the lowest page the stack may reach, in the
    // kernel's guard gap (256 pages), or just above it
    uintptr_t a = reinterpret_cast<uintptr_t>(f->addr);
    bool overflow =
        sig == SIGSEGV && stack_lo && a < stack_lo + 4096 && a + (256 + 16) * 4096 >= stack_lo;
    return convert(sig, code, f->addr, f->ucontext, overflow);
}

// SIGFPE, SIGILL.  [signal-safe]
tk_action on_trap(int sig, void *si_v, void *uc, void *)
{
    auto *si = static_cast<siginfo_t *>(si_v);
    if (si->si_code <= 0) return TK_DECLINE; // sent, not raised by an instruction
    return convert(sig, si->si_code, si->si_addr, uc, false);
}

void install()
{
    note_object(reinterpret_cast<const void *>(&gnu_get_libc_version)); // the C library
    note_object(reinterpret_cast<const void *>(&malloc)); // the allocator (libc's or another's)
    note_object(reinterpret_cast<const void *>(&strlen)); // string functions (or a sanitizer's)
    note_object(reinterpret_cast<const void *>(&__cxxabiv1::__cxa_begin_catch)); // the C++ runtime
    note_object(reinterpret_cast<const void *>(&_Unwind_GetCFA)); // libgcc's unwinder
    // the unwinder a throw goes through (trapkit's libtrapkit_eh.so, when
    // it is loaded, else libgcc's)
    note_object(reinterpret_cast<const void *>(&_Unwind_RaiseException));
    // this library's own code: `throwing` covers the raise, `converting`
    // the signal handler's part
    if (int err = tk_on_unclaimed_fault(on_unclaimed, nullptr)) install_error = err;
    if (int err = tk_trap_install(SIGFPE, on_trap, nullptr)) install_error = err;
    if (int err = tk_trap_install(SIGILL, on_trap, nullptr)) install_error = err;
}

// The reserve stack of this thread, and an alternate signal stack.
void thread_setup()
{
    thread_resources &res = resources; // its destructor gives them back at thread exit
    pthread_once(&installed, install);
    if (install_error)
        throw std::system_error(-install_error, std::generic_category(),
                                "tk::fault_scope: installing the fault handlers");
    if (!reserve) {
        void *p = mmap(nullptr, reserve_size + 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            throw std::system_error(errno, std::generic_category(),
                                    "tk::fault_scope: mapping the reserve stack");
        mprotect(p, 4096, PROT_NONE); // a guard below it
        reserve = static_cast<unsigned char *>(p) + 4096;
    }
    if (!stack_lo) {
        pthread_attr_t attr;
        void *lo;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &lo, &size) == 0)
                stack_lo = reinterpret_cast<uintptr_t>(lo);
            pthread_attr_destroy(&attr);
        }
    }
    stack_t cur{};
    if (sigaltstack(nullptr, &cur) == 0 && (cur.ss_flags & SS_DISABLE)) {
        if (int err = tk_altstack_install())
            throw std::system_error(-err, std::generic_category(),
                                    "tk::fault_scope: the alternate signal stack");
        res.altstack = true;
    }
}

} // namespace

// The thunk.  Entered with rsp at the reserve stack's top: [rsp] is the
// faulting PC, [rsp+8] the stack pointer it faulted with.  CFI:
//   CFA = *(rsp + 8)                   DW_CFA_def_cfa_expression: breg7 8, deref
//   return address at rsp + 0          DW_CFA_expression r16: breg7 0
//   a signal frame (the caller's PC is used as it is, not minus one)
// Every other register is as the faulting instruction left it.
__asm__(".text\n"
        ".globl tk_cxx_raise_thunk\n"
        ".type tk_cxx_raise_thunk, @function\n"
        "tk_cxx_raise_thunk:\n"
        "  .cfi_startproc\n"
        "  .cfi_signal_frame\n"
        "  .cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n"
        "  .cfi_escape 0x10, 0x10, 0x02, 0x77, 0x00\n"
        "  call tk_cxx_raise_fault\n"
        "  ud2\n"
        "  .cfi_endproc\n"
        ".size tk_cxx_raise_thunk, . - tk_cxx_raise_thunk\n");

extern "C" [[noreturn]] void tk_cxx_raise_fault()
{
    pending_fault p = pending;
    throwing = false; // the exception object is made; a fault now is a new one
    switch (p.sig) {
    case SIGSEGV:
        if (p.overflow) throw tk::stack_overflow(p.code, p.pc, p.addr, p.write);
        throw tk::access_violation(p.code, p.pc, p.addr, p.write);
    case SIGBUS:
        throw tk::bus_error(p.code, p.pc, p.addr);
    case SIGFPE:
        if (p.code == FPE_INTDIV) throw tk::divide_by_zero(p.code, p.pc, p.addr);
        throw tk::arithmetic_error(p.code, p.pc, p.addr);
    default:
        throw tk::illegal_instruction(p.code, p.pc, p.addr);
    }
}

namespace tk
{

hardware_exception::hardware_exception(int sig, int code, void *pc, void *addr) noexcept
    : sig_(sig), code_(code), pc_(pc), addr_(addr)
{
    msg_[0] = 0;
}

const char *hardware_exception::what() const noexcept
{
    return msg_;
}

access_violation::access_violation(int code, void *pc, void *addr, bool write) noexcept
    : hardware_exception(SIGSEGV, code, pc, addr), write_(write)
{
    snprintf(msg_, sizeof msg_, "access violation: %s of %p at pc %p", write ? "write" : "read",
             addr, pc);
}

stack_overflow::stack_overflow(int code, void *pc, void *addr, bool write) noexcept
    : access_violation(code, pc, addr, write)
{
    snprintf(msg_, sizeof msg_, "stack overflow: %p at pc %p", addr, pc);
}

bus_error::bus_error(int code, void *pc, void *addr) noexcept
    : hardware_exception(SIGBUS, code, pc, addr)
{
    snprintf(msg_, sizeof msg_, "bus error at %p, pc %p", addr, pc);
}

divide_by_zero::divide_by_zero(int code, void *pc, void *addr) noexcept
    : hardware_exception(SIGFPE, code, pc, addr)
{
    snprintf(msg_, sizeof msg_, "integer division by zero at pc %p", pc);
}

arithmetic_error::arithmetic_error(int code, void *pc, void *addr) noexcept
    : hardware_exception(SIGFPE, code, pc, addr)
{
    snprintf(msg_, sizeof msg_, "arithmetic error (SIGFPE code %d) at pc %p", code, pc);
}

illegal_instruction::illegal_instruction(int code, void *pc, void *addr) noexcept
    : hardware_exception(SIGILL, code, pc, addr)
{
    snprintf(msg_, sizeof msg_, "illegal instruction at pc %p", pc);
}

fault_scope::fault_scope()
{
    thread_setup();
    depth++;
}

fault_scope::~fault_scope()
{
    depth--;
}

} // namespace tk
