// cxx/cfi.cpp - the DWARF call frame information of x86-64 (cxx/unwind.hpp):
// CIEs and FDEs of .eh_frame, their call frame instructions (DWARF 4,
// section 6.4) and expressions (2.5), and a frame's step to its caller.
// Freestanding: it reads memory and calls memcpy and strlen only, so the
// kernel module's runtime (kernel/cxx) is built from it too.
#include "unwind.hpp"

// DW_CFA_remember_state's stack: how deep (each level is a frame state,
// about 480 bytes; the kernel module's build asks for less)
#ifndef TK_CFI_REMEMBER
#define TK_CFI_REMEMBER 8
#endif

namespace tk::unw
{
namespace
{

// ---- call frame instructions ----
struct cie_info {
    uint64_t code_align = 1;
    int64_t data_align = -8;
    uint8_t ra_column = RA;
    uint8_t fde_enc = 0, lsda_enc = 0xff;
    bool has_z = false, signal = false;
    uintptr_t personality = 0;
    const uint8_t *insns = nullptr, *end = nullptr;
};

bool parse_cie(const uint8_t *cie, cie_info *ci)
{
    reader r{cie};
    uint64_t len = r.u32();
    if (len == 0xffffffff) return false; // 64-bit DWARF: not in .eh_frame
    const uint8_t *end = r.p + len;
    if (r.u32() != 0) return false; // not a CIE
    uint8_t version = r.u8();
    const char *aug = reinterpret_cast<const char *>(r.p);
    r.p += strlen(aug) + 1;
    if (aug[0] == 'e' && aug[1] == 'h') r.p += 8;
    ci->code_align = r.uleb();
    ci->data_align = r.sleb();
    ci->ra_column = static_cast<uint8_t>(version == 1 ? r.u8() : r.uleb());
    if (aug[0] == 'z') {
        ci->has_z = true;
        uint64_t alen = r.uleb();
        const uint8_t *aend = r.p + alen;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R')
                ci->fde_enc = r.u8();
            else if (*a == 'L')
                ci->lsda_enc = r.u8();
            else if (*a == 'P') {
                uint8_t enc = r.u8();
                if (!r.ptr(enc, 0, 0, &ci->personality)) return false;
            } else if (*a == 'S')
                ci->signal = true;
        }
        r.p = aend;
    }
    ci->insns = r.p;
    ci->end = end;
    return ci->ra_column < NREGS;
}

// One DWARF expression operand stack machine, enough for .eh_frame
// (glibc's signal trampoline, and trapkit's fault thunk, use breg + deref).
bool eval(const uint8_t *block, const context &c, uint64_t initial, bool push_initial,
          uint64_t *out)
{
    reader r{block};
    uint64_t len = r.uleb();
    const uint8_t *end = r.p + len;
    uint64_t st[64];
    int sp = 0;
    if (push_initial) st[sp++] = initial;
    auto reg = [&](unsigned n, uint64_t *v) {
        if (n >= NREGS || !c.valid[n]) return false;
        *v = c.reg[n];
        return true;
    };
    while (r.p < end) {
        uint8_t op = r.u8();
        if (sp >= 62) return false;
        uint64_t a, b;
        if (op >= 0x30 && op <= 0x4f) {
            st[sp++] = op - 0x30;
            continue;
        }                               // lit
        if (op >= 0x50 && op <= 0x6f) { // reg
            if (!reg(op - 0x50, &a)) return false;
            st[sp++] = a;
            continue;
        }
        if (op >= 0x70 && op <= 0x8f) { // breg
            int64_t off = r.sleb();
            if (!reg(op - 0x70, &a)) return false;
            st[sp++] = a + static_cast<uint64_t>(off);
            continue;
        }
        switch (op) {
        case 0x03:
            st[sp++] = r.u64();
            break; // addr
        case 0x06:
            if (!sp) return false;
            st[sp - 1] = *reinterpret_cast<const uint64_t *>(st[sp - 1]);
            break; // deref
        case 0x08:
            st[sp++] = r.u8();
            break;
        case 0x09:
            st[sp++] = static_cast<uint64_t>(static_cast<int8_t>(r.u8()));
            break;
        case 0x0a:
            st[sp++] = r.u16();
            break;
        case 0x0b:
            st[sp++] = static_cast<uint64_t>(static_cast<int16_t>(r.u16()));
            break;
        case 0x0c:
            st[sp++] = r.u32();
            break;
        case 0x0d:
            st[sp++] = static_cast<uint64_t>(static_cast<int32_t>(r.u32()));
            break;
        case 0x0e:
            st[sp++] = r.u64();
            break;
        case 0x0f:
            st[sp++] = r.u64();
            break;
        case 0x10:
            st[sp++] = r.uleb();
            break;
        case 0x11:
            st[sp++] = static_cast<uint64_t>(r.sleb());
            break;
        case 0x12:
            if (!sp) return false;
            st[sp] = st[sp - 1];
            sp++;
            break; // dup
        case 0x13:
            if (!sp) return false;
            sp--;
            break; // drop
        case 0x14:
            if (sp < 2) return false;
            st[sp] = st[sp - 2];
            sp++;
            break; // over
        case 0x16:
            if (sp < 2) return false;
            a = st[sp - 1];
            st[sp - 1] = st[sp - 2];
            st[sp - 2] = a;
            break; // swap
        case 0x1c:
        case 0x1a:
        case 0x1e:
        case 0x21:
        case 0x22:
        case 0x24:
        case 0x25:
        case 0x26:
        case 0x27:
        case 0x29:
        case 0x2a:
        case 0x2b:
        case 0x2c:
        case 0x2d:
        case 0x2e:
            if (sp < 2) return false;
            b = st[--sp];
            a = st[sp - 1];
            switch (op) {
            case 0x1c:
                a = a - b;
                break; // minus
            case 0x1a:
                a = a & b;
                break; // and
            case 0x1e:
                a = a * b;
                break; // mul
            case 0x21:
                a = a | b;
                break; // or
            case 0x22:
                a = a + b;
                break; // plus
            case 0x24:
                a = a << b;
                break; // shl
            case 0x25:
                a = a >> b;
                break; // shr
            case 0x26:
                a = static_cast<uint64_t>(static_cast<int64_t>(a) >> b);
                break; // shra
            case 0x27:
                a = a ^ b;
                break; // xor
            case 0x29:
                a = a == b;
                break;
            case 0x2a:
                a = static_cast<int64_t>(a) >= static_cast<int64_t>(b);
                break;
            case 0x2b:
                a = static_cast<int64_t>(a) > static_cast<int64_t>(b);
                break;
            case 0x2c:
                a = static_cast<int64_t>(a) <= static_cast<int64_t>(b);
                break;
            case 0x2d:
                a = static_cast<int64_t>(a) < static_cast<int64_t>(b);
                break;
            case 0x2e:
                a = a != b;
                break;
            }
            st[sp - 1] = a;
            break;
        case 0x1f:
            if (!sp) return false;
            st[sp - 1] = -st[sp - 1];
            break; // neg
        case 0x20:
            if (!sp) return false;
            st[sp - 1] = ~st[sp - 1];
            break; // not
        case 0x23:
            if (!sp) return false;
            st[sp - 1] += r.uleb();
            break; // plus_uconst
        case 0x2f: {
            int16_t off = static_cast<int16_t>(r.u16());
            r.p += off;
            break;
        }            // skip
        case 0x28: { // bra
            int16_t off = static_cast<int16_t>(r.u16());
            if (!sp) return false;
            if (st[--sp]) r.p += off;
            break;
        }
        case 0x90:
            if (!reg(static_cast<unsigned>(r.uleb()), &a)) return false;
            st[sp++] = a;
            break;   // regx
        case 0x92: { // bregx
            unsigned n = static_cast<unsigned>(r.uleb());
            int64_t off = r.sleb();
            if (!reg(n, &a)) return false;
            st[sp++] = a + static_cast<uint64_t>(off);
            break;
        }
        case 0x96:
            break; // nop
        default:
            return false;
        }
    }
    if (!sp) return false;
    *out = st[sp - 1];
    return true;
}

// Runs instructions [p, end) until the location passes pc.
bool run(const uint8_t *p, const uint8_t *end, const cie_info &ci, uintptr_t pc, uintptr_t loc,
         frame_state *fs, const frame_state *initial)
{
    reader r{p};
    // (raw storage: a level is written before it is read, and most
    // functions' instructions never remember a state)
    alignas(frame_state) unsigned char stack[TK_CFI_REMEMBER][sizeof(frame_state)];
    int depth = 0;
    auto restore = [&](unsigned reg) {
        if (reg < NREGS) fs->regs[reg] = initial ? initial->regs[reg] : rule{};
    };
    auto set = [&](uint64_t reg, rule_kind k, int64_t off, const uint8_t *expr, uint8_t r2) {
        if (reg >= NREGS) return; // a register we do not track (vector registers)
        fs->regs[reg].kind = k;
        fs->regs[reg].off = off;
        fs->regs[reg].expr = expr;
        fs->regs[reg].reg = r2;
    };
    while (r.p < end) {
        uint8_t op = r.u8();
        uint8_t hi = op & 0xc0, low = op & 0x3f;
        if (hi == 0x40) { // advance_loc
            loc += low * ci.code_align;
            if (loc > pc) return true;
            continue;
        }
        if (hi == 0x80) {
            set(low, OFFSET, static_cast<int64_t>(r.uleb()) * ci.data_align, nullptr, 0);
            continue;
        }
        if (hi == 0xc0) {
            restore(low);
            continue;
        }
        switch (op) {
        case 0x00:
            break;
        case 0x01: {
            uintptr_t v;
            if (!r.ptr(ci.fde_enc, 0, 0, &v)) return false;
            loc = v;
            if (loc > pc) return true;
            break;
        }
        case 0x02:
            loc += r.u8() * ci.code_align;
            if (loc > pc) return true;
            break;
        case 0x03:
            loc += r.u16() * ci.code_align;
            if (loc > pc) return true;
            break;
        case 0x04:
            loc += r.u32() * ci.code_align;
            if (loc > pc) return true;
            break;
        case 0x05: {
            uint64_t reg = r.uleb();
            set(reg, OFFSET, static_cast<int64_t>(r.uleb()) * ci.data_align, nullptr, 0);
            break;
        }
        case 0x06:
            restore(static_cast<unsigned>(r.uleb()));
            break;
        case 0x07:
            set(r.uleb(), UNDEFINED, 0, nullptr, 0);
            break;
        case 0x08:
            set(r.uleb(), SAME, 0, nullptr, 0);
            break;
        case 0x09: {
            uint64_t reg = r.uleb();
            uint64_t r2 = r.uleb();
            set(reg, REGISTER, 0, nullptr, static_cast<uint8_t>(r2));
            break;
        }
        case 0x0a:
            if (depth >= TK_CFI_REMEMBER) return false;
            memcpy(stack[depth++], fs, sizeof *fs);
            break;   // remember_state
        case 0x0b: { // restore_state
            if (!depth) return false;
            memcpy(fs, stack[--depth], sizeof *fs); // the rules and the CFA rule, as GCC's
                                                    // unwinder restores them
            break;
        }
        case 0x0c:
            fs->cfa_reg = static_cast<uint8_t>(r.uleb());
            fs->cfa_off = static_cast<int64_t>(r.uleb());
            fs->cfa_expr = nullptr;
            break;
        case 0x0d:
            fs->cfa_reg = static_cast<uint8_t>(r.uleb());
            fs->cfa_expr = nullptr;
            break;
        case 0x0e:
            fs->cfa_off = static_cast<int64_t>(r.uleb());
            break;
        case 0x0f:
            fs->cfa_expr = r.p;
            {
                uint64_t n = r.uleb();
                r.p += n;
            }
            break;
        case 0x10: {
            uint64_t reg = r.uleb();
            const uint8_t *e = r.p;
            uint64_t n = r.uleb();
            r.p += n;
            set(reg, EXPRESSION, 0, e, 0);
            break;
        }
        case 0x11: {
            uint64_t reg = r.uleb();
            set(reg, OFFSET, r.sleb() * ci.data_align, nullptr, 0);
            break;
        }
        case 0x12:
            fs->cfa_reg = static_cast<uint8_t>(r.uleb());
            fs->cfa_off = r.sleb() * ci.data_align;
            fs->cfa_expr = nullptr;
            break;
        case 0x13:
            fs->cfa_off = r.sleb() * ci.data_align;
            break;
        case 0x14: {
            uint64_t reg = r.uleb();
            set(reg, VAL_OFFSET, static_cast<int64_t>(r.uleb()) * ci.data_align, nullptr, 0);
            break;
        }
        case 0x15: {
            uint64_t reg = r.uleb();
            set(reg, VAL_OFFSET, r.sleb() * ci.data_align, nullptr, 0);
            break;
        }
        case 0x16: {
            uint64_t reg = r.uleb();
            const uint8_t *e = r.p;
            uint64_t n = r.uleb();
            r.p += n;
            set(reg, VAL_EXPRESSION, 0, e, 0);
            break;
        }
        case 0x2e:
            fs->args_size = static_cast<int64_t>(r.uleb());
            break; // GNU_args_size
        case 0x2f: {
            uint64_t reg = r.uleb();
            set(reg, OFFSET, -static_cast<int64_t>(r.uleb()) * ci.data_align, nullptr, 0);
            break;
        }
        default:
            return false;
        }
    }
    return true;
}

} // namespace

