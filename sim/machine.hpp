// sim/machine.hpp - tksim's functional RV64GC machine: guest memory, a
// static ELF loader with the Linux initial stack, the architectural state,
// one-instruction execution and the system calls static programs make
// (sim/syscall.cpp says which, and how each is answered).
//
// Guest memory is one reserved range of host address space (guest address
// = offset into it), so a guest access is a bounds check, a test of the
// page's bit and a host access.  Pages are made accessible as the guest
// maps them (the ELF's segments, brk, mmap, the stack), with the
// protection it asks for (mmap, mprotect: a load needs a readable page, a
// store a writable one).  An access the page does not allow is a fault:
// the program's signal (SIGSEGV; SIGBUS past the end of a shared file
// mapping), delivered to its handler if it has one (sim/signal.cpp), or
// the end of the run with the guest PC and address.
#ifndef TKSIM_MACHINE_HPP
#define TKSIM_MACHINE_HPP

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "guestfs.hpp"
#include "rv64.hpp"

namespace tksim
{

// Linux's answers of an interrupted system call, which never reach the
// program: the kernel restarts the call or answers -EINTR instead, by the
// signal's SA_RESTART (ERESTARTSYS), always restarts it (ERESTARTNOINTR),
// or answers -EINTR when a handler runs (ERESTARTNOHAND,
// ERESTART_RESTARTBLOCK).
constexpr int ERESTARTSYS = 512, ERESTARTNOINTR = 513, ERESTARTNOHAND = 514,
              ERESTART_RESTARTBLOCK = 516;
// SIGKILL and SIGSTOP, which no mask blocks
constexpr uint64_t UNBLOCKABLE = (1ull << (9 - 1)) | (1ull << (19 - 1));

// What one executed instruction did, for the timing model.
struct Step {
    uint64_t pc = 0;
    const Inst *inst = nullptr;
    uint64_t next_pc = 0;
    uint64_t addr = 0;  // memory address of a load, store or AMO
    bool taken = false; // a branch or jump went elsewhere than pc + len
};

// A fault of the program's: an instruction the machine cannot run, or an
// access its memory does not allow.  sig is the signal Linux sends the
// program for it (with si_code code), which its handler may take; 0: none,
// the run ends.
class GuestFault
{
  public:
    GuestFault(uint64_t pc, uint64_t addr, const char *what, int sig = 0, int code = 0)
        : pc(pc), addr(addr), what(what), sig(sig), code(code)
    {
    }
    uint64_t pc, addr; // addr: the address, or the instruction's encoding or CSR
    const char *what;
    int sig, code;
};

class Machine
{
  public:
    static constexpr uint64_t SPACE = 1ull << 38;          // guest addresses below 256 GiB
    static constexpr uint64_t MMAP_BASE = 0x2000000000ull; // guest mmap area
    static constexpr uint64_t STACK_TOP = 0x3ffffff000ull; // initial stack top
    static constexpr uint64_t STACK_SIZE = 8ull << 20;
    static constexpr uint64_t MAP_PAGE = 4096; // the mapped bits' page
    // the page above the stack: the return from a signal handler (li a7,
    // 139; ecall: rt_sigreturn), as Linux's vDSO has it
    static constexpr uint64_t SIGRETURN_PAGE = STACK_TOP;

    Machine();
    ~Machine();
    Machine(const Machine &) = delete;
    Machine &operator=(const Machine &) = delete;

    // Loads a static RV64 ELF and builds the initial stack; false with a
    // message in *err on a file that is not one.
    bool load(const std::string &path, const std::vector<std::string> &argv,
              const std::vector<std::string> &envp, std::string *err);

