/* MAP_SHARED file mappings: what the program reads through one is the
 * file as it is now (written since through another descriptor, grown
 * since), what it writes through one is the file's, msync and munmap
 * included, and mremap keeps a mapping the file's.  The output must equal
 * qemu-riscv64's (run in an empty directory of its own) and tksim's (with
 * that directory as --fs-root).  Every line is "what: what was checked =
 * result".
 * Build: riscv64-linux-gnu-gcc -O2 -static -o mapshared mapshared.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest.h"

/* the output: write(2) on descriptor 1, one line a check */

/* "ok", or the errno's name */
static const char *res(int failed)
{
    return !failed ? "ok" : errname(errno);
}

static void put(int fd, const char *s, off_t at)
{
    if (pwrite(fd, s, strlen(s), at) != (ssize_t)strlen(s)) _exit(98);
}

int main(void)
{
    const long P = 4096;
    int rw = open("s.txt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    put(rw, "first version", 0);
    int ro = open("s.txt", O_RDONLY);

    /* read-only, of a descriptor open read-only: two pages, the file one
     * page short of the second */
    char *r = mmap(NULL, 2 * P, PROT_READ, MAP_SHARED, ro, 0);
    out("mmap: shared, read-only = %s, '%.13s'\n", res(r == MAP_FAILED), r);
    put(rw, "second", 0);
    out("pwrite on another descriptor: the mapping reads '%.13s'\n", r);
    if (lseek(rw, 0, SEEK_SET) != 0 || write(rw, "third!", 6) != 6) _exit(97);
    out("write on another descriptor: the mapping reads '%.13s'\n", r);
    out("ftruncate: grown to 2 pages = %s", res(ftruncate(rw, 2 * P) != 0));
    put(rw, "page two", P);
    out(", the second page reads '%.8s'\n", r + P);
    out("mprotect: writable, of a descriptor open read-only = %s, read-only = %s\n",
        res(mprotect(r, P, PROT_READ | PROT_WRITE) != 0), res(mprotect(r, P, PROT_READ) != 0));

    /* writable, of a descriptor open for reading and writing */
    char *w = mmap(NULL, 2 * P, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
    out("mmap: shared, writable = %s, '%.13s'\n", res(w == MAP_FAILED), w);
    memcpy(w, "via the map", 11);
    char buf[16] = {0};
    if (pread(ro, buf, 11, 0) != 11) _exit(96);
    out("a store through it: pread reads '%s', the other mapping '%.11s'\n", buf, r);
    memcpy(w + P, "PAGE", 4);
    out("msync: MS_SYNC = %s, MS_ASYNC = %s, MS_INVALIDATE = %s\n", res(msync(w, 2 * P, MS_SYNC)),
        res(msync(w, P, MS_ASYNC)), res(msync(w + P, P, MS_INVALIDATE)));
    out("msync: misaligned = %s, MS_SYNC|MS_ASYNC = %s, bad flags = %s\n",
        res(msync(w + 1, P, MS_SYNC)), res(msync(w, P, MS_SYNC | MS_ASYNC)),
        res(msync(w, P, 0x100)));
    memcpy(w + 20, "after", 5);
    out("munmap: writable = %s", res(munmap(w, 2 * P)));
    memset(buf, 0, sizeof buf);
    if (pread(ro, buf, 5, 20) != 5) _exit(95);
    out(", the file has what was stored last: '%s'\n", buf);
    out("msync: unmapped = %s\n", res(msync(w, P, MS_SYNC)));

    /* mremap: grown (it may move), the new pages the file's too */
    if (ftruncate(rw, 3 * P) != 0) _exit(94);
    put(rw, "page three", 2 * P);
    char *g = mremap(r, 2 * P, 3 * P, MREMAP_MAYMOVE);
    out("mremap: grown to 3 pages = %s, page 3 reads '%.10s'", res(g == MAP_FAILED), g + 2 * P);
    put(rw, "PAGE THREE", 2 * P);
    out(", then '%.10s'\n", g + 2 * P);

    /* the middle page unmapped: the others still the file's */
    out("munmap: the middle page = %s", res(munmap(g + P, P)));
    put(rw, "ONE", 0);
    put(rw, "THR", 2 * P);
    out(", the first reads '%.3s', the third '%.3s'\n", g, g + 2 * P);
    munmap(g, P);
    munmap(g + 2 * P, P);

    /* a shared mapping of a file open write-only, and of one open
     * read-only made writable */
    int wo = open("s.txt", O_WRONLY);
    out("mmap: of a descriptor open write-only = %s\n",
        res(mmap(NULL, P, PROT_READ, MAP_SHARED, wo, 0) == MAP_FAILED));
    close(wo);
    close(ro);
    close(rw);
    unlink("s.txt");
    return 0;
}
