/* bench/pheap.c - the persistent heap (trapkit/pheap.h) beside LMDB, each
 * holding the same ordered map of 16-byte keys and 100-byte values (the
 * B+tree of examples/pheap-kv on trapkit; LMDB's own B+tree), one thread:
 *
 *   pheap/random-insert      records added in random order, 10,000 a
 *                            durable transaction (ops/s)
 *   pheap/random-read        gets of present keys in random order (ops/s)
 *   pheap/sequential-read    every record in key order (ops/s)
 *   pheap/durable-commit     transactions of one put, each durable when its
 *                            commit returns (ops/s): trapkit, LMDB by
 *                            default (synced) and with MDB_WRITEMAP
 *   pheap/cold-open-first-read  a new process opens a store of size_gib
 *                            (loaded in key order, 10,000 records a
 *                            transaction), its files dropped from the page
 *                            cache, and reads
 *                            one record (ns); pheap/cold-open-touch-all: and
 *                            then every record
 *   pheap/store-size         bytes the store's files take on disk
 *   pheap/lost-commits       kill -9 at random instants of one-put commits:
 *                            commits reported done and missing at reopen
 *                            (the sum over the trials; median over rounds)
 *   pheap/swizzle-page, pheap/trap, pheap/swizzle, pheap/swizzle-model,
 *   pheap/swizzle-breakeven  Thekkath & Levy's Figure 4 (see swizzle())
 *
 * Figures are medians of --reps rounds (the systems interleaved in each);
 * --quick: 100,000 records and a 64 MiB store.  trapkit's store uses the
 * mechanism trapkit chooses; mechanism trapkit-eager: pointers swizzled
 * when their page is read, trapkit-lazy: TK_PH_LAZY, each when it is first
 * loaded. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <trapkit/error.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "../examples/pheap-kv/btree.h"
#include "bench.h"

static char dir[256];
static struct bench_opts opt;

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_pheap: %s: %d (%s)\n", what, rc,
            rc < 0 ? tk_last_error() : mdb_strerror(rc));
    exit(1);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void key_of(uint64_t i, char k[16])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t x = mix(i + 1);
    for (int j = 0; j < 16; j++) k[j] = hex[(x >> (4 * j)) & 15];
}

/* Records 0..n-1 sorted by key: a store loaded in this order takes a few
 * leaf pages per transaction where random order takes one per record.  (A
 * key's characters are x's hexadecimal digits, lowest first: keys sort as x
 * with its digits reversed.) */
struct keyed {
    uint64_t sort, rec;
};

static int by_sort(const void *a, const void *b)
{
    uint64_t x = ((const struct keyed *)a)->sort, y = ((const struct keyed *)b)->sort;
    return (x > y) - (x < y);
}

static uint64_t *key_order(uint64_t n)
{
    struct keyed *t = malloc(n * sizeof *t);
    uint64_t *order = malloc(n * sizeof *order);
    if (!t || !order) die("key order: out of memory", -ENOMEM);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = mix(i + 1), r = 0;
        for (int j = 0; j < 16; j++) r = (r << 4) | ((x >> (4 * j)) & 15);
        t[i] = (struct keyed){r, i};
    }
    qsort(t, n, sizeof *t, by_sort);
    for (uint64_t i = 0; i < n; i++) order[i] = t[i].rec;
    free(t);
    char a[16], b[16];
    for (uint64_t i = 1; i < n; i++) {
        key_of(order[i - 1], a);
        key_of(order[i], b);
        if (memcmp(a, b, 16) >= 0) die("key order: keys out of order", -EINVAL);
    }
    return order;
}

static void val_of(uint64_t i, char v[100])
{
    memset(v, 'a' + (int)(i % 26), 100);
}

/* ---- trapkit ------------------------------------------------------------ */

static char tk_path[300], lmdb_path[300];

/* the store, swizzled eagerly or (TK_PH_LAZY in flags) lazily */
static tk_ph *tk_open_as(kv **m, unsigned flags)
{
    tk_ph *ph;
    tk_ph_config c = {.flags = TK_PH_CREATE | flags};
    int rc = tk_ph_open(tk_path, &c, &ph);
    if (rc) die("tk_ph_open", rc);
    *m = kv_open(ph);
    if (!*m) die("kv_open", -EIO);
    return ph;
}

static tk_ph *tk_open(kv **m)
{
    return tk_open_as(m, 0);
}

/* Adds records from..from+n-1, 10,000 a transaction: in the order of their
 * numbers (random key order), or with `order` (n numbers) in that order.
 * Returns records/s. */
