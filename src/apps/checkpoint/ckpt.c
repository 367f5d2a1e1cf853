/* src/apps/checkpoint/ckpt.c - concurrent and incremental checkpointing
 * (trapkit/checkpoint.h).
 *
 * Per page of the areas, one byte of state:
 *
 *   DIRTY     written since the last snapshot (or never saved); writable
 *   PENDING   in the snapshot being taken, not copied yet; write-protected
 *   HOLE      in it, not populated (zero): nothing to copy; write-protected
 *   COPYING   being written to the image by the background thread
 *   TAKEN     being copied by a writer
 *   CLEAN     saved (in the running or a past snapshot); write-protected, so
 *             the first write after it faults and makes it DIRTY
 *   OPENING   while the areas are being armed: a writer is opening it
 *   REOPENED  while the areas are being armed: written after it was
 *             protected; writable, to be protected again
 *
 * tk_ckpt_start arms the areas in steps while the program runs (phase
 * ARMING): chunk by chunk, the pages of the snapshot (all, or the DIRTY
 * ones for an incremental one) become PENDING and are write-protected; a
 * write to a page already armed is not held: the writer reopens it (the
 * write belongs to the snapshot) and it is armed again in the next round,
 * until few enough pages are reopened in a round.  Then the pause (phase
 * PAUSED): writers that fault wait, those inside the handler are waited
 * for, the last reopened pages are protected again - that is the instant
 * - and phase = RUNNING.  Consistency: a write is in the image exactly when
 * it completed before its page's last protection; a write that faults on a
 * page armed for good waits for the end of the pause, and so does every
 * write after it in its thread, so the writes in the image are closed under
 * happens-before (a write reopening a page in a round is itself in the
 * image).  Pages found not populated right after their protection (a
 * PAGEMAP_SCAN of the chunk: neither present nor swapped, or the shared
 * zero page) become HOLEs: zero in the image, never read or written.  Then
 * a background thread copies PENDING pages in order; a writer that reaches
 * a PENDING page first copies it itself and goes on - with the pages
 * around it in its aligned block of 16 (take_neighbours), so that a program
 * writing its pages takes one fault per block, not one per page.  Without
 * TK_CKPT_TRACK copied pages are unprotected again in batches.
 *
 * The background thread writes runs of up to BATCH pages to the image
 * straight from memory, with one pwritev and direct I/O where the file
 * system allows (no copy, no page cache, no write-back thread competing
 * with the program for the CPU; buffered otherwise); the pages stay
 * write-protected meanwhile, so then it computes their CRC-32C from memory
 * and marks them CLEAN.  A page that is all zero is not written (a hole of
 * the file).  With TK_CKPT_COMPRESS it compresses each page (LZ4) into a
 * staging buffer written with direct I/O when full; a page's place is in
 * the directory.  A writer copies its page into a pool slot (one memcpy,
 * in its fault handler or on trapkit's handler thread) and queues it for
 * the background thread, which computes its CRC and writes it when its
 * sweep reaches the page's place, in the same pwritev as the pages around it
 * (uncompressed; compressed, as it drains the queue): the disk sees the
 * sweep's long sequential writes only, never a write per copy at scattered
 * places (whose write-back throttled the thread to a fraction of the disk),
 * and a slot once written takes a writer's next copy (a stack of free
 * slots): memory populated once serves many copies, since a fresh page
 * costs ~13 us where the hypervisor has taken it back (free page
 * reporting; docs/design.md), 0.75 us to copy into one in place.  A writer
 * never waits for the background thread: a page the thread is writing
 * (COPYING) is taken over by the writer, which copies it itself, and the
 * thread, seeing the state changed, leaves the page to the writer's copy,
 * written after its own.  So a writer waits neither for the disk, nor for
 * the kernel's dirty-page throttling, nor for a background thread the
 * scheduler has put aside.
 *
 * The background thread runs at SCHED_IDLE (unless TK_CKPT_FAIR): on a CPU
 * nothing else wants, preempted at once by a program thread that wakes up
 * there.  A thread that low may be off the CPU for long, so it holds no
 * lock a writer can wait for while it is that low: copied pages are
 * unprotected (without TK_CKPT_TRACK) by the helper, a thread that does
 * nothing else but populate the writers' pool slots ahead of them (where
 * the helper follows the writers, the pool thread does that instead), and
 * tk_unprot and tk_protect hold the region's lock across their system
 * call, so the helper and the arming thread make theirs at the program's
 * priority where they may go back up to it (see lower_priority).
 * TK_CKPT_TIMING (or TRAPKIT_CKPT_TIMING=1) times each part of the
 * write-fault path; tools/ckpt_stall.c is the driver that found where a
 * writer's time goes (docs/design.md).
 *
 * The extra memory during a snapshot is, at its peak, one page per page a
 * writer copied and the background thread had not yet written (the slots
 * are used again as written and given back when the snapshot ends;
 * neighbours are copied only while fewer than BACKLOG pages wait), and
 * POOL_AHEAD pool pages populated ahead (POOL_INSTANT while arming),
 * plus the per-page arrays, touched at the first snapshot and kept: state
 * (1 byte), CRC (4), pool slot (4, per copied page), free-slot link (4), bitmaps, and with
 * TK_CKPT_COMPRESS each page's place (8); the compression staging buffer
 * (1 MiB); fork's is the copy-on-write copies.
 *
 * precopy works otherwise: nothing is protected while it copies, the
 * kernel tracks the writes, and the instant copies the few pages written
 * last; see "precopy" below.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <lz4.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/checkpoint/chain.h"
#include "apps/checkpoint/image.h"
#include "core/internal.h"
#include "core/region_impl.h" /* tk__defer_signals */
#include "os/linux/os.h"
#include "trapkit/checkpoint.h"
#include "trapkit/probe.h"
#include "trapkit/region.h"

/* tk_ckpt_stats up to duration_ns: the struct of the TRAPKIT_0 version
 * node, which programs linked against that node pass. */
#define STATS_V0 offsetof(tk_ckpt_stats, thread_cpu_ns)

/* The default versions (TRAPKIT_0.2) fill the whole struct; the TRAPKIT_0
 * ones, for programs built before it grew, the fields up to duration_ns
 * (trapkit/checkpoint.h).  Both versions of each are exported (symver);
 * the static library's programs get the default one. */
#define TK_SYMVER(impl, name, node) __asm__(".symver " #impl ", " #name node)
TK_SYMVER(tk_ckpt_poll_v2, tk_ckpt_poll, "@@TRAPKIT_0.2");
TK_SYMVER(tk_ckpt_poll_v0, tk_ckpt_poll, "@TRAPKIT_0");
TK_SYMVER(tk_ckpt_wait_v2, tk_ckpt_wait, "@@TRAPKIT_0.2");
TK_SYMVER(tk_ckpt_wait_v0, tk_ckpt_wait, "@TRAPKIT_0");
TK_SYMVER(tk_ckpt_snapshot_v2, tk_ckpt_snapshot, "@@TRAPKIT_0.2");
TK_SYMVER(tk_ckpt_snapshot_v0, tk_ckpt_snapshot, "@TRAPKIT_0");
int tk_ckpt_poll_v2(tk_ckpt *c, tk_ckpt_stats *st);
int tk_ckpt_poll_v0(tk_ckpt *c, void *st);
int tk_ckpt_wait_v2(tk_ckpt *c, tk_ckpt_stats *st);
int tk_ckpt_wait_v0(tk_ckpt *c, void *st);
int tk_ckpt_snapshot_v2(tk_ckpt *c, int fd, unsigned flags, tk_ckpt_stats *st);
int tk_ckpt_snapshot_v0(tk_ckpt *c, int fd, unsigned flags, void *st);

enum {
    ST_DIRTY = 0,
    ST_PENDING = 1,
    ST_COPYING = 2,
    ST_CLEAN = 3,
    ST_TAKEN = 4,
    ST_OPENING = 5,
    ST_REOPENED = 6,
    ST_HOLE = 7
};
enum { PHASE_RUNNING = 0, PHASE_PAUSED = 1, PHASE_ARMING = 2 };
/* With TK_CKPT_CALLER_INSTANT, the instant's progress (tk_ckpt.cut): the
 * background thread arms, then is READY and waits; tk_ckpt_instant takes
 * it (TAKING) and it is DONE - or the snapshot was cancelled while READY. */
enum { CUT_ARMING = 0, CUT_READY = 1, CUT_TAKING = 2, CUT_DONE = 3 };
#ifdef TK_CKPT_TEST_TAKEOVER
atomic_long tk__ckpt_takeovers; /* pages writers took from the background thread */
atomic_long tk__ckpt_reused;    /* writers' copies into a slot written before */
#endif
#define UNPROT_BATCH 64
#define BATCH 64         /* pages the background thread writes with one pwritev */
#define POOL_AHEAD 512   /* pool pages kept populated ahead of the writers' next copies */
#define POPULATE_STEP 64 /* pool pages populated with one call */
/* pool pages populated while arming, for the copies right after the instant */
#define POOL_INSTANT 2048
#define NEIGHBOURS 16      /* a writer's fault copies and opens up to this aligned block */
#define NEIGHBOURS_MAX 64  /* TRAPKIT_CKPT_BLOCK's largest */
#define BACKLOG 2048       /* copies queued, not yet written, beyond which a fault takes one page */
#define DIRECT_RUN 8       /* writers' copies in a run this long are written directly */
#define OPEN_RING 1024     /* ranges of copied pages waiting for the helper thread */
#define ARM_CHUNK 512      /* pages armed at a time (one protection, one scan) */
#define ARM_ROUNDS 8       /* rounds of re-arming reopened pages at most */
#define ARM_FINAL 32       /* reopened pages few enough to protect in the pause */
#define STAGE (1u << 20)   /* the compressed data's staging buffer */
#define PRECOPY_FINAL 2048 /* pages written in a round few enough to copy at the instant */
#define PRECOPY_ROUNDS 16  /* rounds at most before the instant */
#define PRECOPY_CUTS 8     /* collections at the instant before protecting the areas */
#define PRECOPY_RUN 256    /* pages a round writes with one call at most */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
enum { COPIER_IDLE, COPIER_NICE, COPIER_FAIR };

struct tk_ckpt {
    struct tk_ckpt_area areas[TK_IMG_MAX_AREAS];
    tk_region *regions[TK_IMG_MAX_AREAS];
    size_t first[TK_IMG_MAX_AREAS + 1]; /* global index of each area's first page */
    size_t nareas, npages, ps;
    unsigned shift;
    enum tk_ckpt_mech mech;
    bool track;
    bool timing;            /* TK_CKPT_TIMING: where writers' faults spend their time */
    int copier;             /* COPIER_*: the background thread's scheduling */
    bool follow;            /* the threads follow the writers' CPU (see follow_writer) */
    _Atomic int writer_cpu; /* the CPU a writer last ran on, or -1 */
    bool scan;              /* PAGEMAP_SCAN finds pages never populated */
    unsigned block;         /* pages a writer's fault copies and opens at most (a power of 2) */
    tk_ckpt_progress_fn progress;
    void *progress_arg;

    _Atomic uint8_t *state;
    uint32_t *crc;
    uint64_t *loc;                   /* compressed: each data page's offset << 20 | length */
    unsigned char *pool;             /* writers' copies: npages pages reserved, touched as used */
    uint32_t *slot_of;               /* a page's pool slot, once a writer copied it */
    _Atomic uint64_t copies_written; /* writers' copies written to the image */
    /* Written slots are used again (populated already): a stack of them,
     * free_next[s] the slot below s (+1, 0 at the bottom); its top word is
     * the top slot + 1 (0: empty) and a count of pops and pushes above it,
     * so a writer's pop that raced with a pop and a push fails its CAS. */
    _Atomic uint64_t free_top;
    _Atomic uint32_t *free_next;
    _Atomic uint64_t pool_next;  /* slots never used before, handed out in order */
    _Atomic uint32_t *queue;     /* entry q: the page of the q-th copy, UINT32_MAX
                                    until its writer has copied it */
    _Atomic uint64_t queue_tail; /* entries handed out */
    _Atomic uint64_t queue_head; /* entries written (the background thread's) */
    _Atomic uint64_t pool_want;  /* pool slots to keep populated (the background thread's) */
    _Atomic uint64_t pool_ready; /* pool slots populated (the helper's) */
    uint64_t *saved;             /* bitmap: the snapshot's pages (atomic ops while arming) */
    uint64_t *zero;              /* bitmap: of those, HOLEs at the instant */
    uint64_t *prefix;            /* data pages (saved, not zero) before each bitmap word */
    size_t words;
    unsigned char *stage; /* compressed data waiting to be written (STAGE bytes) */
    size_t staged;
    uint64_t append; /* compressed: where the next staged data goes in the image */

    uint64_t lineage, seq, base_seq; /* base_seq: the last complete snapshot, 0 none */
    atomic_int phase;
    /* Writers between reading the phase and opening their page, by the
     * parity of the epoch they entered in: a snapshot starts a new epoch and
     * waits for the old one's, without waiting for the new writers. */
    _Atomic uint64_t epoch;
    atomic_int inflight[2];
    atomic_long reopened; /* pages reopened while arming, this round */

    pthread_mutex_t lock; /* start/wait/destroy */
    bool thread_live;
    pthread_t thread;
    /* The helper: a thread at the program's priority that unprotects copied
     * pages (without TK_CKPT_TRACK) and populates the writers' pool slots
     * ahead of them (the pool thread's, where there is one), the two things
     * that take locks a writer may wait for (the region's, the address
     * space's), so the background thread, which may run at the lowest
     * priority, takes none.  The background thread posts the ranges and the
     * pool's target. */
    atomic_bool helper_live; /* read by writers (buffer_page) */
    pthread_t helper;
    size_t open_from[OPEN_RING], open_to[OPEN_RING];
    _Atomic uint64_t open_tail; /* ranges posted */
    _Atomic uint64_t open_head; /* ranges done */
    atomic_int help_word;       /* futex: bumped at each post */
    atomic_bool help_stop;
    /* The pool thread: populates the writers' pool slots ahead of them
     * (pool_want, posted by writers and the background thread), where the
     * helper follows the writers.  It does not follow them: populating a
     * page the host has taken back costs 5-13 us on a virtual machine, time
     * taken from the writers on their CPU when their faults need it most
     * (the first snapshot after a start, whose pool is all such pages). */
    bool pool_thread;        /* TRAPKIT_CKPT_POOLER=0: none */
    atomic_bool pooler_live; /* read by writers (buffer_page) */
    pthread_t pooler;
    atomic_int pool_word;       /* futex: bumped at each new target */
    pid_t child;                /* the fork child not yet reaped, or 0 (under child_lock) */
    pthread_mutex_t child_lock; /* tk_ckpt_cancel kills only a child not yet reaped */
    bool close_fds;             /* TK_CKPT_CLOSE_FDS */
    atomic_bool cancel;         /* tk_ckpt_cancel asked the running snapshot to stop */

    /* the running (or last) snapshot */
    int fd, dfd; /* the image; dfd: the same file opened for direct I/O, or fd */
    bool incremental, compress;
    /* precopy: the image's pages at their indices (entries, as compressed
     * images have); the pages each collection found written; those copied
     * at the instant (into pool slots); one area's tk_dirty bitmap */
    bool precopy, located;
    uint64_t *written, *final, *abits;
    bool async_arm;                        /* TK_CKPT_ASYNC_START: the background thread arms */
    atomic_bool caller_instant;            /* TK_CKPT_CALLER_INSTANT: tk_ckpt_instant cuts */
    atomic_int cut;                        /* CUT_*, with caller_instant */
    int cut_err;                           /* the instant's error (under cut_lock) */
    pthread_mutex_t cut_lock;              /* cut becoming DONE, cut_err */
    pthread_cond_t cut_cond;               /* signalled when cut is DONE, or on cancel */
    _Atomic uint64_t nsaved, nzero, ndata; /* held, held as zero, data pages */
    uint64_t data_off, t_start;
    _Atomic uint64_t t_instant_real, t_instant_mono; /* the snapshot instant, 0 before */
    uint64_t cpu0; /* CLOCK_THREAD_CPUTIME_ID of the thread that copies, when it began */
    atomic_bool running;
    atomic_int error;
    int phase_fd; /* readable while the phase is running (wait_while_paused) */
    _Atomic uint64_t by_thread, by_writers, faults, max_stall, bytes, done, pause_ns, duration;
    _Atomic uint64_t protect_ns, protect_pause_ns, rounds, image_bytes, data_bytes;
    _Atomic uint64_t thread_cpu, thread_io; /* the background thread's */
    /* with timing: sums over the snapshot's faults (tk_ckpt_stats.stall_*) */
    _Atomic uint64_t st_total, st_pause, st_page, st_copy, st_unprot;
};

