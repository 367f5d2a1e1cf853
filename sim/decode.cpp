// sim/decode.cpp - RV64GC decoding (The RISC-V Instruction Set Manual,
// Volume I: RV64I, M, A, F, D, Zicsr, Zifencei and C; Zba and Zbb of the
// bit-manipulation extension, version 1.0.0), plus tksim's two
// custom-0 instructions for the TLB-miss handler.  Compressed instructions
// are expanded to the 32-bit instruction they stand for.
#include "rv64.hpp"

namespace tksim
{
namespace
{

int64_t sext(uint64_t v, int bits)
{
    return static_cast<int64_t>(v << (64 - bits)) >> (64 - bits);
}
uint32_t bits(uint32_t w, int hi, int lo)
{
    return (w >> lo) & ((1u << (hi - lo + 1)) - 1);
}

// integer register operand: x0 reads as zero and is not a dependency
uint8_t xr(uint32_t r)
{
    return r == 0 ? NOREG : static_cast<uint8_t>(r);
}
uint8_t fr(uint32_t r)
{
    return static_cast<uint8_t>(FREG + r);
}

Inst make(Op op, Class cls, uint8_t rd, uint8_t rs1, uint8_t rs2, int64_t imm)
{
    Inst i;
    i.op = op;
    i.cls = cls;
    i.rd = rd;
    i.rs1 = rs1;
    i.rs2 = rs2;
    i.imm = imm;
    return i;
}

Inst decode32(uint32_t w)
{
    uint32_t opc = w & 0x7f, rd = bits(w, 11, 7), f3 = bits(w, 14, 12), rs1 = bits(w, 19, 15),
             rs2 = bits(w, 24, 20), f7 = bits(w, 31, 25);
    int64_t imm_i = sext(w >> 20, 12);
    int64_t imm_s = sext((bits(w, 31, 25) << 5) | bits(w, 11, 7), 12);
    int64_t imm_b = sext((bits(w, 31, 31) << 12) | (bits(w, 7, 7) << 11) | (bits(w, 30, 25) << 5) |
                             (bits(w, 11, 8) << 1),
                         13);
    int64_t imm_u = sext(w & 0xfffff000u, 32);
    int64_t imm_j = sext((bits(w, 31, 31) << 20) | (bits(w, 19, 12) << 12) |
                             (bits(w, 20, 20) << 11) | (bits(w, 30, 21) << 1),
                         21);
    Inst i;
    switch (opc) {
    case 0x37:
        return make(LUI, C_INT, xr(rd), NOREG, NOREG, imm_u);
    case 0x17:
        return make(AUIPC, C_INT, xr(rd), NOREG, NOREG, imm_u);
    case 0x6f:
        return make(JAL, C_JUMP, xr(rd), NOREG, NOREG, imm_j);
    case 0x67:
        if (f3 != 0) break;
        return make(JALR, C_JUMP, xr(rd), xr(rs1), NOREG, imm_i);
    case 0x63: {
        static const Op ops[8] = {BEQ, BNE, ILLEGAL, ILLEGAL, BLT, BGE, BLTU, BGEU};
        if (ops[f3] == ILLEGAL) break;
        return make(ops[f3], C_BRANCH, NOREG, xr(rs1), xr(rs2), imm_b);
    }
    case 0x03: {
        static const Op ops[8] = {LB, LH, LW, LD, LBU, LHU, LWU, ILLEGAL};
        static const uint8_t sz[8] = {1, 2, 4, 8, 1, 2, 4, 0};
        if (ops[f3] == ILLEGAL) break;
        i = make(ops[f3], C_LOAD, xr(rd), xr(rs1), NOREG, imm_i);
        i.size = sz[f3];
        return i;
    }
    case 0x23: {
        static const Op ops[8] = {SB, SH, SW, SD, ILLEGAL, ILLEGAL, ILLEGAL, ILLEGAL};
        if (ops[f3] == ILLEGAL) break;
        i = make(ops[f3], C_STORE, NOREG, xr(rs1), xr(rs2), imm_s);
        i.size = static_cast<uint8_t>(1u << f3);
        return i;
    }
    case 0x13: {
        switch (f3) {
        case 0:
            return make(ADDI, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 2:
            return make(SLTI, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 3:
            return make(SLTIU, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 4:
            return make(XORI, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 6:
            return make(ORI, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 7:
            return make(ANDI, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 1:
            if (bits(w, 31, 26) == 0)
                return make(SLLI, C_INT, xr(rd), xr(rs1), NOREG, bits(w, 25, 20));
            if (f7 == 0x30) { // Zbb's unary operations, told apart by rs2
                static const Op ops[8] = {CLZ,    CTZ,    CPOP,    ILLEGAL,
                                          SEXT_B, SEXT_H, ILLEGAL, ILLEGAL};
                if (rs2 > 7 || ops[rs2] == ILLEGAL) break;
                return make(ops[rs2], C_INT, xr(rd), xr(rs1), NOREG, 0);
            }
            break;
        case 5:
            if (bits(w, 31, 26) == 0)
                return make(SRLI, C_INT, xr(rd), xr(rs1), NOREG, bits(w, 25, 20));
            if (bits(w, 31, 26) == 0x10)
                return make(SRAI, C_INT, xr(rd), xr(rs1), NOREG, bits(w, 25, 20));
            if (bits(w, 31, 26) == 0x18)
                return make(RORI, C_INT, xr(rd), xr(rs1), NOREG, bits(w, 25, 20));
            if (bits(w, 31, 20) == 0x287) return make(ORC_B, C_INT, xr(rd), xr(rs1), NOREG, 0);
            if (bits(w, 31, 20) == 0x6b8) return make(REV8, C_INT, xr(rd), xr(rs1), NOREG, 0);
            break;
        }
        break;
    }
    case 0x1b: {
        switch (f3) {
        case 0:
            return make(ADDIW, C_INT, xr(rd), xr(rs1), NOREG, imm_i);
        case 1:
            if (f7 == 0) return make(SLLIW, C_INT, xr(rd), xr(rs1), NOREG, rs2);
            if (bits(w, 31, 26) == 0x02)
                return make(SLLI_UW, C_INT, xr(rd), xr(rs1), NOREG, bits(w, 25, 20));
            if (f7 == 0x30 && rs2 <= 2) {
                static const Op ops[3] = {CLZW, CTZW, CPOPW};
                return make(ops[rs2], C_INT, xr(rd), xr(rs1), NOREG, 0);
            }
            break;
        case 5:
            if (f7 == 0) return make(SRLIW, C_INT, xr(rd), xr(rs1), NOREG, rs2);
            if (f7 == 0x20) return make(SRAIW, C_INT, xr(rd), xr(rs1), NOREG, rs2);
            if (f7 == 0x30) return make(RORIW, C_INT, xr(rd), xr(rs1), NOREG, rs2);
            break;
        }
        break;
    }
    case 0x33: {
        if (f7 == 0x01) {
            static const Op ops[8] = {MUL, MULH, MULHSU, MULHU, DIV, DIVU, REM, REMU};
            return make(ops[f3], f3 < 4 ? C_MUL : C_DIV, xr(rd), xr(rs1), xr(rs2), 0);
        }
        if (f7 == 0) {
            static const Op ops[8] = {ADD, SLL, SLT, SLTU, XOR, SRL, OR, AND};
            return make(ops[f3], C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        }
        Op op = ILLEGAL;
        switch (f7) {
        case 0x20: {
            static const Op ops[8] = {SUB, ILLEGAL, ILLEGAL, ILLEGAL, XNOR, SRA, ORN, ANDN};
            op = ops[f3];
            break;
        }
        case 0x10: { // Zba
            static const Op ops[8] = {ILLEGAL, ILLEGAL, SH1ADD, ILLEGAL,
                                      SH2ADD,  ILLEGAL, SH3ADD, ILLEGAL};
            op = ops[f3];
            break;
        }
        case 0x05: { // Zbb's min and max
            static const Op ops[8] = {ILLEGAL, ILLEGAL, ILLEGAL, ILLEGAL, MIN, MINU, MAX, MAXU};
            op = ops[f3];
            break;
        }
        case 0x30:
            op = f3 == 1 ? ROL : f3 == 5 ? ROR : ILLEGAL;
            break;
        }
        if (op == ILLEGAL) break;
        return make(op, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
    }
    case 0x3b: {
        if (f7 == 0x01) {
            static const Op ops[8] = {MULW, ILLEGAL, ILLEGAL, ILLEGAL, DIVW, DIVUW, REMW, REMUW};
            if (ops[f3] == ILLEGAL) break;
            return make(ops[f3], f3 == 0 ? C_MUL : C_DIV, xr(rd), xr(rs1), xr(rs2), 0);
        }
        if (f7 == 0 && f3 == 0) return make(ADDW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x20 && f3 == 0) return make(SUBW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0 && f3 == 1) return make(SLLW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0 && f3 == 5) return make(SRLW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x20 && f3 == 5) return make(SRAW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x04 && f3 == 0) return make(ADD_UW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x04 && f3 == 4 && rs2 == 0) // zext.h (the encoding of Zbkb's pack, rs2 = x0)
            return make(ZEXT_H, C_INT, xr(rd), xr(rs1), NOREG, 0);
        if (f7 == 0x10 && (f3 == 2 || f3 == 4 || f3 == 6))
            return make(f3 == 2   ? SH1ADD_UW
                        : f3 == 4 ? SH2ADD_UW
                                  : SH3ADD_UW,
                        C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x30 && f3 == 1) return make(ROLW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        if (f7 == 0x30 && f3 == 5) return make(RORW, C_INT, xr(rd), xr(rs1), xr(rs2), 0);
        break;
    }
    case 0x0f:
        if (f3 == 0) return make(FENCE, C_SYSTEM, NOREG, NOREG, NOREG, 0);
        if (f3 == 1) return make(FENCE_I, C_SYSTEM, NOREG, NOREG, NOREG, 0);
        break;
    case 0x73: {
        if (f3 == 0) {
            if (w == 0x00000073) return make(ECALL, C_SYSTEM, NOREG, NOREG, NOREG, 0);
            if (w == 0x00100073) return make(EBREAK, C_SYSTEM, NOREG, NOREG, NOREG, 0);
            break;
        }
        static const Op ops[8] = {ILLEGAL, CSRRW, CSRRS, CSRRC, ILLEGAL, CSRRWI, CSRRSI, CSRRCI};
        if (ops[f3] == ILLEGAL) break;
        i = make(ops[f3], C_SYSTEM, xr(rd), f3 < 4 ? xr(rs1) : NOREG, NOREG, w >> 20);
        i.rs3 = static_cast<uint8_t>(rs1); // the uimm of the *I forms
        return i;
    }
    case 0x2f: {
        uint32_t f5 = bits(w, 31, 27);
        bool d = f3 == 3;
        if (f3 != 2 && f3 != 3) break;
        Op op = ILLEGAL;
        switch (f5) {
        case 0x02:
            op = d ? LR_D : LR_W;
            break;
        case 0x03:
            op = d ? SC_D : SC_W;
            break;
        case 0x01:
            op = d ? AMOSWAP_D : AMOSWAP_W;
            break;
        case 0x00:
            op = d ? AMOADD_D : AMOADD_W;
            break;
        case 0x04:
            op = d ? AMOXOR_D : AMOXOR_W;
            break;
        case 0x0c:
            op = d ? AMOAND_D : AMOAND_W;
            break;
        case 0x08:
            op = d ? AMOOR_D : AMOOR_W;
            break;
        case 0x10:
            op = d ? AMOMIN_D : AMOMIN_W;
            break;
        case 0x14:
            op = d ? AMOMAX_D : AMOMAX_W;
            break;
        case 0x18:
            op = d ? AMOMINU_D : AMOMINU_W;
            break;
        case 0x1c:
            op = d ? AMOMAXU_D : AMOMAXU_W;
            break;
        }
        if (op == ILLEGAL) break;
        i = make(op, C_AMO, xr(rd), xr(rs1), (op == LR_W || op == LR_D) ? NOREG : xr(rs2), 0);
        i.size = d ? 8 : 4;
        return i;
    }
    case 0x07:
        if (f3 == 2 || f3 == 3) {
            i = make(f3 == 2 ? FLW : FLD, C_LOAD, fr(rd), xr(rs1), NOREG, imm_i);
            i.size = f3 == 2 ? 4 : 8;
            return i;
        }
        break;
    case 0x27:
        if (f3 == 2 || f3 == 3) {
            i = make(f3 == 2 ? FSW : FSD, C_STORE, NOREG, xr(rs1), fr(rs2), imm_s);
            i.size = f3 == 2 ? 4 : 8;
            return i;
        }
        break;
    case 0x43:
    case 0x47:
    case 0x4b:
    case 0x4f: {
        uint32_t fmt = bits(w, 26, 25);
        if (fmt > 1) break;
        static const Op s[4] = {FMADD_S, FMSUB_S, FNMSUB_S, FNMADD_S};
        static const Op dd[4] = {FMADD_D, FMSUB_D, FNMSUB_D, FNMADD_D};
        int k = (opc - 0x43) / 4;
        i = make(fmt ? dd[k] : s[k], C_FP, fr(rd), fr(rs1), fr(rs2), 0);
        i.rs3 = fr(bits(w, 31, 27));
        i.rm = static_cast<uint8_t>(f3);
        return i;
    }
    case 0x53: {
        bool d = (f7 & 1) != 0;
        uint32_t f5 = f7 >> 2;
        i.rm = static_cast<uint8_t>(f3);
        auto fp = [&](Op op, Class c, uint8_t dst, uint8_t a, uint8_t b) {
            Inst r = make(op, c, dst, a, b, 0);
            r.rm = static_cast<uint8_t>(f3);
            return r;
        };
        if ((f7 & 2) != 0) break; // fmt H or Q
        switch (f5) {
        case 0x00:
            return fp(d ? FADD_D : FADD_S, C_FP, fr(rd), fr(rs1), fr(rs2));
        case 0x01:
            return fp(d ? FSUB_D : FSUB_S, C_FP, fr(rd), fr(rs1), fr(rs2));
        case 0x02:
            return fp(d ? FMUL_D : FMUL_S, C_FP, fr(rd), fr(rs1), fr(rs2));
        case 0x03:
            return fp(d ? FDIV_D : FDIV_S, C_FDIV, fr(rd), fr(rs1), fr(rs2));
        case 0x0b:
            if (rs2 != 0) break;
            return fp(d ? FSQRT_D : FSQRT_S, C_FDIV, fr(rd), fr(rs1), NOREG);
        case 0x04: {
            static const Op s[3] = {FSGNJ_S, FSGNJN_S, FSGNJX_S};
            static const Op dd[3] = {FSGNJ_D, FSGNJN_D, FSGNJX_D};
            if (f3 > 2) break;
            return fp(d ? dd[f3] : s[f3], C_FP, fr(rd), fr(rs1), fr(rs2));
        }
        case 0x05:
            if (f3 > 1) break;
            return fp(d ? (f3 ? FMAX_D : FMIN_D) : (f3 ? FMAX_S : FMIN_S), C_FP, fr(rd), fr(rs1),
                      fr(rs2));
        case 0x08:
            if (!d && rs2 == 1) return fp(FCVT_S_D, C_FP, fr(rd), fr(rs1), NOREG);
            if (d && rs2 == 0) return fp(FCVT_D_S, C_FP, fr(rd), fr(rs1), NOREG);
            break;
        case 0x14: {
            static const Op s[3] = {FLE_S, FLT_S, FEQ_S};
            static const Op dd[3] = {FLE_D, FLT_D, FEQ_D};
            if (f3 > 2) break;
            return fp(d ? dd[f3] : s[f3], C_FP, xr(rd), fr(rs1), fr(rs2));
        }
        case 0x18: {
            static const Op s[4] = {FCVT_W_S, FCVT_WU_S, FCVT_L_S, FCVT_LU_S};
            static const Op dd[4] = {FCVT_W_D, FCVT_WU_D, FCVT_L_D, FCVT_LU_D};
            if (rs2 > 3) break;
            return fp(d ? dd[rs2] : s[rs2], C_FP, xr(rd), fr(rs1), NOREG);
        }
        case 0x1a: {
            static const Op s[4] = {FCVT_S_W, FCVT_S_WU, FCVT_S_L, FCVT_S_LU};
            static const Op dd[4] = {FCVT_D_W, FCVT_D_WU, FCVT_D_L, FCVT_D_LU};
            if (rs2 > 3) break;
            return fp(d ? dd[rs2] : s[rs2], C_FP, fr(rd), xr(rs1), NOREG);
        }
        case 0x1c:
            if (rs2 != 0) break;
            if (f3 == 0) return fp(d ? FMV_X_D : FMV_X_W, C_FP, xr(rd), fr(rs1), NOREG);
            if (f3 == 1) return fp(d ? FCLASS_D : FCLASS_S, C_FP, xr(rd), fr(rs1), NOREG);
            break;
        case 0x1e:
            if (rs2 != 0 || f3 != 0) break;
            return fp(d ? FMV_D_X : FMV_W_X, C_FP, fr(rd), xr(rs1), NOREG);
        }
        break;
    }
    case 0x0b: // custom-0: tksim's handler instructions
        // tlbwr: funct3 0, rs1 = virtual page number register, rs2 = PTE
        // register; eret: funct3 1.  Register fields 24-31 name k0-k7.
        if (f3 == 0) {
            auto kr = [](uint32_t r) {
                return r >= 24 ? static_cast<uint8_t>(KREG + r - 24) : xr(r);
            };
            return make(TK_TLBWR, C_TLB, NOREG, kr(rs1), kr(rs2), 0);
        }
        if (f3 == 1) return make(TK_ERET, C_TLB, NOREG, NOREG, NOREG, 0);
        break;
    }
    return Inst{};
}

// ---- compressed ----
uint32_t r3(uint32_t v)
{
    return 8 + v; // the registers x8-x15 of the 3-bit fields
}

Inst decode16(uint16_t h)
{
    uint32_t q = h & 3, f3 = bits(h, 15, 13);
    uint32_t rd = bits(h, 11, 7), rs2 = bits(h, 6, 2);
    uint32_t rdp = r3(bits(h, 4, 2)), rs1p = r3(bits(h, 9, 7));
    Inst i;
    auto ld = [&](Op op, Class c, uint8_t dst, uint8_t base, int64_t off, uint8_t sz) {
        Inst r = make(op, c, dst, base, NOREG, off);
        r.size = sz;
        return r;
    };
    auto st = [&](Op op, uint8_t base, uint8_t src, int64_t off, uint8_t sz) {
        Inst r = make(op, C_STORE, NOREG, base, src, off);
        r.size = sz;
        return r;
    };
    switch (q) {
    case 0: {
        uint32_t off_w = (bits(h, 5, 5) << 6) | (bits(h, 12, 10) << 3) | (bits(h, 6, 6) << 2);
        uint32_t off_d = (bits(h, 6, 5) << 6) | (bits(h, 12, 10) << 3);
        switch (f3) {
        case 0: { // c.addi4spn
            uint32_t nz = (bits(h, 10, 7) << 6) | (bits(h, 12, 11) << 4) | (bits(h, 5, 5) << 3) |
                          (bits(h, 6, 6) << 2);
            if (nz == 0) break;
            return make(ADDI, C_INT, xr(rdp), 2, NOREG, nz);
        }
        case 1:
            return ld(FLD, C_LOAD, fr(rdp), xr(rs1p), off_d, 8);
        case 2:
            return ld(LW, C_LOAD, xr(rdp), xr(rs1p), off_w, 4);
        case 3:
            return ld(LD, C_LOAD, xr(rdp), xr(rs1p), off_d, 8);
        case 5:
            return st(FSD, xr(rs1p), fr(rdp), off_d, 8);
        case 6:
            return st(SW, xr(rs1p), xr(rdp), off_w, 4);
        case 7:
            return st(SD, xr(rs1p), xr(rdp), off_d, 8);
        }
        break;
    }
    case 1: {
        int64_t imm6 = sext((bits(h, 12, 12) << 5) | bits(h, 6, 2), 6);
        switch (f3) {
        case 0: // c.addi (c.nop)
            return make(ADDI, C_INT, xr(rd), xr(rd), NOREG, imm6);
        case 1: // c.addiw
            if (rd == 0) break;
            return make(ADDIW, C_INT, xr(rd), xr(rd), NOREG, imm6);
        case 2: // c.li
            return make(ADDI, C_INT, xr(rd), NOREG, NOREG, imm6);
        case 3:
            if (rd == 2) { // c.addi16sp
                int64_t nz =
                    sext((bits(h, 12, 12) << 9) | (bits(h, 4, 3) << 7) | (bits(h, 5, 5) << 6) |
                             (bits(h, 2, 2) << 5) | (bits(h, 6, 6) << 4),
                         10);
                if (nz == 0) break;
                return make(ADDI, C_INT, 2, 2, NOREG, nz);
            }
            if (imm6 == 0) break;
            return make(LUI, C_INT, xr(rd), NOREG, NOREG,
                        static_cast<int64_t>(static_cast<uint64_t>(imm6) << 12));
        case 4: {
            uint32_t f2 = bits(h, 11, 10);
            uint32_t sh = (bits(h, 12, 12) << 5) | bits(h, 6, 2);
            if (f2 == 0) return make(SRLI, C_INT, xr(rs1p), xr(rs1p), NOREG, sh);
            if (f2 == 1) return make(SRAI, C_INT, xr(rs1p), xr(rs1p), NOREG, sh);
            if (f2 == 2) return make(ANDI, C_INT, xr(rs1p), xr(rs1p), NOREG, imm6);
            uint32_t f = (bits(h, 12, 12) << 2) | bits(h, 6, 5);
            static const Op ops[8] = {SUB, XOR, OR, AND, SUBW, ADDW, ILLEGAL, ILLEGAL};
            if (ops[f] == ILLEGAL) break;
            return make(ops[f], C_INT, xr(rs1p), xr(rs1p), xr(rdp), 0);
        }
        case 5: { // c.j
            int64_t off =
                sext((bits(h, 12, 12) << 11) | (bits(h, 8, 8) << 10) | (bits(h, 10, 9) << 8) |
                         (bits(h, 6, 6) << 7) | (bits(h, 7, 7) << 6) | (bits(h, 2, 2) << 5) |
                         (bits(h, 11, 11) << 4) | (bits(h, 5, 3) << 1),
                     12);
            return make(JAL, C_JUMP, NOREG, NOREG, NOREG, off);
        }
        case 6:
        case 7: { // c.beqz, c.bnez
            int64_t off =
                sext((bits(h, 12, 12) << 8) | (bits(h, 6, 5) << 6) | (bits(h, 2, 2) << 5) |
                         (bits(h, 11, 10) << 3) | (bits(h, 4, 3) << 1),
                     9);
            return make(f3 == 6 ? BEQ : BNE, C_BRANCH, NOREG, xr(rs1p), NOREG, off);
        }
        }
        break;
    }
    case 2: {
        switch (f3) {
        case 0: { // c.slli
            uint32_t sh = (bits(h, 12, 12) << 5) | bits(h, 6, 2);
            return make(SLLI, C_INT, xr(rd), xr(rd), NOREG, sh);
        }
        case 1: { // c.fldsp
            uint32_t off = (bits(h, 4, 2) << 6) | (bits(h, 12, 12) << 5) | (bits(h, 6, 5) << 3);
            return ld(FLD, C_LOAD, fr(rd), 2, off, 8);
        }
        case 2: { // c.lwsp
            if (rd == 0) break;
            uint32_t off = (bits(h, 3, 2) << 6) | (bits(h, 12, 12) << 5) | (bits(h, 6, 4) << 2);
            return ld(LW, C_LOAD, xr(rd), 2, off, 4);
        }
        case 3: { // c.ldsp
            if (rd == 0) break;
            uint32_t off = (bits(h, 4, 2) << 6) | (bits(h, 12, 12) << 5) | (bits(h, 6, 5) << 3);
            return ld(LD, C_LOAD, xr(rd), 2, off, 8);
        }
        case 4:
            if (bits(h, 12, 12) == 0) {
                if (rs2 == 0) { // c.jr
                    if (rd == 0) break;
                    return make(JALR, C_JUMP, NOREG, xr(rd), NOREG, 0);
                }
                return make(ADD, C_INT, xr(rd), NOREG, xr(rs2), 0); // c.mv
            }
            if (rs2 == 0) {
                if (rd == 0) return make(EBREAK, C_SYSTEM, NOREG, NOREG, NOREG, 0);
                return make(JALR, C_JUMP, 1, xr(rd), NOREG, 0); // c.jalr
            }
            return make(ADD, C_INT, xr(rd), xr(rd), xr(rs2), 0); // c.add
        case 5: {                                                // c.fsdsp
            uint32_t off = (bits(h, 9, 7) << 6) | (bits(h, 12, 10) << 3);
            return st(FSD, 2, fr(rs2), off, 8);
        }
        case 6: { // c.swsp
            uint32_t off = (bits(h, 8, 7) << 6) | (bits(h, 12, 9) << 2);
            return st(SW, 2, xr(rs2), off, 4);
        }
        case 7: { // c.sdsp
            uint32_t off = (bits(h, 9, 7) << 6) | (bits(h, 12, 10) << 3);
            return st(SD, 2, xr(rs2), off, 8);
        }
        }
        break;
    }
    }
    return Inst{};
}

} // namespace

Inst decode(uint32_t word)
{
    Inst i;
    if ((word & 3) != 3) {
        i = decode16(static_cast<uint16_t>(word));
        i.len = 2;
        i.raw = word & 0xffff;
    } else {
        i = decode32(word);
        i.len = 4;
        i.raw = word;
    }
    return i;
}

const char *op_name(Op op)
{
    static const char *const names[N_OPS] = {
        "illegal",   "lui",       "auipc",     "jal",       "jalr",      "beq",       "bne",
        "blt",       "bge",       "bltu",      "bgeu",      "lb",        "lh",        "lw",
        "ld",        "lbu",       "lhu",       "lwu",       "sb",        "sh",        "sw",
        "sd",        "addi",      "slti",      "sltiu",     "xori",      "ori",       "andi",
        "slli",      "srli",      "srai",      "add",       "sub",       "sll",       "slt",
        "sltu",      "xor",       "srl",       "sra",       "or",        "and",       "addiw",
        "slliw",     "srliw",     "sraiw",     "addw",      "subw",      "sllw",      "srlw",
        "sraw",      "fence",     "fence.i",   "ecall",     "ebreak",    "csrrw",     "csrrs",
        "csrrc",     "csrrwi",    "csrrsi",    "csrrci",    "mul",       "mulh",      "mulhsu",
        "mulhu",     "div",       "divu",      "rem",       "remu",      "mulw",      "divw",
        "divuw",     "remw",      "remuw",     "lr.w",      "sc.w",      "lr.d",      "sc.d",
        "amoswap.w", "amoadd.w",  "amoxor.w",  "amoand.w",  "amoor.w",   "amomin.w",  "amomax.w",
        "amominu.w", "amomaxu.w", "amoswap.d", "amoadd.d",  "amoxor.d",  "amoand.d",  "amoor.d",
        "amomin.d",  "amomax.d",  "amominu.d", "amomaxu.d", "flw",       "fsw",       "fld",
        "fsd",       "fmadd.s",   "fmsub.s",   "fnmsub.s",  "fnmadd.s",  "fmadd.d",   "fmsub.d",
        "fnmsub.d",  "fnmadd.d",  "fadd.s",    "fsub.s",    "fmul.s",    "fdiv.s",    "fsqrt.s",
        "fsgnj.s",   "fsgnjn.s",  "fsgnjx.s",  "fmin.s",    "fmax.s",    "fadd.d",    "fsub.d",
        "fmul.d",    "fdiv.d",    "fsqrt.d",   "fsgnj.d",   "fsgnjn.d",  "fsgnjx.d",  "fmin.d",
        "fmax.d",    "fcvt.s.d",  "fcvt.d.s",  "feq.s",     "flt.s",     "fle.s",     "feq.d",
        "flt.d",     "fle.d",     "fclass.s",  "fclass.d",  "fcvt.w.s",  "fcvt.wu.s", "fcvt.l.s",
        "fcvt.lu.s", "fcvt.s.w",  "fcvt.s.wu", "fcvt.s.l",  "fcvt.s.lu", "fcvt.w.d",  "fcvt.wu.d",
        "fcvt.l.d",  "fcvt.lu.d", "fcvt.d.w",  "fcvt.d.wu", "fcvt.d.l",  "fcvt.d.lu", "fmv.x.w",
        "fmv.w.x",   "fmv.x.d",   "fmv.d.x",   "sh1add",    "sh2add",    "sh3add",    "add.uw",
        "sh1add.uw", "sh2add.uw", "sh3add.uw", "slli.uw",   "andn",      "orn",       "xnor",
        "clz",       "ctz",       "cpop",      "clzw",      "ctzw",      "cpopw",     "max",
        "maxu",      "min",       "minu",      "sext.b",    "sext.h",    "zext.h",    "rol",
        "ror",       "rori",      "rolw",      "rorw",      "roriw",     "orc.b",     "rev8",
        "tk.tlbwr",  "tk.eret"};
    return op < N_OPS ? names[op] : "?";
}

} // namespace tksim
