// sim/core.cpp - the timing model (sim/core.hpp).
#include "core.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tksim
{

namespace
{

constexpr uint64_t HANDLER_PC = 0x3f00000000ull; // where the handler's code sits
constexpr uint64_t PT_BASE = 0x3e00000000ull;    // the linear page table (8 bytes per page)
constexpr uint64_t NEVER = ~0ull;

// the configuration's words for the enumerators, in their order
const char *const SCHEME_NAMES[] = {"traditional", "append", "prepend"};
const char *const REPLACEMENT_NAMES[] = {"lru", "round-robin"};

double now()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

double cpu_now() // this process's CPU time, user and system
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

bool is_fp_reg(int r)
{
    return r >= FREG && r < FREG + 32;
}

// ---- the handler, assembled from RV64 encodings ----
uint32_t enc_i(uint32_t opc, uint32_t f3, uint32_t rd, uint32_t rs1, int32_t imm)
{
    return opc | (rd << 7) | (f3 << 12) | (rs1 << 15) | (static_cast<uint32_t>(imm & 0xfff) << 20);
}
uint32_t enc_r(uint32_t opc, uint32_t f3, uint32_t f7, uint32_t rd, uint32_t rs1, uint32_t rs2)
{
    return opc | (rd << 7) | (f3 << 12) | (rs1 << 15) | (rs2 << 20) | (f7 << 25);
}
uint32_t enc_s(uint32_t opc, uint32_t f3, uint32_t rs1, uint32_t rs2, int32_t imm)
{
    uint32_t u = static_cast<uint32_t>(imm & 0xfff);
    return opc | ((u & 0x1f) << 7) | (f3 << 12) | (rs1 << 15) | (rs2 << 20) | ((u >> 5) << 25);
}

// k0-k7 are written x24-x31 in the handler's encodings
constexpr uint32_t K0 = 24, K1 = 25, K2 = 26, K3 = 27, K4 = 28, K5 = 29, K6 = 30, K7 = 31;
// the handler's CSRs: the faulting address, the page table's base, the ASID
constexpr int32_t CSR_BADVADDR = 0x7c0, CSR_PTBASE = 0x7c1, CSR_ASID = 0x7c2;

std::vector<Inst> build_handler()
{
    const uint32_t OP_IMM = 0x13, OP = 0x33, LOAD = 0x03, STORE = 0x23, SYSTEM = 0x73,
                   CUSTOM0 = 0x0b;
    std::vector<uint32_t> w = {
        enc_i(SYSTEM, 2, K0, 0, CSR_BADVADDR), //  1 csrr  k0, badvaddr
        enc_i(SYSTEM, 2, K1, 0, CSR_PTBASE),   //  2 csrr  k1, ptbase
        enc_i(OP_IMM, 5, K2, K0, 13),          //  3 srli  k2, k0, 13      virtual page
        enc_i(OP_IMM, 1, K3, K2, 3),           //  4 slli  k3, k2, 3       its PTE's offset
        enc_r(OP, 0, 0, K3, K3, K1),           //  5 add   k3, k3, k1      its PTE's address
        enc_i(LOAD, 3, K4, K3, 0),         //  6 ld    k4, 0(k3)       the PTE (through the D-cache)
        enc_i(OP_IMM, 7, K5, K4, 1),       //  7 andi  k5, k4, 1       valid bit
        enc_i(SYSTEM, 2, K6, 0, CSR_ASID), //  8 csrr  k6, asid
        enc_i(OP_IMM, 5, K4, K4, 10),      //  9 srli  k4, k4, 10      physical page
        enc_i(OP_IMM, 1, K4, K4, 13),      // 10 slli  k4, k4, 13
        enc_r(OP, 6, 0, K4, K4, K5),       // 11 or    k4, k4, k5      EntryLo
        enc_i(OP_IMM, 1, K6, K6, 48),      // 12 slli  k6, k6, 48
        enc_r(OP, 6, 0, K2, K2, K6),       // 13 or    k2, k2, k6      EntryHi: ASID | page
        enc_i(LOAD, 3, K7, K1, -8),        // 14 ld    k7, -8(k1)      the miss counter
        enc_i(OP_IMM, 0, K7, K7, 1),       // 15 addi  k7, k7, 1
        enc_s(STORE, 3, K1, K7, -8),       // 16 sd    k7, -8(k1)
        enc_i(OP_IMM, 7, K5, K0, 0x7ff), // 17 andi  k5, k0, 0x7ff   offset in page (for the record)
        enc_r(OP, 4, 0, K5, K5, K5),     // 18 xor   k5, k5, k5      clear it (no state leaks out)
        enc_r(OP, 4, 0, K0, K0, K0),     // 19 xor   k0, k0, k0
        enc_r(CUSTOM0, 0, 0, 0, K2, K4), // 20 tk.tlbwr k2, k4       write the TLB entry
        enc_r(CUSTOM0, 1, 0, 0, 0, 0),   // 21 tk.eret
    };
    std::vector<Inst> out;
    for (uint32_t word : w) {
        Inst in = decode(word);
        auto k = [](uint8_t r) {
            return (r >= 24 && r < 32) ? static_cast<uint8_t>(KREG + r - 24) : r;
        };
        in.rd = k(in.rd);
        in.rs1 = k(in.rs1);
        in.rs2 = k(in.rs2);
        if (in.cls == C_SYSTEM) in.cls = C_INT; // reading the exception registers is an ALU op
        out.push_back(in);
    }
    return out;
}

} // namespace

const std::vector<Inst> &Core::handler()
{
    static const std::vector<Inst> h = build_handler();
    return h;
}

// ---- configuration ----
bool Config::set(const std::string &key, const std::string &value, std::string *err)
{
    auto num = [&](int *out, int lo, int hi) {
        char *end;
        long v = strtol(value.c_str(), &end, 10);
        if (*end || value.empty() || v < lo || v > hi) {
            *err = key + " = " + value + ": wants a whole number from " + std::to_string(lo) +
                   " to " + std::to_string(hi);
            return false;
        }
        *out = static_cast<int>(v);
        return true;
    };
    struct {
        const char *name;
        int *field;
        int lo, hi;
    } ints[] = {
        {"fetch_width", &fetch_width, 1, 16},
        {"decode_width", &decode_width, 1, 16},
        {"rename_width", &rename_width, 1, 16},
        {"issue_width", &issue_width, 1, 16},
        {"commit_width", &commit_width, 1, 16},
        {"fetch_queue", &fetch_queue, 1, 256},
        {"decode_queue", &decode_queue, 1, 256},
        {"rob_size", &rob_size, 8, 4096},
        {"iq_int", &iq_int, 1, 1024},
        {"iq_fp", &iq_fp, 1, 1024},
        {"int_units", &int_units, 1, 16},
        {"fp_units", &fp_units, 1, 16},
        {"mem_ports", &mem_ports, 1, 16},
        {"load_queue", &load_queue, 1, 1024},
        {"store_queue", &store_queue, 1, 1024},
        {"rename_int", &rename_int, 1, 4096},
        {"rename_fp", &rename_fp, 1, 4096},
        {"lat_int", &lat_int, 1, 100},
        {"lat_mul", &lat_mul, 1, 100},
        {"lat_div", &lat_div, 1, 200},
        {"lat_fp", &lat_fp, 1, 100},
        {"lat_fdiv", &lat_fdiv, 1, 200},
        {"lat_load", &lat_load, 1, 100},
        {"mem_latency", &mem_latency, 0, 10000},
        {"mispredict_penalty", &mispredict_penalty, 0, 100},
        {"l1i_size", &l1i_size, 1024, 1 << 24},
        {"l1i_assoc", &l1i_assoc, 1, 64},
        {"l1d_size", &l1d_size, 1024, 1 << 24},
        {"l1d_assoc", &l1d_assoc, 1, 64},
        {"line", &line, 8, 4096},
        {"bpred_bits", &bpred_bits, 1, 24},
        {"tlb_entries", &tlb_entries, 1, 4096},
        {"page_bits", &page_bits, 12, 30},
        {"inject_lost_fill", &inject_lost_fill, 0, 1},
        {"append_after_frontend", &append_after_frontend, 0, 1},
        {"handler_iq", &handler_iq, 0, 1},
    };
    for (auto &f : ints)
        if (key == f.name) return num(f.field, f.lo, f.hi);
    // a word from a list (the enumerators' names, in order)
    auto word = [&](const char *const *names, int n, int *out) {
        std::string all;
        for (int i = 0; i < n; i++) {
            if (value == names[i]) {
                *out = i;
                return true;
            }
            all += std::string(i ? (i == n - 1 ? " or " : ", ") : "") + names[i];
        }
        *err = key + " = " + value + ": wants " + all;
        return false;
    };
    int w;
    if (key == "tlb_replacement") {
        if (!word(REPLACEMENT_NAMES, 2, &w)) return false;
        tlb_replacement = static_cast<Replacement>(w);
        return true;
    }
    if (key == "scheme") {
        if (!word(SCHEME_NAMES, 3, &w)) return false;
        scheme = static_cast<Scheme>(w);
        return true;
    }
    if (key == "stuck_cycles") {
        char *end;
        unsigned long long v = strtoull(value.c_str(), &end, 10);
        if (*end || value.empty() || v < 100) {
            *err = "stuck_cycles = " + value + ": wants a whole number of at least 100";
            return false;
        }
        stuck_cycles = v;
        return true;
    }
    *err = "unknown parameter '" + key + "'";
    return false;
}

bool Config::read(const std::string &path, std::string *err)
{
    std::ifstream f(path);
    if (!f) {
        *err = path + ": cannot be read";
        return false;
    }
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
        n++;
        size_t hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        auto trim = [](std::string s) {
            size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
            return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
        };
        line = trim(line);
        if (line.empty()) continue;
        size_t eq = line.find('=');
        if (eq == std::string::npos) {
            *err = path + ":" + std::to_string(n) + ": not 'key = value'";
            return false;
        }
        std::string e;
        if (!set(trim(line.substr(0, eq)), trim(line.substr(eq + 1)), &e)) {
            *err = path + ":" + std::to_string(n) + ": " + e;
            return false;
        }
    }
    if (line_ok()) return true;
    *err = path + ": the cache sizes, ways and line size do not make whole sets";
    return false;
}

