/* src/apps/gc/gc.c - a conservative, non-moving mark-sweep collector
 * (include/trapkit/gc.h says what it offers).
 *
 * The heap is one reservation of address space (PROT_NONE, committed a
 * megabyte at a time as it grows), so that it is one mapping: a region the
 * page-protection write barrier of the generational and concurrent modes
 * will track as a whole.  Its pages are either free, a block of one size
 * class (objects of one size, a multiple of the 16-byte granule; scanned
 * or atomic), or a run holding one large object.  Beside the heap, one byte
 * of kind and a few words per page (struct blk), and per granule a mark bit
 * and an allocation bit: a word points at an object when its granule's
 * object (the slot of its class, or the run) has its allocation bit set.
 *
 * A collection, with the lock held: the writable segments of the loaded
 * objects are listed (dl_iterate_phdr takes the loader's lock, which a
 * stopped thread may hold, so before the stop); the other registered
 * threads are stopped (SIGPWR; each saves its registers where the collector
 * scans them and waits in sigsuspend for SIGXCPU); everything reachable
 * from the roots is marked (an explicit mark stack, mmap'd: a stopped
 * thread may hold malloc's lock); weak links to unmarked objects are
 * cleared; finalizable unmarked objects have what they reach marked, and
 * those no other finalizable object reaches are kept for their finalizer;
 * large objects are swept at once, and every small block is left to be
 * swept when its class next needs objects (lazy sweeping); the threads are
 * resumed; the finalizers run, unlocked.
 */
#include <trapkit/gc.h>

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/internal.h"
#include "os/linux/os.h"

#ifndef __x86_64__
#error "the collector reads x86-64 registers from a signal's context"
#endif

#define PS 4096u
#define PAGE_SHIFT 12
#define GRANULE 16u
#define GR_SHIFT 4
#define GR_PER_PAGE (PS / GRANULE)        /* 256 */
#define WORDS_PER_PAGE (GR_PER_PAGE / 64) /* bitmap words per page: 4 */
#define CHUNK_MIN_PAGES 4096 /* the heap grows by chunks of 16 MiB, or its size so far */
#define MAX_CHUNKS 64
#define FULL_EVERY 8       /* generational: a full collection after this many minor ones */
#define SWEEP_BUDGET 128   /* blocks a refill sweeps before it takes a free page */
#define PRECLEAN_PASSES 12 /* concurrent: passes over the written pages at most */
#define PRECLEAN_ENOUGH 32 /* and until fewer than this many were written */
#define RESERVE_DEFAULT (64ull << 30) /* 64 GiB of address space */
#define GC_MIN_BYTES (4u << 20)       /* allocated between collections at least */
#define SIG_SUSPEND SIGPWR
#define SIG_RESTART SIGXCPU
#define NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize_thread, noinline))

static const uint16_t class_size[] = {16,  32,  48,  64,  80,  96,  112, 128,  160,  192, 224,
                                      256, 320, 384, 448, 512, 640, 768, 1024, 1360, 2048};
#define NCLS (sizeof class_size / sizeof class_size[0])
#define SMALL_MAX 2048u

enum { K_FREE = 0, K_SMALL, K_LARGE, K_TAIL };

struct blk {
    uint8_t kind;
    uint8_t cls;
    uint8_t atomic;  /* the objects are not scanned */
    uint8_t unswept; /* small: collected since its last sweep */
    uint32_t pages;  /* large: the run's pages (head); tail: pages back to the head */
    uint32_t next;   /* small: the next block of its list, page + 1 (0: none) */
};

struct seg {
    uintptr_t lo, hi;
};

struct finalizer {
    void *obj;
    tk_gc_finalizer fn;
    void *arg;
    bool ready; /* unreachable: runs after this collection */
};

struct weak {
    void **link;
    uintptr_t obj; /* hidden from the marker: stored inverted */
};

struct gc_thread {
    struct gc_thread *next;
    pid_t tid;
    uintptr_t stack_lo, stack_hi;
    /* saved by the suspend handler: the interrupted stack pointer, and if it
     * is on an alternate signal stack, that stack's top (else 0) */
    uintptr_t sp, alt_hi;
    uintptr_t regs[NGREG];
    _Atomic uint64_t stopped_gen;
    /* T_BLOCKING: inside tk_gc_do_blocking, its registers and stack
     * pointer saved: a stop by safepoints counts it stopped without waiting
     * for it.  T_LOCKWAIT: the same, waiting for the collector's lock (or
     * for a cycle, on a condition variable of that lock): a stop by
     * signals counts it stopped too, without a signal - it cannot go on
     * before the stopping thread, which holds the lock, lets it (a signal
     * would have to wake it first, which can take a millisecond in a
     * virtual machine) */
    _Atomic int state;
    /* the thread's own free lists, per class and kind: a block's free
     * objects at a time, taken from the shared ones with their allocation
     * bits set and handed out without the lock; each collection marks them,
     * so they are not swept while they wait */
    void *tl[NCLS * 2];
};

static struct {
    pthread_mutex_t lock;
    bool ready;
    int init_err;
    unsigned char *base;
    size_t reserve_pages, top; /* top: pages committed */
    struct blk *blk;
    uint64_t *mark, *alloc; /* a bit per granule */
    uint64_t *freemap;      /* a bit per page: free */
    size_t free_pages, page_hint;
    void *freelist[NCLS * 2];
    size_t freecount[NCLS * 2]; /* objects on each free list */
    /* when every object on a free list is on one page (a block's free
     * slots, as a sweep or a fresh block makes them): that page + 1 and
     * the objects' granules (else 0), so that a thread taking the list sets
     * their bits a word at a time instead of walking it */
    uint32_t fl_page[NCLS * 2];
    uint64_t fl_mask[NCLS * 2][WORDS_PER_PAGE];
    uint32_t list[NCLS * 2];   /* blocks of each class and kind, page + 1 */
    uint32_t cursor[NCLS * 2]; /* the next block to sweep, page + 1 */
    uint32_t cursor_prev[NCLS * 2];
    uint64_t since_gc, threshold;
    int disabled;
    struct seg *roots;
    size_t nroots, roots_cap;
    struct seg *segs; /* the loaded objects' writable segments, listed at each collection */
    size_t nsegs, segs_cap;
    struct finalizer *fin;
    size_t nfin, fin_cap;
    struct weak *weak;
    size_t nweak, weak_cap;
    struct gc_thread *threads;
    /* generational: each chunk of the heap is a trapkit region whose
     * written pages tk_dirty reports (the write barrier) */
    enum tk_mech barrier; /* TK_MECH_COUNT_: none (every collection full) */
    struct chunk {
        size_t first, pages;
        tk_region *region;
    } chunks[MAX_CHUNKS];
    size_t nchunks;
    uint64_t *dirty; /* tk_dirty's bitmap, the largest chunk's size */
    /* the software barrier instead (tk_gc_write): a byte per card of the
     * reservation, read and cleared a page (a word of cards) at a time */
    bool cards;
    unsigned char *card;
    size_t dirty_bits;
    unsigned minors; /* minor collections since the last full one */
    /* mostly-concurrent marking (tk_gc_set_concurrent): the marker thread
     * marks into mark_next while the program runs; allocation is black
     * meanwhile (cycle); the bitmaps trade places at the cycle's end */
    uint64_t *mark_next;
    bool concurrent, cycle, cycle_requested, marker_started, fin_pending;
    pthread_t marker;
    pthread_cond_t cycle_cv, done_cv;
    uint64_t cycles_done;
    uint64_t black_bytes;  /* allocated black during the cycle */
    uint64_t cycle_marked; /* marked so far by the cycle under way (published by the marker) */
    uint64_t black_kept;   /* of the last collection's live bytes, those allocated during it */
    uint64_t reach_bytes;  /* the last collection's live bytes reached from the roots */
    uint64_t *cdirty;      /* the marker's tk_dirty bitmap */
    size_t cdirty_bits;
    struct seg *croots; /* the marker's copy of the added roots */
    size_t ncroots, croots_cap;
    tk_gc_stats st;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .cycle_cv = PTHREAD_COND_INITIALIZER,
       .done_cv = PTHREAD_COND_INITIALIZER};

/* The bitmap marking sets: G.mark, or G.mark_next while the marker thread
 * marks concurrently (then with atomic updates: the allocating threads set
 * bits in it too). */
static uint64_t *MB;
static bool MB_atomic;

/* A marker's stack of ranges still to scan (mmap'd: a stopped thread may
 * hold malloc's lock), and the bytes of the objects it marked.  M0 is the
 * collecting thread's (or the marker thread's, during a concurrent cycle:
 * the two never mark at once); the parallel markers have their own. */
struct marker {
    uintptr_t *s;
    size_t sp, cap;
    uint64_t marked_bytes;
};
static struct marker M0;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tk_gc_card_map card_map; /* no cards (size 0) until set up */
static atomic_bool ready;       /* set up (G.ready), seen without pthread_once */
static pthread_key_t thread_key;
static __thread struct gc_thread *self __attribute__((tls_model("initial-exec")));
static sem_t ack;
static _Atomic uint64_t stop_gen, restart_gen;
enum { T_RUNNING = 0, T_BLOCKING = 1, T_LOCKWAIT = 2 };
/* Stopping the world by safepoints (tk_gc_set_stop): safepoints stopped
 * is nonzero while a stop is under way (tk_gc_safepoint reads it); a
 * thread parks there, or is counted stopped while blocking (SPW.ack tells
 * the collector, SPW.go the parked threads). */
static atomic_bool safepoints;
static unsigned sp_flag; /* (accessed with __atomic builtins: tk_gc_stop_flag) */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t ack, go;
} SPW = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- bits ---------------------------------------------------------------- */
static inline size_t granule_of(uintptr_t p)
{
    return (p - (uintptr_t)G.base) >> GR_SHIFT;
}
static inline bool bit(const uint64_t *m, size_t g)
{
    return (m[g >> 6] >> (g & 63)) & 1;
}
static inline void set(uint64_t *m, size_t g)
{
    m[g >> 6] |= 1ull << (g & 63);
}
static inline void set_atomic(uint64_t *m, size_t g)
{
    __atomic_fetch_or(&m[g >> 6], 1ull << (g & 63), __ATOMIC_RELAXED);
}
static inline size_t heap_top(void) /* pages committed; grows under the lock */
{
    return __atomic_load_n(&G.top, __ATOMIC_RELAXED);
}
static inline void clr(uint64_t *m, size_t g)
{
    m[g >> 6] &= ~(1ull << (g & 63));
}
/* The allocation bits: changed only with the lock held (or the world
 * stopped); an object handed to a thread's own free list counts as
 * allocated from then on. */
static inline bool abit(size_t g)
{
    return bit(G.alloc, g);
}
static inline void aset(size_t g)
{
    set(G.alloc, g);
}
static inline void aclr(size_t g)
{
    clr(G.alloc, g);
}
static inline unsigned char *page_addr(size_t pg)
{
    return G.base + (pg << PAGE_SHIFT);
}

/* The class of each size in granules (0 .. SMALL_MAX / GRANULE). */
static uint8_t class_by_granules[SMALL_MAX / GRANULE + 1];
/* 2^32 / size + 1: (off * inv) >> 32 is off / size for every offset in a
 * page (the marker's hottest division) */
static uint32_t class_inv[NCLS];

/* per class, the granules of a block where its slots start */
static uint64_t slot_mask[NCLS][WORDS_PER_PAGE];

static void init_classes(void)
{
    for (unsigned c = 0; c < NCLS; c++) {
        class_inv[c] = (uint32_t)((1ull << 32) / class_size[c] + 1);
        for (unsigned i = 0; (i + 1) * class_size[c] <= PS; i++) {
            unsigned g = i * class_size[c] / GRANULE;
            slot_mask[c][g / 64] |= 1ull << (g % 64);
        }
    }
    for (unsigned g = 0, c = 0; g <= SMALL_MAX / GRANULE; g++) {
        while (class_size[c] < g * GRANULE) c++;
        class_by_granules[g] = (uint8_t)c;
    }
}

static inline unsigned class_of(size_t n)
{
    return n <= SMALL_MAX ? class_by_granules[(n + GRANULE - 1) / GRANULE] : NCLS;
}

/* ---- pages --------------------------------------------------------------- */

