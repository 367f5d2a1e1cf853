/* src/vm/region.c - creating and destroying regions. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/region_impl.h"
#include "os/linux/os.h"

static _Atomic uint64_t next_region_id = 1;

static size_t hw_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static bool uses_uffd_wp(enum tk_mech m)
{
    return m == TK_MECH_UFFD_SIGBUS || m == TK_MECH_UFFD_THREAD || m == TK_MECH_PAGEMAP_SCAN;
}

/* The mechanism for a new region: forced by the config, else by
 * TRAPKIT_BACKEND, else the default for its flags. */
static int pick_mech(const tk_region_config *cfg, enum tk_mech *out, bool *forced)
{
    const tk_probe_info *p = tk__probe();
    enum tk_mech m = cfg->mech;
    const char *source = "the region configuration";
    if (m == TK_MECH_AUTO) {
        const char *env = getenv("TRAPKIT_BACKEND");
        if (env && *env && strcmp(env, "auto") != 0) {
            m = tk_mech_parse(env);
            if (m == TK_MECH_COUNT_)
                return tk__failf(-EINVAL,
                                 "TRAPKIT_BACKEND=%s names no mechanism (posix, uffd-sigbus, "
                                 "uffd-thread, pagemap-scan, soft-dirty, pkeys, fast-kernel, auto)",
                                 env);
            source = "TRAPKIT_BACKEND";
        }
    }
    if ((unsigned)m >= TK_MECH_COUNT_)
        return tk__failf(-EINVAL, "tk_region_create: unknown mechanism %d", (int)m);
    *forced = m != TK_MECH_AUTO;
    if (m == TK_MECH_AUTO) m = tk__mech_default(p, cfg->flags);
    const char *why = NULL;
    if (!tk__mech_available(p, m, cfg->flags, &why))
        return tk__failf(-EOPNOTSUPP, "mechanism %s (from %s) is not available here: %s",
                         tk_mech_name(m), source, why);
    *out = m;
    return 0;
}