bool Config::line_ok() const
{
    auto ok = [this](int size, int assoc) {
        return (line & (line - 1)) == 0 && size % (assoc * line) == 0 &&
               ((size / (assoc * line)) & (size / (assoc * line) - 1)) == 0;
    };
    return ok(l1i_size, l1i_assoc) && ok(l1d_size, l1d_assoc);
}

std::string Config::describe() const
{
    std::ostringstream o;
    o << "scheme " << SCHEME_NAMES[static_cast<int>(scheme)] << ", " << tlb_entries
      << "-entry DTLB (" << (tlb_replacement == Replacement::LRU ? "LRU" : "round-robin") << ", "
      << (1 << page_bits) / 1024 << " KiB pages), " << fetch_width << "-wide, ROB " << rob_size
      << ", IQ " << iq_int << "+" << iq_fp << ", " << int_units << " int + " << fp_units
      << " fp units, rename " << rename_int << "+" << rename_fp << ", L1 " << l1i_size / 1024 << "/"
      << l1d_size / 1024 << " KiB " << l1d_assoc << "-way, memory " << mem_latency << " cycles";
    return o.str();
}

// ---- caches ----
void Core::Cache::init(int size, int a, int line)
{
    assoc = a;
    sets = size / (a * line);
    line_bits = __builtin_ctz(static_cast<unsigned>(line));
    tag.assign(static_cast<size_t>(sets * a), NEVER);
    age.assign(static_cast<size_t>(sets * a), 0);
}

bool Core::Cache::access(uint64_t addr)
{
    uint64_t l = addr >> line_bits;
    size_t set =
        static_cast<size_t>(l & static_cast<uint64_t>(sets - 1)) * static_cast<size_t>(assoc);
    clock++;
    size_t victim = set;
    for (size_t w = set; w < set + static_cast<size_t>(assoc); w++) {
        if (tag[w] == l) {
            age[w] = clock;
            return true;
        }
        if (age[w] < age[victim]) victim = w;
    }
    tag[victim] = l;
    age[victim] = clock;
    return false;
}

// ---- micro-ops ----
// What the timing model needs of an instruction, worked out once (when the
// functional machine runs it, or for the handler's code at the start).
void Core::set_kind(Uop &u, const Inst &in) const
{
    u.inst = &in;
    // the operands: rs3 only for the fused multiply-adds
    u.src_arch[0] = in.rs1;
    u.src_arch[1] = in.rs2;
    u.src_arch[2] = (in.op >= FMADD_S && in.op <= FNMADD_D) ? in.rs3 : NOREG;
    u.dst_fp = in.rd != NOREG && is_fp_reg(in.rd);
    u.fpq = in.cls == C_FP || in.cls == C_FDIV;
    u.system = in.cls == C_SYSTEM;
    bool access = in.cls == C_LOAD || in.cls == C_STORE || in.cls == C_AMO;
    // the handler's loads and stores take no load/store-queue entries
    u.mem = u.handler ? in.cls == C_LOAD || in.cls == C_STORE : access;
    u.ldq = !u.handler && (in.cls == C_LOAD || in.cls == C_AMO);
    u.stq = !u.handler && (in.cls == C_STORE || in.cls == C_AMO);
    u.reads_dcache = access && in.cls != C_STORE; // (a store writes it at commit)
    int lat;
    switch (in.cls) {
    case C_MUL:
        lat = c_.lat_mul;
        break;
    case C_DIV:
        lat = c_.lat_div;
        break;
    case C_FP:
        lat = c_.lat_fp;
        break;
    case C_FDIV:
        lat = c_.lat_fdiv;
        break;
    case C_LOAD:
    case C_AMO:
        lat = c_.lat_load;
        break;
    default: // a store's is its address's
        lat = c_.lat_int;
    }
    u.lat = static_cast<uint16_t>(lat);
}