static double tk_load(uint64_t from, uint64_t n, const uint64_t *order)
{
    kv *m;
    tk_ph *ph = tk_open(&m);
    char k[16], v[100];
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = from; i < from + n; i += 10000) {
        int rc = tk_ph_begin(ph);
        for (uint64_t j = i; j < i + 10000 && j < from + n && !rc; j++) {
            uint64_t rec = order ? order[j - from] : j;
            key_of(rec, k);
            val_of(rec, v);
            rc = kv_put(m, k, 16, v, 100);
        }
        if (rc || (rc = tk_ph_commit(ph))) die("trapkit load", rc);
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    kv_close(m);
    tk_ph_close(ph);
    return (double)n / s;
}

/* ---- LMDB --------------------------------------------------------------- */

static MDB_env *lm_open(unsigned flags, MDB_dbi *dbi)
{
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (!rc) rc = mdb_env_set_mapsize(env, (size_t)16 << 30);
    if (!rc) rc = mdb_env_open(env, lmdb_path, flags | MDB_NOSUBDIR, 0644);
    if (rc) die("mdb_env_open", rc);
    MDB_txn *t;
    if ((rc = mdb_txn_begin(env, NULL, flags & MDB_RDONLY, &t)) ||
        (rc = mdb_dbi_open(t, NULL, 0, dbi)) || (rc = mdb_txn_commit(t)))
        die("mdb_dbi_open", rc);
    return env;
}

/* tk_load for LMDB */
static double lm_load(uint64_t from, uint64_t n, const uint64_t *order)
{
    MDB_dbi dbi;
    MDB_env *env = lm_open(0, &dbi);
    char k[16], v[100];
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = from; i < from + n; i += 10000) {
        MDB_txn *t;
        int rc = mdb_txn_begin(env, NULL, 0, &t);
        for (uint64_t j = i; j < i + 10000 && j < from + n && !rc; j++) {
            uint64_t rec = order ? order[j - from] : j;
            key_of(rec, k);
            val_of(rec, v);
            MDB_val kk = {16, k}, vv = {100, v};
            rc = mdb_put(t, dbi, &kk, &vv, 0);
        }
        if (rc || (rc = mdb_txn_commit(t))) die("lmdb load", rc);
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    mdb_env_close(env);
    return (double)n / s;
}

/* ---- figures ------------------------------------------------------------ */

static uint64_t *shuffled(uint64_t n, uint64_t seed)
{
    uint64_t *o = malloc(n * sizeof *o);
    for (uint64_t i = 0; i < n; i++) o[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = mix(seed + i) % i, x = o[i - 1];
        o[i - 1] = o[j];
        o[j] = x;
    }
    return o;
}

static int count_rec(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg)
{
    (void)key;
    *(uint64_t *)arg += ((const char *)val)[0] + vlen;
    return 0;
}

/* gets of the n keys in order: a sum of what they read */
static uint64_t get_all(kv *m, const uint64_t *order, uint64_t n)
{
    char k[16];
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++) {
        key_of(order[i], k);
        size_t len;
        const char *v = kv_get(m, k, 16, &len);
        if (!v) die("trapkit get: a record is missing", -ENOENT);
        s += (unsigned char)v[0] + len;
    }
    return s;
}

