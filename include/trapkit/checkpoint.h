/* trapkit/checkpoint.h - concurrent and incremental checkpointing of chosen
 * memory areas of a running process (Appel & Li section 3, after Li,
 * Naughton & Plank).
 *
 * tk_ckpt_start() write-protects the areas - the snapshot instant - and
 * returns; the program keeps running while a background thread copies the
 * pages to a file.  A write to a page not yet copied copies that page
 * first (in the writing thread, or in trapkit's handler thread), so the
 * writer waits for one page only.  The background thread yields to the
 * program: it runs at SCHED_IDLE (TK_CKPT_FAIR keeps the caller's
 * priority; the environment variable TRAPKIT_CKPT_COPIER=idle|nice|fair
 * overrides both), writes with direct I/O where the file system allows, so
 * the disk paces it, and holds no lock a writer can wait for: a writer
 * never waits for it, whether it is copying, writing or descheduled.  At
 * SCHED_IDLE the checkpointer's threads keep to the CPU the writers last
 * ran on, so that opening a page (a TLB flush) interrupts no other CPU;
 * one that waits there too long goes back to every CPU it may use
 * (TRAPKIT_CKPT_FOLLOW=0: they never follow); then a thread at the
 * program's priority, on any CPU, fills in the memory of the writers'
 * copies ahead of them (TRAPKIT_CKPT_POOLER=0: none).  The image is consistent at
 * the instant: every write that completed before its page was protected is in it, none after.
 * (Writes that fault while the areas are being protected wait until protection is complete.)
 *
 * Incremental images (TK_CKPT_INCREMENTAL) hold only the pages written
 * since the previous snapshot of the same checkpointer; a full image
 * followed by its incremental images restores the state at each snapshot.
 * Each image has a header (magic, version, page size, area layout,
 * lineage and sequence numbers) and a CRC-32C per page; tk_ckpt_restore()
 * verifies every image before it writes a byte of memory, and refuses a
 * damaged, truncated, mismatched or out-of-order chain with a clear error.
 *
 * Mechanisms, behind the same API so they can be compared:
 *   uffd-thread   userfaultfd write protection, faults served by a thread
 *   uffd-sigbus   userfaultfd write protection, SIGBUS in the writer
 *   posix         mprotect + SIGSEGV
 *   fork          fork(); the child writes the image from its copy-on-write
 *                 view, as Redis's BGSAVE does (no write faults in the
 *                 parent, but the fork itself and the copied pages)
 *   stop-the-world  the areas stay protected until every page is copied:
 *                 writers wait for the whole snapshot
 *   precopy       the kernel tracks writes (userfaultfd's asynchronous
 *                 write protection and PAGEMAP_SCAN, Linux 6.7): the
 *                 background thread writes the snapshot's pages while the
 *                 program runs, then again those written meanwhile, round
 *                 after round, until few are left; only those are
 *                 write-protected (mprotect) at the instant and copied
 *                 before they are written.  A write between snapshots or
 *                 during the rounds costs a fault the kernel resolves
 *                 itself (no signal); the image costs more disk writes.
 *                 The instant collects the pages written until a collection
 *                 finds none; where writers never stop it protects the
 *                 whole areas.  Not with TK_CKPT_COMPRESS.
 *
 * The areas must be page-aligned private anonymous memory the caller owns
 * (userfaultfd mechanisms and precopy) or any page-aligned private memory (posix,
 * fork, stop-the-world).  The checkpointer makes a trapkit region of each;
 * do not make regions of them yourself.  Threads of the program may read
 * and write the areas at any time, except during tk_ckpt_restore().
 * System calls that write into the areas (read(2) into them) fail with
 * EFAULT while a page is protected on every mechanism but uffd-thread
 * (uffd-sigbus, posix, and fork and stop-the-world with TK_CKPT_TRACK); use
 * tk_prefault() first.
 *
 * Signals.  A signal handler of the program may write to the areas, in any
 * thread, and may leave by siglongjmp.  So that none waits for a pause its
 * own thread holds, the write-fault handler keeps the faulting thread's
 * asynchronous signals waiting until it returns (tens of microseconds),
 * and tk_ckpt_start() and tk_ckpt_instant() (and so tk_ckpt_snapshot() and
 * tk_ckpt_wait(), which call them) keep the calling thread's waiting while
 * they run: with stop-the-world, for the whole snapshot.
 *
 * A checkpointer destroyed is gone, as memory after free(): destroying it
 * again or using it is undefined.
 */
