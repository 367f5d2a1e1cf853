// sim/core.hpp - tksim's timing model: an out-of-order core like the Alpha
// 21264 of Jaleel & Jacob's section 4.1, driven by the functional machine,
// with a software-managed data TLB whose misses run a real handler in the
// pipeline, taken one of three ways (traditional, append, prepend).
//
// Stages, each a step of its own with a queue after it:
//   fetch (I-cache, branch predictor) -> fetch queue -> decode -> decode
//   queue -> rename/dispatch (ROB, issue queues, load/store queues,
//   physical registers) -> issue (integer and floating-point queues to
//   their units) -> execute (D-cache, data TLB probe) -> complete -> commit.
// The functional machine runs ahead of fetch and supplies the correct
// path (no wrong-path instructions: a mispredicted branch stops fetch
// until it executes); instructions fetched but not committed stay in a
// stream buffer, so a flush re-fetches them from there.
//
// The data TLB decides misses in program order, at commit, so a run's
// misses are those of a functional TLB fed the committed accesses: an
// access probes the TLB when it executes (a miss holds it, flagged), and
// when it reaches the head of the ROB its page is looked up for good (a
// hit updates the replacement state; a miss runs the handler).
//
// A miss the handler cannot be in-lined for (append, prepend) falls back
// to the traditional flush; the fit check counts every resource the
// handler and the program's instructions ahead of it need (ROB, issue
// queues, load and store queues, registers), so in-lining cannot
// deadlock.  A flush removes the program's instructions only: an
// in-lined handler still in the ROB finishes and commits (every handler
// taken commits once).  Branches and mispredictions are counted at
// commit, so re-fetched ones count once.
//
// Two memos skip simulation without changing any result: a handler run
// alone after a flush, and a segment - the run from an empty pipeline to
// the next - are each replayed from the outcomes of what they ask of the
// caches, the TLB, the predictor and the functional machine, when those
// outcomes have been seen before (see AloneNode and SegNode below).
#ifndef TKSIM_CORE_HPP
#define TKSIM_CORE_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "machine.hpp"

namespace tksim
{

enum class Scheme { TRADITIONAL, APPEND, PREPEND };
constexpr uint64_t NEVER_CYCLE = ~0ull;
enum class Replacement { LRU, ROUND_ROBIN };

struct Config {
    // widths and sizes (Alpha 21264-like)
    int fetch_width = 4, decode_width = 4, rename_width = 4, issue_width = 4, commit_width = 4;
    int fetch_queue = 8, decode_queue = 8; // entries between the stages
    int rob_size = 80;
    int iq_int = 20, iq_fp = 15;
    int int_units = 4, fp_units = 2, mem_ports = 2;
    int load_queue = 32, store_queue = 32;
    int rename_int = 41, rename_fp = 41; // physical registers beyond the architectural ones
    // latencies (cycles)
    int lat_int = 1, lat_mul = 7, lat_div = 20, lat_fp = 4, lat_fdiv = 15;
    int lat_load = 3;           // address, TLB and an L1 hit: load to use
    int mem_latency = 60;       // an L1 miss
    int mispredict_penalty = 2; // cycles after the branch executes until fetch resumes
    // caches: 64 KiB, 2-way, 64-byte lines
    int l1i_size = 65536, l1i_assoc = 2, l1d_size = 65536, l1d_assoc = 2, line = 64;
    // branch prediction: gshare with this many bits of history/index
    int bpred_bits = 12;
    // the data TLB
    int tlb_entries = 64;
    Replacement tlb_replacement = Replacement::LRU;
    int page_bits = 13; // 8 KiB pages
    Scheme scheme = Scheme::TRADITIONAL;
    // a cycle count with no commit after which the run stops as stuck
    uint64_t stuck_cycles = 200000;
    // 1: the program's instructions already fetched dispatch before an
    // appended handler, so their room (ROB, issue queues, load/store
    // queues, registers) must be there too before it is in-lined - a rule
    // stricter than the paper's, where the program's dispatch stalls while
    // the handler goes in (as with prepend: 0, the default)
    int append_after_frontend = 0;
    // 1: the handler's instructions take integer issue-queue entries like
    // any others (the paper's section 4.1, and a 21264): in-lining needs
    // one free; 0: they wait beside the queue and issue from there, oldest
    // first with the rest (the paper's section 3, where an instruction's
    // state is all in its ROB entry): the queue's room does not matter
    int handler_iq = 1;
    // 1: runs from an empty pipeline that repeat earlier ones are replayed
    // from a record instead of simulated again (docs/tksim.md, "Speed"),
    // with the same results; 0: every cycle simulated
    int memo = 1;
    // a test hook: the handler's TLB write is lost, so the access that
    // missed waits for ever (the stuck-pipeline check must catch it)
    int inject_lost_fill = 0;