static void reads(uint64_t n, int reps)
{
    struct bench_fig tr = {0}, lr = {0}, ts = {0}, ls = {0}, zr = {0};
    uint64_t *order = shuffled(n, 42), sum_t = 0, sum_l = 0;
    kv *m, *mz;
    tk_ph *ph = tk_open(&m), *phz;
    /* the same store lazily swizzled, opened beside it as a reader */
    tk_ph_config cz = {.flags = TK_PH_READONLY | TK_PH_LAZY};
    int rcz = tk_ph_open(tk_path, &cz, &phz);
    if (rcz) die("tk_ph_open (lazy)", rcz);
    if (!(mz = kv_open(phz))) die("kv_open (lazy)", -EIO);
    MDB_dbi dbi;
    MDB_env *env = lm_open(MDB_RDONLY, &dbi);
    char k[16];
    for (int r = -1; r < reps; r++) { /* round -1: the warm-up */
        uint64_t t0 = bench_now_ns(), s = get_all(m, order, n);
        uint64_t t1 = bench_now_ns();
        MDB_txn *t;
        int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
        if (rc) die("mdb_txn_begin", rc);
        uint64_t s2 = 0;
        for (uint64_t i = 0; i < n; i++) {
            key_of(order[i], k);
            MDB_val kk = {16, k}, vv;
            if ((rc = mdb_get(t, dbi, &kk, &vv))) die("mdb_get", rc);
            s2 += ((unsigned char *)vv.mv_data)[0] + vv.mv_size;
        }
        uint64_t t2 = bench_now_ns();
        /* in key order */
        uint64_t s3 = 0;
        size_t got = kv_scan(m, NULL, 0, 0, count_rec, &s3);
        uint64_t t3 = bench_now_ns();
        MDB_cursor *c;
        mdb_cursor_open(t, dbi, &c);
        MDB_val kk, vv;
        uint64_t s4 = 0, got2 = 0;
        while (!mdb_cursor_get(c, &kk, &vv, MDB_NEXT)) {
            s4 += ((unsigned char *)vv.mv_data)[0] + vv.mv_size;
            got2++;
        }
        uint64_t t4 = bench_now_ns();
        mdb_cursor_close(c);
        mdb_txn_abort(t);
        uint64_t s5 = get_all(mz, order, n);
        uint64_t t5 = bench_now_ns();
        if (s != s2 || s != s5 || s3 != s4 || got != n || got2 != n) {
            fprintf(stderr, "bench_pheap: the stores disagree (%llu/%llu, %llu/%llu records)\n",
                    (unsigned long long)s, (unsigned long long)s2, (unsigned long long)got,
                    (unsigned long long)got2);
            exit(1);
        }
        sum_t = s, sum_l = s2;
        if (r < 0) continue;
        bench_add(&tr, (double)n / ((double)(t1 - t0) / 1e9));
        bench_add(&lr, (double)n / ((double)(t2 - t1) / 1e9));
        bench_add(&ts, (double)n / ((double)(t3 - t2) / 1e9));
        bench_add(&ls, (double)n / ((double)(t4 - t3) / 1e9));
        bench_add(&zr, (double)n / ((double)(t5 - t4) / 1e9));
    }
    (void)sum_t, (void)sum_l;
    char p[64];
    snprintf(p, sizeof p, "\"records\": %llu", (unsigned long long)n);
    bench_emit("pheap/random-read", "trapkit-eager", p, "ops_per_s", "ops/s", &tr);
    bench_emit("pheap/random-read", "lmdb", p, "ops_per_s", "ops/s", &lr);
    bench_emit("pheap/random-read", "trapkit-lazy", p, "ops_per_s", "ops/s", &zr);
    bench_emit("pheap/sequential-read", "trapkit-eager", p, "ops_per_s", "ops/s", &ts);
    bench_emit("pheap/sequential-read", "lmdb", p, "ops_per_s", "ops/s", &ls);
    mdb_env_close(env);
    kv_close(mz);
    tk_ph_close(phz);
    kv_close(m);
    tk_ph_close(ph);
    free(order);
}

static int count_rec(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg);

/* per one-put transactions on new keys (random places in the tree), each
 * durable when its commit returns: ops/s.  Each system opens its store,
 * makes per commits (fresh: their pages are the open's first touches),
 * reads every record (as a store that has been in use is), and makes per
 * more (warm). */
static void durable(uint64_t base, int reps, int per)
{
    struct bench_fig f[2][4]; /* [fresh, warm][eager, lmdb, lmdb-writemap, lazy] */
    memset(f, 0, sizeof f);
    char k[16], v[100];
    uint64_t next = base;
    for (int r = -1; r < reps; r++) {
        for (int sys = 0; sys < 4; sys++) {
            kv *m = NULL;
            tk_ph *ph = NULL;
            MDB_env *env = NULL;
            MDB_dbi dbi;
            if (sys == 0 || sys == 3)
                ph = tk_open_as(&m, sys == 3 ? TK_PH_LAZY : 0);
            else
                env = lm_open(sys == 2 ? MDB_WRITEMAP : 0, &dbi);
            for (int warm = 0; warm < 2; warm++) {
                if (warm && ph) {
                    uint64_t sum = 0;
                    kv_scan(m, NULL, 0, 0, count_rec, &sum);
                } else if (warm) {
                    MDB_txn *t;
                    MDB_cursor *c;
                    MDB_val kk, vv;
                    int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
                    if (rc || (rc = mdb_cursor_open(t, dbi, &c))) die("lmdb scan", rc);
                    uint64_t sum = 0;
                    while (!mdb_cursor_get(c, &kk, &vv, MDB_NEXT)) sum += *(char *)vv.mv_data;
                    if (sum == 1) fprintf(stderr, " "); /* (the reads are used) */
                    mdb_cursor_close(c);
                    mdb_txn_abort(t);
                }
                uint64_t t0 = bench_now_ns();
                for (int i = 0; i < per; i++, next++) {
                    key_of(next, k);
                    val_of(next, v);
                    int rc;
                    if (ph) {
                        rc = tk_ph_begin(ph);
                        if (rc || (rc = kv_put(m, k, 16, v, 100)) || (rc = tk_ph_commit(ph)))
                            die("trapkit commit", rc);
                    } else {
                        MDB_txn *t;
                        MDB_val kk = {16, k}, vv = {100, v};
                        rc = mdb_txn_begin(env, NULL, 0, &t);
                        if (rc || (rc = mdb_put(t, dbi, &kk, &vv, 0)) || (rc = mdb_txn_commit(t)))
                            die("lmdb commit", rc);
                    }
                }
                uint64_t t1 = bench_now_ns();
                if (r >= 0) bench_add(&f[warm][sys], per / ((double)(t1 - t0) / 1e9));
            }
            if (ph) {
                kv_close(m);
                tk_ph_close(ph);
            } else {
                mdb_env_close(env);
            }
        }
    }
    static const char *const mech[4] = {"trapkit-eager", "lmdb", "lmdb-writemap", "trapkit-lazy"};
    for (int warm = 0; warm < 2; warm++)
        for (int sys = 0; sys < 4; sys++)
            bench_emit("pheap/durable-commit", mech[sys],
                       warm ? "\"store\": \"warm\"" : "\"store\": \"fresh\"", "ops_per_s", "ops/s",
                       &f[warm][sys]);
}