#ifndef TRAPKIT_CHECKPOINT_H
#define TRAPKIT_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tk_ckpt_mech {
    TK_CKPT_AUTO = 0, /* uffd-thread, else uffd-sigbus, else posix */
    TK_CKPT_UFFD_THREAD,
    TK_CKPT_UFFD_SIGBUS,
    TK_CKPT_POSIX,
    TK_CKPT_FORK,
    TK_CKPT_STOP,
    TK_CKPT_PRECOPY, /* see below */
    TK_CKPT_COUNT_
};

/* "uffd-thread", "uffd-sigbus", "posix", "fork", "stop-the-world", "precopy",
 * "auto". */
const char *tk_ckpt_mech_name(enum tk_ckpt_mech m);
/* TK_CKPT_COUNT_ if the name is none of them. */
enum tk_ckpt_mech tk_ckpt_mech_parse(const char *name);

struct tk_ckpt_area {
    void *addr; /* page-aligned */
    size_t len; /* a multiple of the page size */
};

typedef struct tk_ckpt_stats {
    uint64_t seq;              /* this snapshot's number: 1, 2, ... */
    bool incremental;          /* the image holds only pages written since seq - 1 */
    bool running;              /* still being written */
    int error;                 /* 0, or the negative errno that ended it */
    uint64_t pages_total;      /* pages in the areas */
    uint64_t pages_saved;      /* pages whose data this image holds */
    uint64_t pages_done;       /* pages written so far */
    uint64_t pages_by_thread;  /* copied by the background thread (or the fork child) */
    uint64_t pages_by_writers; /* copied by a writer that reached them first */
    uint64_t faults;           /* write faults taken on the areas during the snapshot */
    uint64_t pause_ns;         /* the pause at the start: protecting the areas (and fork) */
    uint64_t max_stall_ns;     /* the longest a writer spent in a fault during the snapshot
                                  (copying a page, or waiting for the pause or a page
                                  being copied) */
    uint64_t bytes_written;    /* to the image */
    uint64_t duration_ns;      /* from tk_ckpt_start to the image being complete */
    /* The background thread's CPU time, and its time in the system calls
     * that write and sync the image (waiting for the disk included). */
    uint64_t thread_cpu_ns;
    uint64_t thread_io_ns;
    /* Where the writers' time went: sums over the write faults of the
     * snapshot, filled only when timing is on (TK_CKPT_TIMING, or the
     * environment variable TRAPKIT_CKPT_TIMING=1 when the checkpointer is
     * created); 0 otherwise, and then a fault reads no extra clock. */
    uint64_t stall_total_ns;  /* in the write-fault handler, all of it */
    uint64_t stall_pause_ns;  /* waiting for the snapshot instant (protection) */
    uint64_t stall_page_ns;   /* waiting for another writer copying the same page */
    uint64_t stall_copy_ns;   /* copying pages before they are written */
    uint64_t stall_unprot_ns; /* opening the page again (tk_unprot: lock and system call) */
    /* Protecting the areas: tk_ckpt_start protects them in steps while the
     * program runs, then pauses the writers that fault for the last step
     * (the pages written meanwhile): only protect_pause_ns holds anyone up. */
    uint64_t protect_ns;       /* all of it, in tk_ckpt_start */
    uint64_t protect_pause_ns; /* the last step: the pause */
    uint32_t protect_rounds;   /* steps over the pages written meanwhile */
    bool compressed;           /* TK_CKPT_COMPRESS */
    uint64_t pages_zero;       /* not populated at the instant: zero in the image, not written */
    uint64_t image_bytes;      /* the image file's size, once complete */
    uint64_t data_bytes;       /* of which the pages' data (compressed, or pages_saved pages) */
    /* The snapshot instant: when the image's state was cut (the end of the
     * pause; fork: the fork).  CLOCK_REALTIME (the image's created_ns) and
     * CLOCK_MONOTONIC; 0 before tk_ckpt_start has passed it. */
    uint64_t instant_realtime_ns;
    uint64_t instant_monotonic_ns;
} tk_ckpt_stats;
/* tk_ckpt_stats grew after the TRAPKIT_0 version node: a program linked
 * against it binds tk_ckpt_wait, tk_ckpt_poll and tk_ckpt_snapshot at
 * TRAPKIT_0, whose versions fill only the fields up to duration_ns (the
 * struct it was built with); programs built now bind the TRAPKIT_0.2 ones,
 * which fill the whole struct.  A field added later comes with a new node
 * for the three functions. */

/* Called from the background thread about every 1% of the pages and at
 * the end (st->running false). */
