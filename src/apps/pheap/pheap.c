/* src/apps/pheap/pheap.c - the transactional persistent heap
 * (include/trapkit/pheap.h says what it offers).
 *
 * The file: 4 KiB pages in chunks of 512 (2 MiB).  The first 8 pages of a
 * chunk describe its pages, 64 bytes a page (struct pdesc: free, a slab of
 * small objects of one type and slot size with its allocation bitmap, or
 * the head or a continuation of a run of pages holding one large object);
 * the descriptors of those 8 pages are never used, and in chunk 0 their
 * 512 bytes hold the superblock (struct sb).  Page 8 holds the types
 * (struct tdesc: name, size, a bitmap of its pointer words).  The store
 * grows a chunk at a time.
 *
 * In memory the store lies at base, in one reservation of max_size bytes
 * that is a trapkit region.  Every page starts no-access.  A first touch
 * (on_fault) reads its extent (16 pages) with pread, swizzles each page's
 * pointer words (offset -> base + offset; the descriptors say where they
 * are, and the descriptor pages of a chunk are read before its other
 * extents) and makes the extent read-only.  In a transaction, the first
 * write to a page saves its before-image in the undo area and opens the
 * page; commit copies each written page, unswizzles the copy and writes
 * them all as one record of the redo log (PATH.log) with one fdatasync,
 * then makes them read-only again.  The log is applied to PATH (the pages
 * committed since the last application, as they are now in memory,
 * unswizzled), PATH is synced, and the log truncated, once it passes
 * log_limit and at close.  Opening replays the log's complete records.
 *
 * The log: a header page (struct log_hdr: its epoch), then records, one
 * after another from offset 4096: struct rec_hdr, then per page struct
 * rec_ent and its 4096 bytes.  A record belongs to the log when its epoch is
 * the header's, its lsn its predecessor's + 1 and its CRC-32C (over the
 * header with crc 0 and every entry) right.  Emptying the log writes the
 * header with the next epoch: the file keeps its blocks, so a commit
 * overwrites blocks the file system has already allocated and its
 * fdatasync writes no metadata (an append's would, for the file's size).
 * base_npages is the store file's size in pages when the log was last
 * emptied (the store file is at least that long: anything shorter was
 * truncated by damage).
 */
#include <trapkit/pheap.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/checkpoint/image.h" /* tk__crc32c */
#include "arch/x86_64/insn.h"
#include "core/internal.h"
#include "core/region_impl.h" /* tk__defer_signals */
#include "os/linux/os.h"
#include "trapkit/error.h"

enum {
    PS = 4096,
    CHUNK = 512,    /* pages */
    META = 8,       /* descriptor pages at the start of a chunk */
    EXTENT = 16,    /* pages read at a first touch */
    TYPES_PAGE = 8, /* in chunk 0 */
    FIRST_DATA_PAGE = 9,
    SLAB_MAX = 2048,         /* bytes: larger objects get pages of their own */
    MAX_SPAN = CHUNK - META, /* pages of the largest object */
    MAX_TYPES = 63,          /* entries 1..63 of the types page */
    SB_BYTES = 512,
    VERSION = 1,
    LOG_VERSION = 2,    /* the log's header (its records are of VERSION) */
    SEG_PAGES = 262144, /* 1 GiB: a trapkit region each, made as the store reaches it */
    LOG_START = 4096,   /* the first record's offset in the log */
};
#define SB_MAGIC "TKPHEAP"      /* 8 bytes with its NUL */
#define TYPES_MAGIC 0x53505954u /* "TYPS" */
#define REC_MAGIC 0x4c504b54u   /* "TKPL" */
#define LOG_MAGIC 0x474c504bu   /* "KPLG" */
#define DEFAULT_MAX (64ull << 30)
#define DEFAULT_LOG_LIMIT (64u << 20)
#define DEFAULT_TX_PAGES 65536u
#define LOG_AHEAD (4u << 20)       /* log bytes kept written ahead of log_end */
#define LOG_AHEAD_CHUNK (1u << 20) /* written at a time */

enum kind { K_FREE = 0, K_SLAB = 1, K_HEAD = 2, K_CONT = 3, K_META = 4 };

struct sb {
    char magic[8];
    uint32_t version, page_size;
    uint64_t npages;    /* the store's size in pages, a multiple of CHUNK */
    uint64_t root;      /* a pointer word (swizzled in memory) */
    uint64_t lsn;       /* unused (the log's records and header carry the lsn) */
    uint64_t free_hint; /* no free page before this one */
    uint32_t pad, crc;  /* crc of the SB_BYTES with crc 0 */
};
_Static_assert(sizeof(struct sb) <= SB_BYTES, "superblock");

struct tdesc {
    char name[24];
    uint32_t size, pad;
    uint64_t ptrmap[4]; /* bit w: the word at byte 8w is a pointer */
};
_Static_assert(sizeof(struct tdesc) == 64, "type entry");

struct types_hdr { /* entry 0 of the types page */
    uint32_t magic, ntypes;
};

struct pdesc {
    uint8_t kind, pad0;
    uint16_t slot;   /* K_SLAB: bytes a slot */
    uint16_t nslots; /* K_SLAB */
    uint16_t used;   /* K_SLAB: slots allocated */
    uint32_t type;
    uint32_t span;  /* K_HEAD: pages of the run; K_CONT: pages back to its head */
    uint64_t count; /* K_HEAD: elements of the object */
    uint64_t pad1;
    uint8_t bits[32]; /* K_SLAB: slots allocated */
};
_Static_assert(sizeof(struct pdesc) == 64, "page descriptor");

struct rec_hdr {
    uint32_t magic, version;
    uint64_t lsn, npages, base_npages, len; /* npages: the record's pages */
    uint32_t crc, pad;
    uint64_t epoch;
    uint64_t store_pages; /* the store's size in pages after the transaction */
};
struct log_hdr {
    uint32_t magic, version; /* version: LOG_VERSION (1: without start, 24 bytes) */
    uint64_t epoch;
    uint32_t crc;
    uint32_t clean; /* written by a close that applied everything: no record counts */
    uint64_t start; /* the first record's offset (records before it are in the store file) */
};
_Static_assert(sizeof(struct log_hdr) == 32, "log header");
_Static_assert(sizeof(struct rec_hdr) == 64, "record header");
struct rec_ent {
    uint64_t page;
    uint32_t crc, pad;
};
#define ENT_BYTES (sizeof(struct rec_ent) + PS)

enum { EXT_ABSENT = 0, EXT_LOADING = 1, EXT_LOADED = 2 };

struct ov_ent {
    uint64_t page;
    const char *data; /* its 4096 bytes, unswizzled */
};

struct tk_ph {
    char *base;
    size_t max;
    /* the reservation's first segments, as far as the store reaches (a
     * region costs its size in bookkeeping and in the calls that make and
     * unmake it, so the rest of the reservation is only reserved) */
    tk_region **seg;
    char **view; /* each segment's second view (MAP2), read-write: first touches fill it */
    _Atomic size_t nseg;
    enum tk_mech mech;
    int fd, logfd;
    char *path;
    _Atomic uint64_t npages; /* the store's size now (the superblock's, mirrored) */
    uint64_t base_npages;    /* the store file's size in pages when the log was emptied */
    size_t log_limit, max_tx;
    uint64_t log_end; /* the next record's offset (log_start: none) */
    /* the log file's bytes written already, blocks and size (under lk): a
     * record within them is an overwrite, whose fdatasync writes no
     * metadata; an append's writes the inode too (about twice as long).  The
     * applier thread writes zeros ahead of log_end, [fill_from, log_ready +
     * LOG_AHEAD_CHUNK) while filling; a commit never writes there then. */
    uint64_t log_ready, fill_from;
    bool filling;
    uint64_t log_start; /* the first record's (LOG_START, or later while readers hold the log) */
    uint64_t epoch, lsn;
    bool log_open; /* the log's header on disk says records of epoch may follow */
    struct tdesc types[MAX_TYPES + 1]; /* the types page's entries (0: its header) */
    /* per type, the byte offsets of its pointer words (from types[].ptrmap:
     * index_types()) */
    uint16_t ptr_off[MAX_TYPES + 1][SLAB_MAX / 8];
    uint16_t nptr[MAX_TYPES + 1];
    _Atomic uint8_t *ext; /* per extent: EXT_* */
    /* lazy swizzling (TK_PH_LAZY): per page, its pointer words not yet
     * swizzled; a page with any stays no-access and its loads are emulated */
    bool lazy;
    atomic_flag lz_settling; /* (lz_settle runs: not again from within) */
    _Atomic uint16_t *lz_left;
    _Atomic uint8_t *lz_idle;     /* per page, loads emulated that swizzled nothing */
    _Atomic uint64_t lz_emulated; /* loads emulated */
    /* the transaction */
    atomic_bool in_tx;
    _Atomic uint64_t *dirty; /* bitmap: pages written in it */
    _Atomic size_t nwritten; /* entries of wset and undo in use */
    _Atomic size_t nsaved;   /* of them, written (release: wset and undo are published) */
    uint64_t *wset;          /* the pages written, in order */
    char *undo;              /* their before-images */
    /* the log's records, kept until they are applied to the store file by
     * the applier thread (or at close); under lk, as are log_end, lsn,
     * epoch, log_open and base_npages once the thread runs */
    pthread_mutex_t lk;
    pthread_cond_t cond; /* the applier's work, and commits held back by a full log */
    struct rec_buf *rec_head, *rec_tail;
    size_t nrecs;
    pthread_t applier;
    bool applier_on, stop;
    int apply_err;      /* the applier's error (the log keeps everything then) */
    _Atomic int broken; /* a write of the log failed: no more commits (reopen the store) */
    bool log_new;       /* the log has no header yet */
    bool ro;            /* opened TK_PH_READONLY: a reader of a snapshot */
    bool pinned;        /* under lk: a reader holds records back from the store file */
    /* pages whose newest committed image is in the log, not in the store
     * file (a reader's snapshot; a writer that opened while a reader held
     * records back): a first touch takes them from here, sorted by page */
    struct ov_ent *ov;
    size_t nov;
    char *ov_buf; /* the log's records the entries point into */
    /* the open's replay, scanned and checked before anything is written */
    char *rp_buf;
    uint64_t rp_first, rp_end; /* the sound records' offsets in the log (rp_buf from rp_first) */
    uint64_t rp_npages;        /* the store's size after them */
    uint64_t *seen;            /* bitmap: the pages an application wrote already */
    /* allocation: a page of each (type, slot) that may have room */
    uint64_t slab_hint[MAX_TYPES + 1][SLAB_MAX / 16 + 1];
    /* statistics */
    _Atomic uint64_t pages_read, swizzled;
    uint64_t commits, aborts, pages_logged, replayed;
    pid_t owner;             /* the process that opened it */
    struct tk_ph *next_open; /* (open_stores) */
    _Atomic uint64_t applies;
};

/* ---- fork ---------------------------------------------------------------
 * A child of fork() gets the store's mappings, and the second views are
 * shared memory: its writes to a page the parent had open in a transaction
 * would reach the parent's memory, and its first touches would fill the
 * parent's views.  So in the child every open store is made no-access
 * (before fork returns there); a touch then stops the child with a message,
 * and tk_ph_begin fails with -ECHILD.  A child that calls exec or _exit is
 * not affected. */
static pthread_mutex_t open_lk = PTHREAD_MUTEX_INITIALIZER;
static struct tk_ph *open_stores;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&open_lk);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&open_lk);
}

static void fork_child(void);

static void fork_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void add_open(struct tk_ph *ph)
{
    pthread_once(&fork_once, fork_init);
    pthread_mutex_lock(&open_lk);
    ph->next_open = open_stores;
    open_stores = ph;
    pthread_mutex_unlock(&open_lk);
}

/* open(2) of one of a store's files, O_CLOEXEC, under the list's lock (a
 * fork meanwhile would give the child a copy fork_child does not know). */
static int open_locked(const char *path, int flags)
{
    pthread_mutex_lock(&open_lk);
    int fd = open(path, flags | O_CLOEXEC, 0644), err = errno;
    pthread_mutex_unlock(&open_lk);
    errno = err;
    return fd;
}

static void close_files(struct tk_ph *ph)
{
    if (ph->fd >= 0) close(ph->fd);
    if (ph->logfd >= 0) close(ph->logfd);
    ph->fd = ph->logfd = -1;
}

/* Off the list, its files closed (under the list's lock: a fork meanwhile
 * would give the child copies of them). */
static void remove_open(struct tk_ph *ph)
{
    pthread_mutex_lock(&open_lk);
    for (struct tk_ph **p = &open_stores; *p; p = &(*p)->next_open)
        if (*p == ph) {
            *p = ph->next_open;
            break;
        }
    close_files(ph);
    pthread_mutex_unlock(&open_lk);
}

/* ---- helpers ------------------------------------------------------------ */

static void *reserve(size_t len)
{
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* [signal-safe] A message on stderr: the parts, then a newline. */
static void say(const char *a, const char *b, uint64_t x, const char *c)
{
    char buf[256];
    size_t n = 0;
    const char *parts[2] = {a, b};
    for (int i = 0; i < 2; i++)
        for (const char *s = parts[i]; s && *s && n < 200; s++) buf[n++] = *s;
    if (b) {
        buf[n++] = '0';
        buf[n++] = 'x';
        for (int sh = 60; sh >= 0; sh -= 4) buf[n++] = "0123456789abcdef"[(x >> sh) & 15];
    }
    for (const char *s = c; s && *s && n < 250; s++) buf[n++] = *s;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, n);
    (void)w;
}

static bool full_pread(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            *got = done;
            return false;
        }
        if (k == 0) break;
        done += (size_t)k;
    }
    *got = done;
    return true;
}

static int full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        done += (size_t)k;
    }
    return 0;
}

static struct sb *sbp(tk_ph *ph)
{
    return (struct sb *)ph->base;
}

/* [signal-safe] tk_protect of pages [q, q + n), segment by segment (pages
 * of segments not made yet are no-access already: asking that is 0). */
static int prot(tk_ph *ph, uint64_t q, uint64_t n, int p)
{
    while (n) {
        uint64_t s = q / SEG_PAGES, k = (s + 1) * SEG_PAGES - q;
        if (k > n) k = n;
        if (s >= atomic_load(&ph->nseg)) return p == TK_PROT_NONE ? 0 : -EINVAL;
        int rc = tk_protect(ph->seg[s], ph->base + q * PS, k * PS, p);
        if (rc) return rc;
        q += k;
        n -= k;
    }
    return 0;
}

