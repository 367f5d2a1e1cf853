/* src/apps/dsm/dsm.c - shared virtual memory on MPI (trapkit/dsm.h).
 *
 * Each allocation is one trapkit region (MAP2: the service thread writes
 * pages in through a second view, whatever their protection) at the same
 * address on every rank.  Per page, every rank keeps its access (NONE,
 * READ, RW: the page's protection) and what it has asked for; the page's
 * home rank (block or cyclic placement) is its manager (ivy) or keeps its
 * master copy (rc).
 *
 * Threads.  A fault handler (a signal handler, or trapkit's uffd thread)
 * posts a request on a lock-free stack and waits on a futex; the rank's
 * service thread does everything else: it changes pages' states and
 * protections (but for an rc twin, made in the faulting thread under
 * state_lk), makes diffs, runs barriers (on a communicator of their own)
 * and lock requests for the application threads, which sleep meanwhile,
 * and talks MPI (the handler cannot: MPI is not async-signal-safe).
 *
 * Messages (two-sided, tag TAG_SVC on the service communicator; a header
 * and for some a payload):
 *   ivy: REQ (requester -> manager), FWD (manager -> owner), INV (manager
 *        -> copy holder), INV_ACK (-> manager), PAGE (owner or manager ->
 *        requester), DONE (requester -> manager, after installing: the
 *        manager serves one request per page at a time, queueing the rest)
 *   rc:  GET (-> home; a count of pages read ahead), PAGE (home ->
 *        requester, one a page), DIFF (-> home), DIFF_ACK
 *   locks: LOCK (-> lock manager, with the waiter's address), GRANT (the
 *        address echoed), UNLOCK
 * Messages between two ranks arrive in the order sent (MPI's
 * non-overtaking rule), which the ivy protocol relies on: a rank sends
 * DONE only after the PAGE, so no INV of a later request overtakes it.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <trapkit/dsm.h>
#include <trapkit/error.h>

#include "core/internal.h"
#include "core/region_impl.h" /* tk__defer_signals */
#include "os/linux/os.h"

#define MAX_ALLOCS 64
#define MAX_RANKS 64
#define TAG_SVC 1

enum { S_NONE = 0, S_READ = 1, S_RW = 2 };

enum mtype {
    M_REQ = 1,
    M_FWD,
    M_INV,
    M_INV_ACK,
    M_PAGE,
    M_DONE,
    M_GET,
    M_DIFF,
    M_DIFF_ACK,
    M_LOCK,
    M_UNLOCK,
    M_GRANT,
};

struct hdr {
    uint8_t type, mode, data;
    uint8_t pad;   /* GET: pages asked for (the first and those after it) */
    int32_t rank;  /* the requester (REQ, FWD, PAGE's sender otherwise) */
    int32_t aid;   /* allocation, or lock id */
    int32_t epoch; /* rc GET, PAGE: the requester's acquires so far */
    uint64_t page;
    uint64_t len; /* payload bytes */
};

/* A request posted by a fault handler or an application thread. */
enum wkind { W_FAULT, W_RELEASE, W_FREE, W_BARRIER, W_LOCK, W_UNLOCK };
struct waiter {
    enum wkind kind;
    int aid;
    size_t page;
    int mode;
    atomic_int done;
    int err;
    struct waiter *next;  /* on the posted stack */
    struct waiter *pnext; /* on its page's list, or the release list */
};

/* ivy: a request queued at the manager */
struct mreq {
    int rank, mode;
    uint64_t cookie; /* locks: the asking waiter, echoed in the grant */
    struct mreq *next;
};

struct alloc {
    int id;
    char *base, *view, *twin;
    size_t len, npages;
    tk_region *region;
    _Atomic uint8_t *state; /* S_*: this rank's access */
    uint8_t *want;          /* what this rank asked for and waits for */
    struct waiter **waiting;
    uint32_t *cached; /* rc: pages holding a copy (not home) */
    uint32_t *tmp;
    size_t ncached;
    uint32_t *dirty; /* rc: pages with a twin */
    size_t ndirty;
    /* ivy, the pages this rank manages */
    int16_t *owner;
    uint64_t *copyset;
    uint8_t *busy;
    struct mreq **cur, **qhead, **qtail;
    int16_t *acks;
};

struct lockst {
    int holder;                 /* -1 free */
    struct mreq *qhead, *qtail; /* the ranks waiting, with their waiters' addresses */
};

static struct {
    bool up;
    MPI_Comm svc, app;
    int rank, size;
    enum tk_dsm_protocol proto;
    enum tk_dsm_placement place;
    size_t ps;
    enum tk_mech mech;
    long spin_ns, timeout_s, wait_spin_ns, poll_ns;
    int rt;
    pid_t pid;        /* the rank's process (not a child of fork()) */
    long outstanding; /* service thread: requests for this rank's waiters in flight */
    int probes;       /* MPI_Iprobe calls a poll makes before it takes "nothing" */
    int prefetch;     /* rc: pages a read fault asks for (the faulting one and those after it) */
    int32_t epoch;    /* rc: acquires so far (read-ahead pages older than the last are dropped) */
    pthread_t thread;
    atomic_int stop;
    _Atomic(struct waiter *) posted;
    atomic_int bell, sleeping;
    atomic_long busy_until; /* the service thread polls every TRAPKIT_DSM_POLL_US until then */
    struct alloc *allocs[MAX_ALLOCS];
    pthread_mutex_t alloc_lk;
    /* service thread only */
    char *rbuf, *sbuf;
    size_t bufsz;
    struct waiter *releases;     /* rc: waiting for the diffs' acks */
    struct waiter *barrier;      /* a barrier under way: its diffs acknowledged first (rc) */
    MPI_Request barrier_req;     /* (MPI_REQUEST_NULL until the diffs are in) */
    struct waiter *lock_waiters; /* waiting for a grant */
    long acks_pending;
    struct lockst *locks; /* the locks this rank manages, by id / size */
    int next_aid;         /* allocations are numbered in the order made (the same on every rank) */
    /* counters */
    atomic_ullong read_faults, write_faults, pages_in, pages_out, invalidations, twins, diffs,
        diff_bytes, msent, mrecv;
} D = {.alloc_lk = PTHREAD_MUTEX_INITIALIZER};

/* rc: a write fault to a copy makes its twin in the faulting thread, under
 * this lock, which the service thread holds around every rc change of a
 * page's state (so neither sees the other's half done). */
static atomic_flag state_lk = ATOMIC_FLAG_INIT;
/* [signal-safe] */
static void st_lock(void)
{
    while (atomic_flag_test_and_set_explicit(&state_lk, memory_order_acquire)) sched_yield();
}
static void st_unlock(void)
{
    atomic_flag_clear_explicit(&state_lk, memory_order_release);
}

static __thread uint64_t held_locks[TK_DSM_LOCKS / 64];

/* FUTEX_WAIT with a relative timeout; errno kept. [signal-safe] */
static void futex_wait_for(atomic_int *word, int val, const struct timespec *ts)
{
    int e = errno;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, ts, NULL, 0);
    errno = e;
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Not from a signal handler: the service thread and application threads. */
static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "trapkit dsm: rank %d: %s; aborting\n", D.rank, msg);
    fflush(stderr);
    MPI_Abort(D.svc, 70);
    abort();
}

static int home_of(const struct alloc *a, size_t p)
{
    if (D.place == TK_DSM_PLACE_CYCLIC) return (int)(p % (size_t)D.size);
    return (int)((p * (size_t)D.size) / a->npages);
}

/* The first page rank r is home of (block placement), for ranges. */
static size_t block_start(const struct alloc *a, int r)
{
    return ((size_t)r * a->npages + (size_t)D.size - 1) / (size_t)D.size;
}

/* ---- sending (service thread) ---- */

