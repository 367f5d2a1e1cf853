/* src/apps/checkpoint/lazy.c - lazy restore (tk_ckpt_restore_lazy): the
 * areas are registered with a userfaultfd in MISSING mode and their pages
 * are put in place as they are needed.
 *
 * A handler thread reads the faults and answers each with the page read
 * from the chain (the newest image that holds it), its CRC checked, by
 * UFFDIO_COPY, or UFFDIO_ZEROPAGE for a zero page.  A prefetch thread puts
 * the other pages in place in page order, 64 at a time (one pread of a run
 * the image stores contiguously, then one UFFDIO_COPY), the blocks of the
 * pages faulted so far first.  Whoever comes second to a page gets EEXIST
 * from the kernel and leaves it: each page is placed, and counted, once.
 * A damaged page is never placed: the error function is called and the
 * thread that touched it stays where it is.
 *
 * When the last page is in place the areas are unregistered: they are
 * ordinary memory from then on (a page the program discards afterwards is
 * zero, as anywhere).  A page discarded before (MADV_DONTNEED) faults again
 * while its bit says resident; it is answered with a zero page, which is
 * what discarding it means.
 *
 * Where userfaultfd is missing (tk__probe) the chain is restored eagerly.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "apps/checkpoint/chain.h"
#include "apps/checkpoint/image.h"
#include "core/internal.h"
#include "os/linux/os.h"
#include "trapkit/checkpoint.h"
#include "trapkit/probe.h"

enum {
    RUN = 64,   /* pages per prefetch step */
    HINTS = 64, /* pages faulted, remembered for the prefetch thread */
};

struct tk_ckpt_lazy {
    struct tk_chain ch;
    struct tk_ckpt_area areas[TK_IMG_MAX_AREAS];
    uint64_t first[TK_IMG_MAX_AREAS + 1]; /* each area's first page index */
    size_t nareas, ps;
    uint64_t npages;
    unsigned flags;
    tk_ckpt_lazy_error_fn on_error;
    void *arg;
    int uffd, stop_fd;
    bool eager;
    pthread_t handler, prefetcher;
    bool have_handler, have_prefetcher;
    _Atomic uint64_t *res; /* bitmap: pages in place */
    _Atomic uint64_t resident, by_fault, by_prefetch, verified, data_total;
    _Atomic uint64_t first_fault_ns, done_ns, bad_page;
    uint64_t start_ns;
    _Atomic int error;
    _Atomic bool reported; /* the first error's function has returned */
    atomic_bool stop, finishing, finished, unregistered;
    pthread_mutex_t lock; /* with cond: waiting for done or an error */
    pthread_cond_t cond;
    _Atomic uint64_t hint[HINTS]; /* page index + 1, 0 none */
    _Atomic unsigned hint_head;
    struct tk_ckpt_lazy *next; /* the registry of lazy restores not done */
};

/* ---- the registry: areas under a lazy restore ---------------------------- */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tk_ckpt_lazy *reg_head;

static bool overlaps_locked(const struct tk_ckpt_area *areas, size_t nareas)
{
    for (const struct tk_ckpt_lazy *l = reg_head; l; l = l->next)
        for (size_t a = 0; a < l->nareas; a++)
            for (size_t b = 0; b < nareas; b++) {
                uintptr_t s1 = (uintptr_t)l->areas[a].addr, e1 = s1 + l->areas[a].len;
                uintptr_t s2 = (uintptr_t)areas[b].addr, e2 = s2 + areas[b].len;
                if (s1 < e2 && s2 < e1) return true;
            }
    return false;
}

bool tk__lazy_busy(const struct tk_ckpt_area *areas, size_t nareas)
{
    pthread_mutex_lock(&reg_lock);
    bool busy = overlaps_locked(areas, nareas);
    pthread_mutex_unlock(&reg_lock);
    return busy;
}

