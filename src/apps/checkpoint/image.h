/* src/apps/checkpoint/image.h - the checkpoint image format.
 *
 * Version 2 (written):
 *
 *   [0, 4096)          header (struct tk_img_header), written last
 *   [4096, dir_off)    the data: uncompressed, the data pages in page-index
 *                      order, one page each (a page that is all zero may be
 *                      left a hole of the file); compressed (TK_IMG_COMPRESSED),
 *                      each data page's LZ4 block (or the page itself when
 *                      LZ4 does not make it smaller) anywhere, as the
 *                      directory says; located (TK_IMG_LOCATED, always with
 *                      TK_IMG_COMPRESSED: the entries say where each page
 *                      is, stored as is, at 4096 + its index x the page
 *                      size; the file sparse where no page was written:
 *                      precopy writes them before it knows which are in)
 *   [dir_off, +len)    directory: the bitmap of the pages the image holds
 *                      (one bit per page of the areas, 64-bit words); the
 *                      bitmap of those that are zero (not populated at the
 *                      snapshot instant: no data); then one entry per data
 *                      page (held, not zero), in page-index order:
 *                      uncompressed a CRC-32C (u32), compressed
 *                      struct tk_img_entry
 *
 * A full image holds every page: a page it does not hold is zero (never
 * populated).  An incremental one holds the pages written since its parent;
 * a page it holds as zero became zero (dropped) since.  Every CRC is over
 * the uncompressed page, seeded with its page index.
 *
 * Version 1 (read): the same without the zero bitmap and compression; a full
 * image holds every page.
 *
 * All integers little-endian.  The header carries its own CRC and the
 * directory's.
 */
#ifndef TK_APPS_CHECKPOINT_IMAGE_H
#define TK_APPS_CHECKPOINT_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trapkit/checkpoint.h"

#define TK_IMG_MAGIC "TKCKPT\r\n"
#define TK_IMG_VERSION 2u
#define TK_IMG_HEADER 4096u
#define TK_IMG_MAX_AREAS 16u
#define TK_IMG_INCREMENTAL 0x1u
#define TK_IMG_COMPRESSED 0x2u /* version 2 */
#define TK_IMG_LOCATED 0x4u    /* version 2, with TK_IMG_COMPRESSED */

/* Version 1's header; version 2's begins the same. */
struct tk_img_header_v1 {
    char magic[8];
    uint32_t version;
    uint32_t page_size;
    uint32_t flags;
    uint32_t nareas;
    uint64_t lineage;
    uint64_t seq;
    uint64_t parent_seq;
    uint64_t npages;
    uint64_t nsaved;
    uint64_t data_off;
    uint64_t dir_off;
    uint64_t dir_len;
    uint64_t created_ns;
    uint64_t area_len[TK_IMG_MAX_AREAS];
    uint32_t dir_crc;
    uint32_t header_crc; /* of the bytes before it */
};

struct tk_img_header {
    char magic[8];
    uint32_t version;
    uint32_t page_size;
    uint32_t flags;
    uint32_t nareas;
    uint64_t lineage;
    uint64_t seq;
    uint64_t parent_seq;
    uint64_t npages;
    uint64_t nsaved; /* pages held */
    uint64_t data_off;
    uint64_t dir_off;
    uint64_t dir_len;
    uint64_t created_ns;
    uint64_t area_len[TK_IMG_MAX_AREAS];
    uint64_t nzero;    /* pages held as zero */
    uint64_t data_len; /* bytes from data_off to dir_off */
    uint32_t dir_crc;
    uint32_t header_crc; /* of the bytes before it */
};

/* A compressed image's directory entry of a data page. */
struct tk_img_entry {
    uint64_t off; /* in the file */
    uint32_t len; /* 0: the page is zero; the page size: stored as is; else LZ4 */
    uint32_t crc;
};

void tk__crc32c_init(void);
uint32_t tk__crc32c(uint32_t seed, const void *data, size_t n); /* [signal-safe] */

/* ---- reading (image.c) -------------------------------------------------- */