struct sendslot {
    MPI_Request req;
    char *buf;
};
static struct sendslot *slots;
static int nslots, slot_cap;

static void progress_sends(void)
{
    for (int i = 0; i < nslots;) {
        int flag = 0;
        MPI_Test(&slots[i].req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            char *b = slots[i].buf;
            slots[i] = slots[--nslots];
            slots[nslots].buf = b; /* keep the buffer for reuse */
        } else {
            i++;
        }
    }
}

/* Messages a rank sends itself (an ivy manager that is also the owner or
 * the requester, a rc home diffing to itself): handled from this queue,
 * in order, without MPI. */
struct selfmsg {
    struct selfmsg *next;
    struct hdr h;
    char payload[];
};
static struct selfmsg *self_head, *self_tail;

static void send_msg(int dest, const struct hdr *h, const void *payload)
{
    if (dest == D.rank) {
        struct selfmsg *m = malloc(sizeof *m + h->len);
        if (!m) fatal("out of memory for a message");
        m->next = NULL;
        m->h = *h;
        if (h->len) memcpy(m->payload, payload, h->len);
        if (self_tail)
            self_tail->next = m;
        else
            self_head = m;
        self_tail = m;
        return;
    }
    if (nslots == slot_cap) {
        progress_sends();
        if (nslots == slot_cap) {
            int ncap = slot_cap ? slot_cap * 2 : 64;
            struct sendslot *n = realloc(slots, sizeof *n * (size_t)ncap);
            if (!n) fatal("out of memory for send buffers");
            for (int i = slot_cap; i < ncap; i++) n[i].buf = NULL;
            slots = n;
            slot_cap = ncap;
        }
    }
    struct sendslot *s = &slots[nslots];
    if (!s->buf && !(s->buf = malloc(D.bufsz))) fatal("out of memory for send buffers");
    memcpy(s->buf, h, sizeof *h);
    if (h->len) memcpy(s->buf + sizeof *h, payload, h->len);
    int rc = MPI_Isend(s->buf, (int)(sizeof *h + h->len), MPI_BYTE, dest, TAG_SVC, D.svc, &s->req);
    if (rc != MPI_SUCCESS) fatal("MPI_Isend to rank %d failed (%d)", dest, rc);
    nslots++;
    atomic_fetch_add_explicit(&D.msent, 1, memory_order_relaxed);
}

static void send_hdr(int dest, int type, int aid, size_t page, int mode, int rank)
{
    struct hdr h = {.type = (uint8_t)type,
                    .mode = (uint8_t)mode,
                    .rank = rank,
                    .aid = aid,
                    .page = page,
                    .len = 0};
    send_msg(dest, &h, NULL);
}

/* ---- waiters ---- */

static bool svc_rt, svc_cur_rt; /* service thread: may be real-time; is now */
static void svc_realtime(void);

/* [service thread] */
static void complete(struct waiter *w, int err)
{
    /* Real-time again before the waiter runs: it may run on this CPU, and
     * a thread of the program, once running, would keep an ordinary
     * service thread off it for its whole time slice - the other ranks'
     * requests unanswered meanwhile. */
    if (svc_rt && !svc_cur_rt) svc_realtime();
    w->err = err;
    atomic_store(&w->done, 1);
    tk__futex_wake(&w->done, 1);
}

/* [signal-safe] */
static void post(struct waiter *w)
{
    struct waiter *old = atomic_load(&D.posted);
    do {
        w->next = old;
    } while (!atomic_compare_exchange_weak(&D.posted, &old, w));
    if (atomic_load(&D.sleeping)) {
        atomic_fetch_add(&D.bell, 1);
        tk__futex_wake(&D.bell, 1);
    }
}

/* [signal-safe] */
static void put_num(char **p, long v)
{
    char t[24];
    int n = 0;
    if (v < 0) {
        *(*p)++ = '-';
        v = -v;
    }
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *(*p)++ = t[--n];
}
static void put_str(char **p, const char *s)
{
    while (*s) *(*p)++ = *s++;
}

/* [signal-safe] Waits for the service thread; a fault that is not answered
 * in the timeout means a rank died or hangs: say so and abort. */
static void wait_for(struct waiter *w)
{
    long start = now_ns(), deadline = start + D.timeout_s * 1000000000L;
    /* most answers come within a few tens of microseconds: poll for them
     * (yielding, so the service thread runs) before sleeping */
    while (!atomic_load(&w->done) && now_ns() - start < D.wait_spin_ns) sched_yield();
    while (!atomic_load(&w->done)) {
        long left = deadline - now_ns();
        if (left <= 0) {
            char msg[256], *p = msg;
            put_str(&p, "trapkit dsm: rank ");
            put_num(&p, D.rank);
            if (w->kind == W_FAULT) {
                put_str(&p, ": page ");
                put_num(&p, (long)w->page);
                put_str(&p, " of allocation ");
                put_num(&p, w->aid);
                put_str(&p, " (home rank ");
                put_num(&p, home_of(D.allocs[w->aid % MAX_ALLOCS], w->page));
                put_str(&p, ")");
            } else {
                put_str(&p, ": a request to the service thread");
            }
            put_str(&p, " not answered in ");
            put_num(&p, D.timeout_s);
            put_str(&p, " s (TRAPKIT_DSM_TIMEOUT): a rank died or stopped; aborting\n");
            (void)!write(2, msg, (size_t)(p - msg));
            abort();
        }
        struct timespec ts = {.tv_sec = left / 1000000000L, .tv_nsec = left % 1000000000L};
        futex_wait_for(&w->done, 0, &ts);
    }
}

/* ---- page state changes (service thread) ---- */

static void protect(struct alloc *a, size_t p, size_t n, int st)
{
    static const int prot[] = {TK_PROT_NONE, TK_PROT_READ, TK_PROT_RW};
    int rc = tk_protect(a->region, a->base + p * D.ps, n * D.ps, prot[st]);
    if (rc)
        fatal("protecting pages %zu-%zu of allocation %d: %s", p, p + n - 1, a->id,
              tk_last_error());
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&a->state[p + i], (uint8_t)st, memory_order_release);
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Sets pages[0..n) to st, one call per run of consecutive pages. */
static void protect_list(struct alloc *a, uint32_t *pages, size_t n, int st)
{
    qsort(pages, n, sizeof *pages, cmp_u32);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && pages[j] == pages[j - 1] + 1) j++;
        protect(a, pages[i], j - i, st);
        i = j;
    }
}

/* Wakes the page's waiters that its state now satisfies; returns the
 * strongest access still wanted (S_NONE if none). */
static int wake_page(struct alloc *a, size_t p)
{
    int st = atomic_load(&a->state[p]), need = S_NONE;
    struct waiter **pp = &a->waiting[p];
    while (*pp) {
        struct waiter *w = *pp;
        if (w->mode <= st) {
            *pp = w->pnext;
            complete(w, 0);
        } else {
            if (w->mode > need) need = w->mode;
            pp = &w->pnext;
        }
    }
    return need;
}

/* rc: page p (its contents in the view) gets a twin and opens for writing. */
static void rc_open(struct alloc *a, size_t p)
{
    memcpy(a->twin + p * D.ps, a->view + p * D.ps, D.ps);
    a->dirty[a->ndirty++] = (uint32_t)p;
    protect(a, p, 1, S_RW);
    atomic_fetch_add_explicit(&D.twins, 1, memory_order_relaxed);
}

