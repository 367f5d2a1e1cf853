/* src/apps/checkpoint/restore.c - reading checkpoint images back: every
 * image of a chain is checked completely before any memory is written. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/checkpoint/image.h"
#include "core/internal.h"
#include "trapkit/checkpoint.h"

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) return -ENODATA;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Reads and checks the header; msg says what is wrong. */
static int read_header(int fd, struct tk_img_header *h, const char **msg)
{
    tk__crc32c_init();
    int err = pread_all(fd, h, sizeof *h, 0);
    if (err == -ENODATA) {
        *msg = "the file is shorter than an image header (truncated, or not an image)";
        return -EINVAL;
    }
    if (err) {
        *msg = "reading the header failed";
        return err;
    }
    if (memcmp(h->magic, TK_IMG_MAGIC, 8) != 0) {
        static const char zero[8];
        *msg = memcmp(h->magic, zero, 8) == 0
                   ? "the header is empty: the image was never completed (the snapshot was "
                     "interrupted)"
                   : "not a trapkit checkpoint image (bad magic)";
        return -EINVAL;
    }
    if (tk__crc32c(0, h, offsetof(struct tk_img_header, header_crc)) != h->header_crc) {
        *msg = "the header is damaged (checksum mismatch)";
        return -EINVAL;
    }
    if (h->version != TK_IMG_VERSION) {
        *msg = "the image has another format version than this trapkit reads";
        return -EINVAL;
    }
    if (h->nareas == 0 || h->nareas > TK_IMG_MAX_AREAS || h->page_size == 0 ||
        (h->page_size & (h->page_size - 1)) || h->nsaved > h->npages ||
        h->data_off < TK_IMG_HEADER || h->dir_off != h->data_off + h->nsaved * h->page_size ||
        h->dir_len != (h->npages + 63) / 64 * 8 + h->nsaved * 4) {
        *msg = "the header's layout fields are inconsistent";
        return -EINVAL;
    }
    return 0;
}

int tk_ckpt_info(int fd, tk_ckpt_image_info *info)
{
    struct tk_img_header h;
    const char *msg = NULL;
    int err = read_header(fd, &h, &msg);
    if (err) return tk__failf(err, "tk_ckpt_info: %s", msg);
    if (info) {
        memset(info, 0, sizeof *info);
        info->version = h.version;
        info->page_size = h.page_size;
        info->incremental = (h.flags & TK_IMG_INCREMENTAL) != 0;
        info->lineage = h.lineage;
        info->seq = h.seq;
        info->parent_seq = h.parent_seq;
        info->pages_total = h.npages;
        info->pages_saved = h.nsaved;
        info->nareas = h.nareas;
        for (uint32_t a = 0; a < h.nareas; a++) info->area_len[a] = h.area_len[a];
        info->created_ns = h.created_ns;
    }
    return 0;
}

struct image {
    struct tk_img_header h;
    unsigned char *dir; /* bitmap, then CRCs */
};

