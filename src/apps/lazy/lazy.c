/* src/apps/lazy/lazy.c - memory that materialises on first touch
 * (include/trapkit/lazy.h says what it offers): lazily computed arrays,
 * stacks that grow on a guard-page touch, cells with full/empty bits.
 *
 * Every structure keeps one state word per unit (page or cell) and every
 * wait is a futex wait on that word, woken on each change of it.
 *
 * The array.  State of a page: EMPTY -> (REQUESTED) -> BUSY -> DONE, or
 * BUSY -> FAILED -> BUSY (retry).  Whoever moves a page to BUSY by
 * compare-and-swap computes it; nobody else does.
 *   uffd-missing: the memory is private anonymous, registered with a
 *   userfaultfd of the array's own in MISSING mode.  The handler thread
 *   reads each fault and computes the page into its buffer; UFFDIO_COPY
 *   places it and wakes every thread waiting on it.  A fault on a page that
 *   another thread is computing is left alone: that thread's UFFDIO_COPY
 *   wakes the faulting thread (the kernel queues it before it looks at the
 *   page table again, so the wake-up is never lost).  A fault on a failed
 *   page is left alone too: its thread waits in the kernel until a retry
 *   places the page.
 *   region: a trapkit region made no-access, with a second view (MAP2).
 *   The faulting thread's handler moves EMPTY to REQUESTED, puts the index
 *   in a ring the worker thread reads and waits on the page's state word
 *   until DONE.  The worker computes the page through the view, opens the
 *   page, sets DONE and wakes.  Each page enters the ring at most once
 *   (only EMPTY -> REQUESTED enqueues), so a ring of a slot per page never
 *   overflows.
 *
 * The stack.  `top` counts the pages opened from the base up; the guard is
 * page `top`.  A fault there opens it and moves top on (two threads doing
 * so at once both open it, which is harmless); a fault below top was
 * resolved by another thread meanwhile; above, it is not ours.
 *
 * The cells.  State of a cell: EMPTY -> FILLING -> FULL -> EMPTYING ->
 * EMPTY.  put writes the value through the second view while the cell is
 * still inaccessible, makes it read-only, then publishes FULL; take makes
 * it inaccessible first, then copies the value out.  So a cell is readable
 * only while its value is complete, and a reader that faults waits until
 * the state is FULL, when the protection already lets its retry through.
 */
#include <trapkit/lazy.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/region_impl.h" /* tk__defer_signals */
#include "os/linux/os.h"
#include "trapkit/fast.h"

enum { P_EMPTY = 0, P_REQUESTED, P_BUSY, P_DONE, P_FAILED };
enum { C_EMPTY = 0, C_FILLING, C_FULL, C_EMPTYING };

