// sim/machine.cpp - the functional machine (sim/machine.hpp).
#include "machine.hpp"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

namespace tksim
{

namespace
{
constexpr uint64_t PAGE = 4096;

uint64_t page_down(uint64_t a)
{
    return a & ~(PAGE - 1);
}
uint64_t page_up(uint64_t a)
{
    return (a + PAGE - 1) & ~(PAGE - 1);
}

// ---- floating point: values kept as bit patterns ----
constexpr uint64_t BOX = 0xffffffff00000000ull; // NaN-boxing of a single in a 64-bit register
constexpr uint32_t QNAN_S = 0x7fc00000u;
constexpr uint64_t QNAN_D = 0x7ff8000000000000ull;

float as_s(uint64_t v)
{
    uint32_t b =
        (v & BOX) == BOX ? static_cast<uint32_t>(v) : QNAN_S; // not boxed: the canonical NaN
    float f;
    memcpy(&f, &b, 4);
    return f;
}
double as_d(uint64_t v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}
uint64_t box_s(float f)
{
    uint32_t b;
    if (std::isnan(f))
        b = QNAN_S;
    else
        memcpy(&b, &f, 4);
    return BOX | b;
}
uint64_t bits_d(double d)
{
    if (std::isnan(d)) return QNAN_D;
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}
uint64_t raw_s(float f) // for sign injection and moves: no canonicalisation
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return BOX | b;
}

// ---- rounding modes and exception flags ----
// Each arithmetic instruction runs on the host's SSE unit, in the guest's
// rounding mode, and adds the flags MXCSR has after it to fflags.  x86 has
// RISC-V's flags (and detects tininess after rounding, raising underflow
// only for a tiny inexact result, as RISC-V does) and four of its rounding
// modes; round-to-nearest-max-magnitude (RMM) it has not: those
// instructions round to nearest-even, and a result that was a tie moves one
// step away from zero (tie_away).  The comparisons, fmin/fmax and the
// conversions to integers work out their flags themselves.
//
// Loading MXCSR costs more than most instructions the simulator runs (some
// 15 ns on an x86 server, where reading it costs 1): it waits for the
// floating point in flight.  So MXCSR is read before and after each
// operation, and loaded only when it must be: it stays in
// round-to-nearest-even with its flags as they are while every flag set
// there is one fflags has already, since the operation's flags are then
// MXCSR's after it, give or take flags fflags has (which raising again
// changes nothing), whatever set them (the simulator's own floating point
// too).  It is loaded before an operation that finds a flag fflags has not
// (the guest cleared it, or the simulator's floating point set it) or that
// has another rounding mode, and after one in another rounding mode, to set
// round-to-nearest-even back.
// the rounding modes (rm: RNE 0, RTZ 1, RDN 2, RUP 3, RMM 4) and fflags' bits
constexpr unsigned RMM = 4;
constexpr unsigned NX = 1, UF = 2, OF = 4, DZ = 8, NV = 16;
constexpr unsigned MXCSR_BASE = 0x1f80; // every exception masked, RNE, no flag set
constexpr unsigned MXCSR_FLAGS = 0x3f;
constexpr unsigned MXCSR_RC[5] = {0, 0x6000, 0x2000, 0x4000, 0}; // by rm (RMM: RNE)
// fflags by MXCSR's flags (bits 0-5: invalid, denormal operand, divide by
// zero, overflow, underflow, precision); the denormal operand has none
constexpr std::array<uint8_t, 64> FFLAGS = [] {
    std::array<uint8_t, 64> t{};
    for (unsigned i = 0; i < 64; i++)
        t[i] = static_cast<uint8_t>((i & 1 ? NV : 0u) | (i & 4 ? DZ : 0u) | (i & 8 ? OF : 0u) |
                                    (i & 16 ? UF : 0u) | (i & 32 ? NX : 0u));
    return t;
}();

// MXCSR, read and loaded by volatile asm statements, which the compiler
// keeps in order (its _mm_getcsr may be merged with an earlier one when no
// _mm_setcsr comes between)
unsigned get_mxcsr()
{
    unsigned v;
    asm volatile("stmxcsr %0" : "=m"(v));
    return v;
}
void set_mxcsr(unsigned v)
{
    asm volatile("ldmxcsr %0" : : "m"(v));
}
// (nor may it move a host operation across an MXCSR access: its operands
// pass through this after the load, its result before the read)
template <class T> void opaque(T &v)
{
    if constexpr (std::is_floating_point_v<T>)
        asm volatile("" : "+x"(v));
    else
        asm volatile("" : "+r"(v));
}

// f(args...) on the host's SSE unit in rounding mode rm: its flags go to fcsr's
// fflags, and to fl (with some fflags has already, but for RMM, whose
// correction needs the operation's own inexact)
template <class F, class... A> auto sse(unsigned rm, uint32_t &fcsr, unsigned &fl, F f, A... args)
{
    unsigned want = MXCSR_BASE | MXCSR_RC[rm];
    unsigned have = rm == RMM ? 0 : fcsr & 0x1f;
    unsigned st = get_mxcsr();
    if ((st & ~MXCSR_FLAGS) != want || (FFLAGS[st & MXCSR_FLAGS] & ~have) != 0) set_mxcsr(want);
    (opaque(args), ...);
    auto v = f(args...);
    opaque(v);
    st = get_mxcsr();
    if (want != MXCSR_BASE) set_mxcsr(MXCSR_BASE | (st & MXCSR_FLAGS));
    fl = FFLAGS[st & MXCSR_FLAGS];
    if (fl & ~have) fcsr |= fl; // (a store only when fflags changes)
    return v;
}

// An exact value n * 2^e, for RMM's test of a tie.
struct Term {
    __int128 n;
    int e;
};
int ctz128(__int128 v) // v != 0
{
    auto u = static_cast<unsigned __int128>(v);
    uint64_t lo = static_cast<uint64_t>(u);
    return lo ? __builtin_ctzll(lo) : 64 + __builtin_ctzll(static_cast<uint64_t>(u >> 64));
}
template <class T> uint64_t bits_of(T x)
{
    if constexpr (sizeof(T) == 4) {
        uint32_t b;
        memcpy(&b, &x, 4);
        return b;
    } else {
        uint64_t b;
        memcpy(&b, &x, 8);
        return b;
    }
}
// finite x as n * 2^e
template <class T> Term split(T x)
{
    constexpr int FRAC = std::numeric_limits<T>::digits - 1;              // 23, 52
    constexpr int EMIN = std::numeric_limits<T>::min_exponent - 1 - FRAC; // -149, -1074
    uint64_t b = bits_of(x);
    uint64_t frac = b & ((1ull << FRAC) - 1);
    int ex = static_cast<int>((b >> FRAC) & ((1u << (sizeof(T) * 8 - 1 - FRAC)) - 1));
    __int128 n = ex ? frac | (1ull << FRAC) : frac;
    Term t{std::signbit(x) ? -n : n, ex ? EMIN + ex - 1 : EMIN};
    return t;
}
Term operator*(Term a, Term b)
{
    return {a.n * b.n, a.e + b.e};
}
// whether terms t[0..k) sum to 0 (|n| below 2^125)
bool zero_sum(Term *t, int k)
{
    int m = 0;
    for (int i = 0; i < k; i++) // without the zeros, each n odd
        if (t[i].n != 0) {
            int z = ctz128(t[i].n);
            t[m++] = {t[i].n >> z, t[i].e + z};
        }
    for (int i = 1; i < m; i++) // by exponent
        for (int j = i; j > 0 && t[j].e < t[j - 1].e; j--) std::swap(t[j], t[j - 1]);
    if (m == 0) return true;
    // the lowest bit set needs another term's to cancel it
    if (m == 1 || t[0].e != t[1].e) return false;
    __int128 s = t[0].n + t[1].n;
    if (m == 2) return s == 0;
    if (t[2].e == t[0].e) return s + t[2].n == 0;
    if (s == 0) return false;
    int z = ctz128(s);
    return (s >> z) == -t[2].n && t[0].e + z == t[2].e;
}
// r (finite, rounded to nearest-even from an inexact exact value, the sum
// of `exact` divided by `div`) rounded to nearest-max-magnitude instead: its
// neighbour away from zero when the exact value was the midpoint between
// them.  (The flags are those of nearest-even: the two modes differ only at
// a tie, never between a tiny result and a normal one, or a finite one and
// an overflow, since the largest finite value and the one below the least
// normal are odd.)
template <class T>
[[gnu::noinline]] T tie_away(T r, std::initializer_list<Term> exact, Term div = {1, 0})
{
    Term t[4];
    int k = 0;
    for (Term x : exact) t[k++] = x;
    Term mid = split(r); // r's magnitude plus half its step away from zero
    __int128 m = (mid.n < 0 ? -mid.n : mid.n) * 2 + 1;
    t[k++] = Term{std::signbit(r) ? m : -m, mid.e - 1} * div;
    if (!zero_sum(t, k)) return r;
    std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t> b;
    memcpy(&b, &r, sizeof b);
    b++; // (the encoding's magnitude is monotonic)
    memcpy(&r, &b, sizeof b);
    return r;
}

// The arithmetic instructions, in rounding mode rm, their flags into fcsr
// (out of line: the instructions' switch stays small enough for the
// compiler to inline the memory accesses in it)
template <class T> [[gnu::noinline]] T fp_add(unsigned rm, uint32_t &fcsr, T x, T y)
{
    unsigned fl;
    auto op = [](T p, T q) { return p + q; };
    T v = sse(rm, fcsr, fl, op, x, y);
    if (rm == RMM && (fl & NX) && std::isfinite(v)) v = tie_away(v, {split(x), split(y)});
    return v;
}
template <class T> [[gnu::noinline]] T fp_sub(unsigned rm, uint32_t &fcsr, T x, T y)
{
    unsigned fl;
    auto op = [](T p, T q) { return p - q; };
    T v = sse(rm, fcsr, fl, op, x, y);
    if (rm == RMM && (fl & NX) && std::isfinite(v)) v = tie_away(v, {split(x), split(-y)});
    return v;
}
template <class T> [[gnu::noinline]] T fp_mul(unsigned rm, uint32_t &fcsr, T x, T y)
{
    unsigned fl;
    auto op = [](T p, T q) { return p * q; };
    T v = sse(rm, fcsr, fl, op, x, y);
    if (rm == RMM && (fl & NX) && std::isfinite(v)) v = tie_away(v, {split(x) * split(y)});
    return v;
}
template <class T> [[gnu::noinline]] T fp_div(unsigned rm, uint32_t &fcsr, T x, T y)
{
    unsigned fl;
    auto op = [](T p, T q) { return p / q; };
    T v = sse(rm, fcsr, fl, op, x, y);
    if (rm == RMM && (fl & NX) && std::isfinite(v)) v = tie_away(v, {split(x)}, split(y));
    return v;
}
// (a square root is never a tie: the midpoint's square has more digits)
template <class T> [[gnu::noinline]] T fp_sqrt(unsigned rm, uint32_t &fcsr, T x)
{
    unsigned fl;
    auto op = [](T p) { return std::sqrt(p); };
    return sse(rm, fcsr, fl, op, x);
}
// x * y + z, rounded once
template <class T> [[gnu::noinline]] T fp_fma(unsigned rm, uint32_t &fcsr, T x, T y, T z)
{
    unsigned fl;
    auto op = [](T p, T q, T s) { return std::fma(p, q, s); };
    T v = sse(rm, fcsr, fl, op, x, y, z);
    // (RISC-V's invalid for infinity times zero even with a quiet NaN to
    // add, which x86 does not raise)
    if (std::isnan(v) && ((std::isinf(x) && y == 0) || (x == 0 && std::isinf(y)))) fcsr |= NV;
    if (rm == RMM && (fl & NX) && std::isfinite(v))
        v = tie_away(v, {split(x) * split(y), split(z)});
    return v;
}
[[gnu::noinline]] float fp_cvt_s_d(unsigned rm, uint32_t &fcsr, double x)
{
    unsigned fl;
    auto op = [](double p) { return static_cast<float>(p); };
    float v = sse(rm, fcsr, fl, op, x);
    if (rm == RMM && (fl & NX) && std::isfinite(v)) v = tie_away(v, {split(x)});
    return v;
}
// an integer to T
template <class T, class I> [[gnu::noinline]] T fp_from_int(unsigned rm, uint32_t &fcsr, I x)
{
    unsigned fl;
    auto op = [](I p) { return static_cast<T>(p); };
    T v = sse(rm, fcsr, fl, op, x);
    if (rm == RMM && (fl & NX)) v = tie_away(v, {Term{static_cast<__int128>(x), 0}});
    return v;
}
bool snan_s(uint64_t v) // a boxed signalling NaN
{
    return (v & BOX) == BOX && (v & 0x7fffffffu) > 0x7f800000u && !(v & 0x00400000u);
}
bool snan_d(uint64_t v)
{
    return (v & ~(1ull << 63)) > 0x7ff0000000000000ull && !(v & 0x0008000000000000ull);
}

double round_to(double v, unsigned rm)
{
    switch (rm) {
    case 1:
        return std::trunc(v); // RTZ
    case 2:
        return std::floor(v); // RDN
    case 3:
        return std::ceil(v); // RUP
    case 4:
        return std::round(v); // RMM: ties away from zero
    default:
        return std::nearbyint(v); // RNE (the host's default mode)
    }
}

// fcvt to a signed integer of `bits` bits: NaN and too large give the
// largest value, too small the smallest (the ISA's saturation), and raise
// invalid; a value that converts but was not an integer raises inexact
int64_t to_signed(double v, unsigned rm, int bits, uint32_t *fcsr)
{
    double lim = std::ldexp(1.0, bits - 1); // 2^(bits-1)
    int64_t max = bits == 64 ? INT64_MAX : static_cast<int64_t>(lim) - 1;
    if (std::isnan(v)) {
        *fcsr |= NV;
        return max;
    }
    double r = round_to(v, rm);
    if (r >= lim) {
        *fcsr |= NV;
        return max;
    }
    if (r < -lim) {
        *fcsr |= NV;
        return bits == 64 ? INT64_MIN : -static_cast<int64_t>(lim);
    }
    if (r != v) *fcsr |= NX;
    return static_cast<int64_t>(r);
}
uint64_t to_unsigned(double v, unsigned rm, int bits, uint32_t *fcsr)
{
    double lim = std::ldexp(1.0, bits); // 2^bits
    uint64_t max = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    if (std::isnan(v)) {
        *fcsr |= NV;
        return max;
    }
    double r = round_to(v, rm);
    if (r >= lim) {
        *fcsr |= NV;
        return max;
    }
    if (r < 0) { // (but -0, from a negative value rounded up: 0, inexact)
        *fcsr |= NV;
        return 0;
    }
    if (r != v) *fcsr |= NX;
    return static_cast<uint64_t>(r);
}

template <class F> uint64_t fclass(F v)
{
    bool neg = std::signbit(v);
    switch (std::fpclassify(v)) {
    case FP_INFINITE:
        return neg ? 1u << 0 : 1u << 7;
    case FP_NORMAL:
        return neg ? 1u << 1 : 1u << 6;
    case FP_SUBNORMAL:
        return neg ? 1u << 2 : 1u << 5;
    case FP_ZERO:
        return neg ? 1u << 3 : 1u << 4;
    default: { // NaN: signalling or quiet
        bool quiet;
        if constexpr (sizeof(F) == 4) {
            uint32_t b;
            memcpy(&b, &v, 4);
            quiet = (b >> 22) & 1;
        } else {
            uint64_t b;
            memcpy(&b, &v, 8);
            quiet = (b >> 51) & 1;
        }
        return quiet ? 1u << 9 : 1u << 8;
    }
    }
}

template <class F> F fmin_rv(F a, F b, bool max)
{
    if (std::isnan(a) && std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
    if (std::isnan(a)) return b;
    if (std::isnan(b)) return a;
    if (a == 0 && b == 0) { // -0 < +0
        bool na = std::signbit(a);
        return max ? (na ? b : a) : (na ? a : b);
    }
    return max ? (a > b ? a : b) : (a < b ? a : b);
}

uint64_t rotl64(uint64_t v, uint64_t n) // n in [0, 63]
{
    return n ? (v << n) | (v >> (64 - n)) : v;
}
uint32_t rotl32(uint32_t v, uint64_t n) // n in [0, 31]
{
    return n ? (v << n) | (v >> (32 - n)) : v;
}

} // namespace

Machine::Machine() : icache_(DECODE_CACHE_SIZE)
{
    void *p = mmap(nullptr, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    // the pages' bits: zero pages of the host's until written (most stay so)
    bits_bytes_ = SPACE / PAGE / 64 * 3 * sizeof(uint64_t);
    void *b = mmap(nullptr, bits_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || b == MAP_FAILED) {
        perror("tksim: reserving guest address space");
        exit(1);
    }
    base_ = static_cast<uint8_t *>(p);
    perm_ = static_cast<uint64_t *>(b);
    signal(SIGPIPE,
           SIG_IGN); // (a write to a pipe no one reads: the program's SIGPIPE, not tksim's)
    held_ = perm_ + SPACE / PAGE / 64 * 2;
}

Machine::~Machine()
{
    for (auto &f : file_maps_) close(f.second.fd);
    munmap(base_, SPACE);
    munmap(perm_, bits_bytes_);
}

bool Machine::map(uint64_t addr, uint64_t len)
{
    uint64_t lo = page_down(addr), hi = page_up(addr + len);
    if (hi > SPACE || hi < lo) return false;
    if (mprotect(base_ + lo, hi - lo, PROT_READ | PROT_WRITE) != 0) return false;
    for (uint64_t p = lo / PAGE; p < hi / PAGE; p++) held_[p / 64] |= 1ull << (p % 64);
    clear_prot(lo / PAGE, hi / PAGE); // (readable, writable and executable: the default)
    if (file_maps_.empty()) {
        for (uint64_t p = lo / PAGE; p < hi / PAGE; p++) {
            perm_[p / 64 * 2] |= 1ull << (p % 64);
            perm_[p / 64 * 2 + 1] |= 1ull << (p % 64);
        }
    } else {
        set_perm(lo / PAGE, hi / PAGE);
    }
    return true;
}

int Machine::prot_of(uint64_t page) const
{
    auto it = prot_.upper_bound(page);
    if (it == prot_.begin()) return PROT_READ | PROT_WRITE | PROT_EXEC;
    --it;
    return page < it->second.first ? it->second.second : PROT_READ | PROT_WRITE | PROT_EXEC;
}

void Machine::clear_prot(uint64_t lo, uint64_t hi)
{
    if (prot_.empty() || hi <= lo) return;
    // a range across lo or hi is split there; those between go (the one
    // that started at lo too, emptied)
    auto it = prot_.upper_bound(lo);
    if (it != prot_.begin()) {
        auto prev = std::prev(it);
        auto [end, p] = prev->second;
        if (end > lo) {
            prev->second.first = lo;
            if (end > hi) prot_[hi] = {end, p};
        }
    }
    it = prot_.lower_bound(lo);
    while (it != prot_.end() && it->first < hi) {
        if (it->second.first > hi) prot_[hi] = it->second;
        it = prot_.erase(it);
    }
}

void Machine::set_prot(uint64_t lo, uint64_t hi, int prot)
{
    if (hi <= lo) return;
    clear_prot(lo, hi);
    if (!(prot & PROT_WRITE) || !(prot & PROT_READ)) // (write alone reads too, as on RISC-V)
        prot_[lo] = {hi, (prot & PROT_WRITE) ? prot | PROT_READ : prot};
    set_perm(lo, hi);
}

void Machine::set_perm(uint64_t lo, uint64_t hi)
{
    bool lost = false;
    for (uint64_t p = lo; p < hi; p++) {
        int prot = prot_of(p);
        bool keep = !withheld(p);
        uint64_t bit = 1ull << (p % 64);
        uint64_t &r = perm_[p / 64 * 2], &w = perm_[p / 64 * 2 + 1];
        bool readable = keep && (prot & (PROT_READ | PROT_WRITE | PROT_EXEC));
        lost |= !readable && (r & bit);
        r = readable ? r | bit : r & ~bit;
        w = keep && (prot & PROT_WRITE) ? w | bit : w & ~bit;
    }
    if (lost) flush_decoded(); // (code on a page no longer readable must not run from its copy)
}

void Machine::denied(uint64_t addr, uint64_t len, uint64_t pc, bool write) const
{
    uint64_t p = addr / PAGE;
    if (addr < SPACE && addr + len <= SPACE && allows(p, write)) p = (addr + len - 1) / PAGE;
    if (addr >= SPACE || addr + len > SPACE || !held(p))
        throw GuestFault(pc, addr, "access to unmapped memory", SIGSEGV, SEGV_MAPERR);
    if (withheld(p))
        throw GuestFault(pc, addr, "access past the end of a shared file mapping", SIGBUS,
                         BUS_ADRERR);
    throw GuestFault(pc, addr,
                     write ? "write to memory not writable" : "read of memory not readable",
                     SIGSEGV, SEGV_ACCERR);
}

void Machine::illegal(uint64_t pc, uint32_t raw)
{
    throw GuestFault(pc, raw, "illegal instruction", SIGILL, ILL_ILLOPC);
}

void Machine::flush_decoded()
{
    decode_epoch_ += 1ull << EPOCH_SHIFT;
    if (decode_epoch_ == 0) // the epochs wrapped: forget every entry for good
        for (Cached &c : icache_) c.tag = ~0ull;
}

const Inst &Machine::fetch_miss(uint64_t pc)
{
    Cached &c = icache_[(pc >> 1) & (DECODE_CACHE_SIZE - 1)];
    if (pc >= SPACE || !allows(pc / PAGE, false)) {
        bool there = pc < SPACE && held(pc / PAGE);
        throw GuestFault(pc, pc,
                         there ? "fetch from memory not executable" : "fetch from unmapped memory",
                         SIGSEGV, there ? SEGV_ACCERR : SEGV_MAPERR);
    }
    uint32_t w;
    if (allows((pc + 2) / PAGE, false))
        memcpy(&w, base_ + pc, 4);
    else {
        uint16_t h;
        memcpy(&h, base_ + pc, 2);
        w = h;
    }
    c.inst = decode(w);
    c.tag = pc | decode_epoch_;
    return c.inst;
}

bool Machine::load(const std::string &path, const std::vector<std::string> &argv,
                   const std::vector<std::string> &envp, std::string *err)
{
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        *err = path + ": " + strerror(errno);
        return false;
    }
    // The file is read a part at a time (the header, the program headers,
    // each segment straight into guest memory): its size is no limit, and
    // every offset and length in it is checked against it without overflow.
    struct FdCloser {
        int fd;
        ~FdCloser() { close(fd); }
    } closer{fd};
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        *err = path + (S_ISDIR(st.st_mode) ? ": a directory" : ": cannot be read");
        return false;
    }
    const uint64_t fsize = static_cast<uint64_t>(st.st_size);
    auto read_at = [fd](void *buf, uint64_t len, uint64_t off) {
        uint64_t done = 0;
        while (done < len) {
            ssize_t n = pread(fd, static_cast<char *>(buf) + done, len - done,
                              static_cast<off_t>(off + done));
            if (n <= 0) return false;
            done += static_cast<uint64_t>(n);
        }
        return true;
    };
    unsigned char magic[SELFMAG];
    if (fsize < SELFMAG || !read_at(magic, SELFMAG, 0) || memcmp(magic, ELFMAG, SELFMAG) != 0) {
        *err = path + ": not an ELF file";
        return false;
    }
    if (fsize < sizeof(Elf64_Ehdr)) {
        *err = path + ": a truncated ELF file (" + std::to_string(fsize) + " bytes)";
        return false;
    }
    Elf64_Ehdr eh;
    if (!read_at(&eh, sizeof eh, 0)) {
        *err = path + ": cannot be read: " + strerror(errno);
        return false;
    }
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        *err = path + ": not a 64-bit little-endian ELF file";
        return false;
    }
    if (eh.e_machine != EM_RISCV) {
        *err = path + ": not a RISC-V program (e_machine " + std::to_string(eh.e_machine) + ")";
        return false;
    }
    if (eh.e_type != ET_EXEC) {
        *err = path + ": not a static executable (build it with -static, without -pie)";
        return false;
    }
    const uint64_t ph_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > fsize ||
        ph_bytes > fsize - eh.e_phoff) {
        *err = path + ": program headers outside the file";
        return false;
    }
    std::vector<Elf64_Phdr> phs(eh.e_phnum);
    if (ph_bytes && !read_at(phs.data(), ph_bytes, eh.e_phoff)) {
        *err = path + ": cannot be read: " + strerror(errno);
        return false;
    }
    uint64_t end = 0, phdr_addr = 0;
    for (const Elf64_Phdr &ph : phs) {
        if (ph.p_type == PT_INTERP) {
            *err = path + ": dynamically linked (tksim runs static programs: link with -static)";
            return false;
        }
        if (ph.p_type != PT_LOAD) continue;
        if (ph.p_offset > fsize || ph.p_filesz > fsize - ph.p_offset || ph.p_filesz > ph.p_memsz ||
            ph.p_vaddr > MMAP_BASE || ph.p_memsz > MMAP_BASE - ph.p_vaddr) {
            *err = path + ": a loadable segment outside the file or the address space";
            return false;
        }
        if (!map(ph.p_vaddr, ph.p_memsz)) {
            *err = path + ": cannot map a segment";
            return false;
        }
        if (ph.p_filesz && !read_at(base_ + ph.p_vaddr, ph.p_filesz, ph.p_offset)) {
            *err = path + ": cannot be read: " + strerror(errno);
            return false;
        }
        if (eh.e_phoff >= ph.p_offset && eh.e_phoff < ph.p_offset + ph.p_filesz)
            phdr_addr = ph.p_vaddr + (eh.e_phoff - ph.p_offset);
        end = std::max(end, ph.p_vaddr + ph.p_memsz);
    }
    if (end == 0) {
        *err = path + ": no loadable segment";
        return false;
    }
    brk_start_ = brk_ = page_up(end);
    std::string base = path.substr(path.rfind('/') + 1); // (as Linux names the task)
    memcpy(thread_name_, base.c_str(), std::min(base.size(), sizeof thread_name_ - 1));
    char *real = realpath(path.c_str(), nullptr);
    exe_path_ = real ? real : path;
    free(real);

    // The initial stack, as Linux builds it: strings at the top, 16
    // random bytes, then (16-byte aligned) argc, argv, envp, auxv.
    size_t strings = path.size() + 1;
    for (const std::string &s : argv) strings += s.size() + 1 + 8;
    for (const std::string &s : envp) strings += s.size() + 1 + 8;
    if (strings > STACK_SIZE / 4) { // (Linux: E2BIG past a quarter of the stack's limit)
        *err = path + ": the arguments and environment take " + std::to_string(strings) +
               " bytes, more than a quarter of the stack";
        return false;
    }
    map(STACK_TOP - STACK_SIZE, STACK_SIZE);
    uint64_t sp = STACK_TOP;
    auto push_str = [&](const std::string &s) {
        sp -= s.size() + 1;
        memcpy(base_ + sp, s.c_str(), s.size() + 1);
        return sp;
    };
    uint64_t execfn = push_str(path);
    std::vector<uint64_t> envs, args;
    for (auto it = envp.rbegin(); it != envp.rend(); ++it) envs.insert(envs.begin(), push_str(*it));
    for (auto it = argv.rbegin(); it != argv.rend(); ++it) args.insert(args.begin(), push_str(*it));
    sp &= ~15ull;
    sp -= 16;
    uint64_t random = sp;
    for (int i = 0; i < 16; i++)
        base_[sp + i] = static_cast<uint8_t>(0x5a + 13 * i); // fixed: runs repeat
    std::vector<uint64_t> aux = {AT_PHDR,   phdr_addr,  AT_PHENT,  sizeof(Elf64_Phdr),
                                 AT_PHNUM,  eh.e_phnum, AT_PAGESZ, PAGE,
                                 AT_BASE,   0,          AT_FLAGS,  0,
                                 AT_ENTRY,  eh.e_entry, AT_UID,    0,
                                 AT_EUID,   0,          AT_GID,    0,
                                 AT_EGID,   0,          AT_HWCAP,  0x112d, // rv64 IMAFDC
                                 AT_CLKTCK, 100,        AT_RANDOM, random,
                                 AT_SECURE, 0,          AT_EXECFN, execfn,
                                 AT_NULL,   0};
    uint64_t words = 1 + args.size() + 1 + envs.size() + 1 + aux.size();
    sp = (sp - words * 8) & ~15ull;
    uint64_t p = sp;
    auto put = [&](uint64_t v) {
        memcpy(base_ + p, &v, 8);
        p += 8;
    };
    put(args.size());
    for (uint64_t a : args) put(a);
    put(0);
    for (uint64_t e : envs) put(e);
    put(0);
    for (uint64_t a : aux) put(a);
    regs_[2] = sp;
    pc_ = eh.e_entry;
    // the return from a signal handler, on a page of its own above the stack
    map(SIGRETURN_PAGE, PAGE);
    const uint32_t sigreturn[2] = {0x08b00893, 0x00000073}; // li a7, 139; ecall
    memcpy(base_ + SIGRETURN_PAGE, sigreturn, sizeof sigreturn);
    set_prot(SIGRETURN_PAGE / PAGE, SIGRETURN_PAGE / PAGE + 1, PROT_READ | PROT_EXEC);
    return true;
}

