/* tests/pheap_threads.c MECH - first touches of a persistent heap from
 * many threads at once: 8 threads walk a store of 3,000 pages of linked
 * objects from different starts, so that most pages are first touched by
 * several threads at the same moment; every thread must see every object
 * whole and every pointer swizzled, each extent read once; then they do it
 * again with transactions of the main thread between the walks. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

enum { N = 48000, THREADS = 8 }; /* 48,000 x 256 bytes: 3,000 pages */

struct obj {
    int64_t id;
    struct obj *next; /* id + 1, round */
    struct obj *skip; /* id * 7 + 3 */
    int64_t check;
    char pad[224];
};

static tk_ph *ph;
static struct obj **objs;

static void *walker(void *arg)
{
    long t = (long)arg;
    struct obj *o = tk_ph_root(ph);
    /* to its start along the skips (id -> 7 id + 3), then all along */
    for (long i = 0; i < t * 3; i++) o = o->skip;
    for (int i = 0; i < N; i++) {
        CHECK(o->check == o->id * 31 + 7);
        CHECK(o->skip->id == (o->id * 7 + 3) % N);
        CHECK(o->next->id == (o->id + 1) % N);
        o = o->next;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    char path[128], logpath[140];
    snprintf(path, sizeof path, "/tmp/tk_pheap_threads.%d", (int)getpid());
    snprintf(logpath, sizeof logpath, "%s.log", path);
    unlink(path);
    unlink(logpath);
    tk_ph_config c = {.flags = TK_PH_CREATE, .mech = m, .max_size = 1ull << 30};
    CHECK_OK(tk_ph_open(path, &c, &ph));
    size_t offs[] = {offsetof(struct obj, next), offsetof(struct obj, skip)};
    tk_ph_type_t t;
    CHECK_OK(tk_ph_type(ph, "obj", sizeof(struct obj), offs, 2, &t));
    objs = calloc(N, sizeof *objs);
    CHECK_OK(tk_ph_begin(ph));
    for (int i = 0; i < N; i++) {
        objs[i] = tk_ph_alloc(ph, t, 1);
        CHECK(objs[i] != NULL);
        objs[i]->id = i;
        objs[i]->check = (int64_t)i * 31 + 7;
    }
    for (int i = 0; i < N; i++) {
        objs[i]->next = objs[(i + 1) % N];
        objs[i]->skip = objs[(i * 7 + 3) % N];
    }
    CHECK_OK(tk_ph_set_root(ph, objs[0]));
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));

    for (int round = 0; round < 3; round++) {
        c.flags = 0;
        CHECK_OK(tk_ph_open(path, &c, &ph));
        CHECK(tk_ph_root(ph) != NULL);
        pthread_t th[THREADS];
        for (long i = 0; i < THREADS; i++)
            CHECK(pthread_create(&th[i], NULL, walker, (void *)i) == 0);
        for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
        if (round == 1) { /* transactions between the walks */
            for (int i = 0; i < 20; i++) {
                CHECK_OK(tk_ph_begin(ph));
                struct obj *x = tk_ph_alloc(ph, t, 1);
                CHECK(x != NULL);
                x->id = -1;
                CHECK_OK(i % 2 ? tk_ph_abort(ph) : tk_ph_commit(ph));
            }
        }
        struct tk_ph_stats st;
        CHECK_OK(tk_ph_stats(ph, &st));
        /* each extent read once: no more pages than the store has */
        CHECK(st.pages_read <= tk_ph_size(ph) / 4096);
        CHECK(st.pointers_swizzled >= 2 * (uint64_t)N);
        CHECK_OK(tk_ph_close(ph));
    }
    unlink(path);
    unlink(logpath);
    free(objs);
    printf("pheap_threads %s: passed\n", tk_mech_name(m));
    return 0;
}
