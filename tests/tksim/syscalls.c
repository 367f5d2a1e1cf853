/* The system calls tksim answers, each called as a program calls it and
 * checked: the output must equal qemu-riscv64's (run in an empty directory
 * of its own) and tksim's (with that directory as --fs-root).  What could
 * differ between runs or machines (pids, times, random bytes, addresses,
 * descriptor numbers, the host's limits) is not printed, only checks on
 * it.  Every line is "call: what was checked = result".
 * Build: riscv64-linux-gnu-gcc -O2 -static -o syscalls syscalls.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/times.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"

/* the output: write(2) on descriptor 1, one line a call */

/* a raw system call's result: the value, or -errno (glibc's wrappers hide
 * some answers: getcwd returns the buffer, prlimit the 0) */
static long sys(long n, long a, long b, long c, long d, long e)
{
    long r = syscall(n, a, b, c, d, e);
    return r < 0 ? -errno : r;
}

/* "ok", or the errno's name */
static const char *res(long r)
{
    return r >= 0 ? "ok" : errname((int)-r);
}
#define E(call) res((call) < 0 ? -errno : 0) /* a glibc call's answer */

static int lines_sorted(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void files(void)
{
    umask(022);
    /* openat, write, writev, lseek, pwrite64, fstat, close */
    int fd = openat(AT_FDCWD, "f.txt", O_CREAT | O_WRONLY | O_TRUNC, 0666);
    out("openat: create f.txt = %s, fd > 2 = %d\n", E(fd), fd > 2);
    out("write: 12 bytes = %zd\n", write(fd, "hello world\n", 12));
    struct iovec iov[3] = {{"ab", 2}, {"", 0}, {"cdef\n", 5}};
    out("writev: 3 buffers = %zd\n", writev(fd, iov, 3));
    long cur = lseek(fd, 0, SEEK_CUR), set = lseek(fd, 4, SEEK_SET), end = lseek(fd, 0, SEEK_END);
    out("lseek: SEEK_CUR = %ld, SEEK_SET 4 = %ld, SEEK_END = %ld\n", cur, set, end);
    out("pwrite64: 3 bytes at 100 = %zd, offset still %ld\n", pwrite(fd, "xyz", 3, 100),
        (long)lseek(fd, 0, SEEK_CUR));
    struct stat st;
    const char *r = E(fstat(fd, &st));
    out("fstat: %s, size %ld, regular %d, mode %o, nlink %ld\n", r, (long)st.st_size,
        S_ISREG(st.st_mode), st.st_mode & 07777, (long)st.st_nlink);
    out("fsync: %s\n", E(fsync(fd)));
    out("ftruncate: to 50 = %s", E(ftruncate(fd, 50)));
    fstat(fd, &st);
    out(", size %ld\n", (long)st.st_size);
    out("close: %s", E(close(fd)));
    out(", again %s\n", E(close(fd)));
    out("read: a closed descriptor = %s\n", E(read(fd, &st, 1)));

    /* openat, read, readv, pread64, lseek on the file */
    fd = openat(AT_FDCWD, "f.txt", O_RDONLY);
    char buf[128] = {0}, b1[4] = {0}, b2[8] = {0};
    out("openat: read-only = %s\n", E(fd));
    out("read: 6 bytes = %zd '%.6s'\n", read(fd, buf, 6), buf);
    struct iovec riov[2] = {{b1, 3}, {b2, 7}};
    out("readv: 3 + 7 bytes = %zd '%.3s' '%.7s'\n", readv(fd, riov, 2), b1, b2);
    memset(buf, 0, sizeof buf);
    out("pread64: 5 at 12 = %zd '%.5s', offset still %ld\n", pread(fd, buf, 5, 12), buf,
        (long)lseek(fd, 0, SEEK_CUR));
    out("read: at the end = %zd\n", (lseek(fd, 0, SEEK_END), read(fd, buf, 10)));
    out("write: a read-only descriptor = %s\n", E(write(fd, "x", 1)));
    close(fd);
    out("openat: missing = %s, O_EXCL on existing = %s, a directory for writing = %s\n",
        E(openat(AT_FDCWD, "nope", O_RDONLY)),
        E(openat(AT_FDCWD, "f.txt", O_CREAT | O_EXCL | O_WRONLY, 0600)),
        E(openat(AT_FDCWD, ".", O_WRONLY)));

    /* newfstatat, statx, faccessat, readlinkat, symlinkat */
    r = E(fstatat(AT_FDCWD, "f.txt", &st, 0));
    out("newfstatat: f.txt = %s, size %ld\n", r, (long)st.st_size);
    out("newfstatat: missing = %s, '' without AT_EMPTY_PATH = %s\n",
        E(fstatat(AT_FDCWD, "nope", &st, 0)), E(fstatat(AT_FDCWD, "", &st, 0)));
    struct statx sx;
    r = E(statx(AT_FDCWD, "f.txt", 0, STATX_BASIC_STATS, &sx));
    out("statx: f.txt = %s, size %llu, regular %d, mode %o, has size %d\n", r,
        (unsigned long long)sx.stx_size, S_ISREG(sx.stx_mode), sx.stx_mode & 07777,
        !!(sx.stx_mask & STATX_SIZE));
    out("symlinkat: link -> f.txt = %s", E(symlinkat("f.txt", AT_FDCWD, "link")));
    out(", again = %s\n", E(symlinkat("f.txt", AT_FDCWD, "link")));
    memset(buf, 0, sizeof buf);
    out("readlinkat: link = %zd '%s'\n", readlinkat(AT_FDCWD, "link", buf, sizeof buf), buf);
    out("readlinkat: 3 bytes of it = %zd, a regular file = %s, missing = %s\n",
        readlinkat(AT_FDCWD, "link", buf, 3), E(readlinkat(AT_FDCWD, "f.txt", buf, 9)),
        E(readlinkat(AT_FDCWD, "nope", buf, 9)));
    int followed = fstatat(AT_FDCWD, "link", &st, 0) == 0 && S_ISREG(st.st_mode);
    int not_followed =
        fstatat(AT_FDCWD, "link", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    out("newfstatat: link followed: regular %d; not followed: symlink %d\n", followed,
        not_followed);
    out("faccessat: f.txt R_OK = %s, W_OK = %s, missing F_OK = %s, '.' X_OK = %s\n",
        E(faccessat(AT_FDCWD, "f.txt", R_OK, 0)), E(faccessat(AT_FDCWD, "f.txt", W_OK, 0)),
        E(faccessat(AT_FDCWD, "nope", F_OK, 0)), E(faccessat(AT_FDCWD, ".", X_OK, 0)));
    out("faccessat: bad mode = %s\n", res(sys(SYS_faccessat, AT_FDCWD, (long)"f.txt", 8, 0, 0)));

    /* mkdirat, getdents64, chdir, getcwd, renameat2, unlinkat */
    out("mkdirat: d = %s", E(mkdirat(AT_FDCWD, "d", 0755)));
    out(", again = %s, d/e/f = %s\n", E(mkdirat(AT_FDCWD, "d", 0755)),
        E(mkdirat(AT_FDCWD, "d/e/f", 0755)));
    int dfd = openat(AT_FDCWD, "d", O_RDONLY | O_DIRECTORY);
    for (const char *n = "cab"; *n; n++) {
        char name[8] = {*n, '.', 't', 0};
        close(openat(dfd, name, O_CREAT | O_WRONLY, 0644)); /* relative to a directory */
    }
    mkdirat(dfd, "sub", 0700);
    char dents[1024], *names[16];
    long n = sys(SYS_getdents64, dfd, (long)dents, sizeof dents, 0, 0);
    int count = 0;
    for (long off = 0; off < n && count < 16;) {
        struct {
            uint64_t ino;
            int64_t off;
            unsigned short reclen;
            unsigned char type;
            char name[];
        } *d = (void *)(dents + off);
        names[count++] = d->name;
        off += d->reclen;
    }
    qsort(names, (size_t)count, sizeof names[0], lines_sorted);
    out("getdents64: d has %d entries:", count);
    for (int i = 0; i < count; i++) out(" %s", names[i]);
    out("\nfstat: d is a directory %d\n", fstat(dfd, &st) == 0 && S_ISDIR(st.st_mode));
    out("getdents64: at the end = %ld, a file = %s\n",
        sys(SYS_getdents64, dfd, (long)dents, sizeof dents, 0, 0),
        res(sys(SYS_getdents64, 0 + open("f.txt", O_RDONLY), (long)dents, sizeof dents, 0, 0)));
    close(dfd);

    char cwd[4096];
    long len = sys(SYS_getcwd, (long)cwd, sizeof cwd, 0, 0, 0);
    out("getcwd: length = strlen + 1: %d\n", len == (long)strlen(cwd) + 1);
    out("getcwd: a 1-byte buffer = %s\n", res(sys(SYS_getcwd, (long)cwd, 1, 0, 0, 0)));
    out("chdir: d/sub = %s", E(chdir("d/sub")));
    out(", missing = %s, a file = %s\n", E(chdir("nope")), E(chdir("../a.t")));
    len = sys(SYS_getcwd, (long)cwd, sizeof cwd, 0, 0, 0);
    out("getcwd: ends in /d/sub %d, length = strlen + 1: %d\n",
        len > 6 && strcmp(cwd + len - 7, "/d/sub") == 0, len == (long)strlen(cwd) + 1);
    close(openat(AT_FDCWD, "here", O_CREAT | O_WRONLY, 0644));
    out("chdir: .. = %s", E(chdir("..")));
    out(", .. again = %s\n", E(chdir("..")));
    out("faccessat: d/sub/here (made in d/sub) = %s\n",
        E(faccessat(AT_FDCWD, "d/sub/here", F_OK, 0)));
    dfd = open("d", O_RDONLY | O_DIRECTORY);
    out("fchdir: d = %s", E(fchdir(dfd)));
    out(", b.t there = %s", E(access("b.t", F_OK)));
    out(", back = %s\n", E(chdir("..")));
    close(dfd);

    out("renameat2: f.txt -> g.txt = %s", E(renameat2(AT_FDCWD, "f.txt", AT_FDCWD, "g.txt", 0)));
    out(", f.txt now %s, g.txt %s\n", E(access("f.txt", F_OK)), E(access("g.txt", F_OK)));
    out("renameat2: NOREPLACE onto d/a.t = %s, missing = %s",
        E(renameat2(AT_FDCWD, "g.txt", AT_FDCWD, "d/a.t", RENAME_NOREPLACE)),
        E(renameat2(AT_FDCWD, "nope", AT_FDCWD, "x", 0)));
    out(", into d = %s\n", E(renameat2(AT_FDCWD, "g.txt", AT_FDCWD, "d/g.txt", 0)));
    out("renameat2: EXCHANGE d/a.t and d/b.t = %s\n",
        E(renameat2(AT_FDCWD, "d/a.t", AT_FDCWD, "d/b.t", RENAME_EXCHANGE)));
    out("unlinkat: d (not empty) = %s, d as a file = %s, missing = %s\n",
        E(unlinkat(AT_FDCWD, "d", AT_REMOVEDIR)), E(unlinkat(AT_FDCWD, "d", 0)),
        E(unlinkat(AT_FDCWD, "nope", 0)));
    out("unlinkat: '.' = %s, d/sub as a directory = %s\n", E(unlinkat(AT_FDCWD, ".", AT_REMOVEDIR)),
        E(unlinkat(AT_FDCWD, "d/sub", AT_REMOVEDIR)));
    const char *gone[] = {"d/a.t", "d/b.t", "d/c.t", "d/g.t", "d/g.txt", "d/sub/here", "link"};
    out("unlinkat:");
    for (unsigned i = 0; i < sizeof gone / sizeof gone[0]; i++)
        out(" %s %s", gone[i], E(unlinkat(AT_FDCWD, gone[i], 0)));
    out("\nunlinkat: d/sub = %s", E(unlinkat(AT_FDCWD, "d/sub", AT_REMOVEDIR)));
    out(", d = %s\n", E(unlinkat(AT_FDCWD, "d", AT_REMOVEDIR)));
    dfd = open(".", O_RDONLY | O_DIRECTORY);
    n = sys(SYS_getdents64, dfd, (long)dents, sizeof dents, 0, 0);
    out("getdents64: the directory is empty again: %d\n", n == 48); /* "." and ".." */
    close(dfd);
}

static void descriptors(void)
{
    int p[2];
    out("pipe2: O_CLOEXEC = %s\n", E(pipe2(p, O_CLOEXEC)));
    out("fcntl: F_GETFD = %d, F_GETFL access mode read-only %d, write end write-only %d\n",
        fcntl(p[0], F_GETFD), (fcntl(p[0], F_GETFL) & O_ACCMODE) == O_RDONLY,
        (fcntl(p[1], F_GETFL) & O_ACCMODE) == O_WRONLY);
    char buf[16] = {0};
    out("write: 4 into the pipe = %zd", write(p[1], "ping", 4));
    out(", read = %zd '%.4s'\n", read(p[0], buf, sizeof buf), buf);
    out("fcntl: F_SETFL O_NONBLOCK = %s", E(fcntl(p[0], F_SETFL, O_NONBLOCK)));
    out(", read of the empty pipe = %s\n", E(read(p[0], buf, 1)));
    out("lseek: a pipe = %s\n", E(lseek(p[0], 0, SEEK_SET)));
    int d = dup(p[1]);
    out("dup: = %s, a new number %d, F_GETFD = %d\n", E(d), d != p[1] && d > 2, fcntl(d, F_GETFD));
    out("write: through the duplicate = %zd", write(d, "pong", 4));
    out(", read = %zd\n", read(p[0], buf, sizeof buf));
    int t = dup3(p[1], 40, O_CLOEXEC);
    out("dup3: to 40 = %d, F_GETFD = %d, onto itself = %s, bad flags = %s\n", t, fcntl(40, F_GETFD),
        E(dup3(40, 40, 0)), E(dup3(p[1], 41, O_NONBLOCK)));
    out("fcntl: F_SETFD 0 = %s", E(fcntl(40, F_SETFD, 0)));
    out(", F_GETFD = %d\n", fcntl(40, F_GETFD));
    int f = fcntl(p[1], F_DUPFD, 50), fc = fcntl(p[1], F_DUPFD_CLOEXEC, 50);
    out("fcntl: F_DUPFD 50 = %d, F_DUPFD_CLOEXEC 50 = %d (F_GETFD %d)\n", f, fc,
        fcntl(51, F_GETFD));
    close(p[1]);
    close(d);
    close(40);
    close(50);
    out("read: the pipe with write ends still open: %s\n", E(read(p[0], buf, 1)));
    close(51);
    out("read: every write end closed = %zd\n", read(p[0], buf, 1));
    struct termios tio;
    out("ioctl: TCGETS on a pipe = %s, on a file = %s\n", E(ioctl(p[0], TCGETS, &tio)),
        E(ioctl(open(".", O_RDONLY | O_DIRECTORY), TCGETS, &tio)));
    close(p[0]);
    out("close: 99 = %s, dup 99 = %s, fcntl 99 = %s\n", E(close(99)), E(dup(99)),
        E(fcntl(99, F_GETFD)));
    out("fcntl: unknown command = %s\n", E(fcntl(0, 12345)));
    /* stdout closed and a file dup'ed onto 1 */
    int saved = dup(1);
    int w = open("o.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    dup3(w, 1, 0);
    if (write(1, "to the file\n", 12) != 12) _exit(98);
    dup3(saved, 1, 0);
    close(w);
    close(saved);
    char back[32] = {0};
    int r = open("o.txt", O_RDONLY);
    ssize_t got = read(r, back, 31);
    out("dup3: onto 1 and back: the file has '%.11s' (%zd bytes)\n", back, got);
    close(r);
    unlink("o.txt");
}

static void memory(void)
{
    char *b0 = sbrk(0);
    out("brk: grows by 3 pages = %s", E((long)sbrk(3 * 4096) == -1 ? -1 : 0));
    memset(b0, 7, 3 * 4096);
    out(", shrinks back = %s", E((long)sbrk(-3 * 4096) == -1 ? -1 : 0));
    out(", grows again: zero %d\n", (sbrk(4096) != (void *)-1) && b0[100] == 0);
    sbrk(-4096);

    char *m = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    out("mmap: 4 pages = %s, zero %d, page-aligned %d\n", E(m == MAP_FAILED ? -1 : 0),
        m[0] == 0 && m[4 * 4096 - 1] == 0, ((uintptr_t)m & 4095) == 0);
    for (int i = 0; i < 4 * 4096; i++) m[i] = (char)(i * 7);
    out("mprotect: read-only = %s, misaligned = %s, bad prot = %s\n",
        E(mprotect(m, 4096, PROT_READ)), E(mprotect(m + 1, 4096, PROT_READ)),
        E(mprotect(m, 4096, 0x100)));
    mprotect(m, 4096, PROT_READ | PROT_WRITE);
    out("madvise: DONTNEED page 3 = %s", E(madvise(m + 3 * 4096, 4096, MADV_DONTNEED)));
    out(", it reads zero %d, page 2 kept %d\n", m[3 * 4096 + 5] == 0,
        m[2 * 4096 + 5] == (char)((2 * 4096 + 5) * 7));
    /* (not an unknown advice: Linux says EINVAL, qemu-riscv64 7.2 0) */
    out("madvise: WILLNEED = %s, misaligned = %s\n", E(madvise(m, 4096, MADV_WILLNEED)),
        E(madvise(m + 1, 4096, MADV_WILLNEED)));
    out("munmap: page 1 = %s, misaligned = %s, length 0 = %s\n", E(munmap(m + 4096, 4096)),
        E(munmap(m + 1, 4096)), E(munmap(m, 0)));
    out("mprotect: over the hole = %s\n", E(mprotect(m, 3 * 4096, PROT_READ)));
    out("mremap: shrinking across the hole = %s\n",
        E(mremap(m, 2 * 4096, 4096, 0) == MAP_FAILED ? -1 : 0));
    char *g = mremap(m + 2 * 4096, 4096, 64 * 4096, MREMAP_MAYMOVE);
    out("mremap: page 2 grown to 64 pages (may move) = %s, kept %d, the rest zero %d\n",
        E(g == MAP_FAILED ? -1 : 0), g[5] == (char)((2 * 4096 + 5) * 7), g[63 * 4096] == 0);
    char *s = mremap(g, 64 * 4096, 2 * 4096, 0);
    /* (not a length of 0: Linux says EINVAL, qemu-riscv64 7.2 ENOMEM) */
    out("mremap: shrunk in place = %d\n", s == g);
    munmap(g, 2 * 4096);
    munmap(m, 4096);

    /* a private mapping of a file */
    int fd = open("map.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (write(fd, "mapped text\n", 12) != 12) _exit(97);
    char *f = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    out("mmap: a file, private = %s, '%.11s', then zero %d\n", E(f == MAP_FAILED ? -1 : 0), f,
        f[100] == 0);
    out("mmap: no length = %s, misaligned offset = %s, bad descriptor = %s\n",
        E(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? -1 : 0),
        E(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 1) == MAP_FAILED ? -1 : 0),
        E(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 77, 0) == MAP_FAILED ? -1 : 0));
    munmap(f, 4096);
    close(fd);
    unlink("map.txt");
    int e = open("e.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (write(e, "0123456789", 10) != 10) _exit(96);
    out("read: into an unmapped buffer = %s\n", res(sys(SYS_read, e, (long)m + 4096, 10, 0, 0)));
    close(e);
    unlink("e.txt");
}

static long ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static volatile int got;
static void on_usr1(int s)
{
    got = s;
}

static void process(void)
{
    long t0 = ns(CLOCK_MONOTONIC), r0 = ns(CLOCK_REALTIME);
    struct timespec d = {0, 20 * 1000000};
    out("clock_nanosleep: 20 ms relative = %d", clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL));
    long t1 = ns(CLOCK_MONOTONIC);
    out(", the clock moved >= 20 ms %d, monotonic %d\n", t1 - t0 >= 20000000, t1 >= t0);
    struct timespec until = {(t1 + 10000000) / 1000000000, (t1 + 10000000) % 1000000000};
    out("clock_nanosleep: absolute +10 ms = %d",
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL));
    out(", reached %d\n", ns(CLOCK_MONOTONIC) >= t1 + 10000000);
    struct timespec bad = {0, 1000000000};
    out("clock_nanosleep: tv_nsec 10^9 = %d (EINVAL %d)\n",
        clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL),
        clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL) == EINVAL);
    out("nanosleep (sleep, usleep): usleep 1000 = %s\n", E(usleep(1000)));
    out("clock_gettime: realtime after 2020 %d, bad clock = %s\n", r0 > 1577836800000000000L,
        E(clock_gettime(12345, &d)));
    struct timeval tv;
    out("gettimeofday: = %s, after 2020 %d\n", E(gettimeofday(&tv, NULL)), tv.tv_sec > 1577836800);

    out("getpid: > 0 %d, gettid = getpid %d, getppid > 0 %d\n", getpid() > 0, gettid() == getpid(),
        getppid() > 0);
    out("getuid = geteuid %d, getgid = getegid %d\n", getuid() == geteuid(), getgid() == getegid());
    out("set_tid_address: = gettid %d\n", sys(SYS_set_tid_address, 0, 0, 0, 0, 0) == gettid());
    out("set_robust_list: = %s\n", res(sys(SYS_set_robust_list, 0, 24, 0, 0, 0)));

    struct rlimit old = {1, 2}, lim;
    const char *r = res(sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&old, 0));
    out("prlimit64: RLIMIT_NOFILE, old only = %s, cur <= max %d, cur >= 64 %d\n", r,
        old.rlim_cur <= old.rlim_max, old.rlim_cur >= 64);
    struct rlimit nw = {0, old.rlim_max}, was = {1, 2};
    getrlimit(RLIMIT_CORE, &lim);
    nw.rlim_max = lim.rlim_max;
    r = res(sys(SYS_prlimit64, 0, RLIMIT_CORE, (long)&nw, (long)&was, 0));
    out("prlimit64: RLIMIT_CORE to 0 = %s, the new limit untouched %d, old = getrlimit's %d\n", r,
        nw.rlim_cur == 0 && nw.rlim_max == lim.rlim_max,
        was.rlim_cur == lim.rlim_cur && was.rlim_max == lim.rlim_max);
    getrlimit(RLIMIT_CORE, &lim);
    out("getrlimit: RLIMIT_CORE now 0 %d\n", lim.rlim_cur == 0);
    struct rlimit inv = {10, 5};
    out("prlimit64: cur > max = %s, resource 99 = %s\n",
        res(sys(SYS_prlimit64, 0, RLIMIT_CORE, (long)&inv, 0, 0)),
        res(sys(SYS_prlimit64, 0, 99, 0, (long)&lim, 0)));

    unsigned char rnd[16] = {0};
    out("getrandom: 16 = %zd, 16 nonblocking = %zd, bad flags = %s\n", getrandom(rnd, 16, 0),
        getrandom(rnd, 16, GRND_NONBLOCK), E(getrandom(rnd, 16, 0x100)));
    struct sysinfo si;
    r = E(sysinfo(&si));
    out("sysinfo: = %s, some memory %d, mem_unit >= 1 %d\n", r, si.totalram > 0, si.mem_unit >= 1);
    struct utsname u;
    out("uname: = %s, sysname %s, machine %s\n", E(uname(&u)), u.sysname, u.machine);

    struct sigaction sa = {0}, osa;
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    out("rt_sigaction: SIGUSR1 = %s", E(sigaction(SIGUSR1, &sa, &osa)));
    out(", it was SIG_DFL %d", osa.sa_handler == SIG_DFL);
    sigaction(SIGUSR1, NULL, &osa);
    out(", reads back %d\n", osa.sa_handler == on_usr1 && sigismember(&osa.sa_mask, SIGUSR2) &&
                                 (osa.sa_flags & SA_RESTART));
    out("rt_sigaction: SIGKILL = %s, signal 99 = %s\n", E(sigaction(SIGKILL, &sa, NULL)),
        E(sigaction(99, &sa, NULL)));
    sigset_t set, oset;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    out("rt_sigprocmask: block SIGUSR1 = %s", E(sigprocmask(SIG_BLOCK, &set, &oset)));
    sigprocmask(SIG_BLOCK, NULL, &oset);
    out(", blocked %d", sigismember(&oset, SIGUSR1));
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    sigprocmask(SIG_BLOCK, NULL, &oset);
    out(", unblocked %d, bad how = %s\n", !sigismember(&oset, SIGUSR1),
        E(sigprocmask(12345, &set, NULL)));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGUSR2, &sa, NULL);
    out("kill: SIGUSR2 ignored = %s, signal 0 = %s\n", E(kill(getpid(), SIGUSR2)),
        E(kill(getpid(), 0)));
}

