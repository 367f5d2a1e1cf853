/* trapkit/region.h - regions, fault dispatch (TRAP) and the Appel & Li
 * virtual-memory primitives PROT1, PROTN, UNPROT, DIRTY, MAP2 and PAGESIZE.
 *
 * A region is an address range that trapkit watches.  Faults inside it go to
 * the region's handler; faults anywhere else go to whatever handled SIGSEGV
 * and SIGBUS before trapkit (or to the default action, so a wild pointer still
 * crashes with a core dump).
 *
 * One API, several mechanisms (enum tk_mech).  A region's mechanism is chosen
 * when it is created: the fastest this machine offers (see tk_probe()),
 * unless the configuration or the TRAPKIT_BACKEND environment variable forces
 * one.  What each mechanism can express:
 *
 *   mechanism     read-only         no-access  DIRTY             fault delivered
 *   posix         mprotect          mprotect   mprotect + faults SIGSEGV, faulting thread
 *   uffd-sigbus   uffd WP (PTEs)    mprotect   WP + faults       SIGBUS, faulting thread
 *   uffd-thread   uffd WP (PTEs)    mprotect   WP + faults       trapkit's handler thread
 *   pagemap-scan  mprotect          mprotect   PAGEMAP_SCAN      SIGSEGV (protections only)
 *   soft-dirty    mprotect          mprotect   soft-dirty bits   SIGSEGV (protections only)
 *   pkeys         WRPKRU            WRPKRU     -                 SIGSEGV (SEGV_PKUERR)
 *   fast-kernel   mprotect          mprotect   mprotect + faults the kernel's fast path
 *
 * fast-kernel needs a kernel with kernel/fastexc (prctl PR_FASTEXC): a
 * fault in the region enters trapkit's handler without a signal (no signal
 * frame, no rt_sigreturn; Thekkath & Levy).  Where the kernel lacks it the
 * mechanism is unavailable and automatic choice never picks it.  In its
 * handlers, tk_fault.ucontext has the interrupted registers and extended
 * state like a signal's, but its uc_sigmask and uc_stack are empty.
 *
 * mprotect splits the mapping per change (vm.max_map_count bounds it); uffd
 * WP works in the page table.  "no-access" protection is done with mprotect
 * except on pkeys regions: no page-table-level mechanism of Linux can express
 * it for populated pages.
 *
 * pkeys regions differ in kind (src/vm/pkeys.c): the region has a protection
 * key of its own, its logical page is the whole region (tk_protect must
 * cover all of it), and a protection is the calling thread's rights - other
 * threads keep theirs; a thread created later inherits its creator's.  A
 * handler's tk_unprot opens the region for the interrupted code.  No DIRTY;
 * MAP2 views stay accessible.  At most 15 per process (-ENOSPC after).  The
 * automatic choice never picks pkeys.
 *
 * Threads and signals.  Every call may be made from any thread.  These are
 * async-signal-safe - callable from a fault handler or from any signal
 * handler, also one that interrupted its own thread inside trapkit:
 * tk_protect, tk_prot1, tk_protn, tk_unprot, tk_protection, tk_region_find,
 * tk_region_base/len/page_size/mech, and the fault path itself (a signal
 * handler may touch protected memory at any time).  trapkit defers the
 * calling thread's asynchronous signals while it holds a region's lock (two
 * rt_sigprocmask calls per tk_protect), so a signal handler never runs inside
 * that critical section: it cannot deadlock on it or see it half done.  Not
 * async-signal-safe: tk_region_create, tk_region_destroy, tk_dirty, tk_map2,
 * tk_unmap2 (they allocate or take process-wide locks).
 *
 * Leaving a handler.  A fault handler (region, stack-overflow or unclaimed)
 * may leave by siglongjmp or by throwing a C++ exception instead of
 * returning, any number of times: trapkit keeps no state that depends on the
 * handler returning.  (On uffd-thread the handler runs on trapkit's thread,
 * where no jump into the faulting thread is possible.)
 *
 * Nested faults.  A handler may touch other protected pages; each such fault
 * is handled in turn, on every mechanism.  On uffd-thread the handler runs on
 * one of trapkit's service threads, and a fault it raises on a
 * write-protected page is served by another (started as needed).  A handler
 * that faults on the very page it handles recurses; at 72 levels (48 on
 * uffd-thread, where each level takes a service thread), or nested with
 * less than a signal frame and 4 KiB left on the alternate signal stack,
 * the fault is passed on (the program dies of SIGSEGV, as without trapkit).
 *
 * fork().  A child of fork() keeps every region, with the same protections,
 * handlers and DIRTY state: userfaultfd regions are registered again with
 * the child's own userfaultfd and their protections re-applied before fork()
 * returns (if that fails the child's region is served by mprotect, with a
 * message on stderr).  DIRTY in a child: trap-based regions (posix,
 * uffd-sigbus, uffd-thread) go on exactly - the child's first tk_dirty
 * reports the pages written in the interval under way, before and after the
 * fork; a pagemap-scan region's first tk_dirty in a child reports every page
 * (the written bits stay with the parent), later ones are exact.  fork()
 * waits for calls holding a region's lock in other threads.  (vfork and
 * posix_spawn children share or replace the address space: nothing to do.)
 *
 * Memory changed behind trapkit's back.  The kernel drops a page's
 * userfaultfd write protection with the page: after madvise(MADV_DONTNEED or
 * MADV_FREE), munmap + mmap(MAP_FIXED) or mremap of a write-protected page of
 * a userfaultfd region (uffd-sigbus, uffd-thread, pagemap-scan), a write is
 * no longer caught.  Use tk_discard() to drop pages.  What trapkit notices:
 * on uffd-thread, whose service threads read the kernel's events
 * (UFFD_EVENT_REMOVE, UNMAP, REMAP; the kernel makes madvise, munmap and
 * mremap wait until they are read), pages dropped by madvise are protected
 * again at once by mprotect until their next tk_protect (a write by another
 * thread in the microseconds between the kernel's drop and that mprotect can
 * still slip through) and count as written for DIRTY; a region whose memory
 * was unmapped or moved fails every later call with -EFAULT saying so.  On
 * uffd-sigbus and pagemap-scan nothing is noticed (reading those events
 * would make every madvise and munmap of the process wait for a thread).
 * posix, soft-dirty and pkeys protections belong to the mapping and survive
 * MADV_DONTNEED.
 *
 * Destroyed regions.  tk_region_destroy on a region already destroyed (also
 * after another region was created) returns -EINVAL and touches nothing;
 * the other calls on a destroyed region return -EINVAL as long as trapkit
 * keeps its memory (the last 256 destroyed regions).
 */
