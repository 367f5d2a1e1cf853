/* src/apps/checkpoint/image.c - reading checkpoint images (image.h): the
 * header and directory checked once, then any page on demand, checked
 * against its CRC.  Shared by the eager and lazy restores and compaction. */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/checkpoint/image.h"
#include "core/internal.h"

/* [signal-safe] */
int tk__pread_all(int fd, void *buf, size_t n, uint64_t off)
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

/* [signal-safe] */
int tk__pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const unsigned char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (w == 0) return -EIO;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* (no padding: the CRC covers every byte before it, each set) */
_Static_assert(sizeof(struct tk_img_header) == offsetof(struct tk_img_header, header_crc) + 4,
               "struct tk_img_header has padding");

int tk__img_write_header(int fd, struct tk_img_header *h)
{
    memcpy(h->magic, TK_IMG_MAGIC, 8);
    h->version = TK_IMG_VERSION;
    h->data_len = h->dir_off - h->data_off;
    h->header_crc = tk__crc32c(0, h, offsetof(struct tk_img_header, header_crc));
    /* an uncompressed image whose last pages were zero ends in a hole: the
     * directory's write made the file long enough */
    if (fsync(fd) < 0) return -errno;
    int err = tk__pwrite_all(fd, h, sizeof *h, 0);
    if (!err && fsync(fd) < 0) err = -errno;
    return err;
}

void tk__imgw_flush(struct tk_imgw *w)
{
    if (w->used && !w->err) w->err = tk__pwrite_all(w->fd, w->buf, w->used, w->off);
    w->off += w->used;
    w->used = 0;
}

void tk__imgw_put(struct tk_imgw *w, const void *p, size_t n, bool crc)
{
    if (w->err) return;
    if (crc) w->crc = tk__crc32c(w->crc, p, n);
    const unsigned char *s = p;
    while (n) {
        size_t k = w->cap - w->used < n ? w->cap - w->used : n;
        memcpy(w->buf + w->used, s, k);
        w->used += k;
        s += k;
        n -= k;
        if (w->used == w->cap) tk__imgw_flush(w);
    }
}

/* [signal-safe] */
uint64_t tk__bitmap_next(const uint64_t *bits, uint64_t n, uint64_t i)
{
    while (i < n) {
        uint64_t w = bits[i / 64] >> (i % 64);
        if (w) {
            i += (uint64_t)__builtin_ctzll(w);
            return i < n ? i : n;
        }
        i = (i / 64 + 1) * 64;
    }
    return n;
}

void tk__img_close(struct tk_img *img)
{
    if (img->dir) munmap(img->dir, img->dir_len ? img->dir_len : 1);
    size_t words = (size_t)((img->npages + 63) / 64);
    if (img->rank) munmap(img->rank, words ? words * 8 : 1);
    img->dir = NULL;
    img->rank = NULL;
}

