/* src/apps/checkpoint/restore.c - reading checkpoint images back: every
 * image of a chain is checked completely before any memory is written; and
 * compaction, a chain written again as one full image. */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/checkpoint/chain.h"
#include "core/region_impl.h" /* tk__table_find */
#include "apps/checkpoint/image.h"
#include "core/internal.h"
#include "trapkit/checkpoint.h"

int tk_ckpt_info(int fd, tk_ckpt_image_info *info)
{
    struct tk_img img;
    const char *msg = NULL;
    int err = tk__img_open(fd, &img, false, &msg);
    if (err) return tk__failf(err, "tk_ckpt_info: %s", msg);
    if (info) {
        memset(info, 0, sizeof *info);
        info->version = img.version;
        info->page_size = (uint32_t)img.ps;
        info->incremental = (img.flags & TK_IMG_INCREMENTAL) != 0;
        info->compressed = (img.flags & (TK_IMG_COMPRESSED | TK_IMG_LOCATED)) == TK_IMG_COMPRESSED;
        info->lineage = img.lineage;
        info->seq = img.seq;
        info->parent_seq = img.parent_seq;
        info->pages_total = img.npages;
        info->pages_saved = img.nsaved;
        info->pages_zero = img.nzero;
        info->nareas = img.nareas;
        for (size_t a = 0; a < img.nareas; a++) info->area_len[a] = img.area_len[a];
        info->created_ns = img.created_ns;
        info->file_bytes = img.file_size;
        info->data_bytes = img.dir_off - img.data_off;
        /* a sparse file (precopy's pages at their indices): what it holds */
        struct stat sb;
        if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 < info->file_bytes)
            info->file_bytes = (uint64_t)sb.st_blocks * 512;
        if (info->data_bytes > info->file_bytes) info->data_bytes = info->file_bytes;
    }
    tk__img_close(&img);
    return 0;
}

/* Opens and checks the chain's images (headers, directories, lineage and
 * sequence; incremental images the full one already covers are skipped).
 * On error every image is closed and tk_last_error() says which. */
int tk__chain_open(const char *who, const struct tk_ckpt_area *areas, size_t nareas, const int *fds,
                   size_t nfds, struct tk_chain *ch)
{
    memset(ch, 0, sizeof *ch);
    if (!areas || nareas == 0 || nareas > TK_IMG_MAX_AREAS || !fds || nfds == 0)
        return tk__failf(-EINVAL, "%s: give 1 to 16 areas and at least one image", who);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t a = 0; a < nareas; a++)
        if (!areas[a].addr || (uintptr_t)areas[a].addr % ps || areas[a].len % ps)
            return tk__failf(-EINVAL, "%s: area %zu is not page-aligned", who, a);
    ch->imgs = calloc(nfds, sizeof *ch->imgs);
    ch->idx = calloc(nfds, sizeof *ch->idx);
    if (!ch->imgs || !ch->idx) {
        tk__chain_close(ch);
        return tk__failf(-ENOMEM, "%s: out of memory", who);
    }
    int err = 0;
    for (size_t k = 0; k < nfds && !err; k++) {
        struct tk_img *img = &ch->imgs[ch->n];
        const char *msg = NULL;
        char detail[160];
        err = tk__img_open(fds[k], img, true, &msg);
        if (err) {
            err = tk__failf(err, "%s: image %zu: %s", who, k, msg);
            break;
        }
        ch->n++;
        if ((err = tk__img_check_layout(img, areas, nareas, detail, sizeof detail))) {
            err = tk__failf(err, "%s: image %zu: %s", who, k, detail);
            break;
        }
        bool incr = (img->flags & TK_IMG_INCREMENTAL) != 0;
        const struct tk_img *base = &ch->imgs[0], *prev = ch->n > 1 ? &ch->imgs[ch->n - 2] : NULL;
        if (k == 0 && incr) {
            err = tk__failf(-EINVAL, "%s: image 0 is incremental; a chain starts with a full image",
                            who);
        } else if (k > 0 && !incr) {
            err = tk__failf(-EINVAL,
                            "%s: image %zu is a full image inside a chain (restore from it "
                            "alone)",
                            who, k);
        } else if (k > 0 && img->lineage != base->lineage) {
            err = tk__failf(-EINVAL, "%s: image %zu comes from another checkpointer than image 0",
                            who, k);
        } else if (k > 0 && ch->n == 2 && img->seq <= base->seq) {
            /* already in the full image (a compacted chain, or one being
             * compacted): skipped */
            tk__img_close(img);
            ch->n--;
            ch->skipped++;
        } else if (k > 0 && img->parent_seq != prev->seq) {
            err = tk__failf(-EINVAL,
                            "%s: image %zu follows snapshot %lu, but the image before it is "
                            "snapshot %lu (missing or out of order)",
                            who, k, (unsigned long)img->parent_seq, (unsigned long)prev->seq);
        } else {
            ch->idx[ch->n - 1] = k;
        }
    }
    if (err) tk__chain_close(ch);
    return err;
}