bool fde_range(const uint8_t *fde, uintptr_t *start, uintptr_t *range)
{
    reader r{fde};
    uint32_t len = r.u32();
    if (len == 0 || len == 0xffffffff) return false;
    const uint8_t *id_at = r.p;
    uint32_t cie_off = r.u32();
    if (cie_off == 0) return false;
    cie_info ci;
    if (!parse_cie(id_at - cie_off, &ci)) return false;
    return r.ptr(ci.fde_enc, 0, 0, start) && r.ptr(ci.fde_enc & 0x0f, 0, 0, range);
}

bool fde_state(const uint8_t *fde, uintptr_t pc, frame_state *out)
{
    reader r{fde};
    uint32_t len = r.u32();
    if (len == 0 || len == 0xffffffff) return false;
    const uint8_t *end = r.p + len;
    const uint8_t *id_at = r.p;
    uint32_t cie_off = r.u32();
    if (cie_off == 0) return false;
    cie_info ci;
    if (!parse_cie(id_at - cie_off, &ci)) return false;
    uintptr_t start, range;
    if (!r.ptr(ci.fde_enc, 0, 0, &start) || !r.ptr(ci.fde_enc & 0x0f, 0, 0, &range)) return false;
    if (pc < start || pc >= start + range) return false;
    frame_state fs;
    fs.func_start = start;
    fs.ra_column = ci.ra_column;
    fs.signal_frame = ci.signal;
    fs.personality = ci.personality;
    if (ci.has_z) {
        uint64_t alen = r.uleb();
        const uint8_t *aend = r.p + alen;
        if (ci.lsda_enc != 0xff && !r.ptr(ci.lsda_enc, 0, 0, &fs.lsda)) return false;
        r.p = aend;
    }
    if (!run(ci.insns, ci.end, ci, ~static_cast<uintptr_t>(0), start, &fs, nullptr)) return false;
    frame_state initial = fs;
    if (!run(r.p, end, ci, pc, start, &fs, &initial)) return false;
    *out = fs;
    return true;
}

