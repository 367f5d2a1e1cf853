// sim/machine.hpp - tksim's functional RV64GC machine: guest memory, a
// static ELF loader with the Linux initial stack, the architectural state,
// one-instruction execution and the system calls static programs make
// (sim/syscall.cpp says which, and how each is answered).
//
// Guest memory is one reserved range of host address space (guest address
// = offset into it), so a guest access is a bounds check and a host
// access.  Pages are made accessible as the guest maps them (the ELF's
// segments, brk, mmap, the stack); an access to a page the guest has not
// mapped stops the run with the guest PC and address.
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

// What one executed instruction did, for the timing model.
struct Step {
    uint64_t pc = 0;
    const Inst *inst = nullptr;
    uint64_t next_pc = 0;
    uint64_t addr = 0;  // memory address of a load, store or AMO
    bool taken = false; // a branch or jump went elsewhere than pc + len
};

class GuestFault
{
  public:
    GuestFault(uint64_t pc, uint64_t addr, const char *what) : pc(pc), addr(addr), what(what) {}
    uint64_t pc, addr;
    const char *what;
};

class Machine
{
  public:
    static constexpr uint64_t SPACE = 1ull << 38;          // guest addresses below 256 GiB
    static constexpr uint64_t MMAP_BASE = 0x2000000000ull; // guest mmap area
    static constexpr uint64_t STACK_TOP = 0x3ffffff000ull; // initial stack top
    static constexpr uint64_t STACK_SIZE = 8ull << 20;
    static constexpr uint64_t MAP_PAGE = 4096; // the mapped bits' page

    Machine();
    ~Machine();
    Machine(const Machine &) = delete;
    Machine &operator=(const Machine &) = delete;

    // Loads a static RV64 ELF and builds the initial stack; false with a
    // message in *err on a file that is not one.
    bool load(const std::string &path, const std::vector<std::string> &argv,
              const std::vector<std::string> &envp, std::string *err);

    // Executes one instruction; throws GuestFault on an illegal
    // instruction or an access to unmapped memory.  (The common integer
    // instructions here, inline in the timing model's loop, where a call
    // costs more than most of them; the rest in step_other().)
    void step(Step *s) { s->inst = &step_into(s); }
    // step() into any record with Step's fields pc, next_pc, addr and
    // taken (the timing model's own): the instruction it ran.
    template <class Out> [[gnu::always_inline]] const Inst &step_into(Out *s)
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
    // At stop_at(): raises the signals of the timers due (which may end the
    // program); true when the run stops here (its limit, or its end).
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