    // key = value lines; '#' comments.  False with a message on a bad line.
    bool read(const std::string &path, std::string *err);
    bool set(const std::string &key, const std::string &value, std::string *err);
    std::string describe() const;
    bool line_ok() const; // the caches' sizes make whole, power-of-two sets
    // line_ok(), and a stuck_cycles no correct run reaches with these
    // latencies: the whole configuration's check, once every value is set.
    // False with a message.
    bool check(std::string *err) const;
};

struct Stats {
    // (every field up to commit_hash a uint64_t counter: a replayed segment
    // adds to them as one array, Core::SegEnd)
    uint64_t cycles = 0, user_insns = 0, handler_insns = 0;
    uint64_t tlb_misses = 0;   // handler invocations (program-order misses)
    uint64_t tlb_accesses = 0; // committed user memory accesses
    uint64_t inlined = 0, fallback_rob = 0, fallback_iq = 0, fallback_regs = 0, fallback_lsq = 0;
    // handlers whose last instruction committed: all of them, and the
    // in-lined ones; of those, the in-lined handlers a later miss's flush
    // found still in flight (the flush keeps them: they commit after it)
    uint64_t handlers_committed = 0, inlined_committed = 0, inlined_kept = 0;
    uint64_t flushes = 0;
    // instructions flushed, by how far they had got
    uint64_t flushed_done = 0, flushed_issued = 0, flushed_waiting = 0, flushed_frontend = 0;
    uint64_t rob_occupancy_at_miss = 0;   // summed over misses (ROB entries in use when taken)
    uint64_t detections = 0;              // accesses whose TLB probe missed when they executed
    uint64_t rob_occupancy_at_detect = 0; // summed over detections
    uint64_t replays = 0;                 // accesses re-armed by a TLB fill
    // executing-list entries that finished for a uop no longer executing as
    // the entry started it (an access re-armed while still in the list, or
    // a record reused since): a defect if ever non-zero (such an entry is
    // dropped)
    uint64_t stale_completions = 0;
    uint64_t branches = 0, mispredicts = 0; // committed conditional branches and JALRs
    uint64_t l1d_misses = 0, l1i_misses = 0, l1d_accesses = 0;
    uint64_t commit_hash = 0xcbf29ce484222325ull; // of the committed PCs, in order
    double seconds = 0, cpu_seconds = 0;          // the run's wall-clock and CPU time (the host's)
};

// A list of plain values (pointers, numbers): std::vector's part the
// stages use, with its length kept as a count (no division to find it)
// and its room grown out of line.
template <class T> class List
{
  public:
    List() { reserve(16); }
    ~List() { delete[] p_; }
    List(const List &) = delete;
    List &operator=(const List &) = delete;
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    T &operator[](size_t i) { return p_[i]; }
    const T &operator[](size_t i) const { return p_[i]; }
    T *begin() { return p_; }
    T *end() { return p_ + n_; }
    const T *begin() const { return p_; }
    const T *end() const { return p_ + n_; }
    T &front() { return p_[0]; }
    T &back() { return p_[n_ - 1]; }
    void push_back(const T &v)
    {
        if (n_ == cap_) reserve(2 * cap_);
        p_[n_++] = v;
    }
    // push_back() where the list has room (room() made it big enough for
    // every entry it can hold)
    void push_back_fits(const T &v) { p_[n_++] = v; }
    void room(size_t cap)
    {
        if (cap > cap_) reserve(cap);
    }
    void pop_back() { n_--; }
    void clear() { n_ = 0; }
    void shrink(size_t n) { n_ = n; } // to its first n (n <= size())
    // to the entries written past its end up to e (within the room())
    void extend_to(T *e) { n_ = static_cast<size_t>(e - p_); }
    void erase_at(size_t i) // keeping the order
    {
        for (size_t k = i + 1; k < n_; k++) p_[k - 1] = p_[k];
        n_--;
    }

  private:
    [[gnu::noinline]] void reserve(size_t cap)
    {
        T *p = new T[cap];
        for (size_t i = 0; i < n_; i++) p[i] = p_[i];
        delete[] p_;
        p_ = p;
        cap_ = cap;
    }
    T *p_ = nullptr;
    size_t n_ = 0, cap_ = 0;
};

// A queue in a ring of power-of-two size that doubles when full: pushes
// at the back, pops at the front, and now and then an insertion inside.
template <class T> class Ring
{
  public:
    Ring() : buf_(new T[16]), mask_(15) {}
    ~Ring() { delete[] buf_; }
    Ring(const Ring &) = delete;
    Ring &operator=(const Ring &) = delete;
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    T &operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
    const T &operator[](size_t i) const { return buf_[(head_ + i) & mask_]; }
    T &front() { return buf_[head_]; }
    const T &front() const { return buf_[head_]; }
    void push_back(const T &v)
    {
        if (n_ > mask_) grow();
        buf_[(head_ + n_++) & mask_] = v;
    }
    // push_back() where the ring has room (reserve() made it big enough
    // for every entry the queue can hold)
    void push_back_fits(const T &v) { buf_[(head_ + n_++) & mask_] = v; }
    void reserve(size_t n)
    {
        while (mask_ + 1 < n) grow();
    }
    void pop_front()
    {
        head_ = (head_ + 1) & mask_;
        n_--;
    }
    // (the entries on the shorter side of at move: those before it, one
    // place towards the front, when at is in the first half)
    void insert(size_t at, const T &v)
    {
        if (n_ > mask_) grow();
        if (2 * at < n_) {
            head_ = (head_ - 1) & mask_;
            n_++;
            if (head_ + at <= mask_) // (in one piece: T is a plain value)
                memmove(buf_ + head_, buf_ + head_ + 1, at * sizeof(T));
            else
                for (size_t k = 0; k < at; k++) (*this)[k] = (*this)[k + 1];
        } else {
            n_++;
            for (size_t k = n_ - 1; k > at; k--) (*this)[k] = (*this)[k - 1];
        }
        (*this)[at] = v;
    }
    void clear() { head_ = n_ = 0; }
    void swap(Ring &o)
    {
        std::swap(buf_, o.buf_);
        std::swap(mask_, o.mask_);
        std::swap(head_, o.head_);
        std::swap(n_, o.n_);
    }
    template <class R, class V> struct Iter {
        R *r;
        size_t i;
        V &operator*() const { return (*r)[i]; }
        Iter &operator++()
        {
            i++;
            return *this;
        }
        bool operator!=(const Iter &o) const { return i != o.i; }
    };
    Iter<Ring, T> begin() { return {this, 0}; }
    Iter<Ring, T> end() { return {this, n_}; }
    Iter<const Ring, const T> begin() const { return {this, 0}; }
    Iter<const Ring, const T> end() const { return {this, n_}; }

  private:
    // out of line, so that push_back stays small enough to inline
    [[gnu::noinline]] void grow()
    {
        T *b = new T[2 * (mask_ + 1)];
        for (size_t i = 0; i < n_; i++) b[i] = (*this)[i];
        delete[] buf_;
        buf_ = b;
        mask_ = 2 * (mask_ + 1) - 1;
        head_ = 0;
    }
    T *buf_;
    size_t mask_, head_ = 0, n_ = 0;
};

class Core
{
  public:
    Core(Machine &m, const Config &c);
    ~Core();
    Core(const Core &) = delete;
    Core &operator=(const Core &) = delete;
    // Runs to the program's end (or max_insns user instructions).  Throws
    // GuestFault; on a stuck pipeline prints its state to stderr and
    // returns false.
    bool run(uint64_t max_insns);
    const Stats &stats() const { return st_; }
    std::string stats_json() const;
    std::string stats_table() const;
    // The handler, as the simulated machine's instructions.
    static const std::vector<Inst> &handler();

