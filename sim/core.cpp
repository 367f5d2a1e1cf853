// sim/core.cpp - the timing model (sim/core.hpp).
#include "core.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
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
        {"memo", &memo, 0, 1},
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
        errno = 0;
        unsigned long long v = strtoull(value.c_str(), &end, 10);
        // (strtoull takes "-1" as 2^64 - 1: only digits are a count)
        if (*end || value.empty() || value[0] < '0' || value[0] > '9' || errno == ERANGE ||
            v < 100) {
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
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        *err = path + ": a directory, not a configuration file";
        return false;
    }
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

bool Config::check(std::string *err) const
{
    if (!line_ok()) {
        *err = "the caches' sizes, ways and line size do not make whole sets";
        return false;
    }
    // a correct run may go this long without a commit: an instruction-cache
    // miss, then the handler's loads and the access each missing the
    // D-cache, behind the longest divide
    uint64_t quiet = 16ull * static_cast<uint64_t>(mem_latency + std::max(lat_div, lat_fdiv));
    if (stuck_cycles < quiet) {
        *err = "stuck_cycles = " + std::to_string(stuck_cycles) +
               " is shorter than a correct run may go without a commit with these latencies "
               "(16 x (mem_latency + the longest divide) = " +
               std::to_string(quiet) + ")";
        return false;
    }
    return true;
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
    ways.assign(static_cast<size_t>(sets * a), Way{NEVER, 0});
}

inline bool Core::Cache::access(uint64_t addr)
{
    uint64_t l = addr >> line_bits;
    size_t set =
        static_cast<size_t>(l & static_cast<uint64_t>(sets - 1)) * static_cast<size_t>(assoc);
    clock++;
    size_t victim = set;
    for (size_t w = set; w < set + static_cast<size_t>(assoc); w++) {
        if (ways[w].tag == l) {
            ways[w].age = clock;
            return true;
        }
        if (ways[w].age < ways[victim].age) victim = w;
    }
    ways[victim].tag = l;
    ways[victim].age = clock;
    return false;
}

// ---- micro-ops ----
// What the timing model needs of an instruction, worked out once (when the
// functional machine runs it, or for the handler's code at the start).
void Core::set_kind(Uop &u, const Inst &in) const
{
    u.op = in.op;
    u.len = in.len;
    u.link = in.rd == 1;
    u.is_return = in.rd == NOREG && in.rs1 == 1 && in.imm == 0;
    // the operands: rs3 only for the fused multiply-adds
    u.src_arch[0] = in.rs1;
    u.src_arch[1] = in.rs2;
    u.src_arch[2] = (in.op >= FMADD_S && in.op <= FNMADD_D) ? in.rs3 : NOREG;
    u.rd = in.rd;
    u.dst_fp = in.rd != NOREG && is_fp_reg(in.rd);
    const ClassKind &k = class_kind_[in.cls];
    u.lat = k.lat;
    u.fpq = k.fpq;
    u.system = k.system;
    u.reads_dcache = k.reads_dcache;
    if (u.handler) { // its loads and stores take no load/store-queue entries
        u.mem = in.cls == C_LOAD || in.cls == C_STORE;
        u.ldq = u.stq = false;
        u.ctl = Uop::NONE;
    } else {
        u.mem = k.access;
        u.ldq = k.ldq;
        u.stq = k.stq;
        u.ctl = in.cls == C_BRANCH ? Uop::BRANCH
                : in.op == JAL     ? Uop::JAL
                : in.op == JALR    ? Uop::JALR
                                   : Uop::NONE;
    }
    // serialising: system instructions, and a flushing handler's return
    // (fetch_handler() knows which)
    u.serial = k.system || (!u.handler && in.op == TK_ERET);
    // what rename and fetch leave as they are when they do not apply (the
    // record is fetched again after a flush, as the same instruction)
    u.dst = u.old = u.arch_dst = -1;
    u.mispred = u.ras_push = false;
    u.ras_pop = u.ras_drop = NEVER;
}

void Core::set_kind_program(Uop &u, const Inst &in)
{
    if (in.note[0] == 0 && in.note[1] == 0) { // (op, ILLEGAL: no note yet)
        set_kind(u, in);
        u.st = Uop::FRONT; // (the second block's other fields as fetch sets them)
        u.tlbmiss = false;
        static_assert(ILLEGAL == 0, "a note's first two bytes are 0 until it is written");
        memcpy(in.note, &u.op, KIND_BLOCK);
        memcpy(in.note + KIND_BLOCK, &u.dst, KIND_BLOCK);
        return;
    }
    memcpy(&u.op, in.note, KIND_BLOCK);
    memcpy(&u.dst, in.note + KIND_BLOCK, KIND_BLOCK);
    u.ras_push = false;
    u.ras_pop = u.ras_drop = NEVER;
}

Core::Core(Machine &m, const Config &c) : m_(m), c_(c)
{
    for (int cls = 0; cls < N_CLASSES; cls++) {
        ClassKind &k = class_kind_[cls];
        k.fpq = cls == C_FP || cls == C_FDIV;
        k.system = cls == C_SYSTEM;
        k.access = cls == C_LOAD || cls == C_STORE || cls == C_AMO;
        k.ldq = cls == C_LOAD || cls == C_AMO;
        k.stq = cls == C_STORE || cls == C_AMO;
        k.reads_dcache = k.ldq; // (a store writes the D-cache at commit)
        int lat;
        switch (cls) {
        case C_MUL:
            lat = c.lat_mul;
            break;
        case C_DIV:
            lat = c.lat_div;
            break;
        case C_FP:
            lat = c.lat_fp;
            break;
        case C_FDIV:
            lat = c.lat_fdiv;
            break;
        case C_LOAD:
        case C_AMO:
            lat = c.lat_load;
            break;
        default: // a store's is its address's
            lat = c.lat_int;
        }
        k.lat = static_cast<uint16_t>(lat);
    }
    handler_first_scheme_ = c.scheme == Scheme::PREPEND || !c.append_after_frontend;
    n_int_phys_ = 40 + c.rename_int;
    int n_fp_phys = 32 + c.rename_fp;
    map_.assign(256, Preg{0});
    for (int r = 0; r < 32; r++) map_[r].p = r;                      // x
    for (int r = 0; r < 8; r++) map_[KREG + r].p = 32 + r;           // k
    for (int r = 0; r < 32; r++) map_[FREG + r].p = n_int_phys_ + r; // f
    committed_map_.assign(map_.begin(), map_.begin() + 72);
    for (int p = 40; p < n_int_phys_; p++) free_int_.push_back(Preg{p});
    for (int p = 32; p < n_fp_phys; p++) free_fp_.push_back(Preg{n_int_phys_ + p});
    preg_ready_.assign(static_cast<size_t>(n_int_phys_ + n_fp_phys) + 1, Ready{0});
    zero_preg_ = static_cast<uint16_t>(n_int_phys_ + n_fp_phys);
    map_[NOREG].p = zero_preg_;
    waiters_.assign(preg_ready_.size(), nullptr);
    // the stream's ring: every user instruction in flight, and one more, and
    // room for a segment's replay (it commits only at its end)
    size_t in_flight =
        static_cast<size_t>(c.rob_size + c.fetch_queue + c.decode_queue) + 2 + SEG_MAX_COMMITS;
    size_t ring = 16;
    while (ring < in_flight) ring *= 2;
    stream_.resize(ring);
    stream_mask_ = ring - 1;
    for (const Inst &in : handler()) {
        Uop u;
        u.handler = true;
        set_kind(u, in);
        handler_uops_.push_back(u);
    }
    pool_.resize(handler_uops_.size());
    for (const Inst &in : handler())
        if (in.rd != NOREG) handler_dsts_++;
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
    bpred_.assign(1u << c.bpred_bits, Counter{1});
    bpred_mask_ = bpred_.size() - 1;
    btb_target_.assign(1024, Target{0});
    btb_mask_ = btb_target_.size() - 1;
    n_handler_ = handler_uops_.size();
    // the queues' rings hold all they can hold without growing (their
    // pushes in the stages do not look): the ROB its size, the front end
    // the fetch and decode queues' and a handler's uops
    rob_.reserve(static_cast<size_t>(c.rob_size) + 1);
    front_.reserve(static_cast<size_t>(c.fetch_queue + c.decode_queue) + n_handler_ + 1);
    hfront_.reserve(n_handler_ + 1);
    // and so do these lists: a free list every register of its class, an
    // issue queue's ready list every uop in the ROB (a uop is in one place
    // at a time: a ready list, a timed list or a register's waiters)
    free_int_.room(static_cast<size_t>(n_int_phys_));
    free_fp_.room(static_cast<size_t>(n_fp_phys));
    iq_int_.ready.room(static_cast<size_t>(c.rob_size) + 1);
    iq_fp_.ready.room(static_cast<size_t>(c.rob_size) + 1);
}

