/* tests/probe_facts.c - tk_probe() reports what the machine really has.
 *
 * Cross-checks the probe against plain libc, system calls, CPUID and /proc,
 * each fact established here without trapkit and compared in both
 * directions (a probe that misses a feature would turn its mechanism's tests
 * into skips): the cached result is stable; page size and vm.max_map_count
 * match; userfaultfd opens exactly when the probe says so, with the features
 * and write-protect ioctls it reports, and whether a write after lifting a
 * write protection takes a fault; PAGEMAP_SCAN, soft-dirty bits, pkeys
 * (CPUID PKU+OSPKE, pkey_alloc), MADV_GUARD_INSTALL and memfd work exactly
 * when it says so; and tk_probe_json keeps the snprintf contract.  Exit 0
 * pass, 1 fail, 77 skip.
 */
#include <cpuid.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <linux/userfaultfd.h>
#include <sys/resource.h>
#include <sys/ioctl.h>

#include <trapkit/trapkit.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static long read_long(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* Opens a userfaultfd the way the probe says it can. */
static int open_uffd(enum tk_uffd_access a)
{
    switch (a) {
    case TK_UFFD_SYSCALL:
        return (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    case TK_UFFD_DEVICE: {
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev < 0) return -1;
        int fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
        close(dev);
        return fd;
    }
    case TK_UFFD_USER_MODE_ONLY:
        return (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    default:
        return -1;
    }
}

/* ---- each fact, without trapkit --------------------------------------- */

/* Whether any of the three ways to obtain a userfaultfd works. */
static bool uffd_opens(void)
{
    for (int a = TK_UFFD_SYSCALL; a <= TK_UFFD_USER_MODE_ONLY; a++) {
        int fd = open_uffd((enum tk_uffd_access)a);
        if (fd >= 0) {
            close(fd);
            return true;
        }
    }
    return false;
}

/* The ioctls a range registered for write protection allows, or 0. */
static uint64_t wp_ioctls(enum tk_uffd_access a, uint64_t features, size_t ps)
{
    uint64_t out = 0;
    int fd = open_uffd(a);
    if (fd < 0) return 0;
    /* as the probe asks: write protection and, where offered, of pages
     * never touched */
    struct uffdio_api api = {.api = UFFD_API,
                             .features = features & (UFFD_FEATURE_PAGEFAULT_FLAG_WP | (1u << 13))};
    void *m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ioctl(fd, UFFDIO_API, &api) == 0 && m != MAP_FAILED) {
        struct uffdio_register reg = {.range = {(uintptr_t)m, ps}, .mode = UFFDIO_REGISTER_MODE_WP};
        if (ioctl(fd, UFFDIO_REGISTER, &reg) == 0) out = reg.ioctls;
    }
    if (m != MAP_FAILED) munmap(m, ps);
    close(fd);
    return out;
}

/* Writes to 8 populated pages after a write protection on them was set
 * and lifted take no page fault: the kernel's own fault counter (perf, or
 * the thread's rusage where perf events are refused) sees none.  -1 if
 * write protection cannot be set here. */