#ifndef TRAPKIT_REGION_H
#define TRAPKIT_REGION_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The mechanisms.  tk_mech_name() gives the id used in TRAPKIT_BACKEND,
 * `trapkit probe` and benchmark results ("posix", "uffd-sigbus", ...). */
enum tk_mech {
    TK_MECH_AUTO = 0,     /* let trapkit choose (the default) */
    TK_MECH_POSIX,        /* SIGSEGV + mprotect, as libsigsegv and Boehm GC do it */
    TK_MECH_UFFD_SIGBUS,  /* userfaultfd write-protect, SIGBUS in the faulting thread */
    TK_MECH_UFFD_THREAD,  /* userfaultfd write-protect, events read by a handler thread */
    TK_MECH_PAGEMAP_SCAN, /* DIRTY by userfaultfd WP_ASYNC + PAGEMAP_SCAN */
    TK_MECH_SOFT_DIRTY,   /* DIRTY by the soft-dirty bit (/proc/self/clear_refs) */
    TK_MECH_PKEYS,        /* memory protection keys (whole-region, per-thread rights) */
    TK_MECH_FAST_KERNEL,  /* mprotect, faults by the kernel's fast path (kernel/fastexc) */
    TK_MECH_COUNT_
};

const char *tk_mech_name(enum tk_mech m);
/* Parses a mechanism id; returns TK_MECH_COUNT_ if it names none. */
enum tk_mech tk_mech_parse(const char *name);

