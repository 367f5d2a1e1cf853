/* tests/probe_facts.c - tk_probe() reports what the machine really has.
 *
 * Cross-checks the probe against plain libc and /proc: the cached result is
 * stable, page size and vm.max_map_count match, a reported userfaultfd can be
 * opened, pkeys in the kernel imply pkeys in the CPU, and tk_probe_json keeps
 * the snprintf contract.  Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/userfaultfd.h>
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

/* Field by field: struct copies need not copy padding. */
static bool same(const tk_probe_info *a, const tk_probe_info *b)
{
    bool eq = strcmp(a->kernel_release, b->kernel_release) == 0 &&
              strcmp(a->cpu_model, b->cpu_model) == 0 && a->ncpus == b->ncpus &&
              a->page_size == b->page_size && a->n_huge_page_sizes == b->n_huge_page_sizes &&
              strcmp(a->thp_mode, b->thp_mode) == 0 && a->uffd_access == b->uffd_access &&
              a->uffd_features == b->uffd_features && a->uffd_ioctls == b->uffd_ioctls &&
              a->pagemap_scan == b->pagemap_scan && a->soft_dirty == b->soft_dirty &&
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
    } else {
        CHECK(a.uffd_features == 0 && a.uffd_ioctls == 0,
              "no userfaultfd but features/ioctls reported");
    }

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