Core::Core(Machine &m, const Config &c) : m_(m), c_(c)
{
    n_int_phys_ = 40 + c.rename_int;
    int n_fp_phys = 32 + c.rename_fp;
    map_.assign(256, 0);
    for (int r = 0; r < 32; r++) map_[r] = r;                      // x
    for (int r = 0; r < 8; r++) map_[KREG + r] = 32 + r;           // k
    for (int r = 0; r < 32; r++) map_[FREG + r] = n_int_phys_ + r; // f
    committed_map_.assign(map_.begin(), map_.begin() + 72);
    for (int p = 40; p < n_int_phys_; p++) free_int_.push_back(p);
    for (int p = 32; p < n_fp_phys; p++) free_fp_.push_back(n_int_phys_ + p);
    preg_ready_.assign(static_cast<size_t>(n_int_phys_ + n_fp_phys) + 1, 0);
    zero_preg_ = static_cast<uint16_t>(n_int_phys_ + n_fp_phys);
    map_[NOREG] = zero_preg_;
    preg_used_.assign(static_cast<size_t>(zero_preg_), 0);
    // the stream's ring: every user instruction in flight, and one more
    size_t in_flight = static_cast<size_t>(c.rob_size + c.fetch_queue + c.decode_queue) + 2;
    size_t ring = 16;
    while (ring < in_flight) ring *= 2;
    stream_.resize(ring);
    for (const Inst &in : handler()) {
        Uop u;
        u.handler = true;
        set_kind(u, in);
        handler_uops_.push_back(u);
    }
    tlb_.assign(static_cast<size_t>(c.tlb_entries), TlbEntry());
    size_t slots = 8;
    tlb_shift_ = 61;
    while (slots < 4 * tlb_.size()) {
        slots *= 2;
        tlb_shift_--;
    }
    tlb_hash_.assign(slots, -1);
    l1i_.init(c.l1i_size, c.l1i_assoc, c.line);
    l1d_.init(c.l1d_size, c.l1d_assoc, c.line);
    bpred_.assign(1u << c.bpred_bits, 1);
    btb_target_.assign(1024, 0);
}

Core::~Core()
{
    // every handler uop is in the pool or in one of these (the issue
    // queues and the executing list point into the ROB); the program's
    // are the stream's
    for (auto *q : {&fetchq_, &decodeq_, &rob_})
        for (Uop *u : *q) free_uop(u);
    for (Uop *u : pool_) delete u;
}

// ---- the TLB ----
// Its index: an open-addressed table (linear probing) of entry numbers,
// -1 for an empty slot, at least four slots an entry.
size_t Core::tlb_home(uint64_t vpn) const
{
    return static_cast<size_t>((vpn * 0x9e3779b97f4a7c15ull) >> tlb_shift_);
}

int Core::tlb_find(uint64_t vpn) const
{
    size_t mask = tlb_hash_.size() - 1;
    for (size_t i = tlb_home(vpn);; i = (i + 1) & mask) {
        int e = tlb_hash_[i];
        if (e < 0 || tlb_[static_cast<size_t>(e)].vpn == vpn) return e;
    }
}

bool Core::tlb_probe(uint64_t vpn) const
{
    return tlb_find(vpn) >= 0;
}

bool Core::tlb_lookup_commit(uint64_t vpn)
{
    st_.tlb_accesses++;
    int e = tlb_find(vpn);
    if (e < 0) return false;
    tlb_[static_cast<size_t>(e)].used = ++tlb_clock_;
    return true;
}

void Core::tlb_fill(uint64_t vpn)
{
    size_t v = 0;
    if (c_.tlb_replacement == Replacement::ROUND_ROBIN) {
        v = tlb_rr_;
        tlb_rr_ = (tlb_rr_ + 1) % tlb_.size();
    } else {
        for (size_t i = 0; i < tlb_.size(); i++)
            if (tlb_[i].used < tlb_[v].used) v = i;
    }
    size_t mask = tlb_hash_.size() - 1;
    if (tlb_[v].vpn != NEVER) { // out of the index: backward-shift deletion
        size_t i = tlb_home(tlb_[v].vpn);
        while (tlb_hash_[i] != static_cast<int>(v)) i = (i + 1) & mask;
        for (size_t j = (i + 1) & mask; tlb_hash_[j] >= 0; j = (j + 1) & mask) {
            size_t k = tlb_home(tlb_[static_cast<size_t>(tlb_hash_[j])].vpn);
            // the entry at j may fill the hole at i unless its home lies
            // cyclically in (i, j]
            bool stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
            if (!stays) {
                tlb_hash_[i] = tlb_hash_[j];
                i = j;
            }
        }
        tlb_hash_[i] = -1;
    }
    tlb_[v].vpn = vpn;
    tlb_[v].used = ++tlb_clock_;
    size_t i = tlb_home(vpn);
    while (tlb_hash_[i] >= 0) i = (i + 1) & mask;
    tlb_hash_[i] = static_cast<int>(v);
}

// ---- a flush: the program's instructions in flight go; fetch will start
// again at resume_seq.  An earlier in-lined handler still in the ROB stays
// (the paper's rule 7: a flush the program causes leaves handler
// instructions in place): it finishes and commits, as its TLB write has
// already executed.  No handler uop is in the front end here (commit takes
// no miss while one is), and only handler uops write the k registers, so
// their renaming survives as it is.
void Core::flush_all(uint64_t resume_seq)
{
    st_.flushes++;
    // Counted by how far they had got; and the branch predictor forgets
    // what they did to it at fetch: the return stack's pushes and pops are
    // undone, youngest first, and the global history goes back to where
    // the oldest found it.  (Its counters and targets learn when a branch
    // executes, not at fetch: a branch flushed before it executed is
    // predicted again as it was.)  The front end holds program uops only.
    st_.flushed_frontend += fetchq_.size() + decodeq_.size();
    const Uop *oldest = nullptr;
    auto undo = [this, &oldest](const Uop *u) {
        oldest = u;
        if (u->ras_push) ras_.pop_back();
        if (u->ras_drop != NEVER) ras_.insert(ras_.begin(), u->ras_drop);
        if (u->ras_pop != NEVER) ras_.push_back(u->ras_pop);
    };
    for (size_t i = fetchq_.size(); i-- > 0;) undo(fetchq_[i]);
    for (size_t i = decodeq_.size(); i-- > 0;) undo(decodeq_[i]);
    // the ROB: its program uops go (youngest first, for the return stack),
    // its handler uops stay, in order
    Ring<Uop *> &kept = kept_;
    kept.clear();
    bool kept_eret = false, kept_dst = false;
    for (size_t i = rob_.size(); i-- > 0;) {
        Uop *u = rob_[i];
        if (u->handler) continue;
        if (u->st == Uop::DONE)
            st_.flushed_done++;
        else if (u->st == Uop::ISSUED)
            st_.flushed_issued++;
        else
            st_.flushed_waiting++;
        undo(u);
    }
    for (Uop *u : rob_)
        if (u->handler) {
            kept.push_back(u);
            kept_eret |= u->inst->op == TK_ERET;
            kept_dst |= u->dst >= 0;
        }
    if (oldest) ghist_ = oldest->ghist;
    if (kept_eret) st_.inlined_kept++;
    rob_.swap(kept);
    fetchq_.clear();
    decodeq_.clear();
    auto keep_handler = [](auto &v) {
        v.erase(std::remove_if(v.begin(), v.end(), [](const auto &e) { return !e.u->handler; }),
                v.end());
    };
    keep_handler(iq_int_);
    keep_handler(iq_fp_);
    keep_handler(executing_);
    exec_next_ = NEVER;
    for (const Executing &e : executing_) exec_next_ = std::min(exec_next_, e.ready);
    loads_ = stores_ = 0;
    // the program's registers go back to the committed map; the k
    // registers keep the kept handler's renaming
    std::copy(committed_map_.begin(), committed_map_.begin() + KREG, map_.begin());
    // the free lists: every register neither committed nor a kept handler
    // uop's, in ascending order
    std::vector<uint8_t> &used = preg_used_;
    std::fill(used.begin(), used.end(), 0);
    for (int p : committed_map_) used[static_cast<size_t>(p)] = 1;
    if (kept_dst)
        for (Uop *u : rob_)
            if (u->dst >= 0) used[static_cast<size_t>(u->dst)] = 1;
    free_int_.clear();
    free_fp_.clear();
    for (int p = 0; p < n_int_phys_; p++)
        if (!used[static_cast<size_t>(p)]) free_int_.push_back(p);
    for (size_t p = static_cast<size_t>(n_int_phys_); p < used.size(); p++)
        if (!used[p]) free_fp_.push_back(static_cast<int>(p));
    for (int p : committed_map_) preg_ready_[static_cast<size_t>(p)] = 0;
    waiting_branch_ = nullptr;
    iq_dirty_ = true;
    prepend_at_ = 0;
    handler_undispatched_ = 0;
    fetch_seq_ = resume_seq;
}