/* Protections, for tk_protect(). */
#define TK_PROT_NONE 0
#define TK_PROT_READ 1
#define TK_PROT_RW 3

/* What a faulting access did. */
enum tk_access { TK_ACCESS_UNKNOWN = 0, TK_ACCESS_READ, TK_ACCESS_WRITE, TK_ACCESS_EXEC };

/* tk_fault.flags */
#define TK_FAULT_RESOLVED                                                                          \
    0x1 /* the page already allows this access (another thread                                     \
           resolved the same fault first): returning TK_RESUME                                     \
           retries the access and it will succeed */
#define TK_FAULT_AMPLIFIED                                                                         \
    0x4 /* TK_REGION_EAGER: trapkit already opened the page for this                               \
           access (read-only for a read of an inaccessible page,                                   \
           read-write otherwise) */
#define TK_FAULT_THREAD                                                                            \
    0x2 /* running on trapkit's uffd handler thread, not in the                                    \
           faulting thread: pc and ucontext are NULL */

typedef struct tk_region tk_region;

typedef struct tk_fault {
    void *addr;        /* the faulting address */
    void *page;        /* start of the region's logical page that holds addr */
    void *pc;          /* the faulting instruction, NULL where the mechanism cannot tell */
    tk_region *region; /* the region addr is in */
    enum tk_access access;
    unsigned flags;    /* TK_FAULT_* */
    enum tk_mech mech; /* the mechanism that delivered this fault */
    void *ucontext;    /* the signal's ucontext_t, or NULL (TK_FAULT_THREAD) */
} tk_fault;

typedef enum tk_action {
    TK_RESUME = 0,  /* retry the faulting instruction */
    TK_DECLINE = 1, /* not mine: pass to the previous handler or the default action */
} tk_action;

/* A fault handler.  It runs in a signal handler in the faulting thread (or,
 * with TK_FAULT_THREAD, on trapkit's handler thread while the faulting thread
 * waits), so it may only call async-signal-safe functions, plus the trapkit
 * functions documented as such (tk_protect, tk_unprot, ...).  It must not call
 * malloc, printf or take locks the interrupted code may hold.  It may run in
 * several threads at once for the same page; f->flags says when another
 * thread already resolved the fault. */
typedef tk_action (*tk_fault_handler)(const tk_fault *f, void *arg);

/* tk_region_config.flags */
#define TK_REGION_DIRTY                                                                            \
    0x1 /* track written pages for tk_dirty() from creation on; trapkit then                       \
           handles SIGTRAP too (single-stepped writes, see tk_dirty),                              \
           passing traps not its own to the handler installed before */
#define TK_REGION_MAP2                                                                             \
    0x2 /* back the region by a memfd so tk_map2() can make                                        \
           second views; with addr != NULL the memfd is mapped                                     \
           over the caller's range (MAP_SHARED: its contents are                                   \
           replaced by zeros, and a child of fork() shares it) */

#define TK_REGION_EAGER                                                                            \
    0x4 /* eager amplification (trapkit/fast.h): before the handler runs,                          \
           the faulting page is opened for the access (a read of an                                \
           inaccessible page makes it read-only, anything else read-write;                         \
           on pkeys regions the whole region, for the faulting thread).                            \
           A handler that declines gets the old protection back. */

#define TK_REGION_LIGHT                                                                            \
    0x8 /* the handler is "light" (trapkit/fast.h): it calls nothing but                           \
           tk_protect, tk_prot1, tk_protn, tk_unprot, tk_protection and                            \
           tk_fast_paths, and the dispatcher calls it before any                                   \
           bookkeeping (DIRTY, eager amplification, declined marks; on                             \
           the SIGSEGV mechanisms, posix and pkeys; others take the                                \
           general path).  Not with TK_REGION_DIRTY, TK_REGION_EAGER or sub-pages                  \
           (-EINVAL). */

