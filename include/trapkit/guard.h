/* trapkit/guard.h - guard pages: heap limits and sandboxes.
 *
 * Two uses of an inaccessible page where a program would otherwise compare
 * and branch (Appel & Li, "heap overflow detection"; the guard regions of
 * WebAssembly runtimes).
 *
 * tk_arena: a bump allocator whose limit check is a guard page.  The inline
 * allocation path bumps a pointer and stores to the last word of the new
 * object; there is no compare.  The memory past the arena's committed part
 * is inaccessible, so when an allocation crosses the limit that store
 * faults, and trapkit's handler makes room and lets the allocation complete.
 *
 *   How the faulting allocation resumes.  On x86-64 the store is one
 *   instruction of tk_arena_alloc (an asm statement): `movq $0, -8(%rax)`,
 *   with the new top in rax and the rounded size in rdx.  The handler
 *   recognises the fault as an allocation by those 8 instruction bytes at
 *   the faulting PC (any other fault in the guard - a program writing past
 *   its object - is not an allocation, and crashes as it would without
 *   trapkit).  It then makes room in one of two ways and retries the store:
 *
 *   - grow in place: it commits more of the arena's reservation (mprotect)
 *     so the object's memory exists where it was placed; the registers are
 *     left as they are.
 *   - start again at a new top: the arena's on_full callback (see below)
 *     may empty the arena (tk_arena_reset, e.g. after copying the live
 *     objects elsewhere) and return TK_ARENA_RETRY; the handler then writes
 *     the new top + size into rax, in the interrupted context.  The asm
 *     statement names rax as an output, so the compiler takes the new top
 *     from it after the retried store: this is the register adjustment the
 *     seed describes, done where it is well defined (x86-64 faults are
 *     precise, and the one register that holds the top is known).
 *
 *   Nothing before the store depends on the old top, and a->top is written
 *   only after it, so an allocation either completes at the address the
 *   handler chose or not at all.  If no room can be made (the hard limit
 *   max_size is reached, or on_full refuses), the allocation fails visibly:
 *   inside tk_arena_try() on this arena, that call returns the error (a
 *   siglongjmp from the handler); elsewhere the process dies of SIGSEGV
 *   after a line on stderr, as an unchecked overflow would.  After a failure
 *   the arena counts as full (top = limit) until tk_arena_reset().  On other
 *   architectures tk_arena_alloc is tk_arena_alloc_checked.
 *
 *   An arena belongs to one thread at a time: its fast path has no atomics.
 *   Objects are 16-byte aligned; sizes are rounded up to 16 (0 counts as
 *   16).  Objects larger than TK_ARENA_INLINE_MAX take an out-of-line path
 *   with an explicit check (one store could jump over the guard).
 *
 * tk_sandbox: a linear memory in the manner of WebAssembly.  Its
 * reservation is 4 GiB plus a guard, so base + any 32-bit offset (plus an
 * access of up to `guard` bytes) stays inside it; the bytes from the
 * current size to the end are inaccessible.  An access beyond the size
 * made inside tk_sandbox_call() returns -EFAULT from that call, with the
 * offset, instead of killing the process: the fault handler siglongjmps to
 * the call.  So does a jump to any offset of the reservation, inside the
 * size too (the memory is never executable; the access is TK_ACCESS_EXEC).  Calls nest (a call
 * inside fn of another, on the same or another sandbox: the fault goes to the innermost call on
 * that sandbox in the faulting thread, unwinding the calls inside it) and any number of threads may
 * be inside calls at once, each on its own frames.  A fault outside every sandbox's reservation, or
 * in a sandbox with no call of the faulting thread under way, is not trapkit's: the process dies of
 * it as without trapkit (or the handler installed before trapkit gets it).
 *
 * Leaving fn.  fn may leave a tk_sandbox_call or tk_arena_try by returning,
 * by an escape of trapkit's (the -EFAULT above, a failed allocation), or
 * by a C++ exception - thrown by fn, or by trapkit_cxx for a fault in fn
 * (trapkit/exception.hpp) - which drops the call as it passes through.  A
 * siglongjmp (or longjmp) of the program's own out of fn, or out of a
 * signal handler that interrupted fn, cannot be seen: the abandoned call
 * stays registered until a later tk_sandbox_call, tk_arena_try or fault of
 * that thread finds it dead, which is certain only once that code runs
 * with its stack pointer at or above the abandoned call's frame.  Until
 * then an out-of-bounds access to that sandbox (or a failed allocation
 * from that arena) could jump back into the abandoned call.  So a program
 * that leaves fn by siglongjmp must make no out-of-bounds access to that
 * sandbox (no failing allocation from that arena) other than inside a new
 * call on it, until it has made another tk_sandbox_call or tk_arena_try
 * (on any sandbox or arena) from the function it jumped to or from one of
 * that function's callers.  Calls made afterwards work in any case; the
 * abandoned call's stack may be reused freely.
 *
 * Paths (tk_sandbox_config.path), how a sandbox makes the bytes past its
 * size inaccessible:
 *
 *   mprotect    create: mmap PROT_NONE, then mprotect read-write; grow:
 *               mprotect read-write; reset: MADV_DONTNEED, then mprotect
 *               PROT_NONE.
 *   madv-guard  create: as mprotect; grow: MADV_GUARD_REMOVE (and mprotect
 *               beyond the committed size); reset: MADV_DONTNEED, then
 *               MADV_GUARD_INSTALL.
 *   uffd        create: mmap, mprotect read-write up to max_size,
 *               UFFDIO_REGISTER; grow: a store (no system call); reset:
 *               MADV_DONTNEED.
 *
 * mprotect and mmap take the process's mmap lock for writing, so threads
 * creating, growing and resetting sandboxes at once wait for each other;
 * MADV_DONTNEED and the madvise guard calls take it for reading only.  On
 * madv-guard (Linux 6.13: guard markers in the page table, -EOPNOTSUPP
 * elsewhere) the mapping is read-write up to a committed size that grows
 * ahead of the size (doubling), with guard markers from the size to it, so
 * only a grow beyond the committed size calls mprotect.  On uffd the
 * memory up to max_size is read-write and registered with a userfaultfd
 * in missing mode with UFFD_FEATURE_SIGBUS: the first touch of each page
 * raises SIGBUS, and the handler fills the page (UFFDIO_ZEROPAGE, or
 * UFFDIO_COPY of zeros for a write) if it lies below the size, and treats
 * it as out of bounds if not.  A reset is one MADV_DONTNEED (the pages are
 * missing again); the price is a signal and an ioctl per page first
 * touched.  An out-of-bounds access there outside tk_sandbox_call kills
 * the process with SIGBUS rather than SIGSEGV below max_size (at or above
 * it, in the guard region, with SIGSEGV as on the other paths).  The kernel's own accesses
 * raise no signal: a system call that reads or writes in-bounds memory
 * not touched yet since creation or the last reset (read(2) into a buffer
 * there) fails with EFAULT; touch the buffer first (a store to each page),
 * or use tk_prefault() (trapkit/region.h).  A child of fork() loses the
 * userfaultfd registration: its uffd sandboxes no longer fault below
 * max_size (do not use them in the child).
 *
 * How faults reach this module.  Sandboxes and arenas are not regions
 * (creating one takes no process-wide lock of trapkit's): the first
 * tk_arena_create or tk_sandbox_create adds this module to trapkit's fault
 * dispatch, which asks it about every SIGSEGV or SIGBUS outside the
 * regions before the program's own unclaimed-fault handler
 * (tk_on_unclaimed_fault, which stays free for the program or trapkit_cxx).
 * A SIGSEGV handler the program installed before trapkit keeps every fault
 * that is not an arena's or a sandbox's.
 *
 * Handles.  An arena or a sandbox destroyed is gone, as memory after
 * free(): destroying it again or using it is undefined.  A NULL one gives
 * -EINVAL from the functions that return an int, NULL or 0 from the
 * accessors (TK_SANDBOX_PATH_COUNT_ from tk_sandbox_path), nothing from
 * tk_arena_reset; tk_arena_alloc and tk_arena_alloc_checked (inline, no
 * check) need a live arena.
 *
 * Threads and signals.  Every function may be called from any thread;
 * tk_arena_* on one arena from one thread at a time; tk_sandbox_grow,
 * tk_sandbox_reset and tk_sandbox_destroy on one sandbox from one thread at
 * a time, with no access to its memory by other threads during a reset or
 * destroy.  Async-signal-safe: tk_arena_alloc, tk_arena_alloc_checked,
 * tk_arena_reset, tk_arena_used, tk_arena_base, tk_sandbox_base,
 * tk_sandbox_size.  The on_full callback runs in
 * the fault handler (or in the caller of a checked or large allocation)
 * and must be async-signal-safe.  A tk_sandbox_call or tk_arena_try made
 * in a signal handler, on the thread's stack or on an alternate signal
 * stack (SA_ONSTACK), nests inside the calls the signal interrupted.  A
 * thread has at most 64 calls under way at once (tk_sandbox_call and
 * tk_arena_try together; a deeper one returns -EOVERFLOW), and must not
 * switch to another stack by other means (swapcontext, coroutines) while
 * a call is under way.
 */