// The head of the ROB missed the TLB: take it the configured way.
void Core::take_miss(Uop &head)
{
    st_.tlb_misses++;
    st_.rob_occupancy_at_miss += rob_.size();
    miss_vpn_ = head.vpn;
    handler_next_ = 0;
    handler_active_ = true;
    head.tlbmiss = true;
    const std::vector<Inst> &h = handler();
    bool inlined = false;
    if (c_.scheme != Scheme::TRADITIONAL) {
        // what must fit before the handler can be in-lined: the user
        // instructions already in the front end (they rename and dispatch
        // first, and may hold what they take until the access at the head
        // commits) and the whole handler.  Each resource they need is
        // counted: one left out lets the program's instructions ahead of
        // the handler wait for ever for room only the head's commit frees.
        // The handler dispatches ahead of them - prepend: the ROB's tail
        // moves to before its head; append, unless append_after_frontend:
        // the program's dispatch stalls while the handler goes in (the
        // paper's section 4.1) - so then only the handler must fit.
        int fe = 0, fe_int_dst = 0, fe_fp_dst = 0, fe_iq_int = 0, fe_iq_fp = 0, fe_ld = 0,
            fe_st = 0;
        if (c_.scheme == Scheme::APPEND && c_.append_after_frontend)
            for (auto *q : {&fetchq_, &decodeq_})
                for (Uop *u : *q) {
                    fe++;
                    const Inst &in = *u->inst;
                    if (in.rd != NOREG) (is_fp_reg(in.rd) ? fe_fp_dst : fe_int_dst)++;
                    (in.cls == C_FP || in.cls == C_FDIV ? fe_iq_fp : fe_iq_int)++;
                    if (in.cls == C_LOAD || in.cls == C_AMO) fe_ld++;
                    if (in.cls == C_STORE || in.cls == C_AMO) fe_st++;
                }
        int h_dst = 0;
        for (const Inst &in : h)
            if (in.rd != NOREG) h_dst++;
        int rob_free = c_.rob_size - static_cast<int>(rob_.size());
        int iq_int_free = c_.iq_int - static_cast<int>(iq_int_.size() - iq_handler_);
        int iq_fp_free = c_.iq_fp - static_cast<int>(iq_fp_.size());
        if (rob_free < fe + static_cast<int>(h.size()))
            st_.fallback_rob++;
        else if (iq_int_free < fe_iq_int + (c_.handler_iq ? 1 : 0) || iq_fp_free < fe_iq_fp)
            st_.fallback_iq++;
        else if (static_cast<int>(free_int_.size()) < fe_int_dst + h_dst ||
                 static_cast<int>(free_fp_.size()) < fe_fp_dst)
            st_.fallback_regs++;
        else if (c_.load_queue - loads_ < fe_ld || c_.store_queue - stores_ < fe_st)
            st_.fallback_lsq++;
        else
            inlined = true;
    }
    if (inlined) {
        st_.inlined++;
        inline_ = true;
        handler_undispatched_ = static_cast<int>(h.size());
        prepend_at_ = 0;
        mode_ = Mode::FETCH_HANDLER;
        return;
    }
    // traditional: flush, run the handler alone, re-fetch from the head
    inline_ = false;
    uint64_t seq = head.seq;
    flush_all(seq);
    resume_seq_ = seq;
    mode_ = Mode::FETCH_HANDLER;
}

// An in-lined handler dispatches before the program's instructions already
// fetched: always when prepended (the ROB's tail has moved to before its
// head), and when appended unless append_after_frontend says they go first.
bool Core::handler_first() const
{
    return inline_ && (c_.scheme == Scheme::PREPEND || !c_.append_after_frontend);
}

// Such a handler's uop goes ahead of the program's uops in a front-end
// queue (behind the handler uops already there), past a full queue: the
// handler is what dispatches next.
bool Core::passing(const Uop *u) const
{
    return u->handler && handler_first();
}

void Core::front_push(Ring<Uop *> &q, Uop *u)
{
    if (!passing(u)) {
        q.push_back(u);
        return;
    }
    size_t at = 0;
    while (at < q.size() && q[at]->handler) at++;
    q.insert(at, u);
}