Core::~Core()
{
    // every handler uop is in the pool or in one of these (the issue
    // queues and the executing list point into the ROB); the program's
    // are the stream's
    for (auto *q : {&front_, &hfront_, &rob_})
        for (Uop *u : *q) free_uop(u);
    for (auto &p : pool_)
        for (Uop *u : p) delete u;
}

// ---- the TLB ----
// Its index: an open-addressed table (linear probing) of entry numbers,
// -1 for an empty slot, at least four slots an entry.
size_t Core::tlb_home(uint64_t vpn) const
{
    return static_cast<size_t>((vpn * 0x9e3779b97f4a7c15ull) >> tlb_shift_);
}

int Core::tlb_search(uint64_t vpn) const
{
    size_t mask = tlb_hash_.size() - 1;
    for (size_t i = tlb_home(vpn);; i = (i + 1) & mask) {
        int e = tlb_hash_[i];
        if (e < 0 || tlb_[static_cast<size_t>(e)].vpn == vpn) {
            found_vpn_ = vpn;
            found_ = e;
            return e;
        }
    }
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
    if (seg_recording_) {
        if (vpn == miss_vpn_)
            seg_note(SA_FILL, 0);
        else // (not seen: the replay fills the handler's page)
            seg_recording_ = false;
    }
    found_vpn_ = NEVER; // (the entries move)
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
    st_.flushed_frontend += front_.size();
    const Uop *oldest = nullptr;
    auto undo = [this, &oldest](const Uop *u) {
        oldest = u;
        if (u->ctl >= Uop::JAL) undo_ras(u); // (only jumps use the return stack)
    };
    for (size_t i = front_.size(); i-- > 0;) undo(front_[i]);
    // The ROB: its program uops go (youngest first, for the return stack),
    // their registers back to the free lists (the free registers are those
    // neither committed nor written by a uop in flight; which of them a
    // rename takes does not change its timing); its handler uops stay, in
    // order, and those not issued yet stay in the integer queue.
    size_t handlers_waiting = 0;
    uint64_t by_state[4] = {0, 0, 0, 0}; // (Uop::State)
    bool kept_eret = false;
    if (kept_.size() < rob_.size()) kept_.resize(rob_.size());
    Uop **kept = kept_.data() + rob_.size(); // the handler uops kept, filled from the back
    // (the free lists have room for every register: they are filled here
    // through pointers, their sizes set after)
    Preg *free_int = free_int_.end(), *free_fp = free_fp_.end();
    for (size_t i = rob_.size(); i-- > 0;) {
        Uop *u = rob_[i];
        if (u->handler) {
            *--kept = u;
            handlers_waiting += u->st == Uop::WAIT;
            kept_eret |= u->op == TK_ERET;
            continue;
        }
        by_state[done(u) ? Uop::DONE : u->st]++;
        if (u->ctl >= Uop::JAL) undo_ras(u);
        oldest = u;
        if (u->dst >= 0) *(u->dst_fp ? free_fp++ : free_int++) = Preg{u->dst};
    }
    free_int_.extend_to(free_int);
    free_fp_.extend_to(free_fp);
    st_.flushed_done += by_state[Uop::DONE];
    st_.flushed_issued += by_state[Uop::ISSUED];
    st_.flushed_waiting += by_state[Uop::WAIT] + by_state[Uop::FRONT];
    if (oldest) ghist_ = oldest->ghist;
    if (kept_eret) st_.inlined_kept++;
    size_t handlers = static_cast<size_t>(kept_.data() + rob_.size() - kept);
    rob_.clear();
    if (handlers == 0) {
        iq_int_.ready.clear();
        iq_int_.timed.clear();
        exec_.clear();
    } else {
        for (size_t i = 0; i < handlers; i++) rob_.push_back(kept[i]);
        auto keep_handler = [](List<Uop *> &v) {
            v.shrink(static_cast<size_t>(
                std::remove_if(v.begin(), v.end(), [](const Uop *u) { return !u->handler; }) -
                v.begin()));
        };
        keep_handler(iq_int_.ready);
        keep_handler(iq_int_.timed);
        size_t ex = 0;
        for (size_t i = 0; i < exec_.size(); i++)
            if (exec_[i].u->handler) exec_[ex++] = exec_[i];
        exec_.shrink(ex);
    }
    // (the program's uops that waited for a producer stay among its
    // register's waiters until the register is renamed again, which
    // forgets them: nothing wakes a register no uop in flight writes)
    iq_int_.n = handlers_waiting;
    iq_int_.next = NEVER;
    for (const Uop *u : iq_int_.timed) iq_int_.next = std::min(iq_int_.next, u->iq_ready);
    iq_fp_.n = 0; // (the handler has no floating-point instructions)
    iq_fp_.ready.clear();
    iq_fp_.timed.clear();
    iq_fp_.next = NEVER;
    exec_next_ = NEVER;
    for (const Exec &e : exec_) exec_next_ = std::min(exec_next_, e.ready);
    front_.clear();
    decoded_ = 0;
    loads_ = stores_ = 0;
    // the program's registers go back to the committed map; the k
    // registers keep the kept handler's renaming
    std::copy(committed_map_.begin(), committed_map_.begin() + KREG, map_.begin());
    waiting_branch_ = nullptr;
    prepend_at_ = 0;
    handler_undispatched_ = 0;
    fetch_seq_ = resume_seq;
}

// The head of the ROB missed the TLB: take it the configured way.
void Core::take_miss(Uop &head)
{
    st_.tlb_misses++;
    st_.rob_occupancy_at_miss += rob_.size();
    miss_vpn_ = vpn(&head);
    if (seg_recording_) seg_note(SA_MISS, head.seq - seg_seq0_);
    handler_next_ = 0;
    handler_active_ = true;
    // held until the handler's TLB write starts it again (rearm), done as far
    // as flush_all() counts it if its cycle has passed (an access is no
    // branch: it has no entry in the executing list to remove)
    if (done(&head)) head.st = Uop::DONE;
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
            for (const Uop *u : front_) { // (program uops: no handler's is there)
                fe++;
                if (u->rd != NOREG) (u->dst_fp ? fe_fp_dst : fe_int_dst)++;
                (u->fpq ? fe_iq_fp : fe_iq_int)++;
                if (u->ldq) fe_ld++;
                if (u->stq) fe_st++;
            }
        const int h_dst = handler_dsts_;
        int rob_free = c_.rob_size - static_cast<int>(rob_.size());
        int iq_int_free = c_.iq_int - static_cast<int>(iq_int_.n - iq_handler_);
        int iq_fp_free = c_.iq_fp - static_cast<int>(iq_fp_.n);
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
    if (seg_recording_) seg_note(SA_FLUSH, seq - seg_seq0_);
    flush_all(seq);
    resume_seq_ = seq;
    mode_ = Mode::FETCH_HANDLER;
    uint64_t stall;
    bool alone = alone_possible(&stall);
    if (alone && replay_alone(stall)) {
        seg_canonical();
        return;
    }
    seg_recording_ = false;
    if (!alone) return;
    // simulated, and recorded
    alone_recording_ = true;
    alone_path_.clear();
    alone_root_ = alone_root(stall);
    alone_start_ = cycle_;
    alone_last_commit_ = NEVER;
    alone_first_commit_ = alone_longest_gap_ = 0;
}

// ---- a handler run alone (core.hpp) ----
uint64_t Core::handler_addr(size_t i) const
{
    // the PTE, and the miss counter below the table
    return handler_uops_[i].op == LD && i < 8 ? PT_BASE + miss_vpn_ * 8 : PT_BASE - 8;
}

// Whether the flush just made left the handler to run alone: nothing in
// flight but an in-lined handler kept in the ROB that has finished (it
// commits meanwhile), and fetch's last I-cache line not one of the
// handler's (so it reads its first line); and the cycles fetch must still
// wait.
bool Core::alone_possible(uint64_t *stall) const
{
    if (c_.inject_lost_fill || !front_.empty() || !hfront_.empty() || !exec_.empty() ||
        iq_int_.n != 0 || iq_fp_.n != 0 || iq_handler_ != 0 || handler_frontend_ != 0)
        return false;
    for (const Uop *u : rob_) // (all handler uops: flush_all() kept them)
        if (u->st != Uop::DONE || !u->inl) return false;
    uint64_t first = HANDLER_PC >> l1i_.line_bits,
             last = (HANDLER_PC + 4 * n_handler_ - 1) >> l1i_.line_bits;
    if (last_iline_ >= first && last_iline_ <= last) return false;
    *stall = fetch_stall_until_ > cycle_ ? fetch_stall_until_ - cycle_ : 0;
    return true;
}

