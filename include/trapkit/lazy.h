/* trapkit/lazy.h - memory that materialises on first touch: lazily
 * computed arrays, stacks that grow when their guard page is touched, and
 * cells with full/empty bits (futures) whose readers block while they are
 * empty (Thekkath & Levy, section 4.2: unbounded data structures, futures,
 * full/empty bits).
 *
 * The trap that stands in for the seed's.  Thekkath & Levy mark the
 * unevaluated part of a structure with an unaligned pointer and let the
 * MIPS unaligned-access exception do the rest.  x86-64 does not trap on
 * unaligned loads (alignment checking, EFLAGS.AC, also catches every
 * unaligned access of the C library), so trapkit uses page protection
 * instead: what is not there yet lies on a page that is not accessible
 * (no-access by mprotect, or, for the lazy array, not present at all and
 * registered with userfaultfd in MISSING mode), and the first access
 * faults.  Where the unit is smaller than a hardware page - cells of 64
 * bytes - sub-page protection (trapkit/fast.h, TK_FAST_SUBPAGE) stands in:
 * each cell is a logical page of its own, and a load from a full cell of a
 * hardware page that still holds empty ones is completed by trapkit's
 * emulation.  A non-canonical pointer (another stand-in for an unaligned
 * one) would raise a general-protection fault whose siginfo carries no
 * address; trapkit does not use it.
 *
 * The lazy array.  An array of `len` bytes whose logical pages are computed
 * by a callback (tk_lazy_fill_fn) when first read or written.  The default
 * backend, "uffd-missing", registers the memory with a userfaultfd of its
 * own in MISSING mode; a handler thread reads the faults, calls the
 * callback into a buffer and places the page with UFFDIO_COPY, which wakes
 * the faulting threads: no signal at all, and the callback runs on an
 * ordinary thread, so it may do anything a thread may (allocate, take
 * locks, read files).  Where userfaultfd is missing, or a trapkit
 * mechanism is asked for (TK_LAZY_REGION), the array is a trapkit region
 * whose pages start no-access: the faulting thread's handler queues the
 * page for a worker thread and waits on a futex; the worker calls the
 * callback into a second view of the memory (MAP2) and opens the page.
 * Either way a page is computed once, however many threads touch it at
 * once, and nobody sees it before the callback has returned.  The callback
 * must not touch pages of its own array that are not computed yet (it
 * would wait for itself).  A computed page the program drops with
 * madvise(MADV_DONTNEED), whole or in part, is computed again on its next
 * touch on uffd-missing (the callback runs again and counts again in
 * tk_lazy_array_computed()); on a region-backed array, whose memory is
 * shared memory (a memfd, for the second view), the drop unmaps the page
 * only and the next touch reads the same contents without the callback.
 *
 * Errors of the callback.  A callback that returns a negative errno leaves
 * its page uncomputed ("failed"): the threads that touched it stay blocked
 * - they never read wrong data - and the array's error function is called
 * on the thread that ran the callback, with a message naming the page.
 * tk_lazy_array_retry() runs the callback again for every failed page
 * (on the calling thread) and, when it succeeds, wakes the blocked
 * readers.  Without an error function trapkit writes the message to stderr
 * and aborts the process.  tk_lazy_array_fill() and _retry() compute pages
 * explicitly and return the callback's error (the page stays failed; the
 * error function is called too, and without one nothing aborts).
 *
 * The lazy stack.  A reservation of max_size bytes whose pages start
 * no-access.  A touch of the guard - the first page above the part touched
 * so far - opens it (the kernel gives a zero page), and the next page becomes
 * the guard: the program pushes without a bounds check and the stack grows
 * a page at a time.  A touch further up than the guard, or past the
 * reservation (a page after it is kept no-access for that), is not the
 * stack's (it is passed on: the program dies of SIGSEGV, as on an
 * overflowed thread stack), and so is a jump into it (an instruction
 * fetch: the memory is never executable).  tk_lazy_stack_trim() gives
 * the pages above a point back to the kernel and puts the guard back.
 *
 * Cells (full/empty bits, futures).  An array of ncells cells of cell_size
 * bytes each.  A cell is empty (its memory inaccessible) or full (readable).
 * A program reads a cell with ordinary loads at tk_lazy_cell_addr(); a load
 * from an empty cell faults and the faulting thread waits on a futex (in its
 * signal handler: on every mechanism offered here no-access faults arrive as
 * signals in the faulting thread) until a producer fills the cell; then the
 * load is retried and returns the value.  tk_lazy_cell_put() fills a cell,
 * waiting while it is full (write-on-full blocks); tk_lazy_cell_take() waits
 * until it is full, copies its value out and empties it.  A future is a
 * cell put once.  No producer code runs in a signal handler: put and take
 * are ordinary calls.  Writing a cell with a store is not allowed (the
 * store faults and is passed on: SIGSEGV), nor is a jump into a cell or
 * into an array (passed on too).  cell_size is a power of two:
 * from 64 bytes (sub-pages, mechanism posix only; needs TK_FAST_SUBPAGE on,
 * since without the emulation trapkit opens a hardware page while it
 * single-steps a load, and another thread could then read an empty cell as
 * zeros) or a multiple of the hardware page (any mechanism).  Sub-page
 * cells are read by emulation, which covers scalar and SSE loads, not AVX
 * or AVX-512 ones (glibc's memcpy, memcmp and strlen use those on machines
 * that have them): such a load from a sub-page cell whose hardware page
 * holds an empty cell is passed on (SIGSEGV, with a message), never
 * stepped with the page open.  Read sub-page cells with plain loads (a
 * volatile pointer, or -fno-builtin copies of up to 16 bytes at a time),
 * or use cells of a hardware page.
 *
 * Mechanisms.  The stack and the cells are trapkit regions on posix,
 * uffd-sigbus or uffd-thread (TK_MECH_AUTO lets trapkit choose; the cells
 * choose posix for sub-page cells); pagemap-scan, soft-dirty and pkeys are
 * refused (-EOPNOTSUPP).
 *
 * fork().  A child keeps the stacks (trapkit regions, with their
 * protections), the cells, and the pages of each array computed before the
 * fork.  The cells' memory is a memfd shared with the child (MAP2): the
 * child may read the cells full at the fork (a value the parent takes or
 * puts later shows through), tk_lazy_cell_put and _take fail there with
 * -ECHILD, and a load of a cell empty at the fork is passed on (SIGSEGV)
 * instead of waiting for ever.  The child does not get the arrays' helper
 * threads: in the child a touch of an array page not computed yet is passed
 * on (SIGSEGV; for an uffd-missing array, whose child copy the kernel does
 * not register with the userfaultfd, trapkit makes those pages inaccessible
 * in the child so that they never read as zeros, and so the hardware pages
 * of computed pages the program dropped (MADV_DONTNEED) before the fork,
 * which the parent would compute again), and tk_lazy_array_fill
 * and _retry fail with -ECHILD.  A region-backed array's memory (a memfd,
 * MAP2) becomes a private copy-on-write mapping of it in the child: the
 * child's stores stay in the child; a page the child has not written shows
 * the parent's later stores to it, and pages the parent computes later stay
 * inaccessible in the child.
 *
 * Kernel accesses.  A system call that reads or writes an uncomputed page
 * of an array (read(2) into it) waits for the page on uffd-missing; where
 * userfaultfd is limited to user-mode faults (vm.unprivileged_userfaultfd
 * = 0 and no CAP_SYS_PTRACE) it fails with EFAULT instead, as it does on a
 * region-backed array or an empty cell: compute the pages first
 * (tk_lazy_array_fill) or use tk_prefault().  Cells smaller than the
 * hardware page (sub-page, posix) are the exception: while any cell of its
 * hardware page is empty the page stays inaccessible to the kernel, so a
 * system call on a full cell there fails with EFAULT whatever tk_prefault
 * did: copy the value into a buffer of the program's own (a plain load
 * works) and give the system call that copy.
 *
 * Threads.  Every call may be made from any thread; none is
 * async-signal-safe.  A thread blocked reading an empty cell or an
 * uncomputed page waits in a signal handler or in the kernel, where
 * pthread_cancel does not reach it: the cancellation acts at the thread's
 * next cancellation point after the value comes.
 * The destroy functions need the structure idle: no thread blocked on it
 * or using its memory.  A structure destroyed is gone, as memory after
 * free(): destroying it again or using it is undefined (a NULL one gives
 * -EINVAL, or 0 and NULL from the accessors).  Functions return 0 or a
 * negative errno, with tk_last_error() saying why.
 */