// ---- stages ----
void Core::commit()
{
    for (int n = 0; n < c_.commit_width && !rob_.empty(); n++) {
        Uop *u = rob_.front();
        if (u->handler) {
            if (u->st != Uop::DONE) return;
            if (u->arch_dst >= 0) {
                committed_map_[static_cast<size_t>(u->arch_dst)] = u->dst;
                (u->old >= n_int_phys_ ? free_fp_ : free_int_).push_back(u->old);
            }
            st_.handler_insns++;
            if (u->inst->op == TK_ERET) {
                st_.handlers_committed++;
                if (u->inl) st_.inlined_committed++;
            }
            rob_.pop_front();
            if (prepend_at_ > 0) prepend_at_--;
            free_uop(u);
            last_commit_cycle_ = cycle_;
            events_++;
            continue;
        }
        if (u->mem && u->seq != tlb_checked_seq_) {
            // the access's program-order TLB lookup: one handler at a time,
            // and the last one wholly in the ROB (a flush keeps only the
            // handler instructions there)
            if (handler_active_ || mode_ == Mode::FETCH_HANDLER || handler_frontend_ > 0) return;
            tlb_checked_seq_ = u->seq;
            events_++;
            if (!tlb_lookup_commit(u->vpn)) {
                take_miss(*u);
                return;
            }
            if (u->tlbmiss) { // flagged by a probe, but present now: access again
                rearm(u);
                st_.replays++;
                return;
            }
        }
        if (u->st != Uop::DONE || u->tlbmiss) return;
        if (u->stq) { // a store writes the D-cache now
            st_.l1d_accesses++;
            if (!l1d_.access(u->addr)) st_.l1d_misses++;
            stores_--;
        }
        if (u->ldq) loads_--;
        if (u->arch_dst >= 0) {
            committed_map_[static_cast<size_t>(u->arch_dst)] = u->dst;
            (u->old >= n_int_phys_ ? free_fp_ : free_int_).push_back(u->old);
        }
        if (u->inst->cls == C_BRANCH || u->inst->op == JALR) {
            st_.branches++;
            if (u->mispred) st_.mispredicts++;
        }
        st_.user_insns++;
        st_.commit_hash = (st_.commit_hash ^ u->pc) * 0x100000001b3ull; // FNV-1a over the PCs
        rob_.pop_front();
        stream_head_ = (stream_head_ + 1) & (stream_.size() - 1);
        stream_n_--;
        stream_base_++;
        last_commit_cycle_ = cycle_;
        events_++;
        if (program_ended_ && stream_n_ == 0) {
            done_ = true;
            return;
        }
    }
}

// An access held for its page accesses again (the TLB and the cache).
void Core::rearm(Uop *w)
{
    w->tlbmiss = false;
    w->st = Uop::ISSUED;
    w->ready = cycle_ + w->lat;
    if (w->reads_dcache) { // a load reads the D-cache now (a store at commit)
        st_.l1d_accesses++;
        if (!l1d_.access(w->addr)) {
            st_.l1d_misses++;
            w->ready += static_cast<uint64_t>(c_.mem_latency);
        }
    }
    if (w->dst >= 0) {
        // an access that had executed (its page left the TLB before its
        // program-order lookup) delivers its value again, later: readers
        // waiting in the issue queues look again
        if (preg_ready_[static_cast<size_t>(w->dst)] != NEVER)
            for (auto *q : {&iq_int_, &iq_fp_})
                for (IqEntry &e : *q) e.ready = NEVER;
        preg_ready_[static_cast<size_t>(w->dst)] = w->ready;
    }
    executing_.push_back({w->ready, w});
    exec_next_ = std::min(exec_next_, w->ready);
    events_++;
    iq_dirty_ = true;
}

// Fetch touches pc's I-cache line; false when fetch stops for a miss.
bool Core::fetch_line(uint64_t pc)
{
    if ((pc >> l1i_.line_bits) == last_iline_) return true;
    last_iline_ = pc >> l1i_.line_bits;
    if (l1i_.access(pc)) return true;
    st_.l1i_misses++;
    events_++;
    fetch_stall_until_ = cycle_ + static_cast<uint64_t>(c_.mem_latency);
    return c_.mem_latency == 0;
}

void Core::complete()
{
    if (cycle_ < exec_next_) return;
    // (the order matters: two branches sharing a counter train it in the
    // order they are found here, so the list keeps its swap-with-last
    // removal; rearm() may append to it meanwhile)
    uint64_t next = NEVER;
    for (size_t i = 0; i < executing_.size();) {
        if (executing_[i].ready > cycle_) {
            next = std::min(next, executing_[i].ready);
            i++;
            continue;
        }
        Uop *u = executing_[i].u;
        executing_[i] = executing_.back();
        executing_.pop_back();
        u->st = Uop::DONE;
        events_++;
        if (u->handler && u->inst->op == TK_TLBWR && !c_.inject_lost_fill) {
            tlb_fill(miss_vpn_);
            handler_active_ = false;
            // rule 3: every access waiting for this page accesses again, and
            // the one the handler ran for (replays count the others)
            for (Uop *w : rob_)
                if (!w->handler && w->tlbmiss &&
                    (w->vpn == miss_vpn_ || w->seq == tlb_checked_seq_)) {
                    rearm(w);
                    if (w->seq != tlb_checked_seq_) st_.replays++;
                }
        }
        if (u->handler && u->inst->op == TK_ERET && !u->inl) {
            // traditional: back to the program at the instruction that missed
            mode_ = Mode::USER;
            fetch_seq_ = resume_seq_;
            fetch_stall_until_ = cycle_ + 1;
        }
        if (!u->handler && u->inst->cls == C_BRANCH) { // train the counter
            uint8_t &ctr = bpred_[u->bp_idx];
            if (u->taken && ctr < 3) ctr++;
            if (!u->taken && ctr > 0) ctr--;
        }
        if (!u->handler && u->inst->op == JALR)
            btb_target_[(u->pc >> 1) & (btb_target_.size() - 1)] = u->next_pc;
        if (u == waiting_branch_) {
            waiting_branch_ = nullptr;
            fetch_stall_until_ = cycle_ + static_cast<uint64_t>(c_.mispredict_penalty);
        }
    }
    exec_next_ = next;
}

// A uop leaves its issue queue for its unit (or, an access whose page is
// not in the TLB, is held: the miss is found).
void Core::start(Uop *u)
{
    events_++;
    uint64_t lat = u->lat;
    if (u->mem) {
        if (!u->handler && !tlb_probe(u->vpn)) { // held until its page is in the TLB
            st_.detections++;
            st_.rob_occupancy_at_detect += rob_.size();
            u->tlbmiss = true;
            u->st = Uop::ISSUED;
            return;
        }
        if (u->reads_dcache) {
            st_.l1d_accesses++;
            if (!l1d_.access(u->addr)) {
                st_.l1d_misses++;
                lat += static_cast<uint64_t>(c_.mem_latency);
            }
        }
    }
    u->st = Uop::ISSUED;
    u->ready = cycle_ + lat;
    if (u->dst >= 0) preg_ready_[static_cast<size_t>(u->dst)] = u->ready;
    executing_.push_back({u->ready, u});
    exec_next_ = std::min(exec_next_, u->ready);
}

