/* src/vm/choose.c - which mechanism serves a region.
 *
 * Order of preference, from the measurements in docs/design.md:
 *   DIRTY regions: pagemap-scan (the kernel resolves write faults itself and
 *                  one ioctl collects and re-protects), then uffd-sigbus, then
 *                  posix.  soft-dirty is used only when forced: the kernel
 *                  clears soft-dirty bits for the whole process at once and a
 *                  write between reading and clearing is lost.
 *   other regions: fast-kernel where the kernel has the fast exception
 *                  path (a fault costs a fraction of a signal's), then
 *                  uffd-sigbus (page-table write protection, no VMA split,
 *                  fault in the faulting thread), then posix.  uffd-thread and
 *                  pkeys only when forced.
 *   DIRTY regions fall back to fast-kernel before posix.
 */
#include "core/internal.h"
#include "os/linux/uffd.h"

static const char *const mech_names[TK_MECH_COUNT_] = {
    [TK_MECH_AUTO] = "auto",
    [TK_MECH_POSIX] = "posix",
    [TK_MECH_UFFD_SIGBUS] = "uffd-sigbus",
    [TK_MECH_UFFD_THREAD] = "uffd-thread",
    [TK_MECH_PAGEMAP_SCAN] = "pagemap-scan",
    [TK_MECH_SOFT_DIRTY] = "soft-dirty",
    [TK_MECH_PKEYS] = "pkeys",
    [TK_MECH_FAST_KERNEL] = "fast-kernel",
};

const char *tk_mech_name(enum tk_mech m)
{
    return (unsigned)m < TK_MECH_COUNT_ ? mech_names[m] : "unknown";
}

enum tk_mech tk_mech_parse(const char *name)
{
    if (!name) return TK_MECH_COUNT_;
    for (int m = 0; m < TK_MECH_COUNT_; m++) {
        const char *a = mech_names[m], *b = name;
        while (*a && *a == *b) a++, b++;
        if (!*a && !*b) return (enum tk_mech)m;
    }
    return TK_MECH_COUNT_;
}

static bool uffd_wp_usable(const tk_probe_info *p, unsigned flags, const char **why)
{
    if (p->uffd_access == TK_UFFD_NONE) {
        if (why) *why = "userfaultfd is not available to this process";
        return false;
    }
    if (!tk_probe_has_uffd(p, UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
        if (why) *why = "userfaultfd write-protect (UFFD_FEATURE_PAGEFAULT_FLAG_WP) is missing";
        return false;
    }
    /* Without UFFD_FEATURE_WP_UNPOPULATED (before 6.4) pages are populated
     * before they are protected (vm/protect.c). */
    if ((flags & TK_REGION_MAP2) && !tk_probe_has_uffd(p, UFFD_FEATURE_WP_HUGETLBFS_SHMEM)) {
        if (why)
            *why = "userfaultfd write-protect of shared memory (WP_HUGETLBFS_SHMEM) is missing";
        return false;
    }
    return true;
}

bool tk__mech_available(const tk_probe_info *p, enum tk_mech m, unsigned flags, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    switch (m) {
    case TK_MECH_AUTO:
    case TK_MECH_POSIX:
        return true;
    case TK_MECH_UFFD_SIGBUS:
        if (!uffd_wp_usable(p, flags, why)) return false;
        if (!tk_probe_has_uffd(p, UFFD_FEATURE_SIGBUS)) {
            *why = "UFFD_FEATURE_SIGBUS is missing";
            return false;
        }
        return true;
    case TK_MECH_UFFD_THREAD:
        return uffd_wp_usable(p, flags, why);
    case TK_MECH_PAGEMAP_SCAN:
        if (!uffd_wp_usable(p, flags, why)) return false;
        if (!tk_probe_has_uffd(p, UFFD_FEATURE_WP_ASYNC)) {
            *why = "UFFD_FEATURE_WP_ASYNC (Linux 6.7) is missing";
            return false;
        }
        if (!p->pagemap_scan) {
            *why = "the PAGEMAP_SCAN ioctl (Linux 6.7) is missing";
            return false;
        }
        return true;
    case TK_MECH_SOFT_DIRTY:
        if (!p->soft_dirty) {
            *why = "the kernel does not track soft-dirty bits (CONFIG_MEM_SOFT_DIRTY)";
            return false;
        }
        return true;
    case TK_MECH_FAST_KERNEL:
        return tk__fastk_usable(why);
    case TK_MECH_PKEYS:
        if (!p->pkeys_cpu) {
            *why = "the CPU has no protection keys (PKU/OSPKE)";
            return false;
        }
        if (!p->pkeys_kernel) {
            *why = "pkey_alloc() failed: the kernel offers no protection keys";
            return false;
        }
        if (flags & TK_REGION_DIRTY) {
            *why = "pkeys regions cannot track DIRTY (rights are per thread, not per page)";
            return false;
        }
        return true;
    default:
        *why = "unknown mechanism";
        return false;
    }
}

enum tk_mech tk__mech_default(const tk_probe_info *p, unsigned flags)
{
    if (flags & TK_REGION_DIRTY) {
        if (tk__mech_available(p, TK_MECH_PAGEMAP_SCAN, flags, NULL)) return TK_MECH_PAGEMAP_SCAN;
    } else if (tk__mech_available(p, TK_MECH_FAST_KERNEL, flags, NULL)) {
        return TK_MECH_FAST_KERNEL;
    }
    if (tk__mech_available(p, TK_MECH_UFFD_SIGBUS, flags, NULL)) return TK_MECH_UFFD_SIGBUS;
    if ((flags & TK_REGION_DIRTY) && tk__mech_available(p, TK_MECH_FAST_KERNEL, flags, NULL))
        return TK_MECH_FAST_KERNEL;
    return TK_MECH_POSIX;
}

bool tk_mech_available(enum tk_mech m, unsigned region_flags, const char **why)
{
    return tk__mech_available(tk__probe(), m, region_flags, why);
}

enum tk_mech tk_mech_default(unsigned region_flags)
{
    return tk__mech_default(tk__probe(), region_flags);
}