/* [signal-safe] */
static int prot_of(tk_ph *ph, uint64_t q)
{
    return tk_protection(ph->seg[q / SEG_PAGES], ph->base + q * PS);
}

static void discard(tk_ph *ph, uint64_t q, uint64_t n)
{
    while (n) {
        uint64_t s = q / SEG_PAGES, k = (s + 1) * SEG_PAGES - q;
        if (k > n) k = n;
        if (s >= atomic_load(&ph->nseg)) return;
        tk_discard(ph->seg[s], ph->base + q * PS, k * PS);
        q += k;
        n -= k;
    }
}

static tk_action on_fault(const tk_fault *f, void *arg);

static void fork_child(void)
{
    for (struct tk_ph *ph = open_stores; ph; ph = ph->next_open) {
        for (size_t s = 0; s < atomic_load(&ph->nseg); s++)
            tk_protect(ph->seg[s], tk_region_base(ph->seg[s]), tk_region_len(ph->seg[s]),
                       TK_PROT_NONE);
        /* the files closed: the writer's lock and a reader's hold are the
         * open files', which the child would keep alive after its parent
         * closed the store */
        close_files(ph);
        /* (the parent's threads may have held the lock or waited on the
         * condition: neither is in the child) */
        pthread_mutex_init(&ph->lk, NULL);
        pthread_cond_init(&ph->cond, NULL);
        ph->applier_on = false;
    }
    pthread_mutex_unlock(&open_lk);
}

/* The segments that hold pages [0, npages), made no-access.  Not
 * async-signal-safe. */
static int add_segments(tk_ph *ph, uint64_t npages, enum tk_mech want)
{
    for (size_t s = atomic_load(&ph->nseg); s * SEG_PAGES < npages; s++) {
        size_t off = s * (size_t)SEG_PAGES * PS, len = ph->max - off;
        if (len > (size_t)SEG_PAGES * PS) len = (size_t)SEG_PAGES * PS;
        tk_region_config rc_cfg = {.addr = ph->base + off,
                                   .len = len,
                                   .handler = on_fault,
                                   .arg = ph,
                                   .mech = s ? ph->mech : want,
                                   .flags = TK_REGION_NOACCESS | TK_REGION_MAP2};
        tk_region *r;
        int rc = tk_region_create(&rc_cfg, &r);
        if (rc) return rc;
        if (!s) ph->mech = tk_region_mech(r);
        if (ph->mech == TK_MECH_PKEYS) {
            tk_region_destroy(r);
            return tk__fail(-EOPNOTSUPP, "tk_ph_open: a store cannot be served by pkeys");
        }
        void *v;
        if ((rc = tk_map2(r, TK_PROT_RW, &v))) {
            tk_region_destroy(r);
            return rc;
        }
        ph->view[s] = v;
        ph->seg[s] = r;
        atomic_store(&ph->nseg, s + 1);
    }
    return 0;
}

/* [signal-safe] Page q's bytes in its segment's second view (accessible
 * whatever the page's protection; what it holds is the page's only once
 * the page was read). */
static char *in_view(tk_ph *ph, uint64_t q)
{
    uint64_t s = q / SEG_PAGES;
    return ph->view[s] + (q - s * SEG_PAGES) * PS;
}

/* Page q's descriptor through the view (its descriptor page read already). */
static struct pdesc *desc_v(tk_ph *ph, uint64_t q)
{
    uint64_t c = q / CHUNK, i = q % CHUNK;
    return (struct pdesc *)in_view(ph, c * CHUNK + i / 64) + (i % 64);
}

static struct pdesc *desc(tk_ph *ph, uint64_t q)
{
    uint64_t c = q / CHUNK, i = q % CHUNK;
    return (struct pdesc *)(ph->base + (c * CHUNK + i / 64) * PS) + (i % 64);
}

static bool is_meta(uint64_t q)
{
    return q % CHUNK < META || q == TYPES_PAGE;
}

static uint32_t sb_crc(const void *sb)
{
    unsigned char copy[SB_BYTES];
    memcpy(copy, sb, SB_BYTES);
    ((struct sb *)copy)->crc = 0;
    return tk__crc32c(0, copy, SB_BYTES);
}

static bool bit(const uint64_t *map, size_t i)
{
    return map[i / 64] >> (i % 64) & 1;
}

/* ---- pointer words ------------------------------------------------------
 * Calls f(word, ctx) for every pointer word of page q, whose contents are at
 * mem (the page itself, or a copy); d is q's descriptor as it is now.
 * Returns the first non-zero result of f. */
typedef int (*word_fn)(uint64_t *w, void *ctx);