/* A fault wants page p: satisfy it now, or ask for the page. */
static void on_posted_fault(struct waiter *w)
{
    struct alloc *a = D.allocs[w->aid % MAX_ALLOCS];
    size_t p = w->page;
    int st = atomic_load(&a->state[p]);
    if (w->mode <= st) {
        complete(w, 0);
        return;
    }
    if (D.proto == TK_DSM_RC && st == S_READ && !a->want[p]) { /* a write to a copy */
        rc_open(a, p);
        complete(w, 0);
        return;
    }
    w->pnext = a->waiting[p];
    a->waiting[p] = w;
    if (a->want[p] >= w->mode) return; /* asked already */
    if (D.proto == TK_DSM_RC) {
        if (a->want[p]) return; /* the copy is on its way */
        a->want[p] = S_READ;
        D.outstanding++;
        /* read ahead: the next pages of the same home this rank has no
         * copy of and has not asked for come with it */
        int home = home_of(a, p), n = 1;
        while (n < D.prefetch && p + (size_t)n < a->npages && home_of(a, p + (size_t)n) == home &&
               atomic_load(&a->state[p + (size_t)n]) == S_NONE && !a->want[p + (size_t)n] &&
               !a->waiting[p + (size_t)n])
            n++;
        struct hdr h = {.type = M_GET,
                        .mode = S_READ,
                        .pad = (uint8_t)n,
                        .rank = D.rank,
                        .aid = a->id,
                        .epoch = D.epoch,
                        .page = p};
        send_msg(home, &h, NULL);
    } else {
        if (a->want[p]) return; /* a read is on its way: ask for more after it */
        a->want[p] = (uint8_t)w->mode;
        D.outstanding++;
        send_hdr(home_of(a, p), M_REQ, a->id, p, w->mode, D.rank);
    }
}

/* ---- rc: release and acquire ---- */

static size_t diff_encode(const uint8_t *cur, const uint8_t *twin, size_t n, uint8_t *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t x, y;
            memcpy(&x, cur + i, 8);
            memcpy(&y, twin + i, 8);
            if (x != y) break;
            i += 8;
        }
        while (i < n && cur[i] == twin[i]) i++;
        if (i >= n) break;
        size_t s = i;
        while (i < n && cur[i] != twin[i]) i++;
        uint32_t off = (uint32_t)s, len = (uint32_t)(i - s);
        memcpy(out + o, &off, 4);
        memcpy(out + o + 4, &len, 4);
        memcpy(out + o + 8, cur + s, len);
        o += 8 + len;
    }
    return o;
}

/* Diffs every written page to its home and reopens nothing: the pages
 * become read-only copies. */
static void rc_release_all(void)
{
    for (int id = 0; id < MAX_ALLOCS; id++) {
        struct alloc *a = D.allocs[id];
        if (!a || !a->ndirty) continue;
        protect_list(a, a->dirty, a->ndirty, S_READ);
        for (size_t i = 0; i < a->ndirty; i++) {
            size_t p = a->dirty[i];
            uint8_t *out = (uint8_t *)D.sbuf;
            size_t n = diff_encode((uint8_t *)a->view + p * D.ps, (uint8_t *)a->twin + p * D.ps,
                                   D.ps, out);
            if (!n) continue;
            struct hdr h = {.type = M_DIFF, .rank = D.rank, .aid = a->id, .page = p, .len = n};
            send_msg(home_of(a, p), &h, out);
            D.acks_pending++;
            atomic_fetch_add_explicit(&D.diffs, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&D.diff_bytes, n, memory_order_relaxed);
        }
        a->ndirty = 0;
    }
}

static void rc_invalidate_all(void)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = D.allocs[i];
        if (!a || !a->ncached) continue;
        /* the copies go; a page with a request in flight (another thread's
         * fault) stays listed, to be dropped at the next acquire */
        size_t ninv = 0, nkeep = 0;
        for (size_t k = 0; k < a->ncached; k++) {
            uint32_t p = a->cached[k];
            if (a->want[p] || a->waiting[p])
                a->tmp[nkeep++] = p;
            else if (atomic_load(&a->state[p]) != S_NONE)
                a->cached[ninv++] = p;
        }
        protect_list(a, a->cached, ninv, S_NONE);
        D.epoch++;
        atomic_fetch_add_explicit(&D.invalidations, ninv, memory_order_relaxed);
        memcpy(a->cached, a->tmp, nkeep * sizeof *a->tmp);
        a->ncached = nkeep;
    }
}

/* rc: an acquire - the rank's writes released (their diffs sent), its
 * copies dropped.  (Done when the diffs are acknowledged.) */
static void rc_acquire(void)
{
    st_lock();
    rc_release_all();
    rc_invalidate_all();
    st_unlock();
}

static void release_done_check(void)
{
    if (D.acks_pending) return;
    while (D.releases) {
        struct waiter *w = D.releases;
        D.releases = w->pnext;
        complete(w, 0);
    }
}

/* ---- handling a message (service thread) ---- */

/* The allocation a message is about; NULL for the last messages of a
 * freed one (an ivy DONE or INV_ACK can arrive after the barrier of
 * tk_dsm_free: nothing waits for them). */
static struct alloc *alloc_of(const struct hdr *h)
{
    struct alloc *a = h->aid >= 0 ? D.allocs[h->aid % MAX_ALLOCS] : NULL;
    if (!a || a->id != h->aid) {
        if ((h->type == M_DONE || h->type == M_INV_ACK) && h->aid >= 0 && h->aid < D.next_aid)
            return NULL;
        fatal("a message (type %d) for allocation %d, which this rank does not have: the ranks "
              "disagree on their allocations",
              h->type, h->aid);
    }
    if (h->page >= a->npages)
        fatal("a message for page %llu, past the allocation's end", (unsigned long long)h->page);
    return a;
}

static void ivy_start(struct alloc *a, size_t p);

static void ivy_proceed_write(struct alloc *a, size_t p)
{
    struct mreq *r = a->cur[p];
    if (a->owner[p] == r->rank)
        send_hdr(r->rank, M_PAGE, a->id, p, S_RW, D.rank); /* no data: it has the page */
    else
        send_hdr(a->owner[p], M_FWD, a->id, p, S_RW, r->rank);
}

static void ivy_start(struct alloc *a, size_t p)
{
    struct mreq *r = a->cur[p];
    a->busy[p] = 1;
    if (r->mode == S_READ) {
        if (a->owner[p] == r->rank)
            send_hdr(r->rank, M_PAGE, a->id, p, S_READ, D.rank);
        else
            send_hdr(a->owner[p], M_FWD, a->id, p, S_READ, r->rank);
        return;
    }
    uint64_t inv = a->copyset[p] & ~(1ull << r->rank) & ~(1ull << a->owner[p]);
    a->acks[p] = (int16_t)__builtin_popcountll(inv);
    for (int k = 0; k < D.size; k++)
        if (inv & (1ull << k)) send_hdr(k, M_INV, a->id, p, S_NONE, D.rank);
    if (!a->acks[p]) ivy_proceed_write(a, p);
}

static void ivy_next(struct alloc *a, size_t p)
{
    free(a->cur[p]);
    a->cur[p] = NULL;
    a->busy[p] = 0;
    struct mreq *r = a->qhead[p];
    if (!r) return;
    a->qhead[p] = r->next;
    if (!a->qhead[p]) a->qtail[p] = NULL;
    a->cur[p] = r;
    ivy_start(a, p);
}