int tk__img_open(int fd, struct tk_img *img, bool dir_too, const char **msg)
{
    memset(img, 0, sizeof *img);
    img->fd = fd;
    tk__crc32c_init();
    struct tk_img_header h;
    int err = tk__pread_all(fd, &h, sizeof h, 0);
    if (err == -ENODATA) {
        *msg = "the file is shorter than an image header (truncated, or not an image)";
        return -EINVAL;
    }
    if (err) {
        *msg = "reading the header failed";
        return err;
    }
    if (memcmp(h.magic, TK_IMG_MAGIC, 8) != 0) {
        static const char zero[8];
        *msg = memcmp(h.magic, zero, 8) == 0
                   ? "the header is empty: the image was never completed (the snapshot was "
                     "interrupted)"
                   : "not a trapkit checkpoint image (bad magic)";
        return -EINVAL;
    }
    const struct tk_img_header_v1 *h1 = (const struct tk_img_header_v1 *)&h;
    if (h.version == 1) {
        if (tk__crc32c(0, h1, offsetof(struct tk_img_header_v1, header_crc)) != h1->header_crc) {
            *msg = "the header is damaged (checksum mismatch)";
            return -EINVAL;
        }
    } else if (h.version == TK_IMG_VERSION) {
        if (tk__crc32c(0, &h, offsetof(struct tk_img_header, header_crc)) != h.header_crc) {
            *msg = "the header is damaged (checksum mismatch)";
            return -EINVAL;
        }
    } else {
        if (tk__crc32c(0, h1, offsetof(struct tk_img_header_v1, header_crc)) != h1->header_crc &&
            tk__crc32c(0, &h, offsetof(struct tk_img_header, header_crc)) != h.header_crc) {
            *msg = "the header is damaged (checksum mismatch)";
            return -EINVAL;
        }
        *msg = "the image has another format version than this trapkit reads (1 and 2)";
        return -EINVAL;
    }
    img->version = h.version;
    img->flags = h.flags;
    img->ps = h.page_size;
    img->npages = h.npages;
    img->nsaved = h.nsaved;
    img->lineage = h.lineage;
    img->seq = h.seq;
    img->parent_seq = h.parent_seq;
    img->created_ns = h.created_ns;
    img->nareas = h.nareas;
    img->data_off = h.data_off;
    img->dir_off = h.dir_off;
    img->dir_len = h.dir_len;
    for (uint32_t a = 0; a < h.nareas && a < TK_IMG_MAX_AREAS; a++)
        img->area_len[a] = h.area_len[a];
    uint64_t words = (h.npages + 63) / 64;
    bool compressed = h.version >= 2 && (h.flags & TK_IMG_COMPRESSED);
    if (h.version >= 2) {
        img->nzero = h.nzero;
    }
    img->ndata = h.nsaved - (img->nzero <= h.nsaved ? img->nzero : 0);
    uint64_t entry = compressed ? sizeof(struct tk_img_entry) : 4;
    uint64_t bitmaps = (h.version >= 2 ? 2 : 1) * words * 8;
    bool sane =
        h.nareas >= 1 && h.nareas <= TK_IMG_MAX_AREAS && h.page_size >= 512 &&
        !(h.page_size & (h.page_size - 1)) && h.npages < (1ull << 40) && h.nsaved <= h.npages &&
        img->nzero <= h.nsaved && h.data_off >= TK_IMG_HEADER && h.dir_off >= h.data_off &&
        h.dir_len == bitmaps + img->ndata * entry &&
        (h.flags & ~(uint32_t)(TK_IMG_INCREMENTAL |
                               (h.version >= 2 ? TK_IMG_COMPRESSED | TK_IMG_LOCATED : 0))) == 0 &&
        (!(h.flags & TK_IMG_LOCATED) || (h.flags & TK_IMG_COMPRESSED)) &&
        (compressed || h.dir_off == h.data_off + img->ndata * h.page_size) &&
        (h.version < 2 || h.data_len == h.dir_off - h.data_off);
    if (!sane) {
        *msg = "the header's layout fields are inconsistent";
        return -EINVAL;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        *msg = "fstat of the image failed";
        return -errno;
    }
    img->file_size = (uint64_t)sb.st_size;
    if (!dir_too) return 0;
    if (img->file_size < h.dir_off + h.dir_len) {
        *msg = "the image is truncated";
        return -EINVAL;
    }
    img->dir = mmap(NULL, h.dir_len ? h.dir_len : 1, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    img->rank =
        mmap(NULL, words * 8 ?: 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (img->dir == MAP_FAILED || img->rank == MAP_FAILED) {
        if (img->dir == MAP_FAILED) img->dir = NULL;
        if (img->rank == MAP_FAILED) img->rank = NULL;
        tk__img_close(img);
        *msg = "out of memory for the directory";
        return -ENOMEM;
    }
    if ((err = tk__pread_all(fd, img->dir, h.dir_len, h.dir_off))) {
        tk__img_close(img);
        *msg = "reading the directory failed";
        return err == -ENODATA ? -EINVAL : err;
    }
    if (tk__crc32c(0, img->dir, h.dir_len) != (h.version == 1 ? h1->dir_crc : h.dir_crc)) {
        tk__img_close(img);
        *msg = "the directory is damaged (checksum mismatch)";
        return -EINVAL;
    }
    img->held = (const uint64_t *)img->dir;
    img->zero = h.version >= 2 ? img->held + words : NULL;
    img->entries = img->dir + bitmaps;
    /* the bitmaps must agree with the header; the data pages' ranks */
    uint64_t held = 0, zero = 0, data = 0;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t valid = (w + 1) * 64 <= h.npages ? ~0ull : (1ull << (h.npages % 64)) - 1;
        uint64_t z = img->zero ? img->zero[w] : 0;
        if ((img->held[w] & ~valid) || (z & ~img->held[w])) held = UINT64_MAX;
        img->rank[w] = data;
        data += (uint64_t)__builtin_popcountll(img->held[w] & ~z);
        if (held != UINT64_MAX) held += (uint64_t)__builtin_popcountll(img->held[w]);
        zero += (uint64_t)__builtin_popcountll(z);
    }
    bool full = !(h.flags & TK_IMG_INCREMENTAL);
    if (held != h.nsaved || zero != img->nzero || data != img->ndata ||
        (full && h.version == 1 && held != h.npages)) {
        tk__img_close(img);
        *msg = "the directory does not match its header";
        return -EINVAL;
    }
    if (compressed) {
        for (uint64_t r = 0; r < img->ndata; r++) {
            const struct tk_img_entry *e = (const struct tk_img_entry *)img->entries + r;
            if (e->len > h.page_size ||
                (e->len && (e->off < h.data_off || e->off + e->len > h.dir_off))) {
                tk__img_close(img);
                *msg = "the directory places a page outside the image's data";
                return -EINVAL;
            }
        }
    }
    return 0;
}

int tk__img_check_layout(const struct tk_img *img, const struct tk_ckpt_area *areas, size_t nareas,
                         char *buf, size_t buflen)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    if (img->ps != ps) {
        snprintf(buf, buflen, "it has %zu-byte pages, this machine %zu", img->ps, ps);
        return -EINVAL;
    }
    if (img->nareas != nareas) {
        snprintf(buf, buflen, "it holds %zu areas, %zu given", img->nareas, nareas);
        return -EINVAL;
    }
    uint64_t npages = 0;
    for (size_t a = 0; a < nareas; a++) {
        if (img->area_len[a] != areas[a].len) {
            snprintf(buf, buflen, "area %zu is %lu bytes in the image, %zu given", a,
                     (unsigned long)img->area_len[a], areas[a].len);
            return -EINVAL;
        }
        npages += areas[a].len / ps;
    }
    if (npages != img->npages) {
        snprintf(buf, buflen, "its page count does not match the areas");
        return -EINVAL;
    }
    return 0;
}