static int elems(const struct tdesc *t, char *mem, uint64_t from, uint64_t to, uint64_t start,
                 word_fn f, void *ctx)
{
    /* the object's bytes [from, to) lie on this page at mem + (x - start) */
    uint64_t e = t->size;
    for (uint64_t x = from; x < to; x += 8) {
        uint64_t w = (x % e) / 8;
        if (t->ptrmap[w / 64] >> (w % 64) & 1) {
            int rc = f((uint64_t *)(mem + (x - start)), ctx);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ph->ptr_off and nptr from ph->types.  (Types are only added while a
 * first touch may read them, and an entry is written before the header
 * counts it.) */
static void index_types(tk_ph *ph)
{
    for (int t = 1; t <= MAX_TYPES; t++) {
        uint16_t n = 0;
        for (unsigned w = 0; w < SLAB_MAX / 8 && w * 8 < ph->types[t].size; w++)
            if (ph->types[t].ptrmap[w / 64] >> (w % 64) & 1)
                ph->ptr_off[t][n++] = (uint16_t)(w * 8);
        ph->nptr[t] = n;
    }
}

static int page_words(tk_ph *ph, uint64_t q, char *mem, const struct pdesc *d, word_fn f, void *ctx,
                      bool via_view)
{
    if (q == 0) return f(&((struct sb *)mem)->root, ctx);
    if (is_meta(q)) return 0;
    if (d->type == 0 || d->type > MAX_TYPES) return 0;
    const struct tdesc *t = &ph->types[d->type];
    if (t->size == 0) return 0;
    switch (d->kind) {
    case K_SLAB: /* (a damaged descriptor is refused, never followed) */
        if (d->slot < t->size || d->slot % 8 || d->nslots > 256 ||
            (uint64_t)d->nslots * d->slot > PS)
            return -1;
        for (unsigned s = 0; s < d->nslots && s < 256; s++) {
            if (!(d->bits[s / 8] >> (s % 8) & 1)) continue;
            char *obj = mem + (uint64_t)s * d->slot;
            const uint16_t *off = ph->ptr_off[d->type];
            for (unsigned i = 0, n = ph->nptr[d->type]; i < n; i++) {
                int rc = f((uint64_t *)(obj + off[i]), ctx);
                if (rc) return rc;
            }
        }
        return 0;
    case K_HEAD:
    case K_CONT: {
        uint64_t back = d->kind == K_CONT ? d->span : 0;
        if (d->kind == K_CONT && (back == 0 || back > q % CHUNK - META)) return -1;
        const struct pdesc *head = d->kind == K_HEAD ? d
                                   : via_view        ? desc_v(ph, q - back)
                                                     : desc(ph, q - back);
        if (head->kind != K_HEAD || head->type != d->type ||
            head->count > (uint64_t)MAX_SPAN * PS / t->size)
            return -1;
        uint64_t count = head->count;
        uint64_t from = back * PS, to = from + PS, total = count * t->size;
        if (to > total) to = total;
        if (from >= to) return 0;
        return elems(t, mem, from, to, from, f, ctx);
    }
    default:
        return 0;
    }
}

struct swz {
    tk_ph *ph;
    uint64_t limit; /* bytes of the store */
    uint64_t n;
    uint64_t lo, hi; /* lazily: the words to swizzle, [lo, hi) in the view */
    uint64_t q;      /* lazily: their page */
    bool count;      /* lazily, at a first touch: only count them */
};

/* A pointer word as read (an offset) swizzled, or only counted; one
 * outside the store refused. */
static int swizzle_word(uint64_t *w, void *ctx)
{
    struct swz *s = ctx;
    uint64_t v = *w;
    if (v == 0) return 0;
    if (v >= s->limit) return -1;
    if (!s->count) *w = (uint64_t)(uintptr_t)s->ph->base + v;
    s->n++;
    return 0;
}

static void lz_opened(tk_ph *ph, uint64_t q);

/* [signal-safe] Lazy swizzling: the word swizzled in the view if it lies in
 * [lo, hi) and is not yet (another thread may swizzle it at once: the one
 * whose compare-and-swap succeeds counts it).  The page is opened when its
 * last word is swizzled. */
static int lazy_word(uint64_t *w, void *ctx)
{
    struct swz *s = ctx;
    uint64_t a = (uint64_t)(uintptr_t)w;
    if (a + 8 <= s->lo || a >= s->hi) return 0;
    _Atomic uint64_t *aw = (_Atomic uint64_t *)w;
    /* (acquire: the emulator then reads what another thread swizzled) */
    uint64_t v = atomic_load_explicit(aw, memory_order_acquire);
    if (v == 0 || v >= s->limit) return 0; /* null, or swizzled (counted) already */
    if (!atomic_compare_exchange_strong(aw, &v, (uint64_t)(uintptr_t)s->ph->base + v)) return 0;
    s->n++;
    if (atomic_fetch_sub(&s->ph->lz_left[s->q], 1) == 1) lz_opened(s->ph, s->q);
    return 0;
}

static int unswizzle_word(uint64_t *w, void *ctx)
{
    struct swz *s = ctx;
    uint64_t v = *w, b = (uint64_t)(uintptr_t)s->ph->base;
    if (v == 0) return 0;
    if (v < b || v - b >= s->limit) return -1;
    *w = v - b;
    return 0;
}

/* ---- first touch -------------------------------------------------------- */

static int load_extent(tk_ph *ph, uint64_t e);
static void overlay(tk_ph *ph, uint64_t first, uint64_t n);

/* The asynchronous signals are deferred (tk__defer_signals) while this
 * thread holds an extent EXT_LOADING or saves a page's before-image: a
 * handler of one that touched the same extent or page would wait for the
 * work it interrupted, for ever.  (A fault the work itself raises still
 * arrives.) */

/* [signal-safe] Makes sure extent e is in memory; 0, or -1 after a message. */
static int ensure_extent(tk_ph *ph, uint64_t e)
{
    for (;;) {
        uint8_t st = atomic_load_explicit(&ph->ext[e], memory_order_acquire);
        if (st == EXT_LOADED) return 0;
        if (st == EXT_ABSENT) {
            uint8_t want = EXT_ABSENT;
            uint64_t old;
            tk__defer_signals(&old);
            if (atomic_compare_exchange_strong(&ph->ext[e], &want, EXT_LOADING)) {
                int rc = load_extent(ph, e);
                atomic_store_explicit(&ph->ext[e], rc ? EXT_ABSENT : EXT_LOADED,
                                      memory_order_release);
                tk__restore_signals(&old);
                return rc;
            }
            tk__restore_signals(&old);
            continue;
        }
        sched_yield(); /* another thread reads it */
    }
}

/* [signal-safe] Reads extent e (which this thread holds as EXT_LOADING)
 * into the second view and swizzles it (its chunk's descriptors are in the
 * view already); the store's own pages are left as they are.  In a lazy
 * store, unless eager, a page's pointer words are only counted (its
 * lz_left), page 0's (the root) swizzled all the same.  0, or -1 after a
 * message. */
static int fill_extent(tk_ph *ph, uint64_t e, bool eager)
{
    uint64_t first = e * EXTENT;
    char *a = in_view(ph, first);
    size_t len = (size_t)EXTENT * PS;
    size_t got;
    /* the view's pages made at once, rather than by a fault each as pread
     * fills them (an older kernel says EINVAL: they are faulted in then) */
    madvise(a, len, MADV_POPULATE_WRITE);
    if (!full_pread(ph->fd, a, len, first * PS, &got)) {
        say("trapkit pheap: reading the store failed at offset ", "", first * PS + got,
            " (the program stops: the page cannot be given)");
        return -1;
    }
    if (got < len) memset(a + got, 0, len - got); /* past the file's end: zero */
    if (ph->nov) overlay(ph, first, EXTENT);
    struct swz s = {ph, atomic_load(&ph->npages) * PS, 0};
    for (uint64_t q = first; q < first + EXTENT; q++) {
        const struct pdesc *d = is_meta(q) ? NULL : desc_v(ph, q);
        if (q != 0 && !d) continue;
        static const struct pdesc none;
        bool lazy = ph->lazy && !eager && q != 0;
        struct swz c = {.ph = ph, .limit = s.limit, .count = true};
        if (page_words(ph, q, in_view(ph, q), d ? d : &none, swizzle_word, lazy ? &c : &s, true)) {
            say("trapkit pheap: damaged store: a bad descriptor or a pointer outside the store "
                "in the page at offset ",
                "", q * PS, " (the program stops rather than follow it)");
            return -1;
        }
        if (ph->lazy) { /* (eagerly: none; an extent read again after a discard starts afresh) */
            atomic_store_explicit(&ph->lz_left[q], lazy ? (uint16_t)c.n : 0, memory_order_relaxed);
            atomic_store_explicit(&ph->lz_idle[q], 0, memory_order_relaxed);
        }
    }
    atomic_fetch_add(&ph->pages_read, EXTENT);
    atomic_fetch_add(&ph->swizzled, s.n);
    return 0;
}

/* [signal-safe] The kernel's limit on the process's mappings is reached.
 * Each run of extents read is a mapping of its own (read-only between
 * no-access ones) until its neighbours are read too; reading the gap
 * between two runs joins them into one, two mappings fewer.  Fills the
 * shortest gaps (the single extents first, then up to 2, 4, ... 64), up to
 * 256 gaps or 1,024 extents, each claimed whole (a gap another thread is
 * reading is skipped) and made readable with one call.  Returns how many it
 * filled. */
static int fill_gaps(tk_ph *ph)
{
    uint64_t n = atomic_load(&ph->npages) / EXTENT, read = 0;
    int filled = 0;
    uint64_t old;
    tk__defer_signals(&old);
    for (uint64_t w = 1; w <= 64 && filled < 256 && read < 1024; w *= 2) {
        for (uint64_t e = 1; e < n && filled < 256 && read < 1024; e++) {
            if (atomic_load(&ph->ext[e - 1]) != EXT_LOADED ||
                atomic_load(&ph->ext[e]) != EXT_ABSENT)
                continue;
            uint64_t g = e;
            while (g < n && g - e <= w && atomic_load(&ph->ext[g]) == EXT_ABSENT) g++;
            if (g >= n || g - e > w || atomic_load(&ph->ext[g]) != EXT_LOADED ||
                (e - 1) * EXTENT / SEG_PAGES != g * EXTENT / SEG_PAGES || /* (one mapping) */
                (ph->lazy && (atomic_load(&ph->lz_left[e * EXTENT - 1]) ||
                              atomic_load(&ph->lz_left[g * EXTENT])))) { /* (joins nothing) */
                e = g;
                continue;
            }
            uint64_t k = e;
            for (; k < g; k++) {
                uint8_t want = EXT_ABSENT;
                if (!atomic_compare_exchange_strong(&ph->ext[k], &want, EXT_LOADING)) break;
            }
            /* (a chunk's first extent in the gap is read before the rest of
             * its chunk; one before the gap is read, as its right
             * neighbour is) */
            bool ok = k == g;
            for (uint64_t i = e; ok && i < g; i++) ok = fill_extent(ph, i, true) == 0;
            if (ok) ok = prot(ph, e * EXTENT, (g - e) * EXTENT, TK_PROT_READ) == 0;
            for (uint64_t i = e; i < k; i++)
                atomic_store_explicit(&ph->ext[i], ok ? EXT_LOADED : EXT_ABSENT,
                                      memory_order_release);
            if (ok) {
                filled++;
                read += g - e;
            }
            e = g;
        }
    }
    tk__restore_signals(&old);
    return filled;
}

static int lz_settle(tk_ph *ph);

/* [signal-safe] Pages [q, q + n) made p; where the kernel's limit on
 * mappings stops it, in a lazy store pages with pointers left are swizzled
 * whole and opened (lz_settle), or gaps are filled (fill_gaps), and it
 * tries again. */
static int prot_roomy(tk_ph *ph, uint64_t q, uint64_t n, int p)
{
    int rc = prot(ph, q, n, p);
    /* (lazily, the pages with pointers left first: no reading, and a
     * gap's read joins nothing while its neighbours' edges are no-access) */
    while (rc == -ENOMEM && (lz_settle(ph) > 0 || fill_gaps(ph) > 0)) rc = prot(ph, q, n, p);
    return rc;
}

/* [signal-safe] Reads extent e (which this thread holds as EXT_LOADING). */
static int load_extent(tk_ph *ph, uint64_t e)
{
    uint64_t first = e * EXTENT, chunk_first = first / CHUNK * CHUNK / EXTENT;
    /* the chunk's descriptors first (its first extent needs only itself) */
    if (e != chunk_first && ensure_extent(ph, chunk_first)) return -1;
    /* read and swizzled through the second view, so that no other thread
     * sees the pages before they are whole: the store's own view stays
     * no-access until the end (extents never cross a segment) */
    if (fill_extent(ph, e, false)) return -1;
    int prc = 0;
    for (uint64_t q = first, j; q < first + EXTENT && !prc; q = j) {
        /* (a lazy store's pages with words to swizzle stay no-access) */
        for (j = q; j < first + EXTENT && !(ph->lazy && atomic_load(&ph->lz_left[j]));) j++;
        if (j > q) prc = prot_roomy(ph, q, j - q, TK_PROT_READ);
        while (j < first + EXTENT && ph->lazy && atomic_load(&ph->lz_left[j])) j++;
    }
    if (prc) {
        say(prc == -ENOMEM ? "trapkit pheap: the kernel's limit on mappings (vm.max_map_count) "
                             "is reached: raise it to read more of the store; stopping at "
                           : "trapkit pheap: cannot make the store's pages readable at ",
            "", (uint64_t)(uintptr_t)(ph->base + first * PS), "");
        return -1;
    }
    return 0;
}

static tk_action first_write_masked(tk_ph *ph, uint64_t q, void *page);

/* [signal-safe] The first write to page q in the transaction. */
static tk_action first_write(tk_ph *ph, uint64_t q, void *page)
{
    uint64_t old;
    tk__defer_signals(&old);
    tk_action a = first_write_masked(ph, q, page);
    tk__restore_signals(&old);
    return a;
}

static tk_action first_write_masked(tk_ph *ph, uint64_t q, void *page)
{
    uint64_t m = 1ull << (q % 64);
    uint64_t old = atomic_fetch_or(&ph->dirty[q / 64], m);
    if (old & m) { /* another thread saves it: wait until it is open */
        while (prot_of(ph, q) != TK_PROT_RW) sched_yield();
        return TK_RESUME;
    }
    size_t k = atomic_fetch_add(&ph->nwritten, 1);
    if (k >= ph->max_tx) {
        atomic_fetch_and(&ph->dirty[q / 64], ~m); /* (not saved: not the transaction's) */
        say("trapkit pheap: a transaction wrote more pages than max_tx_pages; the write at ", "",
            (uint64_t)(uintptr_t)page, " is refused (raise tk_ph_config.max_tx_pages)");
        return TK_DECLINE;
    }
    /* (the page is read-only: every write to it came before its protection,
     * an order TSan does not see) */
    TK_TSAN_IGNORE_BEGIN();
    memcpy(ph->undo + k * PS, page, PS);
    TK_TSAN_IGNORE_END();
    ph->wset[k] = q;
    atomic_fetch_add_explicit(&ph->nsaved, 1, memory_order_release);
    if (prot_roomy(ph, q, 1, TK_PROT_RW)) {
        say("trapkit pheap: cannot open the page at ", "", (uint64_t)(uintptr_t)page,
            " for writing (the kernel's limit on mappings, vm.max_map_count?)");
        return TK_DECLINE;
    }
    return TK_RESUME;
}

/* ---- lazy swizzling ------------------------------------------------------
 * In a store opened with TK_PH_LAZY a page read on first touch keeps its
 * pointer words as offsets, and stays no-access while any is left.  A load
 * from it faults; the handler decodes the instruction, swizzles in the view
 * the pointer words among the bytes it reads, and performs it (the
 * project's emulator, arch/x86_64/insn.c, reading the view): the program
 * never sees an offset, and a pointer once swizzled stays so.  When the
 * page's last word is swizzled it opens read-only.  A write, and a load the
 * emulator does not perform (VEX-encoded, a string move, a fault without a
 * context), swizzle the whole page first, as eager swizzling would; so
 * does the LZ_IDLE_MAXth load from the page that swizzles nothing (the
 * price of a page-sized protection: its other data is read by emulation
 * while any pointer is left, and a page read often goes eager). */
enum { LZ_IDLE_MAX = 16 };

struct lz_emu {
    tk_ph *ph;
    uint64_t swizzled;
    /* what the emulator reads: the words copied with atomic loads, since
     * other threads may be swizzling them (16-aligned, as the store is) */
    _Alignas(16) uint64_t buf[6];
};

/* [signal-safe] Page q's last word to swizzle is swizzled. */
static void lz_opened(tk_ph *ph, uint64_t q)
{
    if (prot_roomy(ph, q, 1, TK_PROT_READ))
        say("trapkit pheap: cannot open the page at ", "", (uint64_t)(uintptr_t)(ph->base + q * PS),
            " for reading (the kernel's limit on mappings, vm.max_map_count?)");
}

/* [signal-safe] The pointer words of page q (read, and counted in lz_left)
 * that lie in [lo, hi) (addresses in the view) swizzled.  0, or -1 for a
 * damaged descriptor. */
static int lz_swizzle(tk_ph *ph, uint64_t q, uint64_t lo, uint64_t hi, uint64_t *n)
{
    if (!atomic_load(&ph->lz_left[q])) return 0;
    struct swz s = {ph, ph->max, 0, lo, hi, q};
    if (page_words(ph, q, in_view(ph, q), desc_v(ph, q), lazy_word, &s, true)) return -1;
    if (s.n) atomic_fetch_add(&ph->swizzled, s.n);
    if (n) *n += s.n;
    return 0;
}

/* [signal-safe] The kernel's limit on mappings is reached: each page with
 * pointers left is a no-access mapping between readable ones, so up to
 * 1,024 of them (the leftmost) are swizzled whole and opened, joining their
 * neighbours.  Returns how many. */
static int lz_settle(tk_ph *ph)
{
    if (!ph->lazy || atomic_flag_test_and_set(&ph->lz_settling)) return 0;
    int done = 0;
    uint64_t n = atomic_load(&ph->npages);
    for (uint64_t q = 0; q < n && done < 1024; q++) {
        if (atomic_load(&ph->ext[q / EXTENT]) != EXT_LOADED) {
            q |= EXTENT - 1;
            continue;
        }
        if (atomic_load(&ph->lz_left[q]) && !lz_swizzle(ph, q, 0, UINT64_MAX, NULL) &&
            prot_of(ph, q) != TK_PROT_NONE)
            done++;
    }
    atomic_flag_clear(&ph->lz_settling);
    return done;
}

/* [signal-safe] The emulator's view of the store: reads only, of pages
 * read already, within one segment, up to 16 bytes; their pointer words
 * swizzled first, then copied. */
static void *lz_map(uintptr_t addr, size_t len, bool write, void *ctx)
{
    struct lz_emu *e = ctx;
    tk_ph *ph = e->ph;
    uintptr_t b = (uintptr_t)ph->base;
    if (write || len == 0 || len > 16 || addr < b) return NULL;
    uint64_t off = addr - b, q0 = off / PS, q1 = (off + len - 1) / PS;
    if (q1 >= atomic_load(&ph->npages) || q0 / SEG_PAGES != q1 / SEG_PAGES) return NULL;
    for (uint64_t q = q0; q <= q1; q++)
        if (atomic_load_explicit(&ph->ext[q / EXTENT], memory_order_acquire) != EXT_LOADED)
            return NULL;
    char *v = in_view(ph, q0) + off % PS;
    for (uint64_t q = q0; q <= q1; q++)
        if (lz_swizzle(ph, q, (uintptr_t)v, (uintptr_t)v + len, &e->swizzled)) return NULL;
    uintptr_t from = (uintptr_t)v & ~(uintptr_t)15, to = ((uintptr_t)v + len + 7) & ~(uintptr_t)7;
    for (uintptr_t w = from, i = 0; w < to; w += 8, i++)
        e->buf[i] = atomic_load_explicit((_Atomic uint64_t *)w, memory_order_acquire);
    return (char *)e->buf + ((uintptr_t)v - from);
}

static bool lz_allowed(uintptr_t addr, size_t len, bool write, void *ctx)
{
    return lz_map(addr, len, write, ctx) != NULL;
}

/* [signal-safe] A fault on page q of a lazy store while it has words to
 * swizzle: TK_RESUME if the load was performed, TK_DECLINE for a damaged
 * page, else -1 (the page is swizzled whole: go on as eagerly). */
static int lazy_fault(tk_ph *ph, uint64_t q, const tk_fault *f)
{
    if (f->access == TK_ACCESS_READ && f->ucontext) {
        struct tk_insn d;
        struct tk_insn_access acc[2];
        if (tk__insn_decode(f->ucontext, &d)) {
            int na = tk__insn_accesses(&d, f->ucontext, acc);
            bool covers = false, reads = na > 0;
            for (int i = 0; i < na; i++) {
                uintptr_t a = (uintptr_t)f->addr;
                covers |= a >= acc[i].addr && a - acc[i].addr < acc[i].len;
                reads &= !acc[i].write;
            }
            struct lz_emu e = {ph, 0};
            struct tk_emu_ops ops = {lz_map, lz_allowed, &e};
            if (covers && reads && tk__insn_emulate(&d, f->ucontext, &ops)) {
                atomic_fetch_add_explicit(&ph->lz_emulated, 1, memory_order_relaxed);
                if (e.swizzled || atomic_fetch_add(&ph->lz_idle[q], 1) + 1 < LZ_IDLE_MAX)
                    return TK_RESUME;
                if (lz_swizzle(ph, q, 0, UINT64_MAX, NULL)) return TK_DECLINE; /* (cannot be) */
                return TK_RESUME;
            }
        }
    }
    if (lz_swizzle(ph, q, 0, UINT64_MAX, NULL)) {
        say("trapkit pheap: damaged store: a bad descriptor for the page at offset ", "", q * PS,
            " (the program stops rather than follow it)");
        return TK_DECLINE;
    }
    return -1;
}

/* [signal-safe] The region's handler. */
static tk_action on_fault(const tk_fault *f, void *arg)
{
    tk_ph *ph = arg;
    if (getpid() != ph->owner) {
        say("trapkit pheap: a child of fork() touched its parent's store at ", "",
            (uint64_t)(uintptr_t)f->addr, " (a child may not use the store: exec or _exit)");
        return TK_DECLINE;
    }
    uint64_t q = (uint64_t)((char *)f->page - ph->base) / PS;
    if (q >= atomic_load(&ph->npages)) return TK_DECLINE; /* past the store: not ours */
    if (ensure_extent(ph, q / EXTENT)) return TK_DECLINE;
    if (ph->lazy) {
        if (atomic_load(&ph->lz_left[q])) {
            int a = lazy_fault(ph, q, f);
            if (a != -1) return (tk_action)a;
        }
        /* (its last word swizzled by another thread, still opening it) */
        if (prot_of(ph, q) == TK_PROT_NONE && !atomic_load(&ph->lz_left[q]) &&
            prot_roomy(ph, q, 1, TK_PROT_READ)) {
            say("trapkit pheap: cannot open the page at ", "", (uint64_t)(uintptr_t)f->page,
                " for reading (the kernel's limit on mappings, vm.max_map_count?)");
            return TK_DECLINE;
        }
    }
    if (prot_of(ph, q) == TK_PROT_RW || f->access == TK_ACCESS_READ) return TK_RESUME;
    if (ph->ro) {
        say("trapkit pheap: a write to a store opened read-only (TK_PH_READONLY), at ", "",
            (uint64_t)(uintptr_t)f->addr, "");
        return TK_DECLINE;
    }
    if (!atomic_load(&ph->in_tx)) {
        say("trapkit pheap: a write to the store outside a transaction, at ", "",
            (uint64_t)(uintptr_t)f->addr, " (call tk_ph_begin first)");
        return TK_DECLINE;
    }
    return first_write(ph, q, f->page);
}

/* ---- the log ------------------------------------------------------------ */

/* A record's CRC (its crc field as 0). */
static uint32_t rec_crc(const char *rec, size_t len)
{
    struct rec_hdr h;
    memcpy(&h, rec, sizeof h);
    h.crc = 0;
    uint32_t c = tk__crc32c(0, &h, sizeof h);
    return tk__crc32c(c, rec + sizeof h, len - sizeof h);
}

/* The record at off of a log of size bytes in buf, if it is whole, sound
 * and of the epoch: its length, else 0. */
static uint64_t rec_ok(const char *buf, uint64_t size, uint64_t off, uint64_t epoch)
{
    if (off + sizeof(struct rec_hdr) > size) return 0;
    struct rec_hdr h;
    memcpy(&h, buf + off, sizeof h);
    if (h.magic != REC_MAGIC || h.version != VERSION || h.epoch != epoch || h.npages == 0 ||
        h.npages > (size - off) / ENT_BYTES || h.len != sizeof h + h.npages * ENT_BYTES ||
        h.len > size - off)
        return 0;
    if (rec_crc(buf + off, h.len) != h.crc) return 0;
    return h.len;
}

/* Empties the log: its header with the next epoch, synced (clean: and
 * says so, for a close). */
/* The log's header page, in page (LOG_START bytes). */
static void header_page(char *page, uint64_t epoch, bool clean, uint64_t start)
{
    memset(page, 0, LOG_START);
    struct log_hdr h = {LOG_MAGIC, LOG_VERSION, epoch, 0, clean, start};
    h.crc = tk__crc32c(0, &h, sizeof h);
    memcpy(page, &h, sizeof h);
}

static int log_header(tk_ph *ph, uint64_t epoch, bool clean)
{
    char page[LOG_START];
    header_page(page, epoch, clean, ph->log_start);
    int rc = full_pwrite(ph->logfd, page, sizeof page, 0);
    if (!rc && fdatasync(ph->logfd)) rc = -errno;
    if (rc) return tk__failf(rc, "tk_ph: writing %s.log: %s", ph->path, strerror(-rc));
    ph->epoch = epoch;
    ph->log_open = !clean;
    return 0;
}

static int log_reset(tk_ph *ph, bool clean)
{
    uint64_t start = ph->log_start;
    ph->log_start = LOG_START;
    int rc = log_header(ph, ph->epoch + 1, clean);
    if (rc) {
        ph->log_start = start;
        return rc;
    }
    ph->log_end = LOG_START;
    ph->lsn = 0; /* (numbered from 1 in each epoch) */
    return 0;
}

/* ---- readers -------------------------------------------------------------
 * A reader (TK_PH_READONLY, in another process) sees the state of the last
 * commit in the log when it opened: the store file as it was then, with the
 * log's records laid over it (ov).  So that the store file keeps that state
 * for it, the writer never writes into it a record newer than the oldest
 * reader's: each reader holds a read lock on the log at PIN_LOCK + the key
 * (epoch << 32 | lsn) of its newest record, and the writer finds the least
 * such lock before it applies.  The locks are open-file-description locks
 * (fcntl F_OFD_*): they belong to the open file, so a reader that dies
 * drops its own.  A reader reads the log and takes its pin under a read
 * lock on APPLY_LOCK; the writer applies under a write lock on it, so it
 * never writes between the two. */
#define APPLY_LOCK (1ll << 40)
#define TURN_LOCK (APPLY_LOCK + 1) /* (a waiting writer goes before new readers) */
#define PIN_LOCK (APPLY_LOCK + 4096)

static uint64_t rec_key(uint64_t epoch, uint64_t lsn)
{
    return epoch << 32 | (lsn & 0xffffffffu);
}

static int ofd_lock(int fd, short type, off_t at, bool wait)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};
    while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl))
        if (errno != EINTR) return -errno;
    return 0;
}

