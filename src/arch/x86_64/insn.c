/* src/arch/x86_64/insn.c - decoding and emulating the memory access of a
 * faulting x86-64 instruction (see insn.h for the subset).
 *
 * The flags an arithmetic instruction leaves are computed by running the
 * same instruction on registers (alu()), so they are exact by construction.
 * Locked and exchanging instructions run as atomics on the memory the
 * emulator is given, so they stay atomic against other threads.
 * [signal-safe] throughout: no library calls but memcpy/memset.
 */
#include "arch/x86_64/insn.h"

#include <signal.h>
#include <string.h>
#include <ucontext.h>

#include "arch/x86_64/xsave.h"

#define ARITH_FLAGS 0x8d5ull /* CF PF AF ZF SF OF */
#define EFLAGS_DF 0x400ull
#define STRING_CAP 65536 /* elements emulated per fault */

static const int greg_of[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP,
                                REG_RSI, REG_RDI, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                REG_R12, REG_R13, REG_R14, REG_R15};

static uint64_t size_mask(unsigned size)
{
    return size >= 8 ? ~0ull : (1ull << (8 * size)) - 1;
}

static uint64_t sext(uint64_t v, unsigned from)
{
    unsigned sh = 64 - 8 * from;
    return from >= 8 ? v : (uint64_t)((int64_t)(v << sh) >> sh);
}

static greg_t *gregs(void *uc)
{
    return ((ucontext_t *)uc)->uc_mcontext.gregs;
}

static uint64_t reg_get(void *uc, int r, bool high8, unsigned size)
{
    uint64_t v = (uint64_t)gregs(uc)[greg_of[r]];
    if (high8) return (v >> 8) & 0xff;
    return v & size_mask(size);
}

/* Writes a register as the CPU does: 32-bit results zero-extend, 8- and
 * 16-bit ones keep the rest. */
static void reg_set(void *uc, int r, bool high8, unsigned size, uint64_t v)
{
    greg_t *g = &gregs(uc)[greg_of[r]];
    uint64_t old = (uint64_t)*g;
    if (high8)
        old = (old & ~0xff00ull) | ((v & 0xff) << 8);
    else if (size == 4)
        old = v & 0xffffffffull;
    else if (size == 8)
        old = v;
    else
        old = (old & ~size_mask(size)) | (v & size_mask(size));
    *g = (greg_t)old;
}

static void set_flags(void *uc, uint64_t fl)
{
    greg_t *f = &gregs(uc)[REG_EFL];
    *f = (greg_t)(((uint64_t)*f & ~ARITH_FLAGS) | (fl & ARITH_FLAGS));
}

/* ---- arithmetic with the CPU's own flags ---------------------------------
 * The operation runs between POPFQ (the interrupted code's arithmetic
 * flags, for ADC and SBB) and PUSHFQ.  The stack pointer steps over the red
 * zone first, since the compiler may keep data there. */
#define ALU_ASM(INSN, A, B)                                                                        \
    __asm__ volatile("lea -128(%%rsp), %%rsp\n\tpush %[fl]\n\tpopfq\n\t" INSN                      \
                     " %[b], %[a]\n\tpushfq\n\tpop %[fl]\n\tlea 128(%%rsp), %%rsp"                 \
                     : [a] "+q"(A), [fl] "+r"(fl)                                                  \
                     : [b] "q"(B)                                                                  \
                     : "cc", "memory")
#define ALU_ASM1(INSN, A)                                                                          \
    __asm__ volatile("lea -128(%%rsp), %%rsp\n\tpush %[fl]\n\tpopfq\n\t" INSN                      \
                     " %[a]\n\tpushfq\n\tpop %[fl]\n\tlea 128(%%rsp), %%rsp"                       \
                     : [a] "+q"(A), [fl] "+r"(fl)                                                  \
                     :                                                                             \
                     : "cc", "memory")
