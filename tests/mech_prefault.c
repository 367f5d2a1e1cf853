/* A write by the kernel on the program's behalf: read(2) into a protected
 * buffer.  The kernel does not raise a fault the program can handle; on
 * posix and uffd-sigbus the call fails with EFAULT, and on uffd-thread the
 * kernel waits for trapkit's handler thread, which resolves it.  Either way
 * nothing is lost, and after tk_prefault() the call succeeds everywhere with
 * the region's handler having seen each page. */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testutil.h"

/* atomic: on uffd-thread the handler runs on trapkit's thread */
static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    return tk_test_open(f);
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page(), n = 8;
    tk_region *r = tk_test_region(m, n, 0, on_fault, NULL);
    char *base = tk_region_base(r);

    /* a file with 4 pages of data */
    int fd = memfd_create("prefault-test", 0);
    CHECK(fd >= 0);
    char *data = malloc(4 * ps);
    for (size_t i = 0; i < 4 * ps; i++) data[i] = (char)(i * 7 + 1);
    CHECK(write(fd, data, 4 * ps) == (ssize_t)(4 * ps));

    /* the buffer spans pages 2..5, read-only; reads are fine */
    char *buf = base + 2 * ps + 100;
    memset(base, 0, n * ps);
    CHECK_OK(tk_protn(r, base + 2 * ps, 4 * ps, TK_PROT_READ));
    ssize_t got = pread(fd, buf, 3 * ps, 0);
    if (got < 0) {
        CHECK(errno == EFAULT);
        CHECK(m != TK_MECH_UFFD_THREAD);
        CHECK(faults == 0); /* the kernel raised nothing for the handler */
        printf("read into a protected buffer on %s: EFAULT, as documented\n", tk_mech_name(m));
    } else {
        /* uffd-thread: the handler thread resolved the kernel's fault */
        CHECK(m == TK_MECH_UFFD_THREAD);
        CHECK(got == (ssize_t)(3 * ps) && memcmp(buf, data, 3 * ps) == 0);
        CHECK(faults >= 1);
        printf("read into a protected buffer on %s: resolved by the handler thread\n",
               tk_mech_name(m));
        CHECK_OK(tk_protn(r, base + 2 * ps, 4 * ps, TK_PROT_READ));
        memset(data, 0x33, 4 * ps); /* different data for the second read */
        CHECK(pwrite(fd, data, 4 * ps, 0) == (ssize_t)(4 * ps));
    }
    /* nothing outside the buffer was touched */
    CHECK(base[2 * ps + 99] == 0 && base[2 * ps + 100 + 3 * ps] == 0);

    /* tk_prefault: the handler runs for each of the 4 pages the buffer
     * touches, then the read succeeds. */
    int before = faults;
    CHECK_OK(tk_prefault(buf, 3 * ps, TK_ACCESS_WRITE));
    CHECK(faults == before + 4);
    for (int p = 2; p < 6; p++) CHECK(tk_protection(r, base + p * ps) == TK_PROT_RW);
    CHECK(pread(fd, buf, 3 * ps, 0) == (ssize_t)(3 * ps));
    CHECK(memcmp(buf, data, 3 * ps) == 0);
    CHECK(base[2 * ps + 99] == 0); /* the prefault wrote nothing */

    /* Read access: no-access pages made readable for write(2). */
    CHECK_OK(tk_protn(r, base, 2 * ps, TK_PROT_NONE));
    before = faults;
    CHECK_OK(tk_prefault(base, 2 * ps, TK_ACCESS_READ));
    CHECK(faults == before + 2);
    CHECK(pwrite(fd, base, 2 * ps, 0) == (ssize_t)(2 * ps));

    CHECK_ERR(tk_prefault(base, ps, TK_ACCESS_EXEC), -EINVAL);
    CHECK_OK(tk_region_destroy(r));
    free(data);
    close(fd);
    printf("prefault on %s: ok\n", tk_mech_name(m));
    return 0;
}