static void unlist(struct tk_ckpt_lazy *l)
{
    pthread_mutex_lock(&reg_lock);
    for (struct tk_ckpt_lazy **p = &reg_head; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

/* ---- small helpers -------------------------------------------------------- */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool is_resident(const struct tk_ckpt_lazy *l, uint64_t i)
{
    return atomic_load_explicit(&l->res[i / 64], memory_order_acquire) >> (i % 64) & 1;
}

/* The page's address, and the index one past the end of its area. */
static unsigned char *page_addr(const struct tk_ckpt_lazy *l, uint64_t i, uint64_t *area_end)
{
    size_t a = 0;
    while (i >= l->first[a + 1]) a++;
    if (area_end) *area_end = l->first[a + 1];
    return (unsigned char *)l->areas[a].addr + (i - l->first[a]) * l->ps;
}

static bool index_of(const struct tk_ckpt_lazy *l, uintptr_t addr, uint64_t *i)
{
    for (size_t a = 0; a < l->nareas; a++) {
        uintptr_t s = (uintptr_t)l->areas[a].addr;
        if (addr >= s && addr - s < l->areas[a].len) {
            *i = l->first[a] + (addr - s) / l->ps;
            return true;
        }
    }
    return false;
}

/* Where page i comes from: TK_IMG_ZERO, or TK_IMG_DATA with its image and
 * data-page number.  [signal-safe] */
static int source(const struct tk_ckpt_lazy *l, uint64_t i, int *k, uint64_t *rank)
{
    *k = tk__chain_find(&l->ch, i);
    if (*k < 0) return TK_IMG_ZERO;
    return tk__img_page(&l->ch.imgs[*k], i, rank) == TK_IMG_DATA ? TK_IMG_DATA : TK_IMG_ZERO;
}

/* Decimal of v into p; returns the end.  [signal-safe] */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n) *p++ = tmp[--n];
    return p;
}

static char *put_str(char *p, const char *s, const char *end)
{
    while (*s && p < end) *p++ = *s++;
    return p;
}

static void set_done(struct tk_ckpt_lazy *l);

/* A page that cannot be restored: the first error is kept, and the error
 * function called (the default one ends the process).  [signal-safe]
 * but for the wake-up of the waiters (a mutex and a condition variable,
 * never taken in a signal handler by this file). */