#define ALU_SIZE(T, S)                                                                             \
    do {                                                                                           \
        T x = (T)a, y = (T)b;                                                                      \
        switch (op) {                                                                              \
        case 0:                                                                                    \
            ALU_ASM("add" S, x, y);                                                                \
            break;                                                                                 \
        case 1:                                                                                    \
            ALU_ASM("or" S, x, y);                                                                 \
            break;                                                                                 \
        case 2:                                                                                    \
            ALU_ASM("adc" S, x, y);                                                                \
            break;                                                                                 \
        case 3:                                                                                    \
            ALU_ASM("sbb" S, x, y);                                                                \
            break;                                                                                 \
        case 4:                                                                                    \
            ALU_ASM("and" S, x, y);                                                                \
            break;                                                                                 \
        case 5:                                                                                    \
            ALU_ASM("sub" S, x, y);                                                                \
            break;                                                                                 \
        case 6:                                                                                    \
            ALU_ASM("xor" S, x, y);                                                                \
            break;                                                                                 \
        case 7:                                                                                    \
            ALU_ASM("cmp" S, x, y);                                                                \
            break;                                                                                 \
        case 8:                                                                                    \
            ALU_ASM("test" S, x, y);                                                               \
            break;                                                                                 \
        case 9:                                                                                    \
            ALU_ASM1("inc" S, x);                                                                  \
            break;                                                                                 \
        case 10:                                                                                   \
            ALU_ASM1("dec" S, x);                                                                  \
            break;                                                                                 \
        case 11:                                                                                   \
            ALU_ASM1("neg" S, x);                                                                  \
            break;                                                                                 \
        case 12:                                                                                   \
            x = (T)~x;                                                                             \
            break;                                                                                 \
        }                                                                                          \
        a = (uint64_t)x;                                                                           \
    } while (0)

enum { OP_CMP = 7, OP_TEST = 8, OP_INC = 9, OP_DEC = 10, OP_NEG = 11, OP_NOT = 12 };

/* a op b at the given size; *flags in: the interrupted code's, out: after. */
static uint64_t alu(int op, unsigned size, uint64_t a, uint64_t b, uint64_t *flags)
{
    uint64_t fl = (*flags & ARITH_FLAGS) | 0x2;
    switch (size) {
    case 1:
        ALU_SIZE(uint8_t, "b");
        break;
    case 2:
        ALU_SIZE(uint16_t, "w");
        break;
    case 4:
        ALU_SIZE(uint32_t, "l");
        break;
    default:
        ALU_SIZE(uint64_t, "q");
        break;
    }
    if (op != OP_NOT) *flags = fl;
    return a & size_mask(size);
}

/* ---- decoding ------------------------------------------------------------ */
struct cursor {
    const uint8_t *p;
    unsigned i;
};

static uint8_t next8(struct cursor *c)
{
    return c->p[c->i++];
}

static uint64_t next_imm(struct cursor *c, unsigned bytes)
{
    uint64_t v = 0;
    memcpy(&v, c->p + c->i, bytes);
    c->i += bytes;
    return sext(v, bytes);
}

/* ModRM (+ SIB + displacement): the register field and the memory operand.
 * Returns false for a register operand (mod == 3): no memory access. */
static bool modrm(struct cursor *c, void *uc, uint8_t rex, int *reg, uintptr_t *ea, bool *riprel,
                  int64_t *disp_out)
{
    uint8_t m = next8(c);
    unsigned mod = m >> 6, rm = m & 7;
    *reg = (int)(((m >> 3) & 7) | ((rex & 4) << 1));
    if (mod == 3) return false;
    uint64_t base = 0, index = 0;
    unsigned scale = 1;
    int64_t disp = 0;
    *riprel = false;
    if (rm == 4) {
        uint8_t sib = next8(c);
        scale = 1u << (sib >> 6);
        int idx = (int)(((sib >> 3) & 7) | ((rex & 2) << 2));
        int b = (int)((sib & 7) | ((rex & 1) << 3));
        if (idx != 4) index = (uint64_t)gregs(uc)[greg_of[idx]];
        if ((sib & 7) == 5 && mod == 0)
            disp = (int64_t)next_imm(c, 4);
        else
            base = (uint64_t)gregs(uc)[greg_of[b]];
    } else if (rm == 5 && mod == 0) {
        *riprel = true;
        disp = (int64_t)next_imm(c, 4);
    } else {
        base = (uint64_t)gregs(uc)[greg_of[rm | ((rex & 1) << 3)]];
    }
    if (mod == 1) disp = (int64_t)next_imm(c, 1);
    if (mod == 2) disp = (int64_t)next_imm(c, 4);
    *ea = (uintptr_t)(base + index * scale + (uint64_t)disp);
    *disp_out = disp;
    return true;
}

