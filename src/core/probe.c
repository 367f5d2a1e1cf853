/* src/core/probe.c - what this kernel and CPU offer, found by trying.
 *
 * Each fact of tk_probe_info is established by doing the thing: opening a
 * userfaultfd and doing the API handshake, registering a scratch page for
 * write protection, issuing PAGEMAP_SCAN, watching the soft-dirty bit of a
 * page go up and down, allocating protection keys, installing a guard page.
 * Nothing is inferred from the kernel version or from the headers trapkit was
 * compiled with.  Every descriptor and mapping made here is released again
 * (except the shared /proc/self/pagemap descriptor of os.c, which stays open
 * for the other modules).
 *
 * The result is computed once per process (pthread_once) and cached.
 */
#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/internal.h"
#include "os/linux/os.h"
#include "os/linux/uffd.h"

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

#define PM_SOFT_DIRTY_BIT (UINT64_C(1) << 55)
#define PM_PRESENT_BIT (UINT64_C(1) << 63)

/* ---- feature names ------------------------------------------------------ */

static const char *const uffd_feature_names[] = {
    "PAGEFAULT_FLAG_WP",  /* 0 */
    "EVENT_FORK",         /* 1 */
    "EVENT_REMAP",        /* 2 */
    "EVENT_REMOVE",       /* 3 */
    "MISSING_HUGETLBFS",  /* 4 */
    "MISSING_SHMEM",      /* 5 */
    "EVENT_UNMAP",        /* 6 */
    "SIGBUS",             /* 7 */
    "THREAD_ID",          /* 8 */
    "MINOR_HUGETLBFS",    /* 9 */
    "MINOR_SHMEM",        /* 10 */
    "EXACT_ADDRESS",      /* 11 */
    "WP_HUGETLBFS_SHMEM", /* 12 */
    "WP_UNPOPULATED",     /* 13 */
    "POISON",             /* 14 */
    "WP_ASYNC",           /* 15 */
    "MOVE",               /* 16 */
};

const char *tk_uffd_feature_name(unsigned bit)
{
    if (bit < sizeof uffd_feature_names / sizeof uffd_feature_names[0])
        return uffd_feature_names[bit];
    return NULL;
}

/* Range ioctls, bit i = _UFFDIO_* number i. */
static const char *uffd_ioctl_name(unsigned bit)
{
    switch (bit) {
    case _UFFDIO_REGISTER:
        return "REGISTER";
    case _UFFDIO_UNREGISTER:
        return "UNREGISTER";
    case _UFFDIO_WAKE:
        return "WAKE";
    case _UFFDIO_COPY:
        return "COPY";
    case _UFFDIO_ZEROPAGE:
        return "ZEROPAGE";
    case _UFFDIO_MOVE:
        return "MOVE";
    case _UFFDIO_WRITEPROTECT:
        return "WRITEPROTECT";
    case _UFFDIO_CONTINUE:
        return "CONTINUE";
    case _UFFDIO_POISON:
        return "POISON";
    case _UFFDIO_API:
        return "API";
    default:
        return NULL;
    }
}

static const char *uffd_access_name(enum tk_uffd_access a)
{
    switch (a) {
    case TK_UFFD_NONE:
        return "none";
    case TK_UFFD_SYSCALL:
        return "syscall";
    case TK_UFFD_DEVICE:
        return "device";
    case TK_UFFD_USER_MODE_ONLY:
        return "user-mode-only";
    default:
        return "unknown";
    }
}

/* ---- small file helpers --------------------------------------------------- */

/* Reads up to size-1 bytes of a (small, /proc or /sys) file into buf and
 * NUL-terminates it.  Returns the length or a negative errno. */
static long read_small_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    size_t n = fread(buf, 1, size - 1, f);
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    buf[n] = 0;
    return err ? err : (long)n;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    size_t i = 0;
    while (s[i] == ' ' || s[i] == '\t') i++;
    if (i) memmove(s, s + i, n - i + 1);
}

static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---- the individual probes ----------------------------------------------- */