/* The writer's: waits until no reader is registering (new ones wait at the
 * turnstile meanwhile, so that a stream of them cannot hold it off).  0, or
 * the error: then nothing may be written into the store file. */
static int apply_lock(tk_ph *ph)
{
    int rc = ofd_lock(ph->logfd, F_WRLCK, TURN_LOCK, true);
    if (rc) return rc;
    rc = ofd_lock(ph->logfd, F_WRLCK, APPLY_LOCK, true);
    ofd_lock(ph->logfd, F_UNLCK, TURN_LOCK, false);
    return rc;
}

/* A reader's, to register: through the turnstile, then shared. */
static int register_lock(tk_ph *ph)
{
    int rc = ofd_lock(ph->logfd, F_RDLCK, TURN_LOCK, true);
    if (rc) return rc;
    ofd_lock(ph->logfd, F_UNLCK, TURN_LOCK, false);
    return ofd_lock(ph->logfd, F_RDLCK, APPLY_LOCK, true);
}

static void apply_unlock(tk_ph *ph)
{
    ofd_lock(ph->logfd, F_UNLCK, APPLY_LOCK, false);
}

/* The key of the oldest state a reader holds: records up to it may go into
 * the store file (UINT64_MAX: no reader; 0 if the locks cannot be read). */
static uint64_t oldest_pin(tk_ph *ph)
{
    uint64_t least = UINT64_MAX;
    off_t len = 0; /* (0: to the end) */
    for (;;) {
        struct flock fl = {
            .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = PIN_LOCK, .l_len = len};
        if (fcntl(ph->logfd, F_OFD_GETLK, &fl)) return 0;
        if (fl.l_type == F_UNLCK || fl.l_start < PIN_LOCK) return least;
        least = (uint64_t)(fl.l_start - PIN_LOCK);
        if (least == 0) return 0;
        len = fl.l_start - PIN_LOCK; /* a lock below it? */
    }
}

static int ov_cmp(const void *a, const void *b)
{
    const struct ov_ent *x = a, *y = b;
    if (x->page != y->page) return x->page < y->page ? -1 : 1;
    return x->data < y->data ? -1 : x->data > y->data; /* (later in the log: newer) */
}

/* The record replay() found at offset at of the log, in rp_buf; *h its
 * header. */
static const char *rp_rec(const tk_ph *ph, uint64_t at, struct rec_hdr *h)
{
    const char *r = ph->rp_buf + (at - ph->rp_first);
    memcpy(h, r, sizeof *h);
    return r;
}

/* The overlay of the records replay() found numbered after lsn `after`:
 * each page's newest image.  rp_buf becomes ph->ov_buf. */
static int make_overlay(tk_ph *ph, uint64_t after)
{
    size_t n = 0;
    struct rec_hdr h;
    for (uint64_t at = ph->rp_first; at < ph->rp_end; at += h.len) {
        rp_rec(ph, at, &h);
        if (h.lsn > after) n += h.npages;
    }
    struct ov_ent *v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v) return tk__fail(-ENOMEM, "tk_ph_open: no memory for the log's pages");
    size_t k = 0;
    for (uint64_t at = ph->rp_first; at < ph->rp_end; at += h.len) {
        const char *p = rp_rec(ph, at, &h) + sizeof h;
        for (uint64_t i = 0; h.lsn > after && i < h.npages; i++, p += ENT_BYTES) {
            struct rec_ent en;
            memcpy(&en, p, sizeof en);
            v[k++] = (struct ov_ent){en.page, p + sizeof en};
        }
    }
    qsort(v, n, sizeof *v, ov_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].page == v[i].page)
            v[m - 1] = v[i];
        else
            v[m++] = v[i];
    }
    free(ph->ov);
    free(ph->ov_buf);
    ph->ov = v;
    ph->nov = m;
    ph->ov_buf = ph->rp_buf;
    ph->rp_buf = NULL;
    return 0;
}

/* [signal-safe] Lays the overlay's images of pages [first, first + n) over
 * their bytes in the view. */
static void overlay(tk_ph *ph, uint64_t first, uint64_t n)
{
    size_t lo = 0, hi = ph->nov;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ph->ov[mid].page < first)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < ph->nov && ph->ov[lo].page < first + n; lo++)
        memcpy(in_view(ph, ph->ov[lo].page), ph->ov[lo].data, PS);
}

/* Reads the log and checks it (nothing is written): its sound records in
 * order, to be applied by replay_apply() once the store proves sound; a
 * torn record at the end is dropped; a damaged one followed by committed
 * ones refuses.  sbuf and types get the newest images of the superblock and
 * the types page the records hold (*got_sb, *got_types). */
static int replay(tk_ph *ph, uint64_t file_pages, char *sbuf, bool *got_sb, char *types,
                  bool *got_types)
{
    struct stat st;
    if (fstat(ph->logfd, &st))
        return tk__failf(-errno, "tk_ph_open: %s.log: %s", ph->path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    ph->replayed = 0;
    ph->epoch = 0;
    ph->log_start = ph->log_end = LOG_START;
    *got_sb = *got_types = false;
    struct log_hdr lh;
    size_t hgot;
    static const struct log_hdr zero;
    if (size == 0 || (size == LOG_START && full_pread(ph->logfd, &lh, sizeof lh, 0, &hgot) &&
                      hgot == sizeof lh && !memcmp(&lh, &zero, sizeof lh))) {
        ph->log_new = true; /* made, and killed before its header was written */
        return 0;
    }
    if (size < LOG_START || !full_pread(ph->logfd, &lh, sizeof lh, 0, &hgot) || hgot != sizeof lh)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s.log is not a log of this store (%llu bytes)",
                         ph->path, (unsigned long long)size);
    uint32_t hcrc = lh.crc;
    lh.crc = 0;
    /* (version 1, of before readers, has no start: its CRC is of 24 bytes) */
    size_t hlen = lh.version == 1 ? offsetof(struct log_hdr, start) : sizeof lh;
    if (lh.magic != LOG_MAGIC || tk__crc32c(0, &lh, hlen) != hcrc)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s.log: its header is damaged", ph->path);
    if (lh.version != LOG_VERSION && lh.version != 1)
        return tk__failf(-EPROTONOSUPPORT, "tk_ph_open: %s.log is of format version %u", ph->path,
                         lh.version);
    uint64_t first = lh.version == 1 ? LOG_START : lh.start;
    if (first < LOG_START || first > size || first % 8)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s.log: its header is damaged (start %llu)",
                         ph->path, (unsigned long long)first);
    ph->epoch = lh.epoch;
    ph->log_start = ph->log_end = first;
    ph->log_open = !lh.clean;
    if (lh.clean) return 0; /* closed with nothing to replay */
    /* the log from first on: buf[i] is its byte first + i */
    char *buf = malloc(size - first + 1);
    if (!buf) return tk__fail(-ENOMEM, "tk_ph_open: no memory to read the log");
    size_t got;
    if (!full_pread(ph->logfd, buf, size - first, first, &got) || got != size - first) {
        int err = errno ? -errno : -EIO;
        free(buf);
        return tk__failf(err, "tk_ph_open: reading %s.log: %s", ph->path, strerror(-err));
    }
    size -= first; /* (the offsets below are from first) */
    uint64_t off = 0, lsn = 0, n = 0, base_npages = 0;
    for (;;) {
        uint64_t len = rec_ok(buf, size, off, ph->epoch);
        if (!len) break;
        struct rec_hdr h;
        memcpy(&h, buf + off, sizeof h);
        if (n > 0 && h.lsn != lsn + 1) break;
        if (n == 0) base_npages = h.base_npages;
        lsn = h.lsn;
        off += len;
        n++;
    }
    if (off < size) { /* a torn tail, or damage: committed records after it? */
        for (uint64_t at = off + 8; at + sizeof(struct rec_hdr) <= size; at += 8) {
            uint64_t len = rec_ok(buf, size, at, ph->epoch);
            if (!len) continue;
            struct rec_hdr h;
            memcpy(&h, buf + at, sizeof h);
            if (n == 0 || h.lsn > lsn) {
                free(buf);
                return tk__failf(-EUCLEAN,
                                 "tk_ph_open: %s.log is damaged at offset %llu, and committed "
                                 "transactions follow (from number %llu): refusing to open "
                                 "(nothing was changed)",
                                 ph->path, (unsigned long long)(first + off),
                                 (unsigned long long)h.lsn);
            }
        }
    }
    if (n > 0 && base_npages > file_pages) {
        free(buf);
        return tk__failf(-EUCLEAN,
                         "tk_ph_open: %s is truncated: %llu bytes where at least %llu were "
                         "written (nothing was changed)",
                         ph->path, (unsigned long long)file_pages * PS,
                         (unsigned long long)base_npages * PS);
    }
    uint64_t store_pages = 0;
    for (uint64_t at = 0; at < off;) { /* the newest superblock, types, size */
        struct rec_hdr h;
        memcpy(&h, buf + at, sizeof h);
        const char *p = buf + at + sizeof h;
        for (uint64_t i = 0; i < h.npages; i++, p += ENT_BYTES) {
            struct rec_ent en;
            memcpy(&en, p, sizeof en);
            if (en.page == 0) {
                memcpy(sbuf, p + sizeof en, SB_BYTES);
                *got_sb = true;
            } else if (en.page == TYPES_PAGE) {
                memcpy(types, p + sizeof en, sizeof ph->types);
                *got_types = true;
            }
        }
        store_pages = h.store_pages;
        at += h.len;
    }
    if (n == 0) {
        free(buf);
        return 0;
    }
    ph->rp_buf = buf;
    ph->rp_first = first;
    ph->rp_end = first + off;
    ph->rp_npages = store_pages;
    ph->replayed = n;
    ph->lsn = lsn;
    return 0;
}

/* Writes the records replay() found, those up to number upto, into the
 * store file, at its full size, and syncs it. */
static int replay_apply(tk_ph *ph, uint64_t upto)
{
    int rc = 0;
    struct stat st;
    if (fstat(ph->fd, &st))
        rc = -errno;
    else if ((uint64_t)st.st_size < ph->rp_npages * PS &&
             ftruncate(ph->fd, (off_t)(ph->rp_npages * PS)))
        rc = -errno;
    struct rec_hdr h;
    for (uint64_t at = ph->rp_first; !rc && at < ph->rp_end; at += h.len) {
        const char *p = rp_rec(ph, at, &h) + sizeof h;
        for (uint64_t i = 0; h.lsn <= upto && i < h.npages && !rc; i++, p += ENT_BYTES) {
            struct rec_ent en;
            memcpy(&en, p, sizeof en);
            rc = full_pwrite(ph->fd, p + sizeof en, PS, en.page * PS);
        }
    }
    if (!rc && fdatasync(ph->fd)) rc = -errno;
    if (rc)
        return tk__failf(rc, "tk_ph_open: replaying the log into %s: %s", ph->path, strerror(-rc));
    return 0;
}