bool tk__insn_decode(const void *ucv, struct tk_insn *d)
{
    void *uc = (void *)ucv;
    memset(d, 0, sizeof *d);
    d->reg = -1;
    struct cursor c = {(const uint8_t *)gregs(uc)[REG_RIP], 0};
    bool opsz = false;
    uint8_t rep = 0, b;
    for (;;) {
        b = c.p[c.i];
        if (b == 0x66)
            opsz = true;
        else if (b == 0xf2 || b == 0xf3)
            rep = b;
        else if (b == 0xf0)
            d->lock = 1;
        else if (b == 0x2e || b == 0x3e || b == 0x26 || b == 0x36)
            ; /* segment overrides without effect in 64-bit mode */
        else if (b == 0x64 || b == 0x65 || b == 0x67)
            return false; /* FS/GS-relative or 32-bit addressing */
        else
            break;
        if (++c.i > 4) return false;
    }
    uint8_t rex = 0;
    if ((c.p[c.i] & 0xf0) == 0x40) rex = next8(&c);
    d->rexw = (rex & 8) != 0;
    unsigned osize = d->rexw ? 8 : opsz ? 2 : 4;
    uint8_t opc = next8(&c);
    d->prefix = rep ? rep : opsz ? 0x66 : 0;
    int reg = -1;
    uintptr_t ea = 0;
    bool riprel = false, mem = true;
    int64_t disp = 0;
    unsigned imm_bytes = 0;

    if (opc == 0x0f) {
        d->twobyte = 1;
        opc = next8(&c);
        d->opcode = opc;
        switch (opc) {
        case 0xb6:
        case 0xb7:
        case 0xbe:
        case 0xbf: /* MOVZX, MOVSX */
            mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
            d->kind = TK_INSN_LOAD;
            d->size = (uint8_t)osize;
            d->memsize = (opc & 1) ? 2 : 1;
            d->sext = opc >= 0xbe;
            break;
        case 0xb0:
        case 0xb1:
        case 0xc0:
        case 0xc1: /* CMPXCHG, XADD */
            mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
            d->kind = TK_INSN_XCHG;
            d->size = (opc & 1) ? (uint8_t)osize : 1;
            break;
        case 0x10:
        case 0x11:
        case 0x28:
        case 0x29:
        case 0x2b:
        case 0x6f:
        case 0x7f:
        case 0x6e:
        case 0x7e:
        case 0xd6:
        case 0xe7:
            mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
            d->is_xmm = 1;
            d->size = 16;
            d->memsize = 16;
            switch (opc) {
            case 0x10:
            case 0x11: /* MOVUPS/MOVUPD/MOVSS/MOVSD */
                d->kind = opc == 0x10 ? TK_INSN_LOAD : TK_INSN_STORE;
                if (rep) {
                    d->memsize = rep == 0xf3 ? 4 : 8;
                    d->zext_xmm = opc == 0x10;
                }
                break;
            case 0x28:
            case 0x29:
            case 0x2b: /* MOVAPS/MOVAPD, MOVNTPS */
                if (rep) return false;
                d->kind = opc == 0x28 ? TK_INSN_LOAD : TK_INSN_STORE;
                break;
            case 0x6f:
            case 0x7f: /* MOVDQA (66), MOVDQU (F3) */
                if (d->prefix != 0x66 && d->prefix != 0xf3) return false;
                d->kind = opc == 0x6f ? TK_INSN_LOAD : TK_INSN_STORE;
                break;
            case 0x6e: /* MOVD/MOVQ xmm, r/m */
                if (d->prefix != 0x66) return false;
                d->kind = TK_INSN_LOAD;
                d->memsize = d->rexw ? 8 : 4;
                d->zext_xmm = 1;
                break;
            case 0x7e: /* 66: MOVD/MOVQ r/m, xmm; F3: MOVQ xmm, m64 */
                if (d->prefix == 0x66) {
                    d->kind = TK_INSN_STORE;
                    d->memsize = d->rexw ? 8 : 4;
                } else if (d->prefix == 0xf3) {
                    d->kind = TK_INSN_LOAD;
                    d->memsize = 8;
                    d->zext_xmm = 1;
                } else {
                    return false;
                }
                break;
            case 0xd6: /* MOVQ m64, xmm */
                if (d->prefix != 0x66) return false;
                d->kind = TK_INSN_STORE;
                d->memsize = 8;
                break;
            case 0xe7: /* MOVNTDQ */
                if (d->prefix != 0x66) return false;
                d->kind = TK_INSN_STORE;
                break;
            }
            break;
        default:
            return false;
        }
    } else {
        d->opcode = opc;
        if (opc < 0x40 && (opc & 7) < 4) { /* the ALU group, register/memory forms */
            mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
            d->op = (uint8_t)(opc >> 3);
            d->size = (opc & 1) ? (uint8_t)osize : 1;
            bool to_reg = (opc & 2) != 0;
            d->kind = (to_reg || d->op == OP_CMP) ? TK_INSN_READOP : TK_INSN_RMW;
        } else {
            switch (opc) {
            case 0x88:
            case 0x89:
            case 0x8a:
            case 0x8b: /* MOV */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                d->kind = (opc & 2) ? TK_INSN_LOAD : TK_INSN_STORE;
                break;
            case 0x63: /* MOVSXD */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                d->kind = TK_INSN_LOAD;
                d->size = (uint8_t)osize;
                d->memsize = osize == 2 ? 2 : 4;
                d->sext = d->rexw;
                break;
            case 0xc6:
            case 0xc7: /* MOV r/m, imm */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                if (reg & 7) return false;
                reg = -1;
                d->kind = TK_INSN_STORE;
                d->size = opc == 0xc6 ? 1 : (uint8_t)osize;
                imm_bytes = d->size == 1 ? 1 : d->size == 2 ? 2 : 4;
                break;
            case 0x80:
            case 0x81:
            case 0x83: /* ALU r/m, imm */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                d->op = (uint8_t)(reg & 7);
                reg = -1;
                d->size = opc == 0x80 ? 1 : (uint8_t)osize;
                imm_bytes = opc == 0x81 ? (d->size == 2 ? 2 : 4) : 1;
                d->kind = d->op == OP_CMP ? TK_INSN_READOP : TK_INSN_RMW;
                break;
            case 0x84:
            case 0x85: /* TEST r/m, reg */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                d->op = OP_TEST;
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                d->kind = TK_INSN_READOP;
                break;
            case 0x86:
            case 0x87: /* XCHG */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                d->kind = TK_INSN_XCHG;
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                break;
            case 0xf6:
            case 0xf7: { /* TEST imm, NOT, NEG */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                int sub = reg & 7;
                reg = -1;
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                if (sub == 0) {
                    d->op = OP_TEST;
                    d->kind = TK_INSN_READOP;
                    imm_bytes = d->size == 1 ? 1 : d->size == 2 ? 2 : 4;
                } else if (sub == 2 || sub == 3) {
                    d->op = sub == 2 ? OP_NOT : OP_NEG;
                    d->kind = TK_INSN_RMW;
                } else {
                    return false;
                }
                break;
            }
            case 0xfe:
            case 0xff: { /* INC, DEC */
                mem = modrm(&c, uc, rex, &reg, &ea, &riprel, &disp);
                int sub = reg & 7;
                reg = -1;
                if (sub > 1) return false;
                d->op = sub ? OP_DEC : OP_INC;
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                d->kind = TK_INSN_RMW;
                break;
            }
            case 0xa4:
            case 0xa5:
            case 0xaa:
            case 0xab:
            case 0xac:
            case 0xad:
                d->kind = TK_INSN_STRING;
                d->op = opc <= 0xa5 ? 0 : opc <= 0xab ? 1 : 2;
                d->size = (opc & 1) ? (uint8_t)osize : 1;
                d->rep = rep != 0;
                break;
            default:
                return false;
            }
        }
    }
    if (!mem) return false;
    if (imm_bytes) {
        d->has_imm = 1;
        d->imm = next_imm(&c, imm_bytes) & size_mask(d->size);
    }
    d->len = (uint8_t)c.i;
    if (c.i > 15) return false;
    if (riprel) ea = (uintptr_t)((uint64_t)gregs(uc)[REG_RIP] + c.i + (uint64_t)disp);
    d->ea = ea;
    if (reg >= 0) {
        d->reg = (int8_t)reg;
        /* without REX, byte registers 4-7 are AH CH DH BH */
        if (!d->is_xmm && d->size == 1 && !rex && reg >= 4 && reg < 8 &&
            !(d->kind == TK_INSN_LOAD && d->memsize)) {
            d->high8 = 1;
            d->reg = (int8_t)(reg - 4);
        }
    }
    if (d->kind == TK_INSN_STRING) d->ea = 0;
    return d->kind != TK_INSN_UNKNOWN;
}