#ifndef TRAPKIT_LAZY_H
#define TRAPKIT_LAZY_H

#include <stddef.h>
#include <stdint.h>

#include <trapkit/error.h>
#include <trapkit/region.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- lazily computed arrays ---------------------------------------------- */

typedef struct tk_lazy_array tk_lazy_array;

/* Computes logical page `index` of the array into `page` (page_size bytes,
 * zero on entry; not the array's own address).  Returns 0, or a negative
 * errno: the page is not placed and the error is reported. */
typedef int (*tk_lazy_fill_fn)(void *page, size_t index, void *arg);
/* Told of a failed page: err is the callback's result, msg says which
 * page of which array.  Runs on the thread that ran the callback. */
typedef void (*tk_lazy_error_fn)(int err, size_t index, const char *msg, void *arg);

/* tk_lazy_array_config.backend */
enum tk_lazy_backend {
    TK_LAZY_AUTO = 0,     /* uffd-missing where userfaultfd works, else a trapkit region */
    TK_LAZY_UFFD_MISSING, /* a userfaultfd of the array's own, MISSING mode, UFFDIO_COPY */
    TK_LAZY_REGION,       /* a trapkit region (mechanism `mech`) and a worker thread */
};

typedef struct tk_lazy_array_config {
    size_t len;                   /* bytes, a positive multiple of page_size */
    size_t page_size;             /* 0: the hardware page; else a power-of-two multiple of it */
    tk_lazy_fill_fn fill;         /* required */
    void *arg;                    /* passed to fill and on_error */
    tk_lazy_error_fn on_error;    /* NULL: message on stderr and abort() */
    enum tk_lazy_backend backend; /* TK_LAZY_AUTO */
    enum tk_mech mech;            /* TK_LAZY_REGION: TK_MECH_AUTO, _POSIX, _UFFD_SIGBUS or
                                     _UFFD_THREAD; must be TK_MECH_AUTO otherwise */
} tk_lazy_array_config;