static int wp_unprotect_writable(enum tk_uffd_access a, size_t ps)
{
    enum { N = 8 };
    int fd = open_uffd(a);
    if (fd < 0) return -1;
    int out = -1;
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
    char *m = mmap(NULL, N * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED && ioctl(fd, UFFDIO_API, &api) == 0) {
        for (int i = 0; i < N; i++) m[i * ps] = 1;
        struct uffdio_register reg = {.range = {(uintptr_t)m, N * ps},
                                      .mode = UFFDIO_REGISTER_MODE_WP};
        struct uffdio_writeprotect wp = {.range = {(uintptr_t)m, N * ps},
                                         .mode = UFFDIO_WRITEPROTECT_MODE_WP};
        struct uffdio_writeprotect unwp = {.range = {(uintptr_t)m, N * ps}, .mode = 0};
        if (ioctl(fd, UFFDIO_REGISTER, &reg) == 0 && ioctl(fd, UFFDIO_WRITEPROTECT, &wp) == 0 &&
            ioctl(fd, UFFDIO_WRITEPROTECT, &unwp) == 0) {
            struct perf_event_attr pa = {.type = PERF_TYPE_SOFTWARE,
                                         .size = sizeof pa,
                                         .config = PERF_COUNT_SW_PAGE_FAULTS,
                                         .exclude_hv = 1};
            int pfd = (int)syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0);
            struct rusage r0, r1;
            long long f0 = 0, f1 = 0;
            if (pfd >= 0 && read(pfd, &f0, sizeof f0) != sizeof f0) f0 = -1;
            getrusage(RUSAGE_THREAD, &r0);
            for (int i = 0; i < N; i++) ((volatile char *)m)[i * ps] = 2;
            getrusage(RUSAGE_THREAD, &r1);
            if (pfd >= 0 && read(pfd, &f1, sizeof f1) != sizeof f1) f1 = -1;
            long faults = pfd >= 0 ? (long)(f1 - f0) : r1.ru_minflt - r0.ru_minflt;
            /* none, or one per page: nothing in between is expected */
            if (faults >= N) out = 0;
            if (faults == 0) out = 1;
            if (pfd >= 0) close(pfd);
        }
    }
    if (m != MAP_FAILED) munmap(m, N * ps);
    close(fd);
    return out;
}

/* PAGEMAP_SCAN (Linux 6.7), its ABI written out here */
struct scan_region {
    uint64_t start, end, categories;
};
struct scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define SCAN_IOCTL _IOWR('f', 16, struct scan_arg)

static bool pagemap_scan_works(size_t ps)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    char *m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool ok = false;
    if (fd >= 0 && m != MAP_FAILED) {
        m[0] = 1;
        struct scan_region vec[1];
        struct scan_arg arg = {.size = sizeof arg,
                               .start = (uintptr_t)m,
                               .end = (uintptr_t)m + ps,
                               .vec = (uintptr_t)vec,
                               .vec_len = 1,
                               .category_mask = 1u << 3, /* PAGE_IS_PRESENT */
                               .return_mask = 1u << 3};
        ok = ioctl(fd, SCAN_IOCTL, &arg) == 1 && vec[0].start == (uintptr_t)m;
    }
    if (m != MAP_FAILED) munmap(m, ps);
    if (fd >= 0) close(fd);
    return ok;
}

static uint64_t pagemap_entry(const void *addr, size_t ps)
{
    uint64_t e = 0;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    if (pread(fd, &e, 8, (off_t)((uintptr_t)addr / ps * 8)) != 8) e = 0;
    close(fd);
    return e;
}

/* A written page shows bit 55 and clear_refs "4" clears it. */
static bool soft_dirty_works(size_t ps)
{
    volatile char *m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    bool ok = false;
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd >= 0 && write(fd, "4", 1) == 1) {
        m[0] = 1;
        uint64_t dirty = pagemap_entry((const void *)m, ps);
        if (write(fd, "4", 1) == 1) {
            uint64_t clean = pagemap_entry((const void *)m, ps);
            ok = (dirty >> 55 & 1) && (clean >> 63 & 1) && !(clean >> 55 & 1);
        }
    }
    if (fd >= 0) close(fd);
    munmap((void *)m, ps);
    return ok;
}

static bool cpu_has_pkeys(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 3 & 1) && (c >> 4 & 1);
}

static bool kernel_has_pkeys(void)
{
    long k = syscall(SYS_pkey_alloc, 0, 0);
    if (k < 0) return false;
    syscall(SYS_pkey_free, k);
    return true;
}

static bool guard_works(size_t ps)
{
    char *m = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    bool ok = madvise(m, ps, 102 /* MADV_GUARD_INSTALL */) == 0;
    munmap(m, 2 * ps);
    return ok;
}