#define TK_REGION_NOACCESS                                                                         \
    0x10 /* every page starts no-access (TK_PROT_NONE) instead of                                  \
            read-write, set in one step at creation: the same as a                                 \
            tk_protect of the whole region to TK_PROT_NONE after it, without                       \
            its cost (on the userfaultfd mechanisms that call also                                 \
            write-protects every page, which for a large region takes                              \
            milliseconds a gigabyte).  Not with TK_REGION_DIRTY, sub-pages or                      \
            pkeys (-EINVAL). */

typedef struct tk_region_config {
    void *addr;               /* an existing private anonymous mapping to manage, page
                                 aligned (with TK_REGION_MAP2 its contents are replaced);
                                 NULL: trapkit maps `len` bytes (read-write, zero) */
    size_t len;               /* bytes, a multiple of page_size */
    tk_fault_handler handler; /* may be NULL: every fault not handled internally declines */
    void *arg;                /* passed to handler */
    enum tk_mech mech;        /* TK_MECH_AUTO, or force one */
    size_t page_size;         /* logical page size (PAGESIZE): 0 = the hardware page, else a
                                 power-of-two multiple of it; protections, faults and DIRTY
                                 work in these units.  A power of two from 64 bytes up to
                                 half the hardware page makes a sub-page region (Thekkath &
                                 Levy 3.2.4; see trapkit/fast.h, TK_FAST_SUBPAGE): addr must
                                 be NULL (trapkit maps it on a memfd, so like MAP2 memory it
                                 stays shared with children after fork), len a multiple of
                                 the hardware page, mechanism posix, no TK_REGION_DIRTY */
    unsigned flags;           /* TK_REGION_* */
} tk_region_config;

/* Creates a region.  Fails with -EINVAL (unaligned address or length,
 * logical page size not a power-of-two multiple of the hardware page),
 * -EEXIST (overlaps another region), -EOPNOTSUPP (the forced mechanism is not
 * available here: tk_last_error() says which kernel feature is missing),
 * -ENOMEM.  Not async-signal-safe. */
int tk_region_create(const tk_region_config *cfg, tk_region **out);

/* Stops watching the region: its pages become read-write again and, if
 * trapkit mapped the memory, it is unmapped (with every MAP2 view).  The
 * caller must make sure no thread is still using the region (a handler of
 * the region still running when it is destroyed has its fault retried on
 * the memory as it is then).  Returns 0, or -EINVAL for NULL or a region
 * destroyed already.  Not async-signal-safe. */
int tk_region_destroy(tk_region *r);

void *tk_region_base(const tk_region *r);
size_t tk_region_len(const tk_region *r);
size_t tk_region_page_size(const tk_region *r);
enum tk_mech tk_region_mech(const tk_region *r);

/* The region holding addr, or NULL.  Lock-free and async-signal-safe. */
tk_region *tk_region_find(const void *addr);

/* PROT1 / PROTN / UNPROT.  Sets the protection of [addr, addr+len), which must
 * lie in r and be aligned to its logical page size, to TK_PROT_NONE,
 * TK_PROT_READ or TK_PROT_RW.  Returns 0 or -EINVAL (outside the region,
 * unaligned, bad protection), -ENOMEM (posix: the kernel's vm.max_map_count
 * would be exceeded by splitting mappings; tk_last_error() says so and how to
 * avoid it), -EOPNOTSUPP (the mechanism cannot express it).
 * Async-signal-safe. */
int tk_protect(tk_region *r, void *addr, size_t len, int prot);
static inline int tk_prot1(tk_region *r, void *page, int prot)
{
    return tk_protect(r, page, tk_region_page_size(r), prot);
}
static inline int tk_protn(tk_region *r, void *addr, size_t len, int prot)
{
    return tk_protect(r, addr, len, prot);
}
static inline int tk_unprot(tk_region *r, void *addr, size_t len)
{
    return tk_protect(r, addr, len, TK_PROT_RW);
}