void tk__chain_close(struct tk_chain *ch)
{
    for (size_t k = 0; ch->imgs && k < ch->n; k++) tk__img_close(&ch->imgs[k]);
    free(ch->imgs);
    free(ch->idx);
    memset(ch, 0, sizeof *ch);
}

/* The newest image of the chain that holds page i, or -1 (then the page
 * is zero: never populated). */
int tk__chain_find(const struct tk_chain *ch, uint64_t i)
{
    for (size_t k = ch->n; k-- > 0;)
        if (ch->imgs[k].held[i / 64] >> (i % 64) & 1) return (int)k;
    return -1;
}

uint64_t tk__chain_data_pages(const struct tk_chain *ch, uint64_t npages)
{
    uint64_t data = 0;
    for (uint64_t w = 0; w < (npages + 63) / 64; w++) {
        /* each page from the newest image that holds it */
        uint64_t left = (w + 1) * 64 <= npages ? ~0ull : (1ull << (npages % 64)) - 1, d = 0;
        for (size_t k = ch->n; k-- > 0 && left;) {
            const struct tk_img *img = &ch->imgs[k];
            uint64_t h = img->held[w] & left;
            d |= h & ~(img->zero ? img->zero[w] : 0);
            left &= ~h;
        }
        data += (uint64_t)__builtin_popcountll(d);
    }
    return data;
}

unsigned char *tk__area_page(const struct tk_ckpt_area *areas, size_t nareas, uint64_t i, size_t ps)
{
    for (size_t a = 0; a < nareas; a++) {
        uint64_t n = areas[a].len / ps;
        if (i < n) return (unsigned char *)areas[a].addr + i * ps;
        i -= n;
    }
    return NULL;
}

static bool is_zero(const unsigned char *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i]) return false;
    return true;
}

/* Whether p lies in a trapkit region (whose faults trapkit handles). */
static bool in_region(const void *p)
{
    tk__table_enter();
    bool in = tk__table_find((uintptr_t)p) != NULL;
    tk__table_leave();
    return in;
}