void Core::issue()
{
    // Nothing can issue before the earliest time a waiting uop's operands
    // are known to be ready, unless something changed since the last look
    // (a uop came in, one issued, an access was re-armed): skip the scan.
    if (!iq_dirty_ && cycle_ < iq_next_) return;
    iq_dirty_ = false;
    iq_next_ = NEVER;
    // The cycle an entry's operands are ready (e.ready is worked out once
    // the producers have all issued: NEVER until then, and the scan looks
    // again), kept in the entry by keep().
    auto ready_at = [this](const IqEntry &e) {
        uint64_t r = e.ready == NEVER ? operands_ready(e.src) : e.ready;
        if (r > cycle_) iq_next_ = std::min(iq_next_, r); // NEVER until a producer issues
        return r;
    };
    // Each queue is scanned oldest first until its units are used up; the
    // entries that stay are moved down over those that went, in order.
    auto keep = [](std::vector<IqEntry> &q, size_t i, size_t kept, uint64_t r) {
        if (kept != i) q[kept] = q[i];
        q[kept].ready = r;
    };
    // integer queue: int_units a cycle, mem_ports of them for memory;
    // serialising instructions only at the head of the ROB
    const int width = std::min(c_.int_units, c_.issue_width);
    int issued = 0, mem = 0;
    size_t n = iq_int_.size(), i = 0, kept = 0;
    for (; i < n && issued < width; i++) {
        const IqEntry &e = iq_int_[i];
        uint64_t r = ready_at(e);
        if (r <= cycle_) {
            if ((e.mem && mem >= c_.mem_ports) || (e.serial && rob_.front() != e.u)) {
                iq_dirty_ = true; // ready, but held: look again next cycle
            } else {
                Uop *u = e.u;
                if (u->handler && !c_.handler_iq) iq_handler_--;
                if (e.mem) mem++;
                issued++;
                start(u);
                continue;
            }
        }
        keep(iq_int_, i, kept++, r);
    }
    if (kept != i) {
        for (; i < n; i++) iq_int_[kept++] = iq_int_[i];
        iq_int_.resize(kept);
    }
    if (issued == width) iq_dirty_ = true; // more may be ready
    int fp = 0;
    n = iq_fp_.size(), i = 0, kept = 0;
    for (; i < n && fp < c_.fp_units; i++) {
        const IqEntry &e = iq_fp_[i];
        uint64_t r = ready_at(e);
        if (r <= cycle_) {
            fp++;
            start(e.u);
            continue;
        }
        keep(iq_fp_, i, kept++, r);
    }
    if (kept != i) {
        for (; i < n; i++) iq_fp_[kept++] = iq_fp_[i];
        iq_fp_.resize(kept);
    }
    if (fp == c_.fp_units) iq_dirty_ = true;
    if (issued || fp) iq_dirty_ = true; // their results wake others
}

void Core::dispatch()
{
    for (int n = 0; n < c_.rename_width && !decodeq_.empty(); n++) {
        Uop *u = decodeq_.front();
        if (u->stage_at >= cycle_) return;
        // the program's uops wait while an in-lined handler's go in ahead
        // of them (the room the in-lining found is the handler's)
        if (!u->handler && handler_undispatched_ > 0 && handler_first()) return;
        if (static_cast<int>(rob_.size()) >= c_.rob_size) return;
        // (with handler_iq = 0 the handler's uops wait beside the queue)
        bool own_queue = u->handler && !c_.handler_iq;
        if (u->fpq ? static_cast<int>(iq_fp_.size()) >= c_.iq_fp
                   : !own_queue && static_cast<int>(iq_int_.size() - iq_handler_) >= c_.iq_int)
            return;
        if ((u->ldq && loads_ >= c_.load_queue) || (u->stq && stores_ >= c_.store_queue)) return;
        const Inst &in = *u->inst;
        if (in.rd != NOREG && (u->dst_fp ? free_fp_.empty() : free_int_.empty())) return;
        decodeq_.pop_front();
        events_++;
        // rename (map_[NOREG] is the always-ready zero_preg_)
        for (int s = 0; s < 3; s++) u->src[s] = static_cast<uint16_t>(map_[u->src_arch[s]]);
        if (in.rd != NOREG) {
            auto &fl = u->dst_fp ? free_fp_ : free_int_;
            u->dst = fl.back();
            fl.pop_back();
            u->old = map_[in.rd];
            u->arch_dst = in.rd;
            map_[in.rd] = u->dst;
            preg_ready_[static_cast<size_t>(u->dst)] = NEVER;
        }
        u->st = Uop::WAIT;
        if (u->handler) {
            handler_frontend_--;
            if (inline_ && handler_undispatched_ > 0) handler_undispatched_--;
        } else {
            if (u->ldq) loads_++;
            if (u->stq) stores_++;
        }
        // serialising: system instructions, and a flushing handler's return
        std::vector<IqEntry> &q = u->fpq ? iq_fp_ : iq_int_;
        q.emplace_back(); // (written field by field: no copy of a half-written entry)
        IqEntry &e = q.back();
        e.ready = operands_ready(u->src);
        e.u = u;
        e.src[0] = u->src[0];
        e.src[1] = u->src[1];
        e.src[2] = u->src[2];
        e.mem = u->mem;
        e.serial = u->system || (in.op == TK_ERET && !u->inl);
        if (own_queue) iq_handler_++;
        iq_dirty_ = true;
        if (u->handler && inline_ && c_.scheme == Scheme::PREPEND) {
            rob_.insert(static_cast<size_t>(prepend_at_), u);
            prepend_at_++;
        } else {
            rob_.push_back(u);
        }
    }
}

void Core::decode()
{
    for (int n = 0; n < c_.decode_width && !fetchq_.empty(); n++) {
        Uop *u = fetchq_.front();
        if (u->stage_at >= cycle_) return;
        if (static_cast<int>(decodeq_.size()) >= c_.decode_queue && !passing(u)) return;
        fetchq_.pop_front();
        events_++;
        u->stage_at = cycle_;
        front_push(decodeq_, u);
    }
}