size_t Core::alone_root(uint64_t stall)
{
    for (size_t i = 0; i < alone_roots_.size(); i++) {
        const AloneRoot &r = alone_roots_[i];
        if (r.stall == stall && r.kept == rob_.size() && r.free_int == free_int_.size() &&
            r.free_fp == free_fp_.size())
            return i;
    }
    alone_roots_.push_back(AloneRoot{stall, rob_.size(), free_int_.size(), free_fp_.size(), -1});
    return alone_roots_.size() - 1;
}

// Replays the handler's run alone if its accesses' outcomes are in the
// tree; false (the caches and counts as they were) if not.
bool Core::replay_alone(uint64_t stall)
{
    int node = alone_roots_[alone_root(stall)].node;
    if (node < 0) return false;
    const uint64_t iclock = l1i_.clock, dclock = l1d_.clock, imisses = st_.l1i_misses,
                   daccesses = st_.l1d_accesses, dmisses = st_.l1d_misses;
    alone_touched_.clear();
    alone_saved_.clear();
    auto undo = [&] {
        for (size_t k = alone_touched_.size(); k-- > 0;) {
            const AloneTouched &t = alone_touched_[k];
            std::copy_n(alone_saved_.begin() + static_cast<ptrdiff_t>(t.saved), t.cache->assoc,
                        t.cache->ways.begin() + static_cast<ptrdiff_t>(t.set));
        }
        st_.l1i_misses = imisses;
        st_.l1d_accesses = daccesses;
        st_.l1d_misses = dmisses;
        l1i_.clock = iclock;
        l1d_.clock = dclock;
    };
    while (alone_[static_cast<size_t>(node)].access != ALONE_END) {
        const AloneNode &n = alone_[static_cast<size_t>(node)];
        bool fetch = n.access < ALONE_LOAD;
        Cache &c = fetch ? l1i_ : l1d_;
        uint64_t addr = fetch ? HANDLER_PC + (static_cast<uint64_t>(n.access) << l1i_.line_bits)
                              : handler_addr(static_cast<size_t>(n.access - ALONE_LOAD));
        size_t set = c.set_of(addr);
        alone_touched_.push_back(AloneTouched{&c, set, alone_saved_.size()});
        alone_saved_.insert(alone_saved_.end(), c.ways.begin() + static_cast<ptrdiff_t>(set),
                            c.ways.begin() + static_cast<ptrdiff_t>(set) + c.assoc);
        bool hit = c.access(addr);
        if (seg_recording_)
            seg_note(fetch ? SA_ILINE_H : SA_L1D_H,
                     fetch ? addr >> l1i_.line_bits : static_cast<uint64_t>(n.access - ALONE_LOAD),
                     hit);
        if (fetch) {
            if (!hit) st_.l1i_misses++;
        } else {
            st_.l1d_accesses++;
            if (!hit) st_.l1d_misses++;
        }
        node = n.next[hit];
        if (node < 0) { // not seen: simulated
            undo();
            return false;
        }
    }
    const AloneNode &end = alone_[static_cast<size_t>(node)];
    // (the stuck-pipeline check would have stopped the simulated run)
    if (cycle_ + end.first_commit - last_commit_cycle_ > c_.stuck_cycles ||
        end.longest_gap > c_.stuck_cycles) {
        undo();
        return false;
    }
    // the kept handler's uops commit, then the handler's
    for (Uop *u : rob_) commit_handler(u);
    rob_.clear();
    tlb_fill(miss_vpn_);
    handler_active_ = false;
    st_.handler_insns += n_handler_;
    st_.handlers_committed++;
    handler_next_ = n_handler_;
    mode_ = Mode::USER;
    fetch_seq_ = resume_seq_;
    fetch_stall_until_ = cycle_ + end.fetch_stall;
    last_iline_ = end.last_iline;
    cycle_ += end.cycles; // (the eret's commit: the rest of that cycle follows)
    last_commit_cycle_ = cycle_;
    moved_ = true;
    return true;
}

// A handler uop of the run being recorded commits; with its eret, the run
// goes into the tree.
void Core::alone_commit(bool eret)
{
    if (alone_last_commit_ == NEVER)
        alone_first_commit_ = cycle_ - alone_start_;
    else
        alone_longest_gap_ = std::max(alone_longest_gap_, cycle_ - alone_last_commit_);
    alone_last_commit_ = cycle_;
    if (!eret) return;
    alone_recording_ = false;
    // the path down the tree: the node reached is parent's next by outcome
    // (the root's when parent is -1), made if new
    int parent = -1;
    bool outcome = false;
    auto link = [&]() -> int & {
        return parent < 0 ? alone_roots_[alone_root_].node
                          : alone_[static_cast<size_t>(parent)].next[outcome];
    };
    auto step = [&](int access) {
        if (link() < 0) {
            alone_.push_back(AloneNode{});
            alone_.back().access = access;
            link() = static_cast<int>(alone_.size() - 1);
        }
        if (alone_[static_cast<size_t>(link())].access != access) {
            dump("a handler run alone differed from an earlier one");
            abort();
        }
        return link();
    };
    for (const auto &[access, hit] : alone_path_) {
        parent = step(access);
        outcome = hit;
    }
    AloneNode end;
    end.cycles = cycle_ - alone_start_;
    end.first_commit = alone_first_commit_;
    end.fetch_stall = fetch_stall_until_ - alone_start_;
    end.longest_gap = alone_longest_gap_;
    end.last_iline = last_iline_;
    bool seen = link() >= 0;
    AloneNode &e = alone_[static_cast<size_t>(step(ALONE_END))];
    if (mode_ != Mode::USER || handler_active_ || fetch_stall_until_ < alone_start_ ||
        (seen && (e.cycles != end.cycles || e.first_commit != end.first_commit ||
                  e.fetch_stall != end.fetch_stall || e.longest_gap != end.longest_gap ||
                  e.last_iline != end.last_iline))) {
        dump("a handler run alone differed from an earlier one");
        abort();
    }
    if (!seen) e = end;
}

// ---- a run from an empty pipeline (core.hpp) ----
// The return stack as it was before u's fetch (u a jump).
void Core::undo_ras(const Uop *u)
{
    if (u->ras_push) ras_.pop_back();
    if (u->ras_drop != NEVER) ras_.insert(ras_.begin(), u->ras_drop);
    if (u->ras_pop != NEVER) ras_.push_back(u->ras_pop);
}

void Core::seg_note(SegAction kind, uint64_t arg, uint64_t v1, uint64_t v2)
{
    if (stream_base_ - seg_seq0_ >= SEG_MAX_COMMITS) { // (seg_finish() would not keep it)
        seg_recording_ = false;
        return;
    }
    for (; seg_fetched_ < fetch_seq_; seg_fetched_++) {
        const Uop *u = &stream_at(seg_fetched_);
        if (u->seq != seg_fetched_) { // (committed so long ago that the stream has moved on)
            seg_recording_ = false;
            return;
        }
        seg_path_.push_back(SegStep{0, u->pc, seg_fetch_outcome(u), SA_FETCH});
        // (what fetch reads next depends on it before any outcome shows it:
        // a JALR's target, and where a system call or a trap that enters a
        // signal handler or returns from one goes)
        if (u->ctl == Uop::JALR || (u->ctl == Uop::NONE && u->taken))
            seg_path_.push_back(SegStep{0, u->next_pc, 0, SA_TARGET});
    }
    seg_path_.push_back(SegStep{arg, v1, v2, kind});
    if (kind == SA_FLUSH) seg_fetched_ = seg_seq0_ + arg;         // (fetch starts again there)
    if (seg_path_.size() > SEG_MAX_STEPS) seg_recording_ = false; // (too long to record)
}

Core::SegKey Core::seg_key() const
{
    return SegKey{fetch_stall_until_ > cycle_ ? fetch_stall_until_ - cycle_ : 0, last_iline_,
                  stream_at_const(fetch_seq_).pc};
}