typedef void (*tk_ckpt_progress_fn)(const tk_ckpt_stats *st, void *arg);

/* tk_ckpt_config.flags */
#define TK_CKPT_TRACK                                                                              \
    0x1 /* keep track of written pages between snapshots, so                                       \
           TK_CKPT_INCREMENTAL works: copied pages stay write-protected                            \
           and a page's first write after a snapshot takes one fault */
#define TK_CKPT_TIMING                                                                             \
    0x2 /* time where writers' faults spend their time                                             \
           (tk_ckpt_stats.stall_*): a few clock reads per fault */
#define TK_CKPT_FAIR                                                                               \
    0x4 /* the background thread keeps the priority of the                                         \
           thread that starts the snapshot, instead of                                             \
           SCHED_IDLE (use it when the program keeps every CPU                                     \
           busy: an idle-priority copier would then wait, and                                      \
           the writers copy what it has not) */
#define TK_CKPT_CLOSE_FDS                                                                          \
    0x8 /* fork: the child closes every file descriptor but                                        \
           0, 1, 2 and the image's right after fork, so it                                         \
           holds none of the program's sockets or files (a                                         \
           listening socket kept by a child that outlives a                                        \
           killed program makes the next one's bind fail) */

typedef struct tk_ckpt_config {
    const struct tk_ckpt_area *areas;
    size_t nareas; /* 1 to 16 */
    enum tk_ckpt_mech mech;
    unsigned flags; /* TK_CKPT_* */
    tk_ckpt_progress_fn progress;
    void *progress_arg;
} tk_ckpt_config;

typedef struct tk_ckpt tk_ckpt;

/* Creates a checkpointer over the areas.  Returns 0, -EINVAL (bad areas:
 * not page-aligned, of no length, not wholly mapped),
 * -EOPNOTSUPP (the mechanism is not available here; tk_last_error() says
 * why), -EEXIST (an area is already a trapkit region), -EBUSY (an area is
 * still being restored lazily: tk_ckpt_lazy_wait first) or -ENOMEM. */
int tk_ckpt_create(const tk_ckpt_config *cfg, tk_ckpt **out);

/* Waits for a running snapshot, then releases the areas (they stay mapped
 * and become plain read-write memory again). */
int tk_ckpt_destroy(tk_ckpt *c);

/* tk_ckpt_start flags */
#define TK_CKPT_INCREMENTAL                                                                        \
    0x1 /* only the pages written since the previous                                               \
           snapshot (needs TK_CKPT_TRACK; the first                                                \
           snapshot is always full, and so is the one                                              \
           after a snapshot that failed) */
#define TK_CKPT_COMPRESS                                                                           \
    0x2 /* each page compressed with LZ4 (the CRC stays                                            \
           the uncompressed page's) */
#define TK_CKPT_ASYNC_START                                                                        \
    0x4 /* return at once: the background thread protects                                          \
           the areas (at the caller's priority) and passes                                         \
           the instant; tk_ckpt_poll's instant_*_ns say when.                                      \
           Not fork or stop-the-world (ignored there) */
#define TK_CKPT_CALLER_INSTANT                                                                     \
    0x8 /* with TK_CKPT_ASYNC_START: the background thread                                         \
           arms the areas, then leaves the instant to the                                          \
           program, which calls tk_ckpt_instant where its                                          \
           data are consistent (between two requests): the                                         \
           image never holds half of an operation */

/* Starts a snapshot into fd (a regular file opened for writing, without
 * O_APPEND; it is truncated and written with pwrite).  Returns once the snapshot instant
 * has passed: 0, -EBUSY (a snapshot is running), -EINVAL, or a system
 * call's error.  The header is written last, after the pages and the
 * directory and an fsync, so a crash leaves an image that restore
 * refuses.  Not async-signal-safe. */
int tk_ckpt_start(tk_ckpt *c, int fd, unsigned flags);

/* With TK_CKPT_CALLER_INSTANT: takes the snapshot instant now, if the
 * background thread has armed the areas - a short pause in the caller that
 * protects again the pages written since they were armed; the image holds
 * every write made before the call and none after.  Call it at a point
 * where the data are consistent (an event loop: between two requests),
 * again and again until it returns 1; the snapshot waits meanwhile, and
 * writers are not held up.  Returns 1 once the instant has passed (also
 * without TK_CKPT_CALLER_INSTANT, and for fork and stop-the-world, whose
 * instant is in tk_ckpt_start), 0 while the areas are still being armed
 * (or another thread is taking it), -EINVAL if no snapshot is running and
 * none passed its instant, or the error that ended the snapshot first
 * (-ECANCELED after tk_ckpt_cancel).  tk_ckpt_wait takes the instant itself
 * if it has not been taken.  Not async-signal-safe. */