int tk_ckpt_restore(const struct tk_ckpt_area *areas, size_t nareas, const int *fds, size_t nfds)
{
    struct tk_chain ch;
    int err = tk__chain_open("tk_ckpt_restore", areas, nareas, fds, nfds, &ch);
    if (err) return err;
    size_t ps = ch.imgs[0].ps;
    unsigned char *page = malloc(ps), *scratch = malloc(ps);
    if (!page || !scratch) err = tk__fail(-ENOMEM, "tk_ckpt_restore: out of memory");
    /* every page of every image checked first */
    for (size_t k = 0; k < ch.n && !err; k++) {
        const struct tk_img *img = &ch.imgs[k];
        uint64_t r = 0;
        for (uint64_t i = tk__bitmap_next(img->held, img->npages, 0); i < img->npages && !err;
             i = tk__bitmap_next(img->held, img->npages, i + 1)) {
            uint64_t rank;
            if (tk__img_page(img, i, &rank) != TK_IMG_DATA) continue;
            int e = tk__img_read(img, i, rank, page, scratch);
            if (e == -EINVAL)
                err = tk__failf(e,
                                "tk_ckpt_restore: image %zu: page %lu is damaged (checksum "
                                "mismatch or bad compression)",
                                ch.idx[k], (unsigned long)i);
            else if (e)
                err = tk__failf(e, "tk_ckpt_restore: image %zu: reading page %lu failed", ch.idx[k],
                                (unsigned long)i);
            r++;
        }
    }
    /* Everything checked: write the memory, each page from the newest image
     * that holds it, zero where none does. */
    uint64_t npages = err ? 0 : ch.imgs[0].npages;
    for (uint64_t i = 0; i < npages && !err; i++) {
        unsigned char *dst = tk__area_page(areas, nareas, i, ps);
        int k = tk__chain_find(&ch, i);
        uint64_t rank = 0;
        int kind = k < 0 ? TK_IMG_ZERO : tk__img_page(&ch.imgs[k], i, &rank);
        if (kind != TK_IMG_DATA) {
            /* zero: leave a page that is zero (or never populated) alone */
            if (!is_zero(dst, ps)) memset(dst, 0, ps);
            continue;
        }
        int e = tk__img_read(&ch.imgs[k], i, rank, dst, scratch);
        if (e == -EFAULT && in_region(dst)) {
            /* a page the kernel may not write: write-protected by a
             * checkpointer of these areas (TK_CKPT_TRACK).  Read aside and
             * stored by this thread, whose write fault the checkpointer
             * handles (the page counts as written).  A failed read has
             * written nothing. */
            e = tk__img_read(&ch.imgs[k], i, rank, page, scratch);
            if (!e) memcpy(dst, page, ps);
        }
        if (e == -EFAULT)
            err = tk__failf(e,
                            "tk_ckpt_restore: page %lu of the areas cannot be written (not "
                            "writable memory): memory is partly restored",
                            (unsigned long)i);
        else if (e)
            err = tk__failf(e,
                            "tk_ckpt_restore: image %zu changed while being restored: memory "
                            "is partly restored",
                            ch.idx[k]);
    }
    free(page);
    free(scratch);
    tk__chain_close(&ch);
    return err;
}

/* ---- compaction ------------------------------------------------------------ */