/* The page arrived (or the right to it): install it, wake the waiters. */
static void on_page(struct alloc *a, size_t p, const struct hdr *h, const char *payload)
{
    if (h->data) {
        if (h->len != D.ps)
            fatal("a page of %llu bytes, not %zu", (unsigned long long)h->len, D.ps);
        atomic_fetch_add_explicit(&D.pages_in, 1, memory_order_relaxed);
    }
    int st = atomic_load(&a->state[p]);
    if (D.proto == TK_DSM_RC && !a->want[p]) {
        /* read ahead, not asked for by a fault: kept only if this rank has
         * no copy (a twinned page must not be overwritten) and has not
         * acquired since it asked (the page may be older than the acquire) */
        if (st != S_NONE || a->waiting[p] || h->epoch != D.epoch) return;
        memcpy(a->view + p * D.ps, payload, D.ps);
        a->cached[a->ncached++] = (uint32_t)p;
        protect(a, p, 1, S_READ);
        return;
    }
    if (h->data) memcpy(a->view + p * D.ps, payload, D.ps);
    if (a->want[p]) D.outstanding--;
    a->want[p] = 0;
    if (D.proto == TK_DSM_RC) {
        bool writer = false;
        for (struct waiter *w = a->waiting[p]; w; w = w->pnext) writer |= w->mode == S_RW;
        if (st == S_NONE) a->cached[a->ncached++] = (uint32_t)p;
        if (writer)
            rc_open(a, p);
        else
            protect(a, p, 1, S_READ);
        wake_page(a, p);
        return;
    }
    if (h->mode > st) protect(a, p, 1, h->mode);
    send_hdr(home_of(a, p), M_DONE, a->id, p, h->mode, D.rank);
    int need = wake_page(a, p);
    if (need > atomic_load(&a->state[p])) {
        a->want[p] = (uint8_t)need;
        D.outstanding++;
        send_hdr(home_of(a, p), M_REQ, a->id, p, need, D.rank);
    }
}

static void lock_grant(int id, int rank, uint64_t cookie)
{
    struct hdr h = {.type = M_GRANT, .aid = id, .rank = D.rank, .page = cookie};
    send_msg(rank, &h, NULL);
}

static void rc_acquire(void);

/* w has acquired (a lock granted, a barrier passed): under rc its copies go
 * and it goes on once its diffs are acknowledged. */
static void acquired(struct waiter *w)
{
    if (D.proto != TK_DSM_RC) {
        complete(w, 0);
        return;
    }
    rc_acquire();
    w->pnext = D.releases;
    D.releases = w;
    release_done_check();
}

/* A grant came: the waiter that asked (its address, echoed) has the lock. */
static void on_grant(const struct hdr *h)
{
    struct waiter **pp = &D.lock_waiters;
    while (*pp && (uint64_t)(uintptr_t)*pp != h->page) pp = &(*pp)->pnext;
    if (!*pp) fatal("a grant of lock %d nobody here asked for", h->aid);
    struct waiter *w = *pp;
    *pp = w->pnext;
    acquired(w);
}

/* Page p's contents to rank dest, which gets access mode (epoch: rc's, the
 * asker's). */
static void send_page(struct alloc *a, size_t p, int dest, int mode, int32_t epoch)
{
    struct hdr o = {.type = M_PAGE,
                    .mode = (uint8_t)mode,
                    .data = 1,
                    .rank = D.rank,
                    .aid = a->id,
                    .epoch = epoch,
                    .page = p,
                    .len = D.ps};
    send_msg(dest, &o, a->view + p * D.ps);
    atomic_fetch_add_explicit(&D.pages_out, 1, memory_order_relaxed);
}

static void handle(const struct hdr *h, const char *payload, int src)
{
    if (h->type == M_LOCK || h->type == M_UNLOCK) {
        if (h->aid < 0 || h->aid >= TK_DSM_LOCKS || h->aid % D.size != D.rank)
            fatal("a lock message for lock %d, not managed here", h->aid);
        struct lockst *l = &D.locks[h->aid / D.size];
        if (h->type == M_LOCK) {
            if (l->holder < 0) {
                l->holder = h->rank;
                lock_grant(h->aid, h->rank, h->page);
            } else {
                struct mreq *r = malloc(sizeof *r);
                if (!r) fatal("out of memory");
                *r = (struct mreq){.rank = h->rank, .cookie = h->page};
                if (l->qtail)
                    l->qtail->next = r;
                else
                    l->qhead = r;
                l->qtail = r;
            }
        } else {
            struct mreq *r = l->qhead;
            if (!r) {
                l->holder = -1;
                return;
            }
            l->qhead = r->next;
            if (!l->qhead) l->qtail = NULL;
            l->holder = r->rank;
            lock_grant(h->aid, r->rank, r->cookie);
            free(r);
        }
        return;
    }
    if (h->type == M_GRANT) {
        on_grant(h);
        return;
    }
    if (h->type == M_DIFF_ACK) {
        D.acks_pending--;
        release_done_check();
        return;
    }
    struct alloc *a = alloc_of(h);
    if (!a) return;
    size_t p = h->page;
    switch (h->type) {
    case M_REQ: { /* ivy, at the manager */
        struct mreq *r = malloc(sizeof *r);
        if (!r) fatal("out of memory");
        *r = (struct mreq){.rank = h->rank, .mode = h->mode};
        if (a->busy[p]) {
            if (a->qtail[p])
                a->qtail[p]->next = r;
            else
                a->qhead[p] = r;
            a->qtail[p] = r;
        } else {
            a->cur[p] = r;
            ivy_start(a, p);
        }
        break;
    }
    case M_FWD: { /* ivy, at the owner: send the page, keep a copy or none */
        int st = atomic_load(&a->state[p]);
        if (st == S_NONE)
            fatal("asked for page %zu of allocation %d, which it does not own", p, a->id);
        int keep = h->mode == S_READ ? S_READ : S_NONE;
        if (st != keep) protect(a, p, 1, keep);
        if (keep == S_NONE) atomic_fetch_add_explicit(&D.invalidations, 1, memory_order_relaxed);
        send_page(a, p, h->rank, h->mode, 0);
        break;
    }
    case M_INV: /* ivy, at a copy holder */
        if (atomic_load(&a->state[p]) != S_NONE) {
            protect(a, p, 1, S_NONE);
            atomic_fetch_add_explicit(&D.invalidations, 1, memory_order_relaxed);
        }
        send_hdr(src, M_INV_ACK, a->id, p, S_NONE, D.rank);
        break;
    case M_INV_ACK:
        if (--a->acks[p] == 0) ivy_proceed_write(a, p);
        break;
    case M_PAGE:
        if (D.proto == TK_DSM_RC) st_lock();
        on_page(a, p, h, payload);
        if (D.proto == TK_DSM_RC) st_unlock();
        break;
    case M_DONE: { /* ivy, at the manager */
        struct mreq *r = a->cur[p];
        if (!r || r->rank != h->rank)
            fatal("an unexpected DONE for page %zu from rank %d", p, h->rank);
        if (r->mode == S_READ) {
            if (a->owner[p] != r->rank) a->copyset[p] |= 1ull << r->rank;
        } else {
            a->owner[p] = (int16_t)r->rank;
            a->copyset[p] = 0;
        }
        ivy_next(a, p);
        break;
    }
    case M_GET: /* rc, at the home: the page, and those read ahead */
        for (size_t q = p; q < p + (h->pad ? h->pad : 1) && q < a->npages; q++) {
            if (home_of(a, q) != D.rank) break;
            send_page(a, q, h->rank, S_READ, h->epoch);
        }
        break;
    case M_DIFF: { /* rc, at the home: merge the bytes that changed */
        char *dst = a->view + p * D.ps;
        for (size_t o = 0; o + 8 <= h->len;) {
            uint32_t off, len;
            memcpy(&off, payload + o, 4);
            memcpy(&len, payload + o + 4, 4);
            if ((size_t)off + len > D.ps || o + 8 + len > h->len)
                fatal("a damaged diff from rank %d", src);
            memcpy(dst + off, payload + o + 8, len);
            o += 8 + len;
        }
        send_hdr(src, M_DIFF_ACK, a->id, p, 0, D.rank);
        break;
    }
    default:
        fatal("an unknown message (type %d) from rank %d", h->type, src);
    }
}

/* ---- the service thread ---- */

static void free_alloc(struct alloc *a);