  private:
    // A micro-op: one instruction in the pipeline.  A user instruction's
    // uop is its record in the stream (stream_), kept from when the
    // functional machine runs it until it commits, and fetched again from
    // there after a flush (fetch() resets its timing state); a handler
    // instruction's comes from a pool.
    struct alignas(64) Uop {
        enum State : uint8_t { FRONT, WAIT, ISSUED, DONE };
        // what it does to control flow (fetch predicts it, execution trains)
        enum Control : uint8_t { NONE, BRANCH, JAL, JALR };
        // Two cache lines: the first holds what the stages read of every
        // uop, the second what fetch, rename and branches read.
        uint64_t ready = NEVER_CYCLE;
        // in an issue queue: the cycle its operands are ready (NEVER: a
        // producer has not issued), and when it came in (the queue's order,
        // modulo 2^32: see older())
        uint64_t iq_ready = NEVER_CYCLE;
        uint64_t seq = 0; // user: position in the instruction stream
        uint64_t addr = 0;
        uint16_t src[3] = {0, 0, 0}; // the operands' physical registers, set at rename
        // (from dst to reads_dcache a block of KIND_BLOCK bytes with the
        // two after it, which fetch copies too: set_kind_program())
        int16_t dst = -1, old = -1, arch_dst = -1;
        uint16_t lat = 1; // cycles to execute (an access: without the D-cache's miss)
        State st = FRONT;
        bool tlbmiss = false;
        bool serial = false; // issues only at the head of the ROB (set at rename)
        bool handler = false;
        bool mem = false;          // goes through the TLB and a memory port
        bool reads_dcache = false; // an access that reads the D-cache as it executes (not a store)
        unsigned char unused_[2] = {}; // (the second block's end)
        uint32_t iq_stamp = 0;
        uint32_t raw = 0; // user: the instruction's encoding

