/* trapkit/probe.h - what this kernel and CPU offer.
 *
 * tk_probe() fills a tk_probe_info by trying each feature (opening a
 * userfaultfd and doing the API handshake, issuing PAGEMAP_SCAN on a scratch
 * page, allocating a protection key, ...); nothing is inferred from the kernel
 * version.  The result is computed once per process and cached; later calls
 * copy the cached result.  `trapkit probe` prints the same as a table or JSON.
 */
#ifndef TRAPKIT_PROBE_H
#define TRAPKIT_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <trapkit/region.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How this process can obtain a userfaultfd. */
enum tk_uffd_access {
    TK_UFFD_NONE = 0,       /* not at all */
    TK_UFFD_SYSCALL,        /* userfaultfd(2) with kernel faults allowed */
    TK_UFFD_DEVICE,         /* /dev/userfaultfd (USERFAULTFD_IOC_NEW) */
    TK_UFFD_USER_MODE_ONLY, /* userfaultfd(2) only with UFFD_USER_MODE_ONLY */
};

/* Bits of tk_probe_info.uffd_features: the kernel's UFFD_FEATURE_* values
 * as returned by the UFFDIO_API handshake (see src/os/linux/uffd.h). */

#define TK_PROBE_MAX_HUGE 8

typedef struct tk_probe_info {
    char kernel_release[65];
    char cpu_model[128];
    int ncpus;
    size_t page_size;
    size_t huge_page_sizes[TK_PROBE_MAX_HUGE]; /* from /sys/kernel/mm/hugepages */
    int n_huge_page_sizes;
    char thp_mode[16]; /* "always", "madvise", "never" or "" if absent */

    enum tk_uffd_access uffd_access;
    uint64_t uffd_features; /* features the API handshake offers */
    uint64_t uffd_ioctls;   /* ioctls (bit i = _UFFDIO_* number i) on a registered range */
    bool pagemap_scan;      /* PAGEMAP_SCAN ioctl on /proc/self/pagemap works */
    /* After UFFDIO_WRITEPROTECT lifts a write protection, a private page's
     * next write takes no page fault at all (Linux 6.3).  Before, the kernel
     * leaves the page read-only and resolves that write with a fault of its
     * own: no signal or message, but one minor fault per page. */
    bool uffd_wp_unprotect_writable;
    bool soft_dirty;         /* soft-dirty bit is maintained and clear_refs "4" works */
    bool pkeys_cpu;          /* CPUID says PKU and the OS enabled it (OSPKE) */
    bool pkeys_kernel;       /* pkey_alloc() succeeded */
    int pkeys_available;     /* how many keys pkey_alloc() handed out (0 if none) */
    bool madv_guard_install; /* MADV_GUARD_INSTALL (Linux 6.13) accepted */
    long max_map_count;      /* vm.max_map_count, -1 if unreadable */
    long map_count;          /* mappings this process has now (lines of /proc/self/maps) */
    size_t minsigstksz;      /* AT_MINSIGSTKSZ: the signal frame size the kernel needs */

    /* The mechanism trapkit picks for each primitive when none is forced
     * (TRAPKIT_BACKEND unset).  TK_MECH_* values of trapkit/region.h. */
    enum tk_mech mech_trap;     /* TRAP, PROT1, PROTN, UNPROT (read-only protection) */
    enum tk_mech mech_dirty;    /* DIRTY */
    enum tk_mech mech_noaccess; /* no-access protection */
    bool map2;                  /* MAP2 available (memfd_create + shared mappings) */
} tk_probe_info;

/* Fills *out.  Returns 0, or a negative errno if a fact could not be read at
 * all (the fields that could be are still filled).  Not async-signal-safe. */
int tk_probe(tk_probe_info *out);

/* Whether the handshake offered a feature (a UFFD_FEATURE_* bit). */
static inline bool tk_probe_has_uffd(const tk_probe_info *p, uint64_t feature)
{
    return p->uffd_access != TK_UFFD_NONE && (p->uffd_features & feature) == feature;
}

/* Writes the probe as a JSON object (no trailing newline) to buf; returns the
 * length it needed, like snprintf. */
int tk_probe_json(const tk_probe_info *p, char *buf, size_t size);

/* Whether mechanism m can serve a region with these TK_REGION_* flags on this
 * machine (as probed, after TRAPKIT_PROBE_MASK); if not and why is not NULL,
 * *why says which feature is missing (a static string).  TK_MECH_AUTO is
 * always available.  Not async-signal-safe on the first call (it probes). */
bool tk_mech_available(enum tk_mech m, unsigned region_flags, const char **why);

/* The mechanism trapkit picks for a region with these TK_REGION_* flags when
 * none is forced (TRAPKIT_BACKEND is not consulted here). */
enum tk_mech tk_mech_default(unsigned region_flags);

/* Names of the userfaultfd feature bits, for printing: returns the name of
 * bit `bit` (0..63) or NULL if trapkit knows no name for it. */
const char *tk_uffd_feature_name(unsigned bit);

#ifdef __cplusplus
}
#endif
#endif