/* Creates an array; its memory is tk_lazy_array_base(*out).  Returns 0,
 * -EINVAL (no callback, a length or page size that does not fit, a
 * mechanism with another backend), -EOPNOTSUPP (the backend or mechanism
 * is not available here: tk_last_error() says what is missing), -ENOMEM. */
int tk_lazy_array_create(const tk_lazy_array_config *cfg, tk_lazy_array **out);
/* Stops the helper thread and unmaps the memory.  -EINVAL for NULL. */
int tk_lazy_array_destroy(tk_lazy_array *a);
void *tk_lazy_array_base(const tk_lazy_array *a);
size_t tk_lazy_array_len(const tk_lazy_array *a);
size_t tk_lazy_array_page_size(const tk_lazy_array *a);
/* "uffd-missing", or the trapkit mechanism's name ("posix", ...). */
const char *tk_lazy_array_backend(const tk_lazy_array *a);
/* Computes pages [first, first + n) now, on the calling thread, those not
 * computed yet (waiting for pages another thread is computing).  Returns 0,
 * -EINVAL (outside the array) or the first error of the callback (that page
 * counts as failed, as if a reader had touched it). */
int tk_lazy_array_fill(tk_lazy_array *a, size_t first, size_t n);
/* Runs the callback again, on the calling thread, for every failed page,
 * and wakes their readers where it succeeds.  Returns 0, or the first error
 * (the pages that failed again stay failed). */
int tk_lazy_array_retry(tk_lazy_array *a);
/* How many pages have been computed (a page computed again after a
 * MADV_DONTNEED counts again), and how many are failed now. */
size_t tk_lazy_array_computed(const tk_lazy_array *a);
size_t tk_lazy_array_failed(const tk_lazy_array *a);