/* Makes chunk c a trapkit region with DIRTY on mechanism m (the write
 * barrier); with TK_MECH_AUTO, G.barrier becomes the one trapkit chose. */
static int dirty_room(size_t pages)
{
    if (pages > G.dirty_bits) {
        uint64_t *d = realloc(G.dirty, (pages + 63) / 64 * 8);
        if (!d) return -ENOMEM;
        G.dirty = d;
        G.dirty_bits = pages;
    }
    return 0;
}

static int track_chunk(struct chunk *c, enum tk_mech m)
{
    if (dirty_room(c->pages)) return -ENOMEM;
    tk_region_config cfg = {
        .addr = page_addr(c->first), .len = c->pages * PS, .mech = m, .flags = TK_REGION_DIRTY};
    int err = tk_region_create(&cfg, &c->region);
    if (err) {
        c->region = NULL;
        return err;
    }
    if (G.barrier == TK_MECH_AUTO) G.barrier = tk_region_mech(c->region);
    return 0;
}

/* Commits a chunk of at least n pages at top (16 MiB, or the heap's size
 * so far, whichever is more: few chunks), free; generational, the chunk
 * becomes a trapkit region tracking its written pages. */
static int grow(size_t n)
{
    size_t want = G.top > CHUNK_MIN_PAGES ? G.top : CHUNK_MIN_PAGES;
    if (n < want) n = want;
    if (G.top + n > G.reserve_pages) n = G.reserve_pages - G.top;
    if (!n || G.nchunks == MAX_CHUNKS) return -ENOMEM;
    if (mprotect(page_addr(G.top), n * PS, PROT_READ | PROT_WRITE) != 0) return -errno;
    struct chunk *c = &G.chunks[G.nchunks];
    *c = (struct chunk){.first = G.top, .pages = n};
    if (G.barrier != TK_MECH_COUNT_ || G.cards) {
        int err = G.cards ? dirty_room(c->pages) : track_chunk(c, G.barrier);
        if (err) {
            mprotect(page_addr(G.top), n * PS, PROT_NONE);
            return err;
        }
    }
    G.nchunks++;
    for (size_t p = G.top; p < G.top + n; p++) set(G.freemap, p);
    G.free_pages += n;
    __atomic_store_n(&G.top, G.top + n, __ATOMIC_RELAXED);
    G.st.heap_bytes = G.top * PS;
    return 0;
}

/* n free pages in a run, or SIZE_MAX. */
static size_t find_run(size_t n)
{
    size_t run = 0, start = 0;
    size_t from = n == 1 ? G.page_hint : 0;
    for (size_t w = from / 64; w < (G.top + 63) / 64; w++) {
        uint64_t m = G.freemap[w];
        if (n == 1) {
            if (m) {
                size_t p = w * 64 + (size_t)__builtin_ctzll(m);
                if (p < G.top) return p;
            }
            continue;
        }
        if (!m) {
            run = 0;
            continue;
        }
        if (m == ~0ull && run) {
            run += 64;
            if (run >= n) return start;
            continue;
        }
        for (unsigned b = 0; b < 64; b++) {
            size_t p = w * 64 + b;
            if (p >= G.top) break;
            if ((m >> b) & 1) {
                if (!run) start = p;
                if (++run >= n) return start;
            } else {
                run = 0;
            }
        }
    }
    if (n == 1 && from) {
        G.page_hint = 0;
        return find_run(1);
    }
    return SIZE_MAX;
}

/* With concurrent marking, whether the heap may grow by n pages: a program
 * that outruns the marker has the heap grow rather than wait - a wait is a
 * pause as long as the rest of the marking - while the heap stays within
 * four times the live size (the last collection's reached from the roots,
 * or what a cycle under way has marked so far if more; 4 MiB at least) and
 * 64 MiB more; past that the allocation waits for the cycle under way (or
 * collects, if none is), which makes what was allocated before it and is
 * garbage reusable: a cycle keeps whatever is allocated while it runs, so
 * without the bound a program allocating faster than the marker marks
 * would double the heap at every cycle. */
static bool may_grow(size_t n)
{
    if (!G.concurrent || G.disabled) return true;
    uint64_t live = G.reach_bytes, now = __atomic_load_n(&G.cycle_marked, __ATOMIC_RELAXED);
    if (now > live) live = now;
    if (live < GC_MIN_BYTES) live = GC_MIN_BYTES;
    /* (the heap is in use to its top when it must grow: no free run) */
    return (uint64_t)(G.top + n) * PS <= 4 * live + (64u << 20);
}

static size_t alloc_pages(size_t n)
{
    size_t p = G.free_pages >= n ? find_run(n) : SIZE_MAX;
    if (p == SIZE_MAX) {
        if (!may_grow(n)) return SIZE_MAX; /* (the caller waits for the cycle, then again) */
        /* a run ending at top joins the new pages */
        size_t tail = 0;
        while (tail < G.top && tail < n && bit(G.freemap, G.top - 1 - tail)) tail++;
        if (grow(n - tail) != 0) return SIZE_MAX;
        p = find_run(n);
        if (p == SIZE_MAX) return SIZE_MAX;
    }
    for (size_t i = p; i < p + n; i++) clr(G.freemap, i);
    G.free_pages -= n;
    if (n == 1) G.page_hint = p + 1;
    return p;
}

static void free_pages(size_t p, size_t n)
{
    for (size_t i = p; i < p + n; i++) {
        G.blk[i] = (struct blk){.kind = K_FREE};
        set(G.freemap, i);
        memset(&G.alloc[i * WORDS_PER_PAGE], 0, WORDS_PER_PAGE * 8);
        memset(&G.mark[i * WORDS_PER_PAGE], 0, WORDS_PER_PAGE * 8);
    }
    G.free_pages += n;
    if (p < G.page_hint) G.page_hint = p;
    /* a large run's memory goes back to the kernel (zero when used again);
     * in a region through trapkit, which keeps the write barrier's
     * protection where madvise would drop it */
    if (n < 16) return;
    for (size_t i = 0; i < G.nchunks && n; i++) {
        const struct chunk *c = &G.chunks[i];
        if (p >= c->first + c->pages || p + n <= c->first) continue;
        size_t from = p > c->first ? p : c->first;
        size_t to = p + n < c->first + c->pages ? p + n : c->first + c->pages;
        if (c->region)
            tk_discard(c->region, page_addr(from), (to - from) * PS);
        else
            madvise(page_addr(from), (to - from) * PS, MADV_DONTNEED);
    }
}

/* ---- finding objects ----------------------------------------------------- */

/* The start of the allocated object holding address a, or 0; *size its
 * size, *scan whether its contents are scanned. */
static inline uintptr_t object_of(uintptr_t a, size_t *size, bool *scan)
{
    uintptr_t lo = (uintptr_t)G.base;
    size_t top = heap_top();
    if (a < lo || a >= lo + (top << PAGE_SHIFT)) return 0;
    size_t pg = (a - lo) >> PAGE_SHIFT;
    const struct blk *b = &G.blk[pg];
    uintptr_t start;
    /* (the marker thread reads the tables while the program changes them:
     * whatever it reads, a range it scans stays inside the committed heap;
     * a word misread only keeps an object one cycle longer) */
    if (b->kind == K_SMALL) {
        size_t sz = class_size[b->cls], off = a & (PS - 1);
        size_t i = (size_t)(((uint64_t)off * class_inv[b->cls]) >> 32); /* off / sz */
        if ((i + 1) * sz > PS) return 0; /* the page's tail, past its last slot */
        start = (a & ~(uintptr_t)(PS - 1)) + i * sz;
        *size = sz;
    } else if (b->kind == K_LARGE || b->kind == K_TAIL) {
        if (b->kind == K_TAIL) {
            if (b->pages > pg) return 0;
            pg -= b->pages;
            b = &G.blk[pg];
        }
        start = (uintptr_t)page_addr(pg);
        size_t n = b->pages;
        if (n == 0 || n > top - pg) return 0;
        *size = n * PS;
    } else {
        return 0;
    }
    if (!abit(granule_of(start))) return 0;
    *scan = !b->atomic;
    return start;
}

/* ---- marking ------------------------------------------------------------- */
/* [lo, hi) to scan: an object, or a written page of a large one. */
static void grow_stack(struct marker *m);
static inline void push(struct marker *m, uintptr_t lo, uintptr_t hi)
{
    if (__builtin_expect(m->sp + 2 > m->cap, 0)) grow_stack(m);
    m->s[m->sp++] = lo;
    m->s[m->sp++] = hi;
}

/* The mark stack made twice as large (its first: 64 Ki entries). */
static void grow_stack(struct marker *m)
{
    size_t cap = m->cap ? m->cap * 2 : 65536;
    void *p = m->s
                  ? mremap(m->s, m->cap * 8, cap * 8, MREMAP_MAYMOVE)
                  : mmap(NULL, cap * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        /* no memory for the mark stack: nothing can be freed safely */
        static const char msg[] = "trapkit gc: out of memory for the mark stack\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
    }
    m->s = p;
    m->cap = cap;
}

static inline void mark_word(struct marker *m, uintptr_t w)
{
    size_t size;
    bool scan;
    uintptr_t o = object_of(w, &size, &scan);
    if (!o) return;
    size_t g = granule_of(o);
    uint64_t *word = &MB[g >> 6], mask = 1ull << (g & 63);
    if (__atomic_load_n(word, __ATOMIC_RELAXED) & mask) return;
    if (MB_atomic) {
        /* other markers (or allocating threads) set bits too: the one
         * whose bit it was scans it */
        if (__atomic_fetch_or(word, mask, __ATOMIC_RELAXED) & mask) return;
    } else {
        *word |= mask;
    }
    m->marked_bytes += size;
    if (scan) push(m, o, o + size);
}

/* Every aligned word of [lo, hi) as a possible pointer.  Reads memory the
 * sanitizers do not own (other threads' stacks, redzones of globals). */
NO_SANITIZE static void scan_range(struct marker *m, uintptr_t lo, uintptr_t hi)
{
    lo = (lo + 7) & ~(uintptr_t)7;
    hi &= ~(uintptr_t)7;
    for (uintptr_t p = lo; p < hi; p += 8) mark_word(m, *(const uintptr_t *)p);
}

/* Scans what m's stack holds, and what that reaches.  published (the
 * concurrent marker's G.cycle_marked, for the allocating threads' pacing),
 * if not NULL, is told what m has marked now and then. */
static void drain(struct marker *m, uint64_t *published)
{
    unsigned n = 0;
    while (m->sp) {
        uintptr_t hi = m->s[--m->sp], lo = m->s[--m->sp];
        scan_range(m, lo, hi);
        if (published && (++n & 4095) == 0)
            __atomic_store_n(published, m->marked_bytes, __ATOMIC_RELAXED);
    }
    if (published) __atomic_store_n(published, m->marked_bytes, __ATOMIC_RELAXED);
}

/* ---- parallel marking ----------------------------------------------------
 *
 * With the world stopped, the marking after the roots' scan is shared with
 * helper threads, one per other CPU (TRAPKIT_GC_MARKERS, tk_gc_set_markers):
 * each marks from a stack of its own and, when the shared pool is empty,
 * moves the oldest half of its stack there (the entries nearest the roots,
 * the largest subtrees); a marker whose stack runs dry takes from the pool,
 * and when every marker has run dry with the pool empty the marking is
 * done.  A long range (a large object) is scanned a page at a time, the
 * rest pushed back, so that it can be shared too.  The mark bits are then
 * set with an atomic or: of two markers reaching one object, the one whose
 * bit it was scans it.  The helpers are not registered threads (never
 * stopped, their stacks no roots), block every signal, call neither malloc
 * nor the loader while marking (a stopped thread may hold their locks), and
 * are started before the world is stopped. */
#define MAX_MARKERS 8
#define POOL_CAP (1u << 16) /* ranges the pool holds */
#define SHARE_MAX 256       /* ranges moved to the pool at a time */
#define SPLIT_BYTES PS      /* a range longer than this is scanned in parts */
#define SOLO_RANGES 4096    /* ranges the collecting thread scans before waking helpers */