// A handler's run alone has just been replayed: the pipeline is empty.  The
// run recorded since the last such point goes into the tree; then the runs
// from here are replayed while they can be, and the first that cannot is
// recorded as it is simulated.
void Core::seg_canonical()
{
    if (!c_.memo) return;
    if (seg_recording_) seg_finish();
    // Where the runs seldom repeat (most replays find new outcomes on the
    // way), recording and replaying cost more than they save: after a
    // window of attempts with more failures than replays, the next points
    // are left alone, for twice as many each time in a row.
    if (seg_skip_ > 0) {
        seg_skip_--;
        return;
    }
    while (seg_replay()) seg_ok_++;
    if (seg_ok_ + seg_failed_ >= 256) {
        if (seg_failed_ > seg_ok_) {
            seg_skip_ = seg_backoff_;
            seg_backoff_ = std::min<uint64_t>(2 * seg_backoff_, 1 << 16);
        } else {
            seg_backoff_ = 256;
        }
        seg_ok_ = seg_failed_ = 0;
    }
    seg_recording_ = !program_ended_ && seg_nodes_.size() < SEG_MAX_NODES;
    if (!seg_recording_) return;
    seg_path_.clear();
    seg_seq0_ = seg_fetched_ = fetch_seq_;
    seg_cycle0_ = cycle_;
    seg_st0_ = st_;
    seg_root_ = &seg_roots_.emplace(seg_key(), -1).first->second;
}

void Core::seg_finish()
{
    seg_recording_ = false;
    // (fetch found the program's end: a replay would not see it; or too
    // long for the stream to hold in a replay)
    if (program_ended_ || stream_base_ - seg_seq0_ >= SEG_MAX_COMMITS || seg_fetched_ != fetch_seq_)
        return;
    SegEnd end;
    end.cycles = cycle_ - seg_cycle0_;
    end.commits = stream_base_ - seg_seq0_;
    end.last_iline = last_iline_;
    end.fetch_stall = static_cast<int64_t>(fetch_stall_until_ - cycle_);
    uint64_t now[SEG_STATS], before[SEG_STATS];
    memcpy(now, &st_, sizeof now);
    memcpy(before, &seg_st0_, sizeof before);
    for (size_t i = 0; i < SEG_STATS; i++) end.stats[i] = now[i] - before[i];
    auto differed = [this] {
        fprintf(stderr, "tksim: internal error: a run from an empty pipeline went otherwise than "
                        "an earlier one with the same outcomes (--set memo=0 simulates every "
                        "cycle)\n");
        dump("a run from an empty pipeline differed from an earlier one");
        abort();
    };
    // down the tree: each step's node, then its child by the step's outcome
    // (made if new, with the next step's action)
    auto what = [this](size_t i) {
        return i < seg_path_.size() ? seg_what(seg_path_[i].kind, seg_path_[i].arg)
                                    : static_cast<uint64_t>(SA_END);
    };
    if (*seg_root_ < 0) {
        seg_nodes_.emplace_back();
        seg_nodes_.back().what = what(0);
        *seg_root_ = static_cast<int>(seg_nodes_.size() - 1);
    }
    int node = *seg_root_;
    for (size_t i = 0; i < seg_path_.size(); i++) {
        const SegStep &st = seg_path_[i];
        if (seg_nodes_[static_cast<size_t>(node)].what != what(i)) differed();
        int c = seg_nodes_[static_cast<size_t>(node)].child;
        while (c >= 0 && (seg_nodes_[static_cast<size_t>(c)].v1 != st.v1 ||
                          seg_nodes_[static_cast<size_t>(c)].v2 != st.v2))
            c = seg_nodes_[static_cast<size_t>(c)].sibling;
        if (c < 0) {
            SegNode n;
            n.v1 = st.v1;
            n.v2 = st.v2;
            n.what = what(i + 1);
            n.sibling = seg_nodes_[static_cast<size_t>(node)].child;
            seg_nodes_.push_back(n);
            c = static_cast<int>(seg_nodes_.size() - 1);
            seg_nodes_[static_cast<size_t>(node)].child = c;
        }
        node = c;
    }
    SegNode &e = seg_nodes_[static_cast<size_t>(node)];
    if (e.kind() != SA_END) differed();
    if (e.child < 0) { // (an end's child: -1 until it has its SegEnd)
        e.child = 0;
        e.what = seg_what(SA_END, seg_ends_.size());
        seg_ends_.push_back(end);
        return;
    }
    const SegEnd &o = seg_ends_[e.arg()];
    if (o.cycles != end.cycles || o.commits != end.commits || o.last_iline != end.last_iline ||
        o.fetch_stall != end.fetch_stall || memcmp(o.stats, end.stats, sizeof end.stats) != 0)
        differed();
}

// Cache::access, the way it changes saved first (seg_replay's undo).
inline bool Core::seg_access(Cache &c, uint64_t addr)
{
    uint64_t l = addr >> c.line_bits;
    Cache::Way *set = &c.ways[c.set_of(addr)], *victim = set;
    c.clock++;
    for (Cache::Way *w = set; w < set + c.assoc; w++) {
        if (w->tag == l) {
            seg_ways_saved_.emplace_back(w, *w);
            w->age = c.clock;
            return true;
        }
        if (w->age < victim->age) victim = w;
    }
    seg_ways_saved_.emplace_back(victim, *victim);
    victim->tag = l;
    victim->age = c.clock;
    return false;
}