    // Executes one instruction.  One that faults (an illegal instruction,
    // an access its memory does not allow) is not run: the step is the
    // trap instead, which enters the program's handler for the fault's
    // signal; without a handler the fault ends the run, GuestFault thrown.
    // A trap is a step of its own, counted as an instruction, that goes
    // from the instruction it stops (its pc) to the handler (its next_pc,
    // taken): an ecall, for the timing model.  A timer's signal entering a
    // handler between two instructions is such a trap too (at_stop()).
    // (The common integer instructions here, inline in the timing model's
    // loop, where a call costs more than most of them; the rest in
    // step_other().)
    void step(Step *s) { s->inst = &step_into(s); }
    // step() into any record with Step's fields pc, next_pc, addr and
    // taken (the timing model's own): the instruction it ran.
    template <class Out> [[gnu::always_inline]] const Inst &step_into(Out *s)
    {
        try {
            return step_once(s);
        } catch (const GuestFault &f) {
            // (rethrows when the program has no handler to take it)
            bool entered = take_fault(f);
            s->pc = trap_pc_;
            s->next_pc = pc_;
            s->addr = 0;
            s->taken = entered;
            return entered ? trap_ : ended_; // (ended_: the fault ended the program)
        }
    }
    template <class Out> [[gnu::always_inline]] const Inst &step_once(Out *s)
    {
        const Inst &in = fetch(pc_);
        uint64_t pc = pc_, next = pc + in.len;
        s->pc = pc;
        s->addr = 0;
        s->taken = false;
        uint64_t a = reg(in.rs1), b = reg(in.rs2);
        int64_t imm = in.imm;
        uint64_t r = 0;
        bool wr = true; // writes rd
        auto addr = [&] { return s->addr = a + static_cast<uint64_t>(imm); };
        auto branch = [&](bool c) {
            wr = false;
            if (c) {
                next = pc + static_cast<uint64_t>(imm);
                s->taken = true;
            }
        };
        switch (in.op) {
        case LUI:
            r = static_cast<uint64_t>(imm);
            break;
        case AUIPC:
            r = pc + static_cast<uint64_t>(imm);
            break;
        case JAL:
            r = next;
            next = pc + static_cast<uint64_t>(imm);
            s->taken = true;
            break;
        case JALR:
            r = next;
            next = (a + static_cast<uint64_t>(imm)) & ~1ull;
            s->taken = true;
            break;
        case BEQ:
            branch(a == b);
            break;
        case BNE:
            branch(a != b);
            break;
        case BLT:
            branch(static_cast<int64_t>(a) < static_cast<int64_t>(b));
            break;
        case BGE:
            branch(static_cast<int64_t>(a) >= static_cast<int64_t>(b));
            break;
        case BLTU:
            branch(a < b);
            break;
        case BGEU:
            branch(a >= b);
            break;
        case LB:
            r = static_cast<uint64_t>(static_cast<int64_t>(load_mem<int8_t>(addr(), pc)));
            break;
        case LH:
            r = static_cast<uint64_t>(static_cast<int64_t>(load_mem<int16_t>(addr(), pc)));
            break;
        case LW:
            r = static_cast<uint64_t>(static_cast<int64_t>(load_mem<int32_t>(addr(), pc)));
            break;
        case LD:
            r = load_mem<uint64_t>(addr(), pc);
            break;
        case LBU:
            r = load_mem<uint8_t>(addr(), pc);
            break;
        case LHU:
            r = load_mem<uint16_t>(addr(), pc);
            break;
        case LWU:
            r = load_mem<uint32_t>(addr(), pc);
            break;
        case SB:
            store_mem<uint8_t>(addr(), static_cast<uint8_t>(b), pc);
            wr = false;
            break;
        case SH:
            store_mem<uint16_t>(addr(), static_cast<uint16_t>(b), pc);
            wr = false;
            break;
        case SW:
            store_mem<uint32_t>(addr(), static_cast<uint32_t>(b), pc);
            wr = false;
            break;
        case SD:
            store_mem<uint64_t>(addr(), b, pc);
            wr = false;
            break;
        case ADDI:
            r = a + static_cast<uint64_t>(imm);
            break;
        case SLTI:
            r = static_cast<int64_t>(a) < imm;
            break;
        case SLTIU:
            r = a < static_cast<uint64_t>(imm);
            break;
        case XORI:
            r = a ^ static_cast<uint64_t>(imm);
            break;
        case ORI:
            r = a | static_cast<uint64_t>(imm);
            break;
        case ANDI:
            r = a & static_cast<uint64_t>(imm);
            break;
        case SLLI:
            r = a << (imm & 63);
            break;
        case SRLI:
            r = a >> (imm & 63);
            break;
        case SRAI:
            r = static_cast<uint64_t>(static_cast<int64_t>(a) >> (imm & 63));
            break;
        case ADD:
            r = a + b;
            break;
        case SUB:
            r = a - b;
            break;
        case SLL:
            r = a << (b & 63);
            break;
        case SLT:
            r = static_cast<int64_t>(a) < static_cast<int64_t>(b);
            break;
        case SLTU:
            r = a < b;
            break;
        case XOR:
            r = a ^ b;
            break;
        case SRL:
            r = a >> (b & 63);
            break;
        case SRA:
            r = static_cast<uint64_t>(static_cast<int64_t>(a) >> (b & 63));
            break;
        case OR:
            r = a | b;
            break;
        case AND:
            r = a & b;
            break;
        case ADDIW:
            r = static_cast<uint64_t>(sext32(a + static_cast<uint64_t>(imm)));
            break;
        case SLLIW:
            r = static_cast<uint64_t>(sext32(a << (imm & 31)));
            break;
        case SRLIW:
            r = static_cast<uint64_t>(sext32(static_cast<uint32_t>(a) >> (imm & 31)));
            break;
        case SRAIW:
            r = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(a) >> (imm & 31)));
            break;
        case ADDW:
            r = static_cast<uint64_t>(sext32(a + b));
            break;
        case SUBW:
            r = static_cast<uint64_t>(sext32(a - b));
            break;
        case SLLW:
            r = static_cast<uint64_t>(sext32(a << (b & 31)));
            break;
        case SRLW:
            r = static_cast<uint64_t>(sext32(static_cast<uint32_t>(a) >> (b & 31)));
            break;
        case SRAW:
            r = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(a) >> (b & 31)));
            break;
        default: {
            Step t;
            step_other(&t, in);
            s->addr = t.addr;
            s->next_pc = t.next_pc;
            s->taken = t.taken; // (a system call that entered a handler or returned from one)
            return in;
        }
        }
        if (wr) set_reg(in.rd, r);
        s->next_pc = next;
        pc_ = next;
        instret_++;
        return in;
    }

    // The instruction count at which the run loops call at_stop(): the
    // run's limit (set_max_insns) or the next expiry of a timer that
    // raises a signal, whichever comes first (the loops compare the count
    // with it as they would with the limit alone).
    uint64_t stop_at() const { return stop_at_; }
    void set_max_insns(uint64_t n)
    {
        max_insns_ = n ? n : ~0ull;
        rearm();
    }
    // At stop_at(): sends the signals of the timers due, which may enter
    // the program's handlers or end it; true when the run stops here (its
    // limit, or its end).
    bool at_stop();

    bool exited() const { return exited_; }
    int exit_code() const { return exit_code_; }
    uint64_t pc() const { return pc_; }
    uint64_t instret() const { return instret_; }
    // (regs_[NOREG] reads as 0: a write there is undone at once, which
    // costs less than a test)
    uint64_t reg(uint8_t r) const { return regs_[r]; }
    void set_reg(uint8_t r, uint64_t v)
    {
        regs_[r] = v;
        regs_[NOREG] = 0;
    }
    void set_pc(uint64_t pc) { pc_ = pc; }
    // A hash of the architectural state: x1-x31, f0-f31, the PC.
    uint64_t state_hash() const
    {
        uint64_t h = 0xcbf29ce484222325ull;
        for (int r = 1; r < 64; r++) h = (h ^ regs_[r]) * 0x100000001b3ull;
        return (h ^ pc_) * 0x100000001b3ull;
    }

    // Guest memory: the host pointer for a guest range a load (W false) or
    // a store (W true) may access; GuestFault otherwise.
    template <bool W> uint8_t *host(uint64_t addr, uint64_t len, uint64_t pc)
    {
        if (addr >= SPACE || addr + len > SPACE || !allows(addr / MAP_PAGE, W) ||
            !allows((addr + len - 1) / MAP_PAGE, W))
            denied(addr, len, pc, W);
        return base_ + addr;
    }
    template <class T> T load_mem(uint64_t a, uint64_t pc)
    {
        T v;
        memcpy(&v, host<false>(a, sizeof v, pc), sizeof v);
        return v;
    }
    template <class T> void store_mem(uint64_t a, T v, uint64_t pc)
    {
        memcpy(host<true>(a, sizeof v, pc), &v, sizeof v);
    }
    // Maps [addr, addr + len) readable and writable (page-rounded).
    bool map(uint64_t addr, uint64_t len);

    // The decoded instruction at pc (cached).
    const Inst &fetch(uint64_t pc)
    {
        const Cached &c = icache_[(pc >> 1) & (DECODE_CACHE_SIZE - 1)];
        if (c.tag == (pc | decode_epoch_) && pc < SPACE) return c.inst;
        return fetch_miss(pc);
    }
    // Forgets every decoded instruction, so code written since runs as
    // written: fence.i, riscv_flush_icache and changes to the guest's
    // mappings call it.  It costs an increment (see decode_epoch_).
    void flush_decoded();

    // Makes dir the guest's root directory, which it may write in
    // (GuestFs::set_root); false with a message.
    bool set_fs_root(const std::string &dir, std::string *err) { return fs_.set_root(dir, err); }

    uint64_t syscalls = 0;

  private:
    // (the other instructions: into s's addr, 0 before, and next_pc)
    [[gnu::noinline]] void step_other(Step *s, const Inst &in);
    static int64_t sext32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
    uint64_t syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                     uint64_t a5);
    uint64_t file_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                          uint64_t a4, uint64_t a5);
    uint64_t unsupported(uint64_t n); // reported once; -ENOSYS
    uint64_t memory_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                            uint64_t a4, uint64_t a5);
    // A guest buffer of a system call: the host pointer, or Efault (the
    // call answers -EFAULT) when any of its pages is not mapped.
    struct Efault {
    };
    uint8_t *user(uint64_t addr, uint64_t len);
    bool guest_path(uint64_t addr, std::string *out);
    uint64_t do_mmap(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off);
    uint64_t do_mremap(uint64_t old, uint64_t old_len, uint64_t len, int flags, uint64_t to);
    // The pages' bits.  A page is held while the program has it mapped,
    // whatever its protection; a load (or an instruction fetch) may read it
    // when its protection has any of PROT_READ, PROT_WRITE and PROT_EXEC,
    // and a store write it when it has PROT_WRITE, unless it is a shared
    // file mapping's page past the file's end (withheld, below).  The
    // read and write bits of 64 pages are two words side by side in perm_
    // (one cache line for both), the held bits a bitmap of their own.
    bool allows(uint64_t page, bool write) const
    {
        return (perm_[(page / 64) * 2 + write] >> (page % 64)) & 1;
    }
    bool held(uint64_t page) const { return (held_[page / 64] >> (page % 64)) & 1; }
    // The protections other than the default (PROT_READ | PROT_WRITE |
    // PROT_EXEC) of held pages: first page -> {page past the last, prot}.
    std::map<uint64_t, std::pair<uint64_t, int>> prot_;
    int prot_of(uint64_t page) const;
    void set_prot(uint64_t lo, uint64_t hi, int prot); // pages [lo, hi), then their bits
    void clear_prot(uint64_t lo, uint64_t hi); // pages [lo, hi): the default (not their bits)
    void set_perm(uint64_t lo, uint64_t hi);   // pages [lo, hi), held: their bits again
    // A load or store that its pages do not allow: the fault, classified
    // (SIGSEGV's SEGV_MAPERR or SEGV_ACCERR, SIGBUS's BUS_ADRERR).
    [[noreturn, gnu::cold]] void denied(uint64_t addr, uint64_t len, uint64_t pc, bool write) const;
    [[noreturn, gnu::cold]] static void illegal(uint64_t pc, uint32_t raw); // throws GuestFault
    bool range_mapped(uint64_t addr, uint64_t len) const; // readable (a system call's buffer)
    bool range_held(uint64_t addr, uint64_t len) const;
    bool range_free(uint64_t addr, uint64_t len) const;
    void unmap(uint64_t addr, uint64_t len); // page-rounded; the contents are dropped

    // The program's MAP_SHARED file mappings, by their first guest address.
    // Each is the file itself mapped in place on the host, so reads see the
    // file as it is now and writes reach it (through the page cache, as on
    // Linux): shared with the host for a descriptor open for writing,
    // private for one open read-only (the program may not write there, and
    // a private host mapping reads the file as it changes until a page is
    // written).  A page past the file's end (as the file is at the last
    // system call) is withheld: an access there is the program's SIGBUS,
    // as on Linux (a file made shorter by another process since is the
    // host's SIGBUS, which ends the run).  Empty unless the program maps a
    // file shared, and then only the system calls that map and unmap look
    // at it, and the end of each system call at the files' sizes.
    struct FileMap {
        uint64_t end;    // the guest address past its last page
        int fd;          // the file (a host descriptor of tksim's own)
        uint64_t off;    // the file's offset at the first page
        int host_flags;  // MAP_SHARED or MAP_PRIVATE
        uint64_t filled; // the guest address past the last page the file reaches
    };
    std::map<uint64_t, FileMap> file_maps_;
    // Maps the file at [at, at + len) (mapped already) and keeps a
    // descriptor of its own; 0 or -errno.
    int64_t map_file(uint64_t at, uint64_t len, int fd, uint64_t off, int host_flags);
    // The file mapping that holds addr, or nullptr.
    const std::pair<const uint64_t, FileMap> *file_map_at(uint64_t addr) const;
    // Forgets the file mappings' pages in [lo, hi) (unmap()).
    void forget_file_maps(uint64_t lo, uint64_t hi);
    // Each file mapping's pages withheld, or no longer, by its file's size now.
    void check_file_sizes();
    bool withheld(uint64_t page) const
    {
        if (file_maps_.empty()) return false;
        const auto *fm = file_map_at(page * MAP_PAGE);
        return fm && page * MAP_PAGE >= fm->second.filled;
    }
    uint64_t clock_ns(int clock) const;

    // Timers: setitimer's three (ITIMER_REAL, _VIRTUAL, _PROF) at 0-2,
    // timer_create's from 3 on (timer id = index - 3).  A timer expires
    // on its clock, which runs with the instructions (and the sleeps, for
    // the wall clocks); an expiry sends its signal between instructions,
    // at the count stop_at() names.
    struct Timer {
        bool used = false;
        int clock = 0;         // the clock's id (2: the process's CPU time)
        int sig = 0;           // its signal; 0: none (SIGEV_NONE)
        uint64_t value = 0;    // the expiry on its clock, in ns; 0: disarmed
        uint64_t interval = 0; // a periodic timer's period, ns
        int overrun = 0;       // the expiries past the first at the last raise
        uint64_t sigval = 0;   // a POSIX timer's sigev_value (its signal's si_value)
    };
    std::vector<Timer> timers_ = std::vector<Timer>(3);
    uint64_t max_insns_ = ~0ull, stop_at_ = ~0ull;
    void rearm();    // stop_at_ again, after a change to the timers or the clocks
    void fire_due(); // sends the signals of the timers that expired
    // The time in ns to the next expiry that would act on the program (its
    // signal not blocked, not ignored) of a wall-clock timer, the only ones
    // that expire while it waits; ~0 when there is none.
    uint64_t next_wake() const;
    // The time left of timer t (0 when disarmed).
    uint64_t time_left(const Timer &t) const;
    // Waits with the clocks running on (no real waiting) until a timer's
    // signal acts on the program (a handler's to enter, or its end); false
    // when none would ever come (it would wait for ever).  At most limit
    // ns: false when that much went by first.
    bool wait_for_signal(uint64_t limit = ~0ull);
    // ppoll's and pselect6's wait with nothing to wait for but a signal:
    // the clocks run on by want ns (the timespec at ts_at then zero) or,
    // without one (ts_at 0), until a signal acts, with the signals of mask
    // blocked meanwhile; 0, -ERESTARTNOHAND (the program's handler is
    // entered; the call answers -EINTR), or unsupported() when nothing
    // would end the wait.
    uint64_t idle(uint64_t n, uint64_t ts_at, uint64_t want, uint64_t mask);
    // A wait in a call that blocks (read on an empty pipe, ppoll and
    // pselect6 on descriptors none of which is ready): when a timer's
    // signal would act before timeout ns (~0: none), the clocks run on to
    // it and the call is interrupted (true); the wait is the host's
    // otherwise (false), as the descriptors are not the program's alone.
    bool interrupted_wait(uint64_t timeout);
    // interrupted_wait() with the signals of mask blocked meanwhile (ppoll's,
    // pselect6's), which stay so for the handler when it was interrupted
    bool wait_interrupted(uint64_t timeout, uint64_t mask);
    bool would_block(int fd) const; // a read of host descriptor fd would wait (a pipe, a socket)
    uint64_t piped(uint64_t r);     // a write's answer r; -EPIPE sends the program SIGPIPE

    // Signals, as Linux has them for a process of one thread.  A signal
    // sent (kill, tkill, tgkill, rt_sigqueueinfo, a timer's expiry, a
    // fault) waits, pending, while the program blocks it; one not blocked
    // is acted on at the next point where Linux would look - the end of a
    // system call, the instruction boundary of a timer's expiry, the fault
    // itself: its default action (the program's end as by the signal, or
    // nothing), nothing when ignored, or the handler entered, with the
    // frame on the stack (the alternate one with SA_ONSTACK) as
    // arch/riscv/kernel/signal.c builds it - struct rt_sigframe: siginfo_t,
    // then a ucontext with the registers, the floating-point ones and
    // fcsr, the mask to restore and the alternate stack - and ra at the
    // page SIGRETURN_PAGE, whose rt_sigreturn takes it all back.  Signals
    // below SIGRTMIN are pending once at most; real-time ones queue.
    struct SigInfo {
        uint8_t b[128] = {}; // siginfo_t, as the program reads it
    };
    // A siginfo_t: si_signo, si_code and the union's first two words (at
    // bytes 16 and 24: si_pid and si_uid, si_value; si_timerid and
    // si_overrun, si_value; si_addr).
    static SigInfo siginfo(int sig, int code, uint64_t w16 = 0, uint64_t w24 = 0);
    std::vector<SigInfo> queued_[65]; // pending, by signal
    uint64_t pending_ = 0;            // the signals with one queued (bit sig - 1)
    void send(int sig, const SigInfo &info);
    // The default action that is not to ignore: the program ends as by the
    // signal (one that would stop it too, said on stderr).
    void end_by(int sig);
    // The signal of ready (a set of them) to take first: a fault's, then the
    // lowest, as Linux takes them.
    static int next_signal(uint64_t ready);
    SigInfo dequeue(int sig); // its first pending instance
    // The program's action for sig is to do nothing (SIG_IGN, or the default
    // for SIGCHLD, SIGCONT, SIGURG, SIGWINCH).
    bool ignores(int sig) const;
    // A pending signal's action, at an instruction boundary where pc_ is the
    // next instruction: each signal pending and not blocked in turn (the
    // faults' first, then by number) until none is, as Linux does on its way
    // back to the program: ignored, the program ended, or its handler
    // entered (the last entered runs first).  restart: a system call's
    // -ERESTART* answer (in a0; call_pc the ecall, a0_in its first
    // argument), which the first handler turns into -EINTR or a restart, as
    // Linux does.
    void act_on_signals(int64_t restart = 0, uint64_t call_pc = 0, uint64_t a0_in = 0);
    // Enters sig's handler at pc_ (GuestFault, which ends the run, when the
    // frame does not fit where it must go).
    void enter_handler(int sig, const SigInfo &info);
    uint64_t sigreturn(); // rt_sigreturn: the frame at sp taken back
    // A fault of step(): its signal sent and its handler entered (true: the
    // trap, from trap_pc_), or the program ended (false), or the fault
    // rethrown when it has no handler to take it (the end of the run).
    // Also the trap of a timer's signal that at_stop() entered a handler
    // for: it leaves pc_ at INTERRUPTED (interrupted_ set), whose fetch
    // faults, so that the next step is the trap - the run loops test
    // nothing more for it.
    [[gnu::cold, gnu::noinline]] bool take_fault(const GuestFault &f);
    static constexpr uint64_t INTERRUPTED = SPACE; // (no guest pc)
    bool interrupted_ = false;
    uint64_t resume_pc_ = 0;          // (the handler, while pc_ is INTERRUPTED)
    uint64_t trap_pc_ = 0;            // the pc the last trap stopped
    Inst trap_ = decode(0x00000073);  // a trap's step: an ecall
    Inst ended_ = decode(0x00000013); // the step a fault ended the program at: a no-op
    // A system call's end: where it goes (a handler entered, or the one
    // rt_sigreturn returns to), from call_pc, its ecall.
    [[gnu::cold]] uint64_t after_call(uint64_t call_pc, uint64_t a0_in);
    bool redirect_ = false; // rt_sigreturn: the program goes on at redirect_pc_
    uint64_t redirect_pc_ = 0;
    // rt_sigsuspend, ppoll and pselect6 wait with a mask of their own: the
    // one to restore after it (in the first handler's frame, if they enter
    // one)
    bool restore_mask_ = false;
    uint64_t saved_mask_ = 0;
    // sigaltstack(2) with the program's sp (Linux's do_sigaltstack): 0 or
    // -errno
    int64_t set_altstack(uint64_t ss_at, uint64_t old_at, uint64_t sp);
    bool on_alt_stack(uint64_t sp) const
    {
        return !(alt_flags_ & (1u << 31)) && sp > alt_sp_ && sp - alt_sp_ <= alt_size_;
    }
    uint32_t alt_stack_flags(uint64_t sp) const // SS_DISABLE, SS_ONSTACK or 0
    {
        return alt_size_ == 0 ? 2 : on_alt_stack(sp) ? 1 : 0;
    }
    uint64_t timer_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3);

    uint8_t *base_ = nullptr;
    std::string exe_path_;          // the program's absolute path (/proc/self/exe)
    uint64_t *perm_ = nullptr;      // (allows(): 2 words per 64 pages; zero until written)
    uint64_t *held_ = nullptr;      // (held(): 1 word per 64 pages)
    size_t bits_bytes_ = 0;         // (both, in one host mapping)
    uint64_t regs_[NOREG + 1] = {}; // x, f, k; regs_[NOREG] is always 0
    uint64_t pc_ = 0, instret_ = 0;
    uint32_t fcsr_ = 0;
    uint64_t brk_start_ = 0, brk_ = 0, mmap_next_ = MMAP_BASE;
    // The first page address from `from` where len bytes are free below the
    // stack, or NO_ROOM.
    static constexpr uint64_t NO_ROOM = ~0ull;
    uint64_t find_free(uint64_t from, uint64_t len) const;
    uint64_t reservation_ = ~0ull;
    bool exited_ = false;
    int exit_code_ = 0;
    uint64_t random_state_ = 0x9e3779b97f4a7c15ull;

    // what the system calls keep (sim/syscall.cpp)
    GuestFs fs_;
    static constexpr uint64_t NOLIMIT = ~0ull;
    uint64_t rlimits_[16][2] = {
        // cur, max: fixed (runs repeat), as a Debian system starts a program
        {NOLIMIT, NOLIMIT},       // RLIMIT_CPU
        {NOLIMIT, NOLIMIT},       // RLIMIT_FSIZE
        {NOLIMIT, NOLIMIT},       // RLIMIT_DATA
        {STACK_SIZE, NOLIMIT},    // RLIMIT_STACK: the initial stack's size
        {0, NOLIMIT},             // RLIMIT_CORE
        {NOLIMIT, NOLIMIT},       // RLIMIT_RSS
        {63459, 63459},           // RLIMIT_NPROC
        {1024, 4096},             // RLIMIT_NOFILE (GuestFs::max_fds)
        {8ull << 20, 8ull << 20}, // RLIMIT_MEMLOCK
        {NOLIMIT, NOLIMIT},       // RLIMIT_AS
        {NOLIMIT, NOLIMIT},       // RLIMIT_LOCKS
        {63459, 63459},           // RLIMIT_SIGPENDING
        {819200, 819200},         // RLIMIT_MSGQUEUE
        {0, 0},                   // RLIMIT_NICE
        {0, 0},                   // RLIMIT_RTPRIO
        {NOLIMIT, NOLIMIT},       // RLIMIT_RTTIME
    };
    uint64_t sigactions_[65][3] = {}; // handler, flags, mask (riscv64's struct sigaction)
    uint64_t sigmask_ = 0;
    uint64_t alt_sp_ = 0, alt_size_ = 0; // the alternate signal stack (size 0: none)
    uint32_t alt_flags_ = 0;             // its flags as set (SS_AUTODISARM: bit 31)
    uint64_t slept_ns_ = 0;              // the clocks run on by the program's sleeps
    char thread_name_[16] = {};          // prctl(PR_SET_NAME): the program's name at the start
    std::set<uint64_t> reported_;        // unsupported system calls already reported

    // The decoded-instruction cache: direct-mapped by PC.  An entry's tag
    // is its PC (below SPACE, 2^38) with the epoch it was decoded in above
    // bit 38; flush_decoded() starts a new epoch, so every older entry
    // misses from then on without being touched.  After 2^26 flushes the
    // epoch wraps to 0 and the tags are cleared (~0 is no PC's tag: PCs
    // are even).
    static constexpr size_t DECODE_CACHE_SIZE = 1u << 16; // entries, a power of 2
    static constexpr unsigned EPOCH_SHIFT = 38;
    static_assert(SPACE == 1ull << EPOCH_SHIFT, "a PC fits below the epoch");
    struct alignas(64) Cached { // (one cache line each: the vector aligns them)
        uint64_t tag = ~0ull;
        Inst inst;
    };
    static_assert(sizeof(Cached) == 64, "a decoded instruction and its tag: one cache line");
    std::vector<Cached> icache_;
    const Inst &fetch_miss(uint64_t pc); // fetch(), decoding it
    uint64_t decode_epoch_ = 0;
};

} // namespace tksim

#endif
