/* Zba and Zbb (RISC-V bit manipulation 1.0.0): every instruction of both,
 * the immediate forms at several shift amounts, on edge values and on
 * pseudo-random ones; a checksum per instruction and a few of its values
 * are printed, and the output must equal qemu-riscv64's.
 *
 * Except for one case: qemu-riscv64 7.2 counts ctzw's zeros in the whole
 * register when the low word is zero (0x12345600000000 gives 33; the ISA
 * says 32, the width of the word), so ctzw's inputs here have their high
 * word cleared where the low one is zero, and `zbb ctzw-high` checks that
 * case alone against the ISA's definition (exit 0 if right, 1 if not).
 *
 * Build: riscv64-linux-gnu-gcc -O2 -march=rv64gc_zba_zbb -static -o zbb zbb.c */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* f_NAME(a, b): the instruction on a (and b) */
#define R(name, insn)                                                                              \
    static uint64_t f_##name(uint64_t a, uint64_t b)                                               \
    {                                                                                              \
        uint64_t r;                                                                                \
        __asm__ volatile(insn " %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));                           \
        return r;                                                                                  \
    }
#define U(name, insn)                                                                              \
    static uint64_t f_##name(uint64_t a, uint64_t b)                                               \
    {                                                                                              \
        uint64_t r;                                                                                \
        (void)b;                                                                                   \
        __asm__ volatile(insn " %0, %1" : "=r"(r) : "r"(a));                                       \
        return r;                                                                                  \
    }
#define I(name, insn, sh)                                                                          \
    static uint64_t f_##name(uint64_t a, uint64_t b)                                               \
    {                                                                                              \
        uint64_t r;                                                                                \
        (void)b;                                                                                   \
        __asm__ volatile(insn " %0, %1, " #sh : "=r"(r) : "r"(a));                                 \
        return r;                                                                                  \
    }

/* Zba */
R(sh1add, "sh1add")
R(sh2add, "sh2add")
R(sh3add, "sh3add")
R(add_uw, "add.uw")
R(sh1add_uw, "sh1add.uw")
R(sh2add_uw, "sh2add.uw")
R(sh3add_uw, "sh3add.uw")
I(slli_uw_0, "slli.uw", 0)
I(slli_uw_1, "slli.uw", 1)
I(slli_uw_31, "slli.uw", 31)
I(slli_uw_32, "slli.uw", 32)
I(slli_uw_63, "slli.uw", 63)
/* Zbb */
R(andn, "andn")
R(orn, "orn")
R(xnor, "xnor")
U(clz, "clz")
U(ctz, "ctz")
U(cpop, "cpop")
U(clzw, "clzw")
U(ctzw, "ctzw")
U(cpopw, "cpopw")
R(max, "max")
R(maxu, "maxu")
R(min, "min")
R(minu, "minu")
U(sext_b, "sext.b")
U(sext_h, "sext.h")
U(zext_h, "zext.h")
R(rol, "rol")
R(ror, "ror")
R(rolw, "rolw")
R(rorw, "rorw")
I(rori_0, "rori", 0)
I(rori_1, "rori", 1)
I(rori_31, "rori", 31)
I(rori_32, "rori", 32)
I(rori_63, "rori", 63)
I(roriw_0, "roriw", 0)
I(roriw_1, "roriw", 1)
I(roriw_17, "roriw", 17)
I(roriw_31, "roriw", 31)
U(orc_b, "orc.b")
U(rev8, "rev8")

#define OP(name)                                                                                   \
    {                                                                                              \
#name, f_##name                                                                            \
    }
static const struct {
    const char *name;
    uint64_t (*fn)(uint64_t, uint64_t);
} ops[] = {
    OP(sh1add),    OP(sh2add),    OP(sh3add),    OP(add_uw),     OP(sh1add_uw),  OP(sh2add_uw),
    OP(sh3add_uw), OP(slli_uw_0), OP(slli_uw_1), OP(slli_uw_31), OP(slli_uw_32), OP(slli_uw_63),
    OP(andn),      OP(orn),       OP(xnor),      OP(clz),        OP(ctz),        OP(cpop),
    OP(clzw),      OP(ctzw),      OP(cpopw),     OP(max),        OP(maxu),       OP(min),
    OP(minu),      OP(sext_b),    OP(sext_h),    OP(zext_h),     OP(rol),        OP(ror),
    OP(rolw),      OP(rorw),      OP(rori_0),    OP(rori_1),     OP(rori_31),    OP(rori_32),
    OP(rori_63),   OP(roriw_0),   OP(roriw_1),   OP(roriw_17),   OP(roriw_31),   OP(orc_b),
    OP(rev8),
};

static const uint64_t edges[] = {
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fffffff,
    0x80000000,
    0xffffffff,
    0x100000000,
    0x7fffffffffffffff,
    0x8000000000000000,
    0xffffffffffffffff,
    0xfffffffffffffffe,
    0x0000000100000001,
    0x00ff00ff00ff00ff,
    0x0123456789abcdef,
    63,
    64,
    31,
    32,
    33,
};
#define N_EDGES (sizeof edges / sizeof edges[0])

static uint64_t state = 0x243f6a8885a308d3ull;
static uint64_t next(void) /* xorshift64, with a random number of set bits */
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    uint64_t v = state;
    switch (state >> 61) {
    case 0:
        return v & (v >> 17) & (v >> 33); /* sparse */
    case 1:
        return v | (v << 9); /* dense */
    case 2:
        return (uint64_t)(int64_t)(int32_t)v; /* a sign-extended word */
    case 3:
        return v & 0xffffffff;
    case 4:
        return v & 63; /* a shift amount */
    default:
        return v;
    }
}

/* ctzw's input as qemu 7.2 counts it right (see the top) */
static uint64_t ctzw_safe(uint64_t (*fn)(uint64_t, uint64_t), uint64_t a)
{
    return fn == f_ctzw && (uint32_t)a == 0 ? 0 : a;
}

static int ctzw_high(void)
{
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        uint64_t a = next() << 32 | 1ull << 63; /* the low word zero, the high one not */
        uint64_t r = f_ctzw(a, 0);
        if (r != 32 && bad++ < 5)
            printf("ctzw(%llx) = %llu, not 32\n", (unsigned long long)a, (unsigned long long)r);
    }
    printf("ctzw of words with a zero low half: %s\n", bad ? "wrong" : "32, as the ISA says");
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "ctzw-high") == 0) return ctzw_high();
    uint64_t all = 0;
    for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        uint64_t sum = 0;
        for (unsigned i = 0; i < N_EDGES; i++)
            for (unsigned j = 0; j < N_EDGES; j++)
                sum =
                    (sum ^ ops[k].fn(ctzw_safe(ops[k].fn, edges[i]), edges[j])) * 0x100000001b3ull;
        for (int i = 0; i < 1000; i++) {
            uint64_t a = ctzw_safe(ops[k].fn, next()), b = next();
            sum = (sum ^ ops[k].fn(a, b)) * 0x100000001b3ull;
        }
        printf("%-10s %016llx  f(%llx, 5) = %llx, f(-3, 0x8000000040) = %llx\n", ops[k].name,
               (unsigned long long)sum, (unsigned long long)edges[19],
               (unsigned long long)ops[k].fn(edges[19], 5),
               (unsigned long long)ops[k].fn((uint64_t)-3, 0x8000000040ull));
        all = (all ^ sum) * 0x100000001b3ull;
    }
    /* and what the compiler makes of C with Zba and Zbb */
    uint64_t c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t a = next(), b = next();
        c += (uint64_t)__builtin_popcountll(a) + (uint64_t)__builtin_clzll(a | 1) +
             (uint64_t)__builtin_ctzll(b | 1ull << 63) + ((a << 7) | (a >> 57)) + (a & ~b) +
             (uint64_t)(uint32_t)b * 8 + (a > b ? a : b) + __builtin_bswap64(a);
    }
    printf("compiled %016llx\nall %016llx\n", (unsigned long long)c, (unsigned long long)all);
    return 0;
}