static int probe_cpu_model(tk_probe_info *p)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f) return -errno;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1;
        trim(v);
        copy_str(p->cpu_model, sizeof p->cpu_model, v);
        break;
    }
    fclose(f);
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void probe_huge_pages(tk_probe_info *p)
{
    DIR *d = opendir("/sys/kernel/mm/hugepages");
    if (!d) return; /* no hugetlbfs: none */
    struct dirent *e;
    while ((e = readdir(d)) && p->n_huge_page_sizes < TK_PROBE_MAX_HUGE) {
        unsigned long long kb;
        char tail[4];
        if (sscanf(e->d_name, "hugepages-%llu%3s", &kb, tail) != 2 || strcmp(tail, "kB") != 0)
            continue;
        p->huge_page_sizes[p->n_huge_page_sizes++] = (size_t)kb * 1024;
    }
    closedir(d);
    qsort(p->huge_page_sizes, (size_t)p->n_huge_page_sizes, sizeof(size_t), cmp_size);
}

static void probe_thp(tk_probe_info *p)
{
    char buf[256];
    if (read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) < 0) return;
    char *lb = strchr(buf, '['), *rb = lb ? strchr(lb, ']') : NULL;
    if (!lb || !rb) return;
    size_t n = (size_t)(rb - lb - 1);
    if (n >= sizeof p->thp_mode) n = sizeof p->thp_mode - 1;
    memcpy(p->thp_mode, lb + 1, n);
    p->thp_mode[n] = 0;
}

static void *scratch_map(size_t len)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

/* Whether a write to the populated page, registered for write-protection
 * on fd, takes no fault once a protection is lifted: the thread's own minor
 * fault count across the write.  The write is made only after the kernel
 * accepted both ioctls, so it cannot wait for a message nobody reads. */
static bool unprotect_leaves_writable(int fd, void *page, size_t len)
{
    if (tk__uffd_wp(fd, page, len, true, false) || tk__uffd_wp(fd, page, len, false, false))
        return false;
    struct rusage before, after;
    if (getrusage(RUSAGE_THREAD, &before)) return false;
    ((volatile char *)page)[0] = 2;
    if (getrusage(RUSAGE_THREAD, &after)) return false;
    return after.ru_minflt == before.ru_minflt && after.ru_majflt == before.ru_majflt;
}

static void probe_uffd(tk_probe_info *p)
{
    int how = TK_UFFD_NONE;
    int fd = tk__uffd_open(&how);
    if (fd < 0) {
        p->uffd_access = TK_UFFD_NONE;
        return;
    }
    p->uffd_access = (enum tk_uffd_access)how;
    uint64_t features = 0;
    int r = tk__uffd_api(fd, 0, &features, NULL);
    close(fd);
    if (r < 0) return; /* obtainable, but the handshake fails: no features */
    p->uffd_features = features;

    /* The ioctls a write-protect registered range allows, on a second fd
     * (a userfaultfd takes one UFFDIO_API only). */
    fd = tk__uffd_open(NULL);
    if (fd < 0) return;
    uint64_t want = features & (UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED);
    if (tk__uffd_api(fd, want, NULL, NULL) == 0) {
        void *page = scratch_map(p->page_size);
        if (page) {
            uint64_t ioctls = 0;
            ((volatile char *)page)[0] = 1; /* populated and writable */
            if (tk__uffd_register_wp(fd, page, p->page_size, &ioctls) == 0) {
                p->uffd_ioctls = ioctls;
                p->uffd_wp_unprotect_writable = unprotect_leaves_writable(fd, page, p->page_size);
                tk__uffd_unregister(fd, page, p->page_size);
            }
            munmap(page, p->page_size);
        }
    }
    close(fd);
}

static void probe_pagemap_scan(tk_probe_info *p)
{
    int pmfd = tk__pagemap_fd();
    if (pmfd < 0) return;
    char *page = scratch_map(p->page_size);
    if (!page) return;
    page[0] = 1; /* present */
    struct page_region vec[1];
    uintptr_t walk_end = 0;
    long n = tk__pagemap_scan(pmfd, (uintptr_t)page, (uintptr_t)page + p->page_size, 0,
                              PAGE_IS_PRESENT, PAGE_IS_PRESENT, vec, 1, &walk_end);
    /* ENOTTY (no such ioctl) or EINVAL (older layout) mean absent. */
    p->pagemap_scan = n >= 0;
    munmap(page, p->page_size);
}