        uint64_t pc = 0, next_pc = 0;
        Uop *next_waiter = nullptr; // (waiters_)
        // branch prediction: the global history before this uop was fetched,
        // the counter it was predicted by, and what it did to the return stack
        // (undone if it is flushed)
        uint64_t ras_pop = NEVER_CYCLE, ras_drop = NEVER_CYCLE;
        // what the instruction is, from op to mispred (false) in one block of
        // KIND_BLOCK bytes (fetch copies it: set_kind_program())
        Op op = ILLEGAL;
        uint8_t src_arch[3] = {NOREG, NOREG, NOREG}; // the operands' registers
        uint8_t rd = NOREG;                          // the register it writes
        Control ctl = NONE;
        uint8_t len = 4;        // bytes
        bool ldq = false;       // takes a load-queue entry (user: a load or an AMO)
        bool stq = false;       // takes a store-queue entry (user: a store or an AMO)
        bool fpq = false;       // issues from the floating-point queue
        bool dst_fp = false;    // rd is a floating-point register
        bool system = false;    // C_SYSTEM: issues only at the head of the ROB
        bool link = false;      // a call (rd = ra)
        bool is_return = false; // a return (jalr x0, 0(ra))
        bool mispred = false, ras_push = false;
        bool inl = false;   // handler: part of an in-lined handler
        bool taken = false; // a branch or jump went elsewhere than pc + len
        uint32_t ghist = 0; // (a branch's counter is bp_index(pc, ghist))
    };
    static constexpr size_t KIND_BLOCK = 16;
    static_assert(sizeof(Uop) == 128, "a uop is two cache lines");
    static_assert(offsetof(Uop, mispred) + 1 - offsetof(Uop, op) == KIND_BLOCK &&
                      offsetof(Uop, op) % 8 == 0,
                  "the kind's block is op to mispred");
    static_assert(offsetof(Uop, unused_) + 2 - offsetof(Uop, dst) == KIND_BLOCK,
                  "the kind's second block is dst to unused_");
    // u->st == st && !u->tlbmiss, in one test of the two bytes
    static bool in_state_unheld(const Uop *u, Uop::State st)
    {
        static_assert(offsetof(Uop, tlbmiss) == offsetof(Uop, st) + 1, "st, then tlbmiss");
        uint16_t v;
        memcpy(&v, &u->st, sizeof v);
        return v == st; // (little-endian: st is the low byte)
    }
    // Whether u's completion is found by complete() in the executing list:
    // the handler's uops, and branches and indirect jumps (they train the
    // predictor, in the order they started, and one may be what fetch waits
    // for).  The program's other uops change nothing when they finish: such
    // a uop is done once its cycle has passed (done()), without an entry.
    static bool completes_explicitly(const Uop *u)
    {
        static_assert(Uop::BRANCH == 1 && Uop::JALR == 3 && Uop::NONE == 0 && Uop::JAL == 2,
                      "branches and indirect jumps: the odd kinds of control");
        return u->handler || (u->ctl & 1);
    }
    // Issued, not held, and completing without an entry: done once u->ready
    // has passed, executing until then.
    static bool issued_implicit(const Uop *u)
    {
        return in_state_unheld(u, Uop::ISSUED) && !completes_explicitly(u);
    }
    // Whether u has finished executing and is not held: completed by
    // complete(), or issued_implicit() with its cycle passed.  (complete()
    // marks a uop done in the cycle it is ready, after commit has run:
    // commit sees it done in the next cycle, as here.)
    bool done(const Uop *u) const
    {
        return in_state_unheld(u, Uop::DONE) || (issued_implicit(u) && u->ready < cycle_);
    }
    // u->handler || u->mem, in one test of the two bytes
    static bool handler_or_mem(const Uop *u)
    {
        static_assert(offsetof(Uop, mem) == offsetof(Uop, handler) + 1, "handler, then mem");
        uint16_t v;
        memcpy(&v, &u->handler, sizeof v);
        return v != 0;
    }
    // Whether issue-queue stamp a came in before b.
    static bool older(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
    // The page a program uop accesses (a handler's: 0, the TLB not asked).
    uint64_t vpn(const Uop *u) const { return u->handler ? 0 : u->addr >> c_.page_bits; }
    struct Cache {
        int sets = 0, assoc = 0, line_bits = 6;
        struct Way {
            uint64_t tag; // the line's address (NEVER: empty)
            uint64_t age; // clock at its last access: the least is the victim
        };
        std::vector<Way> ways; // a set's ways side by side
        uint64_t clock = 0;
        void init(int size, int assoc, int line);
        bool access(uint64_t addr);        // true on a hit; fills on a miss
        size_t set_of(uint64_t addr) const // its set's first way in ways
        {
            return static_cast<size_t>((addr >> line_bits) & static_cast<uint64_t>(sets - 1)) *
                   static_cast<size_t>(assoc);
        }
    };

    // the stages
    void commit();
    int commit_some();
    void commit_handler(Uop *u);
    bool head_may_commit() const;
    void complete();
    void issue();
    void dispatch();
    void decode();
    void fetch();
    // the TLB
    bool tlb_probe(uint64_t vpn) const { return tlb_find(vpn) >= 0; }
    bool tlb_lookup_commit(uint64_t vpn); // program-order lookup: updates replacement
    void tlb_fill(uint64_t vpn);
    void take_miss(Uop &head);
    void flush_all(uint64_t resume_seq);

    // A handler run alone.  After a flush that leaves nothing in flight
    // (every traditional miss, and an in-lined scheme's fallback) but an
    // earlier in-lined handler that has finished (it commits meanwhile),
    // the handler goes through the pipeline by itself until its eret
    // commits, and what it does there depends on nothing but the cycle
    // fetch may start (a stall still running), the uops kept, the free
    // registers and the outcomes of its cache accesses (its I-cache lines,
    // its loads' D-cache lines).  Each such run simulated is kept as
    // the sequence of its accesses with their outcomes, in a tree, ending in
    // the cycles it took; a later run whose accesses have outcomes seen
    // before is replayed instead: its accesses are made (the caches and
    // their counts are as simulated), the TLB written, and the clock moved
    // to the eret's commit, with fetch free to start the program again.
    struct AloneNode {
        // the next access: an I-cache line of the handler (its number from
        // the first), or ALONE_LOAD + the handler instruction whose load reads
        // the D-cache; ALONE_END: none, the run ends
        int access = ALONE_END;
        int next[2] = {-1, -1}; // the node after it, by its outcome (miss, hit); -1: not seen
        // at the end: cycles from the flush to the eret's commit, to the first
        // commit, to the end of fetch's stall, and the longest between two
        // commits; the I-cache line fetch last read
        uint64_t cycles = 0, first_commit = 0, fetch_stall = 0, longest_gap = 0, last_iline = 0;
    };
    static constexpr int ALONE_END = -1, ALONE_LOAD = 64;
    struct AloneRoot {
        uint64_t stall;           // cycles after the flush until fetch may start
        size_t kept;              // an in-lined handler's uops kept in the ROB
        size_t free_int, free_fp; // free registers
        int node;
    };
    std::vector<AloneNode> alone_;
    std::vector<AloneRoot> alone_roots_;
    bool alone_recording_ = false;
    std::vector<std::pair<int, bool>> alone_path_; // being recorded: access, hit
    uint64_t alone_start_ = 0, alone_last_commit_ = 0, alone_first_commit_ = 0,
             alone_longest_gap_ = 0;
    size_t alone_root_ = 0; // (alone_roots_)
    // replay_alone()'s undo: the sets its accesses changed, as they were
    struct AloneTouched {
        Cache *cache;
        size_t set, saved; // (its ways from alone_saved_[saved])
    };
    std::vector<AloneTouched> alone_touched_;
    std::vector<Cache::Way> alone_saved_;
    bool alone_possible(uint64_t *stall) const; // the pipeline is empty after a flush
    size_t alone_root(uint64_t stall);          // its tree's root, made if new
    bool replay_alone(uint64_t stall);
    void alone_note(int access, bool hit) { alone_path_.emplace_back(access, hit); }
    void alone_commit(bool eret);          // recording: a handler uop commits
    uint64_t handler_addr(size_t i) const; // the address handler instruction i accesses

    // A run from an empty pipeline (a segment).  After a handler run alone
    // has been replayed (above), nothing is in flight: the pipeline's state
    // is the cycle fetch may start and the I-cache line it last read, and
    // the program starts again at the access that missed.  From there to
    // the next such point (the program's instructions, in-lined handlers,
    // the flush of a miss not in-lined and its handler's replay), what the
    // pipeline does depends on nothing but that state and the outcomes of
    // what it asks outside itself, in the order it asks: the instructions
    // the functional machine runs (their PCs, encodings and directions),
    // the branch predictor's verdicts, the caches' and the TLB's answers and
    // whether a held access is on the page a handler fills.  So each run is
    // kept as the sequence of those actions with their outcomes, in a tree
    // keyed by its starting state, ending in what the run did to the clock
    // and the counters; a later run whose actions have outcomes seen before
    // is replayed: the actions are made (the caches, the TLB, the predictor
    // and the stream change as simulated), the clock and the counters
    // move, and the next run may be replayed in turn.  A run whose outcomes
    // are new is simulated (what its replay changed undone first) and
    // recorded; one that contradicts the tree (an action or an end that
    // differs where the outcomes are the same) stops tksim with a dump.
    enum SegAction : uint8_t {
        SA_FETCH,   // the next program instruction is fetched (and predicted)
        SA_TARGET,  // where the one fetched last goes (a JALR: not in its encoding)
        SA_ILINE,   // fetch reads the I-cache line of the next program instruction
        SA_ILINE_H, // fetch reads the handler's I-cache line arg
        SA_L1D_U,   // the D-cache access of the program's instruction seq0 + arg
        SA_L1D_H,   // the D-cache access of handler instruction arg
        SA_PROBE,   // the TLB probe of instruction seq0 + arg as it executes
        SA_LOOKUP,  // its program-order TLB lookup
        SA_MISS,    // its miss is taken: its page is the handler's
        SA_MATCH,   // whether it is on the handler's page (its TLB write)
        SA_FILL,    // the handler's TLB write
        SA_TRAIN,   // instruction seq0 + arg trains the branch predictor
        SA_FLUSH,   // the program's instructions in flight go (arg: how many committed)
        SA_END,     // the run ends (arg: its end in seg_ends_)
    };
    struct SegStep {
        uint64_t arg, v1, v2; // the action's argument and its outcome
        SegAction kind;
    };
    // A node: an action, and the outcome of its parent's that leads here
    // (v1, v2: for most actions v1 is whether it hit and v2 is 0)
    struct SegNode {
        uint64_t v1 = 0, v2 = 0;
        uint64_t what = SA_END; // the action in the low byte, its argument above
        int child = -1, sibling = -1;
        SegAction kind() const { return static_cast<SegAction>(what & 0xff); }
        uint64_t arg() const { return what >> 8; }
    };
    static uint64_t seg_what(SegAction kind, uint64_t arg) { return arg << 8 | kind; }
    // the counters of Stats a run adds to (commit_hash apart)
    static constexpr size_t SEG_STATS = offsetof(Stats, commit_hash) / sizeof(uint64_t);
    static_assert(offsetof(Stats, cycles) == 0 &&
                      offsetof(Stats, stale_completions) < offsetof(Stats, commit_hash),
                  "Stats: the counters first");
    struct SegEnd {
        uint64_t cycles = 0, commits = 0, last_iline = 0;
        int64_t fetch_stall = 0; // fetch_stall_until_ less the clock at the end
        uint64_t stats[SEG_STATS] = {};
    };
    struct SegKey {
        uint64_t stall, last_iline, pc;
        bool operator<(const SegKey &o) const
        {
            return stall != o.stall             ? stall < o.stall
                   : last_iline != o.last_iline ? last_iline < o.last_iline
                                                : pc < o.pc;
        }
    };
    static constexpr size_t SEG_MAX_COMMITS = 512;                // a longer run is not recorded
    static constexpr size_t SEG_MAX_STEPS = 16 * SEG_MAX_COMMITS; // (nor one of more actions)
    static constexpr size_t SEG_MAX_NODES = 1 << 21; // nor any run once the tree is this big
    std::vector<SegNode> seg_nodes_;
    std::vector<SegEnd> seg_ends_;
    std::map<SegKey, int> seg_roots_; // starting state -> its first node (-1: none yet)
    bool seg_recording_ = false;
    std::vector<SegStep> seg_path_; // being recorded
    uint64_t seg_seq0_ = 0, seg_cycle0_ = 0;
    Stats seg_st0_;
    int *seg_root_ = nullptr; // (seg_roots_'s value: the map's nodes stay)
    // a replay's undo: what its actions changed, as it was
    std::vector<std::pair<Cache::Way *, Cache::Way>> seg_ways_saved_;
    std::vector<std::pair<size_t, uint8_t>> seg_bpred_saved_;
    std::vector<std::pair<size_t, uint64_t>> seg_btb_saved_, seg_tlb_used_saved_;
    std::vector<uint64_t> seg_ras_saved_, seg_jumps_;
    // Notes an action of the run being recorded; the program instructions
    // fetched since the last go in first (their SA_FETCH: fetch itself does
    // not stop for them).  Out of line, so that the stages' calls stay small.
    [[gnu::noinline]] void seg_note(SegAction kind, uint64_t arg, uint64_t v1 = 0, uint64_t v2 = 0);
    uint64_t seg_fetched_ = 0; // the program instructions fetched before it are noted
    // replays that went to the end and that did not, in the current window;
    // the empty-pipeline points to leave alone, and the next such pause
    uint64_t seg_ok_ = 0, seg_failed_ = 0, seg_skip_ = 0, seg_backoff_ = 256;
    // a program uop's outcome at fetch: its encoding, direction and verdict
    static uint64_t seg_fetch_outcome(const Uop *u)
    {
        bool mispred = (u->ctl == Uop::BRANCH || u->ctl == Uop::JALR) && u->mispred;
        return u->raw | static_cast<uint64_t>(u->taken) << 32 |
               static_cast<uint64_t>(mispred) << 33;
    }
    SegKey seg_key() const;
    void seg_canonical(); // the pipeline is empty after a handler's replay
    void seg_finish();    // the run being recorded goes into the tree
    bool seg_replay();
    bool seg_access(Cache &c, uint64_t addr); // Cache::access, its way saved
    void undo_ras(const Uop *u);
    void stream_step(); // the functional machine runs the next instruction into the stream
    [[gnu::noinline]] void stream_step_call();
    void dump(const char *why) const;
    // uops executing: the executing list's, and the program's others issued
    // and not done
    size_t executing_now() const
    {
        size_t n = exec_.size();
        for (const Uop *u : rob_) n += issued_implicit(u) && u->ready >= cycle_;
        return n;
    }
    void skip_idle();
    // The cycle a uop's operands are all ready: NEVER while a producer has
    // not issued.  Once known it stays (a register's ready cycle is set
    // once, when its producer issues, and it is not reused while a reader
    // waits; rearm() makes the queues look again when it changes one).
    // The operands may be reordered: one not ready goes first, the one
    // whose producer the uop waits for.
    uint64_t operands_ready(uint16_t *src) const
    {
        uint64_t r = std::max(preg_ready_[src[0]].at,
                              std::max(preg_ready_[src[1]].at, preg_ready_[src[2]].at));
        if (r == NEVER_CYCLE && preg_ready_[src[0]].at != NEVER_CYCLE)
            std::swap(src[0], src[preg_ready_[src[1]].at == NEVER_CYCLE ? 1 : 2]);
        return r;
    }
    void start(Uop *u);
    bool dispatch_handler(Uop *u);
    bool dispatch_program(Uop *u);
    void fetch_handler();
    bool predict(Uop *u);
    void rearm(Uop *w);
    bool fetch_line(uint64_t pc)
    {
        return (pc >> l1i_.line_bits) == last_iline_ || fetch_new_line(pc);
    }
    bool fetch_new_line(uint64_t pc);
    // An in-lined handler dispatches before the program's instructions
    // already fetched: always when prepended (the ROB's tail has moved to
    // before its head), and when appended unless append_after_frontend
    // says they go first.
    bool handler_first() const { return inline_ && handler_first_scheme_; }
    // Such a handler's uop goes ahead of the program's uops in a front-end
    // queue (behind the handler uops already there), past a full queue: the
    // handler is what dispatches next.
    bool passing(const Uop *u) const { return u->handler && handler_first(); }

    Machine &m_;
    Config c_;
    Stats st_;
    uint64_t cycle_ = 0;
    bool done_ = false;
    uint64_t max_insns_ = NEVER_CYCLE; // run()'s limit (NEVER: none)

    // the stream: user instructions run by the functional machine and not
    // yet committed, sequence numbers [stream_base_, stream_end_), in a ring
    // where instruction seq is at seq & stream_mask_.  The ring never grows, so queues may point
    // into it: it holds every instruction in flight (at most the ROB's and the front-end queues'
    // entries for the program) and the one being fetched, and room for a segment's replay
    // (seg_replay()), which moves the oldest on only at the run's end (up to SEG_MAX_COMMITS more).
    std::vector<Uop> stream_;
    size_t stream_mask_ = 0;
    uint64_t stream_base_ = 0, stream_end_ = 0, fetch_seq_ = 0;
    bool program_ended_ = false;
    Uop &stream_at(uint64_t seq) { return stream_[seq & stream_mask_]; }
    const Uop &stream_at_const(uint64_t seq) const { return stream_[seq & stream_mask_]; }
    // every slot of the ring holds an instruction not yet committed
    bool stream_full() const { return stream_end_ - stream_base_ > stream_mask_; }
    void set_kind(Uop &u, const Inst &in) const;
    // set_kind() for a program instruction, remembered in the functional
    // machine's decoded copy of it (Inst::note: what it is depends on its
    // encoding alone) as the blocks from op and from dst that set_kind() left
    static_assert(2 * KIND_BLOCK <= sizeof(Inst::note), "Inst::note holds both blocks");
    void set_kind_program(Uop &u, const Inst &in);
    // set_kind's part that depends on the class alone
    struct ClassKind {
        uint16_t lat = 1;
        bool fpq = false, system = false, access = false, ldq = false, stq = false,
             reads_dcache = false;
    };
    static constexpr int N_CLASSES = C_TLB + 1;
    ClassKind class_kind_[N_CLASSES];
    std::vector<Uop> handler_uops_; // the handler's instructions as uops (set_kind)
    int handler_dsts_ = 0;          // how many of them write a register

    // The fetch and decode queues, in one ring, oldest first: the decode
    // queue is its first decoded_ entries, the fetch queue the rest.
    // Decoding a uop moves the boundary past it.  Handler uops passing the
    // program's (passing()) are in a ring of their own, hfront_, its first
    // hdecoded_ decoded: in each queue they come before the program's, in
    // the order they were fetched.
    Ring<Uop *> front_, hfront_;
    size_t decoded_ = 0, hdecoded_ = 0;
    size_t fetchq_size() const { return front_.size() - decoded_ + hfront_.size() - hdecoded_; }
    size_t decodeq_size() const { return decoded_ + hdecoded_; }
    Ring<Uop *> rob_;
    std::vector<Uop *> kept_; // flush_all's: the handler uops it keeps (room for a full ROB)
    // An issue queue: the uops dispatched to it and not yet issued, in the
    // order they came in (iq_stamp).  Issue takes them oldest first from
    // those whose operands are ready, so each entry is kept where what is
    // known of its operands puts it: on the ready list (ready by now: what
    // issue scans, in order), on the timed list (ready at iq_ready, a later
    // cycle: moved to the ready list then), or, while a producer has not
    // issued, among the waiters of that producer's register (woken when it
    // issues).  The result is the same as scanning the whole queue every
    // cycle, without reading an entry that cannot issue.
    struct IssueQueue {
        size_t n = 0;                // entries
        List<Uop *> ready;           // by iq_stamp
        List<Uop *> timed;           // any order
        uint64_t next = NEVER_CYCLE; // the least iq_ready on the timed list
    };
    IssueQueue iq_int_, iq_fp_;
    size_t iq_handler_ = 0; // handler uops in iq_int_ beside its room (handler_iq = 0)
    uint32_t iq_stamp_ = 0;
    // by physical register: the uops waiting for it, linked through
    // Uop::next_waiter
    std::vector<Uop *> waiters_;
    void iq_place(Uop *u); // by u->iq_ready
    void rename(Uop *u, IssueQueue &q);
    void iq_promote(IssueQueue &q); // timed entries ready now go on the ready list
    void wake(int preg);            // preg's producer has issued
    void iq_recompute();            // a ready cycle changed: every entry looks again
    // the uops executing whose completion is explicit (completes_explicitly()),
    // each with the cycle it finishes, in the order they started; exec_next_:
    // none finishes before
    struct Exec {
        uint64_t ready;
        Uop *u;
    };
    List<Exec> exec_;
    uint64_t exec_next_ = NEVER_CYCLE;
    void executing(Uop *u)
    {
        exec_.push_back(Exec{u->ready, u});
        exec_next_ = std::min(exec_next_, u->ready);
    }
    int loads_ = 0, stores_ = 0;

    // The tables' elements are structs of one field each, written as
    // their field: a store to one of them is then known not to change
    // Core's own counters and sizes of the same type, which the compiler
    // would otherwise read again after every such store.
    struct Preg {
        int p; // a physical register
    };
    struct Ready {
        uint64_t at; // the cycle a physical register's value is ready
    };
    struct Counter {
        uint8_t c; // a 2-bit branch predictor counter
    };
    struct Target {
        uint64_t pc; // a jump's target
    };
    // renaming: 72 architectural registers (x, f, k)
    // map_: architectural register -> physical, and map_[NOREG] is
    // zero_preg_ (an operand that is not there); committed_map_: the 72
    // registers' committed mapping
    std::vector<Preg> map_, committed_map_;
    List<Preg> free_int_, free_fp_;
    // cycle the value is ready (~0: not yet); one more entry than there are
    // registers, zero_preg_, for "no operand": always 0, never allocated
    std::vector<Ready> preg_ready_;
    int n_int_phys_ = 0;
    uint16_t zero_preg_ = 0;

    // fetch state
    uint64_t fetch_stall_until_ = 0;
    Uop *waiting_branch_ = nullptr; // a mispredicted branch fetch waits for
    uint64_t last_iline_ = ~0ull;
    // the handler: fetching it (index into handler()), and the mode
    enum class Mode { USER, FETCH_HANDLER, WAIT_ERET } mode_ = Mode::USER;
    size_t handler_next_ = 0;
    bool inline_ = false;               // the handler being fetched is in-lined
    bool handler_first_scheme_ = false; // an in-lined handler dispatches first (handler_first)
    uint64_t miss_vpn_ = 0;             // the page the current handler fills
    uint64_t resume_seq_ = 0;           // traditional: re-fetch from here after eret
    int prepend_at_ = 0;                // prepend: where the next handler uop goes in the ROB
    int handler_undispatched_ = 0;      // in-lined: handler uops not yet in the ROB
    int handler_frontend_ = 0;          // handler uops fetched and not yet in the ROB
    bool handler_active_ = false;       // a handler's TLB write has not executed yet
    uint64_t tlb_checked_seq_ = ~0ull;  // the access whose program-order lookup is done

    // the TLB
    struct TlbEntry {
        uint64_t vpn = ~0ull;
        uint64_t used = 0;
    };
    std::vector<TlbEntry> tlb_;
    std::vector<TlbEntry> seg_tlb_saved_; // (a segment's replay: the TLB before its first fill)
    std::vector<int> seg_tlb_hash_saved_;
    std::vector<int> tlb_hash_; // page -> entry (tlb_find)
    int tlb_shift_ = 0;
    size_t tlb_home(uint64_t vpn) const;
    int tlb_find(uint64_t vpn) const
    {
        if (vpn == found_vpn_) return found_; // (the same page again, mostly)
        return tlb_search(vpn);
    }
    int tlb_search(uint64_t vpn) const; // tlb_find() in the index
    // tlb_find()'s last answer (a page is never NEVER; tlb_fill() forgets it)
    mutable uint64_t found_vpn_ = NEVER_CYCLE;
    mutable int found_ = -1;
    uint64_t tlb_clock_ = 0;
    size_t tlb_rr_ = 0;

    Cache l1i_, l1d_;
    std::vector<Counter> bpred_;
    uint64_t ghist_ = 0;
    std::vector<uint64_t> ras_;
    std::vector<Target> btb_target_;
    size_t bpred_mask_ = 0, btb_mask_ = 0, n_handler_ = 0; // (the sizes less one; the handler's)

    // handler uops not in use, by their instruction (what set_kind() set
    // stays)
    std::vector<std::vector<Uop *>> pool_;
    void free_uop(Uop *u)
    {
        if (u->handler) pool_[u->seq].push_back(u);
    }
    // the gshare counter a branch at pc is predicted by
    size_t bp_index(uint64_t pc, uint64_t ghist) const { return ((pc >> 1) ^ ghist) & bpred_mask_; }
    uint64_t last_commit_cycle_ = 0;
    bool moved_ = false; // something was done this cycle (none: the cycle is idle)
};

} // namespace tksim

#endif