/* Drops the contents of [addr, addr+len) - the pages read as zeros after
 * (or, for a private file mapping, as the file) - and keeps their
 * protections, as madvise(MADV_DONTNEED) would if the kernel kept
 * userfaultfd write protection with the page (it does not: after a plain
 * MADV_DONTNEED, MADV_FREE, munmap+mmap or mremap on a write-protected page
 * of a uffd-sigbus or pagemap-scan region the next write goes uncaught; see
 * "Memory changed behind trapkit's back" above).  Writes by other threads
 * wait (fault and retry) until the protection is back.  With DIRTY, the
 * dropped pages count as written.  The range must lie in r, aligned to its
 * logical page (sub-page regions: to the hardware page; pkeys regions: to the
 * hardware page).  Returns 0, -EINVAL, -EFAULT (the region's memory was
 * unmapped behind trapkit's back) or the kernel's error.  Not
 * async-signal-safe. */
int tk_discard(tk_region *r, void *addr, size_t len);

/* The protection trapkit holds for the logical page at addr (TK_PROT_*), or a
 * negative errno.  Async-signal-safe. */
int tk_protection(tk_region *r, const void *addr);

/* DIRTY.  Writes into bitmap (bit i of word i/64 = logical page i of the
 * region) the pages written since the region was created or since the previous
 * tk_dirty(), and starts a new interval.  nbits must be at least the number of
 * logical pages.  Returns the number of dirty pages, or -EINVAL (NULL or
 * destroyed region, region made without TK_REGION_DIRTY, bitmap NULL or too
 * small).  Concurrent writers are allowed.  What is guaranteed (tested by
 * tests/mech_dirty_race.c with writers racing collections): every write is
 * reported, by a collection no earlier than the one under way when the write
 * began and at the latest by the first one that began after it completed;
 * never lost (but for pages the kernel changed behind trapkit's back: on
 * uffd-sigbus a write after the program's own madvise(MADV_DONTNEED) of a
 * protected page is not seen, see "Memory changed behind trapkit's back"
 * above; tk_discard keeps DIRTY).  On posix and uffd-sigbus a page written
 * once is reported once: trapkit completes the faulting write itself under
 * the region's lock (emulating the instruction; one it does not emulate, such as an AVX or x87
 * store, is single-stepped and the collection holds the page back until the
 * step is done, for at most a second).  On uffd-thread and pagemap-scan
 * nothing in user space sees the faulting thread's retry: a page whose write
 * was in flight across a collection (its fault resolved, its instruction not
 * yet re-executed because the thread was preempted) is reported by that
 * collection and again after the retry.  In a child of fork() see "fork()"
 * above; tk_discard'ed pages count as written.  On posix regions, if the
 * kernel cannot split the mapping any further (vm.max_map_count) the
 * interval degrades to reporting every writable page - more than was
 * written, never less - and tk_last_error() says so after this call.
 * soft-dirty (never chosen unless forced) is weaker: the kernel has no atomic
 * read-and-reset of the bits, so a write racing the collection can be lost
 * (use it with the writers stopped during tk_dirty); and it may report more
 * than was written, since the kernel marks a whole mapping soft-dirty when a
 * new mapping extends it.  Its reset covers the whole process, so trapkit
 * keeps every soft-dirty region's bits before each one: collecting one region
 * loses nothing of another's.  Not async-signal-safe. */
long tk_dirty(tk_region *r, uint64_t *bitmap, size_t nbits);