static void probe_soft_dirty(tk_probe_info *p)
{
    volatile char *page = scratch_map(p->page_size);
    if (!page) return;
    uintptr_t a = (uintptr_t)page;
    uint64_t e = 0;
    bool ok = false;
    page[0] = 1; /* populate */
    if (tk__clear_soft_dirty() < 0) goto out;
    page[0] = 2; /* a write after clearing must set the bit */
    if (tk__pagemap_read(a, 1, &e) < 0) goto out;
    if (!(e & PM_PRESENT_BIT) || !(e & PM_SOFT_DIRTY_BIT)) goto out;
    if (tk__clear_soft_dirty() < 0) goto out;
    if (tk__pagemap_read(a, 1, &e) < 0) goto out;
    ok = (e & PM_PRESENT_BIT) && !(e & PM_SOFT_DIRTY_BIT); /* and clearing must clear it */
out:
    p->soft_dirty = ok;
    munmap((void *)page, p->page_size);
}

static void probe_pkeys(tk_probe_info *p)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
        p->pkeys_cpu = (c & (1u << 3)) && (c & (1u << 4)); /* PKU and OSPKE */

    int k = pkey_alloc(0, 0);
    if (k < 0) return;
    p->pkeys_kernel = true;
    pkey_free(k);

    int keys[64], n = 0;
    while (n < (int)(sizeof keys / sizeof keys[0])) {
        k = pkey_alloc(0, 0);
        if (k < 0) break;
        keys[n++] = k;
    }
    p->pkeys_available = n;
    while (n > 0) pkey_free(keys[--n]);
}

static void probe_guard(tk_probe_info *p)
{
    char *m = scratch_map(2 * p->page_size);
    if (!m) return;
    if (madvise(m, p->page_size, MADV_GUARD_INSTALL) == 0) {
        p->madv_guard_install = true;
        madvise(m, p->page_size, MADV_GUARD_REMOVE);
    }
    munmap(m, 2 * p->page_size);
}

static void probe_map2(tk_probe_info *p)
{
    int fd = tk__memfd("trapkit-probe", p->page_size);
    if (fd < 0) return;
    void *v = mmap(NULL, p->page_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (v != MAP_FAILED) {
        p->map2 = true;
        munmap(v, p->page_size);
    }
    close(fd);
}

static int probe_map_counts(tk_probe_info *p)
{
    int err = 0;
    char buf[64];
    p->max_map_count = -1;
    long r = read_small_file("/proc/sys/vm/max_map_count", buf, sizeof buf);
    if (r < 0) {
        err = (int)r;
    } else {
        char *end;
        long v = strtol(buf, &end, 10);
        if (end != buf)
            p->max_map_count = v;
        else
            err = -EIO;
    }

    p->map_count = -1;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return err ? err : -errno;
    long lines = 0;
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        if (c == '\n') lines++;
        last = c;
    }
    if (last != '\n') lines++;
    fclose(f);
    p->map_count = lines;
    return err;
}

/* ---- putting it together -------------------------------------------------- */

static tk_probe_info cached;
static int cached_err;
static pthread_once_t cached_once = PTHREAD_ONCE_INIT;

/* ---- TRAPKIT_PROBE_MASK ----------------------------------------------------
 * Hides features the machine has, so that the fallbacks an older kernel
 * needs run here (e.g. TRAPKIT_PROBE_MASK=wp_writable,wp_unpopulated,wp_async,
 * pagemap_scan,move is Linux 6.1 as far as trapkit can tell).  Everything
 * else in trapkit reads the probe, so what is hidden here is not used. */

struct mask_name {
    const char *name;
    uint64_t features; /* UFFD_FEATURE_* hidden */
    uint64_t ioctls;   /* bits of _UFFDIO_* hidden */
    const char *what;
};

