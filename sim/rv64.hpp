// sim/rv64.hpp - RV64GC and Zba/Zbb instructions as tksim decodes them:
// every instruction (compressed ones expanded) becomes one Inst with an
// operation, register numbers, an immediate and its class for the timing
// model (Zba and Zbb are all C_INT: one-cycle integer ALU operations).
#ifndef TKSIM_RV64_HPP
#define TKSIM_RV64_HPP

#include <cstdint>

namespace tksim
{

enum Op : uint16_t {
    ILLEGAL,
    // RV64I
    LUI,
    AUIPC,
    JAL,
    JALR,
    BEQ,
    BNE,
    BLT,
    BGE,
    BLTU,
    BGEU,
    LB,
    LH,
    LW,
    LD,
    LBU,
    LHU,
    LWU,
    SB,
    SH,
    SW,
    SD,
    ADDI,
    SLTI,
    SLTIU,
    XORI,
    ORI,
    ANDI,
    SLLI,
    SRLI,
    SRAI,
    ADD,
    SUB,
    SLL,
    SLT,
    SLTU,
    XOR,
    SRL,
    SRA,
    OR,
    AND,
    ADDIW,
    SLLIW,
    SRLIW,
    SRAIW,
    ADDW,
    SUBW,
    SLLW,
    SRLW,
    SRAW,
    FENCE,
    FENCE_I,
    ECALL,
    EBREAK,
    CSRRW,
    CSRRS,
    CSRRC,
    CSRRWI,
    CSRRSI,
    CSRRCI,
    // M
    MUL,
    MULH,
    MULHSU,
    MULHU,
    DIV,
    DIVU,
    REM,
    REMU,
    MULW,
    DIVW,
    DIVUW,
    REMW,
    REMUW,
    // A
    LR_W,
    SC_W,
    LR_D,
    SC_D,
    AMOSWAP_W,
    AMOADD_W,
    AMOXOR_W,
    AMOAND_W,
    AMOOR_W,
    AMOMIN_W,
    AMOMAX_W,
    AMOMINU_W,
    AMOMAXU_W,
    AMOSWAP_D,
    AMOADD_D,
    AMOXOR_D,
    AMOAND_D,
    AMOOR_D,
    AMOMIN_D,
    AMOMAX_D,
    AMOMINU_D,
    AMOMAXU_D,
    // F and D
    FLW,
    FSW,
    FLD,
    FSD,
    FMADD_S,
    FMSUB_S,
    FNMSUB_S,
    FNMADD_S,
    FMADD_D,
    FMSUB_D,
    FNMSUB_D,
    FNMADD_D,
    FADD_S,
    FSUB_S,
    FMUL_S,
    FDIV_S,
    FSQRT_S,
    FSGNJ_S,
    FSGNJN_S,
    FSGNJX_S,
    FMIN_S,
    FMAX_S,
    FADD_D,
    FSUB_D,
    FMUL_D,
    FDIV_D,
    FSQRT_D,
    FSGNJ_D,
    FSGNJN_D,
    FSGNJX_D,
    FMIN_D,
    FMAX_D,
    FCVT_S_D,
    FCVT_D_S,
    FEQ_S,
    FLT_S,
    FLE_S,
    FEQ_D,
    FLT_D,
    FLE_D,
    FCLASS_S,
    FCLASS_D,
    FCVT_W_S,
    FCVT_WU_S,
    FCVT_L_S,
    FCVT_LU_S,
    FCVT_S_W,
    FCVT_S_WU,
    FCVT_S_L,
    FCVT_S_LU,
    FCVT_W_D,
    FCVT_WU_D,
    FCVT_L_D,
    FCVT_LU_D,
    FCVT_D_W,
    FCVT_D_WU,
    FCVT_D_L,
    FCVT_D_LU,
    FMV_X_W,
    FMV_W_X,
    FMV_X_D,
    FMV_D_X,
    // Zba
    SH1ADD,
    SH2ADD,
    SH3ADD,
    ADD_UW,
    SH1ADD_UW,
    SH2ADD_UW,
    SH3ADD_UW,
    SLLI_UW,
    // Zbb
    ANDN,
    ORN,
    XNOR,
    CLZ,
    CTZ,
    CPOP,
    CLZW,
    CTZW,
    CPOPW,
    MAX,
    MAXU,
    MIN,
    MINU,
    SEXT_B,
    SEXT_H,
    ZEXT_H,
    ROL,
    ROR,
    RORI,
    ROLW,
    RORW,
    RORIW,
    ORC_B,
    REV8,
    // tksim's privileged instructions, for the TLB-miss handler (custom-0)
    TK_TLBWR, // write the TLB entry: rs1 = virtual page, rs2 = PTE
    TK_ERET,  // return from the handler
    N_OPS
};

// What the timing model needs to know of an operation.
enum Class : uint8_t {
    C_INT,    // one-cycle integer (RV64I's ALU operations, Zba, Zbb)
    C_MUL,    // integer multiply
    C_DIV,    // integer divide
    C_BRANCH, // conditional branch
    C_JUMP,   // jal, jalr
    C_LOAD,
    C_STORE,
    C_AMO,    // lr, sc, amo*: a load and a store
    C_FP,     // floating-point add/mul/convert/compare
    C_FDIV,   // floating-point divide and square root
    C_SYSTEM, // ecall, csr, fence: serialising
    C_TLB,    // tksim's handler instructions
};

// Register numbers: 0-31 the integer registers, 32-63 the floating-point
// ones, 64-71 the handler's reserved registers (k0-k7), NOREG none.
constexpr uint8_t FREG = 32, KREG = 64, NOREG = 0xff;

struct Inst {
    Op op = ILLEGAL;
    Class cls = C_INT;
    uint8_t rd = NOREG, rs1 = NOREG, rs2 = NOREG, rs3 = NOREG;
    uint8_t len = 4;  // bytes: 2 for a compressed instruction
    uint8_t rm = 0;   // floating-point rounding mode field
    uint8_t size = 0; // memory access size in bytes
    uint32_t raw = 0;
    int64_t imm = 0;
    // What the timing model works out once for an instruction, kept with
    // the functional machine's decoded copy (Core::set_kind_program):
    // none while its first two bytes are 0 (no instruction's op is
    // ILLEGAL there); a decoding makes a new copy without it.
    alignas(8) mutable unsigned char note[32] = {};
};
static_assert(sizeof(Inst) == 56, "a decoded instruction and its tag fill a cache line");

// Decodes the instruction whose first 16 bits are lo (and next 16 hi).
Inst decode(uint32_t word);

const char *op_name(Op op);

} // namespace tksim

#endif