static void fail_page(struct tk_ckpt_lazy *l, int err, uint64_t page, int k)
{
    int none = 0;
    bool first = atomic_compare_exchange_strong(&l->error, &none, err);
    if (first) atomic_store(&l->bad_page, page);
    char msg[256], *p = msg, *end = msg + sizeof msg - 2;
    p = put_str(p, "trapkit: lazy restore: page ", end);
    p = put_u64(p, page);
    if (k >= 0) {
        p = put_str(p, " (image ", end);
        p = put_u64(p, l->ch.idx[k]);
        p = put_str(p, ")", end);
    }
    p = put_str(p,
                err == -EBADMSG ? " is damaged (checksum mismatch, bad compression or the file "
                                  "ends early): it is not served"
                                : " could not be read from its image: it is not served",
                end);
    *p = 0;
    if (l->on_error) {
        l->on_error(err, page, msg, l->arg);
        if (first) atomic_store(&l->reported, true);
    } else {
        *p++ = '\n';
        *p = 0;
        tk__write_stderr(msg);
        _exit(70);
    }
    pthread_mutex_lock(&l->lock);
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* Marks pages [i, i + n) in place, placed by this caller: counted once.
 * Ends the restore when it was the last. */
static void placed(struct tk_ckpt_lazy *l, uint64_t i, uint64_t n, bool by_fault, bool data)
{
    uint64_t added = 0;
    for (uint64_t j = i; j < i + n; j++) {
        uint64_t bit = 1ull << (j % 64);
        if (!(atomic_fetch_or_explicit(&l->res[j / 64], bit, memory_order_acq_rel) & bit)) added++;
    }
    if (!added) return;
    atomic_fetch_add(by_fault ? &l->by_fault : &l->by_prefetch, added);
    if (data) atomic_fetch_add(&l->verified, added);
    if (atomic_fetch_add(&l->resident, added) + added == l->npages) set_done(l);
}

/* UFFDIO_COPY of n pages from src to page i on: the pages placed here are
 * counted; those already there (EEXIST: someone else placed them) are
 * skipped.  Returns 0 or an error. */
static int copy_pages(struct tk_ckpt_lazy *l, uint64_t i, uint64_t n, const unsigned char *src,
                      bool by_fault)
{
    uint64_t off = 0;
    while (off < n) {
        struct uffdio_copy c = {.dst = (uintptr_t)page_addr(l, i + off, NULL),
                                .src = (uintptr_t)(src + off * l->ps),
                                .len = (n - off) * l->ps,
                                /* a fault's page: counted before the thread is woken */
                                .mode = by_fault ? UFFDIO_COPY_MODE_DONTWAKE : 0};
        int r = ioctl(l->uffd, UFFDIO_COPY, &c);
        if (r == 0) {
            placed(l, i + off, n - off, by_fault, true);
            return 0;
        }
        int e = errno;
        if (c.copy > 0) {
            uint64_t k = (uint64_t)c.copy / l->ps;
            placed(l, i + off, k, by_fault, true);
            off += k;
        } else if (e == EEXIST) {
            off++; /* placed by someone else */
        } else if (e == EAGAIN || e == EINTR) {
            continue; /* the mapping was changing: again */
        } else if (e == ENOENT || e == EINVAL) {
            /* unregistered (done, or being released): nothing to place */
            return atomic_load(&l->unregistered) ? 0 : -e;
        } else {
            return -e;
        }
    }
    return 0;
}

static int zero_pages(struct tk_ckpt_lazy *l, uint64_t i, uint64_t n, bool by_fault, bool count)
{
    uint64_t off = 0;
    while (off < n) {
        struct uffdio_zeropage z = {
            .range = {.start = (uintptr_t)page_addr(l, i + off, NULL), .len = (n - off) * l->ps},
            .mode = by_fault ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0};
        int r = ioctl(l->uffd, UFFDIO_ZEROPAGE, &z);
        if (r == 0) {
            if (count) placed(l, i + off, n - off, by_fault, false);
            return 0;
        }
        int e = errno;
        if (z.zeropage > 0) {
            uint64_t k = (uint64_t)z.zeropage / l->ps;
            if (count) placed(l, i + off, k, by_fault, false);
            off += k;
        } else if (e == EEXIST) {
            off++;
        } else if (e == EAGAIN || e == EINTR) {
            continue;
        } else if (e == ENOENT || e == EINVAL) {
            return atomic_load(&l->unregistered) ? 0 : -e;
        } else {
            return -e;
        }
    }
    return 0;
}

/* A thread's buffers: a run of pages and the scratch of a compressed one. */
struct bufs {
    unsigned char *run, *scratch;
    int k[RUN];
    uint64_t rank[RUN];
};

/* Reads data pages [i, i + n) (sources in b->k, b->rank) into b->run and
 * checks each CRC.  Returns the number of good pages; *err says why it
 * stopped short (-EBADMSG, or a read error) and *bad at which page. */
static uint64_t read_run(struct tk_ckpt_lazy *l, uint64_t i, uint64_t n, struct bufs *b, int *err)
{
    uint64_t s = 0;
    *err = 0;
    while (s < n) {
        const struct tk_img *img = &l->ch.imgs[b->k[s]];
        uint64_t off;
        uint32_t len, crc;
        tk__img_where(img, b->rank[s], &off, &len, &crc);
        uint64_t e = s + 1;
        if (len == l->ps) {
            /* the run the image stores contiguously, read at once */
            while (e < n && b->k[e] == b->k[s]) {
                uint64_t o2;
                uint32_t l2, c2;
                tk__img_where(img, b->rank[e], &o2, &l2, &c2);
                if (l2 != l->ps || o2 != off + (e - s) * l->ps) break;
                e++;
            }
            if (e - s > 1 &&
                tk__pread_all(img->fd, b->run + s * l->ps, (e - s) * l->ps, off) == 0) {
                for (uint64_t t = s; t < e; t++) {
                    uint64_t o3;
                    uint32_t l3, c3;
                    tk__img_where(img, b->rank[t], &o3, &l3, &c3);
                    if (tk__crc32c((uint32_t)(i + t), b->run + t * l->ps, l->ps) != c3) {
                        *err = -EBADMSG;
                        return t;
                    }
                }
                s = e;
                continue;
            }
            e = s + 1; /* one page at a time: which one fails */
        }
        int r = tk__img_read(img, i + s, b->rank[s], b->run + s * l->ps, b->scratch);
        if (r) {
            *err = r == -EINVAL ? -EBADMSG : r;
            return s;
        }
        s = e;
    }
    return n;
}

/* Puts the missing pages of [from, to) in place.  Returns 0, or the error
 * that stopped it (reported through fail_page). */
static int bring(struct tk_ckpt_lazy *l, uint64_t from, uint64_t to, bool by_fault, struct bufs *b)
{
    uint64_t i = from;
    while (i < to) {
        if (atomic_load(&l->stop) || (!by_fault && atomic_load(&l->error))) return 0;
        if (is_resident(l, i)) {
            i++;
            continue;
        }
        uint64_t area_end;
        page_addr(l, i, &area_end);
        uint64_t lim = to < area_end ? to : area_end;
        int k;
        uint64_t rank;
        int kind = source(l, i, &k, &rank);
        uint64_t j = i + 1;
        if (kind == TK_IMG_ZERO) {
            while (j < lim && j - i < RUN * 16 && !is_resident(l, j) &&
                   source(l, j, &k, &rank) == TK_IMG_ZERO)
                j++;
            int e = zero_pages(l, i, j - i, by_fault, true);
            if (e) {
                fail_page(l, e, i, -1);
                return e;
            }
        } else {
            b->k[0] = k;
            b->rank[0] = rank;
            while (j < lim && j - i < RUN && !is_resident(l, j) &&
                   source(l, j, &b->k[j - i], &b->rank[j - i]) == TK_IMG_DATA)
                j++;
            int err;
            uint64_t good = read_run(l, i, j - i, b, &err);
            int e = good ? copy_pages(l, i, good, b->run, by_fault) : 0;
            if (!e && err) {
                fail_page(l, err, i + good, b->k[good]);
                return err;
            }
            if (e) {
                fail_page(l, e, i, -1);
                return e;
            }
        }
        i = j;
    }
    return 0;
}

static int bufs_init(struct bufs *b, size_t ps)
{
    b->run = malloc(RUN * ps);
    b->scratch = malloc(ps);
    return b->run && b->scratch ? 0 : -ENOMEM;
}

static void bufs_free(struct bufs *b)
{
    free(b->run);
    free(b->scratch);
}

static void unregister_all(struct tk_ckpt_lazy *l)
{
    if (atomic_exchange(&l->unregistered, true)) return;
    for (size_t a = 0; a < l->nareas; a++)
        tk__uffd_unregister(l->uffd, l->areas[a].addr, l->areas[a].len);
}

static void set_done(struct tk_ckpt_lazy *l)
{
    if (atomic_exchange(&l->finishing, true)) return;
    unregister_all(l); /* ordinary memory from now on */
    unlist(l);
    /* the time before the flag: whoever sees the restore finished sees when */
    atomic_store(&l->done_ns, now_ns());
    pthread_mutex_lock(&l->lock);
    atomic_store(&l->finished, true);
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* ---- the threads ------------------------------------------------------------ */
struct serving {
    struct tk_ckpt_lazy *l;
    struct bufs b;
};

static void on_missing(void *arg, uintptr_t address, uint64_t flags)
{
    (void)flags;
    struct serving *sv = arg;
    struct tk_ckpt_lazy *l = sv->l;
    uint64_t i;
    uintptr_t addr = address & ~(uintptr_t)(l->ps - 1);
    if (!index_of(l, addr, &i)) return;
    if (is_resident(l, i)) {
        /* placed meanwhile (the fault was queued before), or discarded by
         * the program since: zero is what it holds */
        zero_pages(l, i, 1, true, false);
        tk__uffd_wake(l->uffd, (void *)addr, l->ps);
        return;
    }
    if (bring(l, i, i + 1, true, &sv->b) == 0) {
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&l->first_fault_ns, &zero, now_ns());
        /* the hot block, for the prefetch thread */
        unsigned h = atomic_fetch_add(&l->hint_head, 1);
        atomic_store(&l->hint[h % HINTS], i + 1);
        tk__uffd_wake(l->uffd, (void *)addr, l->ps);
    }
}

static void *handler_main(void *arg)
{
    struct serving sv = {.l = arg};
    if (bufs_init(&sv.b, sv.l->ps)) {
        bufs_free(&sv.b);
        fail_page(sv.l, -ENOMEM, 0, -1);
        return NULL;
    }
    tk__uffd_fault_loop(sv.l->uffd, sv.l->stop_fd, &sv.l->stop, on_missing, &sv);
    bufs_free(&sv.b);
    return NULL;
}

/* The next unplaced page at or after i, or npages. */
static uint64_t next_missing(const struct tk_ckpt_lazy *l, uint64_t i)
{
    while (i < l->npages) {
        uint64_t w = ~atomic_load_explicit(&l->res[i / 64], memory_order_relaxed) >> (i % 64);
        if (w) {
            i += (uint64_t)__builtin_ctzll(w);
            return i < l->npages ? i : l->npages;
        }
        i = (i / 64 + 1) * 64;
    }
    return l->npages;
}

/* Brings in every page, the blocks of recent faults first.  Returns 0 or
 * the error that stopped it. */
static int fill_all(struct tk_ckpt_lazy *l, struct bufs *b)
{
    unsigned tail = atomic_load(&l->hint_head);
    uint64_t cursor = 0;
    int idle = 0;
    while (!atomic_load(&l->stop) && !atomic_load(&l->finished)) {
        int err = atomic_load(&l->error);
        if (err) return err;
        unsigned head = atomic_load(&l->hint_head);
        if (head - tail > HINTS) tail = head - HINTS;
        if (tail != head) {
            uint64_t h = atomic_load(&l->hint[tail++ % HINTS]);
            if (h--) {
                uint64_t blk = h / RUN * RUN;
                uint64_t end = blk + 2 * RUN < l->npages ? blk + 2 * RUN : l->npages;
                if ((err = bring(l, blk, end, false, b))) return err;
            }
            continue;
        }
        uint64_t i = next_missing(l, cursor);
        if (i == l->npages) {
            if (cursor == 0) {
                /* every bit set but the count not yet complete: pages being
                 * placed by the handler thread right now */
                if (++idle > 1000) sched_yield();
                if (idle > 100000) usleep(100);
            }
            cursor = 0;
            continue;
        }
        idle = 0;
        uint64_t end = i + RUN < l->npages ? i + RUN : l->npages;
        if ((err = bring(l, i, end, false, b))) return err;
        cursor = end;
    }
    return atomic_load(&l->error);
}

static void *prefetch_main(void *arg)
{
    struct tk_ckpt_lazy *l = arg;
    /* below the program and the handler thread: a fault's page, or a
     * request, does not wait for the CPU behind the prefetch */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno == 0 && nice < 10) setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
    struct bufs b;
    if (bufs_init(&b, l->ps))
        fail_page(l, -ENOMEM, 0, -1);
    else
        fill_all(l, &b);
    bufs_free(&b);
    return NULL;
}

