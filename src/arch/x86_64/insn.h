/* src/arch/x86_64/insn.h - decoding and emulating the memory access of a
 * faulting instruction, for sub-page protection (vm/subpage.c).
 *
 * The subset is what compilers emit for loads and stores of scalars and
 * SSE vectors, read-modify-write arithmetic, the x86 atomics and the
 * string instructions: MOV (88-8B, C6, C7), MOVZX/MOVSX/MOVSXD, the ALU
 * group (ADD OR ADC SBB AND SUB XOR CMP, 00-3B and 80/81/83), TEST (84/85,
 * F6/F7 /0), INC/DEC (FE/FF /0 /1), NOT/NEG (F6/F7 /2 /3), XCHG (86/87),
 * CMPXCHG, XADD, LOCK forms of these, MOVS/STOS/LODS with or without REP,
 * and the SSE moves MOVUPS/MOVAPS/MOVUPD/MOVAPD/MOVDQU/MOVDQA/MOVSS/MOVSD/
 * MOVD/MOVQ.  Anything else (VEX/EVEX encodings, FS/GS-relative or 32-bit
 * addressing, x87, control transfers through memory) is not decoded and
 * the caller falls back to single-stepping.  [signal-safe] throughout.
 */
#ifndef TK_ARCH_X86_64_INSN_H
#define TK_ARCH_X86_64_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tk_insn_kind {
    TK_INSN_UNKNOWN = 0,
    TK_INSN_STORE,  /* mem <- reg or imm (MOV, SSE stores) */
    TK_INSN_LOAD,   /* reg <- mem (MOV, MOVZX/MOVSX, SSE loads) */
    TK_INSN_RMW,    /* mem <- mem op x (ALU with memory destination, INC, DEC, NOT, NEG) */
    TK_INSN_READOP, /* flags/reg <- mem op x (ALU with register destination, CMP, TEST) */
    TK_INSN_XCHG,   /* XCHG, CMPXCHG, XADD: always atomic */
    TK_INSN_STRING, /* MOVS, STOS, LODS */
};

struct tk_insn {
    uint8_t kind;
    uint8_t len;     /* bytes */
    uint8_t size;    /* operand bytes: 1 2 4 8, or 16 for SSE */
    uint8_t opcode;  /* the (last) opcode byte */
    uint8_t twobyte; /* opcode was 0F xx */
    uint8_t prefix;  /* 0, 0x66, 0xF2 or 0xF3 (mandatory SSE prefix / REP) */
    uint8_t lock, rep, rexw;
    int8_t reg;       /* register operand 0-15 (RAX..R15, or XMM n), -1 for none */
    bool high8;       /* reg names AH, CH, DH or BH */
    bool is_xmm;      /* reg is an XMM register */
    uint8_t op;       /* ALU op 0-7; group-3/5 subop; string: 0 movs 1 stos 2 lods */
    uint8_t memsize;  /* MOVZX/MOVSX/MOVSXD, MOVSS/MOVSD/MOVD/MOVQ: bytes in memory */
    uint8_t sext;     /* MOVSX/MOVSXD */
    uint8_t zext_xmm; /* an SSE load that zeroes the rest of the register */
    uint8_t has_imm;
    uint64_t imm; /* sign-extended to the operand size */
    uintptr_t ea; /* the memory operand */
};

/* Decodes the instruction at the context's PC.  Returns true if it is one
 * of the subset and its memory operand was computed. */
bool tk__insn_decode(const void *uc, struct tk_insn *d);

/* The memory the instruction touches next: up to two ranges (MOVS reads
 * one and writes the other; a string instruction reports its current
 * element).  Returns how many. */
struct tk_insn_access {
    uintptr_t addr;
    size_t len;
    bool write;
};
int tk__insn_accesses(const struct tk_insn *d, const void *uc, struct tk_insn_access out[2]);

/* How the emulator reaches memory: map() returns where to access
 * [addr, addr+len) (a second view of a protected page, or addr itself), or
 * NULL to refuse; allowed() says whether an access may go ahead without the
 * region's handler (string instructions stop before the first that may
 * not). */
struct tk_emu_ops {
    void *(*map)(uintptr_t addr, size_t len, bool write, void *ctx);
    bool (*allowed)(uintptr_t addr, size_t len, bool write, void *ctx);
    void *ctx;
};

/* Performs the instruction on the context: memory through ops, registers
 * and flags in the context, PC past the instruction (a string instruction
 * stopped early keeps its PC, with RSI/RDI/RCX advanced, and faults again
 * at the element it stopped before).  Returns true if done; false if
 * nothing was changed and the caller must single-step instead. */
bool tk__insn_emulate(const struct tk_insn *d, void *uc, const struct tk_emu_ops *ops);

#endif