/* the calls a benchmark or a tool makes besides: times and usage, file
 * modes, links and times, file systems, polling, the process's group and
 * name, locked memory */
static void more(void)
{
    int fd = open("m.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    out("truncate: m.txt to 1000 = %s",
        E(write(fd, "12345", 5) == 5 ? truncate("m.txt", 1000) : -1));
    struct stat st;
    fstat(fd, &st);
    out(", size %lld, missing = %s\n", (long long)st.st_size, E(truncate("nope", 5)));
    out("fchmod: 0600 = %s", E(fchmod(fd, 0600)));
    fstat(fd, &st);
    out(", mode %o; fchmodat 0640 = %s", (unsigned)(st.st_mode & 0777),
        E(fchmodat(AT_FDCWD, "m.txt", 0640, 0)));
    stat("m.txt", &st);
    out(", mode %o, missing = %s\n", (unsigned)(st.st_mode & 0777),
        E(fchmodat(AT_FDCWD, "nope", 0640, 0)));
    out("linkat: m.txt -> n.txt = %s", E(linkat(AT_FDCWD, "m.txt", AT_FDCWD, "n.txt", 0)));
    stat("m.txt", &st);
    out(", nlink %lu, again = %s, missing = %s\n", (unsigned long)st.st_nlink,
        E(linkat(AT_FDCWD, "m.txt", AT_FDCWD, "n.txt", 0)),
        E(linkat(AT_FDCWD, "nope", AT_FDCWD, "x.txt", 0)));
    struct timespec ts[2] = {{1000000000, 5}, {1200000000, 7}};
    out("utimensat: n.txt = %s", E(utimensat(AT_FDCWD, "n.txt", ts, 0)));
    stat("m.txt", &st);
    out(", mtime %lld.%ld (the link's file)", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    ts[1].tv_sec = 1300000000;
    out(", futimens = %s", E(futimens(fd, ts)));
    fstat(fd, &st);
    out(", mtime %lld, missing = %s\n", (long long)st.st_mtim.tv_sec,
        E(utimensat(AT_FDCWD, "nope", ts, 0)));
    close(fd);
    unlink("m.txt");
    unlink("n.txt");
    struct statfs sf;
    out("statfs: . = %s", E(statfs(".", &sf)));
    out(", a block size %d, missing = %s", sf.f_bsize > 0, E(statfs("nope", &sf)));
    out(", fstatfs of stdout = %s\n", E(fstatfs(1, &sf)));

    int p[2];
    if (pipe(p) != 0) _exit(98);
    struct pollfd pf[3] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}, {77, POLLIN, 0}};
    struct timespec zero = {0, 0};
    out("ppoll: empty pipe = %d (read end %x, write end %x, closed %x)", ppoll(pf, 3, &zero, NULL),
        pf[0].revents, pf[1].revents, pf[2].revents);
    if (write(p[1], "x", 1) != 1) _exit(98);
    pf[2].fd = -1;
    struct timespec second = {1, 0};
    out(", after a write = %d (read end %x)\n", ppoll(pf, 1, &second, NULL), pf[0].revents);
    close(p[0]);
    close(p[1]);

    struct tms t;
    clock_t c = times(&t);
    out("times: %s\n", c == (clock_t)-1 ? res(-errno) : "ok");
    struct rusage ru;
    out("getrusage: self = %s", E(getrusage(RUSAGE_SELF, &ru)));
    out(", children = %s, thread = %s, who 5 = %s\n", E(getrusage(RUSAGE_CHILDREN, &ru)),
        E(getrusage(RUSAGE_THREAD, &ru)), E(getrusage(5, &ru)));
    cpu_set_t cs;
    CPU_ZERO(&cs);
    out("sched_getaffinity: %s, a CPU %d\n", E(sched_getaffinity(0, sizeof cs, &cs)),
        CPU_COUNT(&cs) > 0);
    out("getpgid: %s, getsid: %s, getpriority: %s, getgroups: %s\n", E(getpgid(0)), E(getsid(0)),
        res(sys(SYS_getpriority, PRIO_PROCESS, 0, 0, 0, 0)), E(getgroups(0, NULL)));
    char name[16] = {0};
    out("prctl: PR_SET_NAME = %s", E(prctl(PR_SET_NAME, "tk-named", 0, 0, 0)));
    out(", PR_GET_NAME = %s", E(prctl(PR_GET_NAME, name, 0, 0, 0)));
    out(" '%s'\n", name);
    static char locked[8192];
    out("mlock: %s, munlock: %s\n", E(mlock(locked, sizeof locked)),
        E(munlock(locked, sizeof locked)));
    int ro = open("ro.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (ro < 0 || write(ro, "data", 4) != 4) _exit(98);
    close(ro);
    ro = open("ro.txt", O_RDONLY);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0);
    out("mmap: shared and writable, of a descriptor open read-only = %s\n",
        m == MAP_FAILED ? res(-errno) : "ok");
    close(ro);
    unlink("ro.txt");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "exit") == 0) /* exit (not exit_group) with a status */
        syscall(SYS_exit, atoi(argv[2]));
    files();
    descriptors();
    memory();
    process();
    more();
    out("exit_group: 0\n");
    return 0;
}
