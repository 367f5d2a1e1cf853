/* tests/pheap_btree.c MECH - examples/pheap-kv's B+tree against a reference:
 * 30,000 random puts (new keys and replaced values of random lengths),
 * deletions and gets, in transactions some of which abort, the store
 * closed and reopened between rounds; every get, the count and an ordered
 * scan must match a sorted array kept beside it.  Then a bulk load in key
 * order: every leaf full but the last, and the same checks after puts in
 * random order, deletions and a reopen. */
#include <stdlib.h>
#include <string.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "../examples/pheap-kv/btree.h"
#include "testutil.h"

enum { KEYS = 6000, OPS = 30000, ROUNDS = 4 };

struct ref {
    char key[KV_KEY];
    int len; /* -1: absent */
    unsigned seed;
};

static struct ref ref[KEYS], saved[KEYS];

static void key_of(int i, char k[KV_KEY])
{
    memset(k, 0, KV_KEY);
    snprintf(k, KV_KEY, "k%07d", (int)((unsigned)i * 7919u % 10007u)); /* (distinct) */
}

static void val_of(unsigned seed, int len, char *v)
{
    for (int i = 0; i < len; i++) v[i] = (char)('a' + (seed + (unsigned)i * 7) % 26);
}

static int cmpref(const void *a, const void *b)
{
    return memcmp(((const struct ref *)a)->key, ((const struct ref *)b)->key, KV_KEY);
}

struct scan_state {
    struct ref *sorted;
    int at, n;
};

static int check_scan(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg)
{
    struct scan_state *s = arg;
    while (s->at < s->n && s->sorted[s->at].len < 0) s->at++;
    CHECK(s->at < s->n);
    struct ref *r = &s->sorted[s->at++];
    CHECK(!memcmp(key, r->key, KV_KEY));
    CHECK((int)vlen == r->len);
    char v[400];
    val_of(r->seed, r->len, v);
    CHECK(!memcmp(val, v, vlen));
    return 0;
}

static void verify(kv *m)
{
    uint64_t present = 0;
    char v[400];
    for (int i = 0; i < KEYS; i++) {
        size_t len;
        const char *got = kv_get(m, ref[i].key, KV_KEY, &len);
        if (ref[i].len < 0) {
            CHECK(got == NULL);
            continue;
        }
        present++;
        CHECK(got != NULL && (int)len == ref[i].len);
        val_of(ref[i].seed, ref[i].len, v);
        CHECK(!memcmp(got, v, len));
    }
    CHECK(kv_count(m) == present);
    struct ref *sorted = malloc(sizeof ref);
    memcpy(sorted, ref, sizeof ref);
    qsort(sorted, KEYS, sizeof *sorted, cmpref);
    struct scan_state s = {sorted, 0, KEYS};
    CHECK(kv_scan(m, NULL, 0, 0, check_scan, &s) == present);
    free(sorted);
}

/* One random change in the open transaction, kept in ref: a deletion one
 * time in del_in, else a put of a new value of random length. */
static void random_change(kv *m, int del_in)
{
    char v[400];
    int i = rand() % KEYS;
    if (rand() % del_in == 0) {
        CHECK(kv_del(m, ref[i].key, KV_KEY) == (ref[i].len >= 0));
        ref[i].len = -1;
    } else {
        ref[i].len = rand() % 300;
        ref[i].seed = (unsigned)rand();
        val_of(ref[i].seed, ref[i].len, v);
        CHECK_OK(kv_put(m, ref[i].key, KV_KEY, v, (size_t)ref[i].len));
    }
}

/* Every key put in ascending order into a new store (the splits at the
 * right edge keep the left leaves full), then checked; then random puts and
 * deletions over it, checked again after a reopen. */
static void ascending(enum tk_mech mech, const char *path)
{
    char v[400];
    struct ref *sorted = malloc(sizeof ref);
    CHECK(sorted != NULL);
    for (int i = 0; i < KEYS; i++) {
        ref[i].len = 20 + i % 80;
        ref[i].seed = (unsigned)i;
    }
    memcpy(sorted, ref, sizeof ref);
    qsort(sorted, KEYS, sizeof *sorted, cmpref);
    tk_ph_config c = {.flags = TK_PH_CREATE, .mech = mech, .max_size = 1ull << 30};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    kv *m = kv_open(ph);
    CHECK(m != NULL);
    for (int i = 0; i < KEYS;) {
        CHECK_OK(tk_ph_begin(ph));
        for (int j = 0; j < 500 && i < KEYS; j++, i++) {
            val_of(sorted[i].seed, sorted[i].len, v);
            CHECK_OK(kv_put(m, sorted[i].key, KV_KEY, v, (size_t)sorted[i].len));
        }
        CHECK_OK(tk_ph_commit(ph));
    }
    free(sorted);
    verify(m);
    uint64_t full = (KEYS + KV_LEAF_ENTRIES - 1) / KV_LEAF_ENTRIES;
    CHECK(kv_leaves(m) == full);
    for (int op = 0; op < 3000;) {
        CHECK_OK(tk_ph_begin(ph));
        for (int j = 0; j < 50; j++, op++) random_change(m, 3);
        CHECK_OK(tk_ph_commit(ph));
    }
    verify(m);
    kv_close(m);
    CHECK_OK(tk_ph_close(ph));
    CHECK_OK(tk_ph_open(path, &c, &ph));
    m = kv_open(ph);
    CHECK(m != NULL);
    verify(m);
    printf("pheap_btree %s: %d keys in order: %llu leaves of %d entries\n", tk_mech_name(mech),
           KEYS, (unsigned long long)full, KV_LEAF_ENTRIES);
    kv_close(m);
    CHECK_OK(tk_ph_close(ph));
}

int main(int argc, char **argv)
{
    enum tk_mech mech = tk_test_mech(argc, argv, 0);
    char path[128], lp[140];
    snprintf(path, sizeof path, "/tmp/tk_pheap_btree.%d", (int)getpid());
    snprintf(lp, sizeof lp, "%s.log", path);
    unlink(path);
    unlink(lp);
    for (int i = 0; i < KEYS; i++) {
        key_of(i, ref[i].key);
        ref[i].len = -1;
    }
    srand(7);
    for (int round = 0; round < ROUNDS; round++) {
        tk_ph_config c = {.flags = TK_PH_CREATE, .mech = mech, .max_size = 1ull << 30};
        tk_ph *ph;
        CHECK_OK(tk_ph_open(path, &c, &ph));
        kv *m = kv_open(ph);
        CHECK(m != NULL);
        verify(m);
        for (int op = 0; op < OPS / ROUNDS;) {
            bool abort_it = rand() % 8 == 0;
            memcpy(saved, ref, sizeof ref);
            CHECK_OK(tk_ph_begin(ph));
            for (int j = 0; j < 50; j++, op++) random_change(m, 5);
            if (abort_it) {
                CHECK_OK(tk_ph_abort(ph));
                memcpy(ref, saved, sizeof ref);
            } else {
                CHECK_OK(tk_ph_commit(ph));
            }
        }
        verify(m);
        kv_close(m);
        CHECK_OK(tk_ph_close(ph));
    }
    unlink(path);
    unlink(lp);
    ascending(mech, path);
    unlink(path);
    unlink(lp);
    printf("pheap_btree %s: passed\n", tk_mech_name(mech));
    return 0;
}
