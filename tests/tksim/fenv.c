// tests/tksim/fenv.c - floating point's rounding modes and exception flags:
// every arithmetic instruction and conversion of F and D in each rounding
// mode, static (the instruction's rm field) and dynamic (frm, set by
// fesetround and by fsrm), and the flags each raises (read with frflags
// after clearing them).  Chosen cases are printed one by one (results and
// flags in hex); random operands, many of them exact ties or near the
// subnormal and overflow boundaries, are summed up in a hash per
// instruction.  The output must be qemu-riscv64's
// (tests/tksim_vs_qemu.sh).
//
// With an argument the program runs one instruction whose rounding mode is
// reserved (tests/tksim_fenv.sh: an illegal instruction, SIGILL under
// qemu-riscv64): rm5, rm6 (fadd.d's rm field), dyn5, dyn6, dyn7 (frm,
// fadd.d dynamic), cvt5 (fcvt.d.s, exact but with an rm field), fma6,
// fcvtw5; dyn4 is legal (RMM) and finishes.  "verbose" prints every random
// case.
#include <fenv.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t db(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}
static double bd(uint64_t b)
{
    double d;
    memcpy(&d, &b, 8);
    return d;
}
static uint32_t fb(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static float bf(uint64_t b)
{
    uint32_t w = (uint32_t)b;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

static void clear_flags(void)
{
    __asm__ volatile("fsflags zero");
}
static unsigned read_flags(void)
{
    unsigned f;
    __asm__ volatile("frflags %0" : "=r"(f));
    return f;
}
static void set_frm(unsigned m)
{
    __asm__ volatile("fsrm %0" : : "r"(m));
}

// ---- every instruction in every mode: functions of up to three operands
// (bit patterns; a single's in the low 32 bits) giving the result's bits
typedef uint64_t (*fn)(uint64_t, uint64_t, uint64_t);

#define MODES(X, op)                                                                               \
    X(op, rne, 0) X(op, rtz, 1) X(op, rdn, 2) X(op, rup, 3) X(op, rmm, 4) X(op, dyn, 7)
#define TABLE(op)                                                                                  \
    {                                                                                              \
        op##_rne, op##_rtz, op##_rdn, op##_rup, op##_rmm, op##_dyn                                 \
    }

#define D2(op, rm, n)                                                                              \
    static uint64_t op##_d_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        double r;                                                                                  \
        (void)c;                                                                                   \
        __asm__ volatile(#op ".d %0, %1, %2, " #rm : "=f"(r) : "f"(bd(a)), "f"(bd(b)));            \
        return db(r);                                                                              \
    }
#define S2(op, rm, n)                                                                              \
    static uint64_t op##_s_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        float r;                                                                                   \
        (void)c;                                                                                   \
        __asm__ volatile(#op ".s %0, %1, %2, " #rm : "=f"(r) : "f"(bf(a)), "f"(bf(b)));            \
        return fb(r);                                                                              \
    }
#define D3(op, rm, n)                                                                              \
    static uint64_t op##_d_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        double r;                                                                                  \
        __asm__ volatile(#op ".d %0, %1, %2, %3, " #rm                                             \
                         : "=f"(r)                                                                 \
                         : "f"(bd(a)), "f"(bd(b)), "f"(bd(c)));                                    \
        return db(r);                                                                              \
    }
#define S3(op, rm, n)                                                                              \
    static uint64_t op##_s_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        float r;                                                                                   \
        __asm__ volatile(#op ".s %0, %1, %2, %3, " #rm                                             \
                         : "=f"(r)                                                                 \
                         : "f"(bf(a)), "f"(bf(b)), "f"(bf(c)));                                    \
        return fb(r);                                                                              \
    }
#define SQRT(op, rm, n)                                                                            \
    static uint64_t op##_d_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        double r;                                                                                  \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(#op ".d %0, %1, " #rm : "=f"(r) : "f"(bd(a)));                            \
        return db(r);                                                                              \
    }                                                                                              \
    static uint64_t op##_s_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        float r;                                                                                   \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(#op ".s %0, %1, " #rm : "=f"(r) : "f"(bf(a)));                            \
        return fb(r);                                                                              \
    }
