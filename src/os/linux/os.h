/* src/os/linux/os.h - the Linux calls trapkit makes, in one place.
 *
 * Every function returns a non-negative result or a negative errno and never
 * leaves its result in errno (errno itself is preserved).  Functions marked
 * [signal-safe] make only system calls and may run in a signal handler.
 */
#ifndef TK_OS_LINUX_OS_H
#define TK_OS_LINUX_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "os/linux/uffd.h"

/* How a userfaultfd was obtained (enum tk_uffd_access of trapkit/probe.h). */
int tk__uffd_open(int *how);

/* UFFDIO_API with the wanted features.  On success *got is the set the kernel
 * offers (all of them, whatever was wanted) and *ioctls its ioctl mask. */
int tk__uffd_api(int fd, uint64_t want, uint64_t *got, uint64_t *ioctls);

/* Opens a userfaultfd and enables `want` (each bit must be offered).
 * Returns the fd (O_CLOEXEC, blocking) or a negative errno. */
int tk__uffd_create(uint64_t want);

/* UFFDIO_REGISTER in write-protect mode; *ioctls receives the range's ioctls. */
int tk__uffd_register_wp(int fd, void *addr, size_t len, uint64_t *ioctls);
int tk__uffd_unregister(int fd, void *addr, size_t len);

/* UFFDIO_WRITEPROTECT: protect (wp = true) or unprotect and, unless
 * dontwake, wake threads waiting on the range. [signal-safe] */
int tk__uffd_wp(int fd, void *addr, size_t len, bool wp, bool dontwake);
/* UFFDIO_WAKE [signal-safe] */
int tk__uffd_wake(int fd, void *addr, size_t len);
/* A page-fault service thread's loop: reads fd's events and calls
 * on_fault(arg, address, UFFD_PAGEFAULT_FLAG_* flags) for each page fault,
 * until stop_fd is readable or *stop (if not NULL) is set. */
void tk__uffd_fault_loop(int fd, int stop_fd, const atomic_bool *stop,
                         void (*on_fault)(void *arg, uintptr_t addr, uint64_t flags), void *arg);

/* pkey_alloc(0, 0) (full rights for the calling thread), pkey_free,
 * pkey_mprotect, by system call number.  Negative errno on failure. */
int tk__pkey_alloc(void);
int tk__pkey_free(int key);
int tk__pkey_mprotect(void *addr, size_t len, int prot, int key);

/* mprotect [signal-safe] */
int tk__mprotect(void *addr, size_t len, int prot);

/* Makes every page of [addr, addr+len) present for reading, as userfaultfd
 * write protection without UFFD_FEATURE_WP_UNPOPULATED (before Linux 6.4)
 * needs: MADV_POPULATE_READ (5.14), or a read of each page on kernels
 * without it.  The range must be readable.  Negative errno on failure.
 * [signal-safe] */
int tk__populate_read(void *addr, size_t len);

/* /proc/self/pagemap, opened once (O_RDONLY|O_CLOEXEC).  Returns the fd. */
int tk__pagemap_fd(void);
/* In a child of fork(): closes the parent's pagemap fd (it describes the
 * parent's pages); the next tk__pagemap_fd() opens the child's. */
void tk__pagemap_forget(void);
/* In a child of fork(): closes the parent's userfaultfds and forgets its
 * service threads (os/linux/uffd_ctx.c); the next tk__uffd_for() opens new
 * ones. */
void tk__uffd_after_fork_child(void);
/* Before fork(): waits until no service thread is still starting. */
void tk__uffd_before_fork(void);

/* PAGEMAP_SCAN over [start, end): fills vec (up to vec_len regions) and sets
 * *walk_end to where the walk stopped.  Returns the number of regions. */
long tk__pagemap_scan(int pmfd, uintptr_t start, uintptr_t end, uint64_t flags,
                      uint64_t category_mask, uint64_t return_mask, struct page_region *vec,
                      size_t vec_len, uintptr_t *walk_end);

/* The same with category_anyof_mask: the pages with any of the categories
 * in anyof (the checkpointer's pages that hold data). */
long tk__pagemap_scan_any(int pmfd, uintptr_t start, uintptr_t end, uint64_t anyof,
                          uint64_t return_mask, struct page_region *vec, size_t vec_len,
                          uintptr_t *walk_end);

/* Writes "4" to /proc/self/clear_refs: clears every soft-dirty bit of the
 * process. */
int tk__clear_soft_dirty(void);

/* pread of /proc/self/pagemap entries for n pages from addr into out. */
int tk__pagemap_read(uintptr_t addr, size_t n, uint64_t *out);

/* memfd_create + ftruncate to len.  Returns the fd (O_CLOEXEC). */
int tk__memfd(const char *name, size_t len);

/* FUTEX_WAIT_PRIVATE while *word == val, and FUTEX_WAKE_PRIVATE of up to n
 * waiters. [signal-safe] */
void tk__futex_wait(atomic_int *word, int val);
void tk__futex_wake(atomic_int *word, int n);

/* rt_sigprocmask with the kernel's 8-byte signal set (how: SIG_BLOCK,
 * SIG_UNBLOCK, SIG_SETMASK; set or old may be NULL), bypassing libc's
 * bookkeeping.  Returns 0 or a negative errno; errno is kept.
 * [signal-safe] */
int tk__sigmask(int how, const void *set, void *old);

/* Blocks for good the calling thread's asynchronous signals - every one
 * but SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP - for a thread of
 * trapkit's own: the program's signals are not for it.  By pthread_sigmask,
 * so the signals glibc uses itself (setxid, cancellation) stay open and a
 * setuid() in another thread does not wait for it for ever. */
void tk__block_async_signals(void);

/* pthread_create of a thread of trapkit's own that starts with the
 * asynchronous signals blocked (and the caller's mask as it was after).
 * Its synchronous signals stay open: blocked, a fault there would not reach
 * trapkit's handler (the kernel resets the signal to its default action and
 * the process dies), so code it runs (a program's callback, a read of a
 * protected page) could not be handled.  Returns 0 or a negative errno. */
int tk__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* arch_prctl(code, arg).  Returns 0 or a negative errno. */
int tk__arch_prctl(int code, unsigned long *arg);

/* A raw write(2) of a string to fd 2, for diagnostics. [signal-safe] */
void tk__write_stderr(const char *s);

#endif