static void drop_cache(const char *p)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static uint64_t disk_bytes(const char *p)
{
    struct stat st;
    return stat(p, &st) ? 0 : (uint64_t)st.st_blocks * 512;
}

/* In a new process, with the files out of the page cache: ns to open and
 * read key i, and to read everything after; sys 0 trapkit eager, 1 LMDB, 2
 * trapkit lazy. */
static void cold(int sys, uint64_t i, uint64_t n, double out[2])
{
    int lmdb = sys == 1;
    char p2[320];
    drop_cache(lmdb ? lmdb_path : tk_path);
    snprintf(p2, sizeof p2, "%s%s", lmdb ? lmdb_path : tk_path, lmdb ? "-lock" : ".log");
    drop_cache(p2);
    int fds[2];
    if (pipe(fds)) die("pipe", -errno);
    pid_t pid = fork();
    if (pid == 0) {
        char k[16];
        key_of(i, k);
        double t[2];
        uint64_t t0 = bench_now_ns(), s = 0;
        size_t got;
        if (!lmdb) {
            kv *m;
            tk_ph *ph;
            tk_ph_config c = {.flags = sys == 2 ? TK_PH_LAZY : 0};
            int rc = tk_ph_open(tk_path, &c, &ph);
            if (rc) die("tk_ph_open", rc);
            uint64_t ta = bench_now_ns();
            if (!(m = kv_open(ph))) die("kv_open", -EIO);
            uint64_t tb = bench_now_ns();
            size_t len;
            if (!kv_get(m, k, 16, &len)) die("cold get", -ENOENT);
            t[0] = (double)(bench_now_ns() - t0);
            if (getenv("TK_BENCH_PHEAP_DEBUG"))
                fprintf(stderr, "cold: open %.2f kv_open %.2f get %.2f ms\n", (ta - t0) / 1e6,
                        (tb - ta) / 1e6, (t[0] - (double)(tb - t0)) / 1e6);
            got = kv_scan(m, NULL, 0, 0, count_rec, &s);
        } else {
            MDB_env *env;
            MDB_txn *t1;
            MDB_dbi dbi;
            int rc = mdb_env_create(&env);
            if (!rc) rc = mdb_env_set_mapsize(env, (size_t)16 << 30);
            if (!rc) rc = mdb_env_open(env, lmdb_path, MDB_NOSUBDIR | MDB_RDONLY, 0644);
            if (!rc) rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t1);
            if (!rc) rc = mdb_dbi_open(t1, NULL, 0, &dbi);
            MDB_val kk = {16, k}, vv;
            if (!rc) rc = mdb_get(t1, dbi, &kk, &vv);
            if (rc) die("cold lmdb", rc);
            t[0] = (double)(bench_now_ns() - t0);
            MDB_cursor *c;
            mdb_cursor_open(t1, dbi, &c);
            got = 0;
            while (!mdb_cursor_get(c, &kk, &vv, MDB_NEXT)) got++;
        }
        t[1] = (double)(bench_now_ns() - t0);
        if (got != n) die("cold: records missing", -ENOENT);
        if (write(fds[1], t, sizeof t) != sizeof t) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    int ws;
    if (read(fds[0], out, 2 * sizeof(double)) != 2 * sizeof(double) ||
        waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws))
        die("cold open: the child failed", -EIO);
    close(fds[0]);
}

