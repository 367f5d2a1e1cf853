// trapkit/exception.hpp - processor faults as C++ exceptions (libtrapkit_cxx).
//
// Inside a tk::fault_scope (or tk::catch_faults), a SIGSEGV, SIGBUS, SIGFPE
// or SIGILL raised by an instruction of code built with
// -fnon-call-exceptions becomes a typed C++ exception thrown from that
// instruction: it unwinds the stack, runs destructors and is caught by
// type like any other.  Outside every scope nothing changes: the fault goes
// to the handler installed before (or the default action), and a real
// crash still crashes.
//
//   tk::fault_scope scope;                       // this thread, this block
//   try { v = *p; }
//   catch (const tk::access_violation &e) {      // e.address(), e.is_write()
//       ...
//   }
//
// What is not converted, and crashes as it would without trapkit:
//   - a fault in the C library, the allocator, the C++ runtime, the
//     unwinder (or a sanitizer's runtime that replaces them), or in
//     libtrapkit_cxx itself: malloc's locks or the unwinder's state may be
//     half-updated, and unwinding out of them is not safe.  They are told
//     apart by the shared object the faulting instruction belongs to (so a
//     C++ runtime linked statically into the program is not);
//   - a fault while a converted fault is being thrown (a fault in a
//     destructor run during that unwinding is a second exception leaving a
//     noexcept destructor: std::terminate, as the standard says);
//   - code built without -fnon-call-exceptions: the exception is thrown,
//     but the faulting function's exception table does not cover the
//     instruction: if that function has handlers or destructors of its own
//     the runtime calls std::terminate; if it has none, the exception
//     passes through it to its callers.  Even with it, the compiler does
//     not take an asm statement or __builtin_trap() for an instruction that
//     may throw: the function holding one gets no cleanup for it, and its
//     callers' handlers and destructors take the exception.
// Faults in regions of trapkit/region.h go to their handlers first; only
// faults nobody claims are converted.
//
// Stack overflow: the fault is delivered on an alternate signal stack (a
// scope installs one for its thread) and thrown from a per-thread reserve
// stack, so tk::stack_overflow is caught like the others.
#ifndef TRAPKIT_EXCEPTION_HPP
#define TRAPKIT_EXCEPTION_HPP

#include <exception>
#include <utility>

namespace tk
{

// The base of every converted fault.
class hardware_exception : public std::exception
{
  public:
    const char *what() const noexcept override;
    int signal() const noexcept { return sig_; }     // SIGSEGV, SIGBUS, SIGFPE, SIGILL
    int code() const noexcept { return code_; }      // siginfo's si_code
    void *pc() const noexcept { return pc_; }        // the faulting instruction
    void *address() const noexcept { return addr_; } // siginfo's si_addr

  protected:
    hardware_exception(int sig, int code, void *pc, void *addr) noexcept;
    int sig_, code_;
    void *pc_, *addr_;
    char msg_[96];
};

// SIGSEGV: a read or write of memory the program may not touch.
class access_violation : public hardware_exception
{
  public:
    access_violation(int code, void *pc, void *addr, bool write) noexcept;
    bool is_write() const noexcept { return write_; }

  private:
    bool write_;
};

// SIGSEGV in the guard area below the stack pointer.
class stack_overflow : public access_violation
{
  public:
    stack_overflow(int code, void *pc, void *addr, bool write) noexcept;
};

// SIGBUS: an address the hardware cannot reach (beyond a file's end, ...).
class bus_error : public hardware_exception
{
  public:
    bus_error(int code, void *pc, void *addr) noexcept;
};

// SIGFPE with FPE_INTDIV: integer division by zero, and on x86-64 also
// INT_MIN / -1 (the CPU raises the same #DE for both, and Linux reports
// FPE_INTDIV for it).
class divide_by_zero : public hardware_exception
{
  public:
    divide_by_zero(int code, void *pc, void *addr) noexcept;
};

// Any other SIGFPE (FPE_INTOVF where a CPU reports overflow apart,
// floating-point traps that the program unmasked).
class arithmetic_error : public hardware_exception
{
  public:
    arithmetic_error(int code, void *pc, void *addr) noexcept;
};

// SIGILL: an undefined or privileged instruction (ud2, __builtin_trap()).
class illegal_instruction : public hardware_exception
{
  public:
    illegal_instruction(int code, void *pc, void *addr) noexcept;
};

// While one exists in a thread, faults in that thread are converted.
// Scopes nest; they must be destroyed in the reverse order of creation (as
// automatic objects are).  The first scope of a thread installs the
// handlers, an alternate signal stack and a reserve stack for that thread;
// that can fail with std::system_error.
class fault_scope
{
  public:
    fault_scope();
    ~fault_scope();
    fault_scope(const fault_scope &) = delete;
    fault_scope &operator=(const fault_scope &) = delete;
};

// Calls f() inside a fault_scope and returns what it returns.
template <class F> auto catch_faults(F &&f) -> decltype(std::forward<F>(f)())
{
    fault_scope scope;
    return std::forward<F>(f)();
}

} // namespace tk

#endif