// a conversion: OUT/IN are the C types of the result and operand, ENC/DEC
// make the operand and read the result, CON the constraints
#define CVT(name, insn, OUT, OCON, DEC, IN, ICON, ENC, rm)                                         \
    static uint64_t name##_##rm(uint64_t a, uint64_t b, uint64_t c)                                \
    {                                                                                              \
        OUT r;                                                                                     \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(insn " %0, %1, " #rm : "=" OCON(r) : ICON((IN)ENC(a)));                   \
        return DEC(r);                                                                             \
    }
#define ID(x) (x)
#define F2I(op, rm, n)                                                                             \
    CVT(op##_w_d, #op ".w.d", long, "r", (uint64_t), double, "f", bd, rm)                          \
    CVT(op##_wu_d, #op ".wu.d", long, "r", (uint64_t), double, "f", bd, rm)                        \
    CVT(op##_l_d, #op ".l.d", long, "r", (uint64_t), double, "f", bd, rm)                          \
    CVT(op##_lu_d, #op ".lu.d", long, "r", (uint64_t), double, "f", bd, rm)                        \
    CVT(op##_w_s, #op ".w.s", long, "r", (uint64_t), float, "f", bf, rm)                           \
    CVT(op##_wu_s, #op ".wu.s", long, "r", (uint64_t), float, "f", bf, rm)                         \
    CVT(op##_l_s, #op ".l.s", long, "r", (uint64_t), float, "f", bf, rm)                           \
    CVT(op##_lu_s, #op ".lu.s", long, "r", (uint64_t), float, "f", bf, rm)                         \
    CVT(op##_s_w, #op ".s.w", float, "f", fb, long, "r", ID, rm)                                   \
    CVT(op##_s_wu, #op ".s.wu", float, "f", fb, long, "r", ID, rm)                                 \
    CVT(op##_s_l, #op ".s.l", float, "f", fb, long, "r", ID, rm)                                   \
    CVT(op##_s_lu, #op ".s.lu", float, "f", fb, long, "r", ID, rm)                                 \
    CVT(op##_d_l, #op ".d.l", double, "f", db, long, "r", ID, rm)                                  \
    CVT(op##_d_lu, #op ".d.lu", double, "f", db, long, "r", ID, rm)                                \
    CVT(op##_s_d, #op ".s.d", float, "f", fb, double, "f", bd, rm)
// the exact conversions, whose rm field the assembler does not take
#define EXACT(op, rm, n)                                                                           \
    static uint64_t op##_d_s_##rm(uint64_t a, uint64_t b, uint64_t c)                              \
    {                                                                                              \
        double r;                                                                                  \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(".insn r 0x53, " #n ", 0x21, %0, %1, f0" : "=f"(r) : "f"(bf(a)));         \
        return db(r);                                                                              \
    }                                                                                              \
    static uint64_t op##_d_w_##rm(uint64_t a, uint64_t b, uint64_t c)                              \
    {                                                                                              \
        double r;                                                                                  \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(".insn r 0x53, " #n ", 0x69, %0, %1, x0" : "=f"(r) : "r"(a));             \
        return db(r);                                                                              \
    }                                                                                              \
    static uint64_t op##_d_wu_##rm(uint64_t a, uint64_t b, uint64_t c)                             \
    {                                                                                              \
        double r;                                                                                  \
        (void)b, (void)c;                                                                          \
        __asm__ volatile(".insn r 0x53, " #n ", 0x69, %0, %1, x1" : "=f"(r) : "r"(a));             \
        return db(r);                                                                              \
    }

MODES(D2, fadd)
MODES(D2, fsub)
MODES(D2, fmul)
MODES(D2, fdiv)
MODES(S2, fadd)
MODES(S2, fsub)
MODES(S2, fmul)
MODES(S2, fdiv)
MODES(SQRT, fsqrt)
MODES(D3, fmadd)
MODES(D3, fmsub)
MODES(D3, fnmsub)
MODES(D3, fnmadd)
MODES(S3, fmadd)
MODES(S3, fmsub)
MODES(S3, fnmsub)
MODES(S3, fnmadd)
MODES(F2I, fcvt)
MODES(EXACT, fcvt)

// the operands an instruction takes
enum kind { D1, D2K, D3K, S1, S2K, S3K, I64 };
struct op {
    const char *name;
    enum kind kind;
    int single_result;
    fn f[6];  // rne, rtz, rdn, rup, rmm, dyn
    char tie; // rand_tie's kind
};
static const struct op ops[] = {
    {"fadd.d", D2K, 0, TABLE(fadd_d), 'a'},     {"fsub.d", D2K, 0, TABLE(fsub_d), 'a'},
    {"fmul.d", D2K, 0, TABLE(fmul_d), 'm'},     {"fdiv.d", D2K, 0, TABLE(fdiv_d), 'd'},
    {"fsqrt.d", D1, 0, TABLE(fsqrt_d), 0},      {"fmadd.d", D3K, 0, TABLE(fmadd_d), 'f'},
    {"fmsub.d", D3K, 0, TABLE(fmsub_d), 'f'},   {"fnmsub.d", D3K, 0, TABLE(fnmsub_d), 'f'},
    {"fnmadd.d", D3K, 0, TABLE(fnmadd_d), 'f'}, {"fadd.s", S2K, 1, TABLE(fadd_s), 'a'},
    {"fsub.s", S2K, 1, TABLE(fsub_s), 'a'},     {"fmul.s", S2K, 1, TABLE(fmul_s), 'm'},
    {"fdiv.s", S2K, 1, TABLE(fdiv_s), 'd'},     {"fsqrt.s", S1, 1, TABLE(fsqrt_s), 0},
    {"fmadd.s", S3K, 1, TABLE(fmadd_s), 'f'},   {"fmsub.s", S3K, 1, TABLE(fmsub_s), 'f'},
    {"fnmsub.s", S3K, 1, TABLE(fnmsub_s), 'f'}, {"fnmadd.s", S3K, 1, TABLE(fnmadd_s), 'f'},
    {"fcvt.s.d", D1, 1, TABLE(fcvt_s_d), 'c'},  {"fcvt.d.s", S1, 0, TABLE(fcvt_d_s), 0},
    {"fcvt.w.d", D1, 0, TABLE(fcvt_w_d), 'h'},  {"fcvt.wu.d", D1, 0, TABLE(fcvt_wu_d), 'h'},
    {"fcvt.l.d", D1, 0, TABLE(fcvt_l_d), 'h'},  {"fcvt.lu.d", D1, 0, TABLE(fcvt_lu_d), 'h'},
    {"fcvt.w.s", S1, 0, TABLE(fcvt_w_s), 'h'},  {"fcvt.wu.s", S1, 0, TABLE(fcvt_wu_s), 'h'},
    {"fcvt.l.s", S1, 0, TABLE(fcvt_l_s), 'h'},  {"fcvt.lu.s", S1, 0, TABLE(fcvt_lu_s), 'h'},
    {"fcvt.s.w", I64, 1, TABLE(fcvt_s_w), 'c'}, {"fcvt.s.wu", I64, 1, TABLE(fcvt_s_wu), 'c'},
    {"fcvt.s.l", I64, 1, TABLE(fcvt_s_l), 'c'}, {"fcvt.s.lu", I64, 1, TABLE(fcvt_s_lu), 'c'},
    {"fcvt.d.w", I64, 0, TABLE(fcvt_d_w), 0},   {"fcvt.d.wu", I64, 0, TABLE(fcvt_d_wu), 0},
    {"fcvt.d.l", I64, 0, TABLE(fcvt_d_l), 'c'}, {"fcvt.d.lu", I64, 0, TABLE(fcvt_d_lu), 'c'},
};
#define NOPS (sizeof ops / sizeof ops[0])
static const char *const mode_name[5] = {"rne", "rtz", "rdn", "rup", "rmm"};

// ---- chosen cases
static const uint64_t MAXD = 0x7fefffffffffffffull, MIND = 0x0010000000000000ull;
static const uint64_t INFD = 0x7ff0000000000000ull, QNAND = 0x7ff8000000000000ull;
static const uint64_t SNAND = 0x7ff4000000000000ull, NEG = 1ull << 63;
static const uint64_t MAXS = 0x7f7fffff, MINS = 0x00800000, INFS = 0x7f800000, QNANS = 0x7fc00000,
                      SNANS = 0x7fa00000, NEGS = 0x80000000;
#define D(x) db(x)
#define S(x) fb(x)

struct chosen {
    const char *op;
    uint64_t a, b, c;
};

static const struct op *find(const char *name)
{
    for (unsigned i = 0; i < NOPS; i++)
        if (strcmp(ops[i].name, name) == 0) return &ops[i];
    return 0;
}

static void print_result(const struct op *o, uint64_t r)
{
    if (o->single_result)
        printf(" %08x", (uint32_t)r);
    else
        printf(" %016llx", (unsigned long long)r);
}

static void chosen_cases(void)
{
    const struct chosen cases[] = {
        // ties: nearest-even and nearest-max-magnitude differ
        {"fadd.d", D(1.0), D(0x1p-53), 0},                         // 1 + half an ulp
        {"fadd.d", D(1.0), D(0x3p-53), 0},                         // 1 + 1.5 ulp: even is up
        {"fadd.d", D(-1.0), D(-0x1p-53), 0},                       // negative
        {"fsub.d", D(1.0), D(-0x1p-53), 0},                        //
        {"fsub.d", D(0x1p53), D(-1.0), 0},                         // 2^53 + 1
        {"fmul.d", D(0x1.0000000000001p0), D(1.5), 0},             // 1.5 + 1.5 ulp
        {"fmul.d", D(0x5p-1074), D(0.5), 0},                       // 2.5 least subnormals
        {"fmul.d", D(0x1p-1074), D(0.5), 0},                       // half the least subnormal
        {"fmul.d", D(-0x1p-1074), D(0.5), 0},                      //
        {"fmul.d", D(0x1p-1074), D(0.25), 0},                      // a quarter: 0 in RMM too
        {"fmul.d", D(0x1.fffffffffffffp-1023), D(0.5), 0},         // just below the least normal
        {"fdiv.d", D(0x5p-1074), D(2.0), 0},                       // a subnormal quotient's tie
        {"fdiv.d", D(0x7p-1074), D(-4.0), 0},                      //
        {"fdiv.d", D(0x3p-1074), D(4.0), 0},                       // 0.75: rounds up in both
        {"fadd.s", S(1.0f), S(0x1p-24f), 0},                       //
        {"fadd.s", S(0x1p24f), S(1.0f), 0},                        //
        {"fmul.s", S(0x1.000002p0f), S(1.5f), 0},                  //
        {"fmul.s", S(0x5p-149f), S(0.5f), 0},                      //
        {"fdiv.s", S(0x5p-149f), S(-2.0f), 0},                     //
        {"fmadd.d", D(1.0), D(1.0), D(0x1p-53)},                   //
        {"fmadd.d", D(0x1p-1074), D(0.5), D(0.0)},                 // the product's tie alone
        {"fmadd.d", D(0x3p-1074), D(0.5), D(0x1p-1074)},           // 2.5 least subnormals
        {"fmsub.d", D(3.0), D(0x1p52), D(-1.0)},                   // 3 * 2^52 + 1
        {"fnmadd.d", D(3.0), D(0x1p52), D(1.0)},                   //
        {"fnmsub.d", D(3.0), D(0x1p52), D(-1.0)},                  //
        {"fmadd.s", S(1.0f), S(1.0f), S(0x1p-24f)},                //
        {"fmadd.s", S(0x1.000002p0f), S(0x1.000002p0f), S(-1.0f)}, // exact
        // rounding without ties
        {"fdiv.d", D(1.0), D(3.0), 0},
        {"fdiv.d", D(-1.0), D(3.0), 0},
        {"fdiv.d", D(2.0), D(3.0), 0},
        {"fdiv.s", S(1.0f), S(3.0f), 0},
        {"fdiv.s", S(-2.0f), S(3.0f), 0},
        {"fadd.d", D(1.0), D(1e-17), 0},
        {"fadd.d", D(-1.0), D(-1e-17), 0},
        {"fadd.s", S(1.0f), S(1e-9f), 0},
        {"fmul.d", D(0.1), D(0.1), 0},
        {"fsqrt.d", D(2.0), 0, 0},
        {"fsqrt.d", D(3.0), 0, 0},
        {"fsqrt.d", D(0x1p-1074), 0, 0},
        {"fsqrt.d", D(0x1.fffffffffffffp1023), 0, 0},
        {"fsqrt.s", S(2.0f), 0, 0},
        {"fsqrt.s", S(0x1p-149f), 0, 0},
        {"fsqrt.s", S(5.0f), 0, 0},
        {"fmadd.d", D(0.1), D(10.0), D(-1.0)},
        {"fmadd.s", S(0.1f), S(10.0f), S(-1.0f)},
        // signed zeros: x - x is -0 rounding down
        {"fsub.d", D(1.0), D(1.0), 0},
        {"fadd.d", D(-0.0), D(0.0), 0},
        {"fsub.s", S(1.0f), S(1.0f), 0},
        {"fmadd.d", D(2.0), D(3.0), D(-6.0)},
        {"fnmadd.d", D(2.0), D(3.0), D(-6.0)},
        {"fmadd.s", S(2.0f), S(3.0f), S(-6.0f)},
        // overflow: the largest finite value or infinity by mode
        {"fmul.d", MAXD, D(2.0), 0},
        {"fmul.d", MAXD | NEG, D(2.0), 0},
        {"fadd.d", MAXD, D(0x1p970), 0}, // max + half an ulp
        {"fadd.d", MAXD, D(0x1p969), 0},
        {"fmul.s", MAXS, S(2.0f), 0},
        {"fadd.s", MAXS, S(0x1p103f), 0},
        {"fmadd.d", MAXD, D(2.0), MAXD | NEG},
        {"fdiv.d", D(0x1p1000), D(0x1p-100), 0},
        // underflow: tiny and inexact (an exact subnormal raises none)
        {"fmul.d", D(0x1p-1022), D(0x1p-30), 0},
        {"fmul.d", D(0x1.0000000000001p-1022), D(0.5), 0},
        {"fmul.d", D(0x1p-1000), D(0x1p-100), 0},
        {"fmul.s", S(0x1.000002p-126f), S(0.5f), 0},
        {"fmul.s", MINS, S(0x1.fffffep-1f), 0}, // tiny, and rounds to the least normal
        {"fdiv.d", D(0x1p-1022), D(0x1.0000000000001p0), 0},
        {"fadd.d", D(0x1p-1022), D(-0x1p-1074), 0}, // exact
        // invalid
        {"fdiv.d", D(0.0), D(0.0), 0},
        {"fsub.d", INFD, INFD, 0},
        {"fmul.d", INFD, D(0.0), 0},
        {"fsqrt.d", D(-1.0), 0, 0},
        {"fsqrt.d", D(-0.0), 0, 0},
        {"fadd.d", SNAND, D(1.0), 0},
        {"fadd.d", QNAND, D(1.0), 0},
        {"fmadd.d", INFD, D(0.0), QNAND},
        {"fmadd.d", D(0.0), INFD | NEG, D(1.0)},
        {"fmadd.d", QNAND, D(0.0), D(1.0)},
        {"fmadd.d", D(1.0), D(1.0), SNAND},
        {"fmadd.d", INFD, D(1.0), INFD | NEG},
        {"fdiv.s", S(0.0f), S(0.0f), 0},
        {"fsqrt.s", S(-2.0f), 0, 0},
        {"fadd.s", SNANS, S(1.0f), 0},
        {"fmadd.s", INFS, S(0.0f), QNANS},
        // divide by zero
        {"fdiv.d", D(1.0), D(0.0), 0},
        {"fdiv.d", D(-1.0), D(0.0), 0},
        {"fdiv.d", INFD, D(0.0), 0},
        {"fdiv.s", S(1.0f), S(-0.0f), 0},
        // conversions between the formats
        {"fcvt.s.d", D(1.0 / 3), 0, 0},
        {"fcvt.s.d", D(-1.0 / 3), 0, 0},
        {"fcvt.s.d", D(0x1.000001p0), 0, 0}, // a tie
        {"fcvt.s.d", D(0x1.000003p0), 0, 0},
        {"fcvt.s.d", D(-0x1.000001p0), 0, 0},
        {"fcvt.s.d", D(0x1.8p-149), 0, 0}, // a subnormal tie
        {"fcvt.s.d", D(0x1p-150), 0, 0},
        {"fcvt.s.d", D(0x1.fffffep-127), 0, 0},
        {"fcvt.s.d", D(0x1.fffffffp-127), 0, 0},
        {"fcvt.s.d", D(1e39), 0, 0},
        {"fcvt.s.d", D(0x1.ffffffp127), 0, 0},
        {"fcvt.s.d", D(1e-50), 0, 0},
        {"fcvt.s.d", SNAND, 0, 0},
        {"fcvt.s.d", INFD | NEG, 0, 0},
        {"fcvt.d.s", SNANS, 0, 0},
        {"fcvt.d.s", S(0x1p-149f), 0, 0},
        {"fcvt.d.s", S(1.0f / 3), 0, 0},
        // integers to floating point
        {"fcvt.d.l", (1ull << 53) + 1, 0, 0}, // a tie
        {"fcvt.d.l", (1ull << 53) + 3, 0, 0},
        {"fcvt.d.l", -((1ll << 53) + 1), 0, 0},
        {"fcvt.d.l", 0x7fffffffffffffffull, 0, 0},
        {"fcvt.d.l", 0x8000000000000000ull, 0, 0},
        {"fcvt.d.lu", 0xffffffffffffffffull, 0, 0},
        {"fcvt.d.lu", 0x8000000000000401ull, 0, 0},
        {"fcvt.d.lu", 0x8000000000000400ull, 0, 0},
        {"fcvt.d.w", 0xffffffff80000000ull, 0, 0},
        {"fcvt.d.wu", 0x12345678ffffffffull, 0, 0},
        {"fcvt.s.w", 0x7fffffff, 0, 0},
        {"fcvt.s.w", (1 << 24) + 1, 0, 0},
        {"fcvt.s.w", 0xfffffffffefffffeull, 0, 0},
        {"fcvt.s.wu", 0xffffffff, 0, 0},
        {"fcvt.s.l", (1ull << 24) + 1, 0, 0},
        {"fcvt.s.l", 0x123456789abcdefull, 0, 0},
        {"fcvt.s.lu", 0xffffffffffffffffull, 0, 0},
        {"fcvt.s.lu", 0x8000008000000000ull, 0, 0},
        // floating point to integers
        {"fcvt.w.d", D(2.5), 0, 0},
        {"fcvt.w.d", D(-2.5), 0, 0},
        {"fcvt.w.d", D(0.5), 0, 0},
        {"fcvt.w.d", D(-0.5), 0, 0},
        {"fcvt.w.d", D(3.7), 0, 0},
        {"fcvt.w.d", D(-3.7), 0, 0},
        {"fcvt.w.d", D(1e10), 0, 0},
        {"fcvt.w.d", D(-2147483648.5), 0, 0},
        {"fcvt.w.d", D(2147483647.5), 0, 0},
        {"fcvt.w.d", QNAND, 0, 0},
        {"fcvt.w.d", INFD | NEG, 0, 0},
        {"fcvt.wu.d", D(-0.7), 0, 0},
        {"fcvt.wu.d", D(-1.0), 0, 0},
        {"fcvt.wu.d", D(-0.0), 0, 0},
        {"fcvt.wu.d", D(4294967295.5), 0, 0},
        {"fcvt.l.d", D(0x1p63), 0, 0},
        {"fcvt.l.d", D(-0x1p63), 0, 0},
        {"fcvt.l.d", D(-1.5), 0, 0},
        {"fcvt.lu.d", D(0x1p64), 0, 0},
        {"fcvt.lu.d", D(0x1.fffffffffffffp63), 0, 0},
        {"fcvt.lu.d", D(-1e-300), 0, 0},
        {"fcvt.lu.d", SNAND, 0, 0},
        {"fcvt.w.s", S(2.5f), 0, 0},
        {"fcvt.w.s", S(-1.5f), 0, 0},
        {"fcvt.w.s", S(3e9f), 0, 0},
        {"fcvt.wu.s", S(-0.25f), 0, 0},
        {"fcvt.l.s", S(-0x1p63f), 0, 0},
        {"fcvt.lu.s", S(0x1p64f), 0, 0},
        {"fcvt.lu.s", QNANS, 0, 0},
    };

    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct chosen *c = &cases[i];
        const struct op *o = find(c->op);
        printf("%-9s %llx %llx %llx:", c->op, (unsigned long long)c->a, (unsigned long long)c->b,
               (unsigned long long)c->c);
        uint64_t r[5];
        unsigned fl[5];
        for (int m = 0; m < 5; m++) {
            clear_flags();
            r[m] = o->f[m](c->a, c->b, c->c);
            fl[m] = read_flags();
            print_result(o, r[m]);
            printf("/%02x", fl[m]);
        }
        // the same through frm (dynamic): printed only where it differs
        for (int m = 0; m < 5; m++) {
            set_frm(m);
            clear_flags();
            uint64_t d = o->f[5](c->a, c->b, c->c);
            unsigned f = read_flags();
            set_frm(0);
            if (d != r[m] || f != fl[m]) {
                printf(" dyn-%s:", mode_name[m]);
                print_result(o, d);
                printf("/%02x", f);
            }
        }
        printf("\n");
    }
}

// ---- random cases (-DRANDOM_CASES=n -DSEED=s: more, others)
#ifndef RANDOM_CASES
#define RANDOM_CASES 400
#endif
#ifndef SEED
#define SEED 0x243f6a8885a308d3ull
#endif
static uint64_t rng = SEED;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static unsigned below(unsigned n)
{
    return (unsigned)(next() % n);
}
// a value of `bits` significant bits at most, scaled by 2^e
static double scaled(int bits, int e)
{
    uint64_t m = next() >> (64 - bits);
    double v = (double)m; // exact: bits <= 53
    while (e > 0) {
        int k = e > 1000 ? 1000 : e;
        v *= bd((uint64_t)(1023 + k) << 52);
        e -= k;
    }
    while (e < 0) { // (exact while the value stays normal; rounded below, in RNE)
        int k = e < -1000 ? 1000 : -e;
        v *= bd((uint64_t)(1023 - k) << 52);
        e += k;
    }
    return next() & 1 ? -v : v;
}
static uint64_t rand_d(void)
{
    const uint64_t special[] = {
        0,    NEG,        D(1.0), D(-1.0), INFD,    INFD | NEG, QNAND,  SNAND,
        MAXD, MAXD | NEG, MIND,   1,       1 | NEG, D(0.5),     D(3.0), D(0x1p-1022 - 0x1p-1074)};
    switch (below(10)) {
    case 0:
        return special[below(sizeof special / sizeof special[0])];
    case 1:
    case 2:
        return next(); // anything
    case 3:            // few digits, near the least normal or in the subnormals
        return D(scaled(1 + below(53), -1074 + (int)below(80)));
    case 4: // near overflow
        return D(scaled(1 + below(53), 960 + (int)below(12)));
    default: // few digits, exponents close together: ties are frequent
        return D(scaled(1 + below(53), (int)below(40) - 20 - 26));
    }
}
static uint64_t rand_s(void)
{
    const uint32_t special[] = {0,        NEGS,        S(1.0f), S(-1.0f),
                                INFS,     INFS | NEGS, QNANS,   SNANS,
                                MAXS,     MAXS | NEGS, MINS,    1,
                                1 | NEGS, S(0.5f),     S(3.0f), S(0x1p-126f - 0x1p-149f)};
    switch (below(10)) {
    case 0:
        return special[below(sizeof special / sizeof special[0])];
    case 1:
    case 2:
        return (uint32_t)next();
    case 3:
        return S((float)scaled(1 + below(24), -149 + (int)below(40)));
    case 4:
        return S((float)scaled(1 + below(24), 100 + (int)below(6)));
    case 5: // doubles: for fcvt.s.d and the float to integer conversions
        return S((float)scaled(1 + below(24), (int)below(70) - 6));
    default:
        return S((float)scaled(1 + below(24), (int)below(20) - 10 - 12));
    }
}
static uint64_t rand_conv_d(void) // for the conversions from double
{
    switch (below(4)) {
    case 0:
        return rand_d();
    case 1: // near a float's digits: ties for fcvt.s.d
        return D(scaled(1 + below(53), (int)below(300) - 150));
    case 2:
        return D(scaled(1 + below(30), -149 - 20 + (int)below(40)));
    default: // integers and halves, up to 2^66
        return D(scaled(1 + below(53), (int)below(70) - 5 - 53 + (int)below(53)));
    }
}
// operands whose exact result is often a tie at precision p (53, 24):
// kind 'a' x + y, 'm' x * y, 'd' x / y (ties only among the subnormals),
// 'f' x * y + z, 'c' a conversion of x
static double pow2(int e) // e >= -1074
{
    return e >= -1022 ? bd((uint64_t)(e + 1023) << 52) : bd(1ull << (e + 1074));
}
static long odd_int(int bits) // exactly `bits` significant bits, the last one 1
{
    uint64_t m = bits == 1 ? 1 : ((next() >> (65 - bits)) | 1 | (1ull << (bits - 1)));
    return next() & 1 ? -(long)m : (long)m;
}
static double odd(int bits) // (bits <= 53)
{
    return (double)odd_int(bits);
}
static void rand_tie(char kind, int p, double v[3])
{
    int e = (int)below(40) - 20, b1, b2;
    int emin = p == 53 ? -1074 : -149;
    switch (kind) {
    case 'a': // x's last digit is worth 2^e; y is an odd number of halves of it
        v[0] = odd(p) * pow2(e);
        v[1] = odd(1 + (int)below(4)) * pow2(e - 1);
        break;
    case 'd':
        v[0] = odd(1 + (int)below(12)) * pow2(emin);
        v[1] = (next() & 1 ? -1 : 1) * pow2(1 + (int)below(4));
        break;
    case 'c':
        v[0] = odd(p + 1) * pow2(e);
        break;
    default:                 // 'm', 'f': a product of p + 1 or p + 2 digits
        if (below(4) == 0) { // or a subnormal one with a half of the least
            v[0] = odd(1 + (int)below(16)) * pow2(emin);
            v[1] = odd(1 + (int)below(4)) * 0.5;
            v[2] = next() & 1 ? 0.0 : odd(1 + (int)below(8)) * pow2(emin + 1);
            break;
        }
        b1 = 1 + (int)below((unsigned)p);
        b2 = p + 1 - b1 + (int)below(2);
        if (b2 > p) b2 = p;
        v[0] = odd(b1) * pow2(e);
        v[1] = odd(b2) * pow2(-e);
        // an addend that keeps the product's last digit
        v[2] = next() & 1 ? 0.0 : odd(1 + (int)below(8)) * 2;
        break;
    }
}

static uint64_t rand_int(void)
{
    uint64_t v = next();
    int bits = 1 + (int)below(64);
    v >>= 64 - bits;
    if (below(3) == 0) v = ~v + 1; // negative
    if (below(4) == 0) v = (v | 1) << below(12);
    return v;
}

static int verbose;

static void random_cases(unsigned n)
{
    for (unsigned i = 0; i < NOPS; i++) {
        const struct op *o = &ops[i];
        uint64_t hash = 0xcbf29ce484222325ull;
        unsigned ties = 0, raised[5] = {0}, dyn_differs = 0;
        for (unsigned k = 0; k < n; k++) {
            uint64_t a, b = 0, c = 0;
            switch (o->kind) {
            case D1:
                a = strncmp(o->name, "fcvt", 4) == 0 ? rand_conv_d() : rand_d();
                break;
            case D2K:
                a = rand_d(), b = rand_d();
                break;
            case D3K:
                a = rand_d(), b = rand_d(), c = rand_d();
                break;
            case S1:
                a = rand_s();
                break;
            case S2K:
                a = rand_s(), b = rand_s();
                break;
            case S3K:
                a = rand_s(), b = rand_s(), c = rand_s();
                break;
            default:
                a = rand_int();
                break;
            }
            if (o->tie && below(3) == 0) { // a tie, likely
                int single = o->kind == S1 || o->kind == S2K || o->kind == S3K;
                double v[3] = {0, 0, 0};
                if (o->tie == 'h') { // an odd number of halves
                    v[0] = odd(1 + (int)below(single ? 24 : 53)) * 0.5;
                } else if (o->kind == I64) { // an integer of p + 1 digits
                    int p = o->single_result ? 24 : 53;
                    unsigned width = strchr(o->name + 7, 'w') ? 32 : 64;
                    a = (uint64_t)odd_int(p + 1) << below(width - 1 - (unsigned)p);
                } else {
                    rand_tie(o->tie, single || o->single_result ? 24 : 53, v);
                }
                if (o->kind != I64) {
                    if (single) {
                        a = fb((float)v[0]), b = fb((float)v[1]), c = fb((float)v[2]);
                    } else {
                        a = db(v[0]), b = db(v[1]), c = db(v[2]);
                    }
                }
            }
            if (o->kind == S1 || o->kind == S2K || o->kind == S3K) { // NaN-boxed
                a |= 0xffffffff00000000ull;
                b |= 0xffffffff00000000ull;
                c |= 0xffffffff00000000ull;
            }
            uint64_t r[5];
            unsigned fl[5];
            for (int m = 0; m < 5; m++) {
                clear_flags();
                r[m] = o->f[m](a, b, c);
                fl[m] = read_flags();
                hash = (hash ^ r[m]) * 0x100000001b3ull;
                hash = (hash ^ fl[m]) * 0x100000001b3ull;
                for (int f = 0; f < 5; f++) raised[f] += (fl[m] >> f) & 1;
            }
            if (r[4] != r[0]) ties++;
            for (int m = 0; m < 5; m++) {
                set_frm(m);
                clear_flags();
                uint64_t d = o->f[5](a, b, c);
                unsigned f = read_flags();
                if (d != r[m] || f != fl[m]) dyn_differs++;
            }
            set_frm(0);
            if (verbose) {
                printf("  %s %llx %llx %llx:", o->name, (unsigned long long)a,
                       (unsigned long long)b, (unsigned long long)c);
                for (int m = 0; m < 5; m++) {
                    print_result(o, r[m]);
                    printf("/%02x", fl[m]);
                }
                printf("\n");
            }
        }
        printf("random %-9s %u cases: %016llx, rmm!=rne %u, NX %u UF %u OF %u DZ %u NV %u, "
               "dynamic differs %u\n",
               o->name, n, (unsigned long long)hash, ties, raised[0], raised[1], raised[2],
               raised[3], raised[4], dyn_differs);
    }
}

// ---- flags through glibc and the CSRs, and the instructions without a
// rounding mode
static void other_flags(void)
{
    volatile double one = 1.0, three = 3.0, zero = 0.0, big = 1e308, tiny = 1e-300;
    volatile double r;
    volatile long big_int = 0x7ffffffffffffff1ll;
    int ex[] = {FE_INEXACT, FE_UNDERFLOW, FE_OVERFLOW, FE_DIVBYZERO, FE_INVALID};
    printf("fenv: FE_INEXACT %x FE_UNDERFLOW %x FE_OVERFLOW %x FE_DIVBYZERO %x FE_INVALID %x\n",
           ex[0], ex[1], ex[2], ex[3], ex[4]);
    feclearexcept(FE_ALL_EXCEPT);
    r = one / three;
    printf("fetestexcept after 1/3: %x\n", fetestexcept(FE_ALL_EXCEPT));
    feclearexcept(FE_ALL_EXCEPT);
    r = one / zero;
    printf("after 1/0: %x\n", fetestexcept(FE_ALL_EXCEPT));
    feclearexcept(FE_ALL_EXCEPT);
    r = zero / zero;
    printf("after 0/0: %x\n", fetestexcept(FE_ALL_EXCEPT));
    feclearexcept(FE_ALL_EXCEPT);
    r = big * 10.0;
    printf("after 1e308*10: %x\n", fetestexcept(FE_ALL_EXCEPT));
    feclearexcept(FE_ALL_EXCEPT);
    r = tiny * tiny;
    printf("after 1e-300*1e-300: %x\n", fetestexcept(FE_ALL_EXCEPT));
    feclearexcept(FE_ALL_EXCEPT);
    volatile long l = (long)(big * 1.0);
    printf("after (long)1e308: %x (%ld)\n", fetestexcept(FE_ALL_EXCEPT), (long)l);
    // the flags accrue
    feclearexcept(FE_ALL_EXCEPT);
    r = one / zero;
    r = one / three;
    r = zero / zero;
    unsigned fcsr;
    fesetround(FE_UPWARD);
    __asm__ volatile("frcsr %0" : "=r"(fcsr));
    printf("accrued: %x, fcsr %x\n", fetestexcept(FE_ALL_EXCEPT), fcsr);
    fesetround(FE_TONEAREST);
    feclearexcept(FE_INEXACT);
    printf("less inexact: %x\n", fetestexcept(FE_ALL_EXCEPT));
    // dynamic rounding through fesetround, in compiled code (the results
    // stored before the mode changes back)
    int modes[] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
    for (int m = 0; m < 4; m++) {
        volatile double q, s, p, di;
        volatile float fq, cv;
        fesetround(modes[m]);
        q = one / three;
        s = one + 1e-17;
        p = (three + tiny) * (one / three);
        fq = (float)one / (float)three;
        cv = (float)(one / three);
        di = (double)big_int;
        int rm = fegetround();
        fesetround(FE_TONEAREST);
        printf("fesetround %x: %016llx %016llx %016llx %08x %08x %016llx\n", rm,
               (unsigned long long)db(q), (unsigned long long)db(s), (unsigned long long)db(p),
               fb(fq), fb(cv), (unsigned long long)db(di));
    }
    (void)r;
    // a single not NaN-boxed: the canonical NaN, no flag
    uint64_t unboxed = 0x3f800000;
    float fr;
    clear_flags();
    __asm__ volatile("fmv.d.x ft0, %1; fadd.s %0, ft0, ft0" : "=f"(fr) : "r"(unboxed) : "ft0");
    printf("unboxed 1.0f + itself: %08x/%x\n", fb(fr), read_flags());
    // fclass and fcvt.d.s of a signalling NaN, then exact additions: only
    // fcvt.d.s raises invalid
    {
        double sn = bd(SNAND), two = 2.0, s;
        float snf = bf(SNANS);
        long cls;
        unsigned f1, f2;
        clear_flags();
        __asm__ volatile("fclass.d %0, %1" : "=r"(cls) : "f"(sn));
        __asm__ volatile("fadd.d %0, %1, %1" : "=f"(s) : "f"(two));
        f1 = read_flags();
        __asm__ volatile("fcvt.d.s %0, %1" : "=f"(s) : "f"(snf));
        clear_flags();
        __asm__ volatile("fadd.d %0, %1, %1" : "=f"(s) : "f"(two));
        f2 = read_flags();
        printf("fclass(snan) %lx, then 2+2: %x; fcvt.d.s(snan), cleared, 2+2: %x\n", cls, f1, f2);
    }
    // no rounding mode: compare, fmin/fmax, fclass, sign injection, moves
    struct {
        const char *name;
        uint64_t a, b;
    } nr[] = {{"qnan,1", QNAND, D(1.0)}, {"snan,1", SNAND, D(1.0)},   {"1,2", D(1.0), D(2.0)},
              {"-0,0", NEG, 0},          {"snan,snan", SNAND, SNAND}, {"qnan,qnan", QNAND, QNAND}};
    for (unsigned i = 0; i < sizeof nr / sizeof nr[0]; i++) {
        double x = bd(nr[i].a), y = bd(nr[i].b), mn, mx, sj;
        float xs = bf(nr[i].a == SNAND ? SNANS : nr[i].a == QNAND ? QNANS : fb((float)x));
        float ys = bf(nr[i].b == SNAND ? SNANS : nr[i].b == QNAND ? QNANS : fb((float)y));
        long eq, lt, le, cl, eqs, lts, les, mv;
        unsigned f[12];
        float mns, mxs;
        clear_flags();
        __asm__ volatile("feq.d %0, %1, %2" : "=r"(eq) : "f"(x), "f"(y));
        f[0] = read_flags();
        clear_flags();
        __asm__ volatile("flt.d %0, %1, %2" : "=r"(lt) : "f"(x), "f"(y));
        f[1] = read_flags();
        clear_flags();
        __asm__ volatile("fle.d %0, %1, %2" : "=r"(le) : "f"(x), "f"(y));
        f[2] = read_flags();
        clear_flags();
        __asm__ volatile("fmin.d %0, %1, %2" : "=f"(mn) : "f"(x), "f"(y));
        f[3] = read_flags();
        clear_flags();
        __asm__ volatile("fmax.d %0, %1, %2" : "=f"(mx) : "f"(x), "f"(y));
        f[4] = read_flags();
        clear_flags();
        __asm__ volatile("fclass.d %0, %1" : "=r"(cl) : "f"(x));
        f[5] = read_flags();
        clear_flags();
        __asm__ volatile("fsgnjn.d %0, %1, %2" : "=f"(sj) : "f"(x), "f"(y));
        f[6] = read_flags();
        clear_flags();
        __asm__ volatile("fmv.x.d %0, %1" : "=r"(mv) : "f"(x));
        f[7] = read_flags();
        clear_flags();
        __asm__ volatile("feq.s %0, %1, %2" : "=r"(eqs) : "f"(xs), "f"(ys));
        f[8] = read_flags();
        clear_flags();
        __asm__ volatile("flt.s %0, %1, %2" : "=r"(lts) : "f"(xs), "f"(ys));
        f[9] = read_flags();
        clear_flags();
        __asm__ volatile("fle.s %0, %1, %2" : "=r"(les) : "f"(xs), "f"(ys));
        f[10] = read_flags();
        clear_flags();
        __asm__ volatile("fmin.s %0, %1, %2" : "=f"(mns) : "f"(xs), "f"(ys));
        f[11] = read_flags();
        __asm__ volatile("fmax.s %0, %1, %2" : "=f"(mxs) : "f"(xs), "f"(ys));
        printf("%-9s feq %ld/%x flt %ld/%x fle %ld/%x fmin %016llx/%x fmax %016llx/%x fclass "
               "%lx/%x fsgnjn %016llx/%x fmv %lx/%x | .s feq %ld/%x flt %ld/%x fle %ld/%x fmin "
               "%08x/%x fmax %08x\n",
               nr[i].name, eq, f[0], lt, f[1], le, f[2], (unsigned long long)db(mn), f[3],
               (unsigned long long)db(mx), f[4], cl, f[5], (unsigned long long)db(sj), f[6],
               (unsigned long)mv, f[7], eqs, f[8], lts, f[9], les, f[10], fb(mns), f[11], fb(mxs));
    }
}

// one instruction with a reserved rounding mode (or, dyn4, a legal one)
static int reserved(const char *what)
{
    double x = 1.0, y = 3.0, r = 0;
    long l = 0;
    printf("%s: ", what);
    fflush(stdout);
    if (strcmp(what, "rm5") == 0)
        __asm__ volatile(".insn r 0x53, 5, 0x01, %0, %1, %2" : "=f"(r) : "f"(x), "f"(y));
    else if (strcmp(what, "rm6") == 0)
        __asm__ volatile(".insn r 0x53, 6, 0x01, %0, %1, %2" : "=f"(r) : "f"(x), "f"(y));
    else if (strncmp(what, "dyn", 3) == 0 && what[3] >= '4' && what[3] <= '7' && !what[4]) {
        set_frm((unsigned)(what[3] - '0'));
        __asm__ volatile("fadd.d %0, %1, %2, dyn" : "=f"(r) : "f"(x), "f"(y));
        set_frm(0);
    } else if (strcmp(what, "cvt5") == 0)
        __asm__ volatile(".insn r 0x53, 5, 0x21, %0, %1, f0" : "=f"(r) : "f"((float)x));
    else if (strcmp(what, "fma6") == 0)
        __asm__ volatile(".insn r4 0x43, 6, 1, %0, %1, %2, %3" : "=f"(r) : "f"(x), "f"(y), "f"(x));
    else if (strcmp(what, "fcvtw5") == 0)
        __asm__ volatile(".insn r 0x53, 5, 0x61, %0, %1, x0" : "=r"(l) : "f"(y));
    else {
        printf("unknown\n");
        return 2;
    }
    printf("%016llx %ld\n", (unsigned long long)db(r), l);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "verbose") == 0)
        verbose = 1;
    else if (argc > 1)
        return reserved(argv[1]);
    chosen_cases();
    other_flags();
    random_cases(verbose ? 100 : RANDOM_CASES);
    return 0;
}