// Replays the run from here if its actions' outcomes are in the tree;
// false (all as it was, but for instructions the functional machine has
// run into the stream) if not.
bool Core::seg_replay()
{
    if (program_ended_ || fetch_seq_ != stream_base_ || tlb_checked_seq_ != fetch_seq_)
        return false;
    auto root = seg_roots_.find(seg_key());
    if (root == seg_roots_.end() || root->second < 0) return false;
    const uint64_t seq0 = stream_base_, iclock = l1i_.clock, dclock = l1d_.clock,
                   tlb_clock = tlb_clock_, ghist = ghist_, miss_vpn = miss_vpn_,
                   last_iline = last_iline_;
    const size_t tlb_rr = tlb_rr_;
    seg_ways_saved_.clear();
    seg_bpred_saved_.clear();
    seg_btb_saved_.clear();
    seg_tlb_used_saved_.clear();
    seg_ras_saved_.assign(ras_.begin(), ras_.end());
    bool tlb_saved = false;
    size_t used_before_fill = 0;
    auto undo = [&] {
        for (size_t k = seg_ways_saved_.size(); k-- > 0;)
            *seg_ways_saved_[k].first = seg_ways_saved_[k].second;
        l1i_.clock = iclock;
        l1d_.clock = dclock;
        for (size_t k = seg_bpred_saved_.size(); k-- > 0;)
            bpred_[seg_bpred_saved_[k].first].c = seg_bpred_saved_[k].second;
        for (size_t k = seg_btb_saved_.size(); k-- > 0;)
            btb_target_[seg_btb_saved_[k].first].pc = seg_btb_saved_[k].second;
        // (the stamps lookups changed after the first fill are in its copy)
        size_t used = seg_tlb_used_saved_.size();
        if (tlb_saved) {
            tlb_ = seg_tlb_saved_;
            tlb_hash_ = seg_tlb_hash_saved_;
            used = used_before_fill;
        }
        for (size_t k = used; k-- > 0;)
            tlb_[seg_tlb_used_saved_[k].first].used = seg_tlb_used_saved_[k].second;
        tlb_clock_ = tlb_clock;
        tlb_rr_ = tlb_rr;
        found_vpn_ = NEVER;
        ras_.assign(seg_ras_saved_.begin(), seg_ras_saved_.end());
        ghist_ = ghist;
        miss_vpn_ = miss_vpn;
        tlb_checked_seq_ = seq0;
        last_iline_ = last_iline;
        waiting_branch_ = nullptr;
        seg_failed_++;
        return false;
    };
    // (the stream does not move until the end: the program's instructions
    // are seq0 on, and the one fetch reads next is at cursor)
    Uop *const ring = stream_.data();
    const size_t mask = stream_mask_;
    auto at = [ring, seq0, mask](uint64_t k) { return ring + ((seq0 + k) & mask); };
    uint64_t cursor = 0;
    auto step_next = [&] { // the machine runs the next one (the one at cursor)
        // (at the limit, or a timer's expiry: at_stop() raises its signal)
        if (m_.exited() || (m_.instret() >= m_.stop_at() && m_.at_stop()) || stream_full())
            return false;
        stream_step_call();
        return true;
    };
    seg_jumps_.clear(); // the jumps fetched, by their k (the return stack's undo)
    const SegNode *nodes = seg_nodes_.data();
    const SegNode *n = nodes + root->second;
    for (;;) {
        uint64_t v1 = 0, v2 = 0;
        switch (n->kind()) {
        case SA_FETCH: {
            if (seq0 + cursor == stream_end_ && !step_next()) return undo();
            Uop *u = at(cursor);
            u->ghist = static_cast<uint32_t>(ghist_);
            v1 = u->pc;
            v2 = u->raw | static_cast<uint64_t>(u->taken) << 32; // (seg_fetch_outcome())
            if (u->ctl != Uop::NONE) {
                predict(u);
                waiting_branch_ = nullptr;
                if (u->ctl >= Uop::JAL) seg_jumps_.push_back(cursor);
                if (u->ctl != Uop::JAL) v2 |= static_cast<uint64_t>(u->mispred) << 33;
            }
            cursor++;
            break;
        }
        case SA_ILINE: {
            if (seq0 + cursor == stream_end_ && !step_next()) return undo();
            uint64_t pc = at(cursor)->pc;
            last_iline_ = pc >> l1i_.line_bits;
            v1 = seg_access(l1i_, pc);
            v2 = last_iline_;
            break;
        }
        case SA_TARGET:
            v1 = at(cursor - 1)->next_pc;
            break;
        case SA_ILINE_H:
            last_iline_ = n->arg();
            v1 = seg_access(l1i_, n->arg() << l1i_.line_bits);
            break;
        case SA_L1D_U:
            v1 = seg_access(l1d_, at(n->arg())->addr);
            break;
        case SA_L1D_H:
            v1 = seg_access(l1d_, handler_addr(n->arg()));
            break;
        case SA_PROBE:
            v1 = tlb_probe(at(n->arg())->addr >> c_.page_bits);
            break;
        case SA_LOOKUP: {
            const Uop *u = at(n->arg());
            tlb_checked_seq_ = u->seq;
            int e = tlb_find(u->addr >> c_.page_bits);
            if (e >= 0) {
                seg_tlb_used_saved_.emplace_back(static_cast<size_t>(e),
                                                 tlb_[static_cast<size_t>(e)].used);
                tlb_[static_cast<size_t>(e)].used = ++tlb_clock_;
            }
            v1 = e >= 0;
            break;
        }
        case SA_MISS:
            miss_vpn_ = at(n->arg())->addr >> c_.page_bits;
            break;
        case SA_MATCH:
            v1 = (at(n->arg())->addr >> c_.page_bits) == miss_vpn_;
            break;
        case SA_FILL:
            if (!tlb_saved) { // (the TLB before the run's first fill)
                seg_tlb_saved_ = tlb_;
                seg_tlb_hash_saved_ = tlb_hash_;
                tlb_saved = true;
                used_before_fill = seg_tlb_used_saved_.size();
            }
            tlb_fill(miss_vpn_);
            break;
        case SA_TRAIN: {
            const Uop *u = at(n->arg());
            if (u->ctl == Uop::BRANCH) {
                size_t i = bp_index(u->pc, u->ghist);
                Counter &ctr = bpred_[i];
                seg_bpred_saved_.emplace_back(i, ctr.c);
                if (u->taken && ctr.c < 3) ctr.c++;
                if (!u->taken && ctr.c > 0) ctr.c--;
            } else {
                size_t i = (u->pc >> 1) & btb_mask_;
                seg_btb_saved_.emplace_back(i, btb_target_[i].pc);
                btb_target_[i].pc = u->next_pc;
            }
            break;
        }
        case SA_FLUSH: // (as flush_all(): the youngest first)
            while (!seg_jumps_.empty() && seg_jumps_.back() >= n->arg()) {
                undo_ras(at(seg_jumps_.back()));
                seg_jumps_.pop_back();
            }
            ghist_ = at(n->arg())->ghist;
            cursor = n->arg();
            break;
        case SA_END: {
            const SegEnd &e = seg_ends_[n->arg()];
            // (the run would end at the instruction limit: simulated)
            if (st_.user_insns + e.commits >= max_insns_) return undo();
            uint64_t stats[SEG_STATS], hash = st_.commit_hash;
            for (uint64_t k = 0; k < e.commits; k++)
                hash = (hash ^ at(k)->pc) * 0x100000001b3ull; // (commit_some())
            memcpy(stats, &st_, sizeof stats);
            for (size_t i = 0; i < SEG_STATS; i++) stats[i] += e.stats[i];
            memcpy(static_cast<void *>(&st_), stats, sizeof stats);
            st_.commit_hash = hash;
            stream_base_ += e.commits;
            fetch_seq_ = resume_seq_ = stream_base_;
            cycle_ += e.cycles;
            last_commit_cycle_ = cycle_;
            fetch_stall_until_ = cycle_ + static_cast<uint64_t>(e.fetch_stall);
            last_iline_ = e.last_iline;
            moved_ = true;
            return true;
        }
        default:
            __builtin_unreachable();
        }
        // (an action's node has a child: its run went on)
        const SegNode *c = nodes + n->child;
        while (c->v1 != v1 || c->v2 != v2) {
            if (c->sibling < 0) return undo();
            c = nodes + c->sibling;
        }
        n = c;
    }
}

// ---- stages ----
[[gnu::always_inline]] inline void Core::commit()
{
    int committed = commit_some();
    if (committed) {
        last_commit_cycle_ = cycle_;
        moved_ = true;
        if (st_.user_insns >= max_insns_) done_ = true; // (the run ends with this cycle)
    }
}

// Whether commit may do anything: the head is done, or is an access whose
// program-order TLB lookup is still to come (else it returns at once).
inline bool Core::head_may_commit() const
{
    const Uop *h = rob_.front();
    return done(h) || (h->mem && !h->handler && h->seq != tlb_checked_seq_);
}

// Commits up to commit_width uops from the head of the ROB; how many.
inline int Core::commit_some()
{
    const int width = c_.commit_width;
    int n = 0;
    for (; n < width && !rob_.empty(); n++) {
        Uop *u = rob_.front();
        if (handler_or_mem(u)) {
            if (u->handler) {
                if (u->st != Uop::DONE) return n;
                if (alone_recording_) alone_commit(u->op == TK_ERET && !u->inl);
                rob_.pop_front();
                commit_handler(u);
                continue;
            }
            if (u->seq != tlb_checked_seq_) {
                // the access's program-order TLB lookup: one handler at a time,
                // and the last one wholly in the ROB (a flush keeps only the
                // handler instructions there)
                if (handler_active_ || mode_ == Mode::FETCH_HANDLER || handler_frontend_ > 0)
                    return n;
                tlb_checked_seq_ = u->seq;
                moved_ = true;
                bool present = tlb_lookup_commit(vpn(u));
                if (seg_recording_) seg_note(SA_LOOKUP, u->seq - seg_seq0_, present);
                if (!present) {
                    take_miss(*u);
                    return n;
                }
                if (u->tlbmiss) { // flagged by a probe, but present now: access again
                    rearm(u);
                    st_.replays++;
                    return n;
                }
            }
        }
        if (!done(u)) return n;
        if (u->stq) { // a store writes the D-cache now
            st_.l1d_accesses++;
            bool hit = l1d_.access(u->addr);
            if (seg_recording_) seg_note(SA_L1D_U, u->seq - seg_seq0_, hit);
            if (!hit) st_.l1d_misses++;
            stores_--;
        }
        loads_ -= u->ldq;
        if (u->arch_dst >= 0) {
            committed_map_[static_cast<size_t>(u->arch_dst)].p = u->dst;
            (u->old >= n_int_phys_ ? free_fp_ : free_int_).push_back_fits(Preg{u->old});
        }
        if (u->ctl != Uop::NONE && u->ctl != Uop::JAL) {
            st_.branches++;
            if (u->mispred) st_.mispredicts++;
        }
        st_.user_insns++;
        st_.commit_hash = (st_.commit_hash ^ u->pc) * 0x100000001b3ull; // FNV-1a over the PCs
        rob_.pop_front();
        stream_base_++;
        if (program_ended_ && stream_base_ == stream_end_) {
            done_ = true;
            return n + 1;
        }
    }
    return n;
}

// A handler's uop commits (out of the ROB).
inline void Core::commit_handler(Uop *u)
{
    if (u->arch_dst >= 0) {
        committed_map_[static_cast<size_t>(u->arch_dst)].p = u->dst;
        (u->old >= n_int_phys_ ? free_fp_ : free_int_).push_back_fits(Preg{u->old});
    }
    st_.handler_insns++;
    if (u->op == TK_ERET) {
        st_.handlers_committed++;
        if (u->inl) st_.inlined_committed++;
    }
    if (prepend_at_ > 0) prepend_at_--;
    free_uop(u);
}

