/* tests/gc_compat.c - a program written to bdwgc's core interface, built
 * against trapkit's collector through <trapkit/gc_compat.h>: allocation,
 * realloc, finalizers, disappearing links, roots, the heap's size and the
 * collection count, incremental (concurrent) mode; GC_FREE of a stack
 * address, of an interior pointer and twice of one object is refused with
 * a message on stderr and the heap goes on intact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <trapkit/gc_compat.h>

#include "testutil.h"

struct cell {
    struct cell *next;
    long v;
};

static struct cell *keep;
static int finalized;
static void **links;

static void fin(void *obj, void *cd)
{
    (void)obj;
    CHECK(cd == (void *)&finalized);
    finalized++;
}

__attribute__((noinline)) static void garbage_with_hooks(void)
{
    struct cell *c = GC_MALLOC(sizeof *c);
    CHECK(c);
    GC_finalization_proc ofn = fin;
    void *ocd = c;
    GC_register_finalizer(c, fin, &finalized, &ofn, &ocd);
    CHECK(ofn == NULL && ocd == NULL);
    struct cell *d = GC_MALLOC(sizeof *d);
    links[0] = d;
    CHECK(GC_general_register_disappearing_link(&links[0], d) == GC_SUCCESS);
}

/* The message GC_FREE(p) writes on stderr. */
static void freed_badly(void *p, const char *want)
{
    fflush(stderr);
    char path[] = "/tmp/gc_compat.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(fd, 2) == 2);
    GC_FREE(p);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    char buf[512] = {0};
    CHECK(pread(fd, buf, sizeof buf - 1, 0) > 0);
    close(fd);
    unlink(path);
    printf("  GC_FREE(%s): %s", want, buf);
    CHECK(strstr(buf, "GC_FREE(") && strstr(buf, want));
}

int main(int argc, char **argv)
{
    GC_INIT();
    if (argc > 1 && strcmp(argv[1], "incremental") == 0) {
        GC_enable_incremental();
        if (!tk_gc_concurrent()) tk_test_unavailable("incremental (no write barrier)");
    }
    links = calloc(1, sizeof *links);
    CHECK(links);
    for (long i = 0; i < 100000; i++) {
        struct cell *c = GC_MALLOC(sizeof *c);
        CHECK(c);
        c->v = i;
        c->next = keep;
        keep = c;
    }
    garbage_with_hooks();
    for (int round = 0; round < 40 && (finalized == 0 || links[0]); round++) {
        for (int i = 0; i < 200000; i++) CHECK(GC_MALLOC_ATOMIC(48));
        GC_gcollect();
    }
    CHECK(finalized == 1);
    CHECK(links[0] == NULL);
    long n = 0, sum = 0;
    for (struct cell *c = keep; c; c = c->next) n++, sum += c->v;
    CHECK(n == 100000 && sum == 99999L * 100000 / 2);
    CHECK(GC_get_heap_size() > 0 && GC_get_gc_no() >= 1);

    /* realloc keeps the contents */
    char *s = GC_MALLOC_ATOMIC(10);
    strcpy(s, "trapkit");
    s = GC_REALLOC(s, 5000);
    CHECK(s && strcmp(s, "trapkit") == 0 && GC_size(s) >= 5000 && GC_base(s + 100) == s);

    /* bad frees: refused, said, nothing touched */
    long local = 0;
    freed_badly(&local, "not in the collector's heap");
    freed_badly((char *)keep + 8, "inside an object");
    struct cell *x = GC_MALLOC(sizeof *x);
    GC_FREE(x);
    freed_badly(x, "not a live object");
    n = 0;
    for (struct cell *c = keep; c; c = c->next) n++;
    CHECK(n == 100000);
    printf("gc_compat: %s collector, %zu collections, heap %zu bytes\n",
           tk_gc_concurrent() ? "concurrent" : "stop-the-world", GC_get_gc_no(),
           GC_get_heap_size());
    return 0;
}