static void drain_posted(void)
{
    struct waiter *l = atomic_exchange(&D.posted, NULL), *r = NULL;
    while (l) { /* oldest first */
        struct waiter *n = l->next;
        l->next = r;
        r = l;
        l = n;
    }
    for (; r;) {
        struct waiter *w = r;
        r = r->next;
        switch (w->kind) {
        case W_FAULT:
            if (D.proto == TK_DSM_RC) st_lock();
            on_posted_fault(w);
            if (D.proto == TK_DSM_RC) st_unlock();
            break;
        case W_RELEASE:
            if (D.proto == TK_DSM_RC) {
                st_lock();
                rc_release_all();
                st_unlock();
            }
            w->pnext = D.releases;
            D.releases = w;
            release_done_check();
            break;
        case W_BARRIER: /* (rc: its diffs first, then MPI's barrier) */
            if (D.proto == TK_DSM_RC) {
                st_lock();
                rc_release_all();
                st_unlock();
            }
            D.barrier = w;
            D.barrier_req = MPI_REQUEST_NULL;
            break;
        case W_LOCK: {
            struct hdr h = {
                .type = M_LOCK, .rank = D.rank, .aid = w->aid, .page = (uint64_t)(uintptr_t)w};
            w->pnext = D.lock_waiters;
            D.lock_waiters = w;
            send_msg(w->aid % D.size, &h, NULL);
            break;
        }
        case W_UNLOCK: {
            struct hdr h = {.type = M_UNLOCK, .rank = D.rank, .aid = w->aid};
            send_msg(w->aid % D.size, &h, NULL);
            complete(w, 0);
            break;
        }
        case W_FREE: { /* here, where nothing else is using it */
            struct alloc *a = D.allocs[w->aid % MAX_ALLOCS];
            D.allocs[w->aid % MAX_ALLOCS] = NULL;
            free_alloc(a);
            complete(w, 0);
            break;
        }
        }
    }
}

/* The barrier under way: MPI's, once this rank's diffs are acknowledged;
 * when it completes, an acquire (rc).  True when it moved on. */
static bool barrier_progress(void)
{
    if (D.barrier_req == MPI_REQUEST_NULL) {
        if (D.acks_pending) return false;
        MPI_Ibarrier(D.app, &D.barrier_req);
        return true;
    }
    int flag = 0;
    MPI_Test(&D.barrier_req, &flag, MPI_STATUS_IGNORE);
    if (!flag) return false;
    struct waiter *w = D.barrier;
    D.barrier = NULL;
    D.barrier_req = MPI_REQUEST_NULL;
    /* the other ranks' requests of the next phase come now */
    atomic_store(&D.busy_until, now_ns() + D.spin_ns);
    acquired(w);
    return true;
}

static bool svc_set_policy(int policy)
{
    struct sched_param sp = {.sched_priority = policy == SCHED_FIFO ? 1 : 0};
    return pthread_setschedparam(pthread_self(), policy, &sp) == 0;
}

static void svc_realtime(void)
{
    svc_set_policy(SCHED_FIFO);
    svc_cur_rt = true;
}

static void *service(void *arg)
{
    (void)arg;
    tk__block_async_signals();
    /* While the program's threads run, the thread sleeps between polls at
     * real-time priority 1 where it may (TRAPKIT_DSM_RT; root or
     * CAP_SYS_NICE): woken, it preempts the program's thread on its CPU at
     * once, so a request from another rank waits tens of microseconds,
     * where a thread that spins (yielding) would wait for the end of that
     * thread's time slice, milliseconds.  While a thread of its rank waits
     * for an answer it polls without sleeping, as an ordinary thread (a
     * real-time thread that polled would keep the CPU from everything
     * else, the kernel's network processing included). */
    svc_rt = svc_cur_rt = D.rt && svc_set_policy(SCHED_FIFO);
    prctl(PR_SET_TIMERSLACK, 1000UL); /* (its sleeps are short: 50 us of slack would double them) */
    long idle_since = now_ns(), nap = D.poll_ns;
    bool slept = true;
    while (!atomic_load(&D.stop)) {
        bool did = false;
        if (atomic_load(&D.posted)) {
            drain_posted();
            did = true;
        }
        while (self_head) {
            struct selfmsg *m = self_head;
            self_head = m->next;
            if (!self_head) self_tail = NULL;
            handle(&m->h, m->payload, D.rank);
            free(m);
            did = true;
        }
        /* (Open MPI reads its sockets on one progress call in 16: after a
         * sleep, probe until it has, or a message is found; spinning, once
         * a turn) */
        for (int k = 0, empty = 0; k < 64;) {
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_SVC, D.svc, &flag, &st);
            if (!flag) {
                if (++empty < (slept ? D.probes : 1)) continue;
                break;
            }
            k++;
            int n;
            MPI_Get_count(&st, MPI_BYTE, &n);
            if (n < (int)sizeof(struct hdr) || (size_t)n > D.bufsz)
                fatal("a message of %d bytes from rank %d", n, st.MPI_SOURCE);
            MPI_Recv(D.rbuf, n, MPI_BYTE, st.MPI_SOURCE, TAG_SVC, D.svc, MPI_STATUS_IGNORE);
            atomic_fetch_add_explicit(&D.mrecv, 1, memory_order_relaxed);
            struct hdr h;
            memcpy(&h, D.rbuf, sizeof h);
            if (h.len != (size_t)n - sizeof h) fatal("a message whose length does not match");
            handle(&h, D.rbuf + sizeof h, st.MPI_SOURCE);
            did = true;
        }
        slept = false;
        if (nslots) progress_sends();
        if (D.barrier) did |= barrier_progress();
        long t = now_ns();
        if (did) {
            idle_since = t;
            nap = D.poll_ns;
            continue;
        }
        if (D.outstanding || D.acks_pending || D.barrier || D.lock_waiters) {
            /* a thread of this rank waits for an answer (a page, a barrier,
             * a lock): poll without sleeping, as an ordinary thread (the
             * waiting thread sleeps: its CPU is free) */
            if (svc_cur_rt) {
                svc_set_policy(SCHED_OTHER);
                svc_cur_rt = false;
            }
            sched_yield();
            continue;
        }
        if (svc_rt && !svc_cur_rt) {
            svc_realtime();
        }
        /* Otherwise it sleeps between polls: every TRAPKIT_DSM_POLL_US
         * while messages flow (and after a barrier, when the other ranks'
         * requests come), less and less often once they stop; with one
         * rank, only until its own threads ring. */
        long gap = nap;
        if (D.size == 1)
            gap = 1000000000;
        else if (t - idle_since < D.spin_ns || t < atomic_load(&D.busy_until))
            gap = D.poll_ns;
        else if ((nap *= 2) > 1000000)
            nap = 1000000;
        int seen = atomic_load(&D.bell);
        atomic_store(&D.sleeping, 1);
        if (!atomic_load(&D.posted) && !atomic_load(&D.stop)) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = gap};
            futex_wait_for(&D.bell, seen, &ts);
            slept = true;
        }
        atomic_store(&D.sleeping, 0);
    }
    while (nslots) {
        progress_sends();
        sched_yield();
    }
    for (int i = 0; i < slot_cap; i++) free(slots[i].buf);
    free(slots);
    slots = NULL;
    nslots = slot_cap = 0;
    return NULL;
}

/* ---- the fault handler ---- */