// An access held for its page accesses again (the TLB and the cache).
void Core::rearm(Uop *w)
{
    w->tlbmiss = false;
    w->st = Uop::ISSUED;
    w->ready = cycle_ + w->lat;
    if (w->reads_dcache) { // a load reads the D-cache now (a store at commit)
        st_.l1d_accesses++;
        bool hit = l1d_.access(w->addr);
        if (seg_recording_) seg_note(SA_L1D_U, w->seq - seg_seq0_, hit);
        if (!hit) {
            st_.l1d_misses++;
            w->ready += static_cast<uint64_t>(c_.mem_latency);
        }
    }
    if (w->dst >= 0) {
        Ready &r = preg_ready_[static_cast<size_t>(w->dst)];
        bool had_delivered = r.at != NEVER;
        r.at = w->ready;
        if (had_delivered)  // it had executed (its page left the TLB before its
            iq_recompute(); // program-order lookup): it delivers its value again, later
        else
            wake(w->dst);
    }
    if (completes_explicitly(w)) executing(w);
    moved_ = true;
}

// Fetch touches a new I-cache line; false when fetch stops for a miss.
bool Core::fetch_new_line(uint64_t pc)
{
    last_iline_ = pc >> l1i_.line_bits;
    bool hit = l1i_.access(pc);
    if (seg_recording_) {
        if (mode_ == Mode::USER) // (the line is an outcome: it may differ at a jump's target)
            seg_note(SA_ILINE, 0, hit, last_iline_);
        else
            seg_note(SA_ILINE_H, last_iline_, hit);
    }
    if (alone_recording_) // (the handler's line)
        alone_note(static_cast<int>(last_iline_ - (HANDLER_PC >> l1i_.line_bits)), hit);
    if (hit) return true;
    st_.l1i_misses++;
    moved_ = true;
    fetch_stall_until_ = cycle_ + static_cast<uint64_t>(c_.mem_latency);
    return c_.mem_latency == 0;
}

[[gnu::always_inline]] inline void Core::complete()
{
    if (cycle_ < exec_next_) return;
    // (the list keeps the order the uops started in, so that two branches
    // sharing a counter train it in that order; rearm() may append to it
    // meanwhile)
    // (the list's start and length in locals, written back before rearm()
    // appends and at the end; kept: the entries still executing, moved down)
    uint64_t next = NEVER;
    Exec *ex = exec_.begin();
    size_t n = exec_.size(), kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (ex[i].ready > cycle_) {
            next = std::min(next, ex[i].ready);
            ex[kept++] = ex[i];
            continue;
        }
        Uop *u = ex[i].u;
        // the uop must still be executing as this entry started it
        if (!in_state_unheld(u, Uop::ISSUED) || u->ready != ex[i].ready) {
            st_.stale_completions++;
            continue;
        }
        u->st = Uop::DONE;
        moved_ = true;
        if (u->handler) {
            if (u->op == TK_TLBWR && !c_.inject_lost_fill) {
                // the entries not looked at yet go down next to the kept ones,
                // and rearm() appends after them
                std::memmove(ex + kept, ex + i + 1, (n - i - 1) * sizeof(Exec));
                n = kept + (n - i - 1);
                i = kept - 1; // (the loop goes on at kept)
                exec_.shrink(n);
                tlb_fill(miss_vpn_);
                handler_active_ = false;
                // rule 3: every access waiting for this page accesses again,
                // and the one the handler ran for (replays count the others)
                // (only program uops are ever held: start(), take_miss())
                for (Uop *w : rob_) {
                    if (!w->tlbmiss) continue;
                    bool same_page = (w->addr >> c_.page_bits) == miss_vpn_;
                    if (seg_recording_) seg_note(SA_MATCH, w->seq - seg_seq0_, same_page);
                    if (same_page || w->seq == tlb_checked_seq_) {
                        rearm(w);
                        if (w->seq != tlb_checked_seq_) st_.replays++;
                    }
                }
                ex = exec_.begin();
                n = exec_.size();
            } else if (u->op == TK_ERET && !u->inl) {
                // traditional: back to the program at the instruction that missed
                mode_ = Mode::USER;
                fetch_seq_ = resume_seq_;
                fetch_stall_until_ = cycle_ + 1;
            }
        } else if (u->ctl == Uop::BRANCH) { // train the counter
            if (seg_recording_) seg_note(SA_TRAIN, u->seq - seg_seq0_);
            Counter &ctr = bpred_[bp_index(u->pc, u->ghist)];
            if (u->taken && ctr.c < 3) ctr.c++;
            if (!u->taken && ctr.c > 0) ctr.c--;
        } else if (u->ctl == Uop::JALR) {
            if (seg_recording_) seg_note(SA_TRAIN, u->seq - seg_seq0_);
            btb_target_[(u->pc >> 1) & btb_mask_].pc = u->next_pc;
        }
        if (u == waiting_branch_) {
            waiting_branch_ = nullptr;
            fetch_stall_until_ = cycle_ + static_cast<uint64_t>(c_.mispredict_penalty);
        }
    }
    exec_.shrink(kept);
    exec_next_ = next;
}

// A uop leaves its issue queue for its unit (or, an access whose page is
// not in the TLB, is held: the miss is found).
[[gnu::always_inline]] inline void Core::start(Uop *u)
{
    moved_ = true;
    uint64_t lat = u->lat;
    if (u->mem) {
        bool present = u->handler || tlb_probe(vpn(u));
        if (seg_recording_ && !u->handler) seg_note(SA_PROBE, u->seq - seg_seq0_, present);
        if (!present) { // held until its page is in the TLB
            st_.detections++;
            st_.rob_occupancy_at_detect += rob_.size();
            u->tlbmiss = true;
            u->st = Uop::ISSUED;
            return;
        }
        if (u->reads_dcache) {
            st_.l1d_accesses++;
            bool hit = l1d_.access(u->addr);
            if (seg_recording_) {
                if (!u->handler)
                    seg_note(SA_L1D_U, u->seq - seg_seq0_, hit);
                else if (u->addr == handler_addr(u->seq))
                    seg_note(SA_L1D_H, u->seq, hit);
                else // (not seen: the replay could not find the address)
                    seg_recording_ = false;
            }
            if (alone_recording_) alone_note(ALONE_LOAD + static_cast<int>(u->seq), hit);
            if (!hit) {
                st_.l1d_misses++;
                lat += static_cast<uint64_t>(c_.mem_latency);
            }
        }
    }
    u->st = Uop::ISSUED;
    u->ready = cycle_ + lat;
    if (u->dst >= 0) {
        preg_ready_[static_cast<size_t>(u->dst)].at = u->ready;
        wake(u->dst);
    }
    if (completes_explicitly(u)) executing(u);
}

// ---- the issue queues (IssueQueue) ----
// An entry goes where its ready cycle puts it.
inline void Core::iq_place(Uop *u)
{
    IssueQueue &q = u->fpq ? iq_fp_ : iq_int_;
    if (u->iq_ready == NEVER) { // it waits for the producer of its first operand
        u->next_waiter = waiters_[u->src[0]];
        waiters_[u->src[0]] = u;
    } else if (u->iq_ready <= cycle_) {
        // in order among the ready (it is mostly the youngest)
        size_t at = q.ready.size();
        q.ready.push_back_fits(u);
        Uop **r = q.ready.begin();
        const uint32_t stamp = u->iq_stamp;
        for (; at > 0; at--) {
            Uop *w = r[at - 1];
            if (!older(stamp, w->iq_stamp)) break;
            r[at] = w;
        }
        r[at] = u;
    } else {
        q.timed.push_back(u);
        q.next = std::min(q.next, u->iq_ready);
    }
}

// The timed entries whose cycle has come join the ready ones.
[[gnu::always_inline]] inline void Core::iq_promote(IssueQueue &q)
{
    uint64_t next = NEVER;
    size_t kept = 0;
    for (Uop *u : q.timed) {
        if (u->iq_ready <= cycle_) {
            iq_place(u);
        } else {
            next = std::min(next, u->iq_ready);
            q.timed[kept++] = u;
        }
    }
    q.timed.shrink(kept);
    q.next = next;
}

// preg's producer has issued: the uops waiting for it look again (each at
// its other operands, and may wait on).  A program uop a flush removed may
// be among them only until preg is renamed again (dispatch() forgets them
// then), and no uop in flight writes preg before that.
inline void Core::wake(int preg)
{
    Uop *u = waiters_[static_cast<size_t>(preg)];
    waiters_[static_cast<size_t>(preg)] = nullptr;
    while (u) {
        Uop *next = u->next_waiter; // (iq_place() may link u elsewhere)
        u->iq_ready = operands_ready(u->src);
        iq_place(u);
        u = next;
    }
}