static const char *const mech_names[TK_CKPT_COUNT_] = {
    "auto", "uffd-thread", "uffd-sigbus", "posix", "fork", "stop-the-world", "precopy"};

const char *tk_ckpt_mech_name(enum tk_ckpt_mech m)
{
    return (unsigned)m < TK_CKPT_COUNT_ ? mech_names[m] : "?";
}

enum tk_ckpt_mech tk_ckpt_mech_parse(const char *name)
{
    for (int i = 0; i < TK_CKPT_COUNT_; i++)
        if (name && !strcmp(name, mech_names[i])) return (enum tk_ckpt_mech)i;
    return TK_CKPT_COUNT_;
}

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writers wait out a pause on phase_fd, an eventfd that is readable
 * (counter non-zero) while the phase is running: drained before a pause
 * begins, written when it ends.  poll() is async-signal-safe, and a level
 * wakes every waiter.  [signal-safe] */
static void wait_while_paused(struct tk_ckpt *c)
{
    struct pollfd pfd = {.fd = c->phase_fd, .events = POLLIN};
    if (atomic_load(&c->phase) == PHASE_PAUSED) poll(&pfd, 1, 100);
}

static void set_phase(struct tk_ckpt *c, int phase)
{
    uint64_t v = 1;
    if (phase == PHASE_PAUSED) {
        while (read(c->phase_fd, &v, sizeof v) == (ssize_t)sizeof v) {
        }
        atomic_store(&c->phase, PHASE_PAUSED);
    } else {
        atomic_store(&c->phase, phase);
        (void)!write(c->phase_fd, &v, sizeof v);
    }
}

/* [signal-safe] */
static void note_max(_Atomic uint64_t *m, uint64_t v)
{
    uint64_t cur = atomic_load(m);
    while (v > cur && !atomic_compare_exchange_weak(m, &cur, v)) {
    }
}

/* [signal-safe] */
static void set_error(struct tk_ckpt *c, int err)
{
    int zero = 0;
    atomic_compare_exchange_strong(&c->error, &zero, err);
}

static size_t area_of_index(const struct tk_ckpt *c, size_t idx)
{
    size_t a = 0;
    while (idx >= c->first[a + 1]) a++;
    return a;
}

static unsigned char *page_addr(const struct tk_ckpt *c, size_t idx)
{
    size_t a = area_of_index(c, idx);
    return (unsigned char *)c->areas[a].addr + ((idx - c->first[a]) << c->shift);
}

/* [signal-safe] */
static size_t index_of(const struct tk_ckpt *c, const tk_region *r, uintptr_t page)
{
    for (size_t a = 0; a < c->nareas; a++)
        if (c->regions[a] == r)
            return c->first[a] + ((page - (uintptr_t)c->areas[a].addr) >> c->shift);
    return (size_t)-1;
}

/* [signal-safe] */
static bool test_bit(const uint64_t *bits, size_t i)
{
    return __atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) >> (i % 64) & 1;
}

/* [signal-safe] */
static void set_bit(uint64_t *bits, size_t i)
{
    __atomic_fetch_or(&bits[i / 64], 1ull << (i % 64), __ATOMIC_SEQ_CST);
}

/* [signal-safe] */
static void clear_bit(uint64_t *bits, size_t i)
{
    __atomic_fetch_and(&bits[i / 64], ~(1ull << (i % 64)), __ATOMIC_SEQ_CST);
}

/* Where data page idx goes in an uncompressed image: its rank among the
 * data pages (saved, not zero), fixed at the instant.  [signal-safe] */
static uint64_t image_offset(const struct tk_ckpt *c, size_t idx)
{
    uint64_t data = c->saved[idx / 64] & ~c->zero[idx / 64];
    uint64_t below = data & ((1ull << (idx % 64)) - 1);
    return c->data_off + (c->prefix[idx / 64] + (uint64_t)__builtin_popcountll(below)) * c->ps;
}

/* Whether the page at p is all zero.  [signal-safe] */
static bool zero_page(const unsigned char *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = 0; i < n / 8; i += 8)
        if (w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7])
            return false;
    return true;
}

/* Writes n pages to the image at off, with direct I/O where the file
 * allows it (no page-cache copy, no write-back thread), else buffered.
 * The pages are the program's, read in place while write-protected
 * (COPYING; a writer that takes one over meanwhile may write it during the
 * call, and its own copy is written after, over this one): TSan is told to
 * ignore the reads (core/internal.h).  [signal-safe] */