static tk_action on_fault(const tk_fault *f, void *arg)
{
    struct alloc *a = arg;
    if (f->access == TK_ACCESS_EXEC) return TK_DECLINE;
    /* a child of fork() has no service thread and is no rank: the fault
     * is not served (the child dies of it, as without trapkit) */
    if (getpid() != D.pid) return TK_DECLINE;
    size_t p = (size_t)((char *)f->page - a->base) / D.ps;
    int st = atomic_load(&a->state[p]);
    int mode = f->access == TK_ACCESS_WRITE  ? S_RW
               : f->access == TK_ACCESS_READ ? S_READ
                                             : (st >= S_READ ? S_RW : S_READ);
    if (mode <= st) return TK_RESUME; /* another thread got it meanwhile */
    atomic_fetch_add_explicit(mode == S_RW ? &D.write_faults : &D.read_faults, 1,
                              memory_order_relaxed);
    if (D.proto == TK_DSM_RC && mode == S_RW && st == S_READ) {
        /* a write to a copy: its twin, here (asynchronous signals held
         * back: a handler of the program's touching shared memory must not
         * find the lock taken by its own thread) */
        uint64_t old;
        tk__defer_signals(&old);
        st_lock();
        bool done = false;
        if (atomic_load(&a->state[p]) == S_READ && !a->want[p]) {
            memcpy(a->twin + p * D.ps, a->view + p * D.ps, D.ps);
            if (tk_protect(a->region, a->base + p * D.ps, D.ps, TK_PROT_RW) == 0) {
                a->dirty[a->ndirty++] = (uint32_t)p;
                atomic_store(&a->state[p], S_RW);
                atomic_fetch_add_explicit(&D.twins, 1, memory_order_relaxed);
                done = true;
            }
        } else if (atomic_load(&a->state[p]) == S_RW) {
            done = true;
        }
        st_unlock();
        tk__restore_signals(&old);
        if (done) return TK_RESUME;
    }
    struct waiter w = {.kind = W_FAULT, .aid = a->id, .page = p, .mode = mode};
    post(&w);
    wait_for(&w);
    return w.err ? TK_DECLINE : TK_RESUME;
}

/* ---- the API ---- */

static int env_choice(const char *name, const char *const *names, int n, int dflt, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = dflt;
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            *out = i + 1;
            return 0;
        }
    return tk__failf(-EINVAL, "tk_dsm_init: %s=%s is not one of the choices (%s, %s)", name, v,
                     names[0], names[1]);
}

static long env_num(const char *name, long dflt, long lo, long hi, int *err)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        *err = tk__failf(-EINVAL, "tk_dsm_init: %s=%s is not a number from %ld to %ld", name, v, lo,
                         hi);
        return dflt;
    }
    return x;
}

static char transport[320];

/* One-sided operations would let a rank read a page without the owner's
 * thread - where the network does the work (RDMA).  Over TCP, Open MPI
 * (Debian's 4.1) cannot create a window at all (osc/rdma needs an RDMA
 * transport); and a window over TCP would be served by the target's
 * progress engine, polled like the messages here.  So the pages travel as
 * two-sided messages; the probe's outcome goes into tk_dsm_transport(). */
static void probe_one_sided(void)
{
    MPI_Comm_set_errhandler(D.svc, MPI_ERRORS_RETURN);
    static char buf[64];
    MPI_Win w;
    int rc = MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, D.svc, &w);
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc == MPI_SUCCESS)
        MPI_Win_free(&w);
    else
        MPI_Error_string(rc, why, &len);
    int ok = rc == MPI_SUCCESS, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, D.svc);
    snprintf(transport, sizeof transport,
             "two-sided MPI messages (MPI_Isend/MPI_Iprobe) served by a thread per rank; "
             "one-sided windows %s",
             all ? "work here but are not used (a window over TCP is served by the target's "
                   "progress engine too)"
                 : "");
    if (!all)
        snprintf(transport + strlen(transport), sizeof transport - strlen(transport),
                 "fail here (MPI_Win_create: %s)", ok ? "failed on another rank" : why);
}

int tk_dsm_init(MPI_Comm comm)
{
    return tk_dsm_init_config(comm, NULL);
}

int tk_dsm_init_config(MPI_Comm comm, const tk_dsm_config *cfg)
{
    if (D.up) return tk__fail(-EALREADY, "tk_dsm_init: the DSM is running already");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        return tk__fail(-EINVAL,
                        "tk_dsm_init: MPI is not initialised (call MPI_Init_thread first)");
    int provided;
    MPI_Query_thread(&provided);
    tk_dsm_config c = cfg ? *cfg : (tk_dsm_config){0};
    int err = 0, v;
    static const char *const protos[] = {"ivy", "rc"}, *const places[] = {"block", "cyclic"};
    if (!c.protocol) {
        if ((err = env_choice("TRAPKIT_DSM_PROTOCOL", protos, 2, TK_DSM_IVY, &v))) goto agree;
        c.protocol = (enum tk_dsm_protocol)v;
    }
    if (!c.placement) {
        if ((err = env_choice("TRAPKIT_DSM_PLACEMENT", places, 2, TK_DSM_PLACE_BLOCK, &v)))
            goto agree;
        c.placement = (enum tk_dsm_placement)v;
    }
    size_t hw = (size_t)sysconf(_SC_PAGESIZE);
    if (!c.page_size)
        c.page_size = (size_t)env_num("TRAPKIT_DSM_PAGE", (long)hw, (long)hw, 1L << 24, &err);
    if (err) goto agree;
    if (c.page_size < hw || (c.page_size & (c.page_size - 1))) {
        err = tk__failf(-EINVAL, "tk_dsm_init: page size %zu is not a power-of-two multiple of %zu",
                        c.page_size, hw);
        goto agree;
    }
    if (c.protocol != TK_DSM_IVY && c.protocol != TK_DSM_RC) {
        err = tk__fail(-EINVAL, "tk_dsm_init: unknown protocol");
        goto agree;
    }
    if (c.mech != TK_MECH_AUTO && c.mech != TK_MECH_POSIX && c.mech != TK_MECH_UFFD_SIGBUS &&
        c.mech != TK_MECH_UFFD_THREAD) {
        err = tk__failf(-EINVAL,
                        "tk_dsm_init: mechanism %s cannot serve shared memory (posix, "
                        "uffd-sigbus or uffd-thread)",
                        tk_mech_name(c.mech));
        goto agree;
    }
    D.spin_ns = env_num("TRAPKIT_DSM_SPIN_US", 1000, 0, 10000000, &err) * 1000;
    D.timeout_s = env_num("TRAPKIT_DSM_TIMEOUT", 20, 1, 86400, &err);
    D.poll_ns = env_num("TRAPKIT_DSM_POLL_US", 100, 1, 100000, &err) * 1000;
    D.rt = (int)env_num("TRAPKIT_DSM_RT", 1, 0, 1, &err);
    D.probes = (int)env_num("TRAPKIT_DSM_PROBES", 17, 1, 1000, &err);
    D.prefetch = (int)env_num("TRAPKIT_DSM_PREFETCH", 4, 1, 64, &err);
    D.wait_spin_ns = env_num("TRAPKIT_DSM_WAIT_SPIN_US", 0, 0, 1000000, &err) * 1000;
    if (err) goto agree;
    if (provided < MPI_THREAD_MULTIPLE) {
        err = tk__failf(-ENOTSUP,
                        "tk_dsm_init: the DSM needs MPI_THREAD_MULTIPLE (call "
                        "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)); this MPI "
                        "provides level %d",
                        provided);
        goto agree;
    }
agree:;
    /* every rank the same configuration, and all or none start */
    int size;
    MPI_Comm_size(comm, &size);
    long mine[4] = {err ? 1 : 0, c.protocol, c.placement, (long)c.page_size}, lo[4], hi[4];
    MPI_Allreduce(mine, lo, 4, MPI_LONG, MPI_MIN, comm);
    MPI_Allreduce(mine, hi, 4, MPI_LONG, MPI_MAX, comm);
    if (hi[0]) return err ? err : tk__fail(-EINVAL, "tk_dsm_init: failed on another rank");
    if (lo[1] != hi[1] || lo[2] != hi[2] || lo[3] != hi[3])
        return tk__fail(-EINVAL, "tk_dsm_init: the ranks disagree on the protocol, the placement "
                                 "or the page size (TRAPKIT_DSM_* must be the same everywhere)");
    if (size > MAX_RANKS)
        return tk__failf(-ENOTSUP, "tk_dsm_init: %d ranks; at most %d", size, MAX_RANKS);
    D.proto = c.protocol;
    D.pid = getpid();
    D.place = c.placement;
    D.ps = c.page_size;
    D.mech = c.mech;
    D.size = size;
    MPI_Comm_rank(comm, &D.rank);
    MPI_Comm_dup(comm, &D.svc);
    MPI_Comm_dup(comm, &D.app);
    probe_one_sided();
    MPI_Comm_set_errhandler(D.svc, MPI_ERRORS_ARE_FATAL);
    D.bufsz = sizeof(struct hdr) + 2 * D.ps + 8 * (D.ps / 2 + 1);
    D.rbuf = malloc(D.bufsz);
    D.sbuf = malloc(D.bufsz);
    D.locks = calloc(TK_DSM_LOCKS / (size_t)size + 1, sizeof *D.locks);
    if (!D.rbuf || !D.sbuf || !D.locks) return tk__fail(-ENOMEM, "tk_dsm_init: out of memory");
    for (int i = 0; i < TK_DSM_LOCKS / size + 1; i++) D.locks[i].holder = -1;
    atomic_store(&D.stop, 0);
    if (pthread_create(&D.thread, NULL, service, NULL))
        return tk__fail(-ENOMEM, "tk_dsm_init: cannot start the service thread");
    D.up = true;
    MPI_Barrier(D.app);
    return 0;
}