/* A record of the log, kept in memory until it is applied. */
struct rec_buf {
    struct rec_buf *next;
    char *buf;
    size_t len;
    uint64_t npages; /* the store's size after it */
    uint64_t key;    /* rec_key(epoch, lsn) */
    uint64_t off;    /* its offset in the log */
};

/* rb at the end of the records kept (with lk held, once the applier runs). */
static void append_record(tk_ph *ph, struct rec_buf *rb)
{
    if (ph->rec_tail)
        ph->rec_tail->next = rb;
    else
        ph->rec_head = rb;
    ph->rec_tail = rb;
    ph->nrecs++;
}

/* How many of the n records from r a reader lets into the store file (the
 * first ones, up to the oldest reader's; pin: oldest_pin()). */
static size_t appliable(struct rec_buf *r, size_t n, uint64_t pin)
{
    size_t k = 0;
    for (; k < n && r && r->key <= pin; r = r->next) k++;
    return k;
}

/* At open, while a reader holds back the replayed records after number
 * upto: they stay in the log, and in memory as the applier's records and as
 * the overlay pages are read through. */
static int keep_records(tk_ph *ph, uint64_t upto)
{
    struct rec_hdr h;
    for (uint64_t at = ph->rp_first; at < ph->rp_end; at += h.len) {
        const char *r = rp_rec(ph, at, &h);
        if (h.lsn > upto) {
            struct rec_buf *rb = malloc(sizeof *rb);
            char *copy = malloc(h.len);
            if (!rb || !copy) {
                free(rb);
                free(copy);
                return tk__fail(-ENOMEM, "tk_ph_open: no memory for the log's records");
            }
            memcpy(copy, r, h.len);
            *rb = (struct rec_buf){NULL, copy, h.len, h.store_pages, rec_key(h.epoch, h.lsn), at};
            append_record(ph, rb);
        }
    }
    int rc = make_overlay(ph, upto);
    if (rc) return rc;
    ph->log_end = ph->rp_end;
    ph->pinned = true;
    return 0;
}

/* With lk held and the apply lock: the records before the first one still
 * kept are in the store file, but a reader keeps the log from being
 * emptied.  Once they make half the log's limit, the header says the log
 * starts after them (synced), and their blocks are given back to the file
 * system; readers and the replay read from there on.  0 or an error (the
 * header's state on disk is not known then). */
static int advance_start(tk_ph *ph)
{
    uint64_t start = ph->rec_head ? ph->rec_head->off : ph->log_end;
    if (start - ph->log_start < ph->log_limit / 2) return 0;
    uint64_t old = ph->log_start;
    ph->log_start = start;
    int rc = log_header(ph, ph->epoch, false);
    if (rc) {
        ph->log_start = old;
        return rc;
    }
    uint64_t a = (old + PS - 1) / PS * PS, b = start / PS * PS;
    if (b > a) {
        fallocate(ph->logfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a,
                  (off_t)(b - a)); /* (where the file system cannot, the blocks stay) */
        if (ph->log_ready > a) ph->log_ready = a; /* (holes now: written again once dead) */
    }
    return 0;
}

/* With lk held: the first n records are in the store file; forget them. */
static void drop_records(tk_ph *ph, size_t n)
{
    for (; n && ph->rec_head; n--) {
        struct rec_buf *r = ph->rec_head;
        ph->rec_head = r->next;
        if (!ph->rec_head) ph->rec_tail = NULL;
        ph->nrecs--;
        free(r->buf);
        free(r);
    }
}

/* Writes into the store file the pages of the n records from r, each page
 * once in its newest version among them, and syncs the store; *npages is
 * the store's size after the last.  Called by one thread at a time (the
 * applier, or close once it has stopped): it uses ph->seen. */
static int write_records(tk_ph *ph, struct rec_buf *r, size_t n, uint64_t *npages)
{
    if (n == 0) return 0;
    struct rec_buf **v = malloc(n * sizeof *v);
    if (!v) return tk__fail(-ENOMEM, "tk_ph: no memory to apply the log");
    for (size_t i = 0; i < n; i++) {
        v[i] = r;
        if (i + 1 < n) r = r->next; /* (the last one's next a commit may be setting) */
    }
    uint64_t np = v[n - 1]->npages;
    int rc = 0;
    struct stat st;
    if (fstat(ph->fd, &st))
        rc = -errno;
    else if ((uint64_t)st.st_size < np * PS && ftruncate(ph->fd, (off_t)(np * PS)))
        rc = -errno;
    for (size_t i = n; !rc && i-- > 0;) { /* newest first: a page's first sight is its last */
        struct rec_hdr h;
        memcpy(&h, v[i]->buf, sizeof h);
        const char *p = v[i]->buf + sizeof h;
        for (uint64_t k = 0; k < h.npages && !rc; k++, p += ENT_BYTES) {
            struct rec_ent en;
            memcpy(&en, p, sizeof en);
            if (bit(ph->seen, en.page)) continue;
            ph->seen[en.page / 64] |= 1ull << (en.page % 64);
            rc = full_pwrite(ph->fd, p + sizeof en, PS, en.page * PS);
        }
    }
    for (size_t i = 0; i < n; i++) { /* forget the marks */
        struct rec_hdr h;
        memcpy(&h, v[i]->buf, sizeof h);
        const char *p = v[i]->buf + sizeof h;
        for (uint64_t k = 0; k < h.npages; k++, p += ENT_BYTES) {
            struct rec_ent en;
            memcpy(&en, p, sizeof en);
            ph->seen[en.page / 64] = 0;
        }
    }
    free(v);
    if (!rc && fdatasync(ph->fd)) rc = -errno;
    if (rc) return tk__failf(rc, "tk_ph: writing the log into %s: %s", ph->path, strerror(-rc));
    *npages = np;
    return 0;
}

/* With lk held: the records are all in the store file: drop them, empty
 * the log (clean: for a close). */
static int log_applied(tk_ph *ph, uint64_t npages, bool clean)
{
    int rc = log_reset(ph, clean);
    if (rc) return rc;
    /* a log grown far past its limit (a large transaction) is cut back */
    struct stat ls;
    if (!fstat(ph->logfd, &ls) && (uint64_t)ls.st_size > 2 * (uint64_t)ph->log_limit + LOG_START &&
        ftruncate(ph->logfd, (off_t)(ph->log_limit + LOG_START)) == 0) {
        fdatasync(ph->logfd);
        if (ph->log_ready > ph->log_limit + LOG_START) ph->log_ready = ph->log_limit + LOG_START;
    }
    for (struct rec_buf *r = ph->rec_head, *next; r; r = next) {
        next = r->next;
        free(r->buf);
        free(r);
    }
    ph->rec_head = ph->rec_tail = NULL;
    ph->nrecs = 0;
    ph->base_npages = npages;
    atomic_fetch_add(&ph->applies, 1);
    return 0;
}

/* With lk held: the log should be written further ahead of log_end (not
 * past twice its limit, where commits wait anyway). */
static bool ahead_wanted(const tk_ph *ph)
{
    uint64_t cap = 2 * (uint64_t)ph->log_limit + LOG_START;
    return !ph->filling && !ph->apply_err && !ph->broken && ph->log_ready < cap &&
           ph->log_ready < ph->log_end + LOG_AHEAD;
}

/* With lk held (released meanwhile): one chunk of zeros written and synced
 * past what the log holds, so that the commits to come overwrite blocks
 * the file has (zeros are no record: the log ends at the first).  A
 * failure leaves log_ready as it was: commits append there then. */
static void write_ahead(tk_ph *ph)
{
    static const char zeros[64 << 10];
    uint64_t from = ph->log_ready > ph->log_end ? ph->log_ready : ph->log_end;
    uint64_t to = from + LOG_AHEAD_CHUNK;
    ph->filling = true;
    ph->fill_from = from;
    pthread_mutex_unlock(&ph->lk);
    bool ok = true;
    for (uint64_t o = from; ok && o < to; o += sizeof zeros)
        ok = full_pwrite(ph->logfd, zeros, sizeof zeros, o) == 0;
    ok = ok && fdatasync(ph->logfd) == 0;
    pthread_mutex_lock(&ph->lk);
    ph->filling = false;
    if (ok)
        ph->log_ready = to;
    else
        ph->log_ready = 2 * (uint64_t)ph->log_limit + LOG_START; /* (no more tries) */
    pthread_cond_broadcast(&ph->cond);
}

/* The applier thread: once the log holds half its limit, writes its
 * records into the store file (without the lock: commits go on), then,
 * with the lock, those that came meanwhile, and empties the log.  Records
 * newer than a reader's state stay in the log (and the log grows) until the
 * reader closes: it looks again every 50 ms. */
static void *applier_main(void *arg)
{
    tk_ph *ph = arg;
    tk__block_async_signals(); /* (the program's signals are not for it) */
    pthread_mutex_lock(&ph->lk);
    for (;;) {
        while (!ph->stop && !ahead_wanted(ph) &&
               (ph->apply_err || !ph->rec_head || ph->log_end - ph->log_start < ph->log_limit / 2))
            pthread_cond_wait(&ph->cond, &ph->lk);
        if (ph->stop) break;
        if (ahead_wanted(ph)) {
            write_ahead(ph);
            continue;
        }
        if (ph->pinned) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&ph->cond, &ph->lk, &ts);
            if (ph->stop) break;
        }
        pthread_mutex_unlock(&ph->lk);
        if (apply_lock(ph)) { /* (readers cannot be kept out: nothing is written) */
            pthread_mutex_lock(&ph->lk);
            ph->pinned = true;
            continue;
        }
        uint64_t pin = oldest_pin(ph);
        pthread_mutex_lock(&ph->lk);
        struct rec_buf *head = ph->rec_head;
        size_t n = appliable(head, ph->nrecs, pin);
        pthread_mutex_unlock(&ph->lk);
        uint64_t np = 0;
        int rc = write_records(ph, head, n, &np);
        pthread_mutex_lock(&ph->lk);
        size_t more = 0;
        if (!rc) {
            struct rec_buf *rest = head;
            for (size_t i = 0; i < n; i++) rest = rest->next;
            more = appliable(rest, ph->nrecs - n, pin);
            rc = write_records(ph, rest, more, &np);
        }
        if (!rc && n + more == ph->nrecs) {
            rc = log_applied(ph, np, false);
            if (rc) ph->broken = rc; /* the header's epoch on disk is not known */
            ph->pinned = false;
        } else if (!rc) {
            drop_records(ph, n + more); /* (the log keeps them until it is emptied) */
            ph->pinned = true;
            rc = advance_start(ph);
            if (rc) ph->broken = rc;
        }
        apply_unlock(ph);
        if (rc) ph->apply_err = rc;
        pthread_cond_broadcast(&ph->cond);
    }
    pthread_mutex_unlock(&ph->lk);
    return NULL;
}

/* ---- transactions ------------------------------------------------------- */

static int check_open(const tk_ph *ph, const char *fn)
{
    if (!ph) return tk__failf(-EINVAL, "%s: the store is NULL", fn);
    if (getpid() != ph->owner)
        return tk__failf(-ECHILD,
                         "%s: the store belongs to the parent of this process (a child of "
                         "fork() may not use it)",
                         fn);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The n pages of the transaction's write set made read-only again, each run
 * of neighbours with one call: a run is one mapping (where mprotect serves
 * the mechanism), which becomes read-only by joining its neighbours, never
 * by a split that the kernel's limit on mappings could refuse.  A page left
 * writable would let later writes escape the log: if it happens the
 * program stops with a message. */
static void reprotect(tk_ph *ph, size_t n, const char *fn)
{
    qsort(ph->wset, n, sizeof *ph->wset, cmp_u64);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && ph->wset[j] == ph->wset[i] + (j - i);) j++;
        int rc = prot_roomy(ph, ph->wset[i], j - i, TK_PROT_READ);
        if (rc) {
            fprintf(stderr,
                    "trapkit pheap: %s: cannot make the pages at %p read-only again (%s): "
                    "stopping rather than let later writes escape the log\n",
                    fn, (void *)(ph->base + ph->wset[i] * PS), strerror(-rc));
            abort();
        }
    }
}

/* check_open, and a transaction open */
static int check_tx(const tk_ph *ph, const char *fn)
{
    int rc = check_open(ph, fn);
    if (rc) return rc;
    if (!atomic_load(&ph->in_tx))
        return tk__failf(-EINVAL, "%s: no transaction is open (call tk_ph_begin first)", fn);
    return 0;
}

int tk_ph_begin(tk_ph *ph)
{
    int rc = check_open(ph, "tk_ph_begin");
    if (rc) return rc;
    if (ph->ro)
        return tk__fail(-EROFS, "tk_ph_begin: the store is open read-only (TK_PH_READONLY)");
    if (atomic_load(&ph->in_tx)) return tk__fail(-EBUSY, "tk_ph_begin: a transaction is open");
    if (ph->broken)
        return tk__failf(ph->broken,
                         "tk_ph_begin: an earlier write of %s.log failed (%s): close "
                         "the store and open it again",
                         ph->path, strerror(-ph->broken));
    atomic_store(&ph->nwritten, 0);
    atomic_store(&ph->nsaved, 0);
    atomic_store(&ph->in_tx, true);
    return 0;
}

static void reload_types(tk_ph *ph)
{
    memcpy(ph->types, ph->base + TYPES_PAGE * PS, sizeof ph->types);
    index_types(ph);
}

int tk_ph_abort(tk_ph *ph)
{
    int rc = check_tx(ph, "tk_ph_abort");
    if (rc) return rc;
    size_t n = atomic_load(&ph->nwritten);
    if (n > ph->max_tx) n = ph->max_tx;
    /* every first write's handler has returned (its thread went on) */
    (void)atomic_load_explicit(&ph->nsaved, memory_order_acquire);
    uint64_t before = atomic_load(&ph->npages);
    for (size_t k = n; k-- > 0;) {
        uint64_t q = ph->wset[k];
        memcpy(ph->base + q * PS, ph->undo + k * PS, PS);
        ph->dirty[q / 64] = 0;
    }
    reprotect(ph, n, "tk_ph_abort");
    uint64_t now = sbp(ph)->npages;
    atomic_store(&ph->npages, now);
    if (now < before) { /* chunks added by the transaction go */
        prot(ph, now, before - now, TK_PROT_RW);
        memset(ph->base + now * PS, 0, (size_t)(before - now) * PS);
        discard(ph, now, before - now);
        prot(ph, now, before - now, TK_PROT_NONE);
        for (uint64_t e = now / EXTENT; e < before / EXTENT; e++) ph->ext[e] = EXT_ABSENT;
    }
    reload_types(ph);
    memset(ph->slab_hint, 0, sizeof ph->slab_hint);
    atomic_store(&ph->nwritten, 0);
    atomic_store(&ph->nsaved, 0);
    atomic_store(&ph->in_tx, false);
    ph->aborts++;
    return 0;
}