static int write_pages(struct tk_ckpt *c, struct iovec *iov, int n, uint64_t off)
{
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    int err = 0;
    while (n > 0) {
        TK_TSAN_IGNORE_BEGIN();
        ssize_t w = pwritev(c->dfd, iov, n, (off_t)off);
        TK_TSAN_IGNORE_END();
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && c->dfd != c->fd) {
            close(c->dfd); /* this file system refuses these direct writes */
            c->dfd = c->fd;
            continue;
        }
        if (w < 0 || w == 0) {
            err = w < 0 ? -errno : -EIO;
            break;
        }
        off += (uint64_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0 && w > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    atomic_fetch_add(&c->thread_io, now_ns(CLOCK_MONOTONIC) - t0);
    return err;
}

/* Writes a short run of writers' copies (fewer than DIRECT_RUN) through the
 * page cache, which gathers them: a direct write waits for the disk, and
 * single pages from scattered places would cost its latency each. */
static int write_buffered(struct tk_ckpt *c, const struct iovec *iov, int n, uint64_t off)
{
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    int err = 0;
    for (int k = 0; k < n && !err; k++) {
        err = tk__pwrite_all(c->fd, iov[k].iov_base, iov[k].iov_len, off);
        off += iov[k].iov_len;
    }
    atomic_fetch_add(&c->thread_io, now_ns(CLOCK_MONOTONIC) - t0);
    return err;
}

/* Writes the staged compressed data (padded to a multiple of 4096 for
 * direct I/O) at the append position (background thread). */
static void flush_stage(struct tk_ckpt *c)
{
    if (!c->staged) return;
    size_t n = (c->staged + 4095) & ~(size_t)4095;
    memset(c->stage + c->staged, 0, n - c->staged);
    if (!atomic_load(&c->error)) {
        struct iovec iov = {c->stage, n};
        int err = write_pages(c, &iov, 1, c->append);
        if (err)
            set_error(c, err);
        else
            atomic_fetch_add(&c->bytes, n);
    }
    c->append += n;
    c->staged = 0;
}

/* Stages page idx, read from src, compressed; records where it goes and
 * its CRC unless `keep` says the copy was overtaken (then its bytes are
 * left unused).  Returns whether it was recorded (background thread). */
static bool stage_page(struct tk_ckpt *c, size_t idx, const unsigned char *src,
                       bool (*keep)(struct tk_ckpt *, size_t))
{
    if (c->staged + (size_t)LZ4_COMPRESSBOUND(c->ps) > STAGE) flush_stage(c);
    TK_TSAN_IGNORE_BEGIN();
    uint32_t crc = tk__crc32c((uint32_t)idx, src, c->ps);
    uint32_t len = 0;
    if (!zero_page(src, c->ps)) {
        int n = LZ4_compress_default((const char *)src, (char *)c->stage + c->staged, (int)c->ps,
                                     LZ4_COMPRESSBOUND(c->ps));
        if (n > 0 && (size_t)n < c->ps) {
            len = (uint32_t)n;
        } else {
            memcpy(c->stage + c->staged, src, c->ps); /* LZ4 does not make it smaller */
            len = (uint32_t)c->ps;
        }
    }
    TK_TSAN_IGNORE_END();
    if (keep && !keep(c, idx)) return false;
    c->crc[idx] = crc;
    c->loc[idx] = (len ? (c->append + c->staged) << 20 : 0) | len;
    c->staged += len;
    return true;
}

/* Writes src, a writer's copy of page idx, to the image (unless the
 * snapshot already failed) and counts the page done: compressed, staged;
 * uncompressed, at its place, buffered (drain_queue writes runs of them
 * directly). */
static void write_page(struct tk_ckpt *c, size_t idx, unsigned char *src)
{
    if (c->compress) {
        stage_page(c, idx, src, NULL);
    } else if (!atomic_load(&c->error)) {
        c->crc[idx] = tk__crc32c((uint32_t)idx, src, c->ps);
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        int err = tk__pwrite_all(c->fd, src, c->ps, image_offset(c, idx));
        atomic_fetch_add(&c->thread_io, now_ns(CLOCK_MONOTONIC) - t0);
        if (err)
            set_error(c, err);
        else
            atomic_fetch_add(&c->bytes, c->ps);
    }
    atomic_fetch_add(&c->done, 1);
}

static void wake_helper(struct tk_ckpt *c);
static void wake_pooler(struct tk_ckpt *c);

/* A written slot to use again, or UINT64_MAX if none waits.  [signal-safe]:
 * lock-free. */
static uint64_t pop_slot(struct tk_ckpt *c)
{
    uint64_t top = atomic_load_explicit(&c->free_top, memory_order_acquire);
    for (;;) {
        uint32_t s = (uint32_t)top;
        if (!s) return UINT64_MAX;
        uint32_t below = atomic_load_explicit(&c->free_next[s - 1], memory_order_relaxed);
        uint64_t next = ((top >> 32) + 1) << 32 | below;
        if (atomic_compare_exchange_weak_explicit(&c->free_top, &top, next, memory_order_acquire,
                                                  memory_order_acquire)) {
#ifdef TK_CKPT_TEST_TAKEOVER
            atomic_fetch_add(&tk__ckpt_reused, 1);
#endif
            return s - 1;
        }
    }
}

/* Slot s, its copy written, for a writer's next copy (background thread). */
static void push_slot(struct tk_ckpt *c, uint32_t s)
{
    uint64_t top = atomic_load_explicit(&c->free_top, memory_order_relaxed);
    for (;;) {
        atomic_store_explicit(&c->free_next[s], (uint32_t)top, memory_order_relaxed);
        uint64_t next = ((top >> 32) + 1) << 32 | (s + 1);
        if (atomic_compare_exchange_weak_explicit(&c->free_top, &top, next, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

/* A writer's copy of page idx (state TAKEN): into the pool, queued for
 * the background thread.  [signal-safe] */
static void buffer_page(struct tk_ckpt *c, size_t idx)
{
    uint64_t q = atomic_fetch_add(&c->queue_tail, 1); /* one entry per page at most */
    uint64_t s = pop_slot(c);
    if (s == UINT64_MAX) {
        s = atomic_fetch_add(&c->pool_next, 1); /* at most one per entry */
        if (s % 64 == 0 && c->helper_live) {    /* (no pool thread without it) */
            /* keep the pool populated ahead of the writers,
             * whatever the background thread's priority lets it do */
            uint64_t want = s + POOL_AHEAD < c->npages ? s + POOL_AHEAD : c->npages;
            uint64_t cur = atomic_load(&c->pool_want);
            while (want > cur && !atomic_compare_exchange_weak(&c->pool_want, &cur, want)) {
            }
            if (want > cur) wake_pooler(c);
        }
    }
    unsigned char *dst = c->pool + s * c->ps;
    /* the page is still write-protected (TAKEN): ordered after the writes
     * before the protection, which TSan cannot see (core/internal.h) */
    TK_TSAN_IGNORE_BEGIN();
    memcpy(dst, page_addr(c, idx), c->ps); /* the CRC is the background thread's */
    TK_TSAN_IGNORE_END();
    c->slot_of[idx] = (uint32_t)s; /* read once the page is no longer TAKEN */
    atomic_store_explicit(&c->queue[q], (uint32_t)idx, memory_order_release);
}

/* Writes the queued copies that are ready (background thread). */
static void drain_queue(struct tk_ckpt *c)
{
    uint64_t head = atomic_load(&c->queue_head);
    for (;;) {
        uint64_t tail = atomic_load(&c->queue_tail);
        struct {
            uint32_t idx;
        } e[BATCH];
        size_t n = 0;
        while (n < BATCH && head + n < tail) {
            uint32_t idx = atomic_load_explicit(&c->queue[head + n], memory_order_acquire);
            if (idx == UINT32_MAX) break; /* its writer is still copying */
            e[n].idx = idx;
            n++;
        }
        if (!n) break;
        atomic_fetch_add(&c->copies_written, n);
        if (c->compress) {
            for (size_t k = 0; k < n; k++)
                write_page(c, e[k].idx, c->pool + (size_t)c->slot_of[e[k].idx] * c->ps);
        } else {
            /* in image order (a fault's block arrives in runs, the pages
             * below the faulting one last), each run of consecutive places
             * with one pwritev, direct where the file system allows if it
             * is long enough, else buffered */
            for (size_t k = 1; k < n; k++)
                for (size_t j = k; j > 0 && e[j - 1].idx > e[j].idx; j--) {
                    __typeof__(e[0]) t = e[j];
                    e[j] = e[j - 1];
                    e[j - 1] = t;
                }
            struct iovec iov[BATCH];
            for (size_t k = 0; k < n;) {
                size_t r = k;
                uint64_t off = image_offset(c, e[k].idx);
                for (; r < n && (r == k || image_offset(c, e[r].idx) == off + (r - k) * c->ps);
                     r++) {
                    unsigned char *src = c->pool + (size_t)c->slot_of[e[r].idx] * c->ps;
                    c->crc[e[r].idx] = tk__crc32c(e[r].idx, src, c->ps);
                    iov[r - k] = (struct iovec){src, c->ps};
                }
                if (!atomic_load(&c->error)) {
                    int err = r - k >= DIRECT_RUN ? write_pages(c, iov, (int)(r - k), off)
                                                  : write_buffered(c, iov, (int)(r - k), off);
                    if (err)
                        set_error(c, err);
                    else
                        atomic_fetch_add(&c->bytes, (r - k) * c->ps);
                }
                k = r;
            }
            atomic_fetch_add(&c->done, n);
        }
        for (size_t k = 0; k < n; k++) push_slot(c, c->slot_of[e[k].idx]);
        head += n;
        atomic_store(&c->queue_head, head);
    }
}

/* With timing on and a snapshot running or being set up, the clock; else
 * 0 (no clock read).  [signal-safe] */
static uint64_t t_now(struct tk_ckpt *c)
{
    if (!c->timing || (!atomic_load(&c->running) && atomic_load(&c->phase) != PHASE_PAUSED))
        return 0;
    return now_ns(CLOCK_MONOTONIC);
}

/* Adds the time since *t (unless 0: not timed) to *sum and moves *t to
 * now.  [signal-safe] */
static void t_add(_Atomic uint64_t *sum, uint64_t *t)
{
    if (!*t) return;
    uint64_t n = now_ns(CLOCK_MONOTONIC);
    atomic_fetch_add_explicit(sum, n - *t, memory_order_relaxed);
    *t = n;
}

/* Takes page j for a writer that faulted on a neighbour: copies it if it
 * is still to be copied (PENDING or COPYING), opens it if it is saved or a
 * HOLE; DIRTY is open already.  False if it must stay protected (another
 * writer is copying it).  [signal-safe] */
static bool take_neighbour(struct tk_ckpt *c, size_t j)
{
    for (;;) {
        uint8_t st = atomic_load(&c->state[j]);
        if (st == ST_DIRTY) return true;
        if (c->track && (st == ST_CLEAN || st == ST_HOLE)) return false; /* see take_neighbours */
        if (st == ST_PENDING || st == ST_COPYING) {
            if (!atomic_compare_exchange_strong(&c->state[j], &st, ST_TAKEN)) continue;
            buffer_page(c, j);
            atomic_fetch_add(&c->by_writers, 1);
            atomic_store(&c->state[j], ST_DIRTY);
            return true;
        }
        if (st == ST_CLEAN || st == ST_HOLE) {
            if (!atomic_compare_exchange_strong(&c->state[j], &st, ST_DIRTY)) continue;
            return true;
        }
        return false; /* TAKEN */
    }
}

/* A writer's fault copies and opens the pages around idx too, within its
 * aligned block of c->block pages (NEIGHBOURS; TRAPKIT_CKPT_BLOCK), as far
 * as they run contiguously.  A page the snapshot still has to copy is
 * copied once either way, and the program writes most pages of its working
 * set while a snapshot lasts (one that writes its pages in order, all of
 * them): one fault per block then replaces one per page - the system call
 * that opens the pages, the signal or the handler thread's round trip cost
 * about the same for 16 pages as for one.  With TK_CKPT_TRACK a page opened
 * so counts as written (the next incremental image holds it): only pages
 * this snapshot copies are taken then, not saved or zero ones.  Not while
 * the copies queued for the disk exceed BACKLOG pages, so that their memory
 * stays bounded.  [lo, hi) grows to the pages to open.  [signal-safe] */
static void take_neighbours(struct tk_ckpt *c, size_t idx, size_t *lo, size_t *hi)
{
    if (c->block <= 1 ||
        atomic_load(&c->queue_tail) - atomic_load(&c->copies_written) + c->block > BACKLOG)
        return;
    size_t a = area_of_index(c, idx);
    size_t from = idx & ~(size_t)(c->block - 1), to = from + c->block;
    if (from < c->first[a]) from = c->first[a];
    if (to > c->first[a + 1]) to = c->first[a + 1];
    while (*hi < to && take_neighbour(c, *hi)) (*hi)++;
    while (*lo > from && take_neighbour(c, *lo - 1)) (*lo)--;
}

/* ---- following the writers --------------------------------------------
 * Every change of a page table flushes the TLB of each other CPU running a
 * thread of the program at that moment, by an interrupt: on a virtual
 * machine an exit to the hypervisor on both sides, ~20 us here
 * (tools/unprot_cost).  While a snapshot runs, the checkpointer's threads
 * (arming, background, helper) would be such threads on the CPUs the
 * program leaves idle, and every writer's fault (which opens its page)
 * would interrupt them, as each of their protection changes would
 * interrupt the writer.  So they follow the writers: each keeps itself on
 * the CPU a writer last faulted on (or started the snapshot or took its
 * instant on), where at SCHED_IDLE it runs only while the writer does not,
 * and the flushes stay local.  A program whose writers keep their CPU busy
 * would starve them there: a thread that waited for that CPU more than
 * FOLLOW_STARVED_PCT% of each of the last FOLLOW_STARVED periods of
 * FOLLOW_PERIOD_NS (its run delay, /proc/thread-self/schedstat) goes back
 * to every CPU it may use for the rest of the snapshot.  (A writer that
 * kept its CPU busy for a period mostly goes on doing so, and a thread at
 * SCHED_IDLE beside it runs so seldom - a tick in a second or more on a
 * slow machine - that each return there cost it far more than the period
 * before it saw it starved again.)  A writer busy most of the time but not
 * all of it - a server near its capacity while its writes fault - leaves
 * them enough: they stay, and its faults open pages without interrupting
 * another CPU.  (Leaving at half of one period sent them to the other CPU
 * within the first half second of a snapshot of kv-server at 50% load,
 * where 6-19% of its faults then took 10-30 us more; docs/design.md, "1
 * GiB: the whole snapshot, fault by fault".)  Not with TK_CKPT_FAIR (or
 * TRAPKIT_CKPT_COPIER=fair/nice), on one CPU, or with TRAPKIT_CKPT_FOLLOW=0. */
#define FOLLOW_PERIOD_NS 200000000ull
#define FOLLOW_STARVED_PCT 95 /* of a period spent waiting for the writers' CPU */
#define FOLLOW_STARVED 3      /* periods in a row */

/* Notes the calling thread's CPU as the writers'.  [signal-safe]: getcpu
 * is a read of the kernel's per-thread data (rseq or the vDSO). */
static void note_cpu(struct tk_ckpt *c)
{
    if (!c->follow) return;
    int cpu = sched_getcpu();
    if (cpu >= 0 && atomic_load_explicit(&c->writer_cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&c->writer_cpu, cpu, memory_order_relaxed);
}

struct follow {
    int cpu;            /* the CPU this thread is kept on, or -1 (anywhere allowed) */
    bool hold;          /* anywhere for the rest of the snapshot: it starved */
    unsigned starved;   /* periods in a row it starved */
    bool init, off;     /* off: its run delay cannot be read, so it does not follow */
    int stat_fd;        /* /proc/thread-self/schedstat, or -1 */
    uint64_t t0, wait0; /* the period's start and run delay then */
    cpu_set_t allowed;  /* the thread's own affinity */
};

static uint64_t run_delay(int fd)
{
    char buf[96];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* The thread's own affinity back (the next role of the same thread, the
 * background thread after arming, starts from it). */
static void follow_end(struct follow *f)
{
    if (f->init && f->cpu >= 0) sched_setaffinity(0, sizeof f->allowed, &f->allowed);
    if (f->init && f->stat_fd >= 0) close(f->stat_fd);
    f->init = false;
}

/* Keeps the calling thread on the writers' CPU (see above); call it often
 * (each batch, chunk or wake-up). */
static void follow_writer(struct tk_ckpt *c, struct follow *f)
{
    if (!c->follow || f->off) return;
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    if (!f->init) {
        f->init = true;
        f->cpu = -1;
        f->hold = false;
        f->starved = 0;
        f->stat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        f->t0 = now;
        f->wait0 = run_delay(f->stat_fd);
        if (sched_getaffinity(0, sizeof f->allowed, &f->allowed) != 0 || f->stat_fd < 0) {
            /* without its run delay a starved thread cannot be told */
            f->off = true;
            return;
        }
    } else if (!f->hold && now - f->t0 >= FOLLOW_PERIOD_NS) {
        uint64_t w = run_delay(f->stat_fd);
        bool starved = f->cpu >= 0 && (w - f->wait0) * 100 > (now - f->t0) * FOLLOW_STARVED_PCT;
        f->starved = starved ? f->starved + 1 : 0;
        f->t0 = now;
        f->wait0 = w;
        if (f->starved >= FOLLOW_STARVED) {
            f->hold = true;
            if (sched_setaffinity(0, sizeof f->allowed, &f->allowed) == 0) f->cpu = -1;
        }
    }
    if (f->hold) return;
    int cpu = atomic_load_explicit(&c->writer_cpu, memory_order_relaxed);
    if (cpu < 0 || cpu == f->cpu || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &f->allowed)) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) f->cpu = cpu;
}

/* The write-fault handler of every area.  [signal-safe] */
static tk_action on_write(const tk_fault *f, void *arg)
{
    struct tk_ckpt *c = arg;
    if (f->access == TK_ACCESS_READ || f->access == TK_ACCESS_EXEC) return TK_DECLINE;
    size_t idx = index_of(c, f->region, (uintptr_t)f->page);
    if (idx >= c->npages) return TK_DECLINE;
    if (c->mech != TK_CKPT_UFFD_THREAD) note_cpu(c); /* the writer's own thread */
    uint64_t t_in = t_now(c), t = t_in;
    if (atomic_load(&c->running)) atomic_fetch_add(&c->faults, 1);
    /* a writer's stall: from its fault to its resumption, while a
     * snapshot runs or is being set up */
    uint64_t t0 = atomic_load(&c->running) ? (t_in ? t_in : now_ns(CLOCK_MONOTONIC)) : 0;
    /* In the faulting thread, its asynchronous signals wait until the
     * handler returns (whose return gives back the interrupted code's mask:
     * no call to restore it): a handler of one that wrote to an area would
     * wait for a pause that waits for this writer, and one that left by
     * siglongjmp would leave it counted inside for ever. */
    bool blocked_before = tk__async_signals_blocked;
    if (f->ucontext && !blocked_before) { /* (in the faulting thread's signal handler) */
        uint64_t mask;
        tk__defer_signals(&mask);
        /* the region's lock, taken below to open pages, need not block
         * them again (two system calls a fault) */
        tk__async_signals_blocked = true;
    }
    /* Enter unless a snapshot is pausing; it waits for those inside, so no
     * page is opened after it protected its pages for good.  A snapshot
     * that starts waits only for those of the epoch before. */
    uint64_t e;
    for (;;) {
        e = atomic_load(&c->epoch);
        atomic_fetch_add(&c->inflight[e & 1], 1);
        if (atomic_load(&c->phase) != PHASE_PAUSED && atomic_load(&c->epoch) == e) break;
        atomic_fetch_sub(&c->inflight[e & 1], 1);
        if (!t0) t0 = now_ns(CLOCK_MONOTONIC);
        wait_while_paused(c);
    }
    int phase = atomic_load(&c->phase);
    t_add(&c->st_pause, &t);
    for (unsigned spins = 0;; spins++) {
        uint8_t st = atomic_load(&c->state[idx]);
        if (phase == PHASE_ARMING && (st == ST_PENDING || st == ST_HOLE || st == ST_CLEAN)) {
            /* armed (or saved before) and written before the instant: the
             * write belongs to the snapshot; the page is armed again */
            if (!atomic_compare_exchange_strong(&c->state[idx], &st, ST_OPENING)) continue;
            if (st == ST_CLEAN) set_bit(c->saved, idx); /* written since: in the snapshot */
            if (st == ST_HOLE) clear_bit(c->zero, idx);
            t_add(&c->st_page, &t);
            tk_unprot(f->region, f->page, c->ps);
            t_add(&c->st_unprot, &t);
            atomic_store(&c->state[idx], ST_REOPENED);
            atomic_fetch_add(&c->reopened, 1);
            break;
        }
        if (phase == PHASE_RUNNING && (st == ST_PENDING || st == ST_COPYING)) {
            /* not copied yet, or being copied by the background thread,
             * which drops its copy when it sees TAKEN */
            if (!atomic_compare_exchange_strong(&c->state[idx], &st, ST_TAKEN)) continue;
#ifdef TK_CKPT_TEST_TAKEOVER
            if (st == ST_COPYING) atomic_fetch_add(&tk__ckpt_takeovers, 1);
#endif
            t_add(&c->st_page, &t);
            buffer_page(c, idx);
            atomic_fetch_add(&c->by_writers, 1);
            atomic_store(&c->state[idx], ST_DIRTY);
            size_t lo = idx, hi = idx + 1;
            take_neighbours(c, idx, &lo, &hi);
            t_add(&c->st_copy, &t);
            tk_unprot(f->region, page_addr(c, lo), (hi - lo) * c->ps);
            t_add(&c->st_unprot, &t);
            break;
        }
        if (phase == PHASE_RUNNING && (st == ST_CLEAN || st == ST_HOLE)) {
            /* saved, or zero in the image: nothing to copy */
            if (!atomic_compare_exchange_strong(&c->state[idx], &st, ST_DIRTY)) continue;
            t_add(&c->st_page, &t);
            tk_unprot(f->region, f->page, c->ps);
            t_add(&c->st_unprot, &t);
            break;
        }
        /* DIRTY, OPENING, REOPENED: another thread is opening it: retry */
        if (st != ST_TAKEN) break;
        /* TAKEN: another writer is copying this page; wait for it only */
        if (!t0) t0 = now_ns(CLOCK_MONOTONIC);
        if (spins > 64) sched_yield();
    }
    t_add(&c->st_page, &t);
    atomic_fetch_sub(&c->inflight[e & 1], 1);
    if (t_in) atomic_fetch_add_explicit(&c->st_total, t - t_in, memory_order_relaxed);
    if (t0) note_max(&c->max_stall, now_ns(CLOCK_MONOTONIC) - t0);
    tk__async_signals_blocked = blocked_before;
    return TK_RESUME;
}

/* ---- creating ---------------------------------------------------------- */
static void *map_zero(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void release(struct tk_ckpt *c)
{
    for (size_t a = 0; a < c->nareas; a++)
        if (c->regions[a]) tk_region_destroy(c->regions[a]);
    if (c->state) munmap((void *)c->state, c->npages);
    if (c->crc) munmap(c->crc, c->npages * 4);
    if (c->saved) munmap(c->saved, c->words * 8);
    if (c->zero) munmap(c->zero, c->words * 8);
    if (c->prefix) munmap(c->prefix, c->words * 8);
    if (c->written) munmap(c->written, c->words * 8);
    if (c->final) munmap(c->final, c->words * 8);
    if (c->abits) munmap(c->abits, c->words * 8);
    if (c->loc) munmap(c->loc, c->npages * 8);
    if (c->stage) munmap(c->stage, STAGE);
    if (c->pool) munmap(c->pool, c->npages * c->ps);
    if (c->queue) munmap((void *)c->queue, c->npages * 4);
    if (c->slot_of) munmap(c->slot_of, c->npages * 4);
    if (c->free_next) munmap((void *)c->free_next, c->npages * 4);
    if (c->phase_fd >= 0) close(c->phase_fd);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->child_lock);
    pthread_mutex_destroy(&c->cut_lock);
    pthread_cond_destroy(&c->cut_cond);
    free(c);
}

int tk_ckpt_create(const tk_ckpt_config *cfg, tk_ckpt **out)
{
    if (!cfg || !out || !cfg->areas || cfg->nareas == 0 || cfg->nareas > TK_IMG_MAX_AREAS)
        return tk__fail(-EINVAL, "tk_ckpt_create: give 1 to 16 areas and somewhere to put the "
                                 "checkpointer");
    if ((unsigned)cfg->mech >= TK_CKPT_COUNT_)
        return tk__fail(-EINVAL, "tk_ckpt_create: unknown mechanism");
    if (cfg->flags & ~(unsigned)(TK_CKPT_TRACK | TK_CKPT_TIMING | TK_CKPT_FAIR | TK_CKPT_CLOSE_FDS))
        return tk__fail(-EINVAL, "tk_ckpt_create: unknown flags");
    if (tk__lazy_busy(cfg->areas, cfg->nareas))
        return tk__fail(-EBUSY, "tk_ckpt_create: the areas are still being restored lazily "
                                "(tk_ckpt_lazy_wait first)");
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    tk__crc32c_init();
    struct tk_ckpt *c = calloc(1, sizeof *c);
    if (!c) return tk__fail(-ENOMEM, "tk_ckpt_create: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->child_lock, NULL);
    pthread_mutex_init(&c->cut_lock, NULL);
    pthread_cond_init(&c->cut_cond, NULL);
    c->phase_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK); /* running */
    if (c->phase_fd < 0) {
        int err = -errno;
        release(c);
        return tk__failf(err, "tk_ckpt_create: eventfd failed: %s", strerror(-err));
    }
    c->ps = ps;
    c->shift = (unsigned)__builtin_ctzl(ps);
    c->nareas = cfg->nareas;
    c->mech = cfg->mech;
    c->track = (cfg->flags & TK_CKPT_TRACK) != 0;
    c->close_fds = (cfg->flags & TK_CKPT_CLOSE_FDS) != 0;
    const char *copier = getenv("TRAPKIT_CKPT_COPIER");
    c->copier = (cfg->flags & TK_CKPT_FAIR) ? COPIER_FAIR : COPIER_IDLE;
    if (copier && !strcmp(copier, "fair")) c->copier = COPIER_FAIR;
    if (copier && !strcmp(copier, "nice")) c->copier = COPIER_NICE;
    if (copier && !strcmp(copier, "idle")) c->copier = COPIER_IDLE;
    const char *block = getenv("TRAPKIT_CKPT_BLOCK");
    c->block = NEIGHBOURS;
    if (block && *block) {
        long b = strtol(block, NULL, 10);
        c->block = b <= 1                ? 1
                   : b >= NEIGHBOURS_MAX ? NEIGHBOURS_MAX
                                         : 1u << (63 - __builtin_clzll((unsigned long long)b));
    }
    const char *timing = getenv("TRAPKIT_CKPT_TIMING");
    c->timing = (cfg->flags & TK_CKPT_TIMING) || (timing && *timing && strcmp(timing, "0") != 0);
    c->progress = cfg->progress;
    c->progress_arg = cfg->progress_arg;
    c->fd = c->dfd = -1;
    for (size_t a = 0; a < cfg->nareas; a++) {
        const struct tk_ckpt_area *ar = &cfg->areas[a];
        if (!ar->addr || (uintptr_t)ar->addr % ps || ar->len == 0 || ar->len % ps) {
            release(c);
            return tk__failf(-EINVAL,
                             "tk_ckpt_create: area %zu (%p, %zu bytes) is not page-aligned "
                             "with a length that is a positive multiple of %zu",
                             a, ar->addr, ar->len, ps);
        }
        /* (msync fails with ENOMEM on a range not wholly mapped; on private
         * memory MS_ASYNC does nothing else) */
        if ((uintptr_t)ar->addr + ar->len < (uintptr_t)ar->addr ||
            msync(ar->addr, ar->len, MS_ASYNC) < 0) {
            release(c);
            return tk__failf(-EINVAL,
                             "tk_ckpt_create: area %zu (%p, %zu bytes) is not wholly mapped "
                             "memory",
                             a, ar->addr, ar->len);
        }
        c->areas[a] = *ar;
        c->first[a + 1] = c->first[a] + ar->len / ps;
    }
    c->npages = c->first[cfg->nareas];
    c->words = (c->npages + 63) / 64;
    c->state = map_zero(c->npages);
    c->crc = map_zero(c->npages * 4);
    c->saved = map_zero(c->words * 8);
    c->zero = map_zero(c->words * 8);
    c->prefix = map_zero(c->words * 8);
    c->loc = map_zero(c->npages * 8);
    c->pool = map_zero(c->npages * ps);
    c->queue = map_zero(c->npages * 4);
    c->slot_of = map_zero(c->npages * 4);
    c->free_next = map_zero(c->npages * 4);
    if (c->queue) memset((void *)c->queue, 0xff, c->npages * 4);
    if (!c->state || !c->crc || !c->saved || !c->zero || !c->prefix || !c->loc || !c->pool ||
        !c->queue || !c->slot_of || !c->free_next) {
        release(c);
        return tk__fail(-ENOMEM, "tk_ckpt_create: out of memory for the page tables");
    }
    enum tk_mech rm = TK_MECH_AUTO;
    if (c->mech == TK_CKPT_UFFD_THREAD) rm = TK_MECH_UFFD_THREAD;
    if (c->mech == TK_CKPT_UFFD_SIGBUS) rm = TK_MECH_UFFD_SIGBUS;
    if (c->mech == TK_CKPT_POSIX) rm = TK_MECH_POSIX;
    unsigned rflags = 0;
    if (c->mech == TK_CKPT_PRECOPY) {
        /* the kernel tracks the writes (tk_dirty); mprotect holds the
         * areas only where an instant must stop writers that never pause */
        const tk_probe_info *p = tk__probe();
        if (!p || !p->pagemap_scan) {
            release(c);
            return tk__fail(-EOPNOTSUPP,
                            "tk_ckpt_create: precopy needs userfaultfd's asynchronous write "
                            "protection and PAGEMAP_SCAN (Linux 6.7), which this system lacks");
        }
        rm = TK_MECH_PAGEMAP_SCAN;
        rflags = TK_REGION_DIRTY;
        c->precopy = true;
        c->block = 1;
        c->written = map_zero(c->words * 8);
        c->final = map_zero(c->words * 8);
        c->abits = map_zero(c->words * 8);
        if (!c->written || !c->final || !c->abits) {
            release(c);
            return tk__fail(-ENOMEM, "tk_ckpt_create: out of memory for the page tables");
        }
    }
    if (c->mech == TK_CKPT_AUTO) {
        const tk_probe_info *p = tk__probe();
        c->mech = p && p->uffd_access != TK_UFFD_NONE ? TK_CKPT_UFFD_THREAD : TK_CKPT_POSIX;
        rm = c->mech == TK_CKPT_UFFD_THREAD ? TK_MECH_UFFD_THREAD : TK_MECH_POSIX;
    }
    {
        const char *fl = getenv("TRAPKIT_CKPT_FOLLOW");
        /* (precopy: writers do not fault, nothing to follow) */
        c->follow = c->copier == COPIER_IDLE && c->mech != TK_CKPT_FORK &&
                    c->mech != TK_CKPT_STOP && !c->precopy && sysconf(_SC_NPROCESSORS_ONLN) > 1 &&
                    !(fl && !strcmp(fl, "0"));
        atomic_store(&c->writer_cpu, -1);
        const char *pl = getenv("TRAPKIT_CKPT_POOLER");
        c->pool_thread = !(pl && !strcmp(pl, "0"));
    }
    for (size_t a = 0; a < c->nareas; a++) {
        tk_region_config rc = {.addr = c->areas[a].addr,
                               .len = c->areas[a].len,
                               .handler = on_write,
                               .arg = c,
                               .mech = rm,
                               .flags = rflags};
        int err = tk_region_create(&rc, &c->regions[a]);
        if (err && c->mech == TK_CKPT_UFFD_THREAD && rm == TK_MECH_UFFD_THREAD &&
            cfg->mech == TK_CKPT_AUTO) {
            /* automatic choice: fall back to mprotect */
            rm = TK_MECH_POSIX;
            c->mech = TK_CKPT_POSIX;
            rc.mech = rm;
            for (size_t b = 0; b < a; b++) {
                tk_region_destroy(c->regions[b]);
                c->regions[b] = NULL;
            }
            a = (size_t)-1;
            continue;
        }
        if (err) {
            c->regions[a] = NULL;
            char why[200];
            snprintf(why, sizeof why, "%s", tk_last_error());
            release(c);
            return tk__failf(err, "tk_ckpt_create: area %zu: %s", a, why);
        }
    }
    /* pages never populated are found by PAGEMAP_SCAN (Linux 6.7) */
    const tk_probe_info *probe = tk__probe();
    c->scan = probe && probe->pagemap_scan;
    if (getrandom(&c->lineage, sizeof c->lineage, 0) != sizeof c->lineage)
        c->lineage = now_ns(CLOCK_REALTIME) ^ (uint64_t)getpid() << 32;
    *out = c;
    return 0;
}

/* ---- writing an image --------------------------------------------------- */
static void report(struct tk_ckpt *c)
{
    if (!c->progress) return;
    tk_ckpt_stats st;
    tk_ckpt_poll_v2(c, &st);
    c->progress(&st, c->progress_arg);
}

/* Directory (streamed through a 64 KiB buffer), fsync, header, fsync.
 * Returns 0 or an error. */
static int finish_image(struct tk_ckpt *c)
{
    uint64_t dir_off = c->compress || c->located ? c->append : c->data_off + c->ndata * c->ps;
    struct tk_imgw d = {.fd = c->fd, .cap = 65536, .off = dir_off};
    d.buf = map_zero(d.cap);
    if (!d.buf) return -ENOMEM;
    for (size_t w = 0; w < c->words; w++) c->zero[w] &= c->saved[w]; /* held as zero */
    tk__imgw_put(&d, c->saved, c->words * 8, true);
    tk__imgw_put(&d, c->zero, c->words * 8, true);
    for (size_t w = 0; w < c->words; w++) {
        for (uint64_t bits = c->saved[w] & ~c->zero[w]; bits; bits &= bits - 1) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
            if (c->compress || c->located) {
                struct tk_img_entry e = {c->loc[i] >> 20, (uint32_t)(c->loc[i] & 0xfffff),
                                         c->crc[i]};
                tk__imgw_put(&d, &e, sizeof e, true);
            } else {
                tk__imgw_put(&d, &c->crc[i], 4, true);
            }
        }
    }
    tk__imgw_flush(&d);
    munmap(d.buf, d.cap);
    int err = d.err;
    uint64_t dir_len = d.off - dir_off;
    struct tk_img_header h = {
        .page_size = (uint32_t)c->ps,
        /* (a located image's entries are a compressed one's, each page
         * stored as is) */
        .flags = (c->incremental ? TK_IMG_INCREMENTAL : 0) |
                 (c->compress || c->located ? TK_IMG_COMPRESSED : 0) |
                 (c->located ? TK_IMG_LOCATED : 0),
        .nareas = (uint32_t)c->nareas,
        .lineage = c->lineage,
        .seq = c->seq,
        .parent_seq = c->incremental ? c->base_seq : 0,
        .npages = c->npages,
        .nsaved = c->nsaved,
        .nzero = c->nzero,
        .data_off = c->data_off,
        .dir_off = dir_off,
        .dir_len = dir_len,
        .created_ns = c->t_instant_real,
        .dir_crc = d.crc,
    };
    for (size_t a = 0; a < c->nareas; a++) h.area_len[a] = c->areas[a].len;
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    if (!err) err = tk__img_write_header(c->fd, &h);
    atomic_fetch_add(&c->thread_io, now_ns(CLOCK_MONOTONIC) - t0);
    if (!err) {
        atomic_fetch_add(&c->bytes, dir_len + sizeof h);
        /* (precopy: the data at the pages' indices, a sparse file, and
         * what the rounds staged after them) */
        uint64_t data = c->located ? c->ndata * c->ps : dir_off - c->data_off;
        uint64_t file = dir_off + dir_len;
        struct stat sb;
        if (c->located && fstat(c->fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 < file)
            file = (uint64_t)sb.st_blocks * 512;
        atomic_store(&c->image_bytes, file);
        atomic_store(&c->data_bytes, data);
    }
    return err;
}

/* Unprotects the copied pages among [from, to) (no tracking wanted): the
 * CLEAN ones become DIRTY; DIRTY ones are open already, and a TAKEN one is
 * being copied by a writer, which opens it itself.  A span of CLEAN and
 * DIRTY pages is opened with one system call (tk__unprot_span): each call
 * interrupts the CPU of a writer running at that moment for its TLB, and
 * the writers leave DIRTY pages scattered among the copied ones. */
static void release_batch(struct tk_ckpt *c, size_t from, size_t to)
{
    while (from < to) {
        size_t a = area_of_index(c, from);
        size_t end = to < c->first[a + 1] ? to : c->first[a + 1];
        size_t run = from;
        bool any = false; /* a CLEAN page in [run, i) */
        for (size_t i = from; i <= end; i++) {
            if (i < end) {
                uint8_t st = ST_CLEAN;
                if (atomic_compare_exchange_strong(&c->state[i], &st, ST_DIRTY)) {
                    if (!any) run = i;
                    any = true;
                    continue;
                }
                if (st == ST_DIRTY) continue;
            }
            if (any) tk__unprot_span(c->regions[a], page_addr(c, run), (i - run) * c->ps);
            run = i + 1;
            any = false;
        }
        from = end;
    }
}

/* The CRC-32C of page idx read where it is, by the background thread while
 * the page is COPYING: write-protected, so no write changes it meanwhile,
 * unless a writer takes the page over (TAKEN), opens it and writes; the
 * caller then drops this result.  TSan is told to ignore the reads
 * (core/internal.h). */
static uint32_t crc_in_place(const struct tk_ckpt *c, size_t idx)
{
    TK_TSAN_IGNORE_BEGIN();
    uint32_t crc = tk__crc32c((uint32_t)idx, page_addr(c, idx), c->ps);
    TK_TSAN_IGNORE_END();
    return crc;
}

/* The background thread's run of up to BATCH saved pages, consecutive in
 * the image. */
struct batch {
    size_t idx[BATCH];
    struct iovec iov[BATCH];
    bool mine[BATCH]; /* COPYING by the thread; else a writer took the page first */
    bool copy[BATCH]; /* a writer took it first: its copy, in the pool, is written here */
    bool zero[BATCH]; /* all zero when taken: not written (a hole of the file) */
    size_t n;
    uint64_t off; /* image offset of idx[0] */
};

/* Writes the batch's pages straight from memory (they are write-protected
 * while COPYING), then checksums each and marks it CLEAN, unless a writer
 * took it meanwhile: then the writer's copy, queued, is written after. */
/* A writer's copy of page idx, once it is complete (the page no longer
 * TAKEN): its pool slot.  [the background thread] */
static unsigned char *writer_copy(struct tk_ckpt *c, size_t idx)
{
    while (atomic_load(&c->state[idx]) == ST_TAKEN) sched_yield(); /* a memcpy away */
    return c->pool + (size_t)c->slot_of[idx] * c->ps;
}

/* Writes the batch's pages in place order: the thread's straight from
 * memory (write-protected while COPYING), the writers' copies (taken before
 * the thread reached them) from their pool slots, each run with one
 * pwritev; then checksums each of the thread's and marks it CLEAN, unless a
 * writer took it during the write: then the writer's copy is written over
 * it.  So every page, copied by a writer or not, is written as the thread
 * sweeps the image in order: the disk sees long sequential writes, not a
 * write per writer's copy at scattered places. */
static void flush_batch(struct tk_ckpt *c, struct batch *b)
{
    uint32_t slots[BATCH];
    size_t nslots = 0;
    for (size_t k = 0; k < b->n;) {
        if (!b->mine[k] && !b->copy[k]) {
            k++;
            continue;
        }
        size_t e = k;
        while (e < b->n && (b->mine[e] || b->copy[e]) && b->zero[e] == b->zero[k]) e++;
        if (!b->zero[k] && !atomic_load(&c->error)) {
            int err = write_pages(c, &b->iov[k], (int)(e - k), b->off + k * c->ps);
            if (err)
                set_error(c, err);
            else
                atomic_fetch_add(&c->bytes, (e - k) * c->ps);
        }
        for (size_t j = k; j < e; j++) {
            size_t idx = b->idx[j];
            if (b->copy[j]) {
                c->crc[idx] = tk__crc32c((uint32_t)idx, b->iov[j].iov_base, c->ps);
                slots[nslots++] = c->slot_of[idx];
                atomic_fetch_add(&c->copies_written, 1);
                atomic_fetch_add(&c->done, 1);
                continue;
            }
            uint32_t crc = crc_in_place(c, idx);
            uint8_t st = ST_COPYING;
            if (atomic_compare_exchange_strong(&c->state[idx], &st, ST_CLEAN)) {
                c->crc[idx] = crc; /* the page did not change since it was written */
                atomic_fetch_add(&c->by_thread, 1);
                atomic_fetch_add(&c->done, 1);
                continue;
            }
            /* taken while it was being written: the writer's copy over it */
            unsigned char *src = writer_copy(c, idx);
            c->crc[idx] = tk__crc32c((uint32_t)idx, src, c->ps);
            if (!atomic_load(&c->error)) {
                uint64_t t0 = now_ns(CLOCK_MONOTONIC);
                int err = tk__pwrite_all(c->fd, src, c->ps, b->off + j * c->ps);
                atomic_fetch_add(&c->thread_io, now_ns(CLOCK_MONOTONIC) - t0);
                if (err) set_error(c, err);
            }
            slots[nslots++] = c->slot_of[idx];
            atomic_fetch_add(&c->copies_written, 1);
            atomic_fetch_add(&c->done, 1);
        }
        k = e;
    }
    for (size_t k = 0; k < nslots; k++) push_slot(c, slots[k]);
    b->n = 0;
}

/* stage_page's test that the background thread's copy of page idx counts
 * (no writer took the page meanwhile). */
static bool keep_mine(struct tk_ckpt *c, size_t idx)
{
    uint8_t st = ST_COPYING;
    if (!atomic_compare_exchange_strong(&c->state[idx], &st, ST_CLEAN)) return false;
    atomic_fetch_add(&c->by_thread, 1);
    atomic_fetch_add(&c->done, 1);
    return true;
}

/* Populates pool slots [pool_ready, pool_want) (helper or pool thread),
 * POPULATE_STEP at a time: MADV_POPULATE_WRITE holds the address space's
 * lock (shared) for the whole call, 5-13 us a page where the host has
 * taken the memory back, and a thread of the program that wants it
 * exclusively meanwhile - malloc growing or trimming its heap with brk -
 * waits for it, with every page fault and protection change that comes
 * after.  MADV_POPULATE_WRITE leaves the contents alone, so a slot a
 * writer took meanwhile and is copying into is not disturbed. */
static void populate_pool(struct tk_ckpt *c)
{
    uint64_t from = atomic_load(&c->pool_ready), to = atomic_load(&c->pool_want);
    while (from < to && !atomic_load(&c->help_stop)) {
        uint64_t end = to - from > POPULATE_STEP ? from + POPULATE_STEP : to;
        unsigned char *p = c->pool + from * c->ps;
        size_t n = (size_t)(end - from) * c->ps;
        if (madvise(p, n, MADV_POPULATE_WRITE) <
            0) /* before Linux 5.14: a write that changes nothing */
            for (size_t o = 0; o < n; o += c->ps) __atomic_fetch_add(p + o, 0, __ATOMIC_RELAXED);
        atomic_store(&c->pool_ready, end);
        from = end;
    }
}

static void lower_priority(const struct tk_ckpt *c);
static void set_high(bool high);

/* The pool thread: populates the pool up to its target until told to
 * stop.  At the program's priority (it does work the writers would do
 * themselves otherwise, at theirs), anywhere the thread may run: at
 * SCHED_IDLE it got too little of the other CPU while the writers' faults
 * filled theirs (docs/design.md). */
static void *pooler_main(void *arg)
{
    struct tk_ckpt *c = arg;
    tk__block_async_signals();
    for (;;) {
        int word = atomic_load(&c->pool_word);
        if (atomic_load(&c->help_stop)) break;
        populate_pool(c);
        tk__futex_wait(&c->pool_word, word);
    }
    return NULL;
}

/* Wakes whichever thread populates the pool.  [signal-safe] */
static void wake_pooler(struct tk_ckpt *c)
{
    if (!c->pooler_live) {
        wake_helper(c);
        return;
    }
    atomic_fetch_add(&c->pool_word, 1);
    tk__futex_wake(&c->pool_word, 1);
}

/* The helper thread: unprotects the ranges the background thread posts
 * (and populates the pool where there is no pool thread), until told to
 * stop and every posted range is done. */
static void *helper_main(void *arg)
{
    struct tk_ckpt *c = arg;
    tk__block_async_signals();
    /* created by the program's thread, at its priority: beside the writers
     * (following them) it would take their CPU for the pool's page faults */
    if (c->follow) lower_priority(c);
    struct follow fw = {.init = false};
    for (;;) {
        int word = atomic_load(&c->help_word);
        bool stop = atomic_load(&c->help_stop);
        follow_writer(c, &fw);
        if (!c->pooler_live) populate_pool(c);
        /* adjacent ranges (the background thread posts its sweep in order)
         * are opened together */
        uint64_t h = atomic_load(&c->open_head), tail = atomic_load(&c->open_tail);
        while (h < tail) {
            size_t from = c->open_from[h % OPEN_RING], to = c->open_to[h % OPEN_RING];
            uint64_t e = h + 1;
            while (e < tail && c->open_from[e % OPEN_RING] == to) to = c->open_to[e++ % OPEN_RING];
            set_high(true); /* (the region's lock: see lower_priority) */
            release_batch(c, from, to);
            set_high(false);
            atomic_store(&c->open_head, e);
            h = e;
        }
        if (stop) break;
        tk__futex_wait(&c->help_word, word);
    }
    follow_end(&fw);
    return NULL;
}

static void wake_helper(struct tk_ckpt *c)
{
    atomic_fetch_add(&c->help_word, 1);
    tk__futex_wake(&c->help_word, 1);
}

/* Hands the copied pages among [from, to) to the helper; if its ring is
 * full they stay protected as CLEAN pages, and a writer opens each on its
 * first write. */
static void post_release(struct tk_ckpt *c, size_t from, size_t to)
{
    uint64_t tail = atomic_load(&c->open_tail);
    if (!c->helper_live || tail - atomic_load(&c->open_head) >= OPEN_RING) return;
    c->open_from[tail % OPEN_RING] = from;
    c->open_to[tail % OPEN_RING] = to;
    atomic_store(&c->open_tail, tail + 1);
    wake_helper(c);
}

/* Keeps POOL_AHEAD pool slots populated beyond those handed out (by the
 * helper), so a writer's copy lands in memory already faulted in (a writer
 * that outruns it faults the slot in itself). */
static void prefault_pool(struct tk_ckpt *c)
{
    uint64_t want = atomic_load(&c->pool_next) + POOL_AHEAD;
    if (want > c->npages) want = c->npages;
    if (!c->helper_live || want < atomic_load(&c->pool_want) + POOL_AHEAD / 4) return;
    atomic_store(&c->pool_want, want);
    wake_pooler(c);
}

/* ---- arming ------------------------------------------------------------- */

/* The swap type /proc/self/pagemap shows for a PTE marker (SWP_PTE_MARKER:
 * the last of the 5-bit swap types, after the swap files, the migration,
 * device and poison entries). */
#define PM_SWAP_TYPE_MARKER 31

/* Marks in `data` (bit i - from, logical pages) those system pages of
 * [vs, ve) that are really swapped out, not PTE markers; [vs, ve) was
 * reported swapped by PAGEMAP_SCAN.  /proc/self/pagemap shows a swap
 * entry's type only to CAP_SYS_ADMIN; where it shows none (frame 0: swap
 * offset 0 is the swap header, never a page), the page counts as data. */
static void mark_swapped(struct tk_ckpt *c, size_t from, uintptr_t vs, uintptr_t ve, uint64_t *data)
{
    size_t sps = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)page_addr(c, from);
    uint64_t ent[64];
    for (uintptr_t a = vs; a < ve;) {
        size_t n = (ve - a) / sps < 64 ? (ve - a) / sps : 64;
        bool known = tk__pagemap_read(a, n, ent) == 0;
        for (size_t k = 0; k < n; k++, a += sps) {
            uint64_t frame = ent[k] & ((1ull << 55) - 1);
            bool marker =
                known && (ent[k] >> 62 & 1) && frame != 0 && (frame & 31) == PM_SWAP_TYPE_MARKER;
            if (marker) continue;
            size_t i = (size_t)((a - base) >> c->shift);
            data[i / 64] |= 1ull << (i % 64);
        }
    }
}

/* Sets in `data` (bit i - from) the pages of [from, to) (one area's) that
 * may hold data: present and not the shared zero page, or swapped out.  A
 * page write-protected with UFFD_FEATURE_WP_UNPOPULATED before it was ever
 * populated shows as swapped too (a PTE marker): where the system has swap,
 * /proc/self/pagemap tells the two apart (mark_swapped), and without swap
 * every swapped page is a marker.  Returns 0, or -EOPNOTSUPP to count every
 * page as data.  Called right after the pages were protected: a page
 * without data cannot get any without a write fault. */
static int scan_data(struct tk_ckpt *c, size_t from, size_t to, uint64_t *data)
{
    if (!c->scan) return -EOPNOTSUPP;
    int pm = tk__pagemap_fd();
    if (pm < 0) return -EOPNOTSUPP;
    struct sysinfo si;
    bool swap = sysinfo(&si) != 0 || si.totalswap != 0;
    uintptr_t start = (uintptr_t)page_addr(c, from), end = start + ((to - from) << c->shift);
    memset(data, 0, ((to - from + 63) / 64) * 8);
    struct page_region vec[64];
    while (start < end) {
        uintptr_t walk_end = end;
        long n = tk__pagemap_scan_any(pm, start, end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                                      PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_PFNZERO, vec, 64,
                                      &walk_end);
        if (n < 0) return -EOPNOTSUPP;
        for (long k = 0; k < n; k++) {
            uint64_t cat = vec[k].categories;
            if (!(cat & PAGE_IS_PRESENT)) {
                if (swap) mark_swapped(c, from, vec[k].start, vec[k].end, data);
                continue;
            }
            if (cat & PAGE_IS_PFNZERO) continue;
            size_t i = (size_t)((vec[k].start - (uintptr_t)page_addr(c, from)) >> c->shift);
            size_t j = (size_t)((vec[k].end - (uintptr_t)page_addr(c, from)) >> c->shift);
            for (; i < j && i < to - from; i++) data[i / 64] |= 1ull << (i % 64);
        }
        if (walk_end <= start) break;
        start = walk_end;
    }
    return 0;
}

/* Protects the pages of [from, to) (one area's) marked in `prot` (bit
 * i - from), one tk_protect per run. */
static int protect_marked(struct tk_ckpt *c, size_t from, size_t to, const uint64_t *prot)
{
    size_t a = area_of_index(c, from);
    int err = 0;
    set_high(true); /* (the region's lock: see lower_priority) */
    for (size_t i = 0; i < to - from && !err;) {
        if (!(prot[i / 64] >> (i % 64) & 1)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < to - from && (prot[j / 64] >> (j % 64) & 1)) j++;
        err = tk_protect(c->regions[a], page_addr(c, from + i), (j - i) * c->ps, TK_PROT_READ);
        i = j;
    }
    set_high(false);
    return err;
}

/* The first arming pass over [from, to) (one area's, at most ARM_CHUNK
 * pages): the snapshot's pages become PENDING (DIRTY ones are protected,
 * CLEAN ones are already), then those found without data become HOLEs. */
static int arm_chunk(struct tk_ckpt *c, size_t from, size_t to)
{
    uint64_t prot[ARM_CHUNK / 64] = {0}, armed[ARM_CHUNK / 64] = {0}, data[ARM_CHUNK / 64];
    bool any = false;
    for (size_t i = from; i < to; i++) {
        uint8_t st = atomic_load(&c->state[i]);
        if (st == ST_DIRTY) {
            if (!atomic_compare_exchange_strong(&c->state[i], &st, ST_PENDING)) continue;
            prot[(i - from) / 64] |= 1ull << ((i - from) % 64);
        } else if (st == ST_CLEAN && !c->incremental) {
            if (!atomic_compare_exchange_strong(&c->state[i], &st, ST_PENDING)) continue;
        } else {
            continue; /* CLEAN in an incremental one: not in it; REOPENED: in it */
        }
        armed[(i - from) / 64] |= 1ull << ((i - from) % 64);
        set_bit(c->saved, i);
        any = true;
    }
    if (!c->incremental)
        for (size_t i = from; i < to; i++) set_bit(c->saved, i);
    if (!any) return 0;
    int err = protect_marked(c, from, to, prot);
    if (err || scan_data(c, from, to, data) < 0) return err;
    for (size_t i = from; i < to; i++) {
        size_t k = i - from;
        if (!(armed[k / 64] >> (k % 64) & 1) || (data[k / 64] >> (k % 64) & 1)) continue;
        /* the bit first: a writer that reopens the HOLE clears it after */
        set_bit(c->zero, i);
        uint8_t st = ST_PENDING;
        if (!atomic_compare_exchange_strong(&c->state[i], &st, ST_HOLE)) clear_bit(c->zero, i);
    }
    return 0;
}

/* Arms the pages reopened since they were armed (a later round, or the
 * pause): REOPENED becomes PENDING and is protected again.  One pass over
 * the states, eight at a time. */
static int rearm(struct tk_ckpt *c)
{
    const uint64_t ones = 0x0101010101010101ull, want = ones * ST_REOPENED;
    for (size_t a = 0; a < c->nareas; a++) {
        for (size_t base = c->first[a]; base < c->first[a + 1]; base += ARM_CHUNK) {
            size_t end = base + ARM_CHUNK < c->first[a + 1] ? base + ARM_CHUNK : c->first[a + 1];
            uint64_t prot[ARM_CHUNK / 64] = {0};
            bool any = false;
            for (size_t i = base; i < end;) {
                if ((i & 7) == 0 && i + 8 <= end) {
                    uint64_t w;
                    TK_TSAN_IGNORE_BEGIN(); /* a hint: the CAS below decides */
                    memcpy(&w, (const void *)&c->state[i], 8);
                    TK_TSAN_IGNORE_END();
                    uint64_t x = w ^ want; /* a zero byte where a page is REOPENED */
                    if (!((x - ones) & ~x & (ones << 7))) {
                        i += 8;
                        continue;
                    }
                }
                uint8_t st = ST_REOPENED;
                if (atomic_compare_exchange_strong(&c->state[i], &st, ST_PENDING)) {
                    prot[(i - base) / 64] |= 1ull << ((i - base) % 64);
                    any = true;
                }
                i++;
            }
            if (!any) continue;
            int err = protect_marked(c, base, end, prot);
            if (err) return err;
        }
    }
    return 0;
}

/* Waits until no writer of the given epoch parities is inside the
 * handler. */
static void wait_writers(struct tk_ckpt *c, bool both, uint64_t e)
{
    for (;;) {
        int n = atomic_load(&c->inflight[e & 1]) + (both ? atomic_load(&c->inflight[~e & 1]) : 0);
        if (!n) return;
        sched_yield();
    }
}

static int precopy_rounds(struct tk_ckpt *c);
static int precopy_cut(struct tk_ckpt *c);

/* Arms the areas while the program runs: the first pass chunk by chunk,
 * then rounds over the pages reopened, until few enough are (precopy: its
 * rounds instead). */
static int arm(struct tk_ckpt *c, struct follow *fw)
{
    if (c->precopy) return precopy_rounds(c);
    /* handlers that entered before: they may open pages as the last
     * snapshot left them (CLEAN to DIRTY) */
    uint64_t e = atomic_fetch_add(&c->epoch, 1);
    wait_writers(c, false, e);
    for (size_t a = 0; a < c->nareas; a++)
        for (size_t i = c->first[a]; i < c->first[a + 1]; i += ARM_CHUNK) {
            if (fw) follow_writer(c, fw);
            size_t end = i + ARM_CHUNK < c->first[a + 1] ? i + ARM_CHUNK : c->first[a + 1];
            int err = arm_chunk(c, i, end);
            if (err) return err;
        }
    for (unsigned round = 1; round <= ARM_ROUNDS; round++) {
        long n = atomic_exchange(&c->reopened, 0);
        atomic_store(&c->rounds, round);
        if (n <= ARM_FINAL) break;
        if (fw) follow_writer(c, fw);
        int err = rearm(c);
        if (err) return err;
    }
    return 0;
}

/* In a fork snapshot's child: the program it copies.  A child whose
 * program is gone (killed) stops at its next batch, rather than go on
 * writing a file the next run of the program may be using. */
static pid_t fork_parent;

/* Copies every PENDING page (HOLEs are zero in the image: none is read),
 * BATCH at a time or compressed one by one; then (in the process, not in a
 * fork child) waits for writers' copies to be written.  Copied pages are
 * unprotected in batches unless tracking keeps them protected. */
static void copy_pages(struct tk_ckpt *c, bool child, struct follow *fw)
{
    struct batch b = {.n = 0};
    bool release = !child && !c->track && c->mech != TK_CKPT_STOP;
    /* the pages' place in the file allocated at once: the writers' copies,
     * written at scattered places, would otherwise make it thousands of
     * extents, each allocated on its write (the file system's journal busy
     * meanwhile) and discarded one by one when the image is deleted or
     * replaced (minutes on a file system mounted with discard).  Not
     * without PAGEMAP_SCAN: the data pages then include the never-populated
     * ones, left holes of the file as they are found zero */
    if (!c->compress && c->ndata && c->scan)
        (void)!fallocate(c->fd, FALLOC_FL_KEEP_SIZE, (off_t)c->data_off, (off_t)(c->ndata * c->ps));
    size_t step = c->npages / 100 + 1, batch_from = 0, next_report = step;
    for (size_t i = tk__bitmap_next(c->saved, c->npages, 0); i < c->npages;
         i = tk__bitmap_next(c->saved, c->npages, i + 1)) {
        if (!child && b.n == 0 && atomic_load_explicit(&c->cancel, memory_order_relaxed))
            return; /* tk_ckpt_cancel: end_snapshot puts the pages back */
        if (test_bit(c->zero, i)) {
            /* zero in the image; saved as such */
            uint8_t st = ST_HOLE;
            if (!child) atomic_compare_exchange_strong(&c->state[i], &st, ST_CLEAN);
        } else if (c->compress) {
            uint8_t st = ST_PENDING;
            if (atomic_load(&c->state[i]) == ST_PENDING &&
                atomic_compare_exchange_strong(&c->state[i], &st, ST_COPYING))
                stage_page(c, i, page_addr(c, i), keep_mine);
            if (child && getppid() != fork_parent) _exit(1);
        } else {
            size_t k = b.n;
            if (k == 0) b.off = image_offset(c, i);
            b.idx[k] = i;
            b.iov[k] = (struct iovec){page_addr(c, i), c->ps};
            uint8_t st = ST_PENDING;
            b.mine[k] = atomic_load(&c->state[i]) == ST_PENDING &&
                        atomic_compare_exchange_strong(&c->state[i], &st, ST_COPYING);
            /* a writer took it first: its copy is written in its place */
            b.copy[k] = !b.mine[k] && !child;
            if (b.copy[k]) b.iov[k] = (struct iovec){writer_copy(c, i), c->ps};
            TK_TSAN_IGNORE_BEGIN(); /* write-protected while COPYING: see crc_in_place */
            b.zero[k] = b.mine[k] && zero_page(page_addr(c, i), c->ps);
            TK_TSAN_IGNORE_END();
#ifdef TK_CKPT_TEST_TAKEOVER
            /* a test build: the page stays COPYING until a writer took
             * it or 2 ms have passed */
            for (int w = 0; b.mine[k] && w < 100 && atomic_load(&c->state[i]) == ST_COPYING; w++)
                usleep(20);
#endif
            if (++b.n == BATCH) {
                flush_batch(c, &b);
                if (child && getppid() != fork_parent) _exit(1);
            }
        }
        /* release only pages of flushed batches */
        if (release && b.n == 0 && i + 1 - batch_from >= UNPROT_BATCH) {
            post_release(c, batch_from, i + 1);
            batch_from = i + 1;
        }
        /* (compressed) writers' copies only between batches: one of a
         * page in the batch being built must be written after it */
        if (!child && b.n == 0) {
            follow_writer(c, fw);
            if (c->compress) drain_queue(c);
            prefault_pool(c);
        }
        if (!child && i >= next_report) {
            report(c);
            next_report = i + step;
        }
    }
    flush_batch(c, &b);
    if (!child && c->compress)
        while (atomic_load(&c->done) < c->ndata && !atomic_load(&c->cancel)) {
            drain_queue(c);
            if (atomic_load(&c->done) < c->ndata) sched_yield();
        }
    if (!child && atomic_load(&c->cancel)) return;
    if (c->compress) flush_stage(c);
    if (release) post_release(c, batch_from, c->npages);
}

static void precopy_copy(struct tk_ckpt *c);

static void copy_all(struct tk_ckpt *c, bool child)
{
    if (c->precopy) {
        precopy_copy(c);
        return;
    }
    struct follow fw = {.init = false};
    copy_pages(c, child, &fw);
    follow_end(&fw);
}

/* ---- precopy ------------------------------------------------------------
 * The kernel tracks the writes: the areas are regions of the pagemap-scan
 * mechanism (userfaultfd's asynchronous write protection: a write to a
 * protected page is resolved in the kernel, no signal; tk_dirty reports
 * the pages written since its last call and protects them again, page by
 * page, atomically).  A snapshot's background thread writes its pages to
 * their places in the image (data_off + index * page size: the image's
 * entries locate each page, as a compressed image's do) while the program
 * runs, then collects the pages written meanwhile and writes them again
 * (staged, after the pages' places: see precopy_write), round after round,
 * until a round finds few enough (PRECOPY_FINAL) or PRECOPY_ROUNDS have
 * passed.  The instant then copies the pages written
 * since into pool slots, with the writers that fault paused: it collects
 * again until a collection finds nothing written, so that no write lies
 * between the image's pages (a writer that keeps writing pages nobody
 * protected would keep it going: after PRECOPY_CUTS collections the areas
 * are protected whole, which stops every writer, and one last collection
 * ends it).  The background thread then writes those copies.  Each page of
 * the image is the content of its last copy, which no write followed
 * before the instant (a later write would have put it in a later
 * collection); a copy racing a write is torn, its CRC of whatever was read
 * after, and the write brings it back in the next collection.  Between
 * snapshots the kernel keeps tracking, so an incremental snapshot's pages
 * are the first collection's. */

/* The pages written since the last collection, protected again, into
 * c->written; their number, or a negative errno. */
static long collect(struct tk_ckpt *c)
{
    memset(c->written, 0, c->words * 8);
    long total = 0;
    for (size_t a = 0; a < c->nareas; a++) {
        size_t n = c->first[a + 1] - c->first[a];
        long r = tk_dirty(c->regions[a], c->abits, n);
        if (r < 0) return r;
        total += r;
        for (size_t w = 0; w < (n + 63) / 64; w++)
            for (uint64_t bits = c->abits[w]; bits; bits &= bits - 1) {
                size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
                if (i < n) c->written[(c->first[a] + i) / 64] |= 1ull << ((c->first[a] + i) % 64);
            }
    }
    return total;
}

static uint64_t located_at(const struct tk_ckpt *c, size_t idx)
{
    return c->data_off + (uint64_t)idx * c->ps;
}

/* Page idx copied into the staging buffer, which is written at the end of
 * the image when full: a scattered page costs a memcpy, not a write of its
 * own (~4 us through the page cache, ~90 us direct); its entry then points
 * there, and its copy at its index, if any, is left unused. */
static void precopy_stage(struct tk_ckpt *c, size_t idx, const unsigned char *src)
{
    if (c->staged + c->ps > STAGE) flush_stage(c);
    unsigned char *dst = c->stage + c->staged;
    TK_TSAN_IGNORE_BEGIN(); /* (a write may race it: see precopy_write) */
    memcpy(dst, src, c->ps);
    TK_TSAN_IGNORE_END();
    c->crc[idx] = tk__crc32c((uint32_t)idx, dst, c->ps);
    c->loc[idx] = (c->append + c->staged) << 20 | c->ps;
    c->staged += c->ps;
    set_bit(c->saved, idx);
    clear_bit(c->zero, idx);
}

/* Writes the pages marked in `set`.  The first round (`first`): runs of
 * consecutive pages straight from memory to their places, each with its
 * CRC read after, pages scattered (runs shorter than DIRECT_RUN) staged,
 * and the pages never populated held as zero, not read.  The rounds after
 * it, whose pages are scattered as the program writes them, stage every
 * page: direct writes of short runs wait for the disk each (~0.3 ms), and
 * a round slower than the writes never ends.  A page written meanwhile is
 * collected again.  0 or a negative errno. */
static int precopy_write(struct tk_ckpt *c, const uint64_t *set, bool first)
{
    if (!first) {
        for (size_t i = tk__bitmap_next(set, c->npages, 0); i < c->npages;
             i = tk__bitmap_next(set, c->npages, i + 1)) {
            if ((i & 4095) == 0 && atomic_load(&c->cancel)) return -ECANCELED;
            precopy_stage(c, i, page_addr(c, i));
        }
        return atomic_load(&c->error);
    }
    bool scan = first;
    struct iovec iov[PRECOPY_RUN];
    for (size_t a = 0; a < c->nareas; a++)
        for (size_t base = c->first[a]; base < c->first[a + 1]; base += ARM_CHUNK) {
            if (atomic_load(&c->cancel)) return -ECANCELED;
            size_t end = base + ARM_CHUNK < c->first[a + 1] ? base + ARM_CHUNK : c->first[a + 1];
            uint64_t data[ARM_CHUNK / 64];
            bool known = scan && scan_data(c, base, end, data) == 0;
            for (size_t i = base; i < end;) {
                if (!test_bit(set, i)) {
                    i++;
                    continue;
                }
                if (known && !(data[(i - base) / 64] >> ((i - base) % 64) & 1)) {
                    set_bit(c->saved, i); /* zero: no data */
                    set_bit(c->zero, i);
                    c->loc[i] = 0;
                    i++;
                    continue;
                }
                size_t j = i;
                int n = 0;
                while (j < end && n < PRECOPY_RUN && test_bit(set, j) &&
                       !(known && !(data[(j - base) / 64] >> ((j - base) % 64) & 1))) {
                    iov[n++] = (struct iovec){page_addr(c, j), c->ps};
                    j++;
                }
                if (n < DIRECT_RUN) {
                    for (size_t k = i; k < j; k++) precopy_stage(c, k, page_addr(c, k));
                    if (atomic_load(&c->error)) return atomic_load(&c->error);
                    i = j;
                    continue;
                }
                int err = write_pages(c, iov, n, located_at(c, i));
                if (err) return err;
                for (size_t k = i; k < j; k++) {
                    c->crc[k] = crc_in_place(c, k);
                    c->loc[k] = located_at(c, k) << 20 | c->ps;
                    set_bit(c->saved, k);
                    clear_bit(c->zero, k);
                }
                atomic_fetch_add(&c->bytes, (uint64_t)n * c->ps);
                i = j;
            }
        }
    return 0;
}

/* Pool slots populated for the instant's copies: the pages written in the
 * last round, and POOL_INSTANT more (the instant copies into them with the
 * writers that fault paused; a page the host has taken back costs 5-13 us
 * to populate). */
static int precopy_ready(struct tk_ckpt *c, long last, int err)
{
    uint64_t want = (uint64_t)last + POOL_INSTANT;
    if (want > c->npages) want = c->npages;
    if (!err && want > atomic_load(&c->pool_want)) {
        atomic_store(&c->pool_want, want);
        wake_pooler(c);
    }
    return err;
}

/* The rounds, before the instant (in place of arming). */
static int precopy_rounds(struct tk_ckpt *c)
{
    /* handlers that entered before (a page the last snapshot's instant
     * protected, being opened) */
    uint64_t e = atomic_fetch_add(&c->epoch, 1);
    wait_writers(c, false, e);
    /* the background thread's rounds take what the program leaves */
    if (c->async_arm) lower_priority(c);
    long n = collect(c); /* written since the last instant */
    if (n < 0) return (int)n;
    if (!c->incremental) {
        memset(c->written, 0xff, c->words * 8);
        if (c->npages % 64) c->written[c->words - 1] = (1ull << (c->npages % 64)) - 1;
    }
    for (unsigned r = 0;; r++) {
        atomic_store(&c->rounds, r + 1);
        int err = precopy_write(c, c->written, r == 0);
        if (err) return err;
        if (c->async_arm) report(c); /* (the background thread's, not tk_ckpt_start's) */
        if (r + 1 >= PRECOPY_ROUNDS) return precopy_ready(c, n, 0); /* the instant takes the rest */
        n = collect(c);
        if (n < 0) return (int)n;
        if (n <= PRECOPY_FINAL) return precopy_ready(c, n, precopy_write(c, c->written, false));
    }
}

/* Page idx into its pool slot (its own from an earlier collection of this
 * instant, else a fresh one), for the background thread to write. */
static void precopy_take(struct tk_ckpt *c, size_t idx)
{
    if (!test_bit(c->final, idx)) {
        uint64_t s = atomic_fetch_add(&c->pool_next, 1);
        c->slot_of[idx] = (uint32_t)s;
        set_bit(c->final, idx);
    }
    /* another thread of the program may be writing it: then the copy is
     * torn, and the next collection has the page again */
    TK_TSAN_IGNORE_BEGIN();
    memcpy(c->pool + (size_t)c->slot_of[idx] * c->ps, page_addr(c, idx), c->ps);
    TK_TSAN_IGNORE_END();
    set_bit(c->saved, idx);
    clear_bit(c->zero, idx);
    c->loc[idx] = located_at(c, idx) << 20 | c->ps;
}

/* The instant (in place of the last re-arming, writers that fault
 * paused). */
static int precopy_cut(struct tk_ckpt *c)
{
    bool whole = false;
    int err = 0;
    set_high(true); /* writers may wait for it (see lower_priority) */
    for (unsigned k = 0;; k++) {
        long n = collect(c);
        if (n < 0) {
            err = (int)n;
            break;
        }
        for (size_t w = 0; w < c->words; w++)
            for (uint64_t bits = c->written[w]; bits; bits &= bits - 1)
                precopy_take(c, w * 64 + (size_t)__builtin_ctzll(bits));
        if (n == 0 || whole) break;
        if (k + 1 >= PRECOPY_CUTS) {
            /* writers that do not stop: every one faults, and waits */
            for (size_t a = 0; a < c->nareas && !err; a++)
                err = tk_protect(c->regions[a], c->areas[a].addr, c->areas[a].len, TK_PROT_READ);
            whole = true;
            if (err) break;
        }
    }
    if (whole)
        for (size_t a = 0; a < c->nareas; a++)
            tk_unprot(c->regions[a], c->areas[a].addr, c->areas[a].len);
    set_high(false);
    return err;
}

/* After the instant: the copies taken at it, to their places. */
static void precopy_copy(struct tk_ckpt *c)
{
    struct iovec iov[BATCH];
    uint64_t copies = 0; /* the rounds wrote the others */
    for (size_t w = 0; w < c->words; w++) copies += (uint64_t)__builtin_popcountll(c->final[w]);
    atomic_store(&c->done, c->ndata > copies ? c->ndata - copies : 0);
    atomic_store(&c->by_thread, c->ndata);
    report(c);
    for (size_t i = tk__bitmap_next(c->final, c->npages, 0); i < c->npages;) {
        if (atomic_load(&c->cancel)) return; /* tk_ckpt_cancel: end_snapshot unwinds */
        size_t a = area_of_index(c, i), j = i;
        int n = 0;
        while (j < c->first[a + 1] && n < BATCH && test_bit(c->final, j)) {
            unsigned char *src = c->pool + (size_t)c->slot_of[j] * c->ps;
            c->crc[j] = tk__crc32c((uint32_t)j, src, c->ps);
            iov[n++] = (struct iovec){src, c->ps};
            j++;
        }
        if (n < DIRECT_RUN) {
            for (int k = 0; k < n; k++)
                precopy_stage(c, i + (size_t)k, (const unsigned char *)iov[k].iov_base);
        } else if (!atomic_load(&c->error)) {
            int err = write_pages(c, iov, n, located_at(c, i));
            if (err) set_error(c, err);
        }
        atomic_fetch_add(&c->bytes, (uint64_t)n * c->ps);
        atomic_fetch_add(&c->done, (uint64_t)n);
        i = tk__bitmap_next(c->final, c->npages, j);
    }
    if (atomic_load(&c->cancel)) return;
    flush_stage(c);
    if (!atomic_load(&c->error) && fdatasync(c->fd) != 0) set_error(c, -errno);
}

static void reset_queue(struct tk_ckpt *c)
{
    uint64_t used = atomic_load(&c->queue_tail), fresh = atomic_load(&c->pool_next);
    uint64_t ready = atomic_load(&c->pool_ready);
    uint64_t touched = fresh > ready ? fresh : ready;
    if (touched) { /* give the copies back */
        madvise(c->pool, touched * c->ps, MADV_DONTNEED);
        madvise(c->free_next, touched * sizeof *c->free_next, MADV_DONTNEED);
    }
    for (uint64_t q = 0; q < used; q++) atomic_store(&c->queue[q], UINT32_MAX);
    atomic_store(&c->queue_tail, 0);
    atomic_store(&c->queue_head, 0);
    atomic_store(&c->copies_written, 0);
    atomic_store(&c->free_top, 0);
    atomic_store(&c->pool_next, 0);
    atomic_store(&c->pool_ready, 0);
    atomic_store(&c->pool_want, 0);
}

/* Stops the helper once it has done every range posted. */
static void stop_helper(struct tk_ckpt *c)
{
    if (!c->helper_live) return;
    atomic_store(&c->help_stop, true);
    wake_helper(c);
    pthread_join(c->helper, NULL);
    c->helper_live = false;
    if (c->pooler_live) {
        wake_pooler(c);
        pthread_join(c->pooler, NULL);
        c->pooler_live = false;
    }
}

/* ---- priority ------------------------------------------------------------
 * The background thread runs low (lower_priority): by default SCHED_IDLE,
 * so that it runs only on a CPU nothing else wants and a program thread
 * that wakes up preempts it at once; "nice": nice 19; "fair": the
 * program's own priority.  Following the writers, the arming and helper
 * threads run as low.  Some of their work holds a lock a writer's fault
 * may wait for: a region's lock, which tk_protect and tk_unprot hold across
 * their system call (arming's protections, the helper's releases).  The
 * scheduler may keep a thread that low off its CPU for tens of
 * milliseconds while a thread of the program runs there, and a writer
 * waiting behind it would wait as long (priority inheritance lifts neither
 * SCHED_IDLE nor a nice value).  So such a section runs at the thread's own
 * priority (set_high): a writer then waits for one system call
 * at most.  Going back up needs CAP_SYS_NICE or an RLIMIT_NICE that allows
 * the thread's nice value (sched(7)); a thread without either stays low
 * throughout, as it would otherwise take the writers' CPU all the time. */
enum { LOW_NONE, LOW_IDLE, LOW_NICE };
static __thread int tl_low = LOW_NONE; /* how the calling thread was lowered */
static __thread bool tl_may_raise;     /* and whether it may go back up */
static __thread int tl_nice;           /* its nice value before */

/* Whether the calling thread may go back to nice value `nice` once lower. */
static bool may_raise(int nice)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NICE, &r) == 0 &&
        (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= (rlim_t)(20 - nice)))
        return true;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    return syscall(SYS_capget, &h, d) == 0 && (d[0].effective >> CAP_SYS_NICE & 1);
}