static void free_alloc(struct alloc *a)
{
    if (a->region) tk_region_destroy(a->region); /* (unmaps the second view) */
    if (a->base) munmap(a->base, a->len);
    if (a->twin) munmap(a->twin, a->len);
    free((void *)a->state);
    free(a->want);
    free(a->waiting);
    free(a->cached);
    free(a->dirty);
    free(a->tmp);
    free(a->owner);
    free(a->copyset);
    free(a->busy);
    if (a->cur)
        for (size_t p = 0; p < a->npages; p++) {
            free(a->cur[p]);
            for (struct mreq *r = a->qhead[p]; r;) {
                struct mreq *n = r->next;
                free(r);
                r = n;
            }
        }
    free(a->cur);
    free(a->qhead);
    free(a->qtail);
    free(a->acks);
    free(a);
}

/* Where each rank's kernel puts its mappings depends on its own address
 * space layout (randomised): a range free on one rank often holds another's
 * libraries or heap.  The gap between the program's own image and the
 * mmap area is free everywhere, so the first proposals are random addresses
 * there: [32 TiB, 80 TiB), above a sanitizer's shadow and below a
 * position-independent program's image (0x55..). */
#define GAP_LO (UINT64_C(32) << 40)
#define GAP_HI (UINT64_C(80) << 40)
#define GAP_TRIES 8

/* A random address of the gap aligned to the coherence unit, with room for
 * len, or 0. */
static uint64_t gap_proposal(size_t len, int attempt)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = ((uint64_t)time(NULL) ^ (uint64_t)getpid() << 20 ^ (uint64_t)attempt << 40) *
            UINT64_C(0x9E3779B97F4A7C15);
    if (len >= GAP_HI - GAP_LO) return 0;
    uint64_t span = (GAP_HI - GAP_LO - len) / D.ps;
    return GAP_LO + r % span * D.ps;
}

/* A range of len bytes the kernel chose, aligned to the coherence unit
 * (mapped with room, trimmed), or NULL. */
static char *kernel_proposal(size_t len)
{
    size_t room = len + D.ps;
    char *r = mmap(NULL, room, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (r == MAP_FAILED) return NULL;
    char *mine = (char *)(((uintptr_t)r + D.ps - 1) & ~(uintptr_t)(D.ps - 1));
    if (mine > r) munmap(r, (size_t)(mine - r));
    if (mine + len < r + room) munmap(mine + len, (size_t)(r + room - (mine + len)));
    return mine;
}

/* The same range on every rank.  A proposal is broadcast and every rank
 * maps it or says it cannot: first random addresses of the gap (above),
 * then (a sanitizer that keeps the gap for itself refuses them) addresses
 * each rank's kernel chose, the ranks taking turns to propose; a refused
 * range stays reserved on its proposer so its next proposal differs. */
static char *same_range(size_t len)
{
    enum { TRIES = GAP_TRIES + 24 };
    void *refused[TRIES];
    int nref = 0;
    char *got = NULL;
    for (int attempt = 0; attempt < TRIES && !got; attempt++) {
        bool gap = attempt < GAP_TRIES;
        int proposer = gap ? 0 : (attempt - GAP_TRIES) % D.size;
        uint64_t addr = 0;
        char *mine = NULL;
        if (D.rank == proposer) {
            if (gap) {
                addr = gap_proposal(len, attempt);
            } else {
                mine = kernel_proposal(len);
                addr = (uint64_t)(uintptr_t)mine;
            }
        }
        MPI_Bcast(&addr, 1, MPI_UINT64_T, proposer, D.app);
        if (!addr) continue; /* (this proposer had none: the next one's turn) */
        int ok = 1;
        if (!mine) {
            mine = mmap((void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
            if (mine == MAP_FAILED || mine != (char *)(uintptr_t)addr) {
                if (mine != MAP_FAILED) munmap(mine, len);
                mine = NULL;
                ok = 0;
            }
        }
        int all;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, D.app);
        if (all) {
            got = mine;
        } else if (mine && !gap && D.rank == proposer) {
            refused[nref++] = mine;
        } else if (mine) {
            munmap(mine, len);
        }
    }
    for (int i = 0; i < nref; i++) munmap(refused[i], len);
    return got;
}

void *tk_dsm_alloc(size_t size)
{
    if (!D.up) {
        tk__fail(-ENOTCONN, "tk_dsm_alloc: call tk_dsm_init first");
        errno = ENOTCONN;
        return NULL;
    }
    unsigned long long mine = size, lo, hi;
    MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, D.app);
    MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, D.app);
    if (lo != hi) {
        tk__failf(-EINVAL,
                  "tk_dsm_alloc: the ranks asked for different sizes (%llu to %llu "
                  "bytes; this rank %llu): every rank must pass the same size",
                  lo, hi, mine);
        errno = EINVAL;
        return NULL;
    }
    if (!size) {
        tk__fail(-EINVAL, "tk_dsm_alloc: size 0");
        errno = EINVAL;
        return NULL;
    }
    /* (allocations are collective, in the same order everywhere: the same
     * number; its slot must be free on every rank) */
    int id = D.next_aid++;
    int ok = D.allocs[id % MAX_ALLOCS] == NULL, rc = 0;
    struct alloc *a = NULL;
    size_t len = (size + D.ps - 1) / D.ps * D.ps;
    const char *why = "out of memory";
    if (ok) {
        a = calloc(1, sizeof *a);
        ok = a != NULL;
    } else {
        why = "too many allocations (64 at once)";
    }
    if (ok) {
        a->id = id;
        a->len = len;
        a->npages = len / D.ps;
        size_t n = a->npages;
        a->state = calloc(n, 1);
        a->want = calloc(n, 1);
        a->waiting = calloc(n, sizeof *a->waiting);
        ok = a->state && a->want && a->waiting;
        if (ok && D.proto == TK_DSM_RC) {
            a->cached = malloc(n * sizeof *a->cached);
            a->dirty = malloc(n * sizeof *a->dirty);
            a->tmp = malloc(n * sizeof *a->tmp);
            a->twin = mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (a->twin == MAP_FAILED) a->twin = NULL;
            ok = a->cached && a->dirty && a->tmp && a->twin;
        }
        if (ok && D.proto == TK_DSM_IVY) {
            a->owner = malloc(n * sizeof *a->owner);
            a->copyset = calloc(n, sizeof *a->copyset);
            a->busy = calloc(n, 1);
            a->cur = calloc(n, sizeof *a->cur);
            a->qhead = calloc(n, sizeof *a->qhead);
            a->qtail = calloc(n, sizeof *a->qtail);
            a->acks = calloc(n, sizeof *a->acks);
            ok = a->owner && a->copyset && a->busy && a->cur && a->qhead && a->qtail && a->acks;
            if (ok)
                for (size_t p = 0; p < n; p++) a->owner[p] = (int16_t)home_of(a, p);
        }
    }
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, D.app);
    if (all) {
        a->base = same_range(len);
        ok = a->base != NULL;
        if (!ok) why = "no address range free on every rank";
    }
    if (ok && all) {
        tk_region_config rc_cfg = {.addr = a->base,
                                   .len = len,
                                   .handler = on_fault,
                                   .arg = a,
                                   .mech = D.mech,
                                   .page_size = D.ps,
                                   .flags = TK_REGION_NOACCESS | TK_REGION_MAP2};
        rc = tk_region_create(&rc_cfg, &a->region);
        if (!rc) rc = tk_map2(a->region, TK_PROT_RW, (void **)&a->view);
        ok = rc == 0;
        if (!ok) why = tk_last_error();
    }
    char whybuf[256];
    snprintf(whybuf, sizeof whybuf, "%s", why);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, D.app);
    if (!all) {
        if (a) {
            free_alloc(a);
        }
        tk__failf(ok ? -EINVAL : -ENOMEM, "tk_dsm_alloc: %s",
                  ok ? "failed on another rank" : whybuf);
        errno = ok ? EINVAL : ENOMEM;
        return NULL;
    }
    D.mech = tk_region_mech(a->region);
    /* this rank's pages open, the others no-access */
    if (D.place == TK_DSM_PLACE_BLOCK) {
        size_t s = block_start(a, D.rank), e = block_start(a, D.rank + 1);
        if (e > s) protect(a, s, e - s, S_RW);
    } else {
        for (size_t p = (size_t)D.rank; p < a->npages; p += (size_t)D.size) protect(a, p, 1, S_RW);
    }
    /* published to the service thread before any rank can ask for a page */
    pthread_mutex_lock(&D.alloc_lk);
    D.allocs[id % MAX_ALLOCS] = a;
    pthread_mutex_unlock(&D.alloc_lk);
    atomic_thread_fence(memory_order_seq_cst);
    MPI_Barrier(D.app);
    return a->base;
}