int tk_ph_commit(tk_ph *ph)
{
    int rc = check_tx(ph, "tk_ph_commit");
    if (rc) return rc;
    if (ph->broken) {
        tk_ph_abort(ph);
        return tk__failf(ph->broken,
                         "tk_ph_commit: an earlier write of %s.log failed (%s): the "
                         "transaction was aborted; close the store and open it again",
                         ph->path, strerror(-ph->broken));
    }
    if (atomic_load(&ph->nwritten) == 0) { /* nothing written: nothing to log */
        atomic_store(&ph->in_tx, false);
        ph->commits++;
        return 0;
    }
    struct sb *sb = sbp(ph);

    size_t n = atomic_load(&ph->nwritten);
    (void)atomic_load_explicit(&ph->nsaved, memory_order_acquire); /* (as in abort) */
    if (n > ph->max_tx) {
        tk_ph_abort(ph);
        return tk__fail(-ENOSPC, "tk_ph_commit: the transaction wrote more than max_tx_pages "
                                 "pages; it was aborted");
    }
    uint64_t np = atomic_load(&ph->npages), len = sizeof(struct rec_hdr) + n * ENT_BYTES;
    char *rec = malloc(len);
    if (!rec) {
        return tk__fail(-ENOMEM, "tk_ph_commit: no memory for the log record");
    }
    struct swz s = {ph, np * PS, 0};
    char *p = rec + sizeof(struct rec_hdr);
    for (size_t k = 0; k < n; k++, p += ENT_BYTES) {
        uint64_t q = ph->wset[k];
        char *data = p + sizeof(struct rec_ent);
        memcpy(data, ph->base + q * PS, PS);
        if (page_words(ph, q, data, is_meta(q) ? NULL : desc(ph, q), unswizzle_word, &s, false)) {
            /* find the word for the message */
            uint64_t off = 0;
            for (uint64_t *w = (uint64_t *)data; w < (uint64_t *)(data + PS); w++)
                if (*w >= (uint64_t)(uintptr_t)ph->base) {
                    off = (uint64_t)((char *)w - data);
                    break;
                }
            const struct pdesc *d = is_meta(q) ? NULL : desc(ph, q);
            free(rec);
            return tk__failf(-EINVAL,
                             "tk_ph_commit: a pointer field of an object of type %s on the page "
                             "at %p (near byte %llu of the page) points outside the store: the "
                             "transaction is still open (fix it, or abort)",
                             d && d->type ? ph->types[d->type].name : "?",
                             (void *)(ph->base + q * PS), (unsigned long long)off);
        }
        if (q == 0) /* its checksum is of its form on disk */
            sb->crc = ((struct sb *)data)->crc = sb_crc(data);
        struct rec_ent en = {q, tk__crc32c(0, data, PS), 0};
        memcpy(p, &en, sizeof en);
    }
    /* (its lsn, epoch, base and CRC are set under the lock, below) */
    struct rec_hdr h = {REC_MAGIC, VERSION, 0, n, 0, len, 0, 0, 0, 0};
    memcpy(rec, &h, sizeof h);
    struct rec_buf *rb = malloc(sizeof *rb);
    if (!rb) {
        free(rec);
        return tk__fail(-ENOMEM, "tk_ph_commit: no memory for the log record");
    }
    *rb = (struct rec_buf){NULL, rec, len, np, 0, 0};
    pthread_mutex_lock(&ph->lk);
    if (!ph->applier_on && pthread_create(&ph->applier, NULL, applier_main, ph) == 0)
        ph->applier_on = true;
    /* a log at twice its limit waits for the applier (unless a reader
     * holds it back: it grows then) */
    while (ph->applier_on && !ph->apply_err && !ph->pinned &&
           ph->log_end - ph->log_start >= 2 * ph->log_limit)
        pthread_cond_wait(&ph->cond, &ph->lk);
    if ((!ph->pinned || ph->apply_err || !ph->applier_on) &&
        ph->log_end - ph->log_start >= 2 * ph->log_limit) { /* it failed, or never started */
        rc = ph->apply_err ? ph->apply_err : -EAGAIN;
        pthread_mutex_unlock(&ph->lk);
        free(rec);
        free(rb);
        tk_ph_abort(ph);
        return tk__failf(rc,
                         "tk_ph_commit: the log is full and cannot be applied to %s (%s); "
                         "the transaction was aborted (the log keeps every earlier commit)",
                         ph->path, strerror(-rc));
    }
    /* (not into the zeros being written ahead) */
    while (ph->filling && ph->log_end + len > ph->fill_from) pthread_cond_wait(&ph->cond, &ph->lk);
    /* (written under the lock's protection with the record's epoch and lsn) */
    struct rec_hdr h2;
    memcpy(&h2, rec, sizeof h2);
    h2.lsn = ph->lsn + 1;
    rb->key = rec_key(ph->epoch, h2.lsn);
    rb->off = ph->log_end;
    h2.base_npages = ph->base_npages;
    h2.epoch = ph->epoch;
    h2.store_pages = np;
    h2.crc = 0;
    memcpy(rec, &h2, sizeof h2);
    h2.crc = rec_crc(rec, len);
    memcpy(rec, &h2, sizeof h2);
    /* the session's first commit: the header says records may follow.  It
     * goes with the record, in one write and one sync, when the record is
     * the first (right after the header): until the sync returns, a crash
     * may keep the old header (the log then holds nothing: this commit did
     * not return), or the new one with the record whole or torn (a torn
     * record at the end is dropped). */
    char *both = !ph->log_open && ph->log_end == LOG_START && ph->log_start == LOG_START
                     ? malloc(LOG_START + len)
                     : NULL;
    if (both) {
        header_page(both, ph->epoch, false, ph->log_start);
        memcpy(both + LOG_START, rec, len);
        rc = full_pwrite(ph->logfd, both, LOG_START + len, 0);
        free(both);
        if (!rc) ph->log_open = true;
    } else {
        rc = ph->log_open ? 0 : log_header(ph, ph->epoch, false);
        if (!rc) rc = full_pwrite(ph->logfd, rec, len, ph->log_end);
    }
    if (!rc && fdatasync(ph->logfd)) rc = -errno;
    if (rc) {
        /* whether the record reached the disk is not known: no more commits
         * (the next open replays what the log holds) */
        ph->broken = rc;
        pthread_mutex_unlock(&ph->lk);
        free(rec);
        free(rb);
        tk_ph_abort(ph);
        return tk__failf(rc,
                         "tk_ph_commit: writing %s.log: %s; the transaction was aborted in "
                         "memory, and whether it reached the disk is not known: close the "
                         "store and open it again",
                         ph->path, strerror(-rc));
    }
    ph->log_end += len;
    if (ph->log_end > ph->log_ready) ph->log_ready = ph->log_end; /* (appended) */
    ph->lsn++;
    append_record(ph, rb);
    if (ph->log_end - ph->log_start >= ph->log_limit / 2 ||
        ph->log_ready < ph->log_end + LOG_AHEAD / 2)
        pthread_cond_signal(&ph->cond);
    pthread_mutex_unlock(&ph->lk);
    for (size_t k = 0; k < n; k++) ph->dirty[ph->wset[k] / 64] = 0;
    reprotect(ph, n, "tk_ph_commit");
    atomic_store(&ph->nwritten, 0);
    atomic_store(&ph->nsaved, 0);
    atomic_store(&ph->in_tx, false);
    ph->commits++;
    ph->pages_logged += n;
    return 0;
}

/* ---- allocation --------------------------------------------------------- */

/* In normal context: page q's extent in memory (before its descriptor
 * changes, so that it is swizzled by the descriptor it was written with). */
static int touch(tk_ph *ph, uint64_t q)
{
    return ensure_extent(ph, q / EXTENT) ? tk__fail(-EIO, "tk_ph: a page cannot be read") : 0;
}

/* n free pages side by side in one chunk (growing the store if none):
 * the first's index, or 0 with the error. */
static uint64_t free_run(tk_ph *ph, unsigned n, int *err)
{
    struct sb *sb = sbp(ph);
    uint64_t np = atomic_load(&ph->npages);
    uint64_t start = sb->free_hint < FIRST_DATA_PAGE ? FIRST_DATA_PAGE : sb->free_hint;
    bool seen_free = false;
    for (uint64_t c = start / CHUNK; c < np / CHUNK; c++) {
        uint64_t i0 = c * CHUNK + META, run = 0;
        if (i0 < start) i0 = start;
        for (uint64_t q = i0; q < (c + 1) * CHUNK; q++) {
            if (is_meta(q) || desc(ph, q)->kind != K_FREE) {
                run = 0;
                continue;
            }
            if (!seen_free) { /* the first free page of the store */
                seen_free = true;
                if (sb->free_hint != q) sb->free_hint = q;
            }
            if (++run == n) return q + 1 - n;
        }
    }
    /* a new chunk */
    if ((np + CHUNK) * PS > ph->max) {
        *err = tk__failf(-ENOSPC,
                         "tk_ph_alloc: the store's reserved range (%zu bytes) is full: "
                         "open it with a larger max_size",
                         ph->max);
        return 0;
    }
    int rc = add_segments(ph, np + CHUNK, ph->mech);
    if (rc) {
        *err = rc;
        return 0;
    }
    sb->npages = np + CHUNK;
    atomic_store(&ph->npages, np + CHUNK);
    return np + META;
}

static bool in_store(tk_ph *ph, const void *p, uint64_t *q)
{
    uintptr_t b = (uintptr_t)ph->base, a = (uintptr_t)p;
    if (a < b + FIRST_DATA_PAGE * PS || a >= b + atomic_load(&ph->npages) * PS) return false;
    *q = (a - b) / PS;
    return !is_meta(*q);
}

void *tk_ph_alloc(tk_ph *ph, tk_ph_type_t t, size_t count)
{
    if (check_tx(ph, "tk_ph_alloc")) return NULL;
    struct types_hdr th;
    memcpy(&th, &ph->types[0], sizeof th);
    if (t > th.ntypes) {
        tk__failf(-EINVAL, "tk_ph_alloc: type %u was not declared (tk_ph_type)", t);
        return NULL;
    }
    if (count == 0) {
        tk__fail(-EINVAL, "tk_ph_alloc: count is 0");
        return NULL;
    }
    uint64_t e = t ? ph->types[t].size : 1;
    if (count > (uint64_t)MAX_SPAN * PS / e) {
        tk__failf(-EFBIG,
                  "tk_ph_alloc: %zu objects of %llu bytes are more than the largest "
                  "object (%u bytes)",
                  count, (unsigned long long)e, (unsigned)(MAX_SPAN * PS));
        return NULL;
    }
    uint64_t bytes = e * count;
    int err = 0;
    if ((t == 0 && bytes <= SLAB_MAX) || (t != 0 && count == 1 && bytes <= SLAB_MAX)) {
        unsigned slot = (unsigned)((bytes + 15) / 16 * 16);
        uint64_t *hint = &ph->slab_hint[t][slot / 16];
        for (int tries = 0; tries < 2; tries++) {
            uint64_t q = *hint;
            if (q == 0) {
                q = free_run(ph, 1, &err);
                if (!q) return NULL;
                if (touch(ph, q)) return NULL;
                struct pdesc *d = desc(ph, q);
                memset(d, 0, sizeof *d);
                d->kind = K_SLAB;
                d->type = t;
                d->slot = (uint16_t)slot;
                d->nslots = (uint16_t)(PS / slot);
                *hint = q;
            }
            struct pdesc *d = desc(ph, q);
            if (d->kind != K_SLAB || d->type != t || d->slot != slot || d->used >= d->nslots) {
                *hint = 0;
                continue;
            }
            for (unsigned i = 0; i < d->nslots; i++) {
                if (d->bits[i / 8] >> (i % 8) & 1) continue;
                d->bits[i / 8] |= (uint8_t)(1u << (i % 8));
                d->used++;
                if (d->used == d->nslots) *hint = 0;
                char *obj = ph->base + q * PS + (size_t)i * slot;
                memset(obj, 0, slot);
                return obj;
            }
            *hint = 0;
        }
        tk__fail(-EIO, "tk_ph_alloc: the store's allocation data is inconsistent");
        return NULL;
    }
    unsigned n = (unsigned)((bytes + PS - 1) / PS);
    uint64_t q = free_run(ph, n, &err);
    if (!q) return NULL;
    for (unsigned i = 0; i < n; i++)
        if (touch(ph, q + i)) return NULL;
    for (unsigned i = 0; i < n; i++) {
        struct pdesc *d = desc(ph, q + i);
        memset(d, 0, sizeof *d);
        d->kind = i ? K_CONT : K_HEAD;
        d->type = t;
        d->span = i ? i : n;
        if (!i) d->count = count;
    }
    char *obj = ph->base + q * PS;
    memset(obj, 0, (size_t)n * PS);
    return obj;
}

int tk_ph_free(tk_ph *ph, void *obj)
{
    int rc = check_tx(ph, "tk_ph_free");
    if (rc) return rc;
    uint64_t q;
    if (!in_store(ph, obj, &q))
        return tk__failf(-EINVAL, "tk_ph_free: %p is not an object of the store", obj);
    if (touch(ph, q)) return -EIO;
    struct pdesc *d = desc(ph, q);
    uint64_t off = (uint64_t)((char *)obj - (ph->base + q * PS));
    struct sb *sb = sbp(ph);
    if (d->kind == K_SLAB && d->slot && off % d->slot == 0 && off / d->slot < d->nslots &&
        (d->bits[off / d->slot / 8] >> (off / d->slot % 8) & 1)) {
        unsigned i = (unsigned)(off / d->slot);
        d->bits[i / 8] &= (uint8_t) ~(1u << (i % 8));
        d->used--;
        if (d->used == 0) {
            if (ph->slab_hint[d->type][d->slot / 16] == q) ph->slab_hint[d->type][d->slot / 16] = 0;
            memset(d, 0, sizeof *d);
            if (sb->free_hint > q) sb->free_hint = q;
        } else if (d->type <= MAX_TYPES) {
            ph->slab_hint[d->type][d->slot / 16] = q;
        }
        return 0;
    }
    if (d->kind == K_HEAD && off == 0) {
        unsigned n = d->span;
        for (unsigned i = 0; i < n; i++) {
            if (touch(ph, q + i)) return -EIO;
            memset(desc(ph, q + i), 0, sizeof(struct pdesc));
        }
        if (sb->free_hint > q) sb->free_hint = q;
        return 0;
    }
    return tk__failf(-EINVAL, "tk_ph_free: %p is not the start of an allocated object", obj);
}