/* Lowers the calling thread as the configuration says. */
static void lower_priority(const struct tk_ckpt *c)
{
    if (c->copier == COPIER_FAIR || tl_low != LOW_NONE) return;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno) nice = 0;
    tl_nice = nice;
    tl_may_raise = may_raise(nice);
    if (c->copier == COPIER_IDLE) {
        struct sched_param sp = {.sched_priority = 0};
        if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0) {
            tl_low = LOW_IDLE;
            return;
        }
    }
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) == 0) tl_low = LOW_NICE;
}

/* The calling thread at its own priority (high), for a section holding a
 * lock a writer may wait for, and low again after it (no-op for a thread
 * not lowered, or one that may not go back up). */
static void set_high(bool high)
{
    if (!tl_may_raise) return;
    if (tl_low == LOW_IDLE) {
        struct sched_param sp = {.sched_priority = 0};
        pthread_setschedparam(pthread_self(), high ? SCHED_OTHER : SCHED_IDLE, &sp);
    } else if (tl_low == LOW_NICE) {
        setpriority(PRIO_PROCESS, (id_t)gettid(), high ? tl_nice : 19);
    }
}

/* After tk_ckpt_cancel (the background thread has stopped, the helper
 * too): every page becomes DIRTY and writable again, the next snapshot is
 * a full one.  A page a writer is copying (TAKEN) is left to it: it makes
 * the page DIRTY and opens it itself; the writers still inside the handler
 * are waited for, so none queues a copy after the queue is reset. */