static void cold_open(int reps, double gib)
{
    /* a store of about gib: the records that make it, added to both */
    uint64_t per_gib = 6000000, n = (uint64_t)(gib * (double)per_gib);
    snprintf(tk_path, sizeof tk_path, "%s/cold.ph", dir);
    snprintf(lmdb_path, sizeof lmdb_path, "%s/cold.mdb", dir);
    fprintf(stderr, "pheap: loading %llu records in key order for the cold open\n",
            (unsigned long long)n);
    uint64_t *order = key_order(n);
    tk_load(0, n, order);
    lm_load(0, n, order);
    free(order);
    struct bench_fig fr[3], ft[3];
    memset(fr, 0, sizeof fr);
    memset(ft, 0, sizeof ft);
    for (int r = 0; r < reps; r++)
        for (int s = 0; s < 3; s++) {
            double t[2];
            cold(s, mix((uint64_t)r) % n, n, t);
            bench_add(&fr[s], t[0]);
            bench_add(&ft[s], t[1]);
        }
    char p[64];
    snprintf(p, sizeof p, "\"size_gib\": %g, \"cache\": \"dropped\"", gib);
    bench_emit("pheap/cold-open-first-read", "trapkit-eager", p, "time", "ns", &fr[0]);
    bench_emit("pheap/cold-open-first-read", "lmdb", p, "time", "ns", &fr[1]);
    bench_emit("pheap/cold-open-first-read", "trapkit-lazy", p, "time", "ns", &fr[2]);
    bench_emit("pheap/cold-open-touch-all", "trapkit-eager", p, "time", "ns", &ft[0]);
    bench_emit("pheap/cold-open-touch-all", "lmdb", p, "time", "ns", &ft[1]);
    bench_emit("pheap/cold-open-touch-all", "trapkit-lazy", p, "time", "ns", &ft[2]);
    snprintf(p, sizeof p, "\"size_gib\": %g", gib);
    char lg[320];
    snprintf(lg, sizeof lg, "%s.log", tk_path);
    bench_emit_value("pheap/store-size", "trapkit-eager", p, "bytes", "bytes",
                     (double)(disk_bytes(tk_path) + disk_bytes(lg)));
    bench_emit_value("pheap/store-size", "lmdb", p, "bytes", "bytes",
                     (double)disk_bytes(lmdb_path));
}

/* kill -9 at random instants of one-put commits; the commits the child
 * reported done and the reopened store lacks. */
static int lost_trial(uint64_t *next)
{
    int fds[2];
    if (pipe(fds)) die("pipe", -errno);
    uint64_t first = *next;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        kv *m;
        tk_ph *ph = tk_open(&m);
        char k[16], v[100];
        for (uint64_t i = first;; i++) {
            key_of(i, k);
            val_of(i, v);
            int rc = tk_ph_begin(ph);
            if (rc || (rc = kv_put(m, k, 16, v, 100)) || (rc = tk_ph_commit(ph))) _exit(2);
            if (write(fds[1], &i, sizeof i) != sizeof i) _exit(3);
        }
    }
    close(fds[1]);
    usleep(2000 + (useconds_t)(mix(first) % 30000));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t last = first, i;
    bool any = false;
    while (read(fds[0], &i, sizeof i) == sizeof i) last = i, any = true;
    close(fds[0]);
    kv *m;
    tk_ph *ph = tk_open(&m);
    char k[16];
    int lost = 0;
    for (uint64_t j = first; any && j <= last; j++) {
        key_of(j, k);
        if (!kv_get(m, k, 16, NULL)) lost++;
    }
    /* the one under way may be there; nothing after it may */
    key_of(last + 2, k);
    if (kv_get(m, k, 16, NULL)) lost += 1000000; /* a commit nobody made */
    kv_close(m);
    tk_ph_close(ph);
    *next = last + 2;
    return lost;
}

/* ---- Thekkath & Levy Figure 4: eager against lazy swizzling ------------
 * Pages of 512 pointers (each to the first of its page), and the same
 * declared as plain words: their first touches (a trap, a pread of the page
 * cache, the swizzling) per page, warm in the page cache, give the
 * swizzling's cost per pointer s; a trap alone (a first touch of a trapkit
 * region whose handler only opens the page) is t.  For a page of 50
 * pointers (the seed's), eager swizzling costs the touch without pointers
 * and 50 s; lazy costs the touch without pointers and, for each pointer
 * used, a trap and one swizzling: figures derived from those measured
 * (pheap/swizzle-model).  pheap/swizzle itself is measured: a store of
 * pages with the seed's 50 pointers each (two objects of 25), read with
 * and without TK_PH_LAZY, a fraction of each page's pointers loaded. */
struct swobj {
    struct swobj *p;
};
enum { SEED_POINTERS = 50 };
enum {
    SW_OBJ_PAGES = 480,
    SW_OBJS = 8,
    SW_PAGES = SW_OBJ_PAGES * SW_OBJS,
    SW_PER_PAGE = 4096 / sizeof(struct swobj)
};
struct swdir {
    struct swobj *obj[SW_OBJS];
};

static volatile int sw_sink;

static tk_action open_page(const tk_fault *f, void *arg)
{
    (void)arg;
    return tk_prot1(f->region, f->page, TK_PROT_RW) ? TK_DECLINE : TK_RESUME;
}