void Core::fetch()
{
    if (cycle_ < fetch_stall_until_) return;
    // a mispredicted branch stops the program's fetch until it executes; the
    // handler is fetched from its own address regardless (an in-lined
    // handler may be what the branch is waiting for)
    if (waiting_branch_ && mode_ != Mode::FETCH_HANDLER) return;
    for (int n = 0; n < c_.fetch_width; n++) {
        // a handler dispatching first has its own way past full front-end queues
        bool pass = mode_ == Mode::FETCH_HANDLER && handler_first();
        if (static_cast<int>(fetchq_.size()) >= c_.fetch_queue && !pass) return;
        if (mode_ == Mode::WAIT_ERET) return;
        uint64_t pc;
        Uop *u;
        if (mode_ == Mode::FETCH_HANDLER) {
            pc = HANDLER_PC + 4 * handler_next_;
            if (!fetch_line(pc)) return;
            if (pool_.empty()) {
                u = new Uop();
            } else {
                u = pool_.back();
                pool_.pop_back();
            }
            *u = handler_uops_[handler_next_]; // what it is, and a fresh timing state
            u->inl = inline_;
            handler_frontend_++;
            u->pc = pc;
            u->seq = handler_next_;
            // the handler's memory: the PTE, and the counter below the table
            if (u->inst->op == LD && handler_next_ < 8)
                u->addr = PT_BASE + miss_vpn_ * 8;
            else if (u->mem)
                u->addr = PT_BASE - 8;
            u->stage_at = cycle_;
            front_push(fetchq_, u);
            events_++;
            if (++handler_next_ == handler_uops_.size()) {
                mode_ = inline_ ? Mode::USER : Mode::WAIT_ERET;
                return;
            }
            continue;
        }
        // the program
        if (fetch_seq_ - stream_base_ == stream_n_) { // the machine runs the next one
            if (m_.exited()) {
                program_ended_ = true;
                events_++;
                return;
            }
            if (stream_n_ == stream_.size()) { // (the ring is sized for every uop in flight)
                dump("the instruction stream overflowed");
                abort();
            }
            Uop &r = stream_[(stream_head_ + stream_n_) & (stream_.size() - 1)];
            Step s;
            m_.step(&s);
            r.code = *s.inst;
            r.seq = stream_base_ + stream_n_;
            r.pc = s.pc;
            r.next_pc = s.next_pc;
            r.addr = s.addr;
            r.taken = s.taken;
            r.vpn = s.addr >> c_.page_bits;
            set_kind(r, r.code);
            stream_n_++;
        }
        u = &stream_at(fetch_seq_);
        pc = u->pc;
        if (!fetch_line(pc)) return;
        fetch_seq_++;
        // a fresh timing state
        u->st = Uop::FRONT;
        u->stage_at = cycle_;
        u->ready = NEVER;
        u->dst = u->old = u->arch_dst = -1;
        u->tlbmiss = u->mispred = u->ras_push = false;
        u->ras_pop = u->ras_drop = NEVER;
        fetchq_.push_back(u);
        events_++;
        // branch prediction
        const Inst &in = u->code;
        const Uop &r = *u;
        bool stop = false;
        u->ghist = ghist_;
        if (in.cls == C_BRANCH) {
            size_t idx = ((pc >> 1) ^ ghist_) & (bpred_.size() - 1);
            bool pred = bpred_[idx] >= 2;
            u->bp_idx = static_cast<uint32_t>(idx);
            ghist_ = ((ghist_ << 1) | (r.taken ? 1 : 0)) & (bpred_.size() - 1);
            if (pred != r.taken) {
                u->mispred = true;
                waiting_branch_ = u;
                return;
            }
            stop = r.taken;
        } else if (in.op == JAL) {
            if (in.rd == 1) {
                ras_.push_back(pc + in.len);
                u->ras_push = true;
            }
            stop = true;
        } else if (in.op == JALR) {
            uint64_t predicted;
            bool is_return = in.rd == NOREG && in.rs1 == 1 && in.imm == 0;
            if (is_return && !ras_.empty()) {
                predicted = ras_.back();
                u->ras_pop = predicted;
                ras_.pop_back();
            } else {
                predicted = btb_target_[(pc >> 1) & (btb_target_.size() - 1)];
            }
            if (in.rd == 1) {
                ras_.push_back(pc + in.len);
                u->ras_push = true;
            }
            if (ras_.size() > 32) {
                u->ras_drop = ras_.front();
                ras_.erase(ras_.begin());
            }
            if (predicted != r.next_pc) {
                u->mispred = true;
                waiting_branch_ = u;
                return;
            }
            stop = true;
        }
        if (stop) return; // a taken branch ends the fetch group
    }
}

// ---- the run ----
bool Core::run(uint64_t max_insns)
{
    double t0 = now(), c0 = cpu_now();
    bool ok = true;
    while (!done_) {
        uint64_t events = events_;
        commit();
        complete();
        issue();
        dispatch();
        decode();
        fetch();
        if (events_ == events) skip_idle();
        cycle_++;
        if (max_insns && st_.user_insns >= max_insns) break;
        if (cycle_ - last_commit_cycle_ > c_.stuck_cycles) {
            dump("no instruction committed");
            ok = false;
            break;
        }
    }
    st_.cycles = cycle_;
    st_.seconds = now() - t0;
    st_.cpu_seconds = cpu_now() - c0;
    return ok;
}

// Nothing moved this cycle: nothing will until the next cycle something
// is timed for - an execution finishes, fetch's stall ends, a waiting
// uop's operands are ready - as every stage is held by room that only
// such an event frees.  Jump to the cycle before it (the time is the same
// as stepping through the idle cycles, one by one, without the cost).
void Core::skip_idle()
{
    if (iq_dirty_) return;
    uint64_t next = std::min(iq_next_, exec_next_);
    if (fetch_stall_until_ > cycle_) next = std::min(next, fetch_stall_until_);
    if (next == NEVER) // stuck: go straight to the check
        next = std::max(cycle_ + 1, last_commit_cycle_ + c_.stuck_cycles + 1);
    if (next > cycle_ + 1) cycle_ = next - 1;
}

void Core::dump(const char *why) const
{
    const char *mode[] = {"user", "fetching the handler", "waiting for eret"};
    fprintf(stderr,
            "tksim: the pipeline is stuck: %s for %llu cycles (cycle %llu, %llu committed)\n"
            "  fetch: mode %s, next %llu, stalled until %llu, waiting for a branch: %s\n"
            "  queues: fetch %zu, decode %zu, ROB %zu, IQ %zu+%zu, executing %zu, loads %d, "
            "stores %d\n"
            "  free registers: %zu int, %zu fp; handler active %d, in-lined %d\n",
            why, static_cast<unsigned long long>(c_.stuck_cycles),
            static_cast<unsigned long long>(cycle_),
            static_cast<unsigned long long>(st_.user_insns), mode[static_cast<int>(mode_)],
            static_cast<unsigned long long>(fetch_seq_),
            static_cast<unsigned long long>(fetch_stall_until_), waiting_branch_ ? "yes" : "no",
            fetchq_.size(), decodeq_.size(), rob_.size(), iq_int_.size(), iq_fp_.size(),
            executing_.size(), loads_, stores_, free_int_.size(), free_fp_.size(),
            handler_active_ ? 1 : 0, inline_ ? 1 : 0);
    if (!rob_.empty())
        fprintf(stderr,
                "  head: seq %llu (looked up: %llu), page 0x%llx %s the TLB; last handler's page "
                "0x%llx\n",
                static_cast<unsigned long long>(rob_.front()->seq),
                static_cast<unsigned long long>(tlb_checked_seq_),
                static_cast<unsigned long long>(rob_.front()->vpn),
                tlb_probe(rob_.front()->vpn) ? "in" : "not in",
                static_cast<unsigned long long>(miss_vpn_));
    const char *sn[] = {"front", "waiting", "issued", "done"};
    size_t k = 0;
    for (const Uop *u : rob_) {
        if (k++ >= 12) break;
        fprintf(stderr, "  rob[%zu]: %s%s pc 0x%llx %s%s\n", k - 1, u->handler ? "handler " : "",
                op_name(u->inst->op), static_cast<unsigned long long>(u->pc), sn[u->st],
                u->tlbmiss ? " (TLB miss)" : "");
    }
}

