// cxx/lsda.hpp - a C++ frame's call-site record, read from its LSDA (the
// Itanium C++ ABI's exception tables as GCC and Clang write them for
// __gxx_personality_v0).  Freestanding: shared by libtrapkit_cxx's throw
// runtime (cxx/eh.cpp) and the kernel module's (kernel/cxx/rt/eh.cpp).
#ifndef TK_CXX_LSDA_HPP
#define TK_CXX_LSDA_HPP

#include "unwind.hpp"

namespace tk::unw
{

// What a call site does when an exception passes it.
enum : uint8_t {
    W_NOTHING,   // no landing pad: the frame is only unwound
    W_CLEANUP,   // a landing pad with destructors only
    W_TERMINATE, // not in the table: std::terminate
    W_ACTIONS,   // a landing pad with catch clauses or an exception specification
};

struct call_site {
    uint8_t what = W_NOTHING;
    uint8_t ttype_enc = 0xff;        // the type table's pointer encoding (0xff: none)
    uintptr_t lp = 0;                // landing pad
    const uint8_t *action = nullptr; // first action record
    const uint8_t *ttype = nullptr;  // end of the type table
};

// Bytes of a pointer in encoding enc; 0 for a variable-length one.
inline size_t encoded_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c:
        return 8;
    case 0x02:
    case 0x0a:
        return 2;
    case 0x03:
    case 0x0b:
        return 4;
    default:
        return 0;
    }
}

// The call-site record for pc in lsda, whose function starts at
// func_start: false for an encoding this reader does not take (the type
// table is read with base 0: pc-relative and absolute pointers only).
inline bool decode_lsda(const uint8_t *lsda, uintptr_t func_start, uintptr_t pc, call_site *s)
{
    reader r{lsda};
    uint8_t lpstart_enc = r.u8();
    uintptr_t lpstart = func_start;
    if (lpstart_enc != 0xff && !r.ptr(lpstart_enc, 0, func_start, &lpstart)) return false;
    s->ttype_enc = r.u8();
    s->ttype = nullptr;
    if (s->ttype_enc != 0xff) {
        uint8_t app = s->ttype_enc & 0x70;
        if ((app != 0x00 && app != 0x10) || encoded_size(s->ttype_enc) == 0) return false;
        uint64_t off = r.uleb();
        s->ttype = r.p + off;
    }
    uint8_t cs_enc = r.u8();
    uint64_t cs_len = r.uleb();
    const uint8_t *actions = r.p + cs_len;
    s->what = W_TERMINATE;
    while (r.p < actions) {
        uintptr_t start, len, lp;
        if (!r.ptr(cs_enc, 0, 0, &start) || !r.ptr(cs_enc, 0, 0, &len) || !r.ptr(cs_enc, 0, 0, &lp))
            return false;
        uint64_t action = r.uleb();
        if (pc < func_start + start) break;
        if (pc < func_start + start + len) {
            if (lp == 0) {
                s->what = W_NOTHING;
            } else {
                s->lp = lpstart + lp;
                s->what = action ? W_ACTIONS : W_CLEANUP;
                if (action) s->action = actions + action - 1;
            }
            break;
        }
    }
    return true;
}

} // namespace tk::unw

#endif