#ifndef TRAPKIT_GUARD_H
#define TRAPKIT_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include <trapkit/error.h>
#include <trapkit/region.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tk_arena ----------------------------------------------------------- */

/* The largest object tk_arena_alloc allocates inline (one guard page). */
#define TK_ARENA_INLINE_MAX 4096

/* What on_full returns: let the arena grow by commiting more of its
 * reservation (it fails at max_size), or retry at the new top the callback
 * made with tk_arena_reset.  A negative errno makes the allocation fail
 * with that code. */
#define TK_ARENA_GROW 0
#define TK_ARENA_RETRY 1

typedef struct tk_arena tk_arena;

/* Called when an allocation of size bytes (rounded) does not fit below the
 * limit, before the arena grows: the place for a collector's "the nursery
 * is full".  Runs in a signal handler (see above): async-signal-safe code
 * only; it may call tk_arena_reset and tk_arena_used, and it may leave by
 * siglongjmp. */
typedef int (*tk_arena_full_fn)(tk_arena *a, size_t size, void *arg);

typedef struct tk_arena_config {
    size_t max_size;          /* hard limit: bytes the arena may commit; a multiple of
                                 the page size; 0 = 1 GiB */
    size_t chunk;             /* bytes committed at creation and at each growth; a
                                 multiple of the page size, at most max_size;
                                 0 = 64 KiB (the seed's allocation region) */
    tk_arena_full_fn on_full; /* NULL: always TK_ARENA_GROW */
    void *arg;                /* passed to on_full */
} tk_arena_config;

