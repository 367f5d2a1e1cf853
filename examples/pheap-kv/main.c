/* examples/pheap-kv/main.c - an ordered key-value store on a trapkit
 * persistent heap, from the command line:
 *
 *   pheap-kv STORE put KEY VALUE     set (one durable transaction)
 *   pheap-kv STORE get KEY           print the value (exit 1 if absent)
 *   pheap-kv STORE del KEY           remove (exit 1 if absent)
 *   pheap-kv STORE scan [FROM [N]]   print keys and values in order
 *   pheap-kv STORE load N [BATCH]    add N records (16-byte keys, 100-byte
 *                                    values), BATCH to a transaction
 *   pheap-kv STORE stats             records, size, what was read
 *
 * The store is created if missing.  Keys are up to 16 bytes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trapkit/error.h>
#include <trapkit/pheap.h>

#include "btree.h"

static int die(const char *what, int rc)
{
    fprintf(stderr, "pheap-kv: %s: %s (%s)\n", what, tk_strerror(rc), tk_last_error());
    return 2;
}

static int print(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg)
{
    (void)arg;
    printf("%.*s\t%.*s\n", (int)strnlen((const char *)key, KV_KEY), (const char *)key, (int)vlen,
           (const char *)val);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s STORE put KEY VALUE | get KEY | del KEY | scan [FROM [N]] | "
                "load N [BATCH] | stats\n",
                argv[0]);
        return 2;
    }
    const char *cmd = argv[2];
    /* get, scan and stats read the last committed state as a reader, so
     * they run beside a writer (a store not made yet is made, empty) */
    bool reading = !strcmp(cmd, "get") || !strcmp(cmd, "scan") || !strcmp(cmd, "stats");
    tk_ph_config c = {.flags = reading ? TK_PH_READONLY : TK_PH_CREATE};
    tk_ph *ph;
    int rc = tk_ph_open(argv[1], &c, &ph);
    if (rc == -ENOENT && reading) {
        c.flags = TK_PH_CREATE;
        rc = tk_ph_open(argv[1], &c, &ph);
    }
    if (rc) return die(argv[1], rc);
    kv *m = kv_open(ph);
    if (!m && reading && !tk_ph_root(ph)) { /* a store without the map yet: it is empty */
        tk_ph_close(ph);
        if (!strcmp(cmd, "stats")) printf("records 0\n");
        return !strcmp(cmd, "get") ? 1 : 0;
    }
    if (!m) return die("opening the map", -EIO);
    int status = 0;
    if (!strcmp(cmd, "put") && argc == 5) {
        if (strlen(argv[3]) > KV_KEY) {
            fprintf(stderr, "pheap-kv: a key is at most %d bytes\n", KV_KEY);
            status = 2;
        } else if ((rc = tk_ph_begin(ph)) ||
                   (rc = kv_put(m, argv[3], strlen(argv[3]), argv[4], strlen(argv[4]))) ||
                   (rc = tk_ph_commit(ph))) {
            status = die("put", rc);
        }
    } else if (!strcmp(cmd, "get") && argc == 4) {
        size_t n;
        const char *v = kv_get(m, argv[3], strlen(argv[3]), &n);
        if (v)
            printf("%.*s\n", (int)n, v);
        else
            status = 1;
    } else if (!strcmp(cmd, "del") && argc == 4) {
        if ((rc = tk_ph_begin(ph))) return die("del", rc);
        int d = kv_del(m, argv[3], strlen(argv[3]));
        if (d < 0 || (rc = tk_ph_commit(ph))) status = die("del", d < 0 ? d : rc);
        if (d == 0) status = 1;
    } else if (!strcmp(cmd, "scan") && argc <= 5) {
        kv_scan(m, argc > 3 ? argv[3] : NULL, argc > 3 ? strlen(argv[3]) : 0,
                argc > 4 ? strtoull(argv[4], NULL, 10) : 0, print, NULL);
    } else if (!strcmp(cmd, "load") && (argc == 4 || argc == 5)) {
        unsigned long long n = strtoull(argv[3], NULL, 10),
                           batch = argc == 5 ? strtoull(argv[4], NULL, 10) : 10000;
        if (!batch) batch = 1;
        uint64_t x = kv_count(m) * 0x9e3779b97f4a7c15ull + 1;
        char key[KV_KEY + 1], val[100];
        for (unsigned long long i = 0; i < n && !status; i += batch) {
            if ((rc = tk_ph_begin(ph))) return die("load", rc);
            for (unsigned long long j = i; j < n && j < i + batch; j++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                snprintf(key, sizeof key, "%016llx", (unsigned long long)x);
                memset(val, 'a' + (int)(x % 26), sizeof val);
                if ((rc = kv_put(m, key, KV_KEY, val, sizeof val))) {
                    tk_ph_abort(ph);
                    status = die("load", rc);
                    break;
                }
            }
            if (!status && (rc = tk_ph_commit(ph))) status = die("load", rc);
        }
    } else if (!strcmp(cmd, "stats") && argc == 3) {
        struct tk_ph_stats st;
        tk_ph_stats(ph, &st);
        printf("records %llu\nsize %llu bytes\npages read %llu\npointers swizzled %llu\n"
               "mechanism %s\n",
               (unsigned long long)kv_count(m), (unsigned long long)st.size,
               (unsigned long long)st.pages_read, (unsigned long long)st.pointers_swizzled,
               tk_mech_name(st.mech));
    } else {
        fprintf(stderr, "pheap-kv: bad command (run without arguments for the usage)\n");
        status = 2;
    }
    kv_close(m);
    rc = tk_ph_close(ph);
    if (rc && !status) status = die("close", rc);
    return status;
}