/* Checks one image completely against the areas.  */
static int verify(int fd, size_t k, const struct tk_ckpt_area *areas, size_t nareas,
                  struct image *img, unsigned char *page)
{
    const char *msg = NULL;
    int err = read_header(fd, &img->h, &msg);
    if (err) return tk__failf(err, "tk_ckpt_restore: image %zu: %s", k, msg);
    struct tk_img_header *h = &img->h;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    if (h->page_size != ps)
        return tk__failf(-EINVAL, "tk_ckpt_restore: image %zu has %u-byte pages, this machine %zu",
                         k, h->page_size, ps);
    if (h->nareas != nareas)
        return tk__failf(-EINVAL, "tk_ckpt_restore: image %zu holds %u areas, %zu given", k,
                         h->nareas, nareas);
    uint64_t npages = 0;
    for (size_t a = 0; a < nareas; a++) {
        if (h->area_len[a] != areas[a].len)
            return tk__failf(-EINVAL,
                             "tk_ckpt_restore: image %zu: area %zu is %lu bytes in the image, "
                             "%zu given",
                             k, a, (unsigned long)h->area_len[a], areas[a].len);
        npages += areas[a].len / ps;
    }
    if (npages != h->npages)
        return tk__failf(-EINVAL, "tk_ckpt_restore: image %zu: page count does not match", k);
    struct stat sb;
    if (fstat(fd, &sb) < 0) return tk__failf(-errno, "tk_ckpt_restore: image %zu: fstat", k);
    if ((uint64_t)sb.st_size < h->dir_off + h->dir_len)
        return tk__failf(-EINVAL, "tk_ckpt_restore: image %zu is truncated (%ld of %lu bytes)", k,
                         (long)sb.st_size, (unsigned long)(h->dir_off + h->dir_len));
    img->dir = mmap(NULL, h->dir_len ? h->dir_len : 1, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (img->dir == MAP_FAILED) {
        img->dir = NULL;
        return tk__fail(-ENOMEM, "tk_ckpt_restore: out of memory for a directory");
    }
    if ((err = pread_all(fd, img->dir, h->dir_len, h->dir_off)))
        return tk__failf(err, "tk_ckpt_restore: image %zu: reading the directory failed", k);
    if (tk__crc32c(0, img->dir, h->dir_len) != h->dir_crc)
        return tk__failf(-EINVAL, "tk_ckpt_restore: image %zu: the directory is damaged", k);
    const uint64_t *bits = (const uint64_t *)img->dir;
    const uint32_t *crcs = (const uint32_t *)(img->dir + (h->npages + 63) / 64 * 8);
    uint64_t count = 0;
    for (uint64_t w = 0; w < (h->npages + 63) / 64; w++)
        count += (uint64_t)__builtin_popcountll(bits[w]);
    if (count != h->nsaved || (!(h->flags & TK_IMG_INCREMENTAL) && count != h->npages))
        return tk__failf(-EINVAL,
                         "tk_ckpt_restore: image %zu: the directory does not match its "
                         "header",
                         k);
    uint64_t r = 0;
    for (uint64_t i = 0; i < h->npages; i++) {
        if (!(bits[i / 64] >> (i % 64) & 1)) continue;
        if ((err = pread_all(fd, page, ps, h->data_off + r * ps)))
            return tk__failf(err, "tk_ckpt_restore: image %zu: reading page %lu failed", k,
                             (unsigned long)i);
        if (tk__crc32c((uint32_t)i, page, ps) != crcs[r])
            return tk__failf(-EINVAL,
                             "tk_ckpt_restore: image %zu: page %lu is damaged "
                             "(checksum mismatch)",
                             k, (unsigned long)i);
        r++;
    }
    return 0;
}

static unsigned char *target(const struct tk_ckpt_area *areas, size_t nareas, uint64_t i, size_t ps)
{
    for (size_t a = 0; a < nareas; a++) {
        uint64_t n = areas[a].len / ps;
        if (i < n) return (unsigned char *)areas[a].addr + i * ps;
        i -= n;
    }
    return NULL;
}

int tk_ckpt_restore(const struct tk_ckpt_area *areas, size_t nareas, const int *fds, size_t nfds)
{
    if (!areas || nareas == 0 || nareas > TK_IMG_MAX_AREAS || !fds || nfds == 0)
        return tk__fail(-EINVAL, "tk_ckpt_restore: give 1 to 16 areas and at least one image");
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t a = 0; a < nareas; a++)
        if (!areas[a].addr || (uintptr_t)areas[a].addr % ps || areas[a].len % ps)
            return tk__failf(-EINVAL, "tk_ckpt_restore: area %zu is not page-aligned", a);
    struct image *imgs = calloc(nfds, sizeof *imgs);
    unsigned char *page = malloc(ps);
    int err = (!imgs || !page) ? tk__fail(-ENOMEM, "tk_ckpt_restore: out of memory") : 0;
    for (size_t k = 0; k < nfds && !err; k++) {
        err = verify(fds[k], k, areas, nareas, &imgs[k], page);
        if (err) break;
        const struct tk_img_header *h = &imgs[k].h;
        bool incr = (h->flags & TK_IMG_INCREMENTAL) != 0;
        if (k == 0 && incr)
            err = tk__fail(-EINVAL, "tk_ckpt_restore: image 0 is incremental; a chain starts "
                                    "with a full image");
        else if (k > 0 && !incr)
            err = tk__failf(-EINVAL,
                            "tk_ckpt_restore: image %zu is a full image inside a chain "
                            "(restore from it alone)",
                            k);
        else if (k > 0 && h->lineage != imgs[0].h.lineage)
            err = tk__failf(-EINVAL,
                            "tk_ckpt_restore: image %zu comes from another "
                            "checkpointer than image 0",
                            k);
        else if (k > 0 && h->parent_seq != imgs[k - 1].h.seq)
            err =
                tk__failf(-EINVAL,
                          "tk_ckpt_restore: image %zu follows snapshot %lu, but "
                          "image %zu is snapshot %lu (missing or out of order)",
                          k, (unsigned long)h->parent_seq, k - 1, (unsigned long)imgs[k - 1].h.seq);
    }
    /* Everything checked: write the memory. */
    for (size_t k = 0; k < nfds && !err; k++) {
        const struct tk_img_header *h = &imgs[k].h;
        const uint64_t *bits = (const uint64_t *)imgs[k].dir;
        uint64_t r = 0;
        for (uint64_t i = 0; i < h->npages && !err; i++) {
            if (!(bits[i / 64] >> (i % 64) & 1)) continue;
            int e = pread_all(fds[k], target(areas, nareas, i, ps), ps, h->data_off + r * ps);
            if (e)
                err = tk__failf(e,
                                "tk_ckpt_restore: image %zu changed while being restored: "
                                "memory is partly restored",
                                k);
            r++;
        }
    }
    for (size_t k = 0; imgs && k < nfds; k++)
        if (imgs[k].dir) munmap(imgs[k].dir, imgs[k].h.dir_len ? imgs[k].h.dir_len : 1);
    free(imgs);
    free(page);
    return err;
}