static void *map_zero(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int tk_ckpt_compact(const int *fds, size_t nfds, int out_fd, unsigned flags)
{
    static const char who[] = "tk_ckpt_compact";
    if (!fds || nfds == 0 || out_fd < 0)
        return tk__fail(-EINVAL, "tk_ckpt_compact: give at least one image and an output file");
    if (flags & ~(unsigned)TK_CKPT_COMPRESS)
        return tk__fail(-EINVAL, "tk_ckpt_compact: unknown flags");
    for (size_t k = 0; k < nfds; k++)
        if (fds[k] == out_fd)
            return tk__failf(-EINVAL, "tk_ckpt_compact: the output is image %zu of the chain", k);
    int bad = tk__img_check_output(out_fd, who);
    if (bad) return bad;
    /* the layout is the first image's; the chain is checked against it */
    struct tk_img first;
    const char *msg = NULL;
    int err = tk__img_open(fds[0], &first, false, &msg);
    if (err) return tk__failf(err, "%s: image 0: %s", who, msg);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    struct tk_ckpt_area areas[TK_IMG_MAX_AREAS];
    size_t nareas = first.nareas;
    for (size_t a = 0; a < nareas; a++) {
        areas[a].addr = (void *)ps; /* only the layout is looked at */
        areas[a].len = (size_t)first.area_len[a];
    }
    tk__img_close(&first);
    struct tk_chain ch;
    if ((err = tk__chain_open(who, areas, nareas, fds, nfds, &ch))) return err;
    const struct tk_img *newest = &ch.imgs[ch.n - 1];
    uint64_t npages = newest->npages, words = (npages + 63) / 64;
    bool compress = (flags & TK_CKPT_COMPRESS) != 0;
    size_t esize = compress ? sizeof(struct tk_img_entry) : 4;
    uint64_t *held = map_zero(words * 8), *zero = map_zero(words * 8);
    unsigned char *entries = map_zero(npages * esize);
    unsigned char *page = malloc(ps), *scratch = malloc(ps), *lz = malloc(LZ4_COMPRESSBOUND(ps));
    struct tk_imgw o = {.fd = out_fd, .cap = 1u << 20, .off = TK_IMG_HEADER};
    o.buf = malloc(o.cap);
    if (!held || !zero || !entries || !page || !scratch || !lz || !o.buf)
        err = tk__failf(-ENOMEM, "%s: out of memory", who);
    if (!err && ftruncate(out_fd, 0) < 0)
        err = tk__failf(-errno, "%s: truncating the output failed: %s", who, strerror(errno));
    uint64_t ndata = 0, nzero = 0;
    for (uint64_t i = 0; i < npages && !err && !o.err; i++) {
        held[i / 64] |= 1ull << (i % 64);
        int k = tk__chain_find(&ch, i);
        uint64_t rank = 0;
        int kind = k < 0 ? TK_IMG_ZERO : tk__img_page(&ch.imgs[k], i, &rank);
        if (kind == TK_IMG_DATA) {
            int e = tk__img_read(&ch.imgs[k], i, rank, page, scratch);
            if (e == -EINVAL) {
                err = tk__failf(e,
                                "%s: image %zu: page %lu is damaged (checksum mismatch or bad "
                                "compression)",
                                who, ch.idx[k], (unsigned long)i);
                break;
            }
            if (e) {
                err = tk__failf(e, "%s: image %zu: reading page %lu failed: %s", who, ch.idx[k],
                                (unsigned long)i, strerror(-e));
                break;
            }
            if (is_zero(page, ps)) kind = TK_IMG_ZERO; /* held as zero: no data */
        }
        if (kind != TK_IMG_DATA) {
            zero[i / 64] |= 1ull << (i % 64);
            nzero++;
            continue;
        }
        uint32_t crc = tk__crc32c((uint32_t)i, page, ps);
        if (compress) {
            int n = LZ4_compress_default((const char *)page, (char *)lz, (int)ps,
                                         LZ4_COMPRESSBOUND(ps));
            struct tk_img_entry en = {o.off + o.used, (uint32_t)ps, crc};
            if (n > 0 && (size_t)n < ps) {
                en.len = (uint32_t)n;
                tk__imgw_put(&o, lz, (size_t)n, false);
            } else {
                tk__imgw_put(&o, page, ps, false); /* LZ4 does not make it smaller */
            }
            memcpy(entries + ndata * esize, &en, sizeof en);
        } else {
            tk__imgw_put(&o, page, ps, false);
            memcpy(entries + ndata * esize, &crc, 4);
        }
        ndata++;
    }
    tk__imgw_flush(&o);
    if (!err && o.err)
        err = tk__failf(o.err, "%s: writing the image failed: %s", who, strerror(-o.err));
    uint64_t dir_off = o.off;
    if (!err) {
        o.crc = 0;
        tk__imgw_put(&o, held, words * 8, true);
        tk__imgw_put(&o, zero, words * 8, true);
        tk__imgw_put(&o, entries, ndata * esize, true);
        tk__imgw_flush(&o);
        if (o.err)
            err = tk__failf(o.err, "%s: writing the image failed: %s", who, strerror(-o.err));
    }
    if (!err) {
        struct tk_img_header h = {
            .page_size = (uint32_t)ps,
            .flags = compress ? TK_IMG_COMPRESSED : 0,
            .nareas = (uint32_t)nareas,
            .lineage = newest->lineage,
            .seq = newest->seq,
            .npages = npages,
            .nsaved = npages,
            .nzero = nzero,
            .data_off = TK_IMG_HEADER,
            .dir_off = dir_off,
            .dir_len = o.off - dir_off,
            .created_ns = newest->created_ns,
            .dir_crc = o.crc,
        };
        for (size_t a = 0; a < nareas; a++) h.area_len[a] = areas[a].len;
        err = tk__img_write_header(out_fd, &h);
        if (err) err = tk__failf(err, "%s: writing the image failed: %s", who, strerror(-err));
    }
    if (held) munmap(held, words * 8 ?: 1);
    if (zero) munmap(zero, words * 8 ?: 1);
    if (entries) munmap(entries, npages * esize ?: 1);
    free(page);
    free(scratch);
    free(lz);
    free(o.buf);
    tk__chain_close(&ch);
    return err;
}
