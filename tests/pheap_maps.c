/* tests/pheap_maps.c MECH [lazy] - a store read sparsely in a process close to the
 * kernel's limit on mappings (vm.max_map_count).  Each run of pages read is
 * a mapping of its own until its neighbours are read, so reading every
 * other 64 KiB piece of a store makes two mappings a piece; the test first
 * takes all but a few hundred of the process's mappings for itself (pages
 * of alternating protection), then reads every other piece of a 96 MiB
 * store, each page checked: the store must go on (reading more than was
 * asked, to join runs) rather than stop the program.  Each data page holds
 * two pointers (words 1 and 257, to itself); lazily, the first pass uses
 * both on every other page it reads, which opens that page between pages
 * still no-access (two mappings a page): the store must then swizzle
 * pages whole to join them, and go on. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

enum { DIRS = 96, PER_DIR = 256, NPAGES = DIRS * PER_DIR, FREE_MAPS = 300 };

struct dir {
    uint64_t *page[PER_DIR]; /* each 4096 bytes: word w of page i is i * 1000 + w */
};
struct root {
    struct dir *dir[DIRS];
};

static char path[256];
static enum tk_mech mech;
static unsigned lazy; /* TK_PH_LAZY (argv[2] "lazy": pages with pointers left stay no-access) */

static tk_ph_type_t half_t; /* a data page: two of these */

static tk_ph *open_store(unsigned flags, tk_ph_type_t *rt, tk_ph_type_t *dt)
{
    tk_ph_config c = {.flags = flags | lazy, .mech = mech, .max_size = 1ull << 30};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    size_t offs[PER_DIR];
    for (int i = 0; i < PER_DIR; i++) offs[i] = 8 * (size_t)i;
    CHECK_OK(tk_ph_type(ph, "dir", sizeof(struct dir), offs, PER_DIR, dt));
    CHECK_OK(tk_ph_type(ph, "root", sizeof(struct root), offs, DIRS, rt));
    CHECK_OK(tk_ph_type(ph, "half", 2048, (size_t[]){8}, 1, &half_t));
    return ph;
}

static long maps_now(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, 0);
    lazy = argc > 2 && strcmp(argv[2], "lazy") == 0 ? TK_PH_LAZY : 0;
    snprintf(path, sizeof path, "/tmp/tk_pheap_maps.%d", (int)getpid());
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s.log", path);
    unlink(path);
    unlink(logpath);

    tk_ph_type_t rt, dt;
    tk_ph *ph = open_store(TK_PH_CREATE, &rt, &dt);
    for (int d = 0; d < DIRS; d++) { /* a transaction a directory */
        CHECK_OK(tk_ph_begin(ph));
        struct root *r = tk_ph_root(ph);
        if (!r) {
            CHECK((r = tk_ph_alloc(ph, rt, 1)) != NULL);
            CHECK_OK(tk_ph_set_root(ph, r));
        }
        struct dir *dd = tk_ph_alloc(ph, dt, 1);
        CHECK(dd != NULL);
        r->dir[d] = dd;
        for (int i = 0; i < PER_DIR; i++) {
            uint64_t *p = tk_ph_alloc(ph, half_t, 2);
            CHECK(p != NULL);
            uint64_t id = (uint64_t)d * PER_DIR + (uint64_t)i;
            for (int w = 0; w < 512; w++) p[w] = id * 1000 + (uint64_t)w;
            p[1] = p[257] = (uint64_t)(uintptr_t)p;
            dd->page[i] = p;
        }
        CHECK_OK(tk_ph_commit(ph));
    }
    CHECK_OK(tk_ph_close(ph));

    /* all but FREE_MAPS of the process's mappings taken: every other page
     * of a reservation made readable */
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long limit = 65530;
    if (f) {
        if (fscanf(f, "%ld", &limit) != 1) limit = 65530;
        fclose(f);
    }
    long take = limit - maps_now() - FREE_MAPS;
    size_t pages = (size_t)(take / 2 + 1) * 2;
    char *eat =
        mmap(NULL, pages * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(eat != MAP_FAILED);
    for (size_t k = 1; k + 1 < pages; k += 2) /* (two more mappings each) */
        CHECK(mprotect(eat + k * 4096, 4096, PROT_READ) == 0);
    long before = maps_now();
    CHECK(before >= limit - FREE_MAPS - 4);

    /* every other 64 KiB piece of the data pages, in a scattered order,
     * then everything */
    ph = open_store(0, &rt, &dt);
    struct root *r = tk_ph_root(ph);
    long checked = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t k = 0; k < NPAGES; k++) {
            uint64_t id = (k * 7919) % NPAGES;
            if (pass == 0 && (id / 16) % 2) continue;
            const uint64_t *p = r->dir[id / PER_DIR]->page[id % PER_DIR];
            for (int w = 0; w < 512; w += 64)
                if (p[w] != id * 1000 + (uint64_t)w) {
                    fprintf(stderr, "page %llu word %d holds %llu\n", (unsigned long long)id, w,
                            (unsigned long long)p[w]);
                    CHECK(false);
                }
            if (pass == 1 || id % 2 == 0)
                CHECK(p[1] == (uint64_t)(uintptr_t)p && p[257] == (uint64_t)(uintptr_t)p);
            checked++;
        }
    /* a transaction writes three neighbouring pages out of order (one
     * writable mapping); then the rest of the mappings are taken: its
     * commit must still make them read-only (joining, never splitting),
     * or the next transaction's write to one of them escapes the log */
    uint64_t *pg[3];
    for (int i = 0; i < 3; i++) pg[i] = r->dir[1]->page[100 + i];
    CHECK((char *)pg[1] == (char *)pg[0] + 4096 && (char *)pg[2] == (char *)pg[1] + 4096);
    CHECK_OK(tk_ph_begin(ph));
    pg[1][0] = 11;
    pg[0][0] = 10;
    pg[2][0] = 12;
    size_t more = 4096;
    char *eat2 =
        mmap(NULL, more * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(eat2 != MAP_FAILED);
#ifndef __SANITIZE_ADDRESS__ /* (its allocator maps memory as it goes: at the limit it fails) */
    size_t k2 = 1;
    while (k2 + 1 < more && mprotect(eat2 + k2 * 4096, 4096, PROT_READ) == 0) k2 += 2;
    CHECK(k2 + 1 < more); /* the limit was reached */
#endif
    CHECK_OK(tk_ph_commit(ph));
    munmap(eat2, more * 4096);
    CHECK_OK(tk_ph_begin(ph));
    pg[1][0] = 77;
    CHECK_OK(tk_ph_commit(ph));
    struct tk_ph_stats st;
    CHECK_OK(tk_ph_stats(ph, &st));
    printf("pheap_maps %s: %ld mappings taken of %ld, %ld pages checked, %llu pages read, %ld "
           "mappings at the end\n",
           tk_mech_name(mech), before, limit, checked, (unsigned long long)st.pages_read,
           maps_now());
    CHECK_OK(tk_ph_close(ph));
    munmap(eat, pages * 4096);
    ph = open_store(0, &rt, &dt);
    r = tk_ph_root(ph);
    CHECK(r->dir[1]->page[100][0] == 10 && r->dir[1]->page[101][0] == 77 &&
          r->dir[1]->page[102][0] == 12);
    CHECK_OK(tk_ph_close(ph));
    unlink(path);
    unlink(logpath);
    return 0;
}
