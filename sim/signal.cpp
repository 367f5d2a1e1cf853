// sim/signal.cpp - signals (sim/machine.hpp, "Signals"): what becomes of
// a signal sent to the program, a handler's frame and the return from it,
// the alternate signal stack, and the faults that are signals.
//
// The frame is arch/riscv/kernel/signal.c's: at sp (16-byte aligned below
// the stack in use, or the alternate one's top), struct rt_sigframe -
// siginfo_t (128 bytes), then struct ucontext: uc_flags, uc_link, uc_stack,
// uc_sigmask (and room for a larger sigset_t, to 128 bytes), then at its
// byte 176 uc_mcontext, struct sigcontext: pc, x1-x31, then union
// __riscv_fp_state (f0-f31 as 64-bit values, fcsr; the union's size is its
// quad-precision member's, 528 bytes).  The handler starts with a0 the
// signal, a1 the siginfo_t, a2 the ucontext, sp the frame, ra the page at
// SIGRETURN_PAGE (li a7, 139; ecall), and the other registers as they were;
// rt_sigreturn takes back the registers, fcsr, pc and the mask from the
// frame at sp (what the handler changed there included), and the
// alternate stack from uc_stack.  The numbers and flags below are
// asm-generic's, riscv64's and the host's alike.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "machine.hpp"

namespace tksim
{

namespace
{
constexpr uint64_t PAGE = 4096;
// struct rt_sigframe
constexpr uint64_t UC = 128;              // struct ucontext, after siginfo_t
constexpr uint64_t UC_STACK = UC + 16;    // uc_stack: ss_sp, ss_flags, ss_size
constexpr uint64_t UC_SIGMASK = UC + 40;  // uc_sigmask
constexpr uint64_t MCONTEXT = UC + 176;   // uc_mcontext: pc, x1-x31
constexpr uint64_t FP = MCONTEXT + 256;   // f0-f31
constexpr uint64_t FCSR = FP + 256;       // fcsr
constexpr uint64_t FRAME_SIZE = FP + 528; // (the floating-point state's union)
constexpr uint32_t SS_ONSTACK_ = 1, SS_DISABLE_ = 2, SS_AUTODISARM_ = 1u << 31;
constexpr uint64_t MINSIGSTKSZ_ = 2048;
static_assert(SA_SIGINFO == 4 && SA_ONSTACK == 0x08000000 && SA_RESTART == 0x10000000 &&
                  SA_NODEFER == 0x40000000 && static_cast<uint32_t>(SA_RESETHAND) == 0x80000000u,
              "the host's sa_flags are asm-generic's, as riscv64's");
static_assert(SIGBUS == 7 && SIGSEGV == 11 && SIGUSR1 == 10 && SIGSYS == 31 && SI_TKILL == -6 &&
                  SI_TIMER == -2 && SI_KERNEL == 0x80 && SEGV_ACCERR == 2 && BUS_ADRERR == 2,
              "the host's signal numbers and si_codes are asm-generic's, as riscv64's");

uint64_t bit(int sig)
{
    return 1ull << (sig - 1);
}
// the signals of faults, which Linux takes before the others
constexpr uint64_t SYNCHRONOUS = (1ull << (SIGSEGV - 1)) | (1ull << (SIGBUS - 1)) |
                                 (1ull << (SIGILL - 1)) | (1ull << (SIGTRAP - 1)) |
                                 (1ull << (SIGFPE - 1)) | (1ull << (SIGSYS - 1));
} // namespace

Machine::SigInfo Machine::siginfo(int sig, int code, uint64_t w16, uint64_t w24)
{
    SigInfo si;
    int32_t head[3] = {sig, 0, code}; // si_signo, si_errno, si_code
    memcpy(si.b, head, sizeof head);
    memcpy(si.b + 16, &w16, 8);
    memcpy(si.b + 24, &w24, 8);
    return si;
}

bool Machine::ignores(int sig) const
{
    if (bit(sig) & UNBLOCKABLE) return false;
    uint64_t handler = sigactions_[sig][0];
    return handler == 1 ||
           (handler == 0 && (sig == SIGCHLD || sig == SIGCONT || sig == SIGURG || sig == SIGWINCH));
}

void Machine::send(int sig, const SigInfo &info)
{
    bool blocked = (sigmask_ & bit(sig)) && !(bit(sig) & UNBLOCKABLE);
    if (!blocked) {
        if (ignores(sig)) return; // (dropped at once, as on Linux)
        if (sigactions_[sig][0] == 0 || (bit(sig) & UNBLOCKABLE)) {
            end_by(sig);
            return;
        }
    }
    // pending: acted on when not blocked (at the end of the system call or
    // the instruction boundary where it came), or taken by rt_sigtimedwait
    // (one at most of each signal below SIGRTMIN; the real-time ones queue,
    // up to RLIMIT_SIGPENDING)
    if (sig < 32 && (pending_ & bit(sig))) return;
    if (queued_[sig].size() >= rlimits_[11][0]) return;
    queued_[sig].push_back(info);
    pending_ |= bit(sig);
}

void Machine::end_by(int sig)
{
    if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
        fflush(stdout);
        fprintf(stderr,
                "tksim: signal %d would stop the program, which tksim does not do: it ends as by "
                "the signal (exit status %d)\n",
                sig, 128 + sig);
    }
    exited_ = true;
    exit_code_ = 128 + sig;
}