int tk_ckpt_instant(tk_ckpt *c);

/* Waits for the running (or last) snapshot and fills *st (may be NULL).
 * Returns its error, 0 if it completed. */
int tk_ckpt_wait(tk_ckpt *c, tk_ckpt_stats *st);

/* The running (or last) snapshot's statistics so far.  Returns 1 while it
 * runs, 0 when done. */
int tk_ckpt_poll(tk_ckpt *c, tk_ckpt_stats *st);

/* tk_ckpt_start + tk_ckpt_wait. */
int tk_ckpt_snapshot(tk_ckpt *c, int fd, unsigned flags, tk_ckpt_stats *st);

/* Stops the running snapshot: the background thread stops copying (the
 * fork child is killed), the image is left incomplete, without a valid
 * header (restore refuses it), every page of the areas is unprotected and
 * the next snapshot is a full one.  Returns once all that is done: 0 if it
 * stopped a snapshot (which then reports -ECANCELED: tk_ckpt_wait,
 * tk_ckpt_stats.error), 1 if none was running (the last one completed or
 * failed on its own first: tk_ckpt_wait says which), -EINVAL. */
int tk_ckpt_cancel(tk_ckpt *c);

/* Drops the pages of [addr, addr + len) (whole pages of one area): they
 * read as zero again and take no memory until written (MADV_DONTNEED),
 * and the next snapshot holds them as zero - an incremental one too -
 * with no data in the image.  For memory the program no longer needs (an
 * allocator's free pages, a store emptied), which MADV_DONTNEED of its
 * own would drop without the checkpointer knowing.  No other thread may
 * use the range meanwhile.  Returns 0; -EBUSY while a snapshot runs (from
 * tk_ckpt_start until it has completed: call again after tk_ckpt_wait);
 * -EINVAL for a range not page-aligned or not inside one area. */
int tk_ckpt_discard(tk_ckpt *c, void *addr, size_t len);

/* What an image's header says. */
typedef struct tk_ckpt_image_info {
    uint32_t version; /* 2; images of version 1 are read as well */
    uint32_t page_size;
    bool incremental;
    bool compressed;
    uint64_t lineage; /* one per checkpointer: a chain must share it */
    uint64_t seq, parent_seq;
    uint64_t pages_total, pages_saved; /* saved: pages it holds (data or zero) */
    uint64_t pages_zero;               /* of those, zero (not populated): no data */
    size_t nareas;
    uint64_t area_len[16];
    uint64_t created_ns; /* CLOCK_REALTIME at the snapshot instant */
    uint64_t file_bytes; /* the file's size (on disk, where it is sparse: precopy's) */
    uint64_t data_bytes; /* the pages' data in it */
} tk_ckpt_image_info;

/* Reads and checks an image's header (not its pages).  Returns 0 or
 * -EINVAL (not an image, damaged header, another version; tk_last_error()
 * says which), or a read error. */
int tk_ckpt_info(int fd, tk_ckpt_image_info *info);

/* Restores a chain of images - a full one, then any number of incremental
 * ones in order - into the areas, which must have the layout the images
 * were taken of.  Every image is checked completely (header, directory,
 * each page's CRC, the chain's lineage and sequence) before any memory is
 * written; on any error nothing is written and tk_last_error() says what
 * was wrong with which image.  Not during a snapshot of the same areas.
 * The areas may be a live checkpointer's own (rolling them back): the
 * pages it keeps write-protected are stored by the calling thread, writes
 * the checkpointer sees, so the next incremental image holds them. */
int tk_ckpt_restore(const struct tk_ckpt_area *areas, size_t nareas, const int *fds, size_t nfds);

/* ---- lazy restore ------------------------------------------------------
 *
 * Restores a chain as tk_ckpt_restore does, but returns at once: the
 * areas' pages are brought in as threads touch them (userfaultfd MISSING
 * faults, served by a handler thread with the page read from the image and
 * its CRC checked), while a background thread prefetches the rest, pages
 * near those faulted so far first.  A damaged page is never served: the
 * error function is called and the thread that touched the page does not
 * go on.
 *
 * The areas must be freshly mmapped private anonymous memory, never
 * touched (no page populated: tk_ckpt_restore_lazy refuses with -EEXIST
 * otherwise); do not read or write them through system calls (read(2) into
 * them) before tk_ckpt_lazy_wait, and do not create a checkpointer
 * (tk_ckpt_create) on them before the lazy restore is done: it returns
 * -EBUSY then.  Where userfaultfd is not available (tk_probe), the chain is
 * restored eagerly by tk_ckpt_restore_lazy itself, which then reports done
 * at once. */