static struct {
    pthread_mutex_t lock; /* for waking the helpers */
    pthread_cond_t cv;
    unsigned want;    /* markers, the collecting thread's included */
    unsigned started; /* helper threads running */
    uint64_t gen;     /* a marking's number: the helpers wake for each */
    /* the pool and the marking's state, under spin */
    atomic_int spin;
    uintptr_t *pool; /* lo, hi pairs */
    _Atomic size_t pool_n;
    unsigned joined, idle, finished;
    unsigned limit; /* markers this marking, as want was at its start */
    bool closed;
    uint64_t helper_bytes; /* marked by the helpers */
    struct marker m[MAX_MARKERS];
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* A wait of a spinning marker: a pause, and after a while the CPU given
 * up (the marker it waits for may share its CPU: woken, a helper can be
 * put on the collecting thread's CPU ahead of it). */
static void spin_wait(unsigned *spins)
{
    if (++*spins < 256)
        __builtin_ia32_pause();
    else
        sched_yield();
}

static void spin_lock(void)
{
    unsigned spins = 0;
    for (;;) {
        if (!atomic_exchange_explicit(&P.spin, 1, memory_order_acquire)) return;
        while (atomic_load_explicit(&P.spin, memory_order_relaxed)) spin_wait(&spins);
    }
}
static void spin_unlock(void)
{
    atomic_store_explicit(&P.spin, 0, memory_order_release);
}

/* The oldest entries of m's stack into the pool (it is empty), if m has
 * enough to give. */
static void share(struct marker *m)
{
    size_t give = m->sp / 4 * 2; /* half the ranges, whole pairs */
    if (give > SHARE_MAX * 2) give = SHARE_MAX * 2;
    if (give < 2) return;
    spin_lock();
    if (atomic_load_explicit(&P.pool_n, memory_order_relaxed) == 0) {
        memcpy(P.pool, m->s, give * 8);
        memmove(m->s, m->s + give, (m->sp - give) * 8);
        m->sp -= give;
        atomic_store_explicit(&P.pool_n, give, memory_order_relaxed);
    }
    spin_unlock();
}

/* Half the pool (at least a range) onto m's stack; with spin held. */
static void take_locked(struct marker *m)
{
    size_t n = atomic_load_explicit(&P.pool_n, memory_order_relaxed);
    size_t k = n >= 4 ? n / 4 * 2 : n;
    for (size_t i = n - k; i < n; i += 2) push(m, P.pool[i], P.pool[i + 1]);
    atomic_store_explicit(&P.pool_n, n - k, memory_order_relaxed);
}

/* The range on top of m's stack scanned (a long one a part at a time, the
 * rest pushed back, so that it can be shared). */
static void scan_next(struct marker *m)
{
    uintptr_t hi = m->s[--m->sp], lo = m->s[--m->sp];
    if (hi - lo > SPLIT_BYTES) {
        push(m, lo + SPLIT_BYTES, hi);
        hi = lo + SPLIT_BYTES;
    }
    scan_range(m, lo, hi);
}

/* Up to n ranges of m's stack scanned by m alone; whether the stack ran
 * dry. */
static bool mark_alone(struct marker *m, unsigned n)
{
    while (m->sp && n--) scan_next(m);
    return m->sp == 0;
}

/* Marks with the others until no marker has anything left. */
static void mark_shared(struct marker *m)
{
    for (;;) {
        unsigned n = 0;
        while (m->sp) {
            scan_next(m);
            if ((++n & 31) == 0 && m->sp >= 8 &&
                atomic_load_explicit(&P.pool_n, memory_order_relaxed) == 0)
                share(m);
        }
        spin_lock();
        if (atomic_load_explicit(&P.pool_n, memory_order_relaxed)) {
            take_locked(m);
            spin_unlock();
            continue;
        }
        P.idle++;
        unsigned spins = 0;
        for (;;) {
            if (P.idle == P.joined && !atomic_load_explicit(&P.pool_n, memory_order_relaxed)) {
                /* every marker has run dry and nothing is left to share:
                 * none can give any more, so the marking is over */
                P.closed = true;
                spin_unlock();
                return;
            }
            if (atomic_load_explicit(&P.pool_n, memory_order_relaxed)) {
                P.idle--;
                take_locked(m);
                break;
            }
            spin_unlock();
            spin_wait(&spins);
            spin_lock();
        }
        spin_unlock();
    }
}

static void *helper_main(void *arg)
{
    struct marker *m = arg;
    pthread_mutex_lock(&P.lock);
    uint64_t seen = P.gen;
    for (;;) {
        while (P.gen == seen) pthread_cond_wait(&P.cv, &P.lock);
        seen = P.gen;
        pthread_mutex_unlock(&P.lock);
        spin_lock();
        bool join = !P.closed && (unsigned)(m - P.m) < P.limit;
        if (join) P.joined++;
        spin_unlock();
        if (join) {
            m->marked_bytes = 0;
            mark_shared(m);
            spin_lock();
            P.helper_bytes += m->marked_bytes;
            P.finished++;
            spin_unlock();
        }
        pthread_mutex_lock(&P.lock);
    }
    return NULL;
}

/* How many markers a collection uses: TRAPKIT_GC_MARKERS, else one per
 * CPU online (at most MAX_MARKERS). */
static unsigned default_markers(void)
{
    const char *e = getenv("TRAPKIT_GC_MARKERS");
    long n = e && *e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_MARKERS ? MAX_MARKERS : (unsigned)n;
}

/* Starts the helpers a collection will want, before the world stops
 * (pthread_create takes locks a stopped thread may hold); with the lock
 * held.  Fewer start if threads cannot be had: the marking is then shared
 * among those that did. */
static void start_helpers(void)
{
    if (P.started + 1 >= P.want) return;
    if (!P.pool) {
        void *p = mmap(NULL, (size_t)POOL_CAP * 16, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return;
        P.pool = p;
    }
    while (P.started + 1 < P.want) {
        pthread_t t;
        if (tk__thread_start(&t, helper_main, &P.m[P.started + 1]) != 0) break;
        pthread_detach(t);
        P.started++;
    }
}

/* Marks everything reachable from what M0 holds, with the helpers; the
 * world stopped and the lock held. */
static void mark_all(void)
{
    if (P.started == 0 || P.want < 2 || !P.pool) {
        drain(&M0, NULL);
        G.st.markers = 1;
        return;
    }
    /* a small marking (a concurrent cycle's last stop, most often) is done
     * alone: waking the helpers takes longer than the marking */
    if (mark_alone(&M0, SOLO_RANGES)) {
        G.st.markers = 1;
        return;
    }
    bool atomic_before = MB_atomic;
    MB_atomic = true;
    atomic_store_explicit(&P.pool_n, 0, memory_order_relaxed);
    P.joined = 1;
    P.idle = P.finished = 0;
    P.closed = false;
    P.limit = P.want;
    P.helper_bytes = 0;
    pthread_mutex_lock(&P.lock);
    P.gen++;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.lock);
    mark_shared(&M0);
    /* the helpers that joined have seen the end; wait for their counts */
    unsigned spins = 0;
    for (;;) {
        spin_lock();
        bool done = P.finished + 1 == P.joined;
        spin_unlock();
        if (done) break;
        spin_wait(&spins);
    }
    M0.marked_bytes += P.helper_bytes;
    G.st.markers = P.joined;
    MB_atomic = atomic_before;
}

static bool barrier_on(void)
{
    return G.barrier != TK_MECH_COUNT_ || G.cards;
}

/* The pages of chunk c written since the last reading, in dirty (a bit per
 * page of the chunk): its region's DIRTY, or its marked cards (a page's
 * eight cards are a word, exchanged for zero: a store marking one of them
 * meanwhile is seen now or by the next reading).  Their number, or a
 * negative errno. */
static long read_written(const struct chunk *c, uint64_t *dirty, size_t bits)
{
    if (!G.cards) return c->region ? tk_dirty(c->region, dirty, bits) : 0;
    memset(dirty, 0, (c->pages + 63) / 64 * 8);
    uint64_t *w = (uint64_t *)G.card + c->first;
    long n = 0;
    for (size_t i = 0; i < c->pages; i++)
        if (__atomic_load_n(&w[i], __ATOMIC_RELAXED) &&
            __atomic_exchange_n(&w[i], 0, __ATOMIC_SEQ_CST)) {
            dirty[i / 64] |= 1ull << (i % 64);
            n++;
        }
    return n;
}

/* The cards of [lo, hi) marked: the collector's own stores of pointers
 * (realloc's copy) under the software barrier. */
static void mark_cards(uintptr_t lo, uintptr_t hi)
{
    if (!G.cards || hi <= lo) return;
    size_t a = (lo - (uintptr_t)G.base) >> TK_GC_CARD_SHIFT,
           b = (hi - 1 - (uintptr_t)G.base) >> TK_GC_CARD_SHIFT;
    for (size_t i = a; i <= b; i++) __atomic_store_n(&G.card[i], 1, __ATOMIC_RELEASE);
}

/* The marked objects on the pages of chunks[0, n) written since the
 * barrier's last reading are pushed to be scanned again (a minor
 * collection: old objects, which may point to young ones; a concurrent
 * cycle: objects the marker scanned before the program changed them); of a
 * large object, its written pages alone.  Returns the written pages. */
static uint64_t push_dirty_in(const struct chunk *chunks, size_t n, uint64_t *dirty, size_t bits)
{
    uint64_t total = 0;
    for (size_t ci = 0; ci < n; ci++) {
        const struct chunk *c = &chunks[ci];
        if (!c->region && !G.cards) continue;
        long nd = read_written(c, dirty, bits);
        if (nd < 0) { /* cannot happen with a live region: every marked object then */
            memset(dirty, 0xff, (c->pages + 63) / 64 * 8);
            nd = (long)c->pages;
        }
        total += (uint64_t)nd;
        for (size_t w = 0; w < (c->pages + 63) / 64; w++)
            for (uint64_t m = dirty[w]; m; m &= m - 1) {
                size_t pg = c->first + w * 64 + (size_t)__builtin_ctzll(m);
                if (pg >= c->first + c->pages) break;
                const struct blk *b = &G.blk[pg];
                uintptr_t base = (uintptr_t)page_addr(pg);
                if (b->kind == K_SMALL && !b->atomic) {
                    /* runs of adjacent marked objects, a range each */
                    size_t sz = class_size[b->cls];
                    uintptr_t run = 0;
                    for (uintptr_t o = base; o + sz <= base + PS; o += sz) {
                        size_t g = granule_of(o);
                        if (abit(g) && bit(MB, g)) {
                            if (!run) run = o;
                        } else if (run) {
                            push(&M0, run, o);
                            run = 0;
                        }
                    }
                    if (run) push(&M0, run, base + PS / sz * sz);
                } else if (b->kind == K_LARGE || b->kind == K_TAIL) {
                    if (b->kind == K_TAIL && b->pages > pg) continue;
                    size_t head = b->kind == K_TAIL ? pg - b->pages : pg;
                    size_t g = granule_of((uintptr_t)page_addr(head));
                    if (!G.blk[head].atomic && abit(g) && bit(MB, g)) push(&M0, base, base + PS);
                }
            }
    }
    return total;
}

static void push_dirty(void)
{
    G.st.dirty_pages += push_dirty_in(G.chunks, G.nchunks, G.dirty, G.dirty_bits);
}

/* ---- roots --------------------------------------------------------------- */
static int add_seg(struct seg **a, size_t *n, size_t *cap, uintptr_t lo, uintptr_t hi)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        struct seg *p = realloc(*a, c * sizeof *p);
        if (!p) return -ENOMEM;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = (struct seg){lo, hi};
    return 0;
}

static int each_object(struct dl_phdr_info *info, size_t sz, void *arg)
{
    (void)sz;
    (void)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (add_seg(&G.segs, &G.nsegs, &G.segs_cap, lo, lo + ph->p_memsz)) return 1;
    }
    return 0;
}

/* The calling thread's stack, [*lo, return value), or 0. */
static uintptr_t stack_bounds(uintptr_t *lo)
{
    pthread_attr_t at;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &at) != 0) return 0;
    int r = pthread_attr_getstack(&at, &addr, &size);
    pthread_attr_destroy(&at);
    *lo = (uintptr_t)addr;
    return r ? 0 : (uintptr_t)addr + size;
}

/* The start of the mapping that holds address a (/proc/self/maps, read
 * without malloc: the world is stopped), or `otherwise`. */