/* ---- what it touches ----------------------------------------------------- */
static unsigned mem_bytes(const struct tk_insn *d)
{
    if (d->is_xmm || (d->kind == TK_INSN_LOAD && d->memsize)) return d->memsize;
    return d->size;
}

int tk__insn_accesses(const struct tk_insn *d, const void *ucv, struct tk_insn_access out[2])
{
    void *uc = (void *)ucv;
    if (d->kind == TK_INSN_STRING) {
        if (d->rep && gregs(uc)[REG_RCX] == 0) return 0;
        uintptr_t rsi = (uintptr_t)gregs(uc)[REG_RSI], rdi = (uintptr_t)gregs(uc)[REG_RDI];
        int n = 0;
        if (d->op == 0 || d->op == 2) out[n++] = (struct tk_insn_access){rsi, d->size, false};
        if (d->op == 0 || d->op == 1) out[n++] = (struct tk_insn_access){rdi, d->size, true};
        return n;
    }
    bool write = d->kind == TK_INSN_STORE || d->kind == TK_INSN_RMW || d->kind == TK_INSN_XCHG;
    out[0] = (struct tk_insn_access){d->ea, mem_bytes(d), write};
    return 1;
}

/* ---- emulation ----------------------------------------------------------- */
static uint64_t load_n(const void *p, unsigned n)
{
    uint64_t v = 0;
    memcpy(&v, p, n);
    return v;
}