/* ---- the API ---------------------------------------------------------------- */

/* Whether any page of the area is populated (present or swapped): one
 * PAGEMAP_SCAN where the kernel has it (it stops at the first such page),
 * else /proc/self/pagemap read 4096 pages at a time. */
static int populated(const struct tk_ckpt_area *ar, size_t ps, bool *any)
{
    const tk_probe_info *probe = tk__probe();
    int pmfd = probe && probe->pagemap_scan ? tk__pagemap_fd() : -1;
    if (pmfd >= 0) {
        struct page_region vec[1];
        uintptr_t start = (uintptr_t)ar->addr, end = start + ar->len, walk_end = end;
        long n = tk__pagemap_scan_any(pmfd, start, end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                                      PAGE_IS_PRESENT | PAGE_IS_SWAPPED, vec, 1, &walk_end);
        if (n >= 0) {
            *any = n > 0;
            return 0;
        }
    }
    enum { CHUNK = 4096 };
    uint64_t *pm = malloc(CHUNK * sizeof *pm);
    if (!pm) return -ENOMEM;
    size_t n = ar->len / ps;
    int err = 0;
    *any = false;
    for (size_t i = 0; i < n && !err && !*any; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        err = tk__pagemap_read((uintptr_t)ar->addr + i * ps, k, pm);
        for (size_t j = 0; j < k && !err; j++)
            if (pm[j] >> 62) *any = true; /* bit 63 present, 62 swapped */
    }
    free(pm);
    return err;
}

