/* src/vm/pkeys.c - regions on memory protection keys.
 *
 * A pkeys region's pages carry a protection key of their own (pkey_mprotect).
 * The rights to a key live in PKRU, a per-thread register that user code
 * changes with WRPKRU, without a system call: the present-day form of the
 * user-writable protection bit Thekkath & Levy ask for.  The cost is the
 * model: protections are per thread and per key, so
 *   - tk_protect covers the whole region (its logical page is the region)
 *     and changes the rights of the calling thread only;
 *   - a thread created later inherits its creator's rights; threads that
 *     existed before the region have the rights their PKRU gives a fresh key
 *     (by Linux's default, none) until they call tk_protect themselves;
 *   - a fault is SIGSEGV with si_code SEGV_PKUERR in the faulting thread; a
 *     handler's tk_protect changes both the handler's rights and the rights
 *     the interrupted code resumes with (the PKRU saved in the signal frame);
 *   - DIRTY cannot be expressed (no per-page, per-process state); MAP2 views
 *     carry key 0 and so stay accessible whatever the region's rights.
 * A process has at most 15 keys; when they run out, creation fails with
 * -ENOSPC.
 */
#include <string.h>
#include <sys/mman.h>

#include "arch/context.h"
#include "core/region_impl.h"
#include "os/linux/os.h"

static uint32_t rights_of(int prot)
{
    switch (prot) {
    case TK_PROT_RW:
        return 0;
    case TK_PROT_READ:
        return 2; /* write-disable */
    default:
        return 3; /* access- and write-disable */
    }
}

static int prot_of(uint32_t bits)
{
    if (bits & 1) return TK_PROT_NONE;
    if (bits & 2) return TK_PROT_READ;
    return TK_PROT_RW;
}

int tk__pkeys_attach(struct tk_region *r)
{
    if (r->rg_flags & TK_REGION_DIRTY)
        return tk__fail(-EOPNOTSUPP, "tk_region_create: pkeys regions cannot track DIRTY "
                                     "(protection keys hold per-thread rights, not per-page "
                                     "state); use another mechanism");
    int key = tk__pkey_alloc();
    if (key == -ENOSPC)
        return tk__fail(-ENOSPC, "tk_region_create: no protection key left (a process has at "
                                 "most 15, and each pkeys region needs its own)");
    if (key < 0) return tk__failf(key, "tk_region_create: pkey_alloc failed: %s", strerror(-key));
    int err = tk__pkey_mprotect((void *)r->rg_start, r->rg_len, PROT_READ | PROT_WRITE, key);
    if (err) {
        tk__pkey_free(key);
        return tk__failf(err, "tk_region_create: pkey_mprotect failed: %s", strerror(-err));
    }
    r->rg_pkey = key;
    /* pkey_alloc gave the calling thread full rights to the key already. */
    return 0;
}

void tk__pkeys_detach(struct tk_region *r)
{
    if (r->rg_pkey < 0) return;
    if (!r->rg_owned) tk__pkey_mprotect((void *)r->rg_start, r->rg_len, PROT_READ | PROT_WRITE, 0);
    /* leave this thread's rights to the key open for whoever reuses it */
    uint32_t mask = 3u << (2 * r->rg_pkey);
    tk__wrpkru(tk__rdpkru() & ~mask);
    tk__pkey_free(r->rg_pkey);
    r->rg_pkey = -1;
}

/* [signal-safe] */
int tk__pkeys_protect(struct tk_region *r, void *addr, size_t len, int prot)
{
    if ((uintptr_t)addr != r->rg_start || len != r->rg_len)
        return tk__fail(-EINVAL, "tk_protect: a pkeys region is protected as a whole (its "
                                 "logical page is the region): pass its base and length");
    unsigned shift = 2 * (unsigned)r->rg_pkey;
    uint32_t mask = 3u << shift, bits = rights_of(prot) << shift;
    tk__wrpkru((tk__rdpkru() & ~mask) | bits);
    void *uc = tk__current_fault_uc();
    if (uc) {
        uint32_t *saved = tk__ctx_pkru(uc);
        if (saved) *saved = (*saved & ~mask) | bits;
    }
    return 0;
}

/* [signal-safe] */
int tk__pkeys_protection(struct tk_region *r)
{
    uint32_t pkru = tk__rdpkru();
    void *uc = tk__current_fault_uc();
    if (uc) {
        uint32_t *saved = tk__ctx_pkru(uc);
        if (saved) pkru = *saved;
    }
    return prot_of((pkru >> (2 * r->rg_pkey)) & 3);
}