static size_t hw_page(void)
{
    static size_t ps;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

static bool pow2(size_t x)
{
    return x && (x & (x - 1)) == 0;
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

/* Writes "trapkit: <a><number><b>\n" to stderr.  [signal-safe] */
static void say(const char *a, uint64_t x, const char *b)
{
    char msg[256], *p = msg, *end = msg + sizeof msg - 24;
    for (const char *s = "trapkit: "; *s;) *p++ = *s++;
    while (*a && p < end) *p++ = *a++;
    p = put_u64(p, x);
    while (*b && p < end) *p++ = *b++;
    *p++ = '\n';
    *p = 0;
    tk__write_stderr(msg);
}

/* Returns err with the calling thread's last error prefixed by who (the
 * error of the trapkit call that failed under ours). */
static int wrap(int err, const char *who)
{
    char was[240];
    snprintf(was, sizeof was, "%s", tk_last_error());
    return tk__failf(err, "%s: %s", who, was);
}

static bool region_mech_ok(enum tk_mech m)
{
    return m == TK_MECH_AUTO || m == TK_MECH_POSIX || m == TK_MECH_UFFD_SIGBUS ||
           m == TK_MECH_UFFD_THREAD;
}

/* ========================================================================
 * The lazy array
 * ======================================================================== */

struct tk_lazy_array {
    unsigned char *base;
    size_t len, ps, npages;
    tk_lazy_fill_fn fill;
    void *arg;
    tk_lazy_error_fn on_error;
    bool missing;      /* uffd-missing; else a region */
    atomic_int *state; /* per page, P_* */
    atomic_size_t computed;
    atomic_bool stop;
    pthread_t thread;
    bool have_thread;
    /* uffd-missing */
    int uffd, stop_fd;
    unsigned char *buf; /* the handler thread's page */
    /* region */
    tk_region *region;
    unsigned char *view;
    _Atomic uint32_t *ring; /* page index + 1, 0 = not written yet */
    size_t ring_cap;        /* a power of two >= npages */
    atomic_size_t ring_tail;
    size_t ring_head;    /* the worker's */
    atomic_int kick;     /* futex word the worker sleeps on */
    atomic_bool orphan;  /* in a child of fork(): no helper thread */
    tk_lazy_array *next; /* the registry of live arrays */
};

/* ---- fork(): the registry of arrays ---------------------------------------
 * A child of fork() has no helper thread.  In it, every array is marked
 * orphaned (a fault on a page not computed is passed on, with a message,
 * instead of waiting for ever; fill and retry fail with -ECHILD: an
 * uffd-missing array's userfaultfd belongs to the parent's memory), and an
 * uffd-missing array's pages not computed are made inaccessible: the kernel
 * does not register the child's copy with the userfaultfd, so they would
 * otherwise read as zeros.  The registry's lock is a spin lock, held for a
 * few instructions (and across fork(), by the prepare handler): no lock
 * order with the mutexes other fork handlers hold across fork(). */
static atomic_flag reg_lock = ATOMIC_FLAG_INIT;

static void reg_lock_take(void)
{
    while (atomic_flag_test_and_set_explicit(&reg_lock, memory_order_acquire)) sched_yield();
}

static void reg_lock_drop(void)
{
    atomic_flag_clear_explicit(&reg_lock, memory_order_release);
}

static tk_lazy_array *reg_head;
static tk_lazy_cells *reg_cells;  /* the live cells, on the same lock */
static tk_lazy_stack *reg_stacks; /* the live stacks, on the same lock */
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    reg_lock_take();
}
static void fork_parent(void)
{
    reg_lock_drop();
}

static void cells_orphan(void);
static void stacks_after_fork(void);

/* In a child of fork(): makes inaccessible the hardware pages of an
 * uffd-missing array that hold no data - pages not computed,
 * and pages the program dropped (MADV_DONTNEED) since they were computed,
 * which the parent would compute again on their next touch but which would
 * read as zeros here.  /proc/self/pagemap tells (bit 63 present, bit 62
 * swapped out: mincore() would take a swapped page for a dropped one); pm
 * is the child's own (a descriptor the parent opened reads the parent's).
 * The page table, not the page's state, is what counts: the handler thread
 * marks a page computed just after placing it, and a thread that read it
 * may fork in between.  Returns false if pagemap could not be read. */
static bool close_absent(const tk_lazy_array *a, int pm)
{
    size_t hw = hw_page();
    uintptr_t lo = (uintptr_t)a->base, hi = (uintptr_t)(a->base + a->npages * a->ps);
    uint64_t e[512];
    for (uintptr_t at = lo; at < hi;) {
        size_t n = (hi - at) / hw < 512 ? (hi - at) / hw : 512;
        if (pread(pm, e, n * sizeof e[0], (off_t)(at / hw * sizeof e[0])) !=
            (ssize_t)(n * sizeof e[0]))
            return false;
        for (size_t k = 0; k < n;) {
            if (e[k] >> 62 & 3) {
                k++;
                continue;
            }
            size_t m = k + 1;
            while (m < n && !(e[m] >> 62 & 3)) m++;
            mprotect((void *)(at + k * hw), (m - k) * hw, PROT_NONE);
            k = m;
        }
        at += n * hw;
    }
    return true;
}

/* In a child of fork(): a region-backed array's memory becomes the child's
 * own, a private (copy-on-write) mapping of the memfd in place of the shared
 * one, so that the child's stores stay in the child; its pages not computed
 * stay inaccessible.  (Until the child writes a page, the parent's later
 * stores to it show through, as its later computed pages would.)  Should the
 * mapping fail, the array is left shared, as before, with a message. */
static void privatise(const tk_lazy_array *a)
{
    if (a->region->rg_memfd < 0) return;
    if (mmap(a->base, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED,
             a->region->rg_memfd, 0) == MAP_FAILED) {
        tk__write_stderr("trapkit lazy: an array could not be made private in a child of "
                         "fork(): the child's stores to it reach the parent\n");
        return;
    }
    /* by the region's page states, not the array's: a page is open as soon
     * as its state says so, before the array marks it computed */
    const struct tk_region *r = a->region;
    for (size_t i = 0; i < r->rg_npages;) {
        size_t j = i + 1;
        bool open = (atomic_load(&r->rg_state[i]) & PS_PROT_MASK) != TK_PROT_NONE;
        while (j < r->rg_npages &&
               ((atomic_load(&r->rg_state[j]) & PS_PROT_MASK) != TK_PROT_NONE) == open)
            j++;
        if (!open) mprotect(a->base + (i << r->rg_shift), (j - i) << r->rg_shift, PROT_NONE);
        i = j;
    }
}

static void fork_child(void)
{
    cells_orphan();
    stacks_after_fork();
    int pm = -1;
    for (tk_lazy_array *a = reg_head; a; a = a->next) {
        atomic_store(&a->orphan, true);
        a->have_thread = false; /* not the child's to join */
        if (!a->missing) {
            privatise(a);
            continue;
        }
        if (pm < 0) pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (pm >= 0 && close_absent(a, pm)) continue;
        /* (no pagemap: by the pages' states, dropped pages left open) */
        for (size_t i = 0; i < a->npages;) {
            size_t j = i + 1;
            bool done = atomic_load(&a->state[i]) == P_DONE;
            while (j < a->npages && (atomic_load(&a->state[j]) == P_DONE) == done) j++;
            if (!done) mprotect(a->base + i * a->ps, (j - i) * a->ps, PROT_NONE);
            i = j;
        }
    }
    if (pm >= 0) close(pm);
    reg_lock_drop();
}

static void reg_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void reg_add(tk_lazy_array *a)
{
    pthread_once(&reg_once, reg_init);
    reg_lock_take();
    a->next = reg_head;
    reg_head = a;
    reg_lock_drop();
}

static void reg_remove(tk_lazy_array *a)
{
    reg_lock_take();
    for (tk_lazy_array **p = &reg_head; *p; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            break;
        }
    reg_lock_drop();
}

static void wake_all(atomic_int *w)
{
    tk__futex_wake(w, INT_MAX);
}

/* The callback failed on page i: the page is FAILED and the error told to
 * the error function; without one, the message and abort(), unless the
 * page was asked for by tk_lazy_array_fill or _retry (`explicit`), which
 * return the error instead. */
static void array_failed(tk_lazy_array *a, size_t i, int err, bool explicit)
{
    atomic_store(&a->state[i], P_FAILED);
    wake_all(&a->state[i]);
    if (explicit && !a->on_error) return;
    char msg[200];
    snprintf(msg, sizeof msg,
             "trapkit: lazy array %p: computing page %zu failed (%s); its readers wait "
             "until tk_lazy_array_retry() computes it",
             (void *)a->base, i, strerror(-err));
    if (a->on_error) {
        a->on_error(err, i, msg, a->arg);
    } else {
        fprintf(stderr, "%s\n", msg);
        abort();
    }
}

/* Places the computed page i (in src, or in the view already).  On
 * uffd-missing, hardware pages already there are skipped: placed by this
 * loop, or, for a page computed again after the program dropped part of it
 * (MADV_DONTNEED), the parts it kept. */
static int array_place(tk_lazy_array *a, size_t i, const unsigned char *src)
{
    unsigned char *dst = a->base + i * a->ps;
    if (!a->missing) return tk_unprot(a->region, dst, a->ps);
    size_t done = 0, hw = hw_page();
    bool skipped = false;
    while (done < a->ps) {
        struct uffdio_copy c = {.dst = (uintptr_t)(dst + done),
                                .src = (uintptr_t)(src + done),
                                .len = a->ps - done,
                                .mode = 0};
        if (ioctl(a->uffd, UFFDIO_COPY, &c) == 0) break;
        int e = errno;
        if (c.copy > 0) {
            done += (size_t)c.copy; /* part of it placed: the rest again */
        } else if (e == EEXIST) {
            done += hw; /* this hardware page is there: the next one */
            skipped = true;
        } else if (e != EAGAIN && e != EINTR) {
            return -e;
        }
    }
    if (skipped) { /* a thread may wait on a page no copy placed (it faulted on it meanwhile) */
        struct uffdio_range wr = {.start = (uintptr_t)dst, .len = a->ps};
        ioctl(a->uffd, UFFDIO_WAKE, &wr);
    }
    return 0;
}

/* Computes page i, which the caller moved to BUSY, into buf (uffd-missing)
 * or through the view (region), and places it.  Returns 0 or the error
 * (the page is FAILED then; explicit: asked for by fill or retry, see
 * array_failed). */
static int array_compute(tk_lazy_array *a, size_t i, unsigned char *buf, bool explicit)
{
    unsigned char *at = a->missing ? buf : a->view + i * a->ps;
    memset(at, 0, a->ps);
    int err = a->fill(at, i, a->arg);
    if (err > 0) err = -EIO; /* not a negative errno: say so as an I/O error */
    /* counted before the page is placed: whoever sees the page sees it counted */
    if (!err) {
        atomic_fetch_add(&a->computed, 1);
        if ((err = array_place(a, i, at))) atomic_fetch_sub(&a->computed, 1);
    }
    if (err) {
        array_failed(a, i, err, explicit);
        return err;
    }
    atomic_store(&a->state[i], P_DONE);
    wake_all(&a->state[i]);
    return 0;
}

/* Moves page i from one of the states in `from` (a bit per state) to BUSY.
 * Returns the state it had, or -1 if it had none of them. */
static int claim(atomic_int *st, unsigned from)
{
    for (;;) {
        int s = atomic_load(st);
        if (!(from >> s & 1)) return -1;
        if (atomic_compare_exchange_weak(st, &s, P_BUSY)) return s;
    }
}

static void on_missing(void *arg, uintptr_t addr, uint64_t flags)
{
    (void)flags;
    tk_lazy_array *a = arg;
    size_t i = (addr - (uintptr_t)a->base) / a->ps;
    if (addr < (uintptr_t)a->base || i >= a->npages) return;
    if (claim(&a->state[i], 1u << P_EMPTY) >= 0) {
        array_compute(a, i, a->buf, false);
    } else if (atomic_load(&a->state[i]) == P_DONE) {
        /* A computed page the faulting thread found missing.  Either it was
         * placed meanwhile by an explicit fill (wake the thread, should it
         * have queued after that copy's wake-up), or the program dropped it
         * since (MADV_DONTNEED): it is missing for good, and computed
         * again. */
        size_t hw = hw_page();
        unsigned char in = 1;
        void *hp = (void *)(addr & ~(uintptr_t)(hw - 1));
        if (mincore(hp, hw, &in) == 0 && !(in & 1) && claim(&a->state[i], 1u << P_DONE) >= 0)
            array_compute(a, i, a->buf, false);
        else
            tk__uffd_wake(a->uffd, (char *)a->base + i * a->ps, a->ps);
    }
    /* BUSY: its computer's copy wakes the thread; FAILED: the thread waits
     * for a retry */
}

static void *missing_main(void *arg)
{
    tk_lazy_array *a = arg;
    tk__uffd_fault_loop(a->uffd, a->stop_fd, &a->stop, on_missing, a);
    return NULL;
}

/* The region worker: computes the pages faulting threads asked for. */
static void *worker_main(void *arg)
{
    tk_lazy_array *a = arg;
    for (;;) {
        int k = atomic_load(&a->kick);
        _Atomic uint32_t *slot = &a->ring[a->ring_head & (a->ring_cap - 1)];
        uint32_t v = atomic_load(slot);
        if (v) {
            atomic_store(slot, 0);
            a->ring_head++;
            size_t i = v - 1;
            if (claim(&a->state[i], 1u << P_REQUESTED) >= 0) array_compute(a, i, NULL, false);
            continue;
        }
        if (atomic_load(&a->stop)) break;
        tk__futex_wait(&a->kick, k);
    }
    return NULL;
}

/* A fault in a region-backed array: ask the worker for the page and wait
 * until it is there.  Runs in the faulting thread's signal handler:
 * async-signal-safe (atomics, futex calls). */
static tk_action array_fault(const tk_fault *f, void *arg)
{
    tk_lazy_array *a = arg;
    size_t i = ((uintptr_t)f->page - (uintptr_t)a->base) / a->ps;
    if (i >= a->npages) return TK_DECLINE;
    if (f->access == TK_ACCESS_EXEC) {
        /* a jump into the array: a computed page is not executable either,
         * and the retry would fault for ever */
        say("lazy array: an instruction fetch from page ", i, "; passed on");
        return TK_DECLINE;
    }
    atomic_int *st = &a->state[i];
    if (atomic_load(&a->orphan) && atomic_load(st) != P_DONE) {
        say("lazy array: page ", i,
            " is not computed and this child of fork() has no thread "
            "to compute it: passed on");
        return TK_DECLINE;
    }
    int s = P_EMPTY;
    if (atomic_compare_exchange_strong(st, &s, P_REQUESTED)) {
        size_t t = atomic_fetch_add(&a->ring_tail, 1);
        atomic_store(&a->ring[t & (a->ring_cap - 1)], (uint32_t)(i + 1));
        atomic_fetch_add(&a->kick, 1);
        tk__futex_wake(&a->kick, 1);
    }
    while ((s = atomic_load(st)) != P_DONE) {
        if (atomic_load(&a->stop)) return TK_DECLINE;
        tk__futex_wait(st, s);
    }
    return TK_RESUME;
}

static void array_free(tk_lazy_array *a)
{
    reg_remove(a);
    if (a->have_thread) {
        atomic_store(&a->stop, true);
        if (a->missing) {
            uint64_t one = 1;
            ssize_t w = write(a->stop_fd, &one, sizeof one);
            (void)w;
        } else {
            atomic_fetch_add(&a->kick, 1);
            tk__futex_wake(&a->kick, 1);
        }
        pthread_join(a->thread, NULL);
    }
    if (a->missing) {
        if (a->uffd >= 0) close(a->uffd);
        if (a->stop_fd >= 0) close(a->stop_fd);
        if (a->base) munmap(a->base, a->len);
    } else {
        if (a->view) tk_unmap2(a->region, a->view);
        if (a->region) tk_region_destroy(a->region);
    }
    free(a->buf);
    free((void *)a->ring);
    free((void *)a->state);
    free(a);
}

static int array_missing_init(tk_lazy_array *a)
{
    static const char who[] = "tk_lazy_array_create";
    const tk_probe_info *p = tk__probe();
    if (!p || p->uffd_access == TK_UFFD_NONE)
        return tk__failf(-EOPNOTSUPP,
                         "%s: backend uffd-missing: userfaultfd is not available "
                         "here",
                         who);
    a->missing = true;
    a->base = mmap(NULL, a->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->base == MAP_FAILED) {
        a->base = NULL;
        return tk__failf(-ENOMEM, "%s: cannot map %zu bytes", who, a->len);
    }
    a->uffd = tk__uffd_create(0);
    if (a->uffd < 0)
        return tk__failf(-EOPNOTSUPP,
                         "%s: backend uffd-missing: userfaultfd could not be "
                         "opened (%s)",
                         who, strerror(-a->uffd));
    /* non-blocking: poll may say readable for a fault whose thread has been
     * woken since, and a blocking read would then miss the stop */
    int fl = fcntl(a->uffd, F_GETFL);
    if (fl < 0 || fcntl(a->uffd, F_SETFL, fl | O_NONBLOCK) < 0)
        return tk__failf(-errno, "%s: fcntl on the userfaultfd failed", who);
    struct uffdio_register reg = {.range = {.start = (uintptr_t)a->base, .len = a->len},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(a->uffd, UFFDIO_REGISTER, &reg) < 0)
        return tk__failf(-errno, "%s: UFFDIO_REGISTER (MISSING) failed: %s", who, strerror(errno));
    if (!(reg.ioctls & (1ull << _UFFDIO_COPY)))
        return tk__failf(-EOPNOTSUPP, "%s: userfaultfd cannot place pages here", who);
    a->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (a->stop_fd < 0) return tk__failf(-errno, "%s: eventfd failed", who);
    if (posix_memalign((void **)&a->buf, hw_page(), a->ps))
        return tk__failf(-ENOMEM, "%s: out of memory", who);
    int err = tk__thread_start(&a->thread, missing_main, a); /* (a callback's fault is handled) */
    if (err) return tk__failf(err, "%s: cannot start the handler thread", who);
    a->have_thread = true;
    return 0;
}

static int array_region_init(tk_lazy_array *a, enum tk_mech mech)
{
    static const char who[] = "tk_lazy_array_create";
    tk_region_config rc = {.len = a->len,
                           .handler = array_fault,
                           .arg = a,
                           .mech = mech,
                           .page_size = a->ps,
                           .flags = TK_REGION_NOACCESS | TK_REGION_MAP2};
    int err = tk_region_create(&rc, &a->region);
    if (err) {
        a->region = NULL;
        return wrap(err, who);
    }
    a->base = tk_region_base(a->region);
    void *view;
    if ((err = tk_map2(a->region, TK_PROT_RW, &view))) return wrap(err, who);
    a->view = view;
    a->ring_cap = 1;
    while (a->ring_cap < a->npages) a->ring_cap <<= 1;
    a->ring = calloc(a->ring_cap, sizeof *a->ring);
    if (!a->ring) return tk__failf(-ENOMEM, "%s: out of memory", who);
    if ((err = tk__thread_start(&a->thread, worker_main, a)))
        return tk__failf(err, "%s: cannot start the worker thread", who);
    a->have_thread = true;
    return 0;
}

int tk_lazy_array_create(const tk_lazy_array_config *cfg, tk_lazy_array **out)
{
    static const char who[] = "tk_lazy_array_create";
    if (!cfg || !out)
        return tk__failf(-EINVAL, "%s: give a configuration and somewhere to put the array", who);
    size_t hw = hw_page(), ps = cfg->page_size ? cfg->page_size : hw;
    if (!cfg->fill) return tk__failf(-EINVAL, "%s: the fill callback is required", who);
    if (ps < hw || !pow2(ps))
        return tk__failf(-EINVAL,
                         "%s: page size %zu is not a power-of-two multiple of the hardware "
                         "page (%zu)",
                         who, cfg->page_size, hw);
    if (cfg->len == 0 || cfg->len % ps)
        return tk__failf(-EINVAL, "%s: length %zu is not a positive multiple of the page size %zu",
                         who, cfg->len, ps);
    if (cfg->len / ps >= UINT32_MAX)
        return tk__failf(-EINVAL, "%s: at most %u pages", who, UINT32_MAX - 1);
    if (cfg->backend > TK_LAZY_REGION)
        return tk__failf(-EINVAL, "%s: unknown backend %d", who, (int)cfg->backend);
    if (cfg->backend != TK_LAZY_REGION && cfg->mech != TK_MECH_AUTO)
        return tk__failf(-EINVAL, "%s: a mechanism is chosen only with backend TK_LAZY_REGION",
                         who);
    if ((unsigned)cfg->mech >= TK_MECH_COUNT_)
        return tk__failf(-EINVAL, "%s: unknown mechanism %d", who, (int)cfg->mech);
    if (!region_mech_ok(cfg->mech))
        return tk__failf(-EOPNOTSUPP,
                         "%s: mechanism %s cannot serve a lazy array (it needs no-access pages "
                         "and their faults: posix, uffd-sigbus or uffd-thread)",
                         who, tk_mech_name(cfg->mech));
    tk_lazy_array *a = calloc(1, sizeof *a);
    if (!a) return tk__failf(-ENOMEM, "%s: out of memory", who);
    a->len = cfg->len;
    a->ps = ps;
    a->npages = cfg->len / ps;
    a->fill = cfg->fill;
    a->arg = cfg->arg;
    a->on_error = cfg->on_error;
    a->uffd = a->stop_fd = -1;
    a->state = calloc(a->npages, sizeof *a->state);
    if (!a->state) {
        free(a);
        return tk__failf(-ENOMEM, "%s: out of memory", who);
    }
    int err;
    enum tk_lazy_backend b = cfg->backend;
    if (b == TK_LAZY_AUTO) {
        const tk_probe_info *p = tk__probe();
        b = p && p->uffd_access != TK_UFFD_NONE ? TK_LAZY_UFFD_MISSING : TK_LAZY_REGION;
    }
    err = b == TK_LAZY_UFFD_MISSING ? array_missing_init(a) : array_region_init(a, cfg->mech);
    if (err) {
        array_free(a);
        return err;
    }
    reg_add(a);
    *out = a;
    return 0;
}

int tk_lazy_array_destroy(tk_lazy_array *a)
{
    if (!a) return tk__fail(-EINVAL, "tk_lazy_array_destroy: the array is NULL");
    array_free(a);
    return 0;
}

void *tk_lazy_array_base(const tk_lazy_array *a)
{
    return a ? a->base : NULL;
}
size_t tk_lazy_array_len(const tk_lazy_array *a)
{
    return a ? a->len : 0;
}
size_t tk_lazy_array_page_size(const tk_lazy_array *a)
{
    return a ? a->ps : 0;
}
const char *tk_lazy_array_backend(const tk_lazy_array *a)
{
    if (!a) return NULL;
    return a->missing ? "uffd-missing" : tk_mech_name(tk_region_mech(a->region));
}
size_t tk_lazy_array_computed(const tk_lazy_array *a)
{
    return a ? atomic_load(&a->computed) : 0;
}
size_t tk_lazy_array_failed(const tk_lazy_array *a)
{
    if (!a) return 0;
    size_t n = 0;
    for (size_t i = 0; i < a->npages; i++) n += atomic_load(&a->state[i]) == P_FAILED;
    return n;
}

/* Computes the pages of [first, first + n) in a state of `from`, and waits
 * for those another thread is computing.  Returns the first error. */
static int array_run(tk_lazy_array *a, size_t first, size_t n, unsigned from, const char *who)
{
    if (!a) return tk__failf(-EINVAL, "%s: the array is NULL", who);
    if (atomic_load(&a->orphan))
        return tk__failf(-ECHILD, "%s: the array belongs to the parent of this fork() child", who);
    if (first > a->npages || n > a->npages - first)
        return tk__failf(-EINVAL, "%s: %zu pages from page %zu lie outside the array's %zu", who, n,
                         first, a->npages);
    unsigned char *buf = NULL;
    if (a->missing && posix_memalign((void **)&buf, hw_page(), a->ps))
        return tk__failf(-ENOMEM, "%s: out of memory", who);
    int first_err = 0;
    for (size_t i = first; i < first + n; i++) {
        atomic_int *st = &a->state[i];
        int err = 0;
        if (claim(st, from) >= 0) {
            err = array_compute(a, i, buf, true);
        } else {
            /* another thread's: wait until it is done or failed */
            int s;
            while ((s = atomic_load(st)) == P_BUSY || s == P_REQUESTED) {
                if (s == P_REQUESTED && claim(st, 1u << P_REQUESTED) >= 0) {
                    err = array_compute(a, i, buf, true);
                    break;
                }
                tk__futex_wait(st, s);
            }
            if (!err && atomic_load(st) == P_FAILED && !(from >> P_FAILED & 1)) err = -EIO;
        }
        if (err && !first_err)
            first_err = tk__failf(err, "%s: computing page %zu failed: %s", who, i, strerror(-err));
    }
    free(buf);
    return first_err;
}

int tk_lazy_array_fill(tk_lazy_array *a, size_t first, size_t n)
{
    return array_run(a, first, n, 1u << P_EMPTY | 1u << P_REQUESTED | 1u << P_FAILED,
                     "tk_lazy_array_fill");
}

int tk_lazy_array_retry(tk_lazy_array *a)
{
    if (!a) return tk__fail(-EINVAL, "tk_lazy_array_retry: the array is NULL");
    if (atomic_load(&a->orphan))
        return tk__fail(-ECHILD, "tk_lazy_array_retry: the array belongs to the parent of this "
                                 "fork() child");
    int first_err = 0;
    for (size_t i = 0; i < a->npages; i++) {
        if (atomic_load(&a->state[i]) != P_FAILED) continue;
        int err = array_run(a, i, 1, 1u << P_FAILED, "tk_lazy_array_retry");
        if (err && !first_err) first_err = err;
    }
    return first_err;
}

/* ========================================================================
 * The stack
 * ======================================================================== */

struct tk_lazy_stack {
    tk_region *region;
    unsigned char *base;
    size_t max, npages;
    atomic_size_t top;   /* pages open; page `top` is the guard */
    atomic_int opening;  /* a thread is opening the guard (top moves next) */
    tk_lazy_stack *next; /* the registry (reg_stacks) */
};

/* fork_child's part for the stacks (the registry's lock is held).  The
 * fork may have come while a thread of the parent opened a guard (holding
 * `opening`, the page opened or not, top not moved yet) or trimmed the
 * stack (pages made no-access, top not moved back yet).  That thread is
 * not in the child: without this, the child's first touch of the guard
 * would wait for it for ever, or a touch of a page below a stale top would
 * fault for ever.  So top is found again from the pages' protections (the
 * region's page states, which a fork copies whole), and pages a trim had
 * closed but not yet dropped are dropped (a guard opens on zeros). */
static void stacks_after_fork(void)
{
    size_t hw = hw_page();
    for (tk_lazy_stack *s = reg_stacks; s; s = s->next) {
        size_t was = atomic_load(&s->top), top = was;
        while (top > 0 && tk_protection(s->region, s->base + (top - 1) * hw) == TK_PROT_NONE) top--;
        if (top < was) madvise(s->base + top * hw, (was - top) * hw, MADV_DONTNEED);
        while (top < s->npages && tk_protection(s->region, s->base + top * hw) != TK_PROT_NONE)
            top++;
        atomic_store(&s->top, top);
        atomic_store(&s->opening, 0);
    }
}

/* A fault in the stack's reservation: the guard opens, a page below it was
 * opened meanwhile, anything above is passed on.  Runs in the faulting
 * thread's signal handler (or on uffd-thread's service thread):
 * async-signal-safe (tk_protect, atomics, the signal mask, sched_yield:
 * system calls).
 *
 * One thread at a time opens the guard, and moves top past it before it
 * lets go: a thread that uses the page it opened and touches the next one
 * finds that page to be the guard, or the guard being opened (it waits for
 * top to move), never "above the guard".  The opener's asynchronous
 * signals are deferred while it holds `opening`, so a handler of the
 * program that grows the stack in the same thread cannot wait for it. */
static tk_action stack_fault(const tk_fault *f, void *arg)
{
    tk_lazy_stack *s = arg;
    size_t p = ((uintptr_t)f->page - (uintptr_t)s->base) / hw_page();
    if (f->access == TK_ACCESS_EXEC) {
        /* a jump into the stack's memory: opening the page would not make
         * it executable, and the retry would fault for ever */
        say("lazy stack: an instruction fetch at byte ", (uintptr_t)f->addr - (uintptr_t)s->base,
            "; passed on");
        return TK_DECLINE;
    }
    for (;;) {
        size_t top = atomic_load(&s->top);
        if (p < top) return TK_RESUME;
        if (p > top || p >= s->npages) {
            if (p < s->npages && atomic_load(&s->opening)) { /* top is about to move */
                sched_yield();
                continue;
            }
            if (atomic_load(&s->top) != top) continue; /* moved meanwhile */
            say(p >= s->npages ? "lazy stack: a touch past its reservation, at byte "
                               : "lazy stack: a touch above its guard page, at byte ",
                (uintptr_t)f->addr - (uintptr_t)s->base, "; passed on");
            return TK_DECLINE;
        }
        uint64_t mask;
        tk__defer_signals(&mask);
        if (atomic_exchange(&s->opening, 1)) { /* another thread opens it */
            tk__restore_signals(&mask);
            sched_yield();
            continue;
        }
        bool ok = atomic_load(&s->top) != top || tk_unprot(s->region, f->page, hw_page()) == 0;
        if (ok) atomic_compare_exchange_strong(&s->top, &top, top + 1);
        atomic_store(&s->opening, 0);
        tk__restore_signals(&mask);
        if (!ok) return TK_DECLINE;
    }
}

int tk_lazy_stack_create(const tk_lazy_stack_config *cfg, tk_lazy_stack **out)
{
    static const char who[] = "tk_lazy_stack_create";
    if (!cfg || !out)
        return tk__failf(-EINVAL, "%s: give a configuration and somewhere to put the stack", who);
    if ((unsigned)cfg->mech >= TK_MECH_COUNT_)
        return tk__failf(-EINVAL, "%s: unknown mechanism %d", who, (int)cfg->mech);
    if (!region_mech_ok(cfg->mech))
        return tk__failf(-EOPNOTSUPP,
                         "%s: mechanism %s cannot serve a lazy stack (it needs no-access pages "
                         "and their faults: posix, uffd-sigbus or uffd-thread)",
                         who, tk_mech_name(cfg->mech));
    size_t hw = hw_page(), max = cfg->max_size ? cfg->max_size : (size_t)1 << 30;
    if (max > ((size_t)1 << 46))
        return tk__failf(-EINVAL, "%s: max_size %zu is more than 64 TiB", who, max);
    max = (max + hw - 1) / hw * hw;
    tk_lazy_stack *s = calloc(1, sizeof *s);
    if (!s) return tk__failf(-ENOMEM, "%s: out of memory", who);
    /* a page more than max, never opened: a touch just past the stack's
     * end faults (it is passed on, as a touch of a thread stack's guard)
     * instead of reaching whatever is mapped after it */
    tk_region_config rc = {.len = max + hw,
                           .handler = stack_fault,
                           .arg = s,
                           .mech = cfg->mech,
                           .flags = TK_REGION_NOACCESS};
    int err = tk_region_create(&rc, &s->region);
    if (err) {
        err = wrap(err, who);
        free(s);
        return err;
    }
    s->base = tk_region_base(s->region);
    s->max = max;
    s->npages = max / hw;
    pthread_once(&reg_once, reg_init);
    reg_lock_take();
    s->next = reg_stacks;
    reg_stacks = s;
    reg_lock_drop();
    *out = s;
    return 0;
}

int tk_lazy_stack_destroy(tk_lazy_stack *s)
{
    if (!s) return tk__fail(-EINVAL, "tk_lazy_stack_destroy: the stack is NULL");
    reg_lock_take();
    for (tk_lazy_stack **p = &reg_stacks; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    reg_lock_drop();
    tk_region_destroy(s->region);
    free(s);
    return 0;
}

void *tk_lazy_stack_base(const tk_lazy_stack *s)
{
    return s ? s->base : NULL;
}
size_t tk_lazy_stack_max(const tk_lazy_stack *s)
{
    return s ? s->max : 0;
}
size_t tk_lazy_stack_pages(const tk_lazy_stack *s)
{
    return s ? atomic_load(&s->top) : 0;
}
enum tk_mech tk_lazy_stack_mech(const tk_lazy_stack *s)
{
    return s ? tk_region_mech(s->region) : TK_MECH_AUTO;
}

int tk_lazy_stack_trim(tk_lazy_stack *s, size_t used)
{
    static const char who[] = "tk_lazy_stack_trim";
    if (!s) return tk__failf(-EINVAL, "%s: the stack is NULL", who);
    if (used > s->max)
        return tk__failf(-EINVAL, "%s: %zu bytes used is beyond the reservation of %zu", who, used,
                         s->max);
    size_t hw = hw_page(), keep = (used + hw - 1) / hw, top = atomic_load(&s->top);
    if (keep >= top) return 0;
    unsigned char *from = s->base + keep * hw;
    size_t len = (top - keep) * hw;
    /* no-access first, so nothing reads the pages between the two calls */
    int err = tk_protect(s->region, from, len, TK_PROT_NONE);
    if (!err) err = tk_discard(s->region, from, len);
    if (err) return wrap(err, who);
    atomic_store(&s->top, keep);
    return 0;
}

/* ========================================================================
 * Cells with full/empty bits
 * ======================================================================== */

struct tk_lazy_cells {
    tk_region *region;
    unsigned char *base, *view;
    size_t n, size;
    atomic_int *state; /* per cell, C_* */
    /* per cell: readers blocked (low 32 bits) since the cell was last filled
     * (the generation, high 32 bits): a reader that left its wait by
     * siglongjmp never takes itself out, and counts until the next put */
    _Atomic uint64_t *waiting;
    /* in a child of fork(): the memory is the parent's too (MAP2 shares
     * its memfd), so the child neither puts nor takes, and a load of a cell
     * empty at the fork is passed on instead of waiting for ever */
    atomic_bool orphan;
    tk_lazy_cells *next; /* the registry (reg_cells) */
};

/* fork_child's part for the cells (the registry's lock is held). */
static void cells_orphan(void)
{
    for (tk_lazy_cells *c = reg_cells; c; c = c->next) atomic_store(&c->orphan, true);
}

/* A fault on a cell: a load from an empty cell waits until it is full; a
 * store is passed on (cells are filled by tk_lazy_cell_put).  Runs in the
 * faulting thread's signal handler (or, for a store to a full cell on
 * uffd-thread, on its service thread): async-signal-safe (atomics, futex
 * calls, a raw write to stderr). */
static tk_action cells_fault(const tk_fault *f, void *arg)
{
    tk_lazy_cells *c = arg;
    size_t i = ((uintptr_t)f->addr - (uintptr_t)c->base) / c->size;
    if (i >= c->n) return TK_DECLINE;
    if (f->access == TK_ACCESS_WRITE) {
        say("lazy cells: a store to cell ", i,
            "; cells are filled by tk_lazy_cell_put, not written: passed on");
        return TK_DECLINE;
    }
    if (f->access == TK_ACCESS_EXEC) {
        /* a full cell is readable, never executable: the retry would fault
         * for ever */
        say("lazy cells: an instruction fetch from cell ", i, "; passed on");
        return TK_DECLINE;
    }
    atomic_int *st = &c->state[i];
    int s;
    if ((s = atomic_load(st)) == C_FULL) return TK_RESUME;
    if (atomic_load(&c->orphan)) {
        say("lazy cells: a load of cell ", i,
            ", empty when this process was forked: nothing can fill it here; passed on");
        return TK_DECLINE;
    }
    uint64_t w = atomic_fetch_add(&c->waiting[i], 1);
    while ((s = atomic_load(st)) != C_FULL) tk__futex_wait(st, s);
    /* out of the count, unless the put that filled the cell began a new one */
    uint64_t v = atomic_load(&c->waiting[i]);
    while (v >> 32 == w >> 32 && !atomic_compare_exchange_weak(&c->waiting[i], &v, v - 1)) {
    }
    return TK_RESUME;
}

int tk_lazy_cells_create(const tk_lazy_cells_config *cfg, tk_lazy_cells **out)
{
    static const char who[] = "tk_lazy_cells_create";
    if (!cfg || !out)
        return tk__failf(-EINVAL, "%s: give a configuration and somewhere to put the cells", who);
    if ((unsigned)cfg->mech >= TK_MECH_COUNT_)
        return tk__failf(-EINVAL, "%s: unknown mechanism %d", who, (int)cfg->mech);
    if (!region_mech_ok(cfg->mech))
        return tk__failf(-EOPNOTSUPP,
                         "%s: mechanism %s cannot serve cells (they need no-access pages and "
                         "their faults: posix, uffd-sigbus or uffd-thread)",
                         who, tk_mech_name(cfg->mech));
    size_t hw = hw_page();
    if (cfg->ncells == 0) return tk__failf(-EINVAL, "%s: ncells is 0", who);
    size_t size = cfg->cell_size;
    int err = tk_init(); /* the fast paths in force are settled there */
    if (err) return wrap(err, who);
    bool subpage = tk_fast_paths() & TK_FAST_SUBPAGE;
    if (!size)
        size = (cfg->mech == TK_MECH_AUTO || cfg->mech == TK_MECH_POSIX) && subpage ? 64 : hw;
    if (size < 64 || !pow2(size))
        return tk__failf(-EINVAL, "%s: cell size %zu is not a power of two from 64 bytes", who,
                         size);
    enum tk_mech mech = cfg->mech;
    if (size < hw) {
        if (mech != TK_MECH_AUTO && mech != TK_MECH_POSIX)
            return tk__failf(-EINVAL,
                             "%s: cells of %zu bytes share hardware pages, which needs sub-page "
                             "protection (mechanism posix); %s protects whole pages: use "
                             "cell_size %zu or more",
                             who, size, tk_mech_name(mech), hw);
        if (!subpage)
            return tk__failf(-EOPNOTSUPP,
                             "%s: cells of %zu bytes need the sub-page emulation "
                             "(TK_FAST_SUBPAGE), which is off (TRAPKIT_FAST); without it a "
                             "reader could see an empty cell as zeros: use cell_size %zu",
                             who, size, hw);
        mech = TK_MECH_POSIX;
    }
    if (cfg->ncells > (SIZE_MAX - hw) / size)
        return tk__failf(-EINVAL, "%s: %zu cells of %zu bytes do not fit the address space", who,
                         cfg->ncells, size);
    size_t len = (cfg->ncells * size + hw - 1) / hw * hw;
    tk_lazy_cells *c = calloc(1, sizeof *c);
    if (!c) return tk__failf(-ENOMEM, "%s: out of memory", who);
    c->n = cfg->ncells;
    c->size = size;
    c->state = calloc(c->n, sizeof *c->state);
    c->waiting = calloc(c->n, sizeof *c->waiting);
    if (!c->state || !c->waiting) err = tk__failf(-ENOMEM, "%s: out of memory", who);
    tk_region_config rc = {.len = len,
                           .handler = cells_fault,
                           .arg = c,
                           .mech = mech,
                           .page_size = size < hw ? size : 0,
                           .flags = TK_REGION_MAP2 | (size < hw ? 0 : TK_REGION_NOACCESS)};
    if (!err && (err = tk_region_create(&rc, &c->region))) {
        c->region = NULL;
        err = wrap(err, who);
    }
    if (!err) {
        c->base = tk_region_base(c->region);
        /* an access trapkit cannot emulate is passed on rather than stepped
         * with the hardware page open: another thread could read an empty
         * cell of it as zeros meanwhile */
        if (size < hw) c->region->rg_sub_strict = true;
        /* sub-page regions cannot start no-access in one step */
        if (size < hw && (err = tk_protect(c->region, c->base, len, TK_PROT_NONE)))
            err = wrap(err, who);
    }
    void *view = NULL;
    if (!err && (err = tk_map2(c->region, TK_PROT_RW, &view))) err = wrap(err, who);
    c->view = view;
    if (err) {
        tk_lazy_cells_destroy(c);
        return err;
    }
    pthread_once(&reg_once, reg_init);
    reg_lock_take();
    c->next = reg_cells;
    reg_cells = c;
    reg_lock_drop();
    *out = c;
    return 0;
}

int tk_lazy_cells_destroy(tk_lazy_cells *c)
{
    if (!c) return tk__fail(-EINVAL, "tk_lazy_cells_destroy: the cells are NULL");
    reg_lock_take();
    for (tk_lazy_cells **p = &reg_cells; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    reg_lock_drop();
    if (c->view) tk_unmap2(c->region, c->view);
    if (c->region) tk_region_destroy(c->region);
    free((void *)c->state);
    free((void *)c->waiting);
    free(c);
    return 0;
}

size_t tk_lazy_cells_count(const tk_lazy_cells *c)
{
    return c ? c->n : 0;
}
size_t tk_lazy_cells_cell_size(const tk_lazy_cells *c)
{
    return c ? c->size : 0;
}
enum tk_mech tk_lazy_cells_mech(const tk_lazy_cells *c)
{
    return c ? tk_region_mech(c->region) : TK_MECH_AUTO;
}
void *tk_lazy_cell_addr(const tk_lazy_cells *c, size_t i)
{
    return c && i < c->n ? c->base + i * c->size : NULL;
}

/* Moves cell i from `from` to `to`, waiting while it is in another state. */
static void cell_move(tk_lazy_cells *c, size_t i, int from, int to)
{
    atomic_int *st = &c->state[i];
    for (;;) {
        int s = from;
        if (atomic_compare_exchange_strong(st, &s, to)) return;
        tk__futex_wait(st, s);
    }
}

static void cell_set(tk_lazy_cells *c, size_t i, int to)
{
    atomic_store(&c->state[i], to);
    wake_all(&c->state[i]);
}

/* put's and take's arguments: 0, or the error (with its message). */
static int cell_args(const tk_lazy_cells *c, size_t i, const void *buf, size_t len, const char *who,
                     const char *buf_name)
{
    if (!c || i >= c->n) return tk__failf(-EINVAL, "%s: no cell %zu", who, i);
    if (atomic_load(&c->orphan))
        return tk__failf(-ECHILD,
                         "%s: the cells belong to the parent of this fork() child (their memory "
                         "is shared with it)",
                         who);
    if (len && !buf) return tk__failf(-EINVAL, "%s: the %s is NULL", who, buf_name);
    if (len > c->size)
        return tk__failf(-EINVAL, "%s: %zu bytes do not fit a cell of %zu", who, len, c->size);
    return 0;
}

int tk_lazy_cell_put(tk_lazy_cells *c, size_t i, const void *val, size_t len)
{
    static const char who[] = "tk_lazy_cell_put";
    int bad = cell_args(c, i, val, len, who, "value");
    if (bad) return bad;
    cell_move(c, i, C_EMPTY, C_FILLING);
    unsigned char *v = c->view + i * c->size;
    if (len) memcpy(v, val, len);
    memset(v + len, 0, c->size - len);
    int err = tk_protect(c->region, c->base + i * c->size, c->size, TK_PROT_READ);
    if (err) {
        cell_set(c, i, C_EMPTY);
        return wrap(err, who);
    }
    cell_set(c, i, C_FULL);
    /* every reader blocked on it is released: a new count begins */
    uint64_t w = atomic_load(&c->waiting[i]);
    while (!atomic_compare_exchange_weak(&c->waiting[i], &w, ((w >> 32) + 1) << 32)) {
    }
    return 0;
}

int tk_lazy_cell_take(tk_lazy_cells *c, size_t i, void *out, size_t len)
{
    static const char who[] = "tk_lazy_cell_take";
    int bad = cell_args(c, i, out, len, who, "buffer");
    if (bad) return bad;
    cell_move(c, i, C_FULL, C_EMPTYING);
    int err = tk_protect(c->region, c->base + i * c->size, c->size, TK_PROT_NONE);
    if (err) {
        cell_set(c, i, C_FULL);
        return wrap(err, who);
    }
    unsigned char *v = c->view + i * c->size;
    if (len) memcpy(out, v, len);
    memset(v, 0, c->size);
    cell_set(c, i, C_EMPTY);
    return 0;
}

int tk_lazy_cell_full(const tk_lazy_cells *c, size_t i)
{
    if (!c || i >= c->n) return tk__failf(-EINVAL, "tk_lazy_cell_full: no cell %zu", i);
    return atomic_load(&c->state[i]) == C_FULL;
}

int tk_lazy_cell_waiting(const tk_lazy_cells *c, size_t i)
{
    if (!c || i >= c->n) return 0;
    return (int)(uint32_t)atomic_load(&c->waiting[i]);
}