static void release(struct tk_ckpt_lazy *l)
{
    if (l->uffd >= 0) close(l->uffd);
    if (l->stop_fd >= 0) close(l->stop_fd);
    size_t res_bytes = (l->npages + 63) / 64 * 8;
    if (l->res) munmap((void *)l->res, res_bytes ? res_bytes : 1);
    tk__chain_close(&l->ch);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
}

int tk_ckpt_restore_lazy(const tk_ckpt_lazy_config *cfg, tk_ckpt_lazy **out)
{
    static const char who[] = "tk_ckpt_restore_lazy";
    if (!cfg || !out)
        return tk__fail(-EINVAL, "tk_ckpt_restore_lazy: give a configuration and somewhere to "
                                 "put the restore");
    if (cfg->flags & ~(unsigned)TK_CKPT_LAZY_NO_PREFETCH)
        return tk__fail(-EINVAL, "tk_ckpt_restore_lazy: unknown flags");
    struct tk_ckpt_lazy *l = calloc(1, sizeof *l);
    if (!l) return tk__fail(-ENOMEM, "tk_ckpt_restore_lazy: out of memory");
    l->uffd = l->stop_fd = -1;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    l->start_ns = now_ns();
    /* every image's header and directory, before anything is touched */
    int err = tk__chain_open(who, cfg->areas, cfg->nareas, cfg->fds, cfg->nfds, &l->ch);
    if (err) {
        free(l);
        return err;
    }
    l->ps = l->ch.imgs[0].ps;
    l->nareas = cfg->nareas;
    l->flags = cfg->flags;
    l->on_error = cfg->on_error;
    l->arg = cfg->arg;
    for (size_t a = 0; a < cfg->nareas; a++) {
        l->areas[a] = cfg->areas[a];
        l->first[a + 1] = l->first[a] + cfg->areas[a].len / l->ps;
    }
    l->npages = l->first[l->nareas];
    l->data_total = tk__chain_data_pages(&l->ch, l->npages);
    for (size_t a = 0; a < l->nareas; a++) {
        bool any;
        if ((err = populated(&l->areas[a], l->ps, &any))) {
            err = tk__failf(err, "%s: reading /proc/self/pagemap failed", who);
        } else if (any) {
            err = tk__failf(-EEXIST,
                            "%s: area %zu has pages populated already; give freshly mapped "
                            "memory that was never touched",
                            who, a);
        } else if (tk_region_find(l->areas[a].addr) ||
                   tk_region_find((char *)l->areas[a].addr + l->areas[a].len - 1)) {
            err = tk__failf(-EBUSY, "%s: area %zu is a trapkit region", who, a);
        }
        if (err) {
            release(l);
            return err;
        }
    }
    pthread_mutex_lock(&reg_lock);
    if (overlaps_locked(l->areas, l->nareas)) {
        pthread_mutex_unlock(&reg_lock);
        release(l);
        return tk__failf(-EBUSY, "%s: the areas are under another lazy restore", who);
    }
    l->next = reg_head;
    reg_head = l;
    pthread_mutex_unlock(&reg_lock);

    const tk_probe_info *p = tk__probe();
    const char *why = NULL;
    if (!p || p->uffd_access == TK_UFFD_NONE) why = "userfaultfd is not available";
    if (!why) {
        l->uffd = tk__uffd_create(0);
        if (l->uffd < 0) why = "userfaultfd could not be opened";
    }
    for (size_t a = 0; a < l->nareas && !why; a++) {
        struct uffdio_register reg = {
            .range = {.start = (uintptr_t)l->areas[a].addr, .len = l->areas[a].len},
            .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(l->uffd, UFFDIO_REGISTER, &reg) < 0) {
            err = -errno;
            err = tk__failf(err == -EBUSY ? -EBUSY : err,
                            "%s: area %zu cannot take userfaultfd faults (%s): give private "
                            "anonymous memory, not a trapkit region",
                            who, a, strerror(-err));
            break;
        }
        uint64_t need = (1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_ZEROPAGE);
        if ((reg.ioctls & need) != need) why = "userfaultfd cannot place pages in these areas";
    }
    if (err) {
        for (size_t a = 0; a < l->nareas; a++)
            tk__uffd_unregister(l->uffd, l->areas[a].addr, l->areas[a].len);
        unlist(l);
        release(l);
        return err;
    }
    if (why) {
        /* eager: the chain restored here, done at once */
        if (l->uffd >= 0) {
            for (size_t a = 0; a < l->nareas; a++)
                tk__uffd_unregister(l->uffd, l->areas[a].addr, l->areas[a].len);
            close(l->uffd);
            l->uffd = -1;
        }
        unlist(l);
        err = tk_ckpt_restore(l->areas, l->nareas, cfg->fds, cfg->nfds);
        if (err) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s", tk_last_error());
            release(l);
            return tk__failf(err, "%s (%s: restored eagerly): %s", who, why, msg);
        }
        tk__chain_close(&l->ch);
        l->eager = true;
        atomic_store(&l->finishing, true);
        atomic_store(&l->finished, true);
        atomic_store(&l->unregistered, true);
        l->resident = l->by_prefetch = l->npages;
        l->verified = l->data_total;
        l->done_ns = now_ns();
        *out = l;
        return 0;
    }
    size_t words = (size_t)((l->npages + 63) / 64);
    l->res = mmap(NULL, words * 8 ?: 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fl = fcntl(l->uffd, F_GETFL);
    if (l->res == MAP_FAILED || l->stop_fd < 0 || fl < 0 ||
        fcntl(l->uffd, F_SETFL, fl | O_NONBLOCK) < 0) {
        err = l->res == MAP_FAILED ? -ENOMEM : -errno;
        if (l->res == MAP_FAILED) l->res = NULL;
        unregister_all(l);
        unlist(l);
        release(l);
        return tk__failf(err, "%s: setting up failed: %s", who, strerror(-err));
    }
    if (l->npages == 0) set_done(l);
    if ((err = tk__thread_start(&l->handler, handler_main, l)) == 0) l->have_handler = true;
    if (!err && !(l->flags & TK_CKPT_LAZY_NO_PREFETCH)) {
        if ((err = tk__thread_start(&l->prefetcher, prefetch_main, l)) == 0)
            l->have_prefetcher = true;
    }
    if (err) {
        atomic_store(&l->stop, true);
        uint64_t one = 1;
        if (write(l->stop_fd, &one, sizeof one) < 0) { /* the flag stops it as well */
        }
        if (l->have_handler) pthread_join(l->handler, NULL);
        unregister_all(l);
        unlist(l);
        release(l);
        return tk__failf(err, "%s: starting a thread failed: %s", who, strerror(-err));
    }
    *out = l;
    return 0;
}

