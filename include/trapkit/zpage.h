/* trapkit/zpage.h - compressed paging: memory with a budget of resident
 * pages, the rest kept compressed (Appel & Li's compressed paging, Wilson's
 * compression cache).
 *
 * A zpage area is anonymous memory the program uses as any other.  While
 * more of its pages are resident than the budget allows, trapkit's pager
 * thread compresses the coldest (lz4 or zstd; a page of zeros, or of one
 * repeated 8-byte word, is kept as a marker with no data) and drops them.
 * A touch of a dropped page brings it back before the access completes:
 * the area is registered with a userfaultfd in MISSING mode, and the fault
 * is answered with UFFDIO_COPY of the decompressed page - in the faulting
 * thread, by the SIGBUS the kernel raises there (TK_ZPAGE_SIGBUS, the
 * default), or on a handler thread of trapkit's while the faulting thread
 * sleeps in the kernel (TK_ZPAGE_THREAD).
 *
 * Kept copies.  A page brought back by a read keeps its compressed copy
 * and comes back writable, with no protection: when the pager evicts it
 * again it decompresses the copy and compares it with the page (a third of
 * a compression's time), and if the page was not written keeps the copy
 * instead of compressing the page anew.  Writes cost the program nothing
 * (no fault).  With TRAPKIT_ZPAGE_NO_CLEAN set no copy is kept.
 *
 * Coldness.  The kernel offers no cheap way to see which pages were read:
 * PAGEMAP_SCAN reports written pages but has no accessed-bit category, and
 * idle-page tracking may be missing.  So reads are sampled by protection:
 * the pager's clock hand takes a few resident pages at a time away from
 * the program (runs of 32 pages, about 64 + 1/16 of the budget in all) and
 * sees which are touched.  Where the area has userfaultfd write protection
 * the hand holds them: copies them into a buffer of the pager's (with the
 * pages write-protected meanwhile, so no write is lost) and drops them, and
 * a touch of one is a missing-page fault that puts it back from the copy;
 * one still untouched when the pager needs room is compressed from the
 * copy.  The mapping's protection never changes.  Without write protection
 * the hand makes the run inaccessible with mprotect instead, and a touch
 * costs a protection fault that opens the page again (a dropped page of such
 * a run faults twice).  Either way a page still untouched when the pager
 * needs room is evicted; one touched is passed over, and the hand leaves it
 * alone for its next 16 passes (a page the program keeps using is not
 * sampled, nor faulted on, again and again).  A held page counts as
 * resident: its copy takes the memory.  A page's first touch ever also
 * faults (that is how the area counts its resident pages): it is answered
 * with a zero page.
 *
 * The budget.  The pager starts when the resident pages exceed the budget
 * and stops at 1/64 below it; a thread about to bring a page back while the
 * area is 1/8 over its budget waits for the pager first.  So the resident
 * pages never exceed budget + budget/8 + the number of threads faulting at
 * once, but while a fork() is under way: the pager pauses for it, and pages
 * brought back meanwhile do not wait (a thread waiting could hold a lock the
 * forking thread needs, such as malloc's), so the count can pass the bound
 * until the pager catches up after fork() returns.  tk_zpage_trim() evicts
 * down to any number at once.
 *
 * Threads and signals.  Any thread may touch the area, also from a signal
 * handler (the SIGBUS and SIGSEGV handling is trapkit's fault dispatch,
 * async-signal-safe; a handler that touches a dropped page brings it back
 * as the interrupted code would).  Under TK_ZPAGE_SIGBUS the touching
 * thread must not have SIGBUS blocked (nor SIGSEGV, for a page of a run the
 * hand made inaccessible): the kernel kills a process whose thread faults
 * with that signal blocked.  A thread that blocks every signal (one that
 * waits in sigwait(), or a signal handler whose sa_mask is full) and
 * touches the area needs TK_ZPAGE_THREAD.  The other calls are not
 * async-signal-safe.  System calls that read or write the area on the
 * program's behalf (read(2) into it, write(2) from it) fail with EFAULT on
 * a page not in memory under TK_ZPAGE_SIGBUS (a dropped page, one the
 * hand holds, one never touched, one the program dropped itself), and (a
 * write into it) for the moment the hand write-protects a page it is
 * taking, as the kernel raises no signal for its own accesses: call tk_prefault() on the buffer
 * first (TK_ACCESS_WRITE for a read(2) into it).  While the pager runs it
 * may take such a page again between the two, so a call that fails with
 * EFAULT is to be made again after another tk_prefault().  Under TK_ZPAGE_THREAD the kernel waits
 * for trapkit's thread instead, but for a page of a run made inaccessible by mprotect (areas
 * without write protection), which fails with EFAULT.
 *
 * Memory changed behind trapkit's back.  Drop pages with tk_zpage_discard():
 * madvise(MADV_DONTNEED) of the area zeroes the pages in memory (they keep
 * counting as resident until the pager next looks at them) but cannot
 * reach those the pager has dropped already or holds, whose data comes back on their
 * next touch.  Pages the kernel swaps out are the area's as before (the
 * pager reads them back to compress them).  mprotect, mremap and munmap of
 * the area are not allowed.
 *
 * I/O that pins pages.  The pager cannot see which pages the kernel holds
 * pinned for a transfer still in flight: O_DIRECT reads, io_uring fixed
 * buffers, vmsplice, RDMA registrations.  A page it takes meanwhile is
 * copied and dropped, the transfer completes into the dropped page, and the
 * page comes back on its next touch as it was before the transfer: the data
 * is lost, with no error.  Do such I/O through a buffer outside the area
 * (and copy), or into an area without a budget that is not trimmed while
 * the transfer runs.  Buffered read(2) and write(2) are not affected.
 *
 * Locked memory.  The kernel does not drop pages locked by mlock() or
 * mlockall(): tk_zpage_create refuses to start under mlockall(MCL_FUTURE)
 * (-EOPNOTSUPP), and pages of an area locked later stay resident, over the
 * budget (the pager says so once on stderr and tries again every second;
 * threads do not wait for room meanwhile; tk_zpage_trim returns -EBUSY and
 * tk_zpage_discard -EINVAL for them, their data kept).
 *
 * fork().  The child gets a copy of every page: before fork() returns in
 * the child, trapkit puts back every dropped page there (decompressing),
 * and the child's area is plain memory from then on (no budget, no pager;
 * tk_zpage_destroy frees it).  The parent's pager pauses for the fork.
 *
 * Costs.  Fault-in of a dropped page: a signal (or a message to the handler
 * thread), the decompression of 4 KiB and an UFFDIO_COPY; bench/zpage.c
 * measures it beside the same path serving an uncompressed page
 * (TK_ZPAGE_NONE) and beside the kernel's zram swap.  Per page the area
 * keeps 16 bytes of metadata plus the compressed data (and 8 bytes per run
 * of 32 pages for the hand's buffers).
 */