int Machine::next_signal(uint64_t ready)
{
    if (ready & SYNCHRONOUS) ready &= SYNCHRONOUS;
    return __builtin_ctzll(ready) + 1;
}

Machine::SigInfo Machine::dequeue(int sig)
{
    SigInfo si = queued_[sig].front();
    queued_[sig].erase(queued_[sig].begin());
    if (queued_[sig].empty()) pending_ &= ~bit(sig);
    return si;
}

void Machine::act_on_signals(int64_t restart, uint64_t call_pc, uint64_t a0_in)
{
    while (!exited_ && (pending_ & ~sigmask_)) {
        int sig = next_signal(pending_ & ~sigmask_);
        SigInfo info = dequeue(sig);
        if (ignores(sig)) continue;
        if (sigactions_[sig][0] == 0) {
            end_by(sig);
            break;
        }
        if (restart) { // the interrupted call: again, or -EINTR
            bool again = restart == -ERESTARTNOINTR ||
                         (restart == -ERESTARTSYS && (sigactions_[sig][1] & SA_RESTART));
            if (again) {
                regs_[10] = a0_in;
                pc_ = call_pc;
            } else {
                regs_[10] = static_cast<uint64_t>(-EINTR);
            }
            restart = 0;
        }
        enter_handler(sig, info);
    }
    if (restart) regs_[10] = static_cast<uint64_t>(-EINTR); // (the program ended meanwhile)
    if (restore_mask_) {                                    // (no handler entered)
        sigmask_ = saved_mask_;
        restore_mask_ = false;
    }
}

void Machine::enter_handler(int sig, const SigInfo &info)
{
    uint64_t handler = sigactions_[sig][0], flags = sigactions_[sig][1];
    uint64_t sp = regs_[2];
    // (on the alternate stack already, and the frame would go below it: Linux
    // gives up, and the program dies of SIGSEGV)
    bool overflow = on_alt_stack(sp) && !on_alt_stack(sp - FRAME_SIZE);
    uint64_t top = (flags & SA_ONSTACK) && alt_stack_flags(sp) == 0 ? alt_sp_ + alt_size_ : sp;
    uint64_t frame = (top - FRAME_SIZE) & ~15ull;
    bool fits = !overflow && top >= FRAME_SIZE && frame < SPACE && frame + FRAME_SIZE <= SPACE;
    for (uint64_t p = frame / PAGE; fits && p <= (frame + FRAME_SIZE - 1) / PAGE; p++)
        fits = allows(p, true);
    if (!fits)
        throw GuestFault(pc_, frame,
                         overflow ? "a signal handler's frame overflows the alternate signal stack"
                                  : "no room for a signal handler's frame on the stack");

    uint8_t f[FRAME_SIZE] = {};
    memcpy(f, info.b, sizeof info.b);
    // (uc_flags, uc_link 0) uc_stack as qemu-riscv64 fills it: the flags
    // the interrupted code would read from sigaltstack
    uint64_t stack[3] = {alt_sp_, alt_stack_flags(sp), alt_size_};
    memcpy(f + UC_STACK, stack, sizeof stack);
    uint64_t mask = restore_mask_ ? saved_mask_ : sigmask_;
    restore_mask_ = false;
    memcpy(f + UC_SIGMASK, &mask, 8);
    memcpy(f + MCONTEXT, &pc_, 8);
    memcpy(f + MCONTEXT + 8, &regs_[1], 31 * 8);
    memcpy(f + FP, &regs_[FREG], 32 * 8);
    uint32_t fcsr = fcsr_;
    memcpy(f + FCSR, &fcsr, 4);
    memcpy(base_ + frame, f, FRAME_SIZE);

    sigmask_ |= sigactions_[sig][2];
    if (!(flags & SA_NODEFER)) sigmask_ |= bit(sig);
    sigmask_ &= ~UNBLOCKABLE;
    if (flags & SA_RESETHAND) sigactions_[sig][0] = 0; // SIG_DFL
    if (alt_flags_ & SS_AUTODISARM_) {
        alt_sp_ = alt_size_ = 0;
        alt_flags_ = SS_DISABLE_;
    }
    regs_[10] = static_cast<uint64_t>(sig);
    regs_[11] = frame;      // &info
    regs_[12] = frame + UC; // &uc
    regs_[1] = SIGRETURN_PAGE;
    regs_[2] = frame;
    pc_ = handler;
}

