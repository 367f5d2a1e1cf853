/* Bad input gets a negative errno and a message that says what is wrong,
 * never a crash or a silent success, and leaves existing regions intact. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "testutil.h"

static void expect_msg(const char *needle)
{
    const char *msg = tk_last_error();
    if (!msg || !strstr(msg, needle)) {
        fprintf(stderr, "expected a message containing \"%s\", got \"%s\"\n", needle,
                msg ? msg : "(null)");
        exit(1);
    }
}

#define EXPECT_FAIL(call, err, needle)                                                             \
    do {                                                                                           \
        CHECK_ERR(call, err);                                                                      \
        expect_msg(needle);                                                                        \
    } while (0)

int main(void)
{
    size_t ps = tk_test_page();
    tk_region *r = NULL, *r2 = NULL;
    tk_region_config c;

    /* region creation */
    EXPECT_FAIL(tk_region_create(NULL, &r), -EINVAL, "config is NULL");
    c = (tk_region_config){.len = ps};
    EXPECT_FAIL(tk_region_create(&c, NULL), -EINVAL, "out is NULL");
    c = (tk_region_config){.len = 0};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "length 0");
    c = (tk_region_config){.len = ps + 1};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "multiple of the logical page size");
    c = (tk_region_config){.len = 4 * ps, .page_size = 3 * ps};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "not a power of two");
    c = (tk_region_config){.len = 4 * ps, .page_size = 48};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "not a power of two from 64 bytes");
    c = (tk_region_config){.len = 4 * ps, .page_size = ps / 2, .mech = TK_MECH_UFFD_THREAD};
    EXPECT_FAIL(tk_region_create(&c, &r), -EOPNOTSUPP, "cannot express sub-page protection");
    c = (tk_region_config){.len = 4 * ps, .flags = 0x80};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "unknown flags");
    c = (tk_region_config){.len = 4 * ps, .mech = (enum tk_mech)99};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "unknown mechanism");

    char *mem = mmap(NULL, 16 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    c = (tk_region_config){.addr = mem + 1, .len = 4 * ps};
    EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "not aligned");
    c = (tk_region_config){.addr = mem + ps, .len = 4 * ps, .page_size = 2 * ps};
    if ((uintptr_t)(mem + ps) % (2 * ps))
        EXPECT_FAIL(tk_region_create(&c, &r), -EINVAL, "not aligned");
    /* MAP2 over the caller's range: a memfd replaces it (zeros), views see it */
    mem[0] = 5;
    c = (tk_region_config){.addr = mem, .len = 4 * ps, .flags = TK_REGION_MAP2};
    CHECK_OK(tk_region_create(&c, &r));
    CHECK(mem[0] == 0);
    char *v2;
    CHECK_OK(tk_map2(r, TK_PROT_RW, (void **)&v2));
    v2[ps + 3] = 9;
    CHECK(mem[ps + 3] == 9);
    CHECK_OK(tk_region_destroy(r));
    CHECK(mem[ps + 3] == 9); /* the caller's range keeps the memfd's pages, read-write */
    mem[ps + 3] = 0;
    CHECK(munmap(mem + 12 * ps, 4 * ps) == 0);
    c = (tk_region_config){.addr = mem + 8 * ps, .len = 8 * ps};
    EXPECT_FAIL(tk_region_create(&c, &r), -ENOMEM, "not all mapped");

    /* overlap */
    c = (tk_region_config){.addr = mem, .len = 8 * ps};
    CHECK_OK(tk_region_create(&c, &r));
    c = (tk_region_config){.addr = mem + 4 * ps, .len = 4 * ps};
    EXPECT_FAIL(tk_region_create(&c, &r2), -EEXIST, "overlaps");
    c = (tk_region_config){.addr = mem + 7 * ps, .len = 2 * ps};
    EXPECT_FAIL(tk_region_create(&c, &r2), -EEXIST, "overlaps");
    c = (tk_region_config){.addr = mem + 8 * ps, .len = 4 * ps}; /* adjacent is fine */
    CHECK_OK(tk_region_create(&c, &r2));
    CHECK(tk_region_find(mem) == r && tk_region_find(mem + 8 * ps) == r2);
    CHECK(tk_region_find(mem + 12 * ps) == NULL);

    /* protection calls */
    EXPECT_FAIL(tk_protect(NULL, mem, ps, TK_PROT_READ), -EINVAL, "NULL");
    EXPECT_FAIL(tk_protect(r, mem + 8 * ps, ps, TK_PROT_READ), -EINVAL, "not inside the region");
    EXPECT_FAIL(tk_protect(r, mem + 6 * ps, 4 * ps, TK_PROT_READ), -EINVAL,
                "not inside the region");
    EXPECT_FAIL(tk_protect(r, mem - ps, ps, TK_PROT_READ), -EINVAL, "not inside the region");
    EXPECT_FAIL(tk_protect(r, mem + 1, ps, TK_PROT_READ), -EINVAL, "multiples");
    EXPECT_FAIL(tk_protect(r, mem, ps - 1, TK_PROT_READ), -EINVAL, "multiples");
    EXPECT_FAIL(tk_protect(r, mem, 0, TK_PROT_READ), -EINVAL, "multiples");
    EXPECT_FAIL(tk_protect(r, mem, ps, 2), -EINVAL, "TK_PROT_NONE, TK_PROT_READ or TK_PROT_RW");
    EXPECT_FAIL(tk_protect(r, mem, ps, 7), -EINVAL, "TK_PROT_NONE, TK_PROT_READ or TK_PROT_RW");
    EXPECT_FAIL(tk_protection(r, mem + 8 * ps), -EINVAL, "not inside the region");
    /* nothing changed by the failures */
    for (int i = 0; i < 8; i++) CHECK(tk_protection(r, mem + i * ps) == TK_PROT_RW);
    mem[0] = 1;

    /* DIRTY and MAP2 on a region without them */
    uint64_t bm[4];
    EXPECT_FAIL(tk_dirty(r, bm, 256), -EINVAL, "TK_REGION_DIRTY");
    void *view;
    EXPECT_FAIL(tk_map2(r, TK_PROT_RW, &view), -EINVAL, "TK_REGION_MAP2");
    tk_region *d;
    c = (tk_region_config){.len = 128 * ps, .flags = TK_REGION_DIRTY};
    CHECK_OK(tk_region_create(&c, &d));
    EXPECT_FAIL(tk_dirty(d, bm, 100), -EINVAL, "bitmap has 100 bits");
    EXPECT_FAIL(tk_dirty(d, NULL, 128), -EINVAL, "bitmap");
    CHECK(tk_dirty(d, bm, 128) >= 0);
    CHECK_OK(tk_region_destroy(d));

    /* mechanisms */
    setenv("TRAPKIT_BACKEND", "bogus", 1);
    c = (tk_region_config){.len = 4 * ps};
    EXPECT_FAIL(tk_region_create(&c, &d), -EINVAL, "TRAPKIT_BACKEND=bogus");
    setenv("TRAPKIT_BACKEND", "posix", 1);
    CHECK_OK(tk_region_create(&c, &d));
    CHECK(tk_region_mech(d) == TK_MECH_POSIX);
    CHECK_OK(tk_region_destroy(d));
    unsetenv("TRAPKIT_BACKEND");
    for (int m = TK_MECH_POSIX; m < TK_MECH_COUNT_; m++) {
        c = (tk_region_config){.len = 4 * ps, .mech = (enum tk_mech)m};
        int err = tk_region_create(&c, &d);
        if (err == 0) {
            CHECK(tk_region_mech(d) == (enum tk_mech)m);
            CHECK_OK(tk_region_destroy(d));
            printf("  %-13s available\n", tk_mech_name((enum tk_mech)m));
        } else {
            CHECK_ERR(err, -EOPNOTSUPP);
            expect_msg("not available here");
            printf("  %-13s %s\n", tk_mech_name((enum tk_mech)m), tk_last_error());
        }
    }
    CHECK(tk_mech_parse("uffd-sigbus") == TK_MECH_UFFD_SIGBUS);
    CHECK(tk_mech_parse("uffd") == TK_MECH_COUNT_);
    CHECK(tk_mech_parse(NULL) == TK_MECH_COUNT_);
    CHECK(strcmp(tk_mech_name((enum tk_mech)42), "unknown") == 0);

    /* the regions that were there are intact */
    CHECK(mem[0] == 1);
    CHECK_OK(tk_prot1(r, mem, TK_PROT_READ));
    CHECK(tk_protection(r, mem) == TK_PROT_READ);
    CHECK_OK(tk_region_destroy(r));
    CHECK_OK(tk_region_destroy(r2));
    EXPECT_FAIL(tk_region_destroy(NULL), -EINVAL, "NULL");
    mem[0] = 2; /* user memory is read-write again after destroy */
    CHECK(tk_region_find(mem) == NULL);

    /* a destroyed region: destroyed twice, or used after another region was
     * made (which may take its place in memory), gets -EINVAL and changes
     * nothing - the new region keeps its protection */
    EXPECT_FAIL(tk_region_destroy(r), -EINVAL, "not a live region");
    c = (tk_region_config){.len = 4 * ps};
    tk_region *fresh = NULL;
    CHECK_OK(tk_region_create(&c, &fresh));
    char *fm = tk_region_base(fresh);
    CHECK_OK(tk_prot1(fresh, fm, TK_PROT_READ));
    EXPECT_FAIL(tk_region_destroy(r), -EINVAL, "not a live region");
    EXPECT_FAIL(tk_region_destroy(r2), -EINVAL, "not a live region");
    EXPECT_FAIL(tk_protect(r, mem, ps, TK_PROT_RW), -EINVAL, "destroyed");
    EXPECT_FAIL(tk_protection(r, mem), -EINVAL, "destroyed");
    EXPECT_FAIL(tk_dirty(r, bm, 256), -EINVAL, "destroyed");
    CHECK(tk_protection(fresh, fm) == TK_PROT_READ);
    CHECK(tk_region_find(fm) == fresh);
    CHECK_OK(tk_region_destroy(fresh));
    EXPECT_FAIL(tk_region_destroy(fresh), -EINVAL, "not a live region");
    /* NULL arguments name the argument */
    EXPECT_FAIL(tk_dirty(NULL, bm, 256), -EINVAL, "region is NULL");
    EXPECT_FAIL(tk_protect(NULL, mem, ps, TK_PROT_RW), -EINVAL, "region is NULL");
    EXPECT_FAIL(tk_protection(NULL, mem), -EINVAL, "region is NULL");
    EXPECT_FAIL(tk_map2(NULL, TK_PROT_READ, (void **)&fm), -EINVAL, "region is NULL");
    printf("bad input: ok\n");
    return 0;
}