static const struct mask_name mask_names[] = {
    {"uffd", ~UINT64_C(0), ~UINT64_C(0), "userfaultfd itself"},
    {"wp",
     UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_WP_ASYNC |
         UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
     UINT64_C(1) << _UFFDIO_WRITEPROTECT, "userfaultfd write-protect (Linux 5.7)"},
    {"wp_unpopulated", UFFD_FEATURE_WP_UNPOPULATED, 0, "UFFD_FEATURE_WP_UNPOPULATED (6.4)"},
    {"wp_async", UFFD_FEATURE_WP_ASYNC, 0, "UFFD_FEATURE_WP_ASYNC (6.7)"},
    {"wp_writable", 0, 0, "pages writable once their write protection is lifted (6.3)"},
    {"wp_shmem", UFFD_FEATURE_WP_HUGETLBFS_SHMEM, 0, "write-protect of shmem (5.19)"},
    {"sigbus", UFFD_FEATURE_SIGBUS, 0, "UFFD_FEATURE_SIGBUS (4.14)"},
    {"thread_id", UFFD_FEATURE_THREAD_ID, 0, "UFFD_FEATURE_THREAD_ID (4.14)"},
    {"events",
     UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMAP |
         UFFD_FEATURE_EVENT_FORK,
     0, "userfaultfd events (4.11)"},
    {"move", UFFD_FEATURE_MOVE, UINT64_C(1) << _UFFDIO_MOVE, "UFFDIO_MOVE (6.8)"},
    {"pagemap_scan", 0, 0, "PAGEMAP_SCAN (6.7)"},
    {"soft_dirty", 0, 0, "soft-dirty bits"},
    {"pkeys", 0, 0, "protection keys"},
    {"guard", 0, 0, "MADV_GUARD_INSTALL (6.13)"},
    {"fastexc", 0, 0, "the fast exception path (kernel/fastexc)"},
};

static void hide(tk_probe_info *p, const struct mask_name *m)
{
    p->uffd_features &= ~m->features;
    p->uffd_ioctls &= ~m->ioctls;
    if (m->features == ~UINT64_C(0)) p->uffd_access = TK_UFFD_NONE;
    if (!strcmp(m->name, "pagemap_scan")) p->pagemap_scan = false;
    if (!strcmp(m->name, "soft_dirty")) p->soft_dirty = false;
    if (!strcmp(m->name, "pkeys")) {
        p->pkeys_cpu = p->pkeys_kernel = false;
        p->pkeys_available = 0;
    }
    if (!strcmp(m->name, "guard")) p->madv_guard_install = false;
    if (!strcmp(m->name, "wp_writable") || (m->ioctls >> _UFFDIO_WRITEPROTECT & 1) ||
        m->features == ~UINT64_C(0))
        p->uffd_wp_unprotect_writable = false;
}

/* The next name of TRAPKIT_PROBE_MASK (comma- or space-separated) at *at:
 * its length, 0 at the end; *at moves past it and its separators. */
static size_t mask_token(const char **at, const char **name)
{
    while (**at == ',' || **at == ' ') (*at)++;
    size_t n = strcspn(*at, ", ");
    *name = *at;
    *at += n;
    return n;
}

bool tk__probe_hides(const char *feature)
{
    const char *at = tk__probe_mask(), *name;
    size_t n;
    while (at && (n = mask_token(&at, &name)))
        if (n == strlen(feature) && !strncmp(name, feature, n)) return true;
    return false;
}

/* Applies TRAPKIT_PROBE_MASK; an unknown name is reported on stderr and
 * hides nothing. */
static void apply_mask(tk_probe_info *p)
{
    const char *env = getenv("TRAPKIT_PROBE_MASK");
    if (!env || !*env) return;
    const char *at = env, *name;
    size_t n;
    while ((n = mask_token(&at, &name))) {
        const struct mask_name *m = NULL;
        for (size_t i = 0; i < sizeof mask_names / sizeof mask_names[0]; i++)
            if (strlen(mask_names[i].name) == n && !strncmp(mask_names[i].name, name, n))
                m = &mask_names[i];
        if (m) {
            hide(p, m);
        } else {
            char known[512] = "";
            for (size_t i = 0; i < sizeof mask_names / sizeof mask_names[0]; i++) {
                if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
                strncat(known, mask_names[i].name, sizeof known - strlen(known) - 1);
            }
            fprintf(stderr,
                    "trapkit: TRAPKIT_PROBE_MASK: unknown feature '%.*s' ignored (known: %s)\n",
                    (int)n, name, known);
        }
    }
}