/* ---- stacks that grow on a guard-page touch -------------------------------- */

typedef struct tk_lazy_stack tk_lazy_stack;

typedef struct tk_lazy_stack_config {
    size_t max_size;   /* bytes reserved (address space only): 0 = 1 GiB; rounded up
                          to the hardware page */
    enum tk_mech mech; /* TK_MECH_AUTO, _POSIX, _UFFD_SIGBUS or _UFFD_THREAD */
} tk_lazy_stack_config;

/* Returns 0, -EINVAL, -EOPNOTSUPP or -ENOMEM. */
int tk_lazy_stack_create(const tk_lazy_stack_config *cfg, tk_lazy_stack **out);
int tk_lazy_stack_destroy(tk_lazy_stack *s);
/* The stack's lowest address; it grows upwards from there. */
void *tk_lazy_stack_base(const tk_lazy_stack *s);
size_t tk_lazy_stack_max(const tk_lazy_stack *s);
/* Pages materialised (opened by a touch of the guard) now. */
size_t tk_lazy_stack_pages(const tk_lazy_stack *s);
enum tk_mech tk_lazy_stack_mech(const tk_lazy_stack *s);
/* Keeps the pages holding the first `used` bytes; the pages above are
 * given back to the kernel (their contents dropped) and made no-access
 * again, and the first of them is the guard.  Not while another thread
 * uses the stack.  Returns 0, -EINVAL (used beyond the reservation) or the
 * error of tk_protect/tk_discard. */
int tk_lazy_stack_trim(tk_lazy_stack *s, size_t used);

/* ---- cells with full/empty bits; futures ------------------------------------ */

typedef struct tk_lazy_cells tk_lazy_cells;

typedef struct tk_lazy_cells_config {
    size_t ncells;     /* at least 1 */
    size_t cell_size;  /* 0: 64 on posix, else the hardware page; a power of two, 64
                          up to half the hardware page (posix only) or a multiple of it */
    enum tk_mech mech; /* TK_MECH_AUTO (posix for sub-page cells), _POSIX, _UFFD_SIGBUS,
                          _UFFD_THREAD */
} tk_lazy_cells_config;

/* Every cell starts empty.  Returns 0, -EINVAL (no cells, a cell size that
 * is not a power of two from 64 bytes, sub-page cells on a mechanism other
 * than posix), -EOPNOTSUPP (mechanism or sub-page emulation not available),
 * -ENOMEM. */
int tk_lazy_cells_create(const tk_lazy_cells_config *cfg, tk_lazy_cells **out);
int tk_lazy_cells_destroy(tk_lazy_cells *c);
size_t tk_lazy_cells_count(const tk_lazy_cells *c);
size_t tk_lazy_cells_cell_size(const tk_lazy_cells *c);
enum tk_mech tk_lazy_cells_mech(const tk_lazy_cells *c);
/* Where cell i lies (cell_size bytes; loads from it block while it is
 * empty), or NULL if i is out of range. */
void *tk_lazy_cell_addr(const tk_lazy_cells *c, size_t i);
/* Fills cell i with len bytes (at most cell_size; the rest of the cell
 * reads as zeros) and wakes its readers; waits while the cell is full.
 * Returns 0 or -EINVAL (bad index or length). */
int tk_lazy_cell_put(tk_lazy_cells *c, size_t i, const void *val, size_t len);
/* Waits until cell i is full, copies len bytes of it to out (out may be
 * NULL) and empties it (later loads block again; a waiting put proceeds).
 * Returns 0 or -EINVAL. */
int tk_lazy_cell_take(tk_lazy_cells *c, size_t i, void *out, size_t len);
/* 1 if cell i is full, 0 if empty (or being filled or emptied), -EINVAL. */
int tk_lazy_cell_full(const tk_lazy_cells *c, size_t i);
/* How many threads are blocked reading cell i now (0 for a bad index).  A
 * reader that left its wait by siglongjmp (a timeout's signal handler)
 * counts until the cell is next filled. */
int tk_lazy_cell_waiting(const tk_lazy_cells *c, size_t i);

#ifdef __cplusplus
}
#endif
#endif