std::string Core::stats_json() const
{
    const Stats &s = st_;
    double ipc_den = static_cast<double>(s.user_insns ? s.user_insns : 1);
    char b[2048];
    snprintf(
        b, sizeof b,
        "{\"scheme\": \"%s\", \"tlb_entries\": %d, \"tlb_replacement\": \"%s\", "
        "\"cycles\": %llu, \"instructions\": %llu, \"handler_instructions\": %llu, "
        "\"cpi\": %.6f, \"tlb_accesses\": %llu, \"tlb_misses\": %llu, \"inlined\": %llu, "
        "\"fallback\": {\"rob\": %llu, \"iq\": %llu, \"registers\": %llu, \"lsq\": %llu}, "
        "\"handlers_committed\": %llu, \"inlined_committed\": %llu, \"inlined_kept\": %llu, "
        "\"flushes\": %llu, "
        "\"flushed\": {\"done\": %llu, \"issued\": %llu, \"waiting\": %llu, \"frontend\": "
        "%llu}, \"flushed_per_miss\": %.4f, \"rob_occupancy_at_miss\": %.3f, \"replays\": "
        "%llu, \"branches\": %llu, \"mispredicts\": %llu, \"l1d_accesses\": %llu, "
        "\"l1d_misses\": %llu, \"l1i_misses\": %llu, \"commit_hash\": \"%016llx\", "
        "\"detections\": %llu, \"rob_occupancy_at_detect\": %.3f, "
        "\"seconds\": %.6f, \"ips\": %.1f, \"cpu_seconds\": %.6f, \"cpu_ips\": %.1f}",
        SCHEME_NAMES[static_cast<int>(c_.scheme)], c_.tlb_entries,
        REPLACEMENT_NAMES[static_cast<int>(c_.tlb_replacement)],
        static_cast<unsigned long long>(s.cycles), static_cast<unsigned long long>(s.user_insns),
        static_cast<unsigned long long>(s.handler_insns), static_cast<double>(s.cycles) / ipc_den,
        static_cast<unsigned long long>(s.tlb_accesses),
        static_cast<unsigned long long>(s.tlb_misses), static_cast<unsigned long long>(s.inlined),
        static_cast<unsigned long long>(s.fallback_rob),
        static_cast<unsigned long long>(s.fallback_iq),
        static_cast<unsigned long long>(s.fallback_regs),
        static_cast<unsigned long long>(s.fallback_lsq),
        static_cast<unsigned long long>(s.handlers_committed),
        static_cast<unsigned long long>(s.inlined_committed),
        static_cast<unsigned long long>(s.inlined_kept), static_cast<unsigned long long>(s.flushes),
        static_cast<unsigned long long>(s.flushed_done),
        static_cast<unsigned long long>(s.flushed_issued),
        static_cast<unsigned long long>(s.flushed_waiting),
        static_cast<unsigned long long>(s.flushed_frontend),
        s.tlb_misses ? static_cast<double>(s.flushed_done + s.flushed_issued + s.flushed_waiting +
                                           s.flushed_frontend) /
                           static_cast<double>(s.tlb_misses)
                     : 0.0,
        s.tlb_misses
            ? static_cast<double>(s.rob_occupancy_at_miss) / static_cast<double>(s.tlb_misses)
            : 0.0,
        static_cast<unsigned long long>(s.replays), static_cast<unsigned long long>(s.branches),
        static_cast<unsigned long long>(s.mispredicts),
        static_cast<unsigned long long>(s.l1d_accesses),
        static_cast<unsigned long long>(s.l1d_misses),
        static_cast<unsigned long long>(s.l1i_misses),
        static_cast<unsigned long long>(s.commit_hash),
        static_cast<unsigned long long>(s.detections),
        s.detections
            ? static_cast<double>(s.rob_occupancy_at_detect) / static_cast<double>(s.detections)
            : 0.0,
        s.seconds, s.seconds > 0 ? static_cast<double>(s.user_insns) / s.seconds : 0.0,
        s.cpu_seconds, s.cpu_seconds > 0 ? static_cast<double>(s.user_insns) / s.cpu_seconds : 0.0);
    return b;
}

std::string Core::stats_table() const
{
    const Stats &s = st_;
    std::ostringstream o;
    double insns = static_cast<double>(s.user_insns ? s.user_insns : 1);
    uint64_t flushed = s.flushed_done + s.flushed_issued + s.flushed_waiting + s.flushed_frontend;
    char b[256];
    o << "  " << c_.describe() << "\n";
    snprintf(
        b, sizeof b, "  cycles %llu, instructions %llu (+%llu in the handler), CPI %.4f\n",
        static_cast<unsigned long long>(s.cycles), static_cast<unsigned long long>(s.user_insns),
        static_cast<unsigned long long>(s.handler_insns), static_cast<double>(s.cycles) / insns);
    o << b;
    snprintf(b, sizeof b,
             "  DTLB: %llu misses in %llu accesses; in-lined %llu, flushed instead %llu (ROB %llu, "
             "issue queue %llu, registers %llu, load/store queue %llu)\n",
             static_cast<unsigned long long>(s.tlb_misses),
             static_cast<unsigned long long>(s.tlb_accesses),
             static_cast<unsigned long long>(s.inlined),
             static_cast<unsigned long long>(s.fallback_rob + s.fallback_iq + s.fallback_regs +
                                             s.fallback_lsq +
                                             (c_.scheme == Scheme::TRADITIONAL ? s.tlb_misses : 0)),
             static_cast<unsigned long long>(s.fallback_rob),
             static_cast<unsigned long long>(s.fallback_iq),
             static_cast<unsigned long long>(s.fallback_regs),
             static_cast<unsigned long long>(s.fallback_lsq));
    o << b;
    snprintf(b, sizeof b,
             "  handlers committed %llu, in-lined %llu of them (%llu kept through a later "
             "miss's flush)\n",
             static_cast<unsigned long long>(s.handlers_committed),
             static_cast<unsigned long long>(s.inlined_committed),
             static_cast<unsigned long long>(s.inlined_kept));
    o << b;
    snprintf(
        b, sizeof b,
        "  flushed %llu (%.2f per miss): %llu finished, %llu executing, %llu waiting to issue, "
        "%llu before rename; ROB %.1f full when a miss is taken\n",
        static_cast<unsigned long long>(flushed),
        s.tlb_misses ? static_cast<double>(flushed) / static_cast<double>(s.tlb_misses) : 0.0,
        static_cast<unsigned long long>(s.flushed_done),
        static_cast<unsigned long long>(s.flushed_issued),
        static_cast<unsigned long long>(s.flushed_waiting),
        static_cast<unsigned long long>(s.flushed_frontend),
        s.tlb_misses
            ? static_cast<double>(s.rob_occupancy_at_miss) / static_cast<double>(s.tlb_misses)
            : 0.0);
    o << b;
    snprintf(b, sizeof b,
             "  branches %llu (%.2f%% mispredicted), L1D %llu accesses (%.2f%% miss), L1I %llu "
             "misses; %.3f s (%.3f s of CPU), %.2f million instructions/s of CPU\n",
             static_cast<unsigned long long>(s.branches),
             s.branches
                 ? 100.0 * static_cast<double>(s.mispredicts) / static_cast<double>(s.branches)
                 : 0.0,
             static_cast<unsigned long long>(s.l1d_accesses),
             s.l1d_accesses
                 ? 100.0 * static_cast<double>(s.l1d_misses) / static_cast<double>(s.l1d_accesses)
                 : 0.0,
             static_cast<unsigned long long>(s.l1i_misses), s.seconds, s.cpu_seconds,
             s.cpu_seconds > 0 ? static_cast<double>(s.user_insns) / s.cpu_seconds / 1e6 : 0.0);
    o << b;
    return o.str();
}

} // namespace tksim