static void unwind_cancel(struct tk_ckpt *c)
{
    for (size_t i = 0; i < c->npages; i++) {
        uint8_t st = atomic_load(&c->state[i]);
        while (st != ST_DIRTY && st != ST_TAKEN &&
               !atomic_compare_exchange_weak(&c->state[i], &st, ST_DIRTY)) {
        }
    }
    set_high(true); /* (the regions' locks: see lower_priority) */
    for (size_t a = 0; a < c->nareas; a++)
        tk_unprot(c->regions[a], c->areas[a].addr, c->areas[a].len);
    set_high(false);
    wait_writers(c, true, atomic_load(&c->epoch));
    c->base_seq = 0;
}

/* The end of a snapshot: the directory and header (unless the fork child
 * wrote them), the statistics, and whether the next may be incremental. */
static void end_snapshot(struct tk_ckpt *c, bool write_image)
{
    /* cancelled before the image was complete: it never will be */
    if (atomic_load(&c->cancel) && !atomic_load(&c->error)) set_error(c, -ECANCELED);
    if (atomic_load(&c->error) == -ECANCELED) unwind_cancel(c);
    reset_queue(c);
    if (c->dfd != c->fd) close(c->dfd);
    c->dfd = c->fd;
    int err = atomic_load(&c->error);
    if (!err && write_image) {
        err = finish_image(c);
        if (err) set_error(c, err);
    }
    if (!err && !write_image) {
        /* the fork child wrote it: its header says what it holds */
        tk_ckpt_image_info info;
        if (tk_ckpt_info(c->fd, &info) == 0) {
            c->nzero = info.pages_zero;
            atomic_store(&c->image_bytes, info.file_bytes);
            atomic_store(&c->data_bytes, info.data_bytes);
        }
    }
    if (!err)
        c->base_seq = c->seq;
    else
        c->base_seq = 0; /* pages were marked clean without an image: next one is full */
    atomic_store(&c->duration, now_ns(CLOCK_MONOTONIC) - c->t_start);
    if (c->mech != TK_CKPT_FORK)
        atomic_store(&c->thread_cpu, now_ns(CLOCK_THREAD_CPUTIME_ID) - c->cpu0);
    atomic_store(&c->running, false);
    report(c);
}