/* An image opened for reading: its header and directory, checked. */
struct tk_img {
    int fd;
    uint32_t version, flags;
    size_t ps;
    uint64_t npages, nsaved, nzero, ndata;
    uint64_t lineage, seq, parent_seq, created_ns;
    size_t nareas;
    uint64_t area_len[TK_IMG_MAX_AREAS];
    uint64_t data_off, dir_off, dir_len, file_size;
    unsigned char *dir;   /* the directory (mapped) */
    const uint64_t *held; /* bitmap: pages the image holds */
    const uint64_t *zero; /* bitmap: of those, zero pages (NULL in version 1) */
    const unsigned char *entries;
    uint64_t *rank; /* data pages before each bitmap word */
};

enum { TK_IMG_ABSENT, TK_IMG_ZERO, TK_IMG_DATA };

/* Opens image fd: reads and checks the header and directory (not the
 * pages).  Returns 0, or a negative errno with *msg saying what is wrong.
 * A header alone (no directory) is read with dir_too false (tk_ckpt_info). */
int tk__img_open(int fd, struct tk_img *img, bool dir_too, const char **msg);
void tk__img_close(struct tk_img *img);

/* Whether an image may be written to fd: a regular file open for writing
 * without O_APPEND (pwrite would append there, and the header, written at
 * offset 0, would never be at 0).  0, or -EINVAL with the error set for
 * `who`. */
int tk__img_check_output(int fd, const char *who);

/* Checks the image's layout against the areas (page size, areas, page
 * count); msg is a static description, detail written into buf. */
int tk__img_check_layout(const struct tk_img *img, const struct tk_ckpt_area *areas, size_t nareas,
                         char *buf, size_t buflen);

/* What the image says of page idx: TK_IMG_ABSENT, TK_IMG_ZERO or TK_IMG_DATA
 * (then *rank is its data-page number).  [signal-safe] */
int tk__img_page(const struct tk_img *img, uint64_t idx, uint64_t *rank);

/* Where data page `rank` is: file offset, stored length (0: zero, ps: raw),
 * CRC.  [signal-safe] */
void tk__img_where(const struct tk_img *img, uint64_t rank, uint64_t *off, uint32_t *len,
                   uint32_t *crc);

/* Reads data page idx (of data-page number rank) into out (a page), with
 * scratch (a page) for the compressed block: 0, -EINVAL if it is damaged
 * (CRC, LZ4), or a read error.  [signal-safe] */
int tk__img_read(const struct tk_img *img, uint64_t idx, uint64_t rank, void *out, void *scratch);

/* Reads the next page index set in a bitmap of n pages at or after i, or
 * n.  [signal-safe] */
uint64_t tk__bitmap_next(const uint64_t *bits, uint64_t n, uint64_t i);

/* pread of n bytes at off: 0, -ENODATA at the end of the file, or -errno.
 * [signal-safe] */
int tk__pread_all(int fd, void *buf, size_t n, uint64_t off);

/* pwrite of n bytes at off: 0 or -errno (-EIO if the file takes none).
 * [signal-safe] */
int tk__pwrite_all(int fd, const void *buf, size_t n, uint64_t off);

/* Completes an image whose pages and directory are written: fills in h's
 * magic, version, data_len (data_off to dir_off) and CRC, then syncs the
 * file, writes the header at offset 0 and syncs again - the header last,
 * so that a crash before it leaves an image restore refuses.  The caller
 * fills in the rest (fields it leaves zero stay zero).  0 or -errno. */
int tk__img_write_header(int fd, struct tk_img_header *h);

/* A buffered writer of an image's parts: bytes put go to the file at off
 * in writes of cap bytes (buf is the caller's), the CRC32C of those put
 * with crc chained into crc.  After a failed write (err) the rest is
 * dropped: the caller sees err once it has flushed, and gives up. */
struct tk_imgw {
    int fd, err;
    unsigned char *buf;
    size_t used, cap;
    uint64_t off; /* of buf[0] in the file */
    uint32_t crc;
};
void tk__imgw_put(struct tk_imgw *w, const void *p, size_t n, bool crc);
void tk__imgw_flush(struct tk_imgw *w);

#endif
