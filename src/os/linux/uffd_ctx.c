/* src/os/linux/uffd_ctx.c - trapkit's userfaultfds and the handler thread.
 *
 * Each delivery mode needs its own userfaultfd, since features are per fd:
 *   uffd-sigbus   UFFD_FEATURE_SIGBUS: a write-protect fault raises SIGBUS in
 *                 the faulting thread (core/dispatch.c handles it)
 *   uffd-thread   no SIGBUS: the faulting thread sleeps in the kernel until
 *                 trapkit's handler thread reads the event, runs the region's
 *                 handler and wakes it
 *   pagemap-scan  UFFD_FEATURE_WP_ASYNC: the kernel resolves write faults
 *                 itself and PAGEMAP_SCAN reports and re-protects (vm/dirty.c)
 * All three ask, where offered, for WP_UNPOPULATED (so never-touched pages
 * are protected too; before Linux 6.4 vm/protect.c populates pages before
 * protecting them) and WP_HUGETLBFS_SHMEM (for memfd-backed MAP2 regions).
 *
 * uffd-thread's service threads.  A region's handler runs on a service
 * thread, and may itself touch a protected page: a write-protected page of a
 * uffd-thread region then blocks that thread until another one serves the
 * fault.  So while one service thread runs a handler, another waits for
 * events: the threads each wait in an epoll instance of their own registered
 * with EPOLLEXCLUSIVE, so the kernel wakes one waiting thread per event, not
 * every one.  A thread about to run a handler starts a new one if none would
 * be left waiting (up to TK_SERVICE_MAX, a nesting depth no handler should
 * reach; past it trapkit says so on stderr).  Service threads keep
 * asynchronous signals blocked, so the program's signal handlers run in its
 * own threads; SIGSEGV and the other synchronous signals stay deliverable, so
 * a handler touching an inaccessible (mprotect'ed) page is served in the
 * service thread's own signal handler like any fault.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "core/region_impl.h"
#include "os/linux/os.h"

#define TK_SERVICE_MAX 64

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int fds[TK_MECH_COUNT_] = {[0 ... TK_MECH_COUNT_ - 1] = -1};
static atomic_int service_idle;     /* service threads waiting for events */
static atomic_int service_threads;  /* service threads started */
static atomic_int service_starting; /* started, not yet waiting for events */
/* Each service thread's id and how deeply nested the handler it runs is
 * (0: none), so a fault raised by a handler on a service thread is known as
 * nested (with UFFD_FEATURE_THREAD_ID): a handler that faults on its own
 * page is declined at TK_SERVICE_NESTING levels (vm/uffd_serve.c) and crashes as it would on
 * the other mechanisms, instead of taking every thread. */
static _Atomic pid_t service_tid[TK_SERVICE_MAX];
static atomic_int service_depth[TK_SERVICE_MAX];
static __thread int service_index = -1;

static int nesting_of(pid_t faulting)
{
    int n = atomic_load(&service_threads);
    for (int i = 0; i < n && i < TK_SERVICE_MAX; i++)
        if (faulting && atomic_load(&service_tid[i]) == faulting)
            return atomic_load(&service_depth[i]);
    return 0;
}

/* The child of fork(): a userfaultfd stays bound to the address space that
 * opened it, so the child must not use the inherited ones (an ioctl would
 * change the parent's pages), and the service threads are not there.  Close
 * them; core/fork.c then opens new ones for the child's regions. */
void tk__uffd_after_fork_child(void)
{
    pthread_mutex_init(&ctx_lock, NULL);
    for (int m = 0; m < TK_MECH_COUNT_; m++) {
        if (fds[m] >= 0) close(fds[m]);
        fds[m] = -1;
    }
    atomic_store(&service_idle, 0);
    atomic_store(&service_threads, 0);
    atomic_store(&service_starting, 0);
}

static int start_service_thread(int fd);

/* The service threads take the region's lock to handle an event, and the
 * lock's holder may be waiting for the kernel (UFFDIO_WRITEPROTECT says
 * EAGAIN while a madvise or munmap is waiting for its events to be read): a
 * thread must always be left waiting for events.  What an event means is
 * vm/uffd_serve.c's business; the thread counts itself waiting again before
 * it wakes the faulting thread, whose next fault must not find every thread
 * busy and start one more. */