static int arm_and_pause(struct tk_ckpt *c);
static int arm_then_wait(struct tk_ckpt *c);
static void fail_start(struct tk_ckpt *c, int err);

static void *snapshot_thread(void *arg)
{
    struct tk_ckpt *c = arg;
    tk__block_async_signals();
    c->cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    if (c->async_arm) {
        /* at the program's priority: writers wait for the pause's end */
        int err = c->caller_instant ? arm_then_wait(c) : arm_and_pause(c);
        if (err) {
            stop_helper(c);
            fail_start(c, err);
            report(c);
            return NULL;
        }
    }
    if (c->mech != TK_CKPT_FORK) lower_priority(c);
    if (c->mech == TK_CKPT_FORK) {
        int st = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        /* wait for it to end without reaping it, so that tk_ckpt_cancel,
         * under child_lock, never signals a pid already reused */
        siginfo_t si;
        while (waitid(P_PID, (id_t)c->child, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&c->child_lock);
        while (wait4(c->child, &st, 0, &ru) < 0 && errno == EINTR) {
        }
        c->child = 0;
        pthread_mutex_unlock(&c->child_lock);
        atomic_store(&c->thread_cpu,
                     (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
                         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u);
        if (atomic_load(&c->cancel))
            set_error(c, -ECANCELED);
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) /* (the child's errno, if it says) */
            set_error(c, WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO);
        atomic_store(&c->done, c->ndata);
        atomic_store(&c->by_thread, c->ndata);
        atomic_store(&c->bytes, c->ndata * c->ps);
        end_snapshot(c, false);
        return NULL;
    }
    copy_all(c, false);
    stop_helper(c);
    end_snapshot(c, true);
    return NULL;
}

/* Counts the snapshot's pages at the instant and each bitmap word's data
 * pages before it (the uncompressed image's layout). */
static void count_pages(struct tk_ckpt *c)
{
    uint64_t held = 0, zero = 0, data = 0;
    for (size_t w = 0; w < c->words; w++) {
        c->zero[w] &= c->saved[w];
        c->prefix[w] = data;
        held += (uint64_t)__builtin_popcountll(c->saved[w]);
        zero += (uint64_t)__builtin_popcountll(c->zero[w]);
        data += (uint64_t)__builtin_popcountll(c->saved[w] & ~c->zero[w]);
    }
    c->nsaved = held;
    c->nzero = zero;
    c->ndata = data;
}

/* TK_CKPT_CLOSE_FDS, in the fork child: closes every descriptor but 0, 1,
 * 2, the image's (fd, dfd) and the pagemap's the child reads.  No
 * allocation: the child of a threaded program may call only what is
 * async-signal-safe (close_range, else close one by one). */
static void close_fds_but_image(const struct tk_ckpt *c)
{
    int keep[4] = {c->fd, c->dfd, tk__pagemap_fd(), -1};
    /* sorted, so the gaps between them are closed */
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (keep[j] < keep[i]) {
                int t = keep[i];
                keep[i] = keep[j];
                keep[j] = t;
            }
    struct rlimit rl;
    unsigned max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 20)
                       ? (unsigned)rl.rlim_cur
                       : (1u << 20);
    unsigned from = 3;
    for (int i = 0; i <= 3; i++) {
        unsigned to = i < 3 ? (keep[i] < 0 ? 0 : (unsigned)keep[i]) : ~0u; /* exclusive */
        if (to <= from) {
            if (i < 3 && keep[i] >= 0 && (unsigned)keep[i] + 1 > from) from = (unsigned)keep[i] + 1;
            continue;
        }
#ifdef SYS_close_range
        if (syscall(SYS_close_range, from, to - 1, 0) == 0) {
            from = to + 1;
            continue;
        }
#endif
        for (unsigned fd = from; fd < to && fd < max; fd++) close((int)fd);
        from = to + 1;
    }
}

