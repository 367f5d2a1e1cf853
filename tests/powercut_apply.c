/* tests/powercut_apply.c - tk_powercut() (tests/powercut.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powercut.h"

static unsigned next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

long tk_powercut(const char *path, unsigned seed)
{
    char jp[4200];
    snprintf(jp, sizeof jp, "%s.pcj", path);
    int j = open(jp, O_RDONLY);
    if (j < 0) return -1;
    struct stat st;
    fstat(j, &st);
    char *b = malloc((size_t)st.st_size + 1);
    ssize_t got = read(j, b, (size_t)st.st_size);
    close(j);
    struct pc_hdr h;
    if (got < (ssize_t)sizeof h) {
        free(b);
        unlink(jp);
        return 0;
    }
    memcpy(&h, b, sizeof h);
    /* the entries, to be undone newest first */
    size_t cap = 64, n = 0;
    size_t *at = malloc(cap * sizeof *at);
    for (size_t p = sizeof h; p + sizeof(struct pc_ent) <= (size_t)got;) {
        struct pc_ent e;
        memcpy(&e, b + p, sizeof e);
        if (p + sizeof e + (size_t)e.have > (size_t)got) break; /* (killed while recording) */
        if (n == cap) at = realloc(at, (cap *= 2) * sizeof *at);
        at[n++] = p;
        p += sizeof e + (size_t)e.have;
    }
    int fd = getenv("TK_POWERCUT_NOOP") ? -1 : open(path, O_RDWR);
    long undone = 0;
    for (size_t i = n; fd >= 0 && i-- > 0;) {
        struct pc_ent e;
        memcpy(&e, b + at[i], sizeof e);
        const char *old = b + at[i] + sizeof e;
        int64_t off = e.kind == PC_WRITE
                          ? e.off
                          : e.off; /* (a truncation's old bytes start at the new size) */
        for (int64_t s = 0; s < e.have; s += PC_SECTOR) {
            if (next(&seed) & 1) continue; /* this sector reached the disk */
            int64_t k = e.have - s < PC_SECTOR ? e.have - s : PC_SECTOR;
            if (pwrite(fd, old + s, (size_t)k, off + s) == k) undone++;
        }
    }
    if (fd >= 0) {
        struct stat fs;
        fstat(fd, &fs);
        if (getenv("TK_POWERCUT_DEBUG"))
            fprintf(stderr, "powercut %s: %ld entries, size %lld, synced %lld\n", path, (long)n,
                    (long long)fs.st_size, (long long)h.synced_size);
        if (fs.st_size != h.synced_size && (next(&seed) & 1)) {
            if (ftruncate(fd, h.synced_size) == 0) undone++;
        }
        close(fd);
    }
    free(at);
    free(b);
    unlink(jp);
    return undone;
}