static void *map_state(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Initial per-page state: user protection RW. */
static void init_state(struct tk_region *r)
{
    memset((void *)r->rg_state, TK_PROT_RW, r->rg_npages);
}

static int validate(const tk_region_config *cfg, size_t *page, unsigned *shift)
{
    size_t hw = hw_page();
    if (!cfg) return tk__fail(-EINVAL, "tk_region_create: config is NULL");
    if (cfg->flags & ~(unsigned)(TK_REGION_DIRTY | TK_REGION_MAP2 | TK_REGION_EAGER |
                                 TK_REGION_LIGHT | TK_REGION_NOACCESS))
        return tk__failf(-EINVAL, "tk_region_create: unknown flags 0x%x", cfg->flags);
    if ((cfg->flags & TK_REGION_NOACCESS) &&
        ((cfg->flags & TK_REGION_DIRTY) || (cfg->page_size && cfg->page_size < hw) ||
         cfg->mech == TK_MECH_PKEYS))
        return tk__fail(-EINVAL, "tk_region_create: TK_REGION_NOACCESS cannot be combined with "
                                 "TK_REGION_DIRTY, sub-pages or pkeys");
    if ((cfg->flags & TK_REGION_LIGHT) &&
        ((cfg->flags & (TK_REGION_DIRTY | TK_REGION_EAGER)) ||
         (cfg->page_size && cfg->page_size < hw) || !cfg->handler))
        return tk__fail(-EINVAL, "tk_region_create: a TK_REGION_LIGHT region needs a handler and "
                                 "cannot have TK_REGION_DIRTY, TK_REGION_EAGER or sub-pages");
    size_t ps = cfg->page_size ? cfg->page_size : hw;
    if (ps < TK_SUBPAGE_MIN || (ps & (ps - 1)) != 0)
        return tk__failf(-EINVAL,
                         "tk_region_create: logical page size %zu is not a power of two from %d "
                         "bytes up (sub-pages below the hardware page of %zu, or multiples of it)",
                         ps, TK_SUBPAGE_MIN, hw);
    if (ps < hw) {
        if (cfg->addr)
            return tk__fail(-EINVAL, "tk_region_create: sub-page regions need addr == NULL "
                                     "(trapkit maps them on a memfd, to reach protected "
                                     "sub-pages through a second view)");
        if (cfg->flags & TK_REGION_DIRTY)
            return tk__fail(-EOPNOTSUPP, "tk_region_create: DIRTY tracking works in hardware "
                                         "pages; sub-page regions do not offer it");
        if (cfg->mech != TK_MECH_AUTO && cfg->mech != TK_MECH_POSIX)
            return tk__failf(-EOPNOTSUPP,
                             "tk_region_create: sub-page regions use mprotect (posix); "
                             "mechanism %s cannot express sub-page protection",
                             tk_mech_name(cfg->mech));
        if (cfg->len % hw)
            return tk__failf(-EINVAL,
                             "tk_region_create: a sub-page region's length must be a multiple "
                             "of the hardware page (%zu)",
                             hw);
    }
    if (cfg->len == 0 || cfg->len % ps)
        return tk__failf(-EINVAL,
                         "tk_region_create: length %zu is not a positive multiple of "
                         "the logical page size %zu",
                         cfg->len, ps);
    if ((uintptr_t)cfg->addr % hw || (uintptr_t)cfg->addr % ps)
        return tk__failf(-EINVAL,
                         "tk_region_create: address %p is not aligned to the page size %zu",
                         cfg->addr, ps);
    if (cfg->addr && (uintptr_t)cfg->addr + cfg->len < (uintptr_t)cfg->addr)
        return tk__fail(-EINVAL, "tk_region_create: the range wraps around the address space");
    if (cfg->addr && madvise(cfg->addr, cfg->len, MADV_NORMAL) < 0 && errno == ENOMEM)
        return tk__failf(-ENOMEM,
                         "tk_region_create: %p..%p is not all mapped; map the memory first, or "
                         "pass addr = NULL and trapkit maps it",
                         cfg->addr, (void *)((uintptr_t)cfg->addr + cfg->len));
    *page = ps;
    *shift = (unsigned)__builtin_ctzl(ps);
    return 0;
}

/* Maps the region's memory when trapkit owns it: anonymous, or a memfd for
 * MAP2.  With a logical page larger than the hardware page, the start is
 * aligned to it. */
static int map_memory(struct tk_region *r)
{
    size_t extra = r->rg_page > hw_page() ? r->rg_page : 0;
    int flags = MAP_NORESERVE;
    int fd = -1;
    if ((r->rg_flags & TK_REGION_MAP2) || r->rg_subpage) {
        fd = tk__memfd("trapkit-region", r->rg_len);
        if (fd < 0)
            return tk__failf(fd, "tk_region_create: memfd_create failed: %s", strerror(-fd));
        r->rg_memfd = fd;
        flags |= MAP_SHARED;
    } else {
        flags |= MAP_PRIVATE | MAP_ANONYMOUS;
    }
    /* Reserve with room to align, then place the mapping. */
    void *res = mmap(NULL, r->rg_len + extra, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        return tk__failf(-errno, "tk_region_create: mmap of %zu bytes failed: %s", r->rg_len,
                         strerror(errno));
    uintptr_t start = ((uintptr_t)res + r->rg_page - 1) & ~(uintptr_t)(r->rg_page - 1);
    if (!extra) start = (uintptr_t)res;
    void *m = mmap((void *)start, r->rg_len, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        int err = -errno;
        munmap(res, r->rg_len + extra);
        return tk__failf(err, "tk_region_create: mmap failed: %s", strerror(-err));
    }
    if (start > (uintptr_t)res) munmap(res, start - (uintptr_t)res);
    uintptr_t tail = start + r->rg_len, res_end = (uintptr_t)res + r->rg_len + extra;
    if (res_end > tail) munmap((void *)tail, res_end - tail);
    r->rg_start = start;
    return 0;
}

/* MAP2 over the caller's range: a memfd mapped in its place (its contents
 * are replaced by zeros), so that tk_map2() can make second views. */
static int map_memfd_over(struct tk_region *r)
{
    int fd = tk__memfd("trapkit-region", r->rg_len);
    if (fd < 0) return tk__failf(fd, "tk_region_create: memfd_create failed: %s", strerror(-fd));
    r->rg_memfd = fd;
    void *m = mmap((void *)r->rg_start, r->rg_len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED)
        return tk__failf(-errno, "tk_region_create: mapping the memfd over %p failed: %s",
                         (void *)r->rg_start, strerror(errno));
    return 0;
}

/* Gives a region's memory back, as far as it was set up: the userfaultfd
 * registration, MAP2 views, the sub-page alias, the memfd, the pkey, and the
 * memory itself (unmapped if trapkit mapped it; the user's made read-write
 * again if `restore` - a destroyed region's, never one whose creation
 * failed before touching it). */
static void release_memory(struct tk_region *r, bool restore)
{
    if (r->rg_fastk) tk__fastk_del(r->rg_start, r->rg_len);
    r->rg_fastk = false;
    if (r->rg_uffd >= 0) tk__uffd_unregister(r->rg_uffd, (void *)r->rg_start, r->rg_len);
    r->rg_uffd = -1;
    pthread_mutex_lock(&r->rg_views_lock);
    for (struct tk_view *v = r->rg_views, *next; v; v = next) {
        next = v->v_next;
        munmap(v->v_addr, r->rg_len);
        free(v);
    }
    r->rg_views = NULL;
    pthread_mutex_unlock(&r->rg_views_lock);
    if (r->rg_owned && r->rg_start)
        munmap((void *)r->rg_start, r->rg_len);
    else if (restore)
        mprotect((void *)r->rg_start, r->rg_len, PROT_READ | PROT_WRITE);
    if (r->rg_alias) munmap(r->rg_alias, r->rg_len);
    r->rg_alias = NULL;
    if (r->rg_memfd >= 0) close(r->rg_memfd);
    r->rg_memfd = -1;
    tk__pkeys_detach(r);
}

void tk__region_free_meta(struct tk_region *r)
{
    if (r->rg_state) munmap((void *)r->rg_state, r->rg_npages);
    r->rg_state = NULL;
    tk__dirty_free(r);
    pthread_mutex_destroy(&r->rg_views_lock);
}

/* A region whose creation failed: never listed, freed at once. */
static void release(struct tk_region *r)
{
    release_memory(r, false);
    tk__region_free_meta(r);
    free(r);
}

int tk_region_create(const tk_region_config *cfg, tk_region **out)
{
    size_t page = 0;
    unsigned shift = 0;
    int err = validate(cfg, &page, &shift);
    if (err) return err;
    if (!out) return tk__fail(-EINVAL, "tk_region_create: out is NULL");
    /* Memory the caller gives that a region already watches is refused
     * before anything is done to it: mapping a memfd over it, registering
     * or unregistering its userfaultfd, or making it no-access would undo
     * the other region.  (tk__table_insert checks again, for a region
     * made meanwhile by another thread on the same memory.) */
    if (cfg->addr && tk__table_overlaps((uintptr_t)cfg->addr, (uintptr_t)cfg->addr + cfg->len))
        return tk__fail(-EEXIST, "tk_region_create: the range overlaps a region trapkit watches");
    enum tk_mech mech = TK_MECH_POSIX;
    bool forced = false;
    bool subpage = page < hw_page();
    if (subpage) {
        if ((err = tk__trap_claim(SIGTRAP))) return err;
    } else if ((err = pick_mech(cfg, &mech, &forced))) {
        return err;
    }
    /* fast-kernel: a posix region whose faults the kernel delivers to
     * trapkit without a signal once its range is registered (below) */
    bool fastk = mech == TK_MECH_FAST_KERNEL;
    if (fastk) mech = TK_MECH_POSIX;
    if ((err = tk__install_handlers())) return err;

    struct tk_region *r = calloc(1, sizeof *r);
    if (!r) return tk__fail(-ENOMEM, "tk_region_create: out of memory");
    pthread_mutex_init(&r->rg_views_lock, NULL);
    r->rg_len = cfg->len;
    r->rg_page = page;
    r->rg_shift = shift;
    r->rg_npages = cfg->len >> shift;
    r->rg_hw_shift = tk__hw_stripe_shift(r->rg_npages);
    r->rg_handler = cfg->handler;
    r->rg_arg = cfg->arg;
    r->rg_flags = cfg->flags;
    r->rg_memfd = -1;
    r->rg_uffd = -1;
    r->rg_pkey = -1;
    r->rg_owned = cfg->addr == NULL;
    r->rg_subpage = subpage;
    r->rg_start = (uintptr_t)cfg->addr;
    r->rg_magic = TK_REGION_LIVE;
    r->rg_id = atomic_fetch_add(&next_region_id, 1);

    r->rg_state = map_state(r->rg_npages);
    if (!r->rg_state) {
        release(r);
        return tk__fail(-ENOMEM, "tk_region_create: out of memory for the page states");
    }
    init_state(r);
    if (r->rg_owned && (err = map_memory(r))) {
        r->rg_start = 0;
        release(r);
        return err;
    }
    if (!r->rg_owned && (r->rg_flags & TK_REGION_MAP2) && (err = map_memfd_over(r))) {
        release(r);
        return err;
    }
    r->rg_end = r->rg_start + r->rg_len;
    if (subpage) {
        void *v = mmap(NULL, r->rg_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                       r->rg_memfd, 0);
        if (v == MAP_FAILED) {
            err = -errno;
            release(r);
            return tk__failf(err, "tk_region_create: mapping the sub-page view failed: %s",
                             strerror(-err));
        }
        r->rg_alias = v;
    }

    /* Register with the mechanism's userfaultfd.  When the mechanism was
     * chosen automatically and this mapping cannot be registered (a file
     * mapping, say), fall back to posix. */
    for (;;) {
        r->rg_mech = mech;
        if (!uses_uffd_wp(mech)) break;
        int fd = tk__uffd_for(mech);
        if (fd >= 0) {
            err = tk__uffd_register_wp(fd, (void *)r->rg_start, r->rg_len, NULL);
            if (!err) {
                r->rg_uffd = fd;
                break;
            }
            err = tk__failf(err,
                            "tk_region_create: userfaultfd cannot write-protect %p..%p (%s): "
                            "only private anonymous, memfd/shmem and hugetlbfs memory can",
                            (void *)r->rg_start, (void *)r->rg_end, strerror(-err));
        } else {
            err = fd;
        }
        if (forced) {
            release(r);
            return err;
        }
        mech = TK_MECH_POSIX;
    }

    if (mech == TK_MECH_PKEYS) {
        if ((err = tk__pkeys_attach(r))) {
            release(r);
            return err;
        }
        /* the logical page is the whole region (see vm/pkeys.c) */
        r->rg_page = r->rg_len;
        r->rg_shift = 63;
    }

    if (r->rg_flags & TK_REGION_NOACCESS) {
        if (mech == TK_MECH_PKEYS) {
            release(r);
            return tk__fail(-EINVAL, "tk_region_create: TK_REGION_NOACCESS cannot be combined "
                                     "with pkeys");
        }
        /* no-access by mprotect alone: on the userfaultfd mechanisms the
         * state says the write protection is not there (PS_MPROT), so
         * leaving no-access write-protects where the new protection needs
         * it, as after the kernel dropped it */
        if (mprotect((void *)r->rg_start, r->rg_len, PROT_NONE)) {
            err = -errno;
            release(r);
            return tk__failf(err, "tk_region_create: mprotect failed: %s", strerror(-err));
        }
        bool wp = mech == TK_MECH_UFFD_SIGBUS || mech == TK_MECH_UFFD_THREAD;
        memset((void *)r->rg_state, TK_PROT_NONE | (wp ? PS_MPROT : 0), r->rg_npages);
    }

    r->rg_trap_dirty =
        (r->rg_flags & TK_REGION_DIRTY) &&
        (mech == TK_MECH_POSIX || mech == TK_MECH_UFFD_SIGBUS || mech == TK_MECH_UFFD_THREAD);
    if (fastk) {
        /* The kernel's table of ranges is full (or the range overlaps one
         * another part of the program registered): forced, an error;
         * chosen, the region's faults come as SIGSEGV (posix). */
        err = tk__fastk_add(r->rg_start, r->rg_len);
        if (err && forced) {
            tk__failf(err, "tk_region_create: the kernel's fast exception path refused %p..%p: %s",
                      (void *)r->rg_start, (void *)r->rg_end, strerror(-err));
            release(r);
            return err;
        }
        r->rg_fastk = err == 0;
    }
    if ((err = tk__table_insert(r))) {
        release(r);
        return err;
    }
    if ((r->rg_flags & TK_REGION_DIRTY) && (err = tk__dirty_start(r))) {
        int keep = err;
        tk_region_destroy(r);
        return keep;
    }
    *out = r;
    return 0;
}

int tk_region_destroy(tk_region *r)
{
    if (!r) return tk__fail(-EINVAL, "tk_region_destroy: region is NULL");
    int listed = tk__table_remove(r);
    if (listed == -EINVAL)
        return tk__fail(-EINVAL, "tk_region_destroy: not a live region (destroyed already, or "
                                 "never returned by tk_region_create)");
    bool unlisted = listed == 0;
    /* Under the region's lock: the uffd service thread may have found r
     * before it left the table and be about to change its pages (see
     * lock_live in vm/protect.c); it checks the magic under the same lock. */
    tk_hw_guard g;
    tk__hw_lock(r, &g);
    r->rg_magic = 0;
    tk__hw_unlock(r, &g, 0, 0);
    /* From here no fault is routed to r.  Give the memory back read-write
     * (unregistering also drops the userfaultfd write protection). */
    release_memory(r, true);
    /* The struct itself, its states and bitmap are freed by the table once
     * no fault path can be looking at them. */
    if (unlisted) tk__table_retire(r);
    return 0;
}

void *tk_region_base(const tk_region *r)
{
    return (void *)r->rg_start;
}
size_t tk_region_len(const tk_region *r)
{
    return r->rg_len;
}
size_t tk_region_page_size(const tk_region *r)
{
    return r->rg_page;
}
enum tk_mech tk_region_mech(const tk_region *r)
{
    return r->rg_fastk ? TK_MECH_FAST_KERNEL : r->rg_mech;
}

int tk__region_on_missing(struct tk_region *r, tk_fault_handler h, void *arg)
{
    if (!tk__region_live(r) || r->rg_mech != TK_MECH_POSIX || r->rg_subpage)
        return tk__fail(-EINVAL, "missing-page faults: not a live posix region");
    r->rg_missing_arg = arg;
    atomic_store(&r->rg_missing, h);
    return 0;
}
