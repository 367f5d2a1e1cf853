/* src/os/linux/os.c - the system calls of os.h. */
#include "os/linux/os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <trapkit/probe.h>

#define SAVE_ERRNO int saved_errno_ = errno
#define RETURN(x)                                                                                  \
    do {                                                                                           \
        long r_ = (x);                                                                             \
        errno = saved_errno_;                                                                      \
        return r_;                                                                                 \
    } while (0)

int tk__uffd_open(int *how)
{
    SAVE_ERRNO;
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    if (fd >= 0) {
        if (how) *how = TK_UFFD_SYSCALL;
        RETURN(fd);
    }
    int err = errno;
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
        fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
        close(dev);
        if (fd >= 0) {
            if (how) *how = TK_UFFD_DEVICE;
            RETURN(fd);
        }
    }
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (fd >= 0) {
        if (how) *how = TK_UFFD_USER_MODE_ONLY;
        RETURN(fd);
    }
    if (how) *how = TK_UFFD_NONE;
    RETURN(-(err ? err : ENOSYS));
}

int tk__uffd_api(int fd, uint64_t want, uint64_t *got, uint64_t *ioctls)
{
    SAVE_ERRNO;
    struct uffdio_api api = {.api = UFFD_API, .features = want};
    if (ioctl(fd, UFFDIO_API, &api) < 0) RETURN(-errno);
    if (got) *got = api.features;
    if (ioctls) *ioctls = api.ioctls;
    RETURN(0);
}

int tk__uffd_create(uint64_t want)
{
    int fd = tk__uffd_open(NULL);
    if (fd < 0) return fd;
    uint64_t got = 0;
    int r = tk__uffd_api(fd, want, &got, NULL);
    if (r == 0 && (got & want) != want) r = -EOPNOTSUPP;
    if (r < 0) {
        SAVE_ERRNO;
        close(fd);
        errno = saved_errno_;
        return r;
    }
    return fd;
}

int tk__uffd_register_wp(int fd, void *addr, size_t len, uint64_t *ioctls)
{
    SAVE_ERRNO;
    struct uffdio_register reg = {
        .range = {.start = (uintptr_t)addr, .len = len},
        .mode = UFFDIO_REGISTER_MODE_WP,
    };
    if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0) RETURN(-errno);
    if (ioctls) *ioctls = reg.ioctls;
    RETURN(0);
}

int tk__uffd_unregister(int fd, void *addr, size_t len)
{
    SAVE_ERRNO;
    struct uffdio_range range = {.start = (uintptr_t)addr, .len = len};
    if (ioctl(fd, UFFDIO_UNREGISTER, &range) < 0) RETURN(-errno);
    RETURN(0);
}

/* One UFFDIO_WRITEPROTECT.  EAGAIN: the address space is changing (a
 * madvise, munmap or mremap waits for its userfaultfd events to be read):
 * let that finish.  [signal-safe] */
static int uffd_wp_once(int fd, uintptr_t addr, size_t len, uint64_t mode)
{
    struct uffdio_writeprotect w = {.range = {.start = addr, .len = len}, .mode = mode};
    for (;;) {
        if (ioctl(fd, UFFDIO_WRITEPROTECT, &w) == 0) return 0;
        if (errno != EAGAIN && errno != EINTR) return -errno;
        if (errno == EAGAIN) sched_yield();
    }
}

/* Linux 6.1 refuses (ENOENT) a range that spans more than one mapping, even
 * when all of it is registered, and a region's range may: mprotect splits
 * it, so does a user's madvise, and a fork child's pieces never merge again.
 * The range is then done in halves, down to single pages, where ENOENT is a
 * real error.  (Later kernels take the whole range at once.)  [signal-safe] */
static int uffd_wp_split(int fd, uintptr_t addr, size_t len, uint64_t mode, size_t ps, int depth)
{
    int err = uffd_wp_once(fd, addr, len, mode);
    if (err != -ENOENT || len <= ps || depth > 64) return err;
    size_t half = (len / ps / 2) * ps;
    err = uffd_wp_split(fd, addr, half, mode, ps, depth + 1);
    return err ? err : uffd_wp_split(fd, addr + half, len - half, mode, ps, depth + 1);
}