int tk_ckpt_lazy_poll(tk_ckpt_lazy *l, tk_ckpt_lazy_stats *st)
{
    if (!l) return tk__fail(-EINVAL, "tk_ckpt_lazy_poll: no lazy restore");
    bool done = atomic_load(&l->finished);
    int err = atomic_load(&l->error);
    if (st) {
        memset(st, 0, sizeof *st);
        st->pages_total = l->npages;
        st->pages_resident = atomic_load(&l->resident);
        st->pages_by_fault = atomic_load(&l->by_fault);
        st->pages_by_prefetch = atomic_load(&l->by_prefetch);
        st->pages_verified = atomic_load(&l->verified);
        st->start_ns = l->start_ns;
        st->first_fault_ns = atomic_load(&l->first_fault_ns);
        st->done_ns = done ? atomic_load(&l->done_ns) : 0;
        st->done = done;
        st->error = err;
        st->bad_page = err == -EBADMSG ? atomic_load(&l->bad_page) : 0;
        st->eager = l->eager;
    }
    return err ? err : done ? 0 : 1;
}

int tk_ckpt_lazy_wait(tk_ckpt_lazy *l, tk_ckpt_lazy_stats *st)
{
    if (!l) return tk__fail(-EINVAL, "tk_ckpt_lazy_wait: no lazy restore");
    if (!atomic_load(&l->finished) && !atomic_load(&l->error) &&
        (l->flags & TK_CKPT_LAZY_NO_PREFETCH)) {
        /* no prefetch thread: the missing pages are brought in here */
        struct bufs b;
        if (bufs_init(&b, l->ps) == 0)
            fill_all(l, &b);
        else
            fail_page(l, -ENOMEM, 0, -1);
        bufs_free(&b);
    }
    pthread_mutex_lock(&l->lock);
    while (!atomic_load(&l->finished) && !atomic_load(&l->error))
        pthread_cond_wait(&l->cond, &l->lock);
    if (!atomic_load(&l->finished)) {
        /* an error: its function has been called; wait for it to return, so
         * that what it did is seen by the caller (one that never returns, as
         * it ended its thread or left by longjmp, is waited for a second) */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        while (!atomic_load(&l->reported) &&
               pthread_cond_timedwait(&l->cond, &l->lock, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&l->lock);
    return tk_ckpt_lazy_poll(l, st);
}

int tk_ckpt_lazy_destroy(tk_ckpt_lazy *l)
{
    if (!l) return 0;
    int err = tk_ckpt_lazy_wait(l, NULL);
    atomic_store(&l->stop, true);
    if (l->stop_fd >= 0) {
        uint64_t one = 1;
        if (write(l->stop_fd, &one, sizeof one) < 0) { /* the flag stops it as well */
        }
    }
    if (l->have_prefetcher) pthread_join(l->prefetcher, NULL);
    if (l->have_handler) pthread_join(l->handler, NULL);
    l->have_handler = false;
    if (!atomic_load(&l->unregistered) && l->res) {
        /* stopped by an error: the pages never placed get no access, so no
         * thread goes on with a page of the damaged chain as zero */
        for (uint64_t i = next_missing(l, 0); i < l->npages;) {
            uint64_t area_end, j = i + 1;
            unsigned char *at = page_addr(l, i, &area_end);
            while (j < area_end && !is_resident(l, j)) j++;
            if (mprotect(at, (j - i) * l->ps, PROT_NONE) < 0) {
                for (size_t a = 0; a < l->nareas; a++)
                    mprotect(l->areas[a].addr, l->areas[a].len, PROT_NONE);
                break;
            }
            i = next_missing(l, j);
        }
    }
    unregister_all(l); /* wakes the threads that wait for a page */
    unlist(l);
    release(l);
    return err;
}