// The instructions step() leaves to a call: all but the common integer
// ones.
void Machine::step_other(Step *s, const Inst &in)
{
    uint64_t pc = pc_, next = pc + in.len;
    uint64_t a = reg(in.rs1), b = reg(in.rs2);
    int64_t imm = in.imm;
    uint64_t r = 0;
    bool wr = true; // writes rd
    auto addr = [&] { return s->addr = a + static_cast<uint64_t>(imm); };
    // LR, SC and the AMOs need their natural alignment (this machine does
    // not emulate misaligned atomics: a fault, as qemu-riscv64's SIGBUS)
    auto aligned = [&](uint64_t size) {
        if (a & (size - 1)) throw GuestFault(pc, a, "misaligned atomic access", SIGBUS, BUS_ADRALN);
    };
    auto amo = [&](bool d, auto f) {
        s->addr = a;
        aligned(d ? 8 : 4);
        if (d) {
            uint64_t old = load_mem<uint64_t>(a, pc);
            store_mem<uint64_t>(a, f(old, b), pc);
            r = old;
        } else {
            uint32_t old = load_mem<uint32_t>(a, pc);
            store_mem<uint32_t>(a, static_cast<uint32_t>(f(static_cast<uint64_t>(sext32(old)), b)),
                                pc);
            r = static_cast<uint64_t>(sext32(old));
        }
    };
    // The rounding mode of an instruction that has one: the instruction's,
    // or frm's for 7 (dynamic); 5 and 6, and 7 with frm above 4, are
    // reserved (an illegal instruction).  (The instructions' exception
    // flags go straight to fcsr_.)
    auto rm = [&in, pc, this]() -> unsigned {
        unsigned m = in.rm == 7 ? (fcsr_ >> 5) & 7 : in.rm;
        if (m > RMM) illegal(pc, in.raw);
        return m;
    };
    switch (in.op) {
    case FENCE:
        wr = false;
        break;
    case FENCE_I:
        flush_decoded();
        wr = false;
        break;
    case ECALL: {
        uint64_t a0 = regs_[10];
        regs_[10] = syscall(regs_[17], a0, regs_[11], regs_[12], regs_[13], regs_[14], regs_[15]);
        wr = false;
        if (!file_maps_.empty()) check_file_sizes(); // (a file that grew or shrank)
        // (a handler to enter, a return from one, a mask to restore, a call to restart)
        if (redirect_ || restore_mask_ || (pending_ & ~sigmask_) ||
            regs_[10] - static_cast<uint64_t>(-516) <= 4) { // (-ERESTART*: -516 to -512)
            pc_ = next;
            next = after_call(pc, a0);
            s->taken = next != pc + in.len;
        }
        break;
    }
    case EBREAK:
        throw GuestFault(pc, pc, "ebreak", SIGTRAP, TRAP_BRKPT);
    case CSRRW:
    case CSRRS:
    case CSRRC:
    case CSRRWI:
    case CSRRSI:
    case CSRRCI: {
        uint32_t csr = static_cast<uint32_t>(imm) & 0xfff;
        uint64_t old;
        switch (csr) {
        case 0x001:
            old = fcsr_ & 0x1f;
            break; // fflags
        case 0x002:
            old = (fcsr_ >> 5) & 7;
            break; // frm
        case 0x003:
            old = fcsr_ & 0xff;
            break; // fcsr
        case 0xc00:
        case 0xc01:
        case 0xc02:
            old = instret_;
            break; // cycle, time, instret: the instruction count (deterministic)
        default:
            throw GuestFault(pc, csr, "access to an unsupported CSR", SIGILL, ILL_ILLOPC);
        }
        uint64_t src = (in.op >= CSRRWI) ? in.rs3 : a;
        uint64_t nv = old;
        if (in.op == CSRRW || in.op == CSRRWI)
            nv = src;
        else if (in.op == CSRRS || in.op == CSRRSI)
            nv = old | src;
        else
            nv = old & ~src;
        bool write = (in.op == CSRRW || in.op == CSRRWI) || in.rs3 != 0;
        if (write) {
            if (csr == 0x001)
                fcsr_ = (fcsr_ & ~0x1fu) | (nv & 0x1f);
            else if (csr == 0x002)
                fcsr_ = (fcsr_ & 0x1f) | ((nv & 7) << 5);
            else if (csr == 0x003)
                fcsr_ = static_cast<uint32_t>(nv & 0xff);
            else
                throw GuestFault(pc, csr, "write to a read-only CSR", SIGILL, ILL_ILLOPC);
        }
        r = old;
        break;
    }
    case MUL:
        r = a * b;
        break;
    case MULH:
        r = static_cast<uint64_t>(
            (static_cast<__int128>(static_cast<int64_t>(a)) * static_cast<int64_t>(b)) >> 64);
        break;
    case MULHSU:
        r = static_cast<uint64_t>(
            (static_cast<__int128>(static_cast<int64_t>(a)) * static_cast<__int128>(b)) >> 64);
        break;
    case MULHU:
        r = static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
        break;
    case DIV: {
        int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
        r = y == 0                                                  ? ~0ull
            : (x == std::numeric_limits<int64_t>::min() && y == -1) ? a
                                                                    : static_cast<uint64_t>(x / y);
        break;
    }
    case DIVU:
        r = b == 0 ? ~0ull : a / b;
        break;
    case REM: {
        int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
        r = y == 0                                                  ? a
            : (x == std::numeric_limits<int64_t>::min() && y == -1) ? 0
                                                                    : static_cast<uint64_t>(x % y);
        break;
    }
    case REMU:
        r = b == 0 ? a : a % b;
        break;
    case MULW:
        r = static_cast<uint64_t>(sext32(a * b));
        break;
    case DIVW: {
        int32_t x = static_cast<int32_t>(a), y = static_cast<int32_t>(b);
        int32_t q = y == 0 ? -1 : (x == std::numeric_limits<int32_t>::min() && y == -1) ? x : x / y;
        r = static_cast<uint64_t>(static_cast<int64_t>(q));
        break;
    }
    case DIVUW: {
        uint32_t x = static_cast<uint32_t>(a), y = static_cast<uint32_t>(b);
        r = static_cast<uint64_t>(sext32(y == 0 ? ~0u : x / y));
        break;
    }
    case REMW: {
        int32_t x = static_cast<int32_t>(a), y = static_cast<int32_t>(b);
        int32_t m = y == 0 ? x : (x == std::numeric_limits<int32_t>::min() && y == -1) ? 0 : x % y;
        r = static_cast<uint64_t>(static_cast<int64_t>(m));
        break;
    }
    case REMUW: {
        uint32_t x = static_cast<uint32_t>(a), y = static_cast<uint32_t>(b);
        r = static_cast<uint64_t>(sext32(y == 0 ? x : x % y));
        break;
    }
    case LR_W:
        s->addr = a;
        aligned(4);
        r = static_cast<uint64_t>(static_cast<int64_t>(load_mem<int32_t>(a, pc)));
        reservation_ = a;
        break;
    case LR_D:
        s->addr = a;
        aligned(8);
        r = load_mem<uint64_t>(a, pc);
        reservation_ = a;
        break;
    case SC_W:
    case SC_D:
        s->addr = a;
        aligned(in.op == SC_D ? 8 : 4);
        if (reservation_ == a) {
            if (in.op == SC_W)
                store_mem<uint32_t>(a, static_cast<uint32_t>(b), pc);
            else
                store_mem<uint64_t>(a, b, pc);
            r = 0;
        } else {
            r = 1;
        }
        reservation_ = ~0ull;
        break;
    case AMOSWAP_W:
    case AMOSWAP_D:
        amo(in.op == AMOSWAP_D, [](uint64_t, uint64_t y) { return y; });
        break;
    case AMOADD_W:
    case AMOADD_D:
        amo(in.op == AMOADD_D, [](uint64_t x, uint64_t y) { return x + y; });
        break;
    case AMOXOR_W:
    case AMOXOR_D:
        amo(in.op == AMOXOR_D, [](uint64_t x, uint64_t y) { return x ^ y; });
        break;
    case AMOAND_W:
    case AMOAND_D:
        amo(in.op == AMOAND_D, [](uint64_t x, uint64_t y) { return x & y; });
        break;
    case AMOOR_W:
    case AMOOR_D:
        amo(in.op == AMOOR_D, [](uint64_t x, uint64_t y) { return x | y; });
        break;
    case AMOMIN_W:
        amo(false, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(std::min(sext32(x), sext32(y)));
        });
        break;
    case AMOMAX_W:
        amo(false, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(std::max(sext32(x), sext32(y)));
        });
        break;
    case AMOMINU_W:
        amo(false, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(
                std::min(static_cast<uint32_t>(x), static_cast<uint32_t>(y)));
        });
        break;
    case AMOMAXU_W:
        amo(false, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(
                std::max(static_cast<uint32_t>(x), static_cast<uint32_t>(y)));
        });
        break;
    case AMOMIN_D:
        amo(true, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(
                std::min(static_cast<int64_t>(x), static_cast<int64_t>(y)));
        });
        break;
    case AMOMAX_D:
        amo(true, [](uint64_t x, uint64_t y) {
            return static_cast<uint64_t>(
                std::max(static_cast<int64_t>(x), static_cast<int64_t>(y)));
        });
        break;
    case AMOMINU_D:
        amo(true, [](uint64_t x, uint64_t y) { return std::min(x, y); });
        break;
    case AMOMAXU_D:
        amo(true, [](uint64_t x, uint64_t y) { return std::max(x, y); });
        break;
    case FLW:
        r = BOX | load_mem<uint32_t>(addr(), pc);
        break;
    case FLD:
        r = load_mem<uint64_t>(addr(), pc);
        break;
    case FSW:
        store_mem<uint32_t>(addr(), static_cast<uint32_t>(b), pc);
        wr = false;
        break;
    case FSD:
        store_mem<uint64_t>(addr(), b, pc);
        wr = false;
        break;
    case FMADD_S:
    case FMSUB_S:
    case FNMSUB_S:
    case FNMADD_S: {
        float x = as_s(a), y = as_s(b), z = as_s(reg(in.rs3));
        if (in.op == FMSUB_S || in.op == FNMADD_S) z = -z;
        if (in.op == FNMSUB_S || in.op == FNMADD_S) x = -x;
        r = box_s(fp_fma(rm(), fcsr_, x, y, z));
        break;
    }
    case FMADD_D:
    case FMSUB_D:
    case FNMSUB_D:
    case FNMADD_D: {
        double x = as_d(a), y = as_d(b), z = as_d(reg(in.rs3));
        if (in.op == FMSUB_D || in.op == FNMADD_D) z = -z;
        if (in.op == FNMSUB_D || in.op == FNMADD_D) x = -x;
        r = bits_d(fp_fma(rm(), fcsr_, x, y, z));
        break;
    }
    case FADD_S:
        r = box_s(fp_add(rm(), fcsr_, as_s(a), as_s(b)));
        break;
    case FSUB_S:
        r = box_s(fp_sub(rm(), fcsr_, as_s(a), as_s(b)));
        break;
    case FMUL_S:
        r = box_s(fp_mul(rm(), fcsr_, as_s(a), as_s(b)));
        break;
    case FDIV_S:
        r = box_s(fp_div(rm(), fcsr_, as_s(a), as_s(b)));
        break;
    case FSQRT_S:
        r = box_s(fp_sqrt(rm(), fcsr_, as_s(a)));
        break;
    case FADD_D:
        r = bits_d(fp_add(rm(), fcsr_, as_d(a), as_d(b)));
        break;
    case FSUB_D:
        r = bits_d(fp_sub(rm(), fcsr_, as_d(a), as_d(b)));
        break;
    case FMUL_D:
        r = bits_d(fp_mul(rm(), fcsr_, as_d(a), as_d(b)));
        break;
    case FDIV_D:
        r = bits_d(fp_div(rm(), fcsr_, as_d(a), as_d(b)));
        break;
    case FSQRT_D:
        r = bits_d(fp_sqrt(rm(), fcsr_, as_d(a)));
        break;
    case FSGNJ_S:
    case FSGNJN_S:
    case FSGNJX_S: {
        uint32_t x = static_cast<uint32_t>(raw_s(as_s(a))),
                 y = static_cast<uint32_t>(raw_s(as_s(b)));
        uint32_t sign = in.op == FSGNJ_S    ? (y & 0x80000000u)
                        : in.op == FSGNJN_S ? (~y & 0x80000000u)
                                            : ((x ^ y) & 0x80000000u);
        r = BOX | ((x & 0x7fffffffu) | sign);
        break;
    }
    case FSGNJ_D:
        r = (a & ~(1ull << 63)) | (b & (1ull << 63));
        break;
    case FSGNJN_D:
        r = (a & ~(1ull << 63)) | (~b & (1ull << 63));
        break;
    case FSGNJX_D:
        r = a ^ (b & (1ull << 63));
        break;
    // (the comparisons and fmin/fmax: invalid for a signalling NaN, and
    // flt/fle for any NaN)
    case FMIN_S:
    case FMAX_S:
        if (snan_s(a) || snan_s(b)) fcsr_ |= NV;
        r = box_s(fmin_rv(as_s(a), as_s(b), in.op == FMAX_S));
        break;
    case FMIN_D:
    case FMAX_D:
        if (snan_d(a) || snan_d(b)) fcsr_ |= NV;
        r = bits_d(fmin_rv(as_d(a), as_d(b), in.op == FMAX_D));
        break;
    case FCVT_S_D:
        r = box_s(fp_cvt_s_d(rm(), fcsr_, as_d(a)));
        break;
    case FCVT_D_S: // (exact; the rounding mode must be a valid one all the same)
        rm();
        if (snan_s(a)) fcsr_ |= NV;
        r = bits_d(static_cast<double>(as_s(a)));
        break;
    case FEQ_S:
        if (snan_s(a) || snan_s(b)) fcsr_ |= NV;
        r = as_s(a) == as_s(b);
        break;
    case FLT_S:
    case FLE_S: {
        float x = as_s(a), y = as_s(b);
        if (std::isnan(x) || std::isnan(y)) fcsr_ |= NV;
        r = in.op == FLT_S ? x < y : x <= y;
        break;
    }
    case FEQ_D:
        if (snan_d(a) || snan_d(b)) fcsr_ |= NV;
        r = as_d(a) == as_d(b);
        break;
    case FLT_D:
    case FLE_D: {
        double x = as_d(a), y = as_d(b);
        if (std::isnan(x) || std::isnan(y)) fcsr_ |= NV;
        r = in.op == FLT_D ? x < y : x <= y;
        break;
    }
    case FCLASS_S:
        r = fclass(as_s(a));
        break;
    case FCLASS_D:
        r = fclass(as_d(a));
        break;
    case FCVT_W_S:
        r = static_cast<uint64_t>(to_signed(as_s(a), rm(), 32, &fcsr_));
        break;
    case FCVT_WU_S:
        r = static_cast<uint64_t>(sext32(to_unsigned(as_s(a), rm(), 32, &fcsr_)));
        break;
    case FCVT_L_S:
        r = static_cast<uint64_t>(to_signed(as_s(a), rm(), 64, &fcsr_));
        break;
    case FCVT_LU_S:
        r = to_unsigned(as_s(a), rm(), 64, &fcsr_);
        break;
    case FCVT_W_D:
        r = static_cast<uint64_t>(to_signed(as_d(a), rm(), 32, &fcsr_));
        break;
    case FCVT_WU_D:
        r = static_cast<uint64_t>(sext32(to_unsigned(as_d(a), rm(), 32, &fcsr_)));
        break;
    case FCVT_L_D:
        r = static_cast<uint64_t>(to_signed(as_d(a), rm(), 64, &fcsr_));
        break;
    case FCVT_LU_D:
        r = to_unsigned(as_d(a), rm(), 64, &fcsr_);
        break;
    case FCVT_S_W:
        r = box_s(fp_from_int<float>(rm(), fcsr_, static_cast<int32_t>(a)));
        break;
    case FCVT_S_WU:
        r = box_s(fp_from_int<float>(rm(), fcsr_, static_cast<uint32_t>(a)));
        break;
    case FCVT_S_L:
        r = box_s(fp_from_int<float>(rm(), fcsr_, static_cast<int64_t>(a)));
        break;
    case FCVT_S_LU:
        r = box_s(fp_from_int<float>(rm(), fcsr_, a));
        break;
    case FCVT_D_W: // (exact)
        rm();
        r = bits_d(static_cast<double>(static_cast<int32_t>(a)));
        break;
    case FCVT_D_WU:
        rm();
        r = bits_d(static_cast<double>(static_cast<uint32_t>(a)));
        break;
    case FCVT_D_L:
        r = bits_d(fp_from_int<double>(rm(), fcsr_, static_cast<int64_t>(a)));
        break;
    case FCVT_D_LU:
        r = bits_d(fp_from_int<double>(rm(), fcsr_, a));
        break;
    case FMV_X_W:
        r = static_cast<uint64_t>(sext32(a));
        break;
    case FMV_W_X:
        r = BOX | static_cast<uint32_t>(a);
        break;
    case FMV_X_D:
    case FMV_D_X:
        r = a;
        break;
    case SH1ADD:
        r = (a << 1) + b;
        break;
    case SH2ADD:
        r = (a << 2) + b;
        break;
    case SH3ADD:
        r = (a << 3) + b;
        break;
    case ADD_UW:
        r = (a & 0xffffffffull) + b;
        break;
    case SH1ADD_UW:
        r = ((a & 0xffffffffull) << 1) + b;
        break;
    case SH2ADD_UW:
        r = ((a & 0xffffffffull) << 2) + b;
        break;
    case SH3ADD_UW:
        r = ((a & 0xffffffffull) << 3) + b;
        break;
    case SLLI_UW:
        r = (a & 0xffffffffull) << (imm & 63);
        break;
    case ANDN:
        r = a & ~b;
        break;
    case ORN:
        r = a | ~b;
        break;
    case XNOR:
        r = ~(a ^ b);
        break;
    case CLZ:
        r = a ? static_cast<uint64_t>(__builtin_clzll(a)) : 64;
        break;
    case CTZ:
        r = a ? static_cast<uint64_t>(__builtin_ctzll(a)) : 64;
        break;
    case CPOP:
        r = static_cast<uint64_t>(__builtin_popcountll(a));
        break;
    case CLZW:
        r = static_cast<uint32_t>(a)
                ? static_cast<uint64_t>(__builtin_clz(static_cast<uint32_t>(a)))
                : 32;
        break;
    case CTZW:
        r = static_cast<uint32_t>(a)
                ? static_cast<uint64_t>(__builtin_ctz(static_cast<uint32_t>(a)))
                : 32;
        break;
    case CPOPW:
        r = static_cast<uint64_t>(__builtin_popcount(static_cast<uint32_t>(a)));
        break;
    case MAX:
        r = static_cast<int64_t>(a) > static_cast<int64_t>(b) ? a : b;
        break;
    case MAXU:
        r = std::max(a, b);
        break;
    case MIN:
        r = static_cast<int64_t>(a) < static_cast<int64_t>(b) ? a : b;
        break;
    case MINU:
        r = std::min(a, b);
        break;
    case SEXT_B:
        r = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(a)));
        break;
    case SEXT_H:
        r = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(a)));
        break;
    case ZEXT_H:
        r = a & 0xffff;
        break;
    case ROL:
        r = rotl64(a, b & 63);
        break;
    case ROR:
        r = rotl64(a, (64 - (b & 63)) & 63);
        break;
    case RORI:
        r = rotl64(a, (64 - (static_cast<uint64_t>(imm) & 63)) & 63);
        break;
    case ROLW:
        r = static_cast<uint64_t>(sext32(rotl32(static_cast<uint32_t>(a), b & 31)));
        break;
    case RORW:
        r = static_cast<uint64_t>(sext32(rotl32(static_cast<uint32_t>(a), (32 - (b & 31)) & 31)));
        break;
    case RORIW:
        r = static_cast<uint64_t>(sext32(
            rotl32(static_cast<uint32_t>(a), (32 - (static_cast<uint64_t>(imm) & 31)) & 31)));
        break;
    case ORC_B:
        r = 0;
        for (int k = 0; k < 64; k += 8)
            if ((a >> k) & 0xff) r |= 0xffull << k;
        break;
    case REV8:
        r = __builtin_bswap64(a);
        break;
    case TK_TLBWR:
    case TK_ERET:
        wr = false; // the timing model gives these their effect
        break;
    default:
        throw GuestFault(pc, in.raw, "illegal instruction", SIGILL, ILL_ILLOPC);
    }
    if (wr) set_reg(in.rd, r);
    s->next_pc = next;
    pc_ = next;
    instret_++;
}

} // namespace tksim