static void store_n(void *p, uint64_t v, unsigned n)
{
    memcpy(p, &v, n);
}

static unsigned char *xmm_of(void *uc, int r)
{
    ucontext_t *u = uc;
    return (unsigned char *)&u->uc_mcontext.fpregs->_xmm[r];
}

/* A changed XMM register must be marked in use, or restoring the frame
 * would reset it. */
static void xmm_touched(void *uc)
{
    unsigned char *fx = (unsigned char *)((ucontext_t *)uc)->uc_mcontext.fpregs;
    if (tk__xsave_features(fx)) {
        uint64_t bv = tk__xsave_bv(fx) | 2;
        memcpy(fx + 512, &bv, sizeof bv);
    }
}

/* Atomic read-modify-write of 1-8 aligned bytes: returns the old value. */
#define ATOMIC_SWITCH(P, N, EXPR_FN)                                                               \
    switch (N) {                                                                                   \
    case 1:                                                                                        \
        return EXPR_FN((uint8_t *)(P), (uint8_t));                                                 \
    case 2:                                                                                        \
        return EXPR_FN((uint16_t *)(P), (uint16_t));                                               \
    case 4:                                                                                        \
        return EXPR_FN((uint32_t *)(P), (uint32_t));                                               \
    default:                                                                                       \
        return EXPR_FN((uint64_t *)(P), (uint64_t));                                               \
    }

static uint64_t atomic_rmw(void *p, unsigned n, int op, uint64_t v)
{
#define ADD(P, T) __atomic_fetch_add(P, T v, __ATOMIC_SEQ_CST)
#define SUB(P, T) __atomic_fetch_sub(P, T v, __ATOMIC_SEQ_CST)
#define AND(P, T) __atomic_fetch_and(P, T v, __ATOMIC_SEQ_CST)
#define OR(P, T) __atomic_fetch_or(P, T v, __ATOMIC_SEQ_CST)
#define XOR(P, T) __atomic_fetch_xor(P, T v, __ATOMIC_SEQ_CST)
#define XCHG(P, T) __atomic_exchange_n(P, T v, __ATOMIC_SEQ_CST)
    switch (op) {
    case 0:
        ATOMIC_SWITCH(p, n, ADD);
    case 1:
        ATOMIC_SWITCH(p, n, OR);
    case 4:
        ATOMIC_SWITCH(p, n, AND);
    case 5:
        ATOMIC_SWITCH(p, n, SUB);
    case 6:
        ATOMIC_SWITCH(p, n, XOR);
    default:
        ATOMIC_SWITCH(p, n, XCHG);
    }
#undef ADD
#undef SUB
#undef AND
#undef OR
#undef XOR
#undef XCHG
}