static bool memfd_maps(size_t ps)
{
    int fd = (int)syscall(SYS_memfd_create, "probe-facts", 1u /* MFD_CLOEXEC */);
    if (fd < 0) return false;
    bool ok = ftruncate(fd, (off_t)ps) == 0;
    void *v = ok ? mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ok = v != MAP_FAILED;
    if (ok) munmap(v, ps);
    close(fd);
    return ok;
}

/* Field by field: struct copies need not copy padding. */
static bool same(const tk_probe_info *a, const tk_probe_info *b)
{
    bool eq = strcmp(a->kernel_release, b->kernel_release) == 0 &&
              strcmp(a->cpu_model, b->cpu_model) == 0 && a->ncpus == b->ncpus &&
              a->page_size == b->page_size && a->n_huge_page_sizes == b->n_huge_page_sizes &&
              strcmp(a->thp_mode, b->thp_mode) == 0 && a->uffd_access == b->uffd_access &&
              a->uffd_features == b->uffd_features && a->uffd_ioctls == b->uffd_ioctls &&
              a->pagemap_scan == b->pagemap_scan && a->soft_dirty == b->soft_dirty &&
              a->uffd_wp_unprotect_writable == b->uffd_wp_unprotect_writable &&
              a->pkeys_cpu == b->pkeys_cpu && a->pkeys_kernel == b->pkeys_kernel &&
              a->pkeys_available == b->pkeys_available &&
              a->madv_guard_install == b->madv_guard_install &&
              a->max_map_count == b->max_map_count && a->map_count == b->map_count &&
              a->minsigstksz == b->minsigstksz && a->mech_trap == b->mech_trap &&
              a->mech_dirty == b->mech_dirty && a->mech_noaccess == b->mech_noaccess &&
              a->map2 == b->map2;
    for (int i = 0; eq && i < a->n_huge_page_sizes && i < TK_PROBE_MAX_HUGE; i++)
        eq = a->huge_page_sizes[i] == b->huge_page_sizes[i];
    return eq;
}