#ifndef TRAPKIT_ZPAGE_H
#define TRAPKIT_ZPAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_zpage tk_zpage;

/* How dropped pages are kept. */
enum tk_zpage_codec {
    TK_ZPAGE_LZ4 = 0, /* LZ4 (the default): fast, ~2x on text-like data */
    TK_ZPAGE_ZSTD,    /* zstd at tk_zpage_config.level: smaller, slower to compress */
    TK_ZPAGE_NONE,    /* uncompressed copies (zero and same-filled pages still as
                         markers): the fault path without the codec */
};

/* Where a touch of a dropped page is served. */
enum tk_zpage_delivery {
    TK_ZPAGE_SIGBUS = 0, /* in the faulting thread (UFFD_FEATURE_SIGBUS), the default */
    TK_ZPAGE_THREAD,     /* on trapkit's handler thread; the faulting thread sleeps */
};

typedef struct tk_zpage_config {
    size_t len;    /* bytes, a multiple of the page size (> 0) */
    size_t budget; /* resident bytes allowed, at least 64 pages; 0 = no budget
                      (nothing is compressed until tk_zpage_trim) */
    enum tk_zpage_codec codec;
    int level; /* zstd's level, 1-19 (0: 1); must be 0 for the other codecs */
    enum tk_zpage_delivery delivery;
    unsigned flags; /* none yet: must be 0 */
} tk_zpage_config;

/* What an area holds and has done. */
typedef struct tk_zpage_stats {
    uint64_t pages;         /* pages of the area */
    uint64_t resident;      /* pages in memory (counted by the area), the clock hand's
                               held copies included */
    uint64_t compressed;    /* pages kept compressed */
    uint64_t markers;       /* pages kept as a marker (zeros, or one repeated word) */
    uint64_t clean;         /* resident pages brought back by a read whose compressed
                               copy is kept (evicting one not written since costs a
                               decompression and a compare, not a compression) */
    uint64_t stored_bytes;  /* bytes the compressed data takes (allocations included),
                               clean pages' copies too */
    uint64_t fault_ins;     /* dropped pages brought back by a touch */
    uint64_t first_touches; /* pages touched for the first time, or the first time since
                               tk_zpage_discard (zero-filled) */
    uint64_t evictions;     /* pages compressed and dropped */
    uint64_t sample_faults; /* touches of pages the clock hand was sampling (held) */
    uint64_t waits;         /* fault-ins that waited for the pager (budget) */
} tk_zpage_stats;

/* Creates an area of cfg->len bytes (zero-filled, read-write) and its
 * pager thread (and handler thread).  Returns 0 and the area in *out, or
 * -EINVAL (a bad field: tk_last_error() names it), -EOPNOTSUPP (no
 * userfaultfd here, or not the feature the delivery needs: tk_last_error()
 * says which), -ENOMEM, or the error of the system call that failed. */
int tk_zpage_create(const tk_zpage_config *cfg, tk_zpage **out);

/* Stops the threads and unmaps the area; compressed data is freed.  No
 * thread may use the area any more.  Returns 0 or -EINVAL (NULL). */
int tk_zpage_destroy(tk_zpage *z);

/* The area's first byte and its length. */
void *tk_zpage_base(const tk_zpage *z);
size_t tk_zpage_len(const tk_zpage *z);

/* Compresses and drops pages now, the coldest first, until at most
 * `resident` bytes of the area are in memory (0: all of it); waits until
 * done.  Returns 0, -EINVAL, or -EBUSY: the kernel would not drop pages
 * (memory locked, below). */
int tk_zpage_trim(tk_zpage *z, size_t resident);

/* Changes the budget (the same rules as tk_zpage_config.budget).  Returns 0
 * or -EINVAL. */
int tk_zpage_set_budget(tk_zpage *z, size_t budget);

/* Drops the pages of [addr, addr + len) (whole pages of the area) and
 * their data: they read as zeros after, as memory does after
 * madvise(MADV_DONTNEED).  Use it instead of that madvise on an area, which
 * does not reach the pages the pager has dropped already (their data would
 * come back on the next touch).  Returns 0 or -EINVAL (a range that is not
 * whole pages of the area, or pages locked in memory, which keep their
 * data: tk_last_error() says which). */
int tk_zpage_discard(tk_zpage *z, void *addr, size_t len);

/* Fills *st.  Returns 0 or -EINVAL. */
int tk_zpage_stats_get(const tk_zpage *z, tk_zpage_stats *st);

#ifdef __cplusplus
}
#endif
#endif