bool step(context &c, const frame_state &fs, uint64_t *cfa_out)
{
    uint64_t cfa;
    if (fs.cfa_expr) {
        if (!eval(fs.cfa_expr, c, 0, false, &cfa)) return false;
    } else {
        if (fs.cfa_reg >= NREGS || !c.valid[fs.cfa_reg]) return false;
        cfa = c.reg[fs.cfa_reg] + static_cast<uint64_t>(fs.cfa_off);
    }
    context n = c;
    for (int i = 0; i < NREGS; i++) {
        const rule &ru = fs.regs[i];
        uint64_t a;
        switch (ru.kind) {
        case SAME:
            break;
        case UNDEFINED:
            n.valid[i] = false;
            break;
        case OFFSET:
            n.reg[i] = *reinterpret_cast<const uint64_t *>(cfa + static_cast<uint64_t>(ru.off));
            n.valid[i] = true;
            break;
        case VAL_OFFSET:
            n.reg[i] = cfa + static_cast<uint64_t>(ru.off);
            n.valid[i] = true;
            break;
        case REGISTER:
            if (ru.reg >= NREGS || !c.valid[ru.reg]) return false;
            n.reg[i] = c.reg[ru.reg];
            n.valid[i] = true;
            break;
        case EXPRESSION:
            if (!eval(ru.expr, c, cfa, true, &a)) return false;
            n.reg[i] = *reinterpret_cast<const uint64_t *>(a);
            n.valid[i] = true;
            break;
        case VAL_EXPRESSION:
            if (!eval(ru.expr, c, cfa, true, &a)) return false;
            n.reg[i] = a;
            n.valid[i] = true;
            break;
        }
    }
    // the return address column gives the caller's PC; the caller's RSP is the CFA
    if (fs.ra_column != RA) {
        n.reg[RA] = n.reg[fs.ra_column];
        n.valid[RA] = n.valid[fs.ra_column];
    }
    if (fs.regs[fs.ra_column].kind == UNDEFINED || !n.valid[RA] || n.reg[RA] == 0) return false;
    n.reg[RSP] = cfa;
    n.valid[RSP] = true;
    n.pc_exact = fs.signal_frame;
    *cfa_out = cfa;
    c = n;
    return true;
}

} // namespace tk::unw
