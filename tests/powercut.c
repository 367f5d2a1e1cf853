/* tests/powercut.c - libtk_powercut.so, an LD_PRELOAD shim that makes a
 * power cut simulable: for every file under $TK_POWERCUT_DIR it keeps, in
 * FILE.pcj, what the writes since the file's last fsync/fdatasync replaced
 * (the old bytes of each pwrite, the old size of each ftruncate), and a
 * sync empties it.  tk_powercut() (tests/powercut.h), run on the files
 * after the process was killed, undoes a random choice of those writes
 * sector by sector, newest first, and gives the file its synced size or
 * its last one: what a disk may hold after losing power, where only what
 * was synced is sure.  Only pwrite, ftruncate, fsync and fdatasync are
 * watched (what trapkit's persistent heap writes with).  One lock orders
 * them: threads writing one file at once journal whole writes, and a sync
 * empties the journal of exactly the writes made before it. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powercut.h"

enum { MAXFD = 900 }; /* the program's descriptors watched; journals above */

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);

/* per descriptor: 0 not looked at, -1 not watched, else the journal's fd
 * + 1; and the file it was for (a descriptor closed without close(), by
 * fclose or the like, may come back as another file) */
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static int jfd[MAXFD];
static dev_t jdev[MAXFD];
static ino_t jino[MAXFD];

static void init(void)
{
    if (real_pwrite) return;
    real_pwrite = dlsym(RTLD_NEXT, "pwrite64");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_close = dlsym(RTLD_NEXT, "close");
}

static int64_t size_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) ? 0 : (int64_t)st.st_size;
}

static void journal_start(int j, int fd)
{
    real_ftruncate(j, 0);
    struct pc_hdr h = {PC_MAGIC, 0, size_of(fd)};
    real_pwrite(j, &h, sizeof h, 0);
}

/* The journal of fd, or -1 if fd is not a watched file. */
static int journal(int fd)
{
    init();
    if (fd < 0 || fd >= MAXFD) return -1;
    struct stat st;
    if (fstat(fd, &st)) return -1;
    if (jfd[fd] && jdev[fd] == st.st_dev && jino[fd] == st.st_ino) return jfd[fd] - 1;
    if (jfd[fd] > 0) real_close(jfd[fd] - 1);
    jfd[fd] = 0;
    jdev[fd] = st.st_dev;
    jino[fd] = st.st_ino;
    const char *dir = getenv("TK_POWERCUT_DIR");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 5);
    if (!dir || n <= 0 || !S_ISREG(st.st_mode)) {
        jfd[fd] = -1;
        return -1;
    }
    path[n] = 0;
    size_t dl = strlen(dir);
    if (strncmp(path, dir, dl) || path[dl] != '/' || (n > 4 && !strcmp(path + n - 4, ".pcj"))) {
        jfd[fd] = -1;
        return -1;
    }
    strcat(path, ".pcj");
    int j0 = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (j0 < 0) return -1;
    /* far above the program's descriptors, so that none of its closes and
     * reopens lands on it */
    int j = fcntl(j0, F_DUPFD_CLOEXEC, 900);
    real_close(j0);
    if (j < 0) return -1;
    if (size_of(j) < (int64_t)sizeof(struct pc_hdr)) journal_start(j, fd);
    jfd[fd] = j + 1;
    return j;
}

static void record(int j, uint32_t kind, int fd, int64_t off, int64_t len)
{
    /* the bytes [off, off + len) as they are, as far as the file has them */
    int64_t size = size_of(fd), have = off >= size ? 0 : (off + len > size ? size - off : len);
    struct pc_ent e = {kind, 0, off, len, have, size};
    int64_t end = size_of(j);
    real_pwrite(j, &e, sizeof e, end);
    end += sizeof e;
    char buf[65536];
    for (int64_t done = 0; done < have;) {
        size_t k = have - done > (int64_t)sizeof buf ? sizeof buf : (size_t)(have - done);
        ssize_t r = pread(fd, buf, k, off + done);
        if (r <= 0) break;
        real_pwrite(j, buf, (size_t)r, end);
        end += r;
        done += r;
    }
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    pthread_mutex_lock(&lk);
    int j = journal(fd);
    if (j >= 0) record(j, PC_WRITE, fd, off, (int64_t)n);
    ssize_t rc = real_pwrite(fd, buf, n, off);
    int e = errno;
    pthread_mutex_unlock(&lk);
    errno = e;
    return rc;
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite64(fd, buf, n, off);
}

int ftruncate64(int fd, off_t len)
{
    pthread_mutex_lock(&lk);
    int j = journal(fd);
    if (j >= 0) {
        int64_t size = size_of(fd);
        record(j, PC_TRUNCATE, fd, len, size > len ? size - len : 0);
    }
    int rc = real_ftruncate(fd, len), e = errno;
    pthread_mutex_unlock(&lk);
    errno = e;
    return rc;
}
int ftruncate(int fd, off_t len)
{
    return ftruncate64(fd, len);
}

static int synced(int fd, int data)
{
    init();
    pthread_mutex_lock(&lk);
    int rc = data ? real_fdatasync(fd) : real_fsync(fd), e = errno;
    if (rc == 0) {
        int j = journal(fd);
        if (j >= 0) journal_start(j, fd);
    }
    pthread_mutex_unlock(&lk);
    errno = e;
    return rc;
}

int fsync(int fd)
{
    return synced(fd, 0);
}

int fdatasync(int fd)
{
    return synced(fd, 1);
}

int close(int fd)
{
    init();
    pthread_mutex_lock(&lk);
    if (fd >= 0 && fd < MAXFD) {
        if (jfd[fd] > 0) real_close(jfd[fd] - 1);
        jfd[fd] = 0;
    }
    int rc = real_close(fd), e = errno;
    pthread_mutex_unlock(&lk);
    errno = e;
    return rc;
}
