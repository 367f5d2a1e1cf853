// cxx/unwind.hpp - a DWARF call-frame-information unwinder for x86-64 that
// computes each PC's frame state once and keeps it (libtrapkit_cxx).
//
// compute() finds the FDE of a PC through the object's .eh_frame_hdr
// (found with _dl_find_object, so objects loaded and unloaded at any time
// are seen as they are now), runs the CIE's and FDE's instructions up to
// the PC, and returns the rules: how to find the caller's CFA, return
// address and callee-saved registers, plus the LSDA and personality.
// state_for() keeps computed states in a hash table keyed by PC, so a
// PC's instructions are interpreted once; an entry remembers the object's
// load address and eh_frame_hdr and is recomputed when they no longer
// match (dlclose and a new object at the same place).  Not caught by that
// check: an object unloaded and another loaded at the same base whose
// .eh_frame_hdr lands at the same address.  The throw runtime (eh.cpp)
// keeps its own table, emptied by every dlclose, and uses state_for()
// only for frames whose rules are not the usual ones.  step() applies a
// state to a register set: the caller's registers.
#ifndef TK_CXX_UNWIND_HPP
#define TK_CXX_UNWIND_HPP

#include <stdint.h>
#include <string.h>

namespace tk::unw
{

// DWARF register numbers of x86-64; 16 is the return address column.
enum { RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8, R9, R10, R11, R12, R13, R14, R15, RA, NREGS };

enum rule_kind : uint8_t {
    SAME,
    UNDEFINED,
    OFFSET,
    VAL_OFFSET,
    REGISTER,
    EXPRESSION,
    VAL_EXPRESSION
};

struct rule {
    rule_kind kind = SAME;
    uint8_t reg = 0;
    int64_t off = 0;
    const uint8_t *expr = nullptr; // EXPRESSION, VAL_EXPRESSION: a length-prefixed (uleb128) block
};

// Reads the .eh_frame and LSDA encodings: fixed-size words, LEB128 and
// DW_EH_PE-encoded pointers.
struct reader {
    const uint8_t *p;
    uint8_t u8() { return *p++; }
    uint16_t u16()
    {
        uint16_t v;
        memcpy(&v, p, 2);
        p += 2;
        return v;
    }
    uint32_t u32()
    {
        uint32_t v;
        memcpy(&v, p, 4);
        p += 4;
        return v;
    }
    uint64_t u64()
    {
        uint64_t v;
        memcpy(&v, p, 8);
        p += 8;
        return v;
    }
    uint64_t uleb()
    {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b;
        do {
            b = *p++;
            if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        return v;
    }
    int64_t sleb()
    {
        int64_t v = 0;
        unsigned shift = 0;
        uint8_t b;
        do {
            b = *p++;
            if (shift < 64) v |= static_cast<int64_t>(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        if (shift < 64 && (b & 0x40)) v |= -(static_cast<int64_t>(1) << shift);
        return v;
    }
    // A DW_EH_PE-encoded pointer; data_base for datarel.
    bool ptr(uint8_t enc, uintptr_t data_base, uintptr_t func_base, uintptr_t *out)
    {
        if (enc == 0xff) { // DW_EH_PE_omit
            *out = 0;
            return true;
        }
        const uint8_t *at = p;
        uint64_t v;
        switch (enc & 0x0f) {
        case 0x00:
            v = u64();
            break; // absptr
        case 0x01:
            v = uleb();
            break; // uleb128
        case 0x02:
            v = u16();
            break; // udata2
        case 0x03:
            v = u32();
            break; // udata4
        case 0x04:
            v = u64();
            break; // udata8
        case 0x09:
            v = static_cast<uint64_t>(sleb());
            break; // sleb128
        case 0x0a:
            v = static_cast<uint64_t>(static_cast<int16_t>(u16()));
            break;
        case 0x0b:
            v = static_cast<uint64_t>(static_cast<int32_t>(u32()));
            break;
        case 0x0c:
            v = u64();
            break; // sdata8
        default:
            return false;
        }
        if (v || (enc & 0x70) == 0) {
            switch (enc & 0x70) {
            case 0x00:
                break;
            case 0x10:
                v += reinterpret_cast<uintptr_t>(at);
                break; // pcrel
            case 0x30:
                v += data_base;
                break; // datarel
            case 0x40:
                v += func_base;
                break; // funcrel
            default:
                return false; // textrel, aligned
            }
        }
        if ((enc & 0x80) && v) v = *reinterpret_cast<const uint64_t *>(v); // indirect (0: none)
        *out = static_cast<uintptr_t>(v);
        return true;
    }
};

struct frame_state {
    uintptr_t func_start = 0;
    uint8_t cfa_reg = RSP;
    int64_t cfa_off = 8;
    const uint8_t *cfa_expr = nullptr; // non-null: CFA from this expression
    rule regs[NREGS];
    uint8_t ra_column = RA;
    bool signal_frame = false; // 'S': the caller's PC is exact, not a return address
    uintptr_t lsda = 0, personality = 0;
    int64_t args_size = 0; // DW_CFA_GNU_args_size: bytes of pushed arguments at the PC
};

// The registers of one frame.  pc is the return address (or, in a signal
// frame's caller, the interrupted instruction).
struct context {
    uint64_t reg[NREGS] = {};
    bool valid[NREGS] = {};
    bool pc_exact = false; // this frame's PC is exact (its callee is a signal frame)
    uint64_t pc() const { return reg[RA]; }
};

// The frame state for pc (a return address, already adjusted by the
// caller: pc - 1 unless exact).  Returns false when no FDE covers it.
bool compute(uintptr_t pc, frame_state *out);

// cxx/cfi.cpp, freestanding:
// The code an FDE covers: [*start, *start + *range).  False for a CIE, a
// terminator or an encoding it does not read.
bool fde_range(const uint8_t *fde, uintptr_t *start, uintptr_t *range);
// The frame state at pc of the function fde describes.
bool fde_state(const uint8_t *fde, uintptr_t pc, frame_state *out);

// compute() through the cache.  [thread-safe]
bool state_for(uintptr_t pc, frame_state *out);

// Moves c from a frame to its caller with fs (the frame's state); returns
// false at the end of the stack or on an unusable rule.  *cfa gets the
// frame's CFA.
bool step(context &c, const frame_state &fs, uint64_t *cfa);

// Cache counters (for tests and the benchmark).
struct cache_stats {
    uint64_t hits, misses, recomputed;
};
cache_stats stats();

} // namespace tk::unw

#endif