// A register's ready cycle changed after readers had seen it: every entry
// works its own out again.
void Core::iq_recompute()
{
    for (IssueQueue *q : {&iq_int_, &iq_fp_}) {
        std::vector<Uop *> all(q->ready.begin(), q->ready.end());
        all.insert(all.end(), q->timed.begin(), q->timed.end());
        q->ready.clear();
        q->timed.clear();
        q->next = NEVER;
        for (Uop *u : all) {
            u->iq_ready = operands_ready(u->src);
            iq_place(u);
        }
    }
}

[[gnu::always_inline]] inline void Core::issue()
{
    // Only ready entries can issue: those on the ready lists, and those
    // the timed lists hold for this cycle.
    if (cycle_ >= iq_int_.next) iq_promote(iq_int_);
    if (cycle_ >= iq_fp_.next) iq_promote(iq_fp_);
    // integer queue: int_units a cycle, mem_ports of them for memory;
    // serialising instructions only at the head of the ROB; the oldest first
    if (!iq_int_.ready.empty()) {
        const int width = std::min(c_.int_units, c_.issue_width);
        int issued = 0, mem = 0;
        List<Uop *> &r = iq_int_.ready;
        size_t kept = 0, n = r.size();
        for (size_t i = 0; i < n; i++) {
            Uop *u = r[i];
            if (issued < width && !(u->mem && mem >= c_.mem_ports) &&
                !(u->serial && rob_.front() != u)) {
                if (u->handler && !c_.handler_iq) iq_handler_--;
                if (u->mem) mem++;
                issued++;
                iq_int_.n--;
                start(u);
            } else {
                r[kept++] = u; // held, or not reached
            }
        }
        r.shrink(kept);
    }
    if (!iq_fp_.ready.empty()) {
        int fp = 0;
        List<Uop *> &r = iq_fp_.ready;
        size_t kept = 0, n = r.size();
        for (size_t i = 0; i < n; i++) {
            Uop *u = r[i];
            if (fp < c_.fp_units) {
                fp++;
                iq_fp_.n--;
                start(u);
            } else {
                r[kept++] = u;
            }
        }
        r.shrink(kept);
    }
}

[[gnu::always_inline]] inline void Core::dispatch()
{
    const int width = c_.rename_width, rob_size = c_.rob_size;
    if (handler_frontend_ == 0) {
        // the program's uops alone (so none passes them): as many as the
        // width, the decode queue and the ROB's room allow, each while the
        // room it takes is there
        if (handler_undispatched_ > 0 && handler_first()) return;
        size_t n = std::min(
            {static_cast<size_t>(width), decoded_,
             static_cast<size_t>(rob_size) - std::min(rob_.size(), static_cast<size_t>(rob_size))});
        for (size_t i = 0; i < n; i++)
            if (!dispatch_program(front_.front())) return;
        return;
    }
    for (int n = 0; n < width && decodeq_size() > 0; n++) {
        if (static_cast<int>(rob_.size()) >= rob_size) return;
        if (hdecoded_ > 0) { // a passing handler uop is first
            if (!dispatch_handler(hfront_.front())) return;
            continue;
        }
        Uop *u = front_.front();
        if (u->handler) {
            if (!dispatch_handler(u)) return;
            continue;
        }
        // the program's uops wait while an in-lined handler's go in ahead
        // of them (the room the in-lining found is the handler's)
        if (handler_undispatched_ > 0 && handler_first()) return;
        if (!dispatch_program(u)) return;
    }
}

// A program's uop, at the front of the decode queue and with room in the
// ROB: renamed into its issue queue and the ROB, or false if its issue
// queue, load or store queue or free registers are short (it waits).
[[gnu::always_inline]] inline bool Core::dispatch_program(Uop *u)
{
    IssueQueue &q = u->fpq ? iq_fp_ : iq_int_;
    if (u->fpq ? static_cast<int>(q.n) >= c_.iq_fp
               : static_cast<int>(q.n - iq_handler_) >= c_.iq_int)
        return false;
    if ((u->ldq && loads_ >= c_.load_queue) || (u->stq && stores_ >= c_.store_queue)) return false;
    if (u->rd != NOREG && (u->dst_fp ? free_fp_.empty() : free_int_.empty())) return false;
    front_.pop_front();
    decoded_--;
    loads_ += u->ldq;
    stores_ += u->stq;
    rename(u, q);
    rob_.push_back_fits(u); // reserved for rob_size + 1, and the caller saw room
    return true;
}

// A handler's uop, at the front of the decode queue: false if it must wait.
[[gnu::always_inline]] inline bool Core::dispatch_handler(Uop *u)
{
    // (with handler_iq = 0 the handler's uops wait beside the queue)
    bool own_queue = !c_.handler_iq;
    IssueQueue &q = u->fpq ? iq_fp_ : iq_int_;
    if (u->fpq ? static_cast<int>(q.n) >= c_.iq_fp
               : !own_queue && static_cast<int>(q.n - iq_handler_) >= c_.iq_int)
        return false;
    if (u->rd != NOREG && (u->dst_fp ? free_fp_.empty() : free_int_.empty())) return false;
    if (hdecoded_ > 0) { // (u is hfront_'s first)
        hfront_.pop_front();
        hdecoded_--;
    } else {
        front_.pop_front();
        decoded_--;
    }
    handler_frontend_--;
    if (inline_ && handler_undispatched_ > 0) handler_undispatched_--;
    rename(u, q);
    if (own_queue) iq_handler_++;
    if (inline_ && c_.scheme == Scheme::PREPEND) {
        rob_.insert(static_cast<size_t>(prepend_at_), u);
        prepend_at_++;
    } else {
        rob_.push_back(u);
    }
    return true;
}

// Renames u's registers and puts it in its issue queue.
inline void Core::rename(Uop *u, IssueQueue &q)
{
    moved_ = true;
    // (map_[NOREG] is the always-ready zero_preg_)
    u->src[0] = static_cast<uint16_t>(map_[u->src_arch[0]].p);
    u->src[1] = static_cast<uint16_t>(map_[u->src_arch[1]].p);
    u->src[2] = static_cast<uint16_t>(map_[u->src_arch[2]].p);
    if (u->rd != NOREG) {
        auto &fl = u->dst_fp ? free_fp_ : free_int_;
        int p = fl.back().p;
        fl.pop_back();
        u->dst = static_cast<int16_t>(p);
        u->old = static_cast<int16_t>(map_[u->rd].p);
        u->arch_dst = u->rd;
        map_[u->rd].p = p;
        preg_ready_[static_cast<size_t>(p)].at = NEVER;
        waiters_[static_cast<size_t>(p)] = nullptr; // (flushed readers: see wake())
    }
    u->st = Uop::WAIT;
    q.n++;
    u->iq_stamp = iq_stamp_++;
    u->iq_ready = operands_ready(u->src);
    iq_place(u);
}

[[gnu::always_inline]] inline void Core::decode()
{
    if (handler_frontend_ == 0) { // the program's uops alone: they go in order
        size_t room = static_cast<size_t>(c_.decode_queue) > decoded_
                          ? static_cast<size_t>(c_.decode_queue) - decoded_
                          : 0;
        size_t n = std::min({static_cast<size_t>(c_.decode_width), fetchq_size(), room});
        if (n == 0) return;
        decoded_ += n;
        moved_ = true;
        return;
    }
    for (int n = 0; n < c_.decode_width && fetchq_size() > 0; n++) {
        if (hdecoded_ < hfront_.size()) { // a passing handler uop: past a full queue
            moved_ = true;
            hdecoded_++;
            continue;
        }
        if (static_cast<int>(decodeq_size()) >= c_.decode_queue) return;
        moved_ = true;
        decoded_++;
    }
}

// The handler's instructions, from its own address (a mispredicted branch
// does not stop them: an in-lined handler may be what it waits for).
void Core::fetch_handler()
{
    // a handler dispatching first has its own way past a full queue (all
    // its uops pass the program's: passing())
    const bool first = handler_first(), inl = inline_;
    Ring<Uop *> &queue = first ? hfront_ : front_;
    size_t fq = fetchq_size();
    const size_t fq_max = static_cast<size_t>(c_.fetch_queue);
    for (int n = 0; n < c_.fetch_width; n++) {
        if (fq >= fq_max && !first) return;
        size_t i = handler_next_;
        uint64_t pc = HANDLER_PC + 4 * i;
        if (!fetch_line(pc)) return;
        Uop *u;
        std::vector<Uop *> &pool = pool_[i];
        if (pool.empty()) {
            u = new Uop(handler_uops_[i]); // what it is; a fresh timing state
            u->pc = pc;
            u->seq = i;
        } else {
            u = pool.back(); // what it is; the state it committed in
            pool.pop_back();
            u->st = Uop::FRONT;
        }
        u->inl = inl;
        u->serial = u->system || (u->op == TK_ERET && !inl);
        // the handler's memory: the PTE, and the counter below the table
        if (u->mem) u->addr = handler_addr(i);
        queue.push_back_fits(u);
        fq++;
        handler_frontend_++;
        moved_ = true;
        if (++handler_next_ == n_handler_) {
            mode_ = inl ? Mode::USER : Mode::WAIT_ERET;
            return;
        }
    }
}