/* ns per page of first touches of the swizzle store at path (pointers or
 * none), in a fresh open */
static double sw_touch(const char *path)
{
    tk_ph *ph;
    tk_ph_config c = {0};
    int rc = tk_ph_open(path, &c, &ph);
    if (rc) die("tk_ph_open", rc);
    struct swdir *d = tk_ph_root(ph);
    char *obj[SW_OBJS];
    for (int k = 0; k < SW_OBJS; k++) obj[k] = (char *)d->obj[k];
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < SW_OBJS; k++)
        for (size_t i = 0; i < SW_OBJ_PAGES; i++) sw_sink += obj[k][i * 4096];
    double ns = (double)(bench_now_ns() - t0) / SW_PAGES;
    tk_ph_close(ph);
    return ns;
}

/* pages of the seed's 50 pointers: two 2 KiB objects of 25 each */
struct sw50 {
    struct sw50 *p[SEED_POINTERS / 2];
    char pad[2048 - SEED_POINTERS / 2 * 8];
};
enum { SW50_PAGES = 2048 };

static void sw50_make(const char *path)
{
    tk_ph *ph;
    tk_ph_config c = {.flags = TK_PH_CREATE};
    int rc = tk_ph_open(path, &c, &ph);
    if (rc) die("tk_ph_open", rc);
    size_t off[SEED_POINTERS / 2], doff[SW_OBJS];
    for (int k = 0; k < SEED_POINTERS / 2; k++) off[k] = 8 * (size_t)k;
    for (int k = 0; k < SW_OBJS; k++) doff[k] = 8 * (size_t)k;
    tk_ph_type_t t, td;
    if ((rc = tk_ph_type(ph, "sw50", sizeof(struct sw50), off, SEED_POINTERS / 2, &t)) ||
        (rc = tk_ph_type(ph, "sw_dir", sizeof(struct swdir), doff, SW_OBJS, &td)) ||
        (rc = tk_ph_begin(ph)))
        die("tk_ph_type", rc);
    struct swdir *d = tk_ph_alloc(ph, td, 1);
    if (!d) die("tk_ph_alloc", -ENOMEM);
    size_t n = (size_t)SW50_PAGES / SW_OBJS * 2; /* per object */
    for (int k = 0; k < SW_OBJS; k++) {
        struct sw50 *o = tk_ph_alloc(ph, t, n);
        if (!o) die("tk_ph_alloc", -ENOMEM);
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < SEED_POINTERS / 2; j++) o[i].p[j] = &o[(i + 1 + j) % n];
        d->obj[k] = (struct swobj *)(void *)o;
    }
    if ((rc = tk_ph_set_root(ph, d)) || (rc = tk_ph_commit(ph))) die("commit", rc);
    tk_ph_close(ph);
}

/* ns per page of a fresh open of the sw50 store at path that loads `used`
 * of each page's 50 pointers (spread over both objects), lazily or not */