/* The arena.  top and limit are read and written by the inline functions
 * below; the other fields are trapkit's. */
struct tk_arena {
    char *top;   /* the next free byte (16-byte aligned) */
    char *limit; /* the end of the committed memory: the guard starts here */
    char *base_;
    size_t max_;
    size_t chunk_;
    tk_arena_full_fn on_full_;
    void *arg_;
    unsigned long resets_;
    int slot_;
};

/* Reserves max_size + TK_ARENA_INLINE_MAX bytes of address space and
 * commits the first chunk.  Returns 0 or -EINVAL (sizes not multiples of
 * the page size, chunk > max_size; tk_last_error() says which), -ENOMEM
 * (also past 4,096 arenas and uffd sandboxes live at once, which share a
 * table the fault handler reads).  Not async-signal-safe. */
int tk_arena_create(const tk_arena_config *cfg, tk_arena **out);
/* Unmaps the arena; 0 or -EINVAL (NULL). */
int tk_arena_destroy(tk_arena *a);
/* Empties the arena: the next allocation is at its base again; memory
 * stays committed (and keeps its contents).  Async-signal-safe. */
void tk_arena_reset(tk_arena *a);
void *tk_arena_base(const tk_arena *a);
/* Bytes allocated since creation or the last reset. */
size_t tk_arena_used(const tk_arena *a);
/* Bytes committed (the limit's distance from the base). */
size_t tk_arena_committed(const tk_arena *a);