int tk_ph_touch(tk_ph *ph, const void *addr, size_t len, int write)
{
    int rc = write ? check_tx(ph, "tk_ph_touch") : check_open(ph, "tk_ph_touch");
    if (rc || len == 0) return rc;
    uintptr_t b = (uintptr_t)ph->base, a = (uintptr_t)addr;
    uint64_t size = atomic_load(&ph->npages) * PS;
    if (a < b || a - b >= size || len > size - (a - b))
        return tk__failf(-EINVAL, "tk_ph_touch: [%p, +%zu) is not inside the store", addr, len);
    for (uint64_t q = (a - b) / PS, last = (a - b + len - 1) / PS; q <= last; q++) {
        if (touch(ph, q)) return -EIO;
        if (ph->lazy && atomic_load(&ph->lz_left[q]) && lz_swizzle(ph, q, 0, UINT64_MAX, NULL))
            return tk__failf(-EUCLEAN, "tk_ph_touch: a damaged descriptor for the page at %p",
                             (void *)(ph->base + q * PS));
        if (prot_of(ph, q) == TK_PROT_NONE && prot_roomy(ph, q, 1, TK_PROT_READ))
            return tk__failf(-ENOMEM,
                             "tk_ph_touch: cannot open the page at %p (the kernel's limit on "
                             "mappings, vm.max_map_count?)",
                             (void *)(ph->base + q * PS));
        if (!write || prot_of(ph, q) == TK_PROT_RW) continue;
        if (atomic_load(&ph->nwritten) >= ph->max_tx)
            return tk__failf(-E2BIG,
                             "tk_ph_touch: the transaction has written max_tx_pages pages "
                             "(%zu) already",
                             ph->max_tx);
        if (first_write(ph, q, ph->base + q * PS) != TK_RESUME)
            return tk__failf(-ENOMEM, "tk_ph_touch: cannot open the page at %p for writing",
                             (void *)(ph->base + q * PS));
    }
    return 0;
}

void *tk_ph_root(tk_ph *ph)
{
    if (check_open(ph, "tk_ph_root")) return NULL;
    return (void *)(uintptr_t)sbp(ph)->root;
}

int tk_ph_set_root(tk_ph *ph, void *obj)
{
    int rc = check_tx(ph, "tk_ph_set_root");
    if (rc) return rc;
    uint64_t q;
    if (obj && !in_store(ph, obj, &q))
        return tk__failf(-EINVAL, "tk_ph_set_root: %p is not in the store", obj);
    sbp(ph)->root = (uint64_t)(uintptr_t)obj;
    return 0;
}

int tk_ph_type(tk_ph *ph, const char *name, size_t size, const size_t *ptr_offsets, size_t nptrs,
               tk_ph_type_t *out)
{
    int rc = check_open(ph, "tk_ph_type");
    if (rc) return rc;
    if (!name || !*name || strlen(name) > 23)
        return tk__fail(-EINVAL, "tk_ph_type: a name of 1 to 23 characters is needed");
    if (size == 0 || size > SLAB_MAX)
        return tk__failf(-EINVAL, "tk_ph_type: %s: size %zu is not 1 to %d bytes", name, size,
                         SLAB_MAX);
    if (nptrs && !ptr_offsets) return tk__fail(-EINVAL, "tk_ph_type: ptr_offsets is NULL");
    struct tdesc t;
    memset(&t, 0, sizeof t);
    memcpy(t.name, name, strlen(name));
    t.size = (uint32_t)((size + 7) / 8 * 8);
    for (size_t i = 0; i < nptrs; i++) {
        size_t o = ptr_offsets[i];
        if (o % 8 || o + 8 > size)
            return tk__failf(-EINVAL,
                             "tk_ph_type: %s: pointer offset %zu is not 8-byte aligned within "
                             "the %zu bytes",
                             name, o, size);
        t.ptrmap[o / 8 / 64] |= 1ull << (o / 8 % 64);
    }
    struct types_hdr th;
    memcpy(&th, &ph->types[0], sizeof th);
    for (uint32_t i = 1; i <= th.ntypes && i <= MAX_TYPES; i++) {
        if (strncmp(ph->types[i].name, t.name, sizeof t.name)) continue;
        if (ph->types[i].size != t.size || memcmp(ph->types[i].ptrmap, t.ptrmap, sizeof t.ptrmap))
            return tk__failf(-EINVAL,
                             "tk_ph_type: type %s is stored with another layout (%u bytes, "
                             "pointer words %016llx...): the data was written with it",
                             name, ph->types[i].size, (unsigned long long)ph->types[i].ptrmap[0]);
        if (out) *out = i;
        return 0;
    }
    if (th.ntypes >= MAX_TYPES)
        return tk__failf(-ENOSPC, "tk_ph_type: a store holds at most %d types", MAX_TYPES);
    bool own = !atomic_load(&ph->in_tx);
    if (own && (rc = tk_ph_begin(ph))) return rc;
    struct tdesc *page = (struct tdesc *)(ph->base + TYPES_PAGE * PS);
    uint32_t id = th.ntypes + 1;
    page[id] = t; /* (a write: the page joins the transaction) */
    th.ntypes = id;
    memcpy(&page[0], &th, sizeof th);
    reload_types(ph);
    if (own && (rc = tk_ph_commit(ph))) return rc;
    if (out) *out = id;
    return 0;
}

void *tk_ph_base(const tk_ph *ph)
{
    return ph ? ph->base : NULL;
}
size_t tk_ph_size(const tk_ph *ph)
{
    return ph ? (size_t)atomic_load(&ph->npages) * PS : 0;
}

/* tk_ph_stats grew loads_emulated in TRAPKIT_0.7: programs linked against
 * TRAPKIT_0.6 pass the struct up to mech, which that version fills. */
#define TK_SYMVER(impl, name, node) __asm__(".symver " #impl ", " #name node)
TK_SYMVER(tk_ph_stats_v7, tk_ph_stats, "@@TRAPKIT_0.7");
TK_SYMVER(tk_ph_stats_v6, tk_ph_stats, "@TRAPKIT_0.6");
int tk_ph_stats_v7(const tk_ph *ph, struct tk_ph_stats *out);
int tk_ph_stats_v6(const tk_ph *ph, void *out);
#define STATS_V6 offsetof(struct tk_ph_stats, loads_emulated)

int tk_ph_stats_v6(const tk_ph *ph, void *out)
{
    if (!ph || !out) return tk__fail(-EINVAL, "tk_ph_stats: NULL argument");
    struct tk_ph_stats all;
    int rc = tk_ph_stats_v7(ph, &all);
    if (!rc) memcpy(out, &all, STATS_V6);
    return rc;
}

int tk_ph_stats_v7(const tk_ph *ph, struct tk_ph_stats *out)
{
    if (!ph || !out) return tk__fail(-EINVAL, "tk_ph_stats: NULL argument");
    memset(out, 0, sizeof *out);
    out->size = atomic_load(&ph->npages) * PS;
    out->pages_read = atomic_load(&ph->pages_read);
    out->pointers_swizzled = atomic_load(&ph->swizzled);
    out->loads_emulated = atomic_load(&ph->lz_emulated);
    out->commits = ph->commits;
    out->aborts = ph->aborts;
    out->pages_logged = ph->pages_logged;
    pthread_mutex_lock((pthread_mutex_t *)&ph->lk);
    out->log_bytes = ph->log_end - ph->log_start;
    pthread_mutex_unlock((pthread_mutex_t *)&ph->lk);
    out->applies = atomic_load(&ph->applies);
    out->replayed = ph->replayed;
    out->mech = ph->mech;
    return 0;
}

/* ---- open and close ----------------------------------------------------- */

/* Syncs the directory that holds path (a file made there is named for
 * good). */
static int sync_dir(const char *path)
{
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) return tk__fail(-ENOMEM, "tk_ph_open: no memory");
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    if (dfd < 0 || fsync(dfd)) rc = -errno;
    if (dfd >= 0) close(dfd);
    free(dir);
    return rc ? tk__failf(rc, "tk_ph_open: syncing the directory of %s: %s", path, strerror(-rc))
              : 0;
}

/* A new store in the empty file fd: the superblock, the types page and
 * chunk 0's descriptors (the types page's marked). */
static int create_store(tk_ph *ph)
{
    char *page = calloc(1, PS);
    if (!page) return tk__fail(-ENOMEM, "tk_ph_open: no memory");
    struct sb *sb = (struct sb *)page;
    memcpy(sb->magic, SB_MAGIC, 8);
    sb->version = VERSION;
    sb->page_size = PS;
    sb->npages = CHUNK;
    sb->free_hint = FIRST_DATA_PAGE;
    ((struct pdesc *)page)[TYPES_PAGE].kind = K_META;
    sb->crc = sb_crc(sb);
    int rc = full_pwrite(ph->fd, page, PS, 0);
    memset(page, 0, PS);
    struct types_hdr th = {TYPES_MAGIC, 0};
    memcpy(page, &th, sizeof th);
    if (!rc) rc = full_pwrite(ph->fd, page, PS, (uint64_t)TYPES_PAGE * PS);
    free(page);
    if (!rc && ftruncate(ph->fd, (off_t)CHUNK * PS)) rc = -errno;
    if (!rc && fdatasync(ph->fd)) rc = -errno;
    if (rc) return tk__failf(rc, "tk_ph_open: creating %s: %s", ph->path, strerror(-rc));
    return sync_dir(ph->path); /* the directory entry too */
}

/* The superblock and types, as the file has them, or the log's newer
 * images of them (got_sb, got_types), checked; file_bytes is what the file
 * will hold (after the log's records are written: they make it as long as
 * their store was). */
static int read_meta(tk_ph *ph, uint64_t file_bytes, const char *log_sb, const char *log_types)
{
    char sbuf[SB_BYTES];
    size_t got;
    if (log_sb)
        memcpy(sbuf, log_sb, SB_BYTES);
    else if (!full_pread(ph->fd, sbuf, SB_BYTES, 0, &got) || got < SB_BYTES)
        return tk__failf(-EINVAL, "tk_ph_open: %s is not a trapkit store (%llu bytes)", ph->path,
                         (unsigned long long)file_bytes);
    struct sb sb;
    memcpy(&sb, sbuf, sizeof sb);
    if (memcmp(sb.magic, SB_MAGIC, 8))
        return tk__failf(-EINVAL, "tk_ph_open: %s is not a trapkit store (no signature)", ph->path);
    if (sb.version != VERSION)
        return tk__failf(-EPROTONOSUPPORT,
                         "tk_ph_open: %s is a store of format version %u; this trapkit reads "
                         "version %d",
                         ph->path, sb.version, VERSION);
    if (sb_crc(sbuf) != sb.crc)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s: the superblock is damaged (checksum)",
                         ph->path);
    if (sb.page_size != PS || sb.npages < CHUNK || sb.npages % CHUNK ||
        sb.npages > (1ull << 40) / PS || (sb.root && sb.root >= sb.npages * PS))
        return tk__failf(-EUCLEAN, "tk_ph_open: %s: the superblock is damaged (size %llu pages)",
                         ph->path, (unsigned long long)sb.npages);
    if (file_bytes < sb.npages * PS)
        return tk__failf(
            -EUCLEAN, "tk_ph_open: %s is truncated: %llu bytes where the store has %llu", ph->path,
            (unsigned long long)file_bytes, (unsigned long long)sb.npages * PS);
    if (sb.npages * PS > ph->max)
        return tk__failf(-EFBIG,
                         "tk_ph_open: %s holds %llu bytes, more than the %zu reserved: open it "
                         "with a larger max_size",
                         ph->path, (unsigned long long)sb.npages * PS, ph->max);
    if (log_types)
        memcpy(ph->types, log_types, sizeof ph->types);
    else if (!full_pread(ph->fd, ph->types, sizeof ph->types, (uint64_t)TYPES_PAGE * PS, &got) ||
             got < sizeof ph->types)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s: the types page cannot be read", ph->path);
    struct types_hdr th;
    memcpy(&th, &ph->types[0], sizeof th);
    if (th.magic != TYPES_MAGIC || th.ntypes > MAX_TYPES)
        return tk__failf(-EUCLEAN, "tk_ph_open: %s: the types page is damaged", ph->path);
    for (uint32_t i = 1; i <= th.ntypes; i++)
        if (ph->types[i].size == 0 || ph->types[i].size > SLAB_MAX || ph->types[i].size % 8)
            return tk__failf(-EUCLEAN, "tk_ph_open: %s: type %u is damaged", ph->path, i);
    index_types(ph);
    atomic_store(&ph->npages, sb.npages);
    return 0;
}

/* A reader's open: the last committed state, and its pin (see "readers"
 * above), under a read lock on APPLY_LOCK so that the writer writes nothing
 * into the store file meanwhile.  A commit writing the log's header as the
 * reader reads it makes it look damaged: the reader looks again. */