int main(void)
{
    /* the machine as it is: nothing hidden */
    unsetenv("TRAPKIT_PROBE_MASK");
    tk_probe_info a, b;
    memset(&a, 0xa5, sizeof a);
    memset(&b, 0x5a, sizeof b);
    int ra = tk_probe(&a);
    int rb = tk_probe(&b);
    CHECK(ra <= 0 && ra > -4096, "tk_probe returned %d", ra);
    CHECK(ra == rb, "tk_probe returned %d, then %d", ra, rb);
    if (ra < 0) fprintf(stderr, "note: tk_probe: %s\n", tk_strerror(ra));
    CHECK(same(&a, &b), "two calls of tk_probe differ");
    CHECK(tk_probe(NULL) == -EINVAL, "tk_probe(NULL) is not -EINVAL");

    long ps = sysconf(_SC_PAGESIZE);
    CHECK(a.page_size == (size_t)ps, "page_size %zu, sysconf says %ld", a.page_size, ps);
    /* the kernel's figure (smaller than the constant MINSIGSTKSZ where the
     * CPU has no AVX-512: 1776 bytes with AVX2 only); any x86-64 frame holds
     * the 512-byte legacy FP area, the XSAVE header and the ucontext */
    unsigned long aux = getauxval(AT_MINSIGSTKSZ);
    CHECK(a.minsigstksz == (aux ? aux : (size_t)MINSIGSTKSZ), "minsigstksz %zu, AT_MINSIGSTKSZ %lu",
          a.minsigstksz, aux);
    CHECK(a.minsigstksz >= 1024, "minsigstksz %zu < 1024", a.minsigstksz);
    CHECK(a.ncpus >= 1, "ncpus %d", a.ncpus);
    CHECK(a.kernel_release[0] != 0, "empty kernel_release");
    CHECK(a.n_huge_page_sizes >= 0 && a.n_huge_page_sizes <= TK_PROBE_MAX_HUGE,
          "n_huge_page_sizes %d", a.n_huge_page_sizes);
    for (int i = 0; i < a.n_huge_page_sizes && i < TK_PROBE_MAX_HUGE; i++)
        CHECK(a.huge_page_sizes[i] > a.page_size && a.huge_page_sizes[i] % a.page_size == 0,
              "huge page size %zu", a.huge_page_sizes[i]);

    long mmc = read_long("/proc/sys/vm/max_map_count");
    if (mmc >= 0)
        CHECK(a.max_map_count == mmc, "max_map_count %ld, /proc says %ld", a.max_map_count, mmc);
    else
        fprintf(stderr, "note: /proc/sys/vm/max_map_count unreadable, not compared\n");
    CHECK(a.map_count > 0, "map_count %ld", a.map_count);

    if (a.uffd_access != TK_UFFD_NONE) {
        int fd = open_uffd(a.uffd_access);
        CHECK(fd >= 0, "probe says userfaultfd access %d but opening fails: %s", (int)a.uffd_access,
              strerror(errno));
        if (fd >= 0) {
            struct uffdio_api api = {.api = UFFD_API, .features = 0};
            CHECK(ioctl(fd, UFFDIO_API, &api) == 0, "UFFDIO_API: %s", strerror(errno));
            CHECK(api.features == a.uffd_features, "features 0x%llx, probe says 0x%llx",
                  (unsigned long long)api.features, (unsigned long long)a.uffd_features);
            close(fd);
        }
        CHECK(a.uffd_ioctls == wp_ioctls(a.uffd_access, a.uffd_features, a.page_size),
              "write-protect ioctls 0x%llx, registering a page here gives 0x%llx",
              (unsigned long long)a.uffd_ioctls,
              (unsigned long long)wp_ioctls(a.uffd_access, a.uffd_features, a.page_size));
        int w = wp_unprotect_writable(a.uffd_access, a.page_size);
        if (w < 0)
            CHECK(!a.uffd_wp_unprotect_writable,
                  "write protection cannot be set here, yet the probe says lifting it leaves "
                  "pages writable");
        else
            CHECK(w == a.uffd_wp_unprotect_writable,
                  "writes after a lifted write protection take %s here, the probe says %d",
                  w ? "no fault" : "a fault each", a.uffd_wp_unprotect_writable);
    } else {
        CHECK(a.uffd_features == 0 && a.uffd_ioctls == 0 && !a.uffd_wp_unprotect_writable,
              "no userfaultfd but features/ioctls reported");
    }
    bool opens = uffd_opens();
    CHECK(opens == (a.uffd_access != TK_UFFD_NONE), "userfaultfd %s here, the probe says %s",
          opens ? "opens" : "does not open", a.uffd_access != TK_UFFD_NONE ? "yes" : "no");
    bool scan = pagemap_scan_works(a.page_size);
    CHECK(scan == a.pagemap_scan, "PAGEMAP_SCAN %s here, the probe says %d",
          scan ? "works" : "fails", a.pagemap_scan);
    bool sd = soft_dirty_works(a.page_size);
    CHECK(sd == a.soft_dirty, "soft-dirty bits %s here, the probe says %d",
          sd ? "work" : "do not work", a.soft_dirty);
    CHECK(cpu_has_pkeys() == a.pkeys_cpu, "CPUID PKU+OSPKE %d, the probe says %d", cpu_has_pkeys(),
          a.pkeys_cpu);
    CHECK(kernel_has_pkeys() == a.pkeys_kernel, "pkey_alloc %s, the probe says %d",
          kernel_has_pkeys() ? "works" : "fails", a.pkeys_kernel);
    CHECK(guard_works(a.page_size) == a.madv_guard_install,
          "MADV_GUARD_INSTALL %s, the probe says %d", guard_works(a.page_size) ? "works" : "fails",
          a.madv_guard_install);
    CHECK(memfd_maps(a.page_size) == a.map2, "memfd %s, the probe says %d",
          memfd_maps(a.page_size) ? "maps" : "fails", a.map2);

    CHECK(!a.pkeys_kernel || a.pkeys_cpu, "pkey_alloc works but CPUID has no PKU/OSPKE");
    CHECK(a.pkeys_kernel ? a.pkeys_available > 0 : a.pkeys_available == 0,
          "pkeys_kernel %d but pkeys_available %d", a.pkeys_kernel, a.pkeys_available);
    CHECK(a.pkeys_available >= 0 && a.pkeys_available <= 16, "pkeys_available %d",
          a.pkeys_available);
    CHECK(a.mech_noaccess == TK_MECH_POSIX, "mech_noaccess %s", tk_mech_name(a.mech_noaccess));
    CHECK(a.mech_trap > TK_MECH_AUTO && a.mech_trap < TK_MECH_COUNT_, "mech_trap %d",
          (int)a.mech_trap);
    CHECK(a.mech_dirty > TK_MECH_AUTO && a.mech_dirty < TK_MECH_COUNT_, "mech_dirty %d",
          (int)a.mech_dirty);

    CHECK(tk_uffd_feature_name(0) && strcmp(tk_uffd_feature_name(0), "PAGEFAULT_FLAG_WP") == 0,
          "name of bit 0");
    CHECK(tk_uffd_feature_name(16) && strcmp(tk_uffd_feature_name(16), "MOVE") == 0,
          "name of bit 16");
    CHECK(tk_uffd_feature_name(63) == NULL, "bit 63 has a name");

    /* JSON and the snprintf contract. */
    int n = tk_probe_json(&a, NULL, 0);
    CHECK(n > 2, "tk_probe_json needs %d bytes", n);
    if (n > 2) {
        char *full = malloc((size_t)n + 1);
        if (!full) {
            puts("SKIP: out of memory");
            return 77;
        }
        memset(full, 'x', (size_t)n + 1);
        int m = tk_probe_json(&a, full, (size_t)n + 1);
        CHECK(m == n, "second call says %d, first %d", m, n);
        CHECK(full[n] == 0 && strlen(full) == (size_t)n, "not NUL-terminated at %d", n);
        CHECK(full[0] == '{' && full[n - 1] == '}', "not an object: %.20s...", full);
        CHECK(strstr(full, "\"page_size\"") != NULL, "no page_size key");

        /* Too small: writes size-1 bytes of the same text and a NUL, returns n,
         * touches nothing beyond size. */
        size_t small = (size_t)n / 2;
        char *part = malloc(small + 8);
        if (part) {
            memset(part, '#', small + 8);
            int k = tk_probe_json(&a, part, small);
            CHECK(k == n, "with a %zu-byte buffer it returned %d, not %d", small, k, n);
            CHECK(part[small - 1] == 0, "truncated output not NUL-terminated");
            CHECK(memcmp(part, full, small - 1) == 0, "truncated output differs");
            for (size_t i = small; i < small + 8; i++)
                CHECK(part[i] == '#', "wrote beyond the buffer at %zu", i);
            memset(part, '#', small + 8);
            k = tk_probe_json(&a, part, 1);
            CHECK(k == n && part[0] == 0 && part[1] == '#', "size 1: returned %d", k);
            free(part);
        }
        free(full);
    }
    CHECK(tk_probe_json(NULL, NULL, 0) < 0, "tk_probe_json(NULL) succeeded");

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("probe_facts: ok (uffd access %d, features 0x%llx, pagemap_scan %d, soft_dirty %d, "
           "pkeys %d/%d/%d)\n",
           (int)a.uffd_access, (unsigned long long)a.uffd_features, a.pagemap_scan, a.soft_dirty,
           a.pkeys_cpu, a.pkeys_kernel, a.pkeys_available);
    return 0;
}