/* The explicit-check path: what tk_arena_alloc does when the inline path
 * cannot (large objects, other architectures) and what the checked variant
 * does past the limit.  Returns the object, or on failure escapes to
 * tk_arena_try on this arena if one is under way in this thread and else
 * returns NULL (tk_last_error() says why). */
void *tk_arena_alloc_slow(tk_arena *a, size_t n);

/* Runs fn(a, arg).  Returns 0 when fn returns, or the negative errno of an
 * allocation from a in fn (on this thread) that could not be satisfied:
 * -ENOMEM at max_size, or what on_full returned.  Nests.  Returns -EINVAL
 * for a NULL a or fn, -EOVERFLOW beyond 64 calls under way in the thread.
 * How fn may leave it: "Leaving fn" above. */
int tk_arena_try(tk_arena *a, void (*fn)(tk_arena *a, void *arg), void *arg);

#define TK__ARENA_ROUND(n) ((n) ? ((n) + 15) & ~(size_t)15 : (size_t)16)

/* Allocation with an explicit compare and branch against the limit. */
static inline void *tk_arena_alloc_checked(tk_arena *a, size_t n)
{
    size_t sz = TK__ARENA_ROUND(n);
    char *p = a->top;
    if (__builtin_expect(sz < n || sz > (size_t)(a->limit - p), 0))
        return tk_arena_alloc_slow(a, n);
    a->top = p + sz;
    return p;
}

/* Allocation whose limit check is the guard page (see the top of this
 * file).  The object's last 8 bytes are zero; the rest is as the memory
 * was (zero in a new arena). */
static inline void *tk_arena_alloc(tk_arena *a, size_t n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    size_t sz = TK__ARENA_ROUND(n);
    if (sz > TK_ARENA_INLINE_MAX || sz < n) return tk_arena_alloc_slow(a, n);
    char *end = a->top + sz;
    /* the check: faults when end lies past the limit; the handler may
     * change end (rax) before the store is retried.  "memory": the handler
     * and on_full may read the arena and the program's data (a collector
     * does), and may leave by siglongjmp, so memory must be up to date
     * here - a compiler barrier, no instruction. */
    __asm__ volatile("movq $0, -8(%0)" : "+a"(end) : "d"(sz) : "memory");
    a->top = end;
    return end - sz;
#else
    return tk_arena_alloc_checked(a, n);
#endif
}

/* ---- tk_sandbox ---------------------------------------------------------- */

/* How a sandbox keeps the bytes past its size inaccessible (table above). */
enum tk_sandbox_path {
    TK_SANDBOX_AUTO = 0,   /* madv-guard where the kernel has it, else mprotect */
    TK_SANDBOX_MPROTECT,   /* "mprotect" */
    TK_SANDBOX_MADV_GUARD, /* "madv-guard": MADV_GUARD_INSTALL (Linux 6.13) */
    TK_SANDBOX_UFFD,       /* "uffd": userfaultfd missing mode, SIGBUS delivery */
    TK_SANDBOX_PATH_COUNT_
};
const char *tk_sandbox_path_name(enum tk_sandbox_path p);
/* Parses a path name; TK_SANDBOX_PATH_COUNT_ if it names none. */
enum tk_sandbox_path tk_sandbox_path_parse(const char *name);