const char *tk__probe_mask(void)
{
    const char *env = getenv("TRAPKIT_PROBE_MASK");
    return env && *env ? env : NULL;
}

static void probe_all(tk_probe_info *p, int *errp)
{
    int err = 0;
#define NOTE(x)                                                                                    \
    do {                                                                                           \
        int r_ = (x);                                                                              \
        if (r_ < 0 && !err) err = r_;                                                              \
    } while (0)

    memset(p, 0, sizeof *p);

    struct utsname u;
    if (uname(&u) == 0)
        copy_str(p->kernel_release, sizeof p->kernel_release, u.release);
    else
        NOTE(-errno);
    NOTE(probe_cpu_model(p));
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    p->ncpus = n > 0 ? (int)n : 1;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) ps = (long)getauxval(AT_PAGESZ);
    if (ps <= 0) {
        NOTE(-EINVAL);
        ps = 4096;
    }
    p->page_size = (size_t)ps;
    probe_huge_pages(p);
    probe_thp(p);

    probe_uffd(p);
    probe_pagemap_scan(p);
    probe_soft_dirty(p);
    probe_pkeys(p);
    probe_guard(p);
    probe_map2(p);

    apply_mask(p);

    unsigned long ss = getauxval(AT_MINSIGSTKSZ);
    p->minsigstksz = ss ? (size_t)ss : (size_t)MINSIGSTKSZ;

    p->mech_trap = tk__mech_default(p, 0);
    p->mech_dirty = tk__mech_default(p, TK_REGION_DIRTY);
    p->mech_noaccess = TK_MECH_POSIX;

    /* Last, so that no scratch mapping of the probes is counted. */
    NOTE(probe_map_counts(p));
#undef NOTE
    *errp = err;
}

static void probe_once(void)
{
    int saved = errno;
    probe_all(&cached, &cached_err);
    errno = saved;
}

const tk_probe_info *tk__probe(void)
{
    pthread_once(&cached_once, probe_once);
    return &cached;
}

int tk_probe(tk_probe_info *out)
{
    if (!out) return -EINVAL;
    *out = *tk__probe();
    return cached_err;
}

/* ---- JSON ------------------------------------------------------------------- */

/* An snprintf-like sink: writes what fits, always NUL-terminates (size > 0),
 * counts everything. */
struct sink {
    char *buf;
    size_t size;
    size_t len;
};

static void put(struct sink *s, const char *d, size_t n)
{
    if (s->len + 1 < s->size) {
        size_t room = s->size - 1 - s->len;
        size_t k = n < room ? n : room;
        memcpy(s->buf + s->len, d, k);
        s->buf[s->len + k] = 0;
    }
    s->len += n;
}

static void puts_(struct sink *s, const char *str)
{
    put(s, str, strlen(str));
}

__attribute__((format(printf, 2, 3))) static void putf(struct sink *s, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = (int)sizeof tmp - 1; /* only short numbers go here */
    put(s, tmp, (size_t)n);
}

static void put_json_string(struct sink *s, const char *str)
{
    put(s, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
        switch (*c) {
        case '"':
            puts_(s, "\\\"");
            break;
        case '\\':
            puts_(s, "\\\\");
            break;
        case '\n':
            puts_(s, "\\n");
            break;
        case '\r':
            puts_(s, "\\r");
            break;
        case '\t':
            puts_(s, "\\t");
            break;
        case '\b':
            puts_(s, "\\b");
            break;
        case '\f':
            puts_(s, "\\f");
            break;
        default:
            if (*c < 0x20 || *c == 0x7f)
                putf(s, "\\u%04x", *c);
            else
                put(s, (const char *)c, 1);
        }
    }
    put(s, "\"", 1);
}

static void key(struct sink *s, const char *k)
{
    if (s->len > 1) put(s, ",", 1);
    put_json_string(s, k);
    put(s, ":", 1);
}