static struct alloc *find_alloc(const void *p)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = D.allocs[i];
        if (a && (const char *)p >= a->base && (const char *)p < a->base + a->len) return a;
    }
    return NULL;
}

int tk_dsm_free(void *p)
{
    if (!D.up) return tk__fail(-ENOTCONN, "tk_dsm_free: call tk_dsm_init first");
    struct alloc *a = find_alloc(p);
    int ok = a && a->base == p;
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, D.app);
    if (!all) return tk__fail(-EINVAL, "tk_dsm_free: not the start of an allocation on every rank");
    /* no rank may still ask for its pages: quiesce first; the service
     * thread frees it, between two messages */
    tk_dsm_barrier();
    struct waiter w = {.kind = W_FREE, .aid = a->id};
    post(&w);
    wait_for(&w);
    MPI_Barrier(D.app);
    return 0;
}

/* A lock may be held as long as its holder likes: no timeout. */
static void wait_lock(struct waiter *w)
{
    while (!atomic_load(&w->done)) tk__futex_wait(&w->done, 0);
}

/* Has the service thread run a release or acquire; waits for it. */
static void sync_op(enum wkind k)
{
    struct waiter w = {.kind = k};
    post(&w);
    wait_for(&w);
}

/* Barriers and locks are the service thread's too: the calling thread
 * sleeps (MPI's own blocking calls would poll, holding a CPU the service
 * thread and the other ranks need), and one thread a rank polls MPI. */
int tk_dsm_barrier(void)
{
    if (!D.up) return tk__fail(-ENOTCONN, "tk_dsm_barrier: call tk_dsm_init first");
    struct waiter w = {.kind = W_BARRIER};
    post(&w);
    wait_lock(&w); /* (a barrier may wait as long as the slowest rank computes) */
    return 0;
}

int tk_dsm_lock(int id)
{
    if (!D.up) return tk__fail(-ENOTCONN, "tk_dsm_lock: call tk_dsm_init first");
    if (id < 0 || id >= TK_DSM_LOCKS)
        return tk__failf(-EINVAL, "tk_dsm_lock: lock %d is not from 0 to %d", id, TK_DSM_LOCKS - 1);
    struct waiter w = {.kind = W_LOCK, .aid = id};
    post(&w);
    wait_lock(&w);
    held_locks[id / 64] |= 1ull << (id % 64);
    return 0;
}

int tk_dsm_unlock(int id)
{
    if (!D.up) return tk__fail(-ENOTCONN, "tk_dsm_unlock: call tk_dsm_init first");
    if (id < 0 || id >= TK_DSM_LOCKS || !(held_locks[id / 64] & (1ull << (id % 64))))
        return tk__failf(-EINVAL, "tk_dsm_unlock: this thread does not hold lock %d", id);
    if (D.proto == TK_DSM_RC) sync_op(W_RELEASE);
    held_locks[id / 64] &= ~(1ull << (id % 64));
    struct waiter w = {.kind = W_UNLOCK, .aid = id};
    post(&w);
    wait_for(&w);
    return 0;
}

int tk_dsm_finalize(void)
{
    if (!D.up) return tk__fail(-ENOTCONN, "tk_dsm_finalize: call tk_dsm_init first");
    tk_dsm_barrier();
    /* every rank past its last request; a message still in flight (an ivy
     * DONE) is dropped with the communicator */
    MPI_Barrier(D.app);
    atomic_store(&D.stop, 1);
    atomic_fetch_add(&D.bell, 1);
    tk__futex_wake(&D.bell, 1);
    pthread_join(D.thread, NULL);
    MPI_Barrier(D.app);
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (D.allocs[i]) {
            free_alloc(D.allocs[i]);
            D.allocs[i] = NULL;
        }
    MPI_Comm_free(&D.app);
    MPI_Comm_free(&D.svc);
    free(D.rbuf);
    free(D.sbuf);
    free(D.locks);
    D.up = false;
    return 0;
}

int tk_dsm_rank(void)
{
    return D.rank;
}
int tk_dsm_size(void)
{
    return D.size;
}
enum tk_dsm_protocol tk_dsm_protocol(void)
{
    return D.proto;
}
const char *tk_dsm_protocol_name(enum tk_dsm_protocol p)
{
    return p == TK_DSM_IVY ? "ivy" : p == TK_DSM_RC ? "rc" : "?";
}
size_t tk_dsm_page_size(void)
{
    return D.ps;
}
enum tk_mech tk_dsm_mech(void)
{
    return D.mech;
}
const char *tk_dsm_transport(void)
{
    return transport[0] ? transport : "not started (tk_dsm_init)";
}

int tk_dsm_home(const void *addr)
{
    struct alloc *a = find_alloc(addr);
    if (!a) return -1;
    return home_of(a, (size_t)((const char *)addr - a->base) / D.ps);
}

int tk_dsm_get_stats(tk_dsm_stats *out)
{
    if (!out) return tk__fail(-EINVAL, "tk_dsm_get_stats: NULL");
    *out = (tk_dsm_stats){
        .read_faults = atomic_load(&D.read_faults),
        .write_faults = atomic_load(&D.write_faults),
        .pages_in = atomic_load(&D.pages_in),
        .pages_out = atomic_load(&D.pages_out),
        .invalidations = atomic_load(&D.invalidations),
        .twins = atomic_load(&D.twins),
        .diffs_sent = atomic_load(&D.diffs),
        .diff_bytes = atomic_load(&D.diff_bytes),
        .messages_sent = atomic_load(&D.msent),
        .messages_received = atomic_load(&D.mrecv),
    };
    return 0;
}