typedef struct tk_sandbox_config {
    size_t size;               /* accessible bytes at creation and after a reset; a
                                  multiple of the page size, may be 0 */
    size_t max_size;           /* the most tk_sandbox_grow may reach; a multiple of the
                                  page size, at most 4 GiB; 0 = 4 GiB */
    size_t guard;              /* inaccessible bytes past the 4 GiB an offset can reach:
                                  the largest access (or constant displacement) caught;
                                  a multiple of the page size; 0 = 2 GiB */
    enum tk_sandbox_path path; /* TK_SANDBOX_AUTO or one forced */
    unsigned flags;            /* none yet: 0 */
} tk_sandbox_config;

typedef struct tk_sandbox tk_sandbox;

/* What an out-of-bounds access did (tk_sandbox_call). */
typedef struct tk_sandbox_trap {
    tk_sandbox *sandbox;   /* the sandbox whose reservation holds the address */
    uint64_t offset;       /* the faulting address minus the base */
    enum tk_access access; /* read or write, where the CPU says */
    void *pc;              /* the faulting instruction */
} tk_sandbox_trap;

/* Creates a sandbox: reserves 4 GiB + guard of address space and makes the
 * first size bytes read-write (zero).  cfg may be NULL (size 0, max_size
 * 4 GiB, a 2 GiB guard, the path chosen).  Returns 0, or -EINVAL (a size not a
 * multiple of the page size, size > max_size, max_size > 4 GiB, flags, an
 * unknown path; tk_last_error() says which), -EOPNOTSUPP (the forced path
 * needs what this kernel lacks: tk_last_error() names it), -ENOMEM (also
 * past 4,096 arenas and uffd sandboxes live at once).  Not
 * async-signal-safe. */
int tk_sandbox_create(const tk_sandbox_config *cfg, tk_sandbox **out);
/* Unmaps the sandbox.  No call on it may be under way.  0 or -EINVAL. */
int tk_sandbox_destroy(tk_sandbox *sb);
/* The base: offset o is at (char *)base + o, for every uint32_t o. */
void *tk_sandbox_base(const tk_sandbox *sb);
size_t tk_sandbox_size(const tk_sandbox *sb);
enum tk_sandbox_path tk_sandbox_path(const tk_sandbox *sb);
/* memory.grow: makes the size new_size (at least the current size, at most
 * max_size, a multiple of the page size); the new bytes are zero.  Returns
 * 0 or -EINVAL, -ENOMEM. */
int tk_sandbox_grow(tk_sandbox *sb, size_t new_size);
/* Back to the state after creation: the size as configured, every byte
 * zero.  Returns 0 or the kernel's error.  No thread may access the
 * sandbox meanwhile. */
int tk_sandbox_reset(tk_sandbox *sb);

/* Runs fn(sb, arg) so that an out-of-bounds access to sb in it is an error
 * instead of a crash.  Returns 0 when fn returns; -EFAULT when an access
 * made by fn (in this thread) fell in sb's reservation beyond its size,
 * or fn jumped into the reservation (an instruction fetch, at any offset):
 * fn is abandoned at that access (by siglongjmp: fn must hold no locks or
 * resources it would free later) and *trap, if not NULL, says where.  The
 * signal mask is as it was at the faulting access.  Stores fn made before
 * the fault may or may not have reached memory (the compiler may have kept
 * them in registers), as with any escape from a fault: use volatile or
 * atomics for what must survive one.  Returns -EINVAL for a NULL sb or
 * fn, -EOVERFLOW beyond 64 calls under way in the thread (with
 * tk_arena_try).  fn may leave by returning or by a C++ exception; after a
 * siglongjmp of the program's own out of fn, see "Leaving fn" above. */
int tk_sandbox_call(tk_sandbox *sb, void (*fn)(tk_sandbox *sb, void *arg), void *arg,
                    tk_sandbox_trap *trap);

#ifdef __cplusplus
}
#endif
#endif