[[gnu::always_inline]] inline void Core::fetch()
{
    if (mode_ != Mode::USER) {
        if (mode_ == Mode::FETCH_HANDLER) fetch_handler();
        return;
    }
    // a mispredicted branch stops the program's fetch until it executes
    if (waiting_branch_) return;
    int n = std::min(c_.fetch_width, c_.fetch_queue - static_cast<int>(fetchq_size()));
    for (; n > 0; n--) {
        if (fetch_seq_ == stream_end_) { // the machine runs the next one
            // (none past run()'s limit: the run stops with exactly that
            // many committed, and no instruction after them has run - its
            // system calls included - as with --functional)
            // (at a timer's expiry at_stop() raises its signal, which may
            // end the program)
            if (m_.exited() || (m_.instret() >= m_.stop_at() && m_.at_stop())) {
                program_ended_ = true;
                moved_ = true;
                return;
            }
            if (stream_full()) { // (the ring is sized for every uop in flight)
                dump("the instruction stream overflowed");
                abort();
            }
            stream_step();
        }
        Uop *u = &stream_at(fetch_seq_);
        uint64_t pc = u->pc;
        if (!fetch_line(pc)) return;
        fetch_seq_++;
        // a fresh timing state (set_kind() has the rest)
        u->st = Uop::FRONT;
        u->tlbmiss = false;
        u->ghist = static_cast<uint32_t>(ghist_);
        front_.push_back_fits(u);
        moved_ = true;
        if (u->ctl != Uop::NONE && predict(u)) return;
    }
}

// The functional machine runs the next instruction, into the stream.
[[gnu::always_inline]] inline void Core::stream_step()
{
    Uop &r = stream_at(stream_end_);
    const Inst &in = m_.step_into(&r); // (its pc, next_pc, addr and taken)
    r.seq = stream_end_;
    r.raw = in.raw;
    set_kind_program(r, in);
    stream_end_++;
}

// (the same, as a call: where it is not worth its copy in the caller)
void Core::stream_step_call()
{
    stream_step();
}

// Fetch's branch prediction for u, a branch or a jump: true when it ends
// the fetch group (taken, or mispredicted: fetch waits for it to execute).
[[gnu::always_inline]] inline bool Core::predict(Uop *u)
{
    uint64_t pc = u->pc;
    if (u->ctl == Uop::BRANCH) {
        bool pred = bpred_[bp_index(pc, ghist_)].c >= 2; // (u->ghist is ghist_)
        ghist_ = ((ghist_ << 1) | (u->taken ? 1 : 0)) & bpred_mask_;
        u->mispred = pred != u->taken;
        if (u->mispred) waiting_branch_ = u;
        return u->mispred || u->taken;
    }
    u->ras_push = u->link;
    if (u->ctl == Uop::JAL) {
        if (u->link) ras_.push_back(pc + u->len);
        return true;
    }
    // JALR
    uint64_t predicted;
    u->ras_pop = u->ras_drop = NEVER;
    if (u->is_return && !ras_.empty()) {
        predicted = ras_.back();
        u->ras_pop = predicted;
        ras_.pop_back();
    } else {
        predicted = btb_target_[(pc >> 1) & btb_mask_].pc;
    }
    if (u->link) ras_.push_back(pc + u->len);
    if (ras_.size() > 32) {
        u->ras_drop = ras_.front();
        ras_.erase(ras_.begin());
    }
    u->mispred = predicted != u->next_pc;
    if (u->mispred) waiting_branch_ = u;
    return true;
}

// ---- the run ----
bool Core::run(uint64_t max_insns)
{
    double t0 = now(), c0 = cpu_now();
    max_insns_ = max_insns ? max_insns : NEVER;
    m_.set_max_insns(max_insns);
    bool ok = true;
    while (!done_) {
        moved_ = false;
        // The stages run last to first, so a uop moves at most one stage a
        // cycle: what a stage finds in its input queue came in an earlier
        // cycle.  (Each stage is called only when it may have work: the
        // calls are a good part of a busy cycle's cost.)
        if (!rob_.empty() && head_may_commit()) commit();
        if (cycle_ >= exec_next_) complete();
        if (!iq_int_.ready.empty() || !iq_fp_.ready.empty() || cycle_ >= iq_int_.next ||
            cycle_ >= iq_fp_.next)
            issue();
        if (decodeq_size() > 0) dispatch();
        if (fetchq_size() > 0) decode();
        if (cycle_ >= fetch_stall_until_) fetch();
        if (!moved_) skip_idle();
        cycle_++;
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
    if (!iq_int_.ready.empty() || !iq_fp_.ready.empty()) return;
    uint64_t next = std::min({iq_int_.next, iq_fp_.next, exec_next_});
    if (fetch_stall_until_ > cycle_) next = std::min(next, fetch_stall_until_);
    // the ROB's head done by its cycle alone: commit may take it the cycle after
    if (!rob_.empty()) {
        const Uop *h = rob_.front();
        if (issued_implicit(h) && h->ready >= cycle_) next = std::min(next, h->ready + 1);
    }
    if (next == NEVER) // stuck: go straight to the check
        next = std::max(cycle_ + 1, last_commit_cycle_ + c_.stuck_cycles + 1);
    if (next > cycle_ + 1) cycle_ = next - 1;
}

void Core::dump(const char *why) const
{
    const char *mode[] = {"user", "fetching the handler", "waiting for eret"};
    fprintf(
        stderr,
        "tksim: the pipeline is stuck: %s for %llu cycles (cycle %llu, %llu committed)\n"
        "  fetch: mode %s, next %llu, stalled until %llu, waiting for a branch: %s\n"
        "  queues: fetch %zu, decode %zu, ROB %zu, IQ %zu+%zu, executing %zu, loads %d, "
        "stores %d\n"
        "  free registers: %zu int, %zu fp; handler active %d, in-lined %d\n",
        why, static_cast<unsigned long long>(c_.stuck_cycles),
        static_cast<unsigned long long>(cycle_), static_cast<unsigned long long>(st_.user_insns),
        mode[static_cast<int>(mode_)], static_cast<unsigned long long>(fetch_seq_),
        static_cast<unsigned long long>(fetch_stall_until_), waiting_branch_ ? "yes" : "no",
        fetchq_size(), decodeq_size(), rob_.size(), iq_int_.n, iq_fp_.n, executing_now(), loads_,
        stores_, free_int_.size(), free_fp_.size(), handler_active_ ? 1 : 0, inline_ ? 1 : 0);
    if (!rob_.empty())
        fprintf(stderr,
                "  head: seq %llu (looked up: %llu), page 0x%llx %s the TLB; last handler's page "
                "0x%llx\n",
                static_cast<unsigned long long>(rob_.front()->seq),
                static_cast<unsigned long long>(tlb_checked_seq_),
                static_cast<unsigned long long>(vpn(rob_.front())),
                tlb_probe(vpn(rob_.front())) ? "in" : "not in",
                static_cast<unsigned long long>(miss_vpn_));
    const char *sn[] = {"front", "waiting", "issued", "done"};
    size_t k = 0;
    for (const Uop *u : rob_) {
        if (k++ >= 12) break;
        fprintf(stderr, "  rob[%zu]: %s%s pc 0x%llx %s%s\n", k - 1, u->handler ? "handler " : "",
                op_name(u->op), static_cast<unsigned long long>(u->pc),
                sn[done(u) ? Uop::DONE : u->st], u->tlbmiss ? " (TLB miss)" : "");
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
        "\"detections\": %llu, \"rob_occupancy_at_detect\": %.3f, \"stale_completions\": %llu, "
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
        static_cast<unsigned long long>(s.stale_completions), s.seconds,
        s.seconds > 0 ? static_cast<double>(s.user_insns) / s.seconds : 0.0, s.cpu_seconds,
        s.cpu_seconds > 0 ? static_cast<double>(s.user_insns) / s.cpu_seconds : 0.0);
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