/* Compare-and-swap of n aligned bytes; *expected gets the value found. */
static bool atomic_cas(void *p, unsigned n, uint64_t *expected, uint64_t desired)
{
    switch (n) {
    case 1: {
        uint8_t e = (uint8_t)*expected;
        bool ok = __atomic_compare_exchange_n((uint8_t *)p, &e, (uint8_t)desired, false,
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        *expected = e;
        return ok;
    }
    case 2: {
        uint16_t e = (uint16_t)*expected;
        bool ok = __atomic_compare_exchange_n((uint16_t *)p, &e, (uint16_t)desired, false,
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        *expected = e;
        return ok;
    }
    case 4: {
        uint32_t e = (uint32_t)*expected;
        bool ok = __atomic_compare_exchange_n((uint32_t *)p, &e, (uint32_t)desired, false,
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        *expected = e;
        return ok;
    }
    default:
        return __atomic_compare_exchange_n((uint64_t *)p, expected, desired, false,
                                           __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
}

static uint64_t src_value(const struct tk_insn *d, void *uc)
{
    if (d->has_imm) return d->imm;
    if (d->op == OP_INC || d->op == OP_DEC || d->op == OP_NEG || d->op == OP_NOT) return 0;
    return reg_get(uc, d->reg, d->high8, d->size);
}

static bool emulate_string(const struct tk_insn *d, void *uc, const struct tk_emu_ops *ops)
{
    greg_t *g = gregs(uc);
    unsigned n = d->size;
    int64_t step = ((uint64_t)g[REG_EFL] & EFLAGS_DF) ? -(int64_t)n : (int64_t)n;
    uint64_t count = d->rep ? (uint64_t)g[REG_RCX] : 1;
    uint64_t done = 0;
    while (count > 0 && done < STRING_CAP) {
        struct tk_insn_access acc[2];
        int na = tk__insn_accesses(d, uc, acc);
        if (done > 0)
            for (int k = 0; k < na; k++)
                if (!ops->allowed(acc[k].addr, acc[k].len, acc[k].write, ops->ctx)) goto stop;
        uint64_t v;
        if (d->op == 1) {
            v = reg_get(uc, 0, false, n);
        } else {
            const void *s = ops->map((uintptr_t)g[REG_RSI], n, false, ops->ctx);
            if (!s) goto stop;
            v = load_n(s, n);
        }
        if (d->op == 2) {
            reg_set(uc, 0, false, n, v);
        } else {
            void *t = ops->map((uintptr_t)g[REG_RDI], n, true, ops->ctx);
            if (!t) goto stop;
            store_n(t, v, n);
        }
        if (d->op != 1) g[REG_RSI] = (greg_t)((uint64_t)g[REG_RSI] + (uint64_t)step);
        if (d->op != 2) g[REG_RDI] = (greg_t)((uint64_t)g[REG_RDI] + (uint64_t)step);
        count--;
        done++;
    }
stop:
    if (done == 0) return false;
    if (d->rep) g[REG_RCX] = (greg_t)count;
    if (count == 0 || !d->rep) g[REG_RIP] += d->len;
    return true;
}

bool tk__insn_emulate(const struct tk_insn *d, void *uc, const struct tk_emu_ops *ops)
{
    if (d->kind == TK_INSN_STRING) return emulate_string(d, uc, ops);
    greg_t *g = gregs(uc);
    unsigned n = mem_bytes(d);
    bool write = d->kind == TK_INSN_STORE || d->kind == TK_INSN_RMW || d->kind == TK_INSN_XCHG;
    void *p = ops->map(d->ea, n, write, ops->ctx);
    if (!p) return false;
    bool aligned = ((uintptr_t)p & (n - 1)) == 0;
    uint64_t flags = (uint64_t)g[REG_EFL];

    if (d->is_xmm) {
        if (d->memsize == 16 && !aligned &&
            (d->opcode == 0x28 || d->opcode == 0x29 || d->opcode == 0x2b || d->opcode == 0xe7 ||
             ((d->opcode == 0x6f || d->opcode == 0x7f) && d->prefix == 0x66)))
            return false; /* the CPU would raise #GP */
        unsigned char *x = xmm_of(uc, d->reg);
        if (d->kind == TK_INSN_LOAD) {
            unsigned char buf[16];
            memcpy(buf, p, d->memsize);
            if (d->zext_xmm) memset(x, 0, 16);
            memcpy(x, buf, d->memsize);
            xmm_touched(uc);
        } else {
            memcpy(p, x, d->memsize);
        }
        g[REG_RIP] += d->len;
        return true;
    }

    switch (d->kind) {
    case TK_INSN_STORE: {
        uint64_t v = d->has_imm ? d->imm : reg_get(uc, d->reg, d->high8, d->size);
        store_n(p, v, n);
        break;
    }
    case TK_INSN_LOAD: {
        uint64_t v = load_n(p, n);
        if (d->memsize && d->sext) v = sext(v, n);
        reg_set(uc, d->reg, d->high8, d->size, v);
        break;
    }
    case TK_INSN_READOP: {
        uint64_t m = load_n(p, n), r = src_value(d, uc);
        bool to_reg = !d->has_imm && d->op < 8 && (d->opcode & 2) && d->opcode < 0x40;
        uint64_t res = to_reg ? alu(d->op, n, r, m, &flags) : alu(d->op, n, m, r, &flags);
        if (to_reg && d->op != OP_CMP) reg_set(uc, d->reg, d->high8, n, res);
        set_flags(uc, flags);
        break;
    }
    case TK_INSN_RMW: {
        uint64_t src = src_value(d, uc);
        if (d->lock) {
            if (!aligned || n > 8) return false;
            uint64_t old;
            if (d->op == 0 || d->op == 1 || d->op == 4 || d->op == 5 || d->op == 6) {
                old = atomic_rmw(p, n, d->op, src);
                (void)alu(d->op, n, old, src, &flags);
            } else if (d->op == OP_INC || d->op == OP_DEC) {
                old = atomic_rmw(p, n, d->op == OP_INC ? 0 : 5, 1);
                (void)alu(d->op, n, old, 0, &flags);
            } else if (d->op == OP_NOT) {
                (void)atomic_rmw(p, n, 6, size_mask(n));
            } else { /* NEG, ADC, SBB: compare-and-swap loop */
                old = load_n(p, n);
                uint64_t f2, res;
                do {
                    f2 = flags;
                    res = alu(d->op, n, old, src, &f2);
                } while (!atomic_cas(p, n, &old, res));
                flags = f2;
            }
        } else {
            uint64_t res = alu(d->op, n, load_n(p, n), src, &flags);
            store_n(p, res, n);
        }
        set_flags(uc, flags);
        break;
    }
    case TK_INSN_XCHG: {
        if (!aligned || n > 8) return false;
        uint64_t r = reg_get(uc, d->reg, d->high8, n);
        if (d->twobyte && (d->opcode == 0xb0 || d->opcode == 0xb1)) { /* CMPXCHG */
            uint64_t acc = reg_get(uc, 0, false, n), found = acc;
            bool ok = atomic_cas(p, n, &found, r);
            (void)alu(OP_CMP, n, acc, found, &flags);
            if (!ok) reg_set(uc, 0, false, n, found);
            set_flags(uc, flags);
        } else if (d->twobyte) { /* XADD */
            uint64_t old = atomic_rmw(p, n, 0, r);
            (void)alu(0, n, old, r, &flags);
            reg_set(uc, d->reg, d->high8, n, old);
            set_flags(uc, flags);
        } else { /* XCHG */
            uint64_t old = atomic_rmw(p, n, 7, r);
            reg_set(uc, d->reg, d->high8, n, old);
        }
        break;
    }
    default:
        return false;
    }
    g[REG_RIP] += d->len;
    return true;
}
