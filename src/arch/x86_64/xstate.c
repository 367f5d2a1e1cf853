/* src/arch/x86_64/xstate.c - the XSAVE area of a signal frame.
 *
 * On x86-64 Linux, uc_mcontext.fpregs points at the frame's FXSAVE area,
 * which is the start of an XSAVE area in standard (non-compacted) format
 * when the kernel wrote one: bytes 464..511 then hold struct _fpx_sw_bytes
 * with magic1 = FP_XSTATE_MAGIC1 and the features saved, and the XSAVE
 * header at byte 512 starts with XSTATE_BV, the components present.  A
 * component whose XSTATE_BV bit is clear is restored to its initial value
 * by sigreturn, so writing one means setting its bit too.
 */
#include <cpuid.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "arch/context.h"
#include "arch/x86_64/xsave.h"

#define XFEATURE_PKRU 9

/* Offset of the PKRU component in the standard format: CPUID.(0xD, 9).EBX.
 * 0 = not known yet, UINT32_MAX = none. */
static atomic_uint pkru_offset;

static uint32_t find_pkru_offset(void)
{
    uint32_t off = atomic_load_explicit(&pkru_offset, memory_order_relaxed);
    if (off) return off;
    unsigned a, b, c, d;
    if (__get_cpuid_count(0xd, XFEATURE_PKRU, &a, &b, &c, &d) && a >= 4)
        off = b;
    else
        off = UINT32_MAX;
    atomic_store_explicit(&pkru_offset, off, memory_order_relaxed);
    return off;
}

/* [signal-safe] */
uint32_t *tk__ctx_pkru(void *ucv)
{
    ucontext_t *uc = ucv;
    unsigned char *fx = (unsigned char *)uc->uc_mcontext.fpregs;
    if (!fx) return NULL;
    struct tk_xsave_sw sw;
    memcpy(&sw, fx + 464, sizeof sw);
    if (sw.magic1 != FP_XSTATE_MAGIC1 || !(sw.xfeatures & (1ull << XFEATURE_PKRU))) return NULL;
    uint32_t off = find_pkru_offset();
    if (off == UINT32_MAX || off + 4 > sw.xstate_size) return NULL;
    uint64_t bv;
    memcpy(&bv, fx + 512, sizeof bv);
    uint32_t *pkru = (uint32_t *)(fx + off);
    if (!(bv & (1ull << XFEATURE_PKRU))) {
        /* absent = initial value (0: every key fully accessible) */
        *pkru = 0;
        bv |= 1ull << XFEATURE_PKRU;
        memcpy(fx + 512, &bv, sizeof bv);
    }
    return pkru;
}