static uintptr_t mapping_start(uintptr_t a, uintptr_t otherwise)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return otherwise;
    char buf[4096];
    size_t have = 0;
    uintptr_t found = otherwise;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            char *end;
            uintptr_t lo = strtoull(line, &end, 16),
                      hi = *end == '-' ? strtoull(end + 1, NULL, 16) : 0;
            if (lo <= a && a < hi) found = lo;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    close(fd);
    return found;
}

/* A stopped thread's stack: from its stack pointer up; interrupted on an
 * alternate signal stack, that stack from the pointer up and the whole of
 * its own stack (where it was is not known), as far as it is mapped. */
static void scan_thread(const struct gc_thread *t)
{
    if (!t->alt_hi || (t->sp >= t->stack_lo && t->sp < t->stack_hi)) {
        scan_range(&M0, t->sp, t->stack_hi);
    } else {
        scan_range(&M0, t->sp, t->alt_hi);
        uintptr_t lo = mapping_start(t->stack_hi - 1, t->stack_lo);
        scan_range(&M0, lo > t->stack_lo ? lo : t->stack_lo, t->stack_hi);
    }
    scan_range(&M0, (uintptr_t)t->regs, (uintptr_t)(t->regs + NGREG));
}

/* ---- stopping the world -------------------------------------------------- */

/* [signal-safe]: saves the interrupted registers and stack pointer where the
 * collector reads them, acknowledges, and waits for the restart. */
static void on_suspend(int sig, siginfo_t *si, void *ucv)
{
    tk__asan_signal_frame(si, ucv);
    (void)sig;
    (void)si;
    int e = errno;
    struct gc_thread *t = self;
    uint64_t gen = atomic_load(&stop_gen);
    if (t && atomic_load(&t->stopped_gen) != gen) {
        const ucontext_t *uc = ucv;
        for (int i = 0; i < NGREG; i++) t->regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
        t->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128; /* the red zone too */
        stack_t ss;
        t->alt_hi = 0;
        if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
            t->alt_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
        atomic_store(&t->stopped_gen, gen);
        sem_post(&ack);
        sigset_t wait;
        sigfillset(&wait);
        sigdelset(&wait, SIG_RESTART);
        /* (until a restart at least as late as this stop: the next stop
         * may come before this thread has run again - and count it
         * stopped, if it waits for the lock, without a signal) */
        while ((int64_t)(atomic_load(&restart_gen) - gen) < 0) sigsuspend(&wait);
    }
    errno = e;
}

static void on_restart(int sig)
{
    (void)sig;
}

static pid_t gettid_(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* ---- stopping the world at safepoints ----------------------------------- */

/* Thread t's stack is scanned from below regs, a buffer in the frame of a
 * function of t's that has spilled every callee-saved register into it
 * (__builtin_unwind_init, setjmp) and does not return meanwhile. */
static void stack_saved(struct gc_thread *t, const jmp_buf *regs)
{
    t->sp = (uintptr_t)regs - 128;
    t->alt_hi = 0;
    stack_t ss;
    if ((t->sp < t->stack_lo || t->sp >= t->stack_hi) && sigaltstack(NULL, &ss) == 0 &&
        (ss.ss_flags & SS_ONSTACK))
        t->alt_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
    memset(t->regs, 0, sizeof t->regs);
}

/* The calling thread t saves its registers in this frame and is counted
 * stopped (state: T_BLOCKING, or T_LOCKWAIT if fn returns only with the
 * collector's lock held) while fn(arg) runs; then it runs again, unless a
 * stop by safepoints is under way, which it waits out.  fn must not touch
 * collector objects: the collector scans t's stack from here up, with
 * t's frames above this one as they were at the call. */
__attribute__((noinline)) static void *as_blocked(struct gc_thread *t, void *(*fn)(void *),
                                                  void *arg, int state)
{
    if (!t || atomic_load(&t->state) != T_RUNNING) return fn(arg); /* (nested) */
    jmp_buf regs;
    __builtin_unwind_init(); /* every callee-saved register spilled into this frame */
    setjmp(regs);
    stack_saved(t, &regs);
    atomic_store(&t->state, state);
    if (__atomic_load_n(&sp_flag, __ATOMIC_SEQ_CST)) {
        /* a collector may be waiting for this thread: it is stopped now */
        pthread_mutex_lock(&SPW.lock);
        pthread_cond_broadcast(&SPW.ack);
        pthread_mutex_unlock(&SPW.lock);
    }
    void *r = fn(arg);
    for (;;) {
        atomic_store(&t->state, T_RUNNING);
        /* (a collector sets the flag, then reads the states; this thread
         * sets its state, then reads the flag: one of them sees the other) */
        if (!__atomic_load_n(&sp_flag, __ATOMIC_SEQ_CST)) break;
        atomic_store(&t->state, state);
        pthread_mutex_lock(&SPW.lock);
        pthread_cond_broadcast(&SPW.ack);
        while (__atomic_load_n(&sp_flag, __ATOMIC_SEQ_CST)) pthread_cond_wait(&SPW.go, &SPW.lock);
        pthread_mutex_unlock(&SPW.lock);
    }
    return r;
}

static void *lock_fn(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&G.lock);
    return NULL;
}

/* Takes the collector's lock; a registered thread waiting for it counts
 * as stopped (the collector holds the lock while it stops the threads). */
static void gc_lock(struct gc_thread *t)
{
    if (t) {
        if (pthread_mutex_trylock(&G.lock) == 0) return;
        as_blocked(t, lock_fn, NULL, T_LOCKWAIT);
        return;
    }
    pthread_mutex_lock(&G.lock);
}

/* Parks the calling thread t while a stop by safepoints is under way: its
 * registers saved in this frame, it waits for the restart. */
__attribute__((noinline)) static void park(struct gc_thread *t)
{
    jmp_buf regs;
    __builtin_unwind_init();
    setjmp(regs);
    pthread_mutex_lock(&SPW.lock);
    uint64_t gen = atomic_load(&stop_gen);
    if (__atomic_load_n(&sp_flag, __ATOMIC_SEQ_CST) && atomic_load(&t->stopped_gen) != gen) {
        stack_saved(t, &regs);
        atomic_store(&t->stopped_gen, gen);
        pthread_cond_broadcast(&SPW.ack);
        while ((int64_t)(atomic_load(&restart_gen) - gen) < 0)
            pthread_cond_wait(&SPW.go, &SPW.lock);
    }
    pthread_mutex_unlock(&SPW.lock);
}

/* The stopping thread's wait for answers spins this long before it sleeps:
 * a thread running on another CPU answers within microseconds, and waking
 * a sleeping thread can take longer than that (in a virtual machine, tens
 * of microseconds more). */
#define ACK_SPIN_NS 200000

/* An acknowledgement taken within the spin, else false. */
static bool ack_spin(void)
{
    uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        if (sem_trywait(&ack) == 0) return true;
        if (i % 64 == 0 && now_ns() - t0 > ACK_SPIN_NS) return false;
        __builtin_ia32_pause();
    }
}

/* Stops every registered thread but the caller at its next safepoint
 * (an allocation, tk_gc_safepoint, or a wait for the collector) or counts
 * it stopped while it blocks; returns how many. */
static size_t stop_world_safepoints(void)
{
    uint64_t gen = atomic_fetch_add(&stop_gen, 1) + 1;
    __atomic_store_n(&sp_flag, 1, __ATOMIC_SEQ_CST);
    uint64_t t0 = now_ns();
    size_t n = 0;
    bool told = false;
    pthread_mutex_lock(&SPW.lock);
    for (;;) {
        size_t waiting = 0;
        n = 0;
        for (struct gc_thread *t = G.threads; t; t = t->next) {
            if (t == self) continue;
            n++;
            if (atomic_load(&t->stopped_gen) != gen && atomic_load(&t->state) == T_RUNNING)
                waiting++;
        }
        if (!waiting) break;
        if (now_ns() - t0 < ACK_SPIN_NS) {
            pthread_mutex_unlock(&SPW.lock);
            __builtin_ia32_pause();
            pthread_mutex_lock(&SPW.lock);
            continue;
        }
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        if (pthread_cond_timedwait(&SPW.ack, &SPW.lock, &dl) == ETIMEDOUT && !told) {
            static const char msg[] =
                "trapkit gc: a registered thread has not reached a safepoint for 5 s (a loop "
                "without tk_gc_safepoint, or a wait outside tk_gc_do_blocking?); waiting\n";
            (void)!write(2, msg, sizeof msg - 1);
            told = true;
        }
    }
    pthread_mutex_unlock(&SPW.lock);
    return n;
}

static void start_world_safepoints(void)
{
    pthread_mutex_lock(&SPW.lock);
    atomic_store(&restart_gen, atomic_load(&stop_gen));
    __atomic_store_n(&sp_flag, 0, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&SPW.go);
    pthread_mutex_unlock(&SPW.lock);
}

/* Stops every registered thread but the caller by signals; returns how
 * many. */
static size_t stop_world_signals(void)
{
    size_t n = 0, waiting = 0;
    atomic_fetch_add(&stop_gen, 1);
    pid_t pid = getpid();
    for (struct gc_thread **pt = &G.threads; *pt;) {
        struct gc_thread *t = *pt;
        if (t == self) {
            pt = &t->next;
            continue;
        }
        if (atomic_load(&t->state) == T_LOCKWAIT) {
            /* waiting for the lock this thread holds: stopped as it is */
            n++;
            pt = &t->next;
            continue;
        }
        if (syscall(SYS_tgkill, pid, t->tid, SIG_SUSPEND) != 0) {
            /* exited without unregistering: forget it */
            *pt = t->next;
            G.st.threads--;
            continue;
        }
        n++;
        waiting++;
        pt = &t->next;
    }
    for (size_t i = 0; i < waiting; i++) {
        if (ack_spin()) continue;
        /* a thread that blocks SIGPWR never answers: say so, and wait */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5;
        bool told = false;
        while (sem_timedwait(&ack, &dl) != 0) {
            if (errno == ETIMEDOUT && !told) {
                static const char msg[] =
                    "trapkit gc: a registered thread has not stopped for 5 s (does it block "
                    "SIGPWR?); waiting\n";
                (void)!write(2, msg, sizeof msg - 1);
                told = true;
            }
            if (errno == ETIMEDOUT) {
                clock_gettime(CLOCK_REALTIME, &dl);
                dl.tv_sec += 3600;
            }
        }
    }
    return n;
}

/* Stops every registered thread but the caller; returns how many. */
static size_t stop_world(void)
{
    uint64_t t0 = now_ns();
    size_t n = atomic_load_explicit(&safepoints, memory_order_relaxed) ? stop_world_safepoints()
                                                                       : stop_world_signals();
    uint64_t d = now_ns() - t0;
    if (d > G.st.max_handshake_ns) G.st.max_handshake_ns = d;
    return n;
}

static void start_world(void)
{
    if (atomic_load_explicit(&safepoints, memory_order_relaxed)) {
        start_world_safepoints();
        return;
    }
    uint64_t gen = atomic_load(&stop_gen);
    atomic_store(&restart_gen, gen);
    pid_t pid = getpid();
    for (struct gc_thread *t = G.threads; t; t = t->next)
        if (t != self && atomic_load(&t->stopped_gen) == gen) /* (signalled) */
            syscall(SYS_tgkill, pid, t->tid, SIG_RESTART);
}

/* ---- threads ------------------------------------------------------------- */
static int register_locked(void)
{
    if (self) return -EINVAL;
    struct gc_thread *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->tid = gettid_();
    t->stack_hi = stack_bounds(&t->stack_lo);
    if (!t->stack_hi) {
        free(t);
        return tk__fail(-EINVAL, "tk_gc: the thread's stack could not be found");
    }
    atomic_store(&t->stopped_gen, atomic_load(&stop_gen));
    t->next = G.threads;
    G.threads = t;
    self = t;
    G.st.threads++;
    pthread_setspecific(thread_key, t);
    return 0;
}

static void unregister_locked(struct gc_thread *t)
{
    for (struct gc_thread **pt = &G.threads; *pt; pt = &(*pt)->next)
        if (*pt == t) {
            *pt = t->next;
            G.st.threads--;
            break;
        }
    if (self == t) self = NULL;
    free(t);
}

/* The key's destructor: a thread that exits unregisters. */
static void thread_gone(void *p)
{
    gc_lock(p);
    unregister_locked(p);
    pthread_mutex_unlock(&G.lock);
}