static void put_bool(struct sink *s, const char *k, bool v)
{
    key(s, k);
    puts_(s, v ? "true" : "false");
}

int tk_probe_json(const tk_probe_info *p, char *buf, size_t size)
{
    if (!p || (!buf && size)) return -EINVAL;
    struct sink s = {buf, size, 0};
    if (size) buf[0] = 0;

    put(&s, "{", 1);
    key(&s, "kernel_release");
    put_json_string(&s, p->kernel_release);
    key(&s, "cpu_model");
    put_json_string(&s, p->cpu_model);
    key(&s, "ncpus");
    putf(&s, "%d", p->ncpus);
    key(&s, "page_size");
    putf(&s, "%zu", p->page_size);
    key(&s, "huge_page_sizes");
    put(&s, "[", 1);
    for (int i = 0; i < p->n_huge_page_sizes && i < TK_PROBE_MAX_HUGE; i++)
        putf(&s, "%s%zu", i ? "," : "", p->huge_page_sizes[i]);
    put(&s, "]", 1);
    key(&s, "thp_mode");
    put_json_string(&s, p->thp_mode);

    key(&s, "uffd_access");
    put_json_string(&s, uffd_access_name(p->uffd_access));
    key(&s, "uffd_features");
    put(&s, "[", 1);
    bool first = true;
    for (unsigned b = 0; b < 64; b++) {
        if (!(p->uffd_features & (UINT64_C(1) << b))) continue;
        if (!first) put(&s, ",", 1);
        first = false;
        const char *name = tk_uffd_feature_name(b);
        if (name) {
            put_json_string(&s, name);
        } else {
            char tmp[16];
            snprintf(tmp, sizeof tmp, "bit%u", b);
            put_json_string(&s, tmp);
        }
    }
    put(&s, "]", 1);
    key(&s, "uffd_features_mask");
    putf(&s, "%llu", (unsigned long long)p->uffd_features);
    key(&s, "uffd_ioctls");
    put(&s, "[", 1);
    first = true;
    for (unsigned b = 0; b < 64; b++) {
        if (!(p->uffd_ioctls & (UINT64_C(1) << b))) continue;
        if (!first) put(&s, ",", 1);
        first = false;
        const char *name = uffd_ioctl_name(b);
        if (name) {
            put_json_string(&s, name);
        } else {
            char tmp[16];
            snprintf(tmp, sizeof tmp, "bit%u", b);
            put_json_string(&s, tmp);
        }
    }
    put(&s, "]", 1);
    key(&s, "uffd_ioctls_mask");
    putf(&s, "%llu", (unsigned long long)p->uffd_ioctls);

    put_bool(&s, "uffd_wp_unprotect_writable", p->uffd_wp_unprotect_writable);
    put_bool(&s, "pagemap_scan", p->pagemap_scan);
    put_bool(&s, "soft_dirty", p->soft_dirty);
    put_bool(&s, "pkeys_cpu", p->pkeys_cpu);
    put_bool(&s, "pkeys_kernel", p->pkeys_kernel);
    key(&s, "pkeys_available");
    putf(&s, "%d", p->pkeys_available);
    put_bool(&s, "madv_guard_install", p->madv_guard_install);
    key(&s, "max_map_count");
    putf(&s, "%ld", p->max_map_count);
    key(&s, "map_count");
    putf(&s, "%ld", p->map_count);
    key(&s, "minsigstksz");
    putf(&s, "%zu", p->minsigstksz);

    key(&s, "mech_trap");
    put_json_string(&s, tk_mech_name(p->mech_trap));
    key(&s, "mech_dirty");
    put_json_string(&s, tk_mech_name(p->mech_dirty));
    key(&s, "mech_noaccess");
    put_json_string(&s, tk_mech_name(p->mech_noaccess));
    put_bool(&s, "map2", p->map2);
    key(&s, "probe_mask");
    if (tk__probe_mask())
        put_json_string(&s, tk__probe_mask());
    else
        puts_(&s, "null");
    put(&s, "}", 1);

    if (s.len > INT_MAX) return -EOVERFLOW;
    return (int)s.len;
}
