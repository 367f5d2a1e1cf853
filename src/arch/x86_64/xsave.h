/* src/arch/x86_64/xsave.h - the extended-state area of a signal frame.
 *
 * The kernel writes the XSAVE area in the standard (non-compacted) format;
 * bytes 464-511 of its legacy region hold the "software reserved" bytes
 * that say whether the XSAVE header follows and which features were saved
 * (arch/x86/include/uapi/asm/sigcontext.h). */
#ifndef TK_ARCH_X86_64_XSAVE_H
#define TK_ARCH_X86_64_XSAVE_H

#include <stdint.h>
#include <string.h>

#ifndef FP_XSTATE_MAGIC1
#define FP_XSTATE_MAGIC1 0x46505853u
#endif

struct tk_xsave_sw {
    uint32_t magic1;
    uint32_t extended_size;
    uint64_t xfeatures;
    uint32_t xstate_size;
    uint32_t padding[7];
};

/* The features the frame's XSAVE area holds, or 0 for a legacy FXSAVE-only
 * frame.  [signal-safe] */
static inline uint64_t tk__xsave_features(const void *fpstate)
{
    struct tk_xsave_sw sw;
    memcpy(&sw, (const unsigned char *)fpstate + 464, sizeof sw);
    return sw.magic1 == FP_XSTATE_MAGIC1 ? sw.xfeatures : 0;
}

/* XSTATE_BV of the XSAVE header (which components are not in init state).
 * Only meaningful when tk__xsave_features() is not 0.  [signal-safe] */
static inline uint64_t tk__xsave_bv(const void *fpstate)
{
    uint64_t bv;
    memcpy(&bv, (const unsigned char *)fpstate + 512, sizeof bv);
    return bv;
}

#endif