uint64_t Machine::sigreturn()
{
    uint64_t frame = regs_[2];
    if (frame >= SPACE || frame + FRAME_SIZE > SPACE || !range_mapped(frame, FRAME_SIZE))
        throw GuestFault(pc_, frame, "rt_sigreturn without a signal frame at sp");
    uint8_t f[FRAME_SIZE];
    memcpy(f, base_ + frame, FRAME_SIZE);
    uint64_t mask, pc;
    memcpy(&mask, f + UC_SIGMASK, 8);
    sigmask_ = mask & ~UNBLOCKABLE;
    memcpy(&pc, f + MCONTEXT, 8);
    memcpy(&regs_[1], f + MCONTEXT + 8, 31 * 8);
    memcpy(&regs_[FREG], f + FP, 32 * 8);
    uint32_t fcsr;
    memcpy(&fcsr, f + FCSR, 4);
    fcsr_ = fcsr & 0xff;
    // the alternate stack as uc_stack has it (as Linux: unless the program
    // is on it now; an error is no error here)
    set_altstack(frame + UC_STACK, 0, regs_[2]);
    redirect_ = true;
    redirect_pc_ = pc;
    return regs_[10];
}

int64_t Machine::set_altstack(uint64_t ss_at, uint64_t old_at, uint64_t sp)
{
    uint64_t old[3] = {alt_sp_, alt_stack_flags(sp) | (alt_flags_ & SS_AUTODISARM_), alt_size_};
    if (ss_at) {
        uint64_t ss[3]; // ss_sp, ss_flags (an int), ss_size
        memcpy(ss, user(ss_at, sizeof ss), sizeof ss);
        uint32_t flags = static_cast<uint32_t>(ss[1]), mode = flags & ~SS_AUTODISARM_;
        if (on_alt_stack(sp)) return -EPERM;
        if (mode != SS_DISABLE_ && mode != SS_ONSTACK_ && mode != 0) return -EINVAL;
        if (mode == SS_DISABLE_) {
            ss[0] = ss[2] = 0;
        } else if (ss[2] < MINSIGSTKSZ_) {
            return -ENOMEM;
        }
        alt_sp_ = ss[0];
        alt_size_ = ss[2];
        alt_flags_ = flags;
    }
    if (old_at) memcpy(user(old_at, sizeof old), old, sizeof old);
    return 0;
}

uint64_t Machine::after_call(uint64_t call_pc, uint64_t a0_in)
{
    int64_t restart = 0;
    if (redirect_) { // rt_sigreturn
        pc_ = redirect_pc_;
        redirect_ = false;
    } else {
        int64_t r = static_cast<int64_t>(regs_[10]);
        if (r == -ERESTARTSYS || r == -ERESTARTNOINTR || r == -ERESTARTNOHAND ||
            r == -ERESTART_RESTARTBLOCK)
            restart = r;
    }
    act_on_signals(restart, call_pc, a0_in);
    return pc_;
}

bool Machine::take_fault(const GuestFault &f)
{
    if (interrupted_ && f.pc == INTERRUPTED) { // at_stop()'s handler: its trap
        interrupted_ = false;
        pc_ = resume_pc_;
        instret_++;
        return true;
    }
    if (!f.sig || exited_) throw;
    int sig = f.sig;
    if (sigactions_[sig][0] <= 1 || (sigmask_ & bit(sig))) {
        // no handler to take it (or it is blocked or ignored, and Linux acts
        // as by default): the run ends
        if (sig == SIGBUS && f.code == BUS_ADRERR) { // (as it always has for this fault)
            fflush(stdout);
            fprintf(stderr, "tksim: the program touched a shared file mapping past the file's "
                            "end: it ends as by SIGBUS (exit status 135)\n");
            exited_ = true;
            exit_code_ = 128 + SIGBUS;
            trap_pc_ = pc_ = f.pc;
            return false;
        }
        throw;
    }
    // the instruction did nothing: the trap enters the handler in its place
    // (which returns to it)
    trap_pc_ = pc_ = f.pc;
    enter_handler(sig, siginfo(sig, f.code, sig == SIGILL || sig == SIGTRAP ? f.pc : f.addr));
    act_on_signals(); // (any other signal that is due, entered over it)
    instret_++;
    return true;
}

} // namespace tksim