/* ---- setting up ---------------------------------------------------------- */
static void setup(void)
{
    size_t reserve = RESERVE_DEFAULT;
    const char *env = getenv("TRAPKIT_GC_RESERVE_MIB");
    if (env && atoll(env) > 0) reserve = (size_t)atoll(env) << 20;
    reserve = (reserve + PS * 64 - 1) / (PS * 64) * (PS * 64);
    void *base = MAP_FAILED;
    for (; reserve >= (64ull << 20); reserve /= 2) {
        base = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base != MAP_FAILED) break;
    }
    if (base == MAP_FAILED) {
        G.init_err = tk__fail(-ENOMEM, "tk_gc_init: no address space for the heap");
        return;
    }
    size_t pages = reserve / PS;
    size_t bits = pages * WORDS_PER_PAGE * 8; /* bytes of one granule bitmap */
    void *meta = mmap(NULL, pages * sizeof(struct blk) + 3 * bits + pages / 8,
                      PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (meta == MAP_FAILED) {
        munmap(base, reserve);
        G.init_err = tk__fail(-ENOMEM, "tk_gc_init: no memory for the heap's tables");
        return;
    }
    G.base = base;
    G.reserve_pages = pages;
    G.blk = meta;
    G.mark = (uint64_t *)((char *)meta + pages * sizeof(struct blk));
    G.alloc = (uint64_t *)((char *)G.mark + bits);
    G.mark_next = (uint64_t *)((char *)G.alloc + bits);
    G.freemap = (uint64_t *)((char *)G.mark_next + bits);
    /* the cards (a byte per 512 bytes: 128 MiB of address space for the
     * default reservation, pages only where the program writes) */
    void *cards = mmap(NULL, pages * (PS >> TK_GC_CARD_SHIFT), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (cards == MAP_FAILED) {
        G.init_err = tk__fail(-ENOMEM, "tk_gc_init: no memory for the card table");
        return;
    }
    G.card = cards;
    card_map = (tk_gc_card_map){G.card, (uintptr_t)base, reserve};
    MB = G.mark;
    G.threshold = GC_MIN_BYTES;
    P.want = default_markers();
    init_classes();
    G.barrier = TK_MECH_COUNT_;
    const char *b = getenv("TRAPKIT_GC_BARRIER");
    if (b && strcmp(b, "cards") == 0) {
        G.cards = true;
    } else if (b && *b && strcmp(b, "none") != 0) {
        G.barrier = tk_mech_parse(b);
        if (G.barrier == TK_MECH_COUNT_ || G.barrier == TK_MECH_PKEYS ||
            G.barrier == TK_MECH_SOFT_DIRTY) {
            G.init_err = tk__failf(-EINVAL,
                                   "tk_gc_init: TRAPKIT_GC_BARRIER=%s: give none, auto, "
                                   "pagemap-scan, uffd-sigbus, uffd-thread, posix or cards",
                                   b);
            return;
        }
    }
    /* TRAPKIT_GC_STOP: how the world is stopped */
    const char *stop = getenv("TRAPKIT_GC_STOP");
    if (stop && *stop) {
        if (strcmp(stop, "safepoints") == 0) {
            atomic_store(&safepoints, true);
        } else if (strcmp(stop, "signals") != 0) {
            G.init_err = tk__failf(
                -EINVAL, "tk_gc_init: TRAPKIT_GC_STOP=%s: give signals or safepoints", stop);
            return;
        }
    }
    /* TRAPKIT_GC_CONCURRENT=1: mostly-concurrent marking (the barrier auto
     * if none is chosen; the marker thread starts at the first cycle) */
    const char *c = getenv("TRAPKIT_GC_CONCURRENT");
    if (c && *c && strcmp(c, "0") != 0) {
        if (strcmp(c, "1") != 0) {
            G.init_err = tk__failf(-EINVAL, "tk_gc_init: TRAPKIT_GC_CONCURRENT=%s: give 0 or 1", c);
            return;
        }
        G.concurrent = true;
        if (!barrier_on()) G.barrier = TK_MECH_AUTO;
    }
    /* page 0 is never used: G.base, a word of the scanned data, points there */
    int gerr = grow(1);
    if (gerr != 0) {
        char why[256]; /* the error buffer is rewritten below */
        snprintf(why, sizeof why, "%s", tk_last_error());
        G.init_err = gerr == -EOPNOTSUPP
                         ? tk__failf(gerr, "tk_gc_init: the %s write barrier: %s",
                                     tk_mech_name(G.barrier), why)
                         : tk__fail(gerr, "tk_gc_init: the heap could not be committed");
        return;
    }
    clr(G.freemap, 0);
    G.free_pages--;
    if (sem_init(&ack, 0, 0) != 0 || pthread_key_create(&thread_key, thread_gone) != 0) {
        G.init_err = tk__fail(-ENOMEM, "tk_gc_init: no semaphore or thread key");
        return;
    }
    struct sigaction sa = {.sa_sigaction = on_suspend, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigfillset(&sa.sa_mask); /* the restart signal too: it waits in sigsuspend */
    sigaction(SIG_SUSPEND, &sa, NULL);
    struct sigaction sr = {.sa_handler = on_restart, .sa_flags = SA_RESTART};
    sigfillset(&sr.sa_mask);
    sigaction(SIG_RESTART, &sr, NULL);
    G.ready = true;
}

/* Sets up once and registers the calling thread if it is not; with the
 * lock held on success (0). */
static int enter(void)
{
    if (!atomic_load_explicit(&ready, memory_order_acquire)) {
        pthread_once(&once, setup);
        if (!G.ready) return G.init_err ? G.init_err : -ENOMEM;
        atomic_store_explicit(&ready, true, memory_order_release);
    }
    gc_lock(self);
    if (!self) {
        int err = register_locked();
        if (err) {
            pthread_mutex_unlock(&G.lock);
            return err;
        }
    }
    return 0;
}

int tk_gc_init(void)
{
    int err = enter();
    if (err) return err;
    pthread_mutex_unlock(&G.lock);
    return 0;
}

/* ---- collecting ---------------------------------------------------------- */

/* Scans the caller's own stack and registers (spilled by setjmp into this
 * frame's buffer, which is on the scanned stack). */
NO_SANITIZE static void mark_own_stack(void)
{
    jmp_buf regs;
    __builtin_unwind_init(); /* every callee-saved register spilled into this frame */
    setjmp(regs);
    uintptr_t here = (uintptr_t)&regs;
    scan_range(&M0, here < 128 ? 0 : here - 128, self->stack_hi);
    scan_range(&M0, (uintptr_t)&regs, (uintptr_t)(&regs + 1));
}

/* The roots, with the world stopped: the loaded objects' writable
 * segments (listed before the stop), the added ranges, the stopped threads'
 * stacks and registers, and the caller's own if it is a registered thread
 * (the marker thread is not). */
static void scan_roots_stopped(void)
{
    for (size_t i = 0; i < G.nsegs; i++) scan_range(&M0, G.segs[i].lo, G.segs[i].hi);
    for (size_t i = 0; i < G.nroots; i++) scan_range(&M0, G.roots[i].lo, G.roots[i].hi);
    for (struct gc_thread *t = G.threads; t; t = t->next) {
        if (t != self) scan_thread(t);
    }
    if (self) mark_own_stack();
}

/* With the world stopped and everything reachable marked in G.mark: the
 * objects waiting in the threads' own lists are kept, weak links to what is
 * unreachable cleared, finalizable unreachable objects kept for their
 * finalizers (G.fin_pending). */
static void finish_marking(void)
{
    /* the objects waiting in the threads' own free lists stay allocated
     * (a stopped thread may be halfway through taking one: the list may
     * still hold it, which only keeps it longer) */
    for (struct gc_thread *t = G.threads; t; t = t->next)
        for (unsigned k = 0; k < NCLS * 2; k++)
            for (void *p = t->tl[k]; p; p = *(void **)p) set(G.mark, granule_of((uintptr_t)p));

    /* weak links to what is unreachable */
    for (size_t i = 0; i < G.nweak; i++) {
        uintptr_t o = ~G.weak[i].obj;
        size_t size;
        bool scan;
        uintptr_t s = object_of(o, &size, &scan);
        if (s && bit(G.mark, granule_of(s))) continue;
        *G.weak[i].link = NULL;
        G.st.cleared_links++;
        G.weak[i--] = G.weak[--G.nweak];
    }

    /* finalizable objects found unreachable: what they reach is kept; those
     * no other one reaches are kept for their finalizer */
    size_t nf = 0;
    for (size_t i = 0; i < G.nfin; i++) {
        uintptr_t o = (uintptr_t)G.fin[i].obj;
        G.fin[i].ready = !bit(G.mark, granule_of(o));
        if (!G.fin[i].ready) continue;
        nf++;
        size_t size;
        bool scan;
        if (object_of(o, &size, &scan) && scan) {
            scan_range(&M0, o, o + size);
            drain(&M0, NULL);
        }
    }
    if (nf)
        for (size_t i = 0; i < G.nfin; i++) {
            if (!G.fin[i].ready) continue;
            size_t g = granule_of((uintptr_t)G.fin[i].obj);
            if (bit(G.mark, g)) {
                G.fin[i].ready = false; /* another finalizable object reaches it: later */
                continue;
            }
            size_t size;
            bool scan;
            if (object_of((uintptr_t)G.fin[i].obj, &size, &scan)) M0.marked_bytes += size;
            set(G.mark, g);
            G.fin_pending = true;
        }

    /* weak links held in objects that are not kept go with them */
    for (size_t i = 0; i < G.nweak; i++) {
        size_t size;
        bool scan;
        uintptr_t s = object_of((uintptr_t)G.weak[i].link, &size, &scan);
        if (!s || bit(G.mark, granule_of(s))) continue;
        G.weak[i--] = G.weak[--G.nweak];
    }
}

/* After a collection, the world running again and the lock still held
 * (no thread takes from the shared lists meanwhile): large objects are
 * swept now; small blocks when their class needs objects (every free list
 * is rebuilt from its blocks); the figures, and when the next one starts. */
static void after_collection(bool full, uint64_t pause)
{
    for (size_t pg = 0; pg < G.top;) {
        struct blk *b = &G.blk[pg];
        if (b->kind == K_LARGE) {
            size_t n = b->pages;
            size_t g = granule_of((uintptr_t)page_addr(pg));
            if (abit(g) && !bit(G.mark, g)) {
                G.st.reclaimed_objects++;
                free_pages(pg, n);
            }
            pg += n;
            continue;
        }
        if (b->kind == K_SMALL) b->unswept = 1;
        pg++;
    }
    for (unsigned k = 0; k < NCLS * 2; k++) {
        G.freelist[k] = NULL;
        G.freecount[k] = 0;
        G.fl_page[k] = 0;
        G.cursor[k] = G.list[k];
        G.cursor_prev[k] = 0;
    }
    G.st.collections++;
    if (full) {
        G.minors = 0;
        G.st.live_bytes = M0.marked_bytes;
    } else {
        G.minors++;
        G.st.minor_collections++;
        G.st.live_bytes += M0.marked_bytes;
    }
    G.st.last_pause_ns = pause;
    G.st.total_pause_ns += pause;
    if (pause > G.st.max_pause_ns) G.st.max_pause_ns = pause;
    G.since_gc = 0;
    /* what the roots reached (a concurrent cycle also keeps what was
     * allocated during it, live or not) */
    G.reach_bytes = G.st.live_bytes > G.black_kept ? G.st.live_bytes - G.black_kept : 0;
    G.black_kept = 0;
    /* the next one when most of the heap's free space has been allocated
     * (three quarters), or the live size if more: the heap grows to twice
     * the live size before collecting again.  With concurrent marking half
     * of it, the rest for what is allocated while the marker runs, and at
     * most twice the live size the roots reach and 4 MiB: what a cycle
     * allocates is black, rescanned on the pages written meanwhile, so a
     * heap grown while the marker fell behind must not lengthen the next
     * cycles (each one longer, the heap growing again) */
    uint64_t heap = G.top * PS, live = G.st.live_bytes < heap ? G.st.live_bytes : heap;
    uint64_t free = (heap - live) / 4 * (G.concurrent ? 2 : 3);
    if (G.concurrent && free > GC_MIN_BYTES + 2 * G.reach_bytes)
        free = GC_MIN_BYTES + 2 * G.reach_bytes;
    uint64_t th = G.reach_bytes > free ? G.reach_bytes : free;
    G.threshold = th > GC_MIN_BYTES ? th : GC_MIN_BYTES;
}

/* A collection with the world stopped throughout: full (every mark
 * cleared first), or with a write barrier minor (the marks of the last
 * collections kept: the objects they mark are old, kept until the next
 * full collection; what is unmarked is young). */
static void collect_locked(bool full)
{
    uint64_t t0 = now_ns();
    if (!barrier_on() || G.minors >= FULL_EVERY) full = true;
    G.nsegs = 0;
    dl_iterate_phdr(each_object, NULL);
    start_helpers();
    stop_world();
    MB = G.mark;
    MB_atomic = false;
    M0.marked_bytes = 0;
    if (full) {
        memset(G.mark, 0, G.top * WORDS_PER_PAGE * 8);
        /* the next interval of the barrier starts now */
        if (G.cards)
            memset(G.card, 0, G.top * (PS >> TK_GC_CARD_SHIFT));
        else
            for (size_t ci = 0; ci < G.nchunks; ci++)
                if (G.chunks[ci].region) tk_dirty(G.chunks[ci].region, G.dirty, G.dirty_bits);
    } else {
        push_dirty();
    }
    scan_roots_stopped();
    mark_all();
    finish_marking();
    start_world();
    after_collection(full, now_ns() - t0);
}

/* ---- mostly-concurrent marking (Boehm, Demers and Shenker) ---------------
 *
 * The marker thread, asked for a cycle when enough has been allocated:
 * (1) the barrier's interval starts (every page written from now on is
 * reported), allocation turns black (objects handed out are marked in
 * mark_next), and with the world stopped for a moment the threads' stacks
 * and registers are scanned (their objects pushed, not yet followed);
 * (2) with the program running, the data segments and added roots are
 * scanned and everything reachable marked; (3) a few times, the marked
 * objects on the pages written meanwhile are scanned again (the program
 * may have stored a pointer to an unmarked object in one already scanned),
 * while that is more than a few pages; (4) with the world stopped, the
 * last written pages and all the roots are scanned again and the marking
 * finished: the bitmaps trade places, and the collection ends as a
 * stop-the-world one does.  Only (1) and (4) stop the program.  An object
 * the program can reach at (4) is marked: reachable from a root (scanned
 * at (4)), from an object allocated during the cycle (black: and the
 * object was written after it was marked, so its page is scanned again),
 * or from an object marked earlier, whose content the marker read either
 * after the program's last store into it or before a store that marked its
 * page written. */

/* The chunks as they are now, and the marker's bitmap large enough for
 * any of them; with the lock held.  False if there is no memory. */
static bool snapshot_chunks(struct chunk *ch, size_t *n)
{
    size_t most = 0;
    for (size_t i = 0; i < G.nchunks; i++)
        if (G.chunks[i].pages > most) most = G.chunks[i].pages;
    if (most > G.cdirty_bits) {
        uint64_t *d = realloc(G.cdirty, (most + 63) / 64 * 8);
        if (!d) return false;
        G.cdirty = d;
        G.cdirty_bits = most;
    }
    memcpy(ch, G.chunks, G.nchunks * sizeof *ch);
    *n = G.nchunks;
    return true;
}

static void cycle_over_locked(void)
{
    __atomic_store_n(&G.cycle_marked, 0, __ATOMIC_RELAXED);
    G.cycle = G.cycle_requested = false;
    MB = G.mark;
    MB_atomic = false;
    G.cycles_done++;
    pthread_cond_broadcast(&G.done_cv);
}

static void concurrent_cycle(void)
{
    static struct chunk ch[MAX_CHUNKS];
    size_t nch;
    pthread_mutex_lock(&G.lock);
    size_t top = G.top;
    pthread_mutex_unlock(&G.lock);
    /* (no one else sets bits in mark_next until the cycle starts; pages
     * committed meanwhile have never had any set) */
    memset(G.mark_next, 0, top * WORDS_PER_PAGE * 8);

    pthread_mutex_lock(&G.lock);
    bool go = !G.disabled && G.concurrent && snapshot_chunks(ch, &nch);
    pthread_mutex_unlock(&G.lock);
    if (!go) {
        pthread_mutex_lock(&G.lock);
        cycle_over_locked();
        pthread_mutex_unlock(&G.lock);
        return;
    }
    /* the barrier's interval starts: from now on every page written is
     * reported (a chunk added later reports its pages from its start) */
    for (size_t i = 0; i < nch; i++) read_written(&ch[i], G.cdirty, G.cdirty_bits);
    pthread_mutex_lock(&G.lock);
    G.ncroots = 0;
    for (size_t i = 0; i < G.nroots; i++)
        if (add_seg(&G.croots, &G.ncroots, &G.croots_cap, G.roots[i].lo, G.roots[i].hi)) break;
    MB = G.mark_next;
    MB_atomic = true;
    M0.marked_bytes = G.black_bytes = 0;
    G.cycle = true;
    G.cycle_requested = false;
    G.nsegs = 0;
    dl_iterate_phdr(each_object, NULL);
    uint64_t t0 = now_ns();
    stop_world();
    for (struct gc_thread *t = G.threads; t; t = t->next) scan_thread(t);
    start_world();
    uint64_t pause = now_ns() - t0;
    G.st.total_pause_ns += pause;
    if (pause > G.st.max_pause_ns) G.st.max_pause_ns = pause;
    pthread_mutex_unlock(&G.lock);

    /* with the program running */
    uint64_t m0 = now_ns();
    for (size_t i = 0; i < G.nsegs; i++) scan_range(&M0, G.segs[i].lo, G.segs[i].hi);
    for (size_t i = 0; i < G.ncroots; i++) scan_range(&M0, G.croots[i].lo, G.croots[i].hi);
    drain(&M0, &G.cycle_marked);
    for (int pass = 0; pass < PRECLEAN_PASSES; pass++) {
        pthread_mutex_lock(&G.lock);
        bool ok = snapshot_chunks(ch, &nch);
        pthread_mutex_unlock(&G.lock);
        if (!ok) break;
        uint64_t n = push_dirty_in(ch, nch, G.cdirty, G.cdirty_bits);
        G.st.dirty_pages += n;
        drain(&M0, &G.cycle_marked);
        if (n < PRECLEAN_ENOUGH) break;
    }
    G.st.concurrent_mark_ns += now_ns() - m0;

    /* the world stopped: the last written pages and the roots */
    pthread_mutex_lock(&G.lock);
    if (!snapshot_chunks(ch, &nch)) {
        /* no memory for the bitmap: every marked object is scanned again
         * (push_dirty_in does that when tk_dirty fails) */
    }
    G.nsegs = 0;
    dl_iterate_phdr(each_object, NULL);
    uint64_t t1 = now_ns();
    start_helpers();
    stop_world();
    G.st.dirty_pages += push_dirty_in(G.chunks, G.nchunks, G.cdirty, G.cdirty_bits);
    scan_roots_stopped();
    mark_all();
    uint64_t *old = G.mark;
    G.mark = G.mark_next;
    G.mark_next = old;
    MB = G.mark;
    MB_atomic = false;
    G.cycle = false;
    M0.marked_bytes += G.black_bytes;
    G.black_kept = G.black_bytes;
    finish_marking();
    start_world();
    after_collection(true, now_ns() - t1);
    G.st.concurrent_cycles++;
    cycle_over_locked();
    pthread_mutex_unlock(&G.lock);

    /* until the next cycle nothing reads the barrier: its pages are opened
     * (one system call a chunk), so that the program's writes meanwhile
     * take no fault (a minor collection in between - tk_gc_collect_minor -
     * finds every page written: slower, as correct) */
    for (size_t i = 0; i < nch; i++)
        if (ch[i].region) tk_dirty_mark(ch[i].region, page_addr(ch[i].first), ch[i].pages * PS);
}

static void *marker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&G.lock);
    for (;;) {
        while (!G.cycle_requested) pthread_cond_wait(&G.cycle_cv, &G.lock);
        pthread_mutex_unlock(&G.lock);
        concurrent_cycle();
        pthread_mutex_lock(&G.lock);
    }
    return NULL;
}