/* [signal-safe]  (The kernel refuses DONTWAKE together with WP.) */
int tk__uffd_wp(int fd, void *addr, size_t len, bool wp, bool dontwake)
{
    SAVE_ERRNO;
    uint64_t mode = (wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
                    (dontwake && !wp ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0);
    int err = uffd_wp_once(fd, (uintptr_t)addr, len, mode);
    if (err == -ENOENT) {
        size_t ps = (size_t)getpagesize();
        /* not registered at all: the first page alone says so */
        err = uffd_wp_once(fd, (uintptr_t)addr, ps, mode);
        if (!err) err = uffd_wp_split(fd, (uintptr_t)addr, len, mode, ps, 0);
    }
    RETURN(err);
}

/* [signal-safe] */
int tk__uffd_wake(int fd, void *addr, size_t len)
{
    SAVE_ERRNO;
    struct uffdio_range range = {.start = (uintptr_t)addr, .len = len};
    if (ioctl(fd, UFFDIO_WAKE, &range) < 0) RETURN(-errno);
    RETURN(0);
}

void tk__uffd_fault_loop(int fd, int stop_fd, const atomic_bool *stop,
                         void (*on_fault)(void *arg, uintptr_t addr, uint64_t flags), void *arg)
{
    struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    struct uffd_msg msgs[16];
    while (!stop || !atomic_load(stop)) {
        if (poll(pf, 2, -1) < 0) continue;
        if (pf[1].revents) return;
        ssize_t n = read(fd, msgs, sizeof msgs);
        if (n <= 0) continue;
        for (size_t m = 0; m < (size_t)n / sizeof msgs[0]; m++)
            if (msgs[m].event == UFFD_EVENT_PAGEFAULT)
                on_fault(arg, (uintptr_t)msgs[m].arg.pagefault.address,
                         msgs[m].arg.pagefault.flags);
    }
}

/* [signal-safe] */
int tk__mprotect(void *addr, size_t len, int prot)
{
    SAVE_ERRNO;
    if (mprotect(addr, len, prot) < 0) RETURN(-errno);
    RETURN(0);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* [signal-safe] */
int tk__populate_read(void *addr, size_t len)
{
    SAVE_ERRNO;
    if (madvise(addr, len, MADV_POPULATE_READ) == 0) RETURN(0);
    if (errno != EINVAL) RETURN(-errno);
    /* before 5.14: touch each page */
    size_t ps = (size_t)getpagesize();
    for (uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(ps - 1); a < (uintptr_t)addr + len; a += ps)
        (void)*(volatile const char *)a;
    RETURN(0);
}

static int pagemap_fd = -1;
static pthread_mutex_t pagemap_lock = PTHREAD_MUTEX_INITIALIZER;

int tk__pagemap_fd(void)
{
    int fd = __atomic_load_n(&pagemap_fd, __ATOMIC_ACQUIRE);
    if (fd >= 0) return fd;
    SAVE_ERRNO;
    pthread_mutex_lock(&pagemap_lock);
    if (pagemap_fd < 0) {
        fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            fd = -errno;
        else
            __atomic_store_n(&pagemap_fd, fd, __ATOMIC_RELEASE);
    } else {
        fd = pagemap_fd;
    }
    pthread_mutex_unlock(&pagemap_lock);
    RETURN(fd);
}

void tk__pagemap_forget(void)
{
    if (pagemap_fd >= 0) close(pagemap_fd);
    pagemap_fd = -1;
    pthread_mutex_init(&pagemap_lock, NULL);
}

long tk__pagemap_scan(int pmfd, uintptr_t start, uintptr_t end, uint64_t flags,
                      uint64_t category_mask, uint64_t return_mask, struct page_region *vec,
                      size_t vec_len, uintptr_t *walk_end)
{
    SAVE_ERRNO;
    struct pm_scan_arg arg = {
        .size = sizeof(arg),
        .flags = flags,
        .start = start,
        .end = end,
        .vec = (uintptr_t)vec,
        .vec_len = vec_len,
        .category_mask = category_mask,
        .return_mask = return_mask,
    };
    long n;
    do {
        n = ioctl(pmfd, PAGEMAP_SCAN, &arg);
    } while (n < 0 && errno == EINTR);
    if (n < 0) RETURN(-errno);
    if (walk_end) *walk_end = (uintptr_t)arg.walk_end;
    RETURN(n);
}

long tk__pagemap_scan_any(int pmfd, uintptr_t start, uintptr_t end, uint64_t anyof,
                          uint64_t return_mask, struct page_region *vec, size_t vec_len,
                          uintptr_t *walk_end)
{
    SAVE_ERRNO;
    struct pm_scan_arg arg = {
        .size = sizeof(arg),
        .start = start,
        .end = end,
        .vec = (uintptr_t)vec,
        .vec_len = vec_len,
        .category_anyof_mask = anyof,
        .return_mask = return_mask,
    };
    long n;
    do {
        n = ioctl(pmfd, PAGEMAP_SCAN, &arg);
    } while (n < 0 && errno == EINTR);
    if (n < 0) RETURN(-errno);
    if (walk_end) *walk_end = (uintptr_t)arg.walk_end;
    RETURN(n);
}

int tk__clear_soft_dirty(void)
{
    SAVE_ERRNO;
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) RETURN(-errno);
    ssize_t w = write(fd, "4", 1);
    int err = w == 1 ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    RETURN(err);
}

int tk__pagemap_read(uintptr_t addr, size_t n, uint64_t *out)
{
    SAVE_ERRNO;
    int fd = tk__pagemap_fd();
    if (fd < 0) RETURN(fd);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    off_t off = (off_t)(addr / ps * sizeof(uint64_t));
    size_t want = n * sizeof(uint64_t), done = 0;
    while (done < want) {
        ssize_t r = pread(fd, (char *)out + done, want - done, off + (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) RETURN(r < 0 ? -errno : -EIO);
        done += (size_t)r;
    }
    RETURN(0);
}

int tk__memfd(const char *name, size_t len)
{
    SAVE_ERRNO;
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) RETURN(-errno);
    if (ftruncate(fd, (off_t)len) < 0) {
        int err = -errno;
        close(fd);
        RETURN(err);
    }
    RETURN(fd);
}

/* [signal-safe] */
int tk__pkey_alloc(void)
{
    SAVE_ERRNO;
    long k = syscall(SYS_pkey_alloc, 0, 0);
    RETURN(k < 0 ? -errno : k);
}

int tk__pkey_free(int key)
{
    SAVE_ERRNO;
    RETURN(syscall(SYS_pkey_free, key) < 0 ? -errno : 0);
}

int tk__pkey_mprotect(void *addr, size_t len, int prot, int key)
{
    SAVE_ERRNO;
    RETURN(syscall(SYS_pkey_mprotect, addr, len, prot, key) < 0 ? -errno : 0);
}

int tk__sigmask(int how, const void *set, void *old)
{
    SAVE_ERRNO;
    if (syscall(SYS_rt_sigprocmask, how, set, old, 8) < 0) RETURN(-errno);
    RETURN(0);
}

/* The asynchronous signals: every one but SIGSEGV, SIGBUS, SIGILL, SIGFPE
 * and SIGTRAP. */
static void async_signals(sigset_t *s)
{
    sigfillset(s);
    sigdelset(s, SIGSEGV);
    sigdelset(s, SIGBUS);
    sigdelset(s, SIGILL);
    sigdelset(s, SIGFPE);
    sigdelset(s, SIGTRAP);
}

void tk__block_async_signals(void)
{
    sigset_t s;
    async_signals(&s);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

int tk__thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t s, old;
    async_signals(&s);
    pthread_sigmask(SIG_BLOCK, &s, &old);
    int r = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -r;
}

int tk__arch_prctl(int code, unsigned long *arg)
{
    SAVE_ERRNO;
    if (syscall(SYS_arch_prctl, code, arg) < 0) RETURN(-errno);
    RETURN(0);
}

void tk__futex_wait(atomic_int *word, int val)
{
    SAVE_ERRNO;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
    errno = saved_errno_;
}

void tk__futex_wake(atomic_int *word, int n)
{
    SAVE_ERRNO;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved_errno_;
}

void tk__write_stderr(const char *s)
{
    SAVE_ERRNO;
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        s += w;
        n -= (size_t)w;
    }
    errno = saved_errno_;
}