static double sw50_use(const char *path, bool lazy, int used)
{
    tk_ph *ph;
    tk_ph_config c = {.flags = lazy ? TK_PH_LAZY : 0};
    int rc = tk_ph_open(path, &c, &ph);
    if (rc) die("tk_ph_open", rc);
    struct swdir *d = tk_ph_root(ph);
    struct sw50 *obj[SW_OBJS];
    for (int k = 0; k < SW_OBJS; k++) obj[k] = (struct sw50 *)(void *)d->obj[k];
    size_t n = (size_t)SW50_PAGES / SW_OBJS * 2;
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < SW_OBJS; k++)
        for (size_t i = 0; i < n; i += 2) { /* a page: objects i and i + 1 */
            for (int j = 0; j < used; j++) sw_sink += obj[k][i + (j & 1)].p[j / 2] != NULL;
        }
    double ns = (double)(bench_now_ns() - t0) / SW50_PAGES;
    struct tk_ph_stats st;
    tk_ph_stats(ph, &st);
    if (st.pointers_swizzled < (uint64_t)(lazy ? used : SEED_POINTERS) * SW50_PAGES)
        die("bench_pheap: fewer pointers swizzled than used", -EIO);
    tk_ph_close(ph);
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void swizzle(int reps)
{
    char pp[300], pr[300];
    snprintf(pp, sizeof pp, "%s/sw_ptr.ph", dir);
    snprintf(pr, sizeof pr, "%s/sw_raw.ph", dir);
    for (int w = 0; w < 2; w++) { /* the stores: pointers, none */
        tk_ph *ph;
        tk_ph_config c = {.flags = TK_PH_CREATE};
        int rc = tk_ph_open(w ? pr : pp, &c, &ph);
        if (rc) die("tk_ph_open", rc);
        size_t off[] = {0}, doff[SW_OBJS];
        for (int k = 0; k < SW_OBJS; k++) doff[k] = 8 * (size_t)k;
        tk_ph_type_t t, td;
        if ((rc = tk_ph_type(ph, w ? "sw_raw" : "sw_ptr", sizeof(struct swobj), off, w ? 0 : 1,
                             &t)) ||
            (rc = tk_ph_type(ph, "sw_dir", sizeof(struct swdir), doff, SW_OBJS, &td)) ||
            (rc = tk_ph_begin(ph)))
            die("tk_ph_type", rc);
        struct swdir *d = tk_ph_alloc(ph, td, 1);
        if (!d) die("tk_ph_alloc", -ENOMEM);
        size_t n = (size_t)SW_OBJ_PAGES * 4096 / sizeof(struct swobj);
        for (int k = 0; k < SW_OBJS; k++) { /* objects of SW_OBJ_PAGES pages */
            struct swobj *o = tk_ph_alloc(ph, t, n);
            if (!o) die("tk_ph_alloc", -ENOMEM);
            for (size_t i = 0; i < n; i++) o[i].p = w ? NULL : &o[(i / SW_PER_PAGE) * SW_PER_PAGE];
            d->obj[k] = o;
        }
        if ((rc = tk_ph_set_root(ph, d)) || (rc = tk_ph_commit(ph))) die("commit", rc);
        tk_ph_close(ph);
    }
    /* a trap alone */
    tk_region_config rc_cfg = {
        .len = (size_t)SW_PAGES * 4096, .handler = open_page, .flags = TK_REGION_NOACCESS};
    struct bench_fig fp = {0}, fr = {0}, ft = {0};
    sw_touch(pp), sw_touch(pr); /* warm: the page cache */
    for (int r = 0; r < reps; r++) {
        bench_add(&fp, sw_touch(pp));
        bench_add(&fr, sw_touch(pr));
        tk_region *reg;
        int rc = tk_region_create(&rc_cfg, &reg);
        if (rc) die("tk_region_create", rc);
        volatile char *b = tk_region_base(reg);
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < SW_PAGES; i++) sw_sink += b[i * 4096];
        bench_add(&ft, (double)(bench_now_ns() - t0) / SW_PAGES);
        tk_region_destroy(reg);
    }
    /* s from each round's pair (the two runs side by side), their median:
     * the host's speed drifts more between rounds than the difference is;
     * the medians taken before bench_emit (which empties a figure) */
    struct bench_fig fd = {0};
    for (int r = 0; r < fp.n; r++) bench_add(&fd, (fp.v[r] - fr.v[r]) / SW_PER_PAGE);
    qsort(fd.v, (size_t)fd.n, sizeof fd.v[0], cmp_double);
    qsort(fr.v, (size_t)fr.n, sizeof fr.v[0], cmp_double);
    qsort(ft.v, (size_t)ft.n, sizeof ft.v[0], cmp_double);
    double tr = fr.v[fr.n / 2], tt = ft.v[ft.n / 2], s = fd.v[fd.n / 2];
    bench_emit("pheap/swizzle-page", "trapkit-eager", "\"pointers\": 512", "time", "ns", &fp);
    bench_emit("pheap/swizzle-page", "trapkit-eager", "\"pointers\": 0", "time", "ns", &fr);
    bench_emit("pheap/trap", "trapkit", "", "time", "ns", &ft);
    bench_emit_ex("pheap/swizzle-pointer", "trapkit-eager", "", "time", "ns",
                  &(struct bench_fig){.v = {s}, .n = 1},
                  "\"derived\": true, \"derived_from\": [\"pheap/swizzle-page\"]");
    static const double fracs[] = {0.02, 0.1, 0.2, 0.5, 1.0};
    enum { NF = sizeof fracs / sizeof fracs[0] };
    for (size_t i = 0; i < NF; i++) {
        char p[64];
        snprintf(p, sizeof p, "\"pointers_used_fraction\": %g, \"pointers\": %d", fracs[i],
                 SEED_POINTERS);
        struct bench_fig e = {.v = {tr + SEED_POINTERS * s}, .n = 1};
        bench_emit_ex("pheap/swizzle-model", "trapkit-eager", p, "time", "ns", &e,
                      "\"derived\": true, \"derived_from\": [\"pheap/swizzle-page\"]");
        struct bench_fig l = {.v = {tr + fracs[i] * SEED_POINTERS * (tt + s)}, .n = 1};
        bench_emit_ex("pheap/swizzle-model", "trapkit-lazy", p, "time", "ns", &l,
                      "\"derived\": true, \"derived_from\": [\"pheap/swizzle-page\", "
                      "\"pheap/trap\"]");
    }
    /* measured: the seed's 50 pointers a page, eager and lazy side by side */
    char p50[300];
    snprintf(p50, sizeof p50, "%s/sw_50.ph", dir);
    sw50_make(p50);
    static struct bench_fig me[NF], ml[NF];
    sw50_use(p50, false, SEED_POINTERS); /* warm: the page cache */
    for (int r = 0; r < (reps + 1) / 2; r++)
        for (size_t i = 0; i < NF; i++) {
            int used = (int)(fracs[i] * SEED_POINTERS + 0.5);
            bench_add(&me[i], sw50_use(p50, false, used));
            bench_add(&ml[i], sw50_use(p50, true, used));
        }
    for (size_t i = 0; i < NF; i++) {
        char p[64];
        snprintf(p, sizeof p, "\"pointers_used_fraction\": %g, \"pointers\": %d", fracs[i],
                 SEED_POINTERS);
        bench_emit("pheap/swizzle", "trapkit-eager", p, "time", "ns", &me[i]);
        bench_emit("pheap/swizzle", "trapkit-lazy", p, "time", "ns", &ml[i]);
    }
    unlink(p50);
    strcat(p50, ".log");
    unlink(p50);
    /* the fraction of a page's pointers used above which eager is cheaper:
     * 50 s = f 50 (t + s) */
    struct bench_fig be = {.v = {s > 0 ? s / (tt + s) : 0}, .n = 1};
    bench_emit_ex("pheap/swizzle-breakeven", "trapkit", "", "fraction", "ratio", &be,
                  "\"derived\": true, \"derived_from\": [\"pheap/swizzle-page\", "
                  "\"pheap/trap\"]");
    unlink(pp);
    unlink(pr);
    char lg[320];
    snprintf(lg, sizeof lg, "%s.log", pp);
    unlink(lg);
    snprintf(lg, sizeof lg, "%s.log", pr);
    unlink(lg);
}