static void serve(int fd, const struct uffd_msg *msg)
{
    if (atomic_fetch_sub(&service_idle, 1) == 1) (void)start_service_thread(fd);
    int depth = 0;
    if (msg->event == UFFD_EVENT_PAGEFAULT) {
        depth = nesting_of((pid_t)msg->arg.pagefault.feat.ptid) + 1;
        if (service_index >= 0) atomic_store(&service_depth[service_index], depth);
    }
    uintptr_t wake_addr = 0;
    size_t wake_len = tk__uffd_serve(msg, depth, &wake_addr);
    if (service_index >= 0) atomic_store(&service_depth[service_index], 0);
    atomic_fetch_add(&service_idle, 1);
    if (wake_len) tk__uffd_wake(fd, (void *)wake_addr, wake_len);
}

static void *service_main(void *arg)
{
    int fd = (int)((intptr_t)arg & 0xffffffff);
    service_index = (int)((intptr_t)arg >> 32);
    atomic_store(&service_tid[service_index], gettid());
    tk__block_async_signals();
    tk__async_signals_blocked = true;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        tk__write_stderr("trapkit: a uffd service thread could not wait for events (epoll)\n");
        if (ep >= 0) close(ep);
        atomic_fetch_sub(&service_idle, 1);
        atomic_fetch_sub(&service_starting, 1);
        return NULL;
    }
    atomic_fetch_sub(&service_starting, 1);
    for (;;) {
        struct epoll_event got;
        int k = epoll_wait(ep, &got, 1, -1);
        if (k < 0 && errno != EINTR) break;
        if (k <= 0) continue;
        struct uffd_msg msgs[32];
        ssize_t n = read(fd, msgs, sizeof msgs);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            break;
        }
        for (size_t i = 0; i < (size_t)n / sizeof msgs[0]; i++) serve(fd, &msgs[i]);
    }
    tk__write_stderr("trapkit: waiting for userfaultfd events failed; uffd-thread faults stop\n");
    close(ep);
    return NULL;
}

/* Starts one more service thread on fd (a service thread may call it). */
static int start_service_thread(int fd)
{
    int index = atomic_fetch_add(&service_threads, 1);
    if (index >= TK_SERVICE_MAX) {
        atomic_fetch_sub(&service_threads, 1);
        static atomic_int told;
        if (!atomic_exchange(&told, 1))
            tk__write_stderr("trapkit: uffd-thread handlers nest deeper than the service threads "
                             "(64): a write fault from the innermost waits until one returns\n");
        return -EAGAIN;
    }
    atomic_fetch_add(&service_idle, 1);
    atomic_fetch_add(&service_starting, 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int err = pthread_create(&th, &attr, service_main, (void *)((intptr_t)index << 32 | fd));
    pthread_attr_destroy(&attr);
    if (err) {
        atomic_fetch_sub(&service_idle, 1);
        atomic_fetch_sub(&service_threads, 1);
        atomic_fetch_sub(&service_starting, 1);
        return -err;
    }
    return 0;
}

/* fork(): a service thread still starting may hold the allocator's lock
 * (thread start-up allocates), which the child, which starts service threads
 * of its own, would then wait for forever: let those finish first. */
void tk__uffd_before_fork(void)
{
    while (atomic_load(&service_starting) > 0) sched_yield();
}

int tk__uffd_for(enum tk_mech m)
{
    const tk_probe_info *p = tk__probe();
    uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
    /* without WP_UNPOPULATED pages are populated before they are protected */
    uint64_t optional = UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED;
    switch (m) {
    case TK_MECH_UFFD_SIGBUS:
        want |= UFFD_FEATURE_SIGBUS;
        break;
    case TK_MECH_UFFD_THREAD:
        optional |= UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_EXACT_ADDRESS |
                    UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMAP;
        break;
    case TK_MECH_PAGEMAP_SCAN:
        want |= UFFD_FEATURE_WP_ASYNC;
        break;
    default:
        return tk__fail(-EINVAL, "trapkit: no userfaultfd for this mechanism");
    }
    pthread_mutex_lock(&ctx_lock);
    int fd = fds[m];
    if (fd >= 0) goto out;
    fd = tk__uffd_create(want | (optional & p->uffd_features));
    if (fd < 0) {
        fd = tk__failf(fd, "trapkit: cannot open a userfaultfd for %s: %s", tk_mech_name(m),
                       strerror(-fd));
        goto out;
    }
    if (m == TK_MECH_UFFD_THREAD) {
        /* several service threads read it: none may block in read() */
        int err = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ? -errno : 0;
        if (!err) err = start_service_thread(fd);
        if (err) {
            close(fd);
            fd =
                tk__failf(err, "trapkit: cannot start the uffd handler thread: %s", strerror(-err));
            goto out;
        }
    }
    fds[m] = fd;
out:
    pthread_mutex_unlock(&ctx_lock);
    return fd;
}