/* [signal-safe] */
int tk__img_page(const struct tk_img *img, uint64_t idx, uint64_t *rank)
{
    uint64_t w = idx / 64, bit = 1ull << (idx % 64);
    if (!(img->held[w] & bit)) return TK_IMG_ABSENT;
    uint64_t z = img->zero ? img->zero[w] : 0;
    if (z & bit) return TK_IMG_ZERO;
    *rank = img->rank[w] + (uint64_t)__builtin_popcountll(img->held[w] & ~z & (bit - 1));
    return TK_IMG_DATA;
}

/* [signal-safe] */
void tk__img_where(const struct tk_img *img, uint64_t rank, uint64_t *off, uint32_t *len,
                   uint32_t *crc)
{
    if (img->version >= 2 && (img->flags & TK_IMG_COMPRESSED)) {
        const struct tk_img_entry *e = (const struct tk_img_entry *)img->entries + rank;
        *off = e->off;
        *len = e->len;
        *crc = e->crc;
        return;
    }
    *off = img->data_off + rank * img->ps;
    *len = (uint32_t)img->ps;
    memcpy(crc, img->entries + rank * 4, 4);
}

/* [signal-safe] */
int tk__img_read(const struct tk_img *img, uint64_t idx, uint64_t rank, void *out, void *scratch)
{
    uint64_t off;
    uint32_t len, crc;
    tk__img_where(img, rank, &off, &len, &crc);
    int err = 0;
    if (len == 0) {
        memset(out, 0, img->ps);
    } else if (len == img->ps) {
        err = tk__pread_all(img->fd, out, img->ps, off);
    } else {
        err = tk__pread_all(img->fd, scratch, len, off);
        if (!err && LZ4_decompress_safe(scratch, out, (int)len, (int)img->ps) != (int)img->ps)
            return -EINVAL;
    }
    if (err == -ENODATA) return -EINVAL; /* the file ends early */
    if (err) return err;
    return tk__crc32c((uint32_t)idx, out, img->ps) == crc ? 0 : -EINVAL;
}

int tk__img_check_output(int fd, const char *who)
{
    struct stat sb;
    int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (fl & O_ACCMODE) == O_RDONLY)
        return tk__failf(-EINVAL, "%s: the image must go to a regular file open for writing", who);
    if (fl & O_APPEND)
        return tk__failf(-EINVAL,
                         "%s: the file is open with O_APPEND: an image is written at "
                         "fixed offsets; open it without O_APPEND",
                         who);
    return 0;
}