int main(int argc, char **argv)
{
    bench_parse(argc, argv, &opt);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tk_bench_pheap.XXXXXX", tmp ? tmp : "/var/tmp");
    if (!mkdtemp(dir)) die("mkdtemp", -errno);
    int reps = opt.quick ? 3 : 5;
    uint64_t n = opt.quick ? 100000 : 1000000;
    snprintf(tk_path, sizeof tk_path, "%s/kv.ph", dir);
    snprintf(lmdb_path, sizeof lmdb_path, "%s/kv.mdb", dir);
    fprintf(stderr, "pheap: loading %llu records into each store\n", (unsigned long long)n);
    struct bench_fig ti = {0}, li = {0};
    bench_add(&ti, tk_load(0, n / 2, NULL));
    bench_add(&li, lm_load(0, n / 2, NULL));
    bench_add(&ti, tk_load(n / 2, n - n / 2, NULL));
    bench_add(&li, lm_load(n / 2, n - n / 2, NULL));
    char p[64];
    snprintf(p, sizeof p, "\"records\": %llu, \"batch\": 10000", (unsigned long long)n);
    bench_emit("pheap/random-insert", "trapkit-eager", p, "ops_per_s", "ops/s", &ti);
    bench_emit("pheap/random-insert", "lmdb", p, "ops_per_s", "ops/s", &li);
    fprintf(stderr, "pheap: reads\n");
    reads(n, reps);
    fprintf(stderr, "pheap: one-put durable commits\n");
    durable(n, reps, opt.quick ? 50 : 200);
    fprintf(stderr, "pheap: kill -9 trials\n");
    struct bench_fig lost = {0};
    int trials = opt.quick ? 5 : 20;
    uint64_t next = 1u << 30;
    for (int r = 0; r < 3; r++) {
        int sum = 0;
        for (int t = 0; t < trials; t++) sum += lost_trial(&next);
        bench_add(&lost, sum);
    }
    snprintf(p, sizeof p, "\"trials\": %d", trials);
    bench_emit("pheap/lost-commits", "trapkit-eager", p, "count", "commits", &lost);
    unlink(tk_path);
    char lg[320];
    snprintf(lg, sizeof lg, "%s.log", tk_path);
    unlink(lg);
    unlink(lmdb_path);
    snprintf(lg, sizeof lg, "%s-lock", lmdb_path);
    unlink(lg);
    fprintf(stderr, "pheap: swizzling, eager and lazy (Thekkath & Levy Figure 4)\n");
    swizzle(opt.quick ? 15 : 31); /* (a run is 30 ms: many, for the small difference) */
    fprintf(stderr, "pheap: cold open\n");
    cold_open(reps, opt.quick ? 1.0 / 16 : 1.0);
    unlink(tk_path);
    snprintf(lg, sizeof lg, "%s.log", tk_path);
    unlink(lg);
    unlink(lmdb_path);
    snprintf(lg, sizeof lg, "%s-lock", lmdb_path);
    unlink(lg);
    rmdir(dir);
    return 0;
}