/* DIRTY, the other way: counts the pages of [addr, addr+len) as written in
 * the interval under way - the next tk_dirty() reports them (or, if one is
 * running, that one) - and lets writes to them proceed without a fault
 * until the next tk_dirty() starts a new interval.  For a program about to
 * write the pages anyway (an allocator handing them out), or one that does
 * not need the record until its next tk_dirty() (a collector between two
 * marking cycles): one system call for the range, where each page's first
 * write would otherwise take a fault (posix, uffd-*: a signal or a message
 * and a system call; pagemap-scan: the kernel's own write fault).  Pages
 * the program protected (tk_protect) keep their protection and are
 * reported.  On soft-dirty the pages are reported but their writes still
 * fault in the kernel: it offers no way to set its bits.  On uffd-* before
 * Linux 6.3 (tk_probe_info.uffd_wp_unprotect_writable false) the kernel
 * leaves a page read-only when it lifts its write protection: the writes
 * reach neither trapkit nor the program, but each page's first write takes
 * one minor fault the kernel resolves alone.  The range must lie
 * in r and be aligned to its logical page size.  Returns 0, -EINVAL (outside
 * the region, unaligned, no TK_REGION_DIRTY), -EFAULT (the region's memory
 * was unmapped behind trapkit's back) or the kernel's error.
 * Async-signal-safe. */
int tk_dirty_mark(tk_region *r, void *addr, size_t len);

/* MAP2.  Maps a second view of the region's memory at another address with
 * protection prot (TK_PROT_READ or TK_PROT_RW), unaffected by the region's
 * protections and faults.  The region must have TK_REGION_MAP2.  Returns 0
 * and the view in *view, or -EINVAL / -ENOMEM.  Not async-signal-safe. */
int tk_map2(tk_region *r, int prot, void **view);
int tk_unmap2(tk_region *r, void *view);

/* Makes [addr, addr+len) accessible for a system call that will read
 * (TK_ACCESS_READ) or write (TK_ACCESS_WRITE) it on the program's behalf.
 * The kernel does not raise a fault the program can handle when read(2) or
 * recv(2) writes into a protected page: the call fails with EFAULT (on
 * uffd-thread regions the kernel instead waits for trapkit's handler thread,
 * which runs the region's handler, so the call succeeds).  This
 * helper touches each page from user mode first (a read, or an atomic add of
 * zero, which writes without changing the value), so the region's handler
 * runs as for any access and the call then succeeds.  A handler that leaves
 * the page inaccessible gets the next access too (so the call may still fail
 * with EFAULT); one that declines crashes the program as that access would.
 * Returns 0 or -EINVAL. */
int tk_prefault(void *addr, size_t len, enum tk_access access);

/* Stack overflow.  Installs a handler called when a fault outside every
 * region lies in the guard area below the faulting thread's stack pointer
 * (within 64 KiB).  It runs on the thread's alternate signal stack, which
 * tk_altstack_install() sets up for the calling thread; it must leave by
 * siglongjmp() or return TK_DECLINE (the default action: SIGSEGV).  Pass NULL
 * to remove.  Returns 0. */
int tk_on_stack_overflow(tk_fault_handler h, void *arg);
/* Faults nobody claims.  Installs a handler for SIGSEGV and SIGBUS faults
 * raised by an instruction (not sent signals) that no region claims and
 * the stack-overflow handler does not resume: outside every region, or
 * declined.  It runs in the faulting thread's signal handler, with
 * f->region NULL, f->ucontext the signal's ucontext_t and the siginfo's
 * signal number and code in f->flags as (sig << 16 | si_code); TK_RESUME
 * resumes the context as it left it, TK_DECLINE passes the fault on to the
 * disposition in place before trapkit (a real crash still crashes).  One
 * handler at a time; NULL removes it.  Returns 0, or an error installing
 * trapkit's handlers.  (trapkit_cxx uses it to turn faults into C++
 * exceptions.) */
int tk_on_unclaimed_fault(tk_fault_handler h, void *arg);

/* Gives the calling thread an alternate signal stack large enough for
 * trapkit's handler (AT_MINSIGSTKSZ + 32 KiB), unless it has one.  Returns 0
 * or -ENOMEM. */
int tk_altstack_install(void);

/* Installs trapkit's SIGSEGV and SIGBUS handlers now, remembering the ones
 * in place to chain to.  tk_region_create() does this on first use; call it
 * early if another runtime will install its own fault handler after trapkit
 * and should chain to it.  Idempotent.  Returns 0 or a negative errno. */
int tk_init(void);

#ifdef __cplusplus
}
#endif
#endif