    // Guest memory (host pointer for a guest range that is mapped).
    uint8_t *host(uint64_t addr, uint64_t len, uint64_t pc)
    {
        if (addr >= SPACE || addr + len > SPACE || !mapped(addr / MAP_PAGE) ||
            !mapped((addr + len - 1) / MAP_PAGE))
            unmapped(addr, pc);
        return base_ + addr;
    }
    template <class T> T load_mem(uint64_t a, uint64_t pc)
    {
        T v;
        memcpy(&v, host(a, sizeof v, pc), sizeof v);
        return v;
    }
    template <class T> void store_mem(uint64_t a, T v, uint64_t pc)
    {
        memcpy(host(a, sizeof v, pc), &v, sizeof v);
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
    bool mapped(uint64_t page) const { return (map_bits_[page / 64] >> (page % 64)) & 1; }
    [[noreturn, gnu::cold]] static void unmapped(uint64_t addr, uint64_t pc); // throws GuestFault
    [[noreturn, gnu::cold]] static void illegal(uint64_t pc, uint32_t raw);   // throws GuestFault
    bool range_mapped(uint64_t addr, uint64_t len) const;
    bool range_free(uint64_t addr, uint64_t len) const;
    void unmap(uint64_t addr, uint64_t len); // page-rounded; the contents are dropped

    // The program's MAP_SHARED file mappings, by their first guest address.
    // Each is the file itself mapped in place on the host, so reads see the
    // file as it is now and writes reach it (through the page cache, as on
    // Linux): shared with the host for a descriptor open for writing,
    // private for one open read-only (the program may not write there, and
    // a private host mapping reads the file as it changes until a page is
    // written).  Empty unless the program maps a file shared, and then
    // only the system calls that map and unmap look at it.
    struct FileMap {
        uint64_t end;   // the guest address past its last page
        int fd;         // the file (a host descriptor of tksim's own)
        uint64_t off;   // the file's offset at the first page
        int host_flags; // MAP_SHARED or MAP_PRIVATE
    };
    std::map<uint64_t, FileMap> file_maps_;
    // Maps the file at [at, at + len) (mapped already) and keeps a
    // descriptor of its own; 0 or -errno.
    int64_t map_file(uint64_t at, uint64_t len, int fd, uint64_t off, int host_flags);
    // The file mapping that holds addr, or nullptr.
    const std::pair<const uint64_t, FileMap> *file_map_at(uint64_t addr) const;
    // Forgets the file mappings' pages in [lo, hi) (unmap()).
    void forget_file_maps(uint64_t lo, uint64_t hi);
    uint64_t clock_ns(int clock) const;

    // Timers: setitimer's three (ITIMER_REAL, _VIRTUAL, _PROF) at 0-2,
    // timer_create's from 3 on (timer id = index - 3).  A timer expires
    // on its clock, which runs with the instructions (and the sleeps, for
    // the wall clocks); an expiry raises its signal between instructions,
    // at the count stop_at() names.  tksim runs no signal handler: a
    // signal raised ends the program as its default action would, is
    // dropped when ignored, or waits when blocked (rt_sigtimedwait takes
    // it); one the program catches ends it too, with a message.
    struct Timer {
        bool used = false;
        int clock = 0;         // the clock's id (2: the process's CPU time)
        int sig = 0;           // its signal; 0: none (SIGEV_NONE)
        uint64_t value = 0;    // the expiry on its clock, in ns; 0: disarmed
        uint64_t interval = 0; // a periodic timer's period, ns
        int overrun = 0;       // the expiries past the first at the last raise
    };
    std::vector<Timer> timers_ = std::vector<Timer>(3);
    uint64_t max_insns_ = ~0ull, stop_at_ = ~0ull;
    uint64_t pending_ = 0;    // signals raised while blocked (bit sig - 1)
    void rearm();             // stop_at_ again, after a change to the timers or the clocks
    void fire_due();          // raises the signals of the timers that expired
    void raise(uint64_t sig); // a signal to the process (above)
    bool catches(int sig) const { return sig > 0 && sigactions_[sig][0] > 1; }
    // The time in ns to the next expiry that would act on the program (its
    // signal not blocked, not ignored) of a wall-clock timer, the only ones
    // that expire while it waits; ~0 when there is none.
    uint64_t next_wake() const;
    // The time left of timer t (0 when disarmed).
    uint64_t time_left(const Timer &t) const;
    // Waits with the clocks running on (no real waiting) until a timer's
    // signal acts on the program, which it ends; false when none would ever
    // come (it would wait for ever).
    bool wait_for_signal();
    // ppoll's and pselect6's wait with nothing to wait for but a signal:
    // the clocks run on by want ns (the timespec at ts_at then zero) or,
    // without one (ts_at 0), until a timer's signal ends the program, with
    // the signals of mask blocked meanwhile; 0, -EINTR, or unsupported()
    // when nothing would end the wait.
    uint64_t idle(uint64_t n, uint64_t ts_at, uint64_t want, uint64_t mask);
    uint64_t timer_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3);

    uint8_t *base_ = nullptr;
    std::string exe_path_;           // the program's absolute path (/proc/self/exe)
    std::vector<uint64_t> map_bits_; // one bit per 4 KiB guest page: mapped
    uint64_t regs_[NOREG + 1] = {};  // x, f, k; regs_[NOREG] is always 0
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
    uint64_t altstack_[3] = {0, 2, 0}; // sp, flags (SS_DISABLE), size
    uint64_t slept_ns_ = 0;            // the clocks run on by the program's sleeps
    char thread_name_[16] = {};        // prctl(PR_SET_NAME): the program's name at the start
    std::set<uint64_t> reported_;      // unsupported system calls already reported

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