/* fork(): the child has no marker thread; a cycle under way is dropped
 * (its marks are in mark_next, which the next cycle clears). */
static void fork_prepare(void)
{
    gc_lock(self);
}
static void fork_parent(void)
{
    pthread_mutex_unlock(&G.lock);
}
static void fork_child(void)
{
    G.marker_started = G.cycle = G.cycle_requested = false;
    MB = G.mark;
    MB_atomic = false;
    M0.sp = 0;
    __atomic_store_n(&sp_flag, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_init(&SPW.lock, NULL);
    pthread_cond_init(&SPW.ack, NULL);
    pthread_cond_init(&SPW.go, NULL);
    /* nor any marking helpers: they start again when a collection wants them */
    P.started = 0;
    atomic_store(&P.spin, 0);
    pthread_mutex_init(&P.lock, NULL);
    pthread_cond_init(&P.cv, NULL);
    pthread_cond_init(&G.cycle_cv, NULL);
    pthread_cond_init(&G.done_cv, NULL);
    pthread_mutex_unlock(&G.lock);
}

/* Starts the marker thread if it is not running; with the lock held. */
static int start_marker_locked(void)
{
    if (G.marker_started) return 0;
    static bool atfork;
    if (!atfork && pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return -ENOMEM;
    atfork = true;
    /* (the program's signals go to its own threads) */
    int e = tk__thread_start(&G.marker, marker_main, NULL);
    if (e) return e;
    pthread_detach(G.marker);
    G.marker_started = true;
    return 0;
}

/* Waits for a concurrent cycle under way to end; with the lock held. */
static void *wait_cycle_fn(void *arg)
{
    (void)arg;
    while (G.cycle || G.cycle_requested) pthread_cond_wait(&G.done_cv, &G.lock);
    return NULL;
}
static void wait_cycle_locked(void)
{
    /* (the marker stops the world meanwhile: this thread counts stopped) */
    if (G.cycle || G.cycle_requested) as_blocked(self, wait_cycle_fn, NULL, T_LOCKWAIT);
}

/* With the lock held, before taking memory: a collection once enough has
 * been allocated since the last one.  With concurrent marking the marker
 * thread is asked for a cycle (a program that outruns the marker has the
 * heap grow meanwhile, up to a bound: alloc_pages).  Without a
 * marker thread, a stop-the-world collection here. */
static void maybe_collect_locked(void)
{
    if (G.since_gc < G.threshold || G.disabled) return;
    if (G.concurrent) {
        if (G.cycle || G.cycle_requested) return;
        if (start_marker_locked() == 0) {
            G.cycle_requested = true;
            pthread_cond_signal(&G.cycle_cv);
            return;
        }
    }
    collect_locked(false);
}

/* Runs the finalizers a collection made ready; called with the lock held,
 * returns with it held (unlocked while they run). */
static void run_finalizers(void)
{
    if (!G.fin_pending) return;
    G.fin_pending = false;
    size_t n = 0;
    for (size_t i = 0; i < G.nfin; i++) n += G.fin[i].ready;
    if (!n) return;
    struct finalizer *run = malloc(n * sizeof *run);
    if (!run) return; /* they stay ready: the next collection runs them */
    size_t k = 0;
    for (size_t i = 0; i < G.nfin; i++) {
        if (!G.fin[i].ready) continue;
        run[k++] = G.fin[i];
        G.fin[i--] = G.fin[--G.nfin];
    }
    G.st.finalized_objects += k;
    pthread_mutex_unlock(&G.lock);
    for (size_t i = 0; i < k; i++) run[i].fn(run[i].obj, run[i].arg);
    free(run);
    gc_lock(self);
}

void tk_gc_collect(void)
{
    if (enter()) return;
    wait_cycle_locked();
    collect_locked(true);
    run_finalizers();
    pthread_mutex_unlock(&G.lock);
}

void tk_gc_collect_minor(void)
{
    if (enter()) return;
    wait_cycle_locked();
    collect_locked(false);
    run_finalizers();
    pthread_mutex_unlock(&G.lock);
}

/* Turns the barrier on with mechanism m; with the lock held. */
static int set_barrier_locked(enum tk_mech m, bool cards, const char *who)
{
    if (barrier_on()) return tk__failf(-EINVAL, "%s: the barrier is on already", who);
    int err = 0;
    if (cards) {
        for (size_t i = 0; i < G.nchunks && !err; i++) err = dirty_room(G.chunks[i].pages);
        if (err) return tk__failf(err, "%s: out of memory", who);
        G.cards = true;
        G.minors = FULL_EVERY;
        return 0;
    }
    G.barrier = m;
    for (size_t i = 0; i < G.nchunks && !err; i++) err = track_chunk(&G.chunks[i], G.barrier);
    if (err) {
        char why[256]; /* the error buffer is rewritten below */
        snprintf(why, sizeof why, "%s", tk_last_error());
        for (size_t i = 0; i < G.nchunks; i++)
            if (G.chunks[i].region) {
                tk_region_destroy(G.chunks[i].region);
                G.chunks[i].region = NULL;
            }
        G.barrier = TK_MECH_COUNT_;
        return tk__failf(err, "%s: %s", who, why);
    }
    /* the writes since the last collection were not seen: full next */
    G.minors = FULL_EVERY;
    return 0;
}

int tk_gc_set_barrier(const char *mech)
{
    bool cards = mech && strcmp(mech, "cards") == 0;
    enum tk_mech m = mech && !cards ? tk_mech_parse(mech) : TK_MECH_COUNT_;
    if (!cards && (m == TK_MECH_COUNT_ || m == TK_MECH_PKEYS || m == TK_MECH_SOFT_DIRTY))
        return tk__failf(-EINVAL,
                         "tk_gc_set_barrier: %s: give auto, pagemap-scan, uffd-sigbus, "
                         "uffd-thread, posix or cards",
                         mech ? mech : "NULL");
    int err = enter();
    if (err) return err;
    err = set_barrier_locked(m, cards, "tk_gc_set_barrier");
    pthread_mutex_unlock(&G.lock);
    return err;
}

int tk_gc_set_concurrent(int on)
{
    int err = enter();
    if (err) return err;
    if (on && !barrier_on()) err = set_barrier_locked(TK_MECH_AUTO, false, "tk_gc_set_concurrent");
    if (!err && on) err = start_marker_locked();
    if (err == -EAGAIN || err == -ENOMEM)
        err = tk__failf(err, "tk_gc_set_concurrent: the marker thread could not be started: %s",
                        strerror(-err));
    if (!err) {
        if (!on) wait_cycle_locked();
        G.concurrent = on != 0;
    }
    pthread_mutex_unlock(&G.lock);
    return err;
}

int tk_gc_set_stop(const char *how)
{
    bool sp = how && strcmp(how, "safepoints") == 0;
    if (!sp && !(how && strcmp(how, "signals") == 0))
        return tk__failf(-EINVAL, "tk_gc_set_stop: %s: give signals or safepoints",
                         how ? how : "NULL");
    int err = enter();
    if (err) return err;
    if (G.st.threads > 1 && sp != atomic_load(&safepoints))
        err = tk__fail(-EBUSY, "tk_gc_set_stop: other threads are registered already");
    else
        atomic_store(&safepoints, sp);
    pthread_mutex_unlock(&G.lock);
    return err;
}

const char *tk_gc_stop(void)
{
    pthread_once(&once, setup);
    return atomic_load(&safepoints) ? "safepoints" : "signals";
}

const unsigned *tk_gc_stop_flag(void)
{
    return &sp_flag;
}

void tk_gc_park(void)
{
    if (self && __atomic_load_n(&sp_flag, __ATOMIC_SEQ_CST)) park(self);
}

void *tk_gc_do_blocking(void *(*fn)(void *), void *arg)
{
    return as_blocked(self, fn, arg, T_BLOCKING);
}

int tk_gc_set_markers(unsigned n)
{
    if (n < 1 || n > MAX_MARKERS)
        return tk__failf(-EINVAL, "tk_gc_set_markers: %u: give 1 to %d", n, MAX_MARKERS);
    int err = enter();
    if (err) return err;
    P.want = n;
    pthread_mutex_unlock(&G.lock);
    return 0;
}

unsigned tk_gc_markers(void)
{
    pthread_once(&once, setup);
    return P.want ? P.want : 1;
}

int tk_gc_concurrent(void)
{
    pthread_once(&once, setup);
    return G.concurrent;
}

const char *tk_gc_barrier(void)
{
    pthread_once(&once, setup);
    return G.cards ? "cards" : G.barrier == TK_MECH_COUNT_ ? "none" : tk_mech_name(G.barrier);
}

const tk_gc_card_map *tk_gc_cards(void)
{
    pthread_once(&once, setup);
    return &card_map;
}

/* ---- allocating ---------------------------------------------------------- */

/* Sweeps small block pg (class list k): its unmarked objects are
 * reclaimed, its free slots go on the class's free list; an empty block
 * goes back to the pages (and false is returned: unlinked). */
static bool sweep_block(unsigned k, size_t pg, size_t prev)
{
    struct blk *b = &G.blk[pg];
    /* a word of the bitmaps at a time: a full block is passed over without
     * touching its objects (nor dirtying its page) */
    const uint64_t *sm = slot_mask[b->cls];
    uint64_t *al = &G.alloc[pg * WORDS_PER_PAGE];
    const uint64_t *mk = &G.mark[pg * WORDS_PER_PAGE];
    uint64_t freebits[WORDS_PER_PAGE];
    size_t live = 0, nfree = 0;
    for (unsigned w = 0; w < WORDS_PER_PAGE; w++) {
        uint64_t a = al[w] & sm[w], lv = a & mk[w], garbage = a & ~lv;
        if (garbage) {
            al[w] &= ~garbage;
            G.st.reclaimed_objects += (uint64_t)__builtin_popcountll(garbage);
        }
        live += (size_t)__builtin_popcountll(lv);
        freebits[w] = sm[w] & ~lv;
        nfree += (size_t)__builtin_popcountll(freebits[w]);
    }
    if (live && nfree) { /* the free slots on the class's list, in address order */
        uintptr_t base = (uintptr_t)page_addr(pg);
        void *head = G.freelist[k];
        if (head) {
            G.fl_page[k] = 0; /* (two pages' objects: taken by walking) */
        } else {
            G.fl_page[k] = (uint32_t)pg + 1;
            memcpy(G.fl_mask[k], freebits, sizeof freebits);
        }
        for (unsigned w = WORDS_PER_PAGE; w-- > 0;)
            for (uint64_t m = freebits[w]; m; m &= ~(1ull << (63 - __builtin_clzll(m)))) {
                uintptr_t o =
                    base + ((uintptr_t)w * 64 + 63 - (uintptr_t)__builtin_clzll(m)) * GRANULE;
                *(void **)o = head;
                head = (void *)o;
            }
        G.freelist[k] = head;
    }
    b->unswept = 0;
    if (live) {
        G.freecount[k] += nfree;
        return true;
    }
    /* empty: unlink it and give the page back */
    uint32_t next = b->next;
    if (prev)
        G.blk[prev - 1].next = next;
    else if (G.list[k] == pg + 1)
        G.list[k] = next;
    else
        for (uint32_t q = G.list[k]; q; q = G.blk[q - 1].next)
            if (G.blk[q - 1].next == pg + 1) {
                G.blk[q - 1].next = next;
                break;
            }
    free_pages(pg, 1);
    return false;
}

static int refill(unsigned k)
{
    /* lazily sweep the class's blocks collected since their last sweep
     * (a few at a time: while there are free pages, a fresh block is taken
     * after SWEEP_BUDGET full ones, so that no allocation waits long) */
    unsigned looked = 0;
    while (G.cursor[k] && !G.freelist[k]) {
        if (++looked > SWEEP_BUDGET && G.free_pages > 0) break;
        size_t pg = G.cursor[k] - 1;
        uint32_t prev = G.cursor_prev[k];
        G.cursor[k] = G.blk[pg].next;
        if (G.blk[pg].unswept) {
            if (sweep_block(k, pg, prev)) G.cursor_prev[k] = (uint32_t)pg + 1;
        } else {
            G.cursor_prev[k] = (uint32_t)pg + 1;
        }
    }
    if (G.freelist[k]) return 0;
    size_t pg = alloc_pages(1);
    if (pg == SIZE_MAX) return -ENOMEM;
    unsigned cls = k / 2;
    G.blk[pg] = (struct blk){
        .kind = K_SMALL, .cls = (uint8_t)cls, .atomic = (uint8_t)(k & 1), .next = G.list[k]};
    G.list[k] = (uint32_t)pg + 1;
    if (G.cursor[k] == 0) G.cursor_prev[k] = 0;
    size_t sz = class_size[cls], per = PS / sz;
    uintptr_t base = (uintptr_t)page_addr(pg);
    void *head = NULL;
    for (size_t i = per; i-- > 0;) {
        *(void **)(base + i * sz) = head;
        head = (void *)(base + i * sz);
    }
    G.freelist[k] = head;
    G.freecount[k] += per;
    G.fl_page[k] = (uint32_t)pg + 1;
    memcpy(G.fl_mask[k], slot_mask[cls], sizeof G.fl_mask[k]);
    return 0;
}

/* The heap cannot grow (the reservation is used up, or a concurrent cycle
 * under way bounds it: may_grow): the cycle is waited for, or a full
 * collection made (once: *collected), before an allocation fails; with the
 * lock held.  Whether to try again. */
static bool collect_for_room(bool *collected)
{
    if (G.cycle || G.cycle_requested) {
        G.st.allocation_waits++;
        wait_cycle_locked();
        return true;
    }
    if (G.disabled || *collected) return false;
    collect_locked(true);
    *collected = true;
    return true;
}

/* Class list k refilled if empty (a cycle waited for, or a collection,
 * when the heap may not grow); false, with the reason, if it cannot be. */
static bool refill_or_room(unsigned k)
{
    bool collected = false;
    while (!G.freelist[k] && refill(k) != 0)
        if (!collect_for_room(&collected)) {
            tk__fail(-ENOMEM, "tk_gc_malloc: the heap is full");
            return false;
        }
    return true;
}

static void *alloc_locked(size_t n, bool atomic)
{
    if (n == 0) n = 1;
    maybe_collect_locked();
    run_finalizers();
    if (n <= SMALL_MAX) {
        unsigned cls = class_of(n), k = cls * 2 + atomic;
        if (!refill_or_room(k)) return NULL;
        void *p = G.freelist[k];
        G.freelist[k] = *(void **)p;
        G.freecount[k]--;
        if (G.fl_page[k]) {
            size_t g = granule_of((uintptr_t)p) - (size_t)(G.fl_page[k] - 1) * GR_PER_PAGE;
            G.fl_mask[k][g / 64] &= ~(1ull << (g % 64));
        }
        aset(granule_of((uintptr_t)p));
        clr(G.mark, granule_of((uintptr_t)p)); /* young (a slot freed may have been old) */
        if (G.cycle) {                         /* black */
            set_atomic(G.mark_next, granule_of((uintptr_t)p));
            G.black_bytes += class_size[cls];
        }
        if (atomic)
            *(void **)p = NULL;
        else
            memset(p, 0, class_size[cls]);
        G.since_gc += class_size[cls];
        G.st.allocated_bytes += class_size[cls];
        return p;
    }
    if (n > (size_t)UINT32_MAX * PS) {
        tk__fail(-ENOMEM, "tk_gc_malloc: the size is larger than the heap");
        return NULL;
    }
    size_t pages = (n + PS - 1) / PS;
    size_t pg;
    bool collected = false;
    while ((pg = alloc_pages(pages)) == SIZE_MAX)
        if (!collect_for_room(&collected)) {
            tk__fail(-ENOMEM, "tk_gc_malloc: the heap is full");
            return NULL;
        }
    G.blk[pg] = (struct blk){.kind = K_LARGE, .atomic = atomic, .pages = (uint32_t)pages};
    for (size_t i = 1; i < pages; i++)
        G.blk[pg + i] = (struct blk){.kind = K_TAIL, .pages = (uint32_t)i};
    unsigned char *p = page_addr(pg);
    if (!atomic) memset(p, 0, pages * PS);
    aset(granule_of((uintptr_t)p));
    clr(G.mark, granule_of((uintptr_t)p));
    if (G.cycle) { /* black */
        set_atomic(G.mark_next, granule_of((uintptr_t)p));
        G.black_bytes += pages * PS;
    }
    G.since_gc += pages * PS;
    G.st.allocated_bytes += pages * PS;
    return p;
}

/* Hands the shared free list of class and kind k (a block's free slots,
 * swept if need be) to the calling thread, whose allocations take from it
 * without the lock, the objects counted as allocated from now; with the
 * lock held.  False if the heap is full. */
static bool tl_refill(unsigned k)
{
    maybe_collect_locked();
    run_finalizers();
    if (!refill_or_room(k)) return false;
    size_t bytes = G.freecount[k] * class_size[k / 2];
    G.since_gc += bytes;
    G.st.allocated_bytes += bytes;
    if (G.fl_page[k]) {
        /* one page's objects: their bits a word at a time */
        size_t w0 = (size_t)(G.fl_page[k] - 1) * WORDS_PER_PAGE;
        for (unsigned w = 0; w < WORDS_PER_PAGE; w++) {
            uint64_t m = G.fl_mask[k][w];
            if (!m) continue;
            G.alloc[w0 + w] |= m;
            G.mark[w0 + w] &= ~m; /* young once handed out (unless a collection marks them) */
            if (G.cycle) __atomic_fetch_or(&G.mark_next[w0 + w], m, __ATOMIC_RELAXED); /* black */
        }
    } else {
        for (void *p = G.freelist[k]; p; p = *(void **)p) {
            size_t g = granule_of((uintptr_t)p);
            aset(g);
            clr(G.mark, g);
            if (G.cycle) set_atomic(G.mark_next, g);
        }
    }
    G.fl_page[k] = 0;
    if (G.cycle) G.black_bytes += bytes;
    self->tl[k] = G.freelist[k];
    G.freelist[k] = NULL;
    G.freecount[k] = 0;
    return true;
}

static void *alloc(size_t n, bool atomic)
{
    struct gc_thread *t = self;
    if (__builtin_expect(__atomic_load_n(&sp_flag, __ATOMIC_RELAXED) != 0, 0) && t) park(t);
    if (t && n <= SMALL_MAX) {
        /* the thread's own list, without the lock */
        unsigned cls = class_of(n ? n : 1), k = cls * 2 + atomic;
        void *p = t->tl[k];
        if (!p) {
            if (enter()) return NULL;
            bool ok = tl_refill(k);
            pthread_mutex_unlock(&G.lock);
            if (!ok) return NULL;
            p = t->tl[k];
        }
        t->tl[k] = *(void **)p;
        if (atomic)
            *(void **)p = NULL;
        else
            memset(p, 0, class_size[cls]);
        return p;
    }
    if (enter()) return NULL;
    void *p = alloc_locked(n, atomic);
    pthread_mutex_unlock(&G.lock);
    return p;
}

void *tk_gc_malloc(size_t n)
{
    return alloc(n, false);
}

void *tk_gc_malloc_atomic(size_t n)
{
    return alloc(n, true);
}

/* The live object starting exactly at p, or 0 with the reason. */
static uintptr_t exact_object(const void *p, size_t *size, bool *scan, const char *who)
{
    uintptr_t s = object_of((uintptr_t)p, size, scan);
    if (s == (uintptr_t)p && s) return s;
    uintptr_t lo = (uintptr_t)G.base;
    if ((uintptr_t)p < lo || (uintptr_t)p >= lo + (G.top << PAGE_SHIFT))
        tk__failf(-EINVAL, "%s: %p is not in the collector's heap", who, p);
    else if (s)
        tk__failf(-EINVAL, "%s: %p is inside an object (which starts at %p), not its start", who, p,
                  (void *)s);
    else
        tk__failf(-EINVAL, "%s: %p is not a live object (freed already, or never allocated)", who,
                  p);
    return 0;
}

static void drop_object_refs(uintptr_t s, size_t size)
{
    for (size_t i = 0; i < G.nfin; i++)
        if ((uintptr_t)G.fin[i].obj == s) G.fin[i--] = G.fin[--G.nfin];
    for (size_t i = 0; i < G.nweak; i++)
        if ((uintptr_t)G.weak[i].link >= s && (uintptr_t)G.weak[i].link < s + size)
            G.weak[i--] = G.weak[--G.nweak];
}

static void free_locked(uintptr_t s, size_t size)
{
    drop_object_refs(s, size);
    size_t pg = (s - (uintptr_t)G.base) >> PAGE_SHIFT;
    struct blk *b = &G.blk[pg];
    aclr(granule_of(s));
    G.st.freed_objects++;
    if (b->kind == K_LARGE) {
        free_pages(pg, b->pages);
        return;
    }
    clr(G.mark, granule_of(s)); /* not old, nor in a thread's own list */
    if (b->unswept) return;     /* its sweep finds the slot free */
    unsigned k = b->cls * 2u + b->atomic;
    if (!G.freelist[k]) {
        G.fl_page[k] = (uint32_t)pg + 1;
        memset(G.fl_mask[k], 0, sizeof G.fl_mask[k]);
    }
    if (G.fl_page[k] == pg + 1) {
        size_t g = granule_of(s) - pg * GR_PER_PAGE;
        G.fl_mask[k][g / 64] |= 1ull << (g % 64);
    } else {
        G.fl_page[k] = 0;
    }
    *(void **)s = G.freelist[k];
    G.freelist[k] = (void *)s;
    G.freecount[k]++;
}

int tk_gc_free(void *p)
{
    if (!p) return 0;
    int err = enter();
    if (err) return err;
    size_t size;
    bool scan;
    uintptr_t s = exact_object(p, &size, &scan, "tk_gc_free");
    if (s) free_locked(s, size);
    pthread_mutex_unlock(&G.lock);
    return s ? 0 : -EINVAL;
}

void *tk_gc_realloc(void *p, size_t n)
{
    if (!p) return tk_gc_malloc(n);
    if (enter()) return NULL;
    size_t size;
    bool scan;
    uintptr_t s = exact_object(p, &size, &scan, "tk_gc_realloc");
    void *q = NULL;
    if (!s) {
        /* nothing touched */
    } else if (n == 0) {
        free_locked(s, size);
    } else if (n <= size && (n > SMALL_MAX || class_of(n) == class_of(size))) {
        q = p;
    } else {
        q = alloc_locked(n, !scan);
        if (q) {
            memcpy(q, p, n < size ? n : size);
            if (scan) mark_cards((uintptr_t)q, (uintptr_t)q + (n < size ? n : size));
            /* the object may have moved pages since (a collection ran): look
             * it up again before freeing */
            uintptr_t again = object_of((uintptr_t)p, &size, &scan);
            if (again == s) free_locked(s, size);
        }
    }
    pthread_mutex_unlock(&G.lock);
    return q;
}

void tk_gc_disable(void)
{
    if (enter()) return;
    G.disabled++;
    pthread_mutex_unlock(&G.lock);
}

void tk_gc_enable(void)
{
    if (enter()) return;
    if (G.disabled > 0) G.disabled--;
    pthread_mutex_unlock(&G.lock);
}

/* ---- roots, objects, finalizers, weak links ------------------------------ */
int tk_gc_add_roots(void *lo, void *hi)
{
    if ((uintptr_t)lo > (uintptr_t)hi)
        return tk__fail(-EINVAL, "tk_gc_add_roots: the range ends before it starts");
    int err = enter();
    if (err) return err;
    err = add_seg(&G.roots, &G.nroots, &G.roots_cap, (uintptr_t)lo, (uintptr_t)hi);
    pthread_mutex_unlock(&G.lock);
    return err ? tk__fail(err, "tk_gc_add_roots: out of memory") : 0;
}

int tk_gc_remove_roots(void *lo, void *hi)
{
    int err = enter();
    if (err) return err;
    err = tk__fail(-EINVAL, "tk_gc_remove_roots: no such range was added");
    for (size_t i = 0; i < G.nroots; i++)
        if (G.roots[i].lo == (uintptr_t)lo && G.roots[i].hi == (uintptr_t)hi) {
            G.roots[i] = G.roots[--G.nroots];
            err = 0;
            tk__clear_error();
            break;
        }
    pthread_mutex_unlock(&G.lock);
    return err;
}

void *tk_gc_base(const void *p)
{
    if (enter()) return NULL;
    size_t size;
    bool scan;
    uintptr_t s = object_of((uintptr_t)p, &size, &scan);
    pthread_mutex_unlock(&G.lock);
    return (void *)s;
}

size_t tk_gc_size(const void *p)
{
    if (enter()) return 0;
    size_t size = 0;
    bool scan;
    if (!object_of((uintptr_t)p, &size, &scan)) size = 0;
    pthread_mutex_unlock(&G.lock);
    return size;
}

int tk_gc_register_finalizer(void *obj, tk_gc_finalizer fn, void *arg)
{
    int err = enter();
    if (err) return err;
    size_t size;
    bool scan;
    err = -EINVAL;
    if (exact_object(obj, &size, &scan, "tk_gc_register_finalizer")) {
        err = 0;
        size_t i = 0;
        while (i < G.nfin && G.fin[i].obj != obj) i++;
        if (!fn) {
            if (i < G.nfin) G.fin[i] = G.fin[--G.nfin];
        } else if (i < G.nfin) {
            G.fin[i] = (struct finalizer){obj, fn, arg, false};
        } else {
            if (G.nfin == G.fin_cap) {
                size_t c = G.fin_cap ? G.fin_cap * 2 : 64;
                struct finalizer *f = realloc(G.fin, c * sizeof *f);
                if (!f)
                    err = tk__fail(-ENOMEM, "tk_gc_register_finalizer: out of memory");
                else
                    G.fin = f, G.fin_cap = c;
            }
            if (!err) G.fin[G.nfin++] = (struct finalizer){obj, fn, arg, false};
        }
    }
    pthread_mutex_unlock(&G.lock);
    return err;
}

int tk_gc_register_weak(void **link, const void *obj)
{
    if (!link || ((uintptr_t)link & 7))
        return tk__fail(-EINVAL, "tk_gc_register_weak: the link must be an aligned pointer");
    int err = enter();
    if (err) return err;
    size_t size;
    bool scan;
    if (!object_of((uintptr_t)obj, &size, &scan)) {
        pthread_mutex_unlock(&G.lock);
        return tk__failf(-EINVAL, "tk_gc_register_weak: %p is not inside a live object", obj);
    }
    size_t i = 0;
    while (i < G.nweak && G.weak[i].link != link) i++;
    if (i == G.nweak) {
        if (G.nweak == G.weak_cap) {
            size_t c = G.weak_cap ? G.weak_cap * 2 : 64;
            struct weak *w = realloc(G.weak, c * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&G.lock);
                return tk__fail(-ENOMEM, "tk_gc_register_weak: out of memory");
            }
            G.weak = w;
            G.weak_cap = c;
        }
        G.nweak++;
    }
    G.weak[i] = (struct weak){link, ~(uintptr_t)obj};
    pthread_mutex_unlock(&G.lock);
    return 0;
}

int tk_gc_unregister_weak(void **link)
{
    int err = enter();
    if (err) return err;
    err = -EINVAL;
    for (size_t i = 0; i < G.nweak; i++)
        if (G.weak[i].link == link) {
            G.weak[i] = G.weak[--G.nweak];
            err = 0;
            break;
        }
    pthread_mutex_unlock(&G.lock);
    return err ? tk__fail(err, "tk_gc_unregister_weak: the link is not registered") : 0;
}

int tk_gc_register_thread(void)
{
    pthread_once(&once, setup);
    if (!G.ready) return G.init_err ? G.init_err : -ENOMEM;
    pthread_mutex_lock(&G.lock);
    int err =
        self ? tk__fail(-EINVAL, "tk_gc_register_thread: registered already") : register_locked();
    pthread_mutex_unlock(&G.lock);
    return err;
}

int tk_gc_unregister_thread(void)
{
    if (!self) return tk__fail(-EINVAL, "tk_gc_unregister_thread: not registered");
    gc_lock(self);
    pthread_setspecific(thread_key, NULL);
    unregister_locked(self);
    pthread_mutex_unlock(&G.lock);
    return 0;
}

void tk_gc_get_stats(tk_gc_stats *st)
{
    if (enter()) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = G.st;
    pthread_mutex_unlock(&G.lock);
}