static int reader_snapshot(tk_ph *ph, char *log_sb, char *log_types)
{
    bool got_sb = false, got_types = false;
    int rc = 0;
    for (int tries = 0;; tries++) {
        if ((rc = register_lock(ph)))
            return tk__failf(rc, "tk_ph_open: locking %s.log: %s", ph->path, strerror(-rc));
        struct stat st;
        if (fstat(ph->fd, &st)) {
            rc = tk__failf(-errno, "tk_ph_open: %s: %s", ph->path, strerror(errno));
            break;
        }
        uint64_t file_bytes = (uint64_t)st.st_size;
        free(ph->rp_buf);
        ph->rp_buf = NULL;
        ph->replayed = 0;
        ph->lsn = 0;
        rc = replay(ph, file_bytes / PS, log_sb, &got_sb, log_types, &got_types);
        if (!rc) {
            if (ph->replayed && ph->rp_npages * PS > file_bytes) file_bytes = ph->rp_npages * PS;
            rc = read_meta(ph, file_bytes, got_sb ? log_sb : NULL, got_types ? log_types : NULL);
        }
        if (rc != -EUCLEAN || tries == 20) break;
        ofd_lock(ph->logfd, F_UNLCK, APPLY_LOCK, false);
        usleep(5000);
    }
    if (!rc &&
        (rc = ofd_lock(ph->logfd, F_RDLCK, PIN_LOCK + (off_t)rec_key(ph->epoch, ph->lsn), false)))
        rc = tk__failf(rc, "tk_ph_open: locking %s.log: %s", ph->path, strerror(-rc));
    ofd_lock(ph->logfd, F_UNLCK, APPLY_LOCK, false);
    if (!rc && ph->replayed) {
        rc = make_overlay(ph, 0);
    }
    return rc;
}

static void release(tk_ph *ph)
{
    for (size_t s = 0; s < atomic_load(&ph->nseg); s++) tk_region_destroy(ph->seg[s]);
    free(ph->seg);
    free(ph->view);
    if (ph->base) munmap(ph->base, ph->max);
    size_t pages = ph->max / PS;
    if (ph->ext) munmap((void *)ph->ext, pages / EXTENT);
    if (ph->dirty) munmap((void *)ph->dirty, pages / 8);
    if (ph->lz_left) munmap((void *)ph->lz_left, pages * sizeof *ph->lz_left);
    if (ph->lz_idle) munmap((void *)ph->lz_idle, pages);
    if (ph->seen) munmap(ph->seen, pages / 8);
    for (struct rec_buf *r = ph->rec_head, *next; r; r = next) {
        next = r->next;
        free(r->buf);
        free(r);
    }
    pthread_cond_destroy(&ph->cond);
    pthread_mutex_destroy(&ph->lk);
    if (ph->wset) munmap(ph->wset, ph->max_tx * 8);
    if (ph->undo) munmap(ph->undo, ph->max_tx * PS);
    if (ph->fd >= 0) close(ph->fd);
    if (ph->logfd >= 0) close(ph->logfd);
    free(ph->rp_buf);
    free(ph->ov);
    free(ph->ov_buf);
    free(ph->path);
    free(ph);
}

int tk_ph_open(const char *path, const tk_ph_config *cfg, tk_ph **out)
{
    static const tk_ph_config none;
    if (!cfg) cfg = &none;
    if (!path || !out) return tk__fail(-EINVAL, "tk_ph_open: path and out are needed");
    *out = NULL;
    size_t max = cfg->max_size ? cfg->max_size : DEFAULT_MAX;
    if (max % (CHUNK * PS) || max < CHUNK * PS)
        return tk__failf(-EINVAL, "tk_ph_open: max_size %zu is not a multiple of 2 MiB", max);
    if (cfg->addr && (uintptr_t)cfg->addr % (CHUNK * PS))
        return tk__failf(-EINVAL, "tk_ph_open: addr %p is not 2 MiB-aligned", cfg->addr);
    if (cfg->mech != TK_MECH_AUTO && cfg->mech != TK_MECH_POSIX &&
        cfg->mech != TK_MECH_UFFD_SIGBUS && cfg->mech != TK_MECH_UFFD_THREAD)
        return tk__failf(-EINVAL,
                         "tk_ph_open: mechanism %s cannot serve a store (posix, "
                         "uffd-sigbus or uffd-thread)",
                         tk_mech_name(cfg->mech));
    if (cfg->flags & ~(unsigned)(TK_PH_CREATE | TK_PH_READONLY | TK_PH_LAZY))
        return tk__failf(-EINVAL, "tk_ph_open: unknown flags %#x", cfg->flags);
    bool ro = cfg->flags & TK_PH_READONLY;
    if (ro && (cfg->flags & TK_PH_CREATE))
        return tk__fail(-EINVAL, "tk_ph_open: TK_PH_CREATE and TK_PH_READONLY together");
    tk__crc32c_init();
    tk_ph *ph = calloc(1, sizeof *ph);
    if (!ph) return tk__fail(-ENOMEM, "tk_ph_open: no memory");
    ph->fd = ph->logfd = -1;
    ph->log_start = ph->log_end = LOG_START;
    pthread_mutex_init(&ph->lk, NULL);
    pthread_cond_init(&ph->cond, NULL);
    ph->max = max;
    ph->log_limit = cfg->log_limit ? cfg->log_limit : DEFAULT_LOG_LIMIT;
    ph->max_tx = cfg->max_tx_pages ? cfg->max_tx_pages : DEFAULT_TX_PAGES;
    ph->path = strdup(path);
    int rc = 0;
    if (!ph->path) {
        rc = tk__fail(-ENOMEM, "tk_ph_open: no memory");
        goto fail;
    }
    ph->ro = ro;
    ph->lazy = cfg->flags & TK_PH_LAZY;
    ph->owner = getpid();
    add_open(ph); /* (from before its files are open: see fork_child) */
    ph->fd =
        open_locked(path, (ro ? O_RDONLY : O_RDWR) | (cfg->flags & TK_PH_CREATE ? O_CREAT : 0));
    if (ph->fd < 0) {
        rc = tk__failf(-errno, "tk_ph_open: %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!ro && flock(ph->fd, LOCK_EX | LOCK_NB)) {
        rc = errno == EWOULDBLOCK
                 ? tk__failf(-EBUSY, "tk_ph_open: %s is open in another process", path)
                 : tk__failf(-errno, "tk_ph_open: locking %s: %s", path, strerror(errno));
        goto fail;
    }
    char logpath[4096];
    if (snprintf(logpath, sizeof logpath, "%s.log", path) >= (int)sizeof logpath) {
        rc = tk__fail(-ENAMETOOLONG, "tk_ph_open: the path is too long");
        goto fail;
    }
    struct stat st;
    if (fstat(ph->fd, &st)) {
        rc = tk__failf(-errno, "tk_ph_open: %s: %s", path, strerror(errno));
        goto fail;
    }
    bool fresh = st.st_size == 0 && (cfg->flags & TK_PH_CREATE);
    if (fresh) {
        /* an old log beside a new store would be replayed into it */
        if (unlink(logpath) && errno != ENOENT) {
            rc = tk__failf(-errno, "tk_ph_open: removing the stale %s: %s", logpath,
                           strerror(errno));
            goto fail;
        }
        if ((rc = create_store(ph))) goto fail;
    }
    /* the log as it is (made below once the store proves sound) */
    ph->logfd = open_locked(logpath, ro ? O_RDONLY : O_RDWR);
    if (ph->logfd < 0 && (errno != ENOENT || ro)) {
        rc = errno == ENOENT ? tk__failf(-ENOENT,
                                         "tk_ph_open: %s is missing (a store's log is made when "
                                         "it is first opened for writing)",
                                         logpath)
                             : tk__failf(-errno, "tk_ph_open: %s: %s", logpath, strerror(errno));
        goto fail;
    }
    if (fstat(ph->fd, &st)) {
        rc = tk__failf(-errno, "tk_ph_open: %s: %s", path, strerror(errno));
        goto fail;
    }
    /* everything checked before anything is written: the log's records,
     * the superblock and types as they will be after them */
    char log_sb[SB_BYTES], log_types[sizeof ph->types];
    bool got_sb = false, got_types = false;
    uint64_t file_bytes = (uint64_t)st.st_size;
    if (ro) {
        if ((rc = reader_snapshot(ph, log_sb, log_types))) goto fail;
    } else {
        if (ph->logfd >= 0 &&
            (rc = replay(ph, file_bytes / PS, log_sb, &got_sb, log_types, &got_types)))
            goto fail;
        if (ph->replayed && ph->rp_npages * PS > file_bytes) file_bytes = ph->rp_npages * PS;
        if ((rc = read_meta(ph, file_bytes, got_sb ? log_sb : NULL, got_types ? log_types : NULL)))
            goto fail;
    }
    if (!ro && (ph->logfd < 0 || ph->log_new)) { /* a new log: its header, and its name, synced */
        if (ph->logfd < 0) ph->logfd = open_locked(logpath, O_RDWR | O_CREAT);
        if (ph->logfd < 0) {
            rc = tk__failf(-errno, "tk_ph_open: %s: %s", logpath, strerror(errno));
            goto fail;
        }
        ph->epoch = 0;
        if ((rc = log_reset(ph, true)) || (rc = sync_dir(ph->path))) goto fail;
    }
    if (!ro && ph->replayed) {
        /* the records into the store file, then the log emptied; but those
         * newer than a reader's state stay in the log */
        if ((rc = apply_lock(ph))) {
            rc = tk__failf(rc, "tk_ph_open: locking %s.log: %s", path, strerror(-rc));
            goto fail;
        }
        uint64_t pin = oldest_pin(ph), upto = UINT64_MAX;
        if (pin < rec_key(ph->epoch, ph->lsn))
            upto = pin >> 32 == ph->epoch ? (pin & 0xffffffffu) : 0;
        rc = replay_apply(ph, upto);
        if (!rc && upto >= ph->lsn) {
            free(ph->rp_buf);
            ph->rp_buf = NULL;
            rc = log_reset(ph, false);
            if (!rc &&
                (fstat(ph->fd, &st) || (rc = read_meta(ph, (uint64_t)st.st_size, NULL, NULL))))
                if (!rc) rc = tk__failf(-errno, "tk_ph_open: %s: %s", path, strerror(errno));
        } else if (!rc) {
            rc = keep_records(ph, upto);
            if (!rc && fstat(ph->fd, &st))
                rc = tk__failf(-errno, "tk_ph_open: %s: %s", path, strerror(errno));
        }
        apply_unlock(ph);
        if (rc) goto fail;
    }
    ph->base_npages = (uint64_t)st.st_size / PS;
    if (!ro) { /* the log's blocks written already: up to its first hole (SEEK_DATA's kin) */
        off_t hole = lseek(ph->logfd, LOG_START, SEEK_HOLE);
        ph->log_ready = hole > 0 ? (uint64_t)hole : 0;
        if (ph->log_ready < ph->log_end) ph->log_ready = ph->log_end;
    }
    /* the address range, the bookkeeping */
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (cfg->addr) flags |= MAP_FIXED_NOREPLACE;
    void *b = mmap(cfg->addr, max, PROT_NONE, flags, -1, 0);
    if (b == MAP_FAILED || (cfg->addr && b != cfg->addr)) {
        if (b != MAP_FAILED) munmap(b, max);
        rc = cfg->addr
                 ? tk__failf(-EEXIST, "tk_ph_open: the range at %p (%zu bytes) is not free",
                             cfg->addr, max)
                 : tk__failf(-ENOMEM, "tk_ph_open: reserving %zu bytes: %s", max, strerror(errno));
        goto fail;
    }
    ph->base = b;
    size_t pages = max / PS;
    if (ph->lazy && (uintptr_t)b < max) {
        /* (a word below max is an offset still to swizzle, one above an address) */
        rc = tk__failf(-EINVAL,
                       "tk_ph_open: lazy swizzling needs the store's addresses above its size "
                       "(%p is below %zu bytes): reserve it higher",
                       b, max);
        goto fail;
    }
    if (ph->lazy && (!(ph->lz_left = reserve(pages * sizeof *ph->lz_left)) ||
                     !(ph->lz_idle = reserve(pages)))) {
        rc = tk__fail(-ENOMEM, "tk_ph_open: reserving the bookkeeping failed");
        goto fail;
    }
    ph->ext = reserve(pages / EXTENT);
    ph->dirty = reserve(pages / 8);
    ph->seen = reserve(pages / 8);
    ph->wset = reserve(ph->max_tx * 8);
    ph->undo = reserve(ph->max_tx * PS);
    if (!ph->ext || !ph->dirty || !ph->seen || !ph->wset || !ph->undo) {
        rc = tk__fail(-ENOMEM, "tk_ph_open: reserving the bookkeeping failed");
        goto fail;
    }
    ph->seg =
        calloc((max + (size_t)SEG_PAGES * PS - 1) / ((size_t)SEG_PAGES * PS), sizeof *ph->seg);
    ph->view =
        calloc((max + (size_t)SEG_PAGES * PS - 1) / ((size_t)SEG_PAGES * PS), sizeof *ph->view);
    if (!ph->seg || !ph->view) {
        rc = tk__fail(-ENOMEM, "tk_ph_open: no memory");
        goto fail;
    }
    if ((rc = add_segments(ph, atomic_load(&ph->npages), cfg->mech))) goto fail;
    *out = ph;
    return 0;
fail:
    remove_open(ph);
    release(ph);
    return rc;
}

int tk_ph_close(tk_ph *ph)
{
    if (!ph) return tk__fail(-EINVAL, "tk_ph_close: the store is NULL");
    if (getpid() != ph->owner) { /* a child's copy: its files are the parent's */
        remove_open(ph);
        release(ph);
        return 0;
    }
    if (atomic_load(&ph->in_tx)) tk_ph_abort(ph);
    if (ph->applier_on) {
        pthread_mutex_lock(&ph->lk);
        ph->stop = true;
        pthread_cond_broadcast(&ph->cond);
        pthread_mutex_unlock(&ph->lk);
        pthread_join(ph->applier, NULL);
    }
    /* what is left of the log into the store file; then the next open need
     * not read the log (which keeps its blocks for the next commits).  What
     * a reader holds back stays in the log, for the next open. */
    int rc = ph->apply_err;
    if (!ph->ro && !rc && (rc = apply_lock(ph)))
        rc = tk__failf(rc,
                       "tk_ph_close: locking %s.log: %s (the log is kept: the next open "
                       "replays it)",
                       ph->path, strerror(-rc));
    else if (!ph->ro && !rc) {
        uint64_t np = 0;
        size_t n = appliable(ph->rec_head, ph->nrecs, oldest_pin(ph));
        rc = write_records(ph, ph->rec_head, n, &np);
        /* (after a failed write of the log, what it holds is not known: it
         * stays for the next open to replay) */
        if (!rc && n == ph->nrecs && ph->log_open && !ph->broken)
            rc = log_applied(ph, ph->nrecs ? np : ph->base_npages, true);
        else if (!rc && n < ph->nrecs && !ph->broken) {
            drop_records(ph, n);
            rc = advance_start(ph);
        }
        apply_unlock(ph);
    }
    remove_open(ph);
    release(ph);
    return rc;
}