typedef struct tk_ckpt_lazy tk_ckpt_lazy;

typedef struct tk_ckpt_lazy_stats {
    uint64_t pages_total;    /* pages of the areas */
    uint64_t pages_resident; /* in place so far (by fault or prefetch, data or zero) */
    uint64_t pages_by_fault; /* brought in by a thread touching them */
    uint64_t pages_by_prefetch;
    uint64_t pages_verified;                    /* data pages whose CRC was checked */
    uint64_t start_ns, first_fault_ns, done_ns; /* CLOCK_MONOTONIC; 0 if not yet */
    bool done;                                  /* every page resident and verified */
    int error;         /* 0, or negative errno: -EBADMSG a damaged page, -EIO ... */
    uint64_t bad_page; /* with -EBADMSG: the page index */
    bool eager;        /* userfaultfd was not available: restored eagerly */
} tk_ckpt_lazy_stats;

/* Called (from whichever thread found it, possibly inside a fault handler:
 * must be async-signal-safe) when a page cannot be restored; the default
 * (NULL) writes a clear message to stderr and _exit(70)s: a damaged page is
 * never served.  If it returns, the page stays missing and the threads that
 * touch it wait (forever): the function should end the process or the
 * thread. */
typedef void (*tk_ckpt_lazy_error_fn)(int err, uint64_t page, const char *msg, void *arg);

/* tk_ckpt_lazy_config.flags */
#define TK_CKPT_LAZY_NO_PREFETCH 0x1 /* pages only on fault: no background thread */

typedef struct tk_ckpt_lazy_config {
    const struct tk_ckpt_area *areas;
    size_t nareas;
    const int *fds; /* the chain, oldest first, as tk_ckpt_restore */
    size_t nfds;
    unsigned flags; /* TK_CKPT_LAZY_NO_PREFETCH: pages only on fault */
    tk_ckpt_lazy_error_fn on_error;
    void *arg;
} tk_ckpt_lazy_config;

/* Checks every image's header and directory (as tk_ckpt_restore does: a bad
 * chain is refused before any memory is touched), then returns at once: the
 * areas' pages are brought in as threads touch them, while a background
 * thread prefetches the rest.  The fds stay in use until done.  Returns 0,
 * -EINVAL (bad chain or areas; tk_last_error() says what), -EEXIST (a page
 * of the areas is already populated), -EBUSY (an area is a trapkit region
 * or under another lazy restore), -ENOMEM, or a system call's error. */
int tk_ckpt_restore_lazy(const tk_ckpt_lazy_config *cfg, tk_ckpt_lazy **out);
/* Statistics so far.  Returns 1 while pages are missing, 0 when done, or
 * the negative errno of the error that stopped it. */
int tk_ckpt_lazy_poll(tk_ckpt_lazy *l, tk_ckpt_lazy_stats *st);
/* Waits until every page is resident and verified (or an error): 0 or the
 * error.  With TK_CKPT_LAZY_NO_PREFETCH it brings the missing pages in
 * itself.  On an error it returns after the error function (on_error) has
 * returned, so that what it recorded is seen (one that does not return, as
 * it ended its thread or left by longjmp, is waited for at most a second);
 * the error function must not call it. */
int tk_ckpt_lazy_wait(tk_ckpt_lazy *l, tk_ckpt_lazy_stats *st);
/* Waits as tk_ckpt_lazy_wait, then releases it (the areas become ordinary
 * memory).  Returns what tk_ckpt_lazy_wait returned. */
int tk_ckpt_lazy_destroy(tk_ckpt_lazy *l);

/* Compaction: writes one full image holding the state the chain restores
 * (its newest image's seq and lineage, so incremental images taken after the
 * newest still chain onto it) into out_fd (a regular file open for writing,
 * not with O_APPEND; truncated).  Every
 * page read is verified; a damaged chain is refused and out_fd's content is
 * then unspecified.  flags: TK_CKPT_COMPRESS.  Crash safety is the caller's:
 * write to a new file, fsync, rename over (the man page shows how).
 * Returns 0, -EINVAL (a bad chain; tk_last_error() says what), or a
 * system call's error. */
int tk_ckpt_compact(const int *fds, size_t nfds, int out_fd, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