/* The fork child: writes the image from its copy of the memory, which no
 * one changes: pages without data are found here. */
static void fork_child(struct tk_ckpt *c, pid_t parent)
{
    fork_parent = parent;
    if (c->close_fds) close_fds_but_image(c);
    lower_priority(c);
    uint64_t data[ARM_CHUNK / 64];
    for (size_t a = 0; a < c->nareas; a++)
        for (size_t i = c->first[a]; i < c->first[a + 1]; i += ARM_CHUNK) {
            size_t end = i + ARM_CHUNK < c->first[a + 1] ? i + ARM_CHUNK : c->first[a + 1];
            if (scan_data(c, i, end, data) < 0) continue;
            for (size_t k = i; k < end; k++)
                if (!(data[(k - i) / 64] >> ((k - i) % 64) & 1))
                    c->zero[k / 64] |= 1ull << (k % 64);
        }
    count_pages(c);
    c->append = c->data_off;
    copy_all(c, true);
    int err = atomic_load(&c->error);
    if (!err) err = finish_image(c);
    _exit(!err ? 0 : -err > 0 && -err < 256 ? -err : EIO); /* (the parent's error) */
}

/* Puts the pages back as they were after a failed start: writable, to be
 * saved next time (writers are paused and none is inside). */
static void unwind_start(struct tk_ckpt *c)
{
    for (size_t i = 0; i < c->npages; i++) {
        uint8_t st = atomic_load(&c->state[i]);
        if (st == ST_PENDING || st == ST_HOLE || st == ST_REOPENED || st == ST_CLEAN)
            atomic_store(&c->state[i], ST_DIRTY);
    }
    set_high(true); /* (the regions' locks: see lower_priority) */
    for (size_t a = 0; a < c->nareas; a++)
        tk_unprot(c->regions[a], c->areas[a].addr, c->areas[a].len);
    set_high(false);
    c->base_seq = 0;
}

/* Arms the areas while the program runs, then the pause: the writers that
 * fault wait, those inside are waited for, the pages reopened last are
 * protected again - the instant - and the phase is running again (unless
 * arming failed, or stop-the-world: then still paused).  In tk_ckpt_start, or in the background
 * thread at the program's priority (TK_CKPT_ASYNC_START). */
static int pause_and_cut(struct tk_ckpt *c, int err);

static int arm_and_pause(struct tk_ckpt *c)
{
    set_phase(c, PHASE_ARMING);
    return pause_and_cut(c, arm(c, NULL));
}

/* The pause after arming (unless err): the writers that fault wait, those
 * inside are waited for, the pages reopened since they were armed are
 * protected again - the instant - and the phase is running again. */
static int pause_and_cut(struct tk_ckpt *c, int err)
{
    uint64_t t_pause = now_ns(CLOCK_MONOTONIC);
    set_phase(c, PHASE_PAUSED);
    wait_writers(c, true, atomic_load(&c->epoch));
    if (!err) err = c->precopy ? precopy_cut(c) : rearm(c);
    if (err) return err;
    atomic_store(&c->t_instant_real, now_ns(CLOCK_REALTIME));
    atomic_store(&c->t_instant_mono, now_ns(CLOCK_MONOTONIC));
    count_pages(c);
    uint64_t t_end = now_ns(CLOCK_MONOTONIC);
    atomic_store(&c->protect_ns, t_end - c->t_start);
    atomic_store(&c->protect_pause_ns, t_end - t_pause);
    atomic_store(&c->pause_ns, t_end - t_pause);
    if (c->mech != TK_CKPT_STOP) set_phase(c, PHASE_RUNNING); /* stop-the-world: not yet */
    return 0;
}

/* TK_CKPT_CALLER_INSTANT, in the background thread: arms the areas while
 * the program runs, then waits for the program's tk_ckpt_instant (or
 * tk_ckpt_wait) to take the pause and the instant; the phase stays ARMING
 * meanwhile, so writers only reopen the pages they write.  Returns the
 * instant's error, or -ECANCELED if tk_ckpt_cancel came first. */
static int arm_then_wait(struct tk_ckpt *c)
{
    set_phase(c, PHASE_ARMING);
    /* the program's instant is its own: arming needs no priority, and at
     * SCHED_IDLE beside the writers it interrupts none of them */
    struct follow fw = {.init = false};
    if (c->follow) lower_priority(c);
    int err = arm(c, &fw);
    follow_end(&fw);
    if (err) return err;
    pthread_mutex_lock(&c->cut_lock);
    atomic_store(&c->cut, CUT_READY);
    for (;;) {
        int s = atomic_load(&c->cut);
        if (s == CUT_DONE) break;
        if (s == CUT_READY && atomic_load(&c->cancel) &&
            atomic_compare_exchange_strong(&c->cut, &s, CUT_DONE)) {
            c->cut_err = -ECANCELED;
            break;
        }
        pthread_cond_wait(&c->cut_cond, &c->cut_lock);
    }
    err = c->cut_err;
    pthread_mutex_unlock(&c->cut_lock);
    return err;
}

static int instant(tk_ckpt *c);

int tk_ckpt_instant(tk_ckpt *c)
{
    uint64_t mask;
    tk__defer_signals(&mask); /* (see tk_ckpt_start) */
    int r = instant(c);
    tk__restore_signals(&mask);
    return r;
}

static int instant(tk_ckpt *c)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_instant: checkpointer is NULL");
    note_cpu(c);
    if (atomic_load(&c->t_instant_mono)) return 1;
    if (!atomic_load(&c->running)) {
        int err = atomic_load(&c->error);
        if (err)
            return tk__failf(err, "tk_ckpt_instant: the snapshot ended before its instant: %s",
                             strerror(-err));
        return tk__fail(-EINVAL, "tk_ckpt_instant: no snapshot is running");
    }
    if (!c->caller_instant) return 0; /* tk_ckpt_start or the background thread takes it */
    int s = CUT_READY;
    if (!atomic_compare_exchange_strong(&c->cut, &s, CUT_TAKING)) {
        if (s != CUT_DONE) return 0; /* still arming, or another thread is taking it */
        pthread_mutex_lock(&c->cut_lock);
        int err = c->cut_err;
        pthread_mutex_unlock(&c->cut_lock);
        if (err == -ECANCELED) return tk__fail(err, "tk_ckpt_instant: the snapshot was cancelled");
        if (err) return tk__failf(err, "tk_ckpt_instant: protecting failed: %s", strerror(-err));
        return 1;
    }
    int err = pause_and_cut(c, 0);
    pthread_mutex_lock(&c->cut_lock);
    c->cut_err = err;
    atomic_store(&c->cut, CUT_DONE);
    pthread_cond_broadcast(&c->cut_cond);
    pthread_mutex_unlock(&c->cut_lock);
    if (err)
        return tk__failf(err, "tk_ckpt_instant: protecting the areas failed: %s", strerror(-err));
    return 1;
}

/* Puts everything back after arming failed (or was cancelled): the pages
 * writable, the pool populated while arming given back (the helper and
 * the pool thread, if any, have stopped), the snapshot not running, its
 * error set. */
static void fail_start(struct tk_ckpt *c, int err)
{
    if (atomic_load(&c->phase) != PHASE_PAUSED) {
        set_phase(c, PHASE_PAUSED);
        wait_writers(c, true, atomic_load(&c->epoch));
    }
    unwind_start(c);
    reset_queue(c);
    set_error(c, err);
    if (c->dfd != c->fd) close(c->dfd);
    c->dfd = c->fd;
    atomic_store(&c->running, false);
    set_phase(c, PHASE_RUNNING);
}

static int start(tk_ckpt *c, int fd, unsigned flags);

/* The pause may be taken in the caller's thread (tk_ckpt_start, and
 * tk_ckpt_instant, which tk_ckpt_wait calls): its asynchronous signals wait
 * meanwhile, since a handler of one that wrote to an area would wait for
 * the pause its own thread holds. */
int tk_ckpt_start(tk_ckpt *c, int fd, unsigned flags)
{
    uint64_t mask;
    tk__defer_signals(&mask);
    int r = start(c, fd, flags);
    tk__restore_signals(&mask);
    return r;
}

