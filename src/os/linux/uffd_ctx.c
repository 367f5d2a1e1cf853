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
 * All three ask for WP_UNPOPULATED (so never-touched pages are protected
 * too) and, where offered, WP_HUGETLBFS_SHMEM (for memfd-backed MAP2
 * regions).
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/region_impl.h"
#include "os/linux/os.h"

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int fds[TK_MECH_COUNT_] = {-1, -1, -1, -1, -1, -1, -1};
static pthread_t service_thread;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The child of fork(): a userfaultfd stays bound to the address space that
 * opened it, so the child's regions must not use the inherited ones (an
 * ioctl would change the parent's pages) and the handler thread is not
 * there.  Close them; new regions get new ones.  The kernel already dropped
 * the child's write protection and registrations (no UFFD_FEATURE_EVENT_FORK). */
static void after_fork_child(void)
{
    pthread_mutex_init(&ctx_lock, NULL);
    for (int m = 0; m < TK_MECH_COUNT_; m++) {
        if (fds[m] >= 0) close(fds[m]);
        fds[m] = -1;
    }
    tk__table_forget_uffd();
    tk__pagemap_forget();
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

void tk__atfork_once(void)
{
    pthread_once(&atfork_once, register_atfork);
}

__thread bool tk__uffd_serving __attribute__((tls_model("initial-exec")));

/* Handles one userfaultfd event on the handler thread. */
static void serve(int fd, const struct uffd_msg *msg)
{
    if (msg->event != UFFD_EVENT_PAGEFAULT) return;
    uintptr_t addr = (uintptr_t)msg->arg.pagefault.address;
    size_t hw = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t hwpage = addr & ~(uintptr_t)(hw - 1);

    tk__table_enter();
    struct tk_region *r = tk__table_find(addr);
    if (!r) {
        /* Not registered by any live region (destroyed meanwhile): let the
         * thread retry; the range is no longer write-protected. */
        tk__uffd_wake(fd, (void *)hwpage, hw);
        tk__table_leave();
        return;
    }
    tk__uffd_serving = true;
    tk_action act = tk__handle_fault(r, addr, TK_ACCESS_WRITE, NULL, NULL, TK_MECH_UFFD_THREAD,
                                     TK_FAULT_THREAD);
    tk__uffd_serving = false;
    if (act == TK_RESUME) {
        tk__uffd_wake(fd, (void *)hwpage, hw);
    } else {
        /* Declined: the faulting thread must get the SIGSEGV it would have
         * had; the retried write faults in its own thread, where the signal
         * handler sees the mark and passes the fault on. */
        size_t page = tk__page_index(r, addr);
        void *p = (void *)(r->rg_start + (page << r->rg_shift));
        tk__decline_wp(r, page);
        tk__uffd_wake(fd, p, r->rg_page);
    }
    tk__table_leave();
}

static void *service_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        struct uffd_msg msgs[32];
        ssize_t n = read(fd, msgs, sizeof msgs);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            tk__write_stderr("trapkit: reading the userfaultfd failed; uffd-thread faults stop\n");
            return NULL;
        }
        for (size_t i = 0; i < (size_t)n / sizeof msgs[0]; i++) serve(fd, &msgs[i]);
    }
}

int tk__uffd_for(enum tk_mech m)
{
    const tk_probe_info *p = tk__probe();
    uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED;
    uint64_t optional = UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
    switch (m) {
    case TK_MECH_UFFD_SIGBUS:
        want |= UFFD_FEATURE_SIGBUS;
        break;
    case TK_MECH_UFFD_THREAD:
        optional |= UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_EXACT_ADDRESS;
        break;
    case TK_MECH_PAGEMAP_SCAN:
        want |= UFFD_FEATURE_WP_ASYNC;
        break;
    default:
        return tk__fail(-EINVAL, "trapkit: no userfaultfd for this mechanism");
    }
    tk__atfork_once();
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
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&service_thread, &attr, service_main, (void *)(intptr_t)fd);
        pthread_attr_destroy(&attr);
        if (err) {
            close(fd);
            fd =
                tk__failf(-err, "trapkit: cannot start the uffd handler thread: %s", strerror(err));
            goto out;
        }
    }
    fds[m] = fd;
out:
    pthread_mutex_unlock(&ctx_lock);
    return fd;
}