static int start(tk_ckpt *c, int fd, unsigned flags)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_start: checkpointer is NULL");
    note_cpu(c);
    if (flags & ~(unsigned)(TK_CKPT_INCREMENTAL | TK_CKPT_COMPRESS | TK_CKPT_ASYNC_START |
                            TK_CKPT_CALLER_INSTANT))
        return tk__fail(-EINVAL, "tk_ckpt_start: unknown flags");
    if ((flags & TK_CKPT_CALLER_INSTANT) && !(flags & TK_CKPT_ASYNC_START))
        return tk__fail(-EINVAL, "tk_ckpt_start: TK_CKPT_CALLER_INSTANT needs TK_CKPT_ASYNC_START");
    if ((flags & TK_CKPT_INCREMENTAL) && !c->track)
        return tk__fail(-EINVAL, "tk_ckpt_start: incremental snapshots need a checkpointer made "
                                 "with TK_CKPT_TRACK");
    if ((flags & TK_CKPT_COMPRESS) && c->mech == TK_CKPT_PRECOPY)
        return tk__fail(-EINVAL, "tk_ckpt_start: precopy images are not compressed "
                                 "(TK_CKPT_COMPRESS)");
    int bad = tk__img_check_output(fd, "tk_ckpt_start");
    if (bad) return bad;
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->running)) {
        pthread_mutex_unlock(&c->lock);
        return tk__fail(-EBUSY, "tk_ckpt_start: a snapshot is still running");
    }
    if (c->thread_live) {
        pthread_join(c->thread, NULL);
        c->thread_live = false;
    }
    if (ftruncate(fd, 0) < 0 || ftruncate(fd, TK_IMG_HEADER) < 0) {
        int err = -errno;
        pthread_mutex_unlock(&c->lock);
        return tk__failf(err, "tk_ckpt_start: cannot truncate the image file: %s", strerror(-err));
    }
    c->compress = (flags & TK_CKPT_COMPRESS) != 0;
    c->async_arm =
        (flags & TK_CKPT_ASYNC_START) && c->mech != TK_CKPT_FORK && c->mech != TK_CKPT_STOP;
    atomic_store(&c->caller_instant, c->async_arm && (flags & TK_CKPT_CALLER_INSTANT));
    atomic_store(&c->cut, CUT_ARMING);
    c->cut_err = 0;
    if ((c->compress || c->mech == TK_CKPT_PRECOPY) && !c->stage) {
        c->stage = map_zero(STAGE);
        if (!c->stage) {
            pthread_mutex_unlock(&c->lock);
            return tk__fail(-ENOMEM, "tk_ckpt_start: out of memory for compression");
        }
    }
    c->fd = c->dfd = fd;
    char self[40];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    int dfd = open(self, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (dfd >= 0) c->dfd = dfd;
    c->incremental = (flags & TK_CKPT_INCREMENTAL) && c->base_seq != 0;
    c->seq++;
    c->data_off = TK_IMG_HEADER;
    c->append = TK_IMG_HEADER;
    c->staged = 0;
    c->nsaved = c->nzero = c->ndata = 0;
    c->t_instant_real = c->t_instant_mono = 0;
    atomic_store(&c->cancel, false);
    atomic_store(&c->error, 0);
    atomic_store(&c->by_thread, 0);
    atomic_store(&c->by_writers, 0);
    atomic_store(&c->faults, 0);
    atomic_store(&c->max_stall, 0);
    atomic_store(&c->bytes, 0);
    atomic_store(&c->done, 0);
    atomic_store(&c->duration, 0);
    atomic_store(&c->pause_ns, 0);
    atomic_store(&c->protect_ns, 0);
    atomic_store(&c->protect_pause_ns, 0);
    atomic_store(&c->rounds, 0);
    atomic_store(&c->image_bytes, 0);
    atomic_store(&c->data_bytes, 0);
    atomic_store(&c->thread_cpu, 0);
    atomic_store(&c->thread_io, 0);
    atomic_store(&c->st_total, 0);
    atomic_store(&c->st_pause, 0);
    atomic_store(&c->st_page, 0);
    atomic_store(&c->st_copy, 0);
    atomic_store(&c->st_unprot, 0);
    atomic_store(&c->reopened, 0);
    memset(c->saved, 0, c->words * 8);
    memset(c->zero, 0, c->words * 8);
    c->located = c->precopy;
    if (c->located) c->append = c->data_off + c->npages * c->ps; /* staged pages go after */
    if (c->precopy) memset(c->final, 0, c->words * 8);
    c->t_start = now_ns(CLOCK_MONOTONIC);
    int err = 0;

    if (c->mech == TK_CKPT_FORK) {
        /* The pause: let writers already past the phase check finish
         * opening their pages, choose the pages, protect them (to track
         * the next writes) and fork. */
        set_phase(c, PHASE_PAUSED);
        wait_writers(c, true, atomic_load(&c->epoch));
        atomic_store(&c->running, true);
        c->t_instant_real = now_ns(CLOCK_REALTIME);
        c->t_instant_mono = now_ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < c->npages; i++) {
            uint8_t st = atomic_load(&c->state[i]);
            if (!c->incremental || st == ST_DIRTY) {
                set_bit(c->saved, i);
                atomic_store(&c->state[i], ST_PENDING);
            }
        }
        /* without tracking no protection is needed: the child's copy is
         * the snapshot */
        for (size_t a = 0; a < c->nareas && !err && c->track; a++) {
            size_t n = c->first[a + 1] - c->first[a];
            uint64_t *prot = calloc((n + 63) / 64, 8);
            if (!prot) {
                err = -ENOMEM;
                break;
            }
            for (size_t i = 0; i < n; i++)
                if (test_bit(c->saved, c->first[a] + i)) prot[i / 64] |= 1ull << (i % 64);
            err = protect_marked(c, c->first[a], c->first[a + 1], prot);
            free(prot);
        }
        atomic_store(&c->protect_ns, now_ns(CLOCK_MONOTONIC) - c->t_start);
        atomic_store(&c->protect_pause_ns, atomic_load(&c->protect_ns));
        if (!err) {
            count_pages(c); /* the child finds the zero pages */
            pid_t parent = getpid();
            pthread_mutex_lock(&c->child_lock);
            pid_t pid = fork();
            if (pid == 0) fork_child(c, parent);
            if (pid < 0) err = -errno;
            c->child = pid > 0 ? pid : 0;
            pthread_mutex_unlock(&c->child_lock);
        }
        if (!err)
            for (size_t i = 0; i < c->npages; i++)
                if (atomic_load(&c->state[i]) == ST_PENDING)
                    atomic_store(&c->state[i], c->track ? ST_CLEAN : ST_DIRTY);
    } else if (c->async_arm) {
        atomic_store(&c->running, true); /* the background thread arms */
    } else {
        atomic_store(&c->running, true);
        err = arm_and_pause(c);
    }
    if (err) {
        fail_start(c, err);
        pthread_mutex_unlock(&c->lock);
        return tk__failf(err, "tk_ckpt_start: protecting the areas failed: %s", strerror(-err));
    }
    if (c->mech == TK_CKPT_STOP) {
        /* writers keep waiting until every page is copied */
        atomic_store(&c->pause_ns, now_ns(CLOCK_MONOTONIC) - c->t_start);
        c->cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        copy_all(c, false);
        for (size_t a = 0; a < c->nareas && !c->track; a++) {
            for (size_t i = c->first[a]; i < c->first[a + 1]; i++)
                atomic_store(&c->state[i], ST_DIRTY);
            tk_unprot(c->regions[a], c->areas[a].addr, c->areas[a].len);
        }
        set_phase(c, PHASE_RUNNING);
        end_snapshot(c, true);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    if (c->mech == TK_CKPT_FORK) atomic_store(&c->pause_ns, now_ns(CLOCK_MONOTONIC) - c->t_start);
    if (!c->async_arm) set_phase(c, PHASE_RUNNING);
    if (c->mech != TK_CKPT_FORK) {
        atomic_store(&c->open_head, 0);
        atomic_store(&c->open_tail, 0);
        atomic_store(&c->help_stop, false);
        /* without a helper copied pages stay protected until written, and
         * writers fault their pool slots in */
        c->helper_live = pthread_create(&c->helper, NULL, helper_main, c) == 0;
        /* the pool thread where the helper follows the writers (else the
         * helper populates the pool itself) */
        c->pooler_live = c->helper_live && c->follow && c->pool_thread &&
                         pthread_create(&c->pooler, NULL, pooler_main, c) == 0;
        /* Right after the instant every write faults: the copies of the
         * first milliseconds (a thousand pages or two at 50,000 writes a
         * second, with their neighbours) would otherwise go to pool pages
         * the pool thread has not reached, each populated in the writer's
         * fault (13-58 us a fault where the host has taken the memory back,
         * against 5-6).  Populated while the areas are armed, within the
         * 16 MiB a snapshot may add beyond the pages written. */
        if (c->helper_live) {
            atomic_store(&c->pool_want, c->npages < POOL_INSTANT ? c->npages : POOL_INSTANT);
            wake_pooler(c);
        }
    }
    if (pthread_create(&c->thread, NULL, snapshot_thread, c) != 0) {
        /* no thread: arm and copy here, at the caller's priority */
        int copier = c->copier;
        c->copier = COPIER_FAIR;
        atomic_store(&c->caller_instant, false); /* this is the caller */
        snapshot_thread(c);
        c->copier = copier;
    } else {
        c->thread_live = true;
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int tk_ckpt_poll_v2(tk_ckpt *c, tk_ckpt_stats *st)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_poll: checkpointer is NULL");
    bool running = atomic_load(&c->running);
    if (st) {
        memset(st, 0, sizeof *st);
        st->seq = c->seq;
        st->incremental = c->incremental;
        st->running = running;
        st->error = atomic_load(&c->error);
        st->pages_total = c->npages;
        st->pages_saved = c->nsaved - c->nzero;
        st->pages_done = atomic_load(&c->done);
        if (st->pages_done > st->pages_saved) st->pages_done = st->pages_saved;
        st->pages_by_thread = atomic_load(&c->by_thread);
        st->pages_by_writers = atomic_load(&c->by_writers);
        st->faults = atomic_load(&c->faults);
        st->pause_ns = atomic_load(&c->pause_ns);
        st->max_stall_ns = atomic_load(&c->max_stall);
        st->bytes_written = atomic_load(&c->bytes);
        st->duration_ns =
            running ? now_ns(CLOCK_MONOTONIC) - c->t_start : atomic_load(&c->duration);
        st->thread_cpu_ns = atomic_load(&c->thread_cpu);
        st->thread_io_ns = atomic_load(&c->thread_io);
        st->stall_total_ns = atomic_load(&c->st_total);
        st->stall_pause_ns = atomic_load(&c->st_pause);
        st->stall_page_ns = atomic_load(&c->st_page);
        st->stall_copy_ns = atomic_load(&c->st_copy);
        st->stall_unprot_ns = atomic_load(&c->st_unprot);
        st->protect_ns = atomic_load(&c->protect_ns);
        st->protect_pause_ns = atomic_load(&c->protect_pause_ns);
        st->protect_rounds = (uint32_t)atomic_load(&c->rounds);
        st->compressed = c->compress;
        st->pages_zero = c->nzero;
        st->image_bytes = atomic_load(&c->image_bytes);
        st->data_bytes = atomic_load(&c->data_bytes);
        st->instant_realtime_ns = atomic_load(&c->t_instant_real);
        st->instant_monotonic_ns = atomic_load(&c->t_instant_mono);
    }
    return running ? 1 : 0;
}

int tk_ckpt_poll_v0(tk_ckpt *c, void *st)
{
    tk_ckpt_stats full;
    int r = tk_ckpt_poll_v2(c, st ? &full : NULL);
    if (st && r >= 0) memcpy(st, &full, STATS_V0);
    return r;
}

int tk_ckpt_wait_v2(tk_ckpt *c, tk_ckpt_stats *st)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_wait: checkpointer is NULL");
    /* the instant is the program's to take: the caller is at a point it
     * may be taken (it waits for the snapshot) */
    while (c->caller_instant && atomic_load(&c->running) && !atomic_load(&c->t_instant_mono) &&
           tk_ckpt_instant(c) == 0) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&c->lock);
    if (c->thread_live) {
        pthread_join(c->thread, NULL);
        c->thread_live = false;
    }
    pthread_mutex_unlock(&c->lock);
    tk_ckpt_poll_v2(c, st);
    int err = atomic_load(&c->error);
    if (err == -ECANCELED) return tk__fail(err, "tk_ckpt_wait: the snapshot was cancelled");
    if (err) return tk__failf(err, "tk_ckpt_wait: the snapshot failed: %s", strerror(-err));
    return 0;
}

int tk_ckpt_wait_v0(tk_ckpt *c, void *st)
{
    tk_ckpt_stats full;
    int r = tk_ckpt_wait_v2(c, st ? &full : NULL);
    if (st && c) memcpy(st, &full, STATS_V0);
    return r;
}

int tk_ckpt_snapshot_v2(tk_ckpt *c, int fd, unsigned flags, tk_ckpt_stats *st)
{
    int err = tk_ckpt_start(c, fd, flags);
    if (err) return err;
    return tk_ckpt_wait_v2(c, st);
}

int tk_ckpt_snapshot_v0(tk_ckpt *c, int fd, unsigned flags, void *st)
{
    int err = tk_ckpt_start(c, fd, flags);
    if (err) return err;
    return tk_ckpt_wait_v0(c, st);
}

int tk_ckpt_cancel(tk_ckpt *c)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_cancel: checkpointer is NULL");
    pthread_mutex_lock(&c->lock);
    bool asked = atomic_load(&c->running);
    if (asked) {
        atomic_store(&c->cancel, true);
        pthread_mutex_lock(&c->cut_lock); /* a thread waiting for the instant */
        pthread_cond_broadcast(&c->cut_cond);
        pthread_mutex_unlock(&c->cut_lock);
        pthread_mutex_lock(&c->child_lock);
        if (c->child > 0) kill(c->child, SIGKILL); /* not reaped yet: still ours */
        pthread_mutex_unlock(&c->child_lock);
    }
    if (c->thread_live) {
        pthread_join(c->thread, NULL);
        c->thread_live = false;
    }
    pthread_mutex_unlock(&c->lock);
    return asked && atomic_load(&c->error) == -ECANCELED ? 0 : 1;
}

int tk_ckpt_discard(tk_ckpt *c, void *addr, size_t len)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_discard: checkpointer is NULL");
    uintptr_t a0 = (uintptr_t)addr;
    if (!len || (a0 | len) & (c->ps - 1))
        return tk__failf(-EINVAL, "tk_ckpt_discard: %p + %zu is not whole pages of %zu bytes", addr,
                         len, c->ps);
    size_t a = 0;
    while (a < c->nareas && !(a0 >= (uintptr_t)c->areas[a].addr &&
                              a0 - (uintptr_t)c->areas[a].addr < c->areas[a].len))
        a++;
    if (a == c->nareas || len > c->areas[a].len - (a0 - (uintptr_t)c->areas[a].addr))
        return tk__failf(-EINVAL, "tk_ckpt_discard: %p + %zu is not inside one area", addr, len);
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->running)) {
        pthread_mutex_unlock(&c->lock);
        return tk__fail(-EBUSY, "tk_ckpt_discard: a snapshot is running");
    }
    /* Saved pages (CLEAN, write-protected) become DIRTY and writable, as a
     * write would make them: in the next incremental snapshot, where the
     * scan after their protection finds them unpopulated (HOLE: zero, no
     * data).  Writable before they are dropped, so that no protection
     * marker outlives them. */
    size_t first = c->first[a] + ((a0 - (uintptr_t)c->areas[a].addr) >> c->shift);
    size_t n = len >> c->shift;
    for (size_t i = first; i < first + n; i++) atomic_store(&c->state[i], ST_DIRTY);
    int err = c->regions[a] ? tk_unprot(c->regions[a], addr, len) : 0;
    if (!err && madvise(addr, len, MADV_DONTNEED) != 0) err = -errno;
    /* precopy: the kernel saw no write; the next snapshot holds them
     * (zero) */
    if (!err && c->precopy) err = tk_dirty_mark(c->regions[a], addr, len);
    pthread_mutex_unlock(&c->lock);
    if (err) return tk__failf(err, "tk_ckpt_discard: %s", strerror(-err));
    return 0;
}

int tk_ckpt_destroy(tk_ckpt *c)
{
    if (!c) return tk__fail(-EINVAL, "tk_ckpt_destroy: checkpointer is NULL");
    tk_ckpt_wait_v2(c, NULL);
    release(c);
    return 0;
}
