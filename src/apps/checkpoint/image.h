/* src/apps/checkpoint/image.h - the checkpoint image format.
 *
 *   [0, 4096)          header (struct tk_img_header), written last
 *   [4096, dir_off)    the saved pages, in page-index order
 *   [dir_off, +len)    directory: a bitmap of the saved pages (one bit per
 *                      page of the areas, 64-bit words), then one CRC-32C
 *                      per saved page (seeded with its page index), in order
 *
 * All integers little-endian.  The header carries its own CRC and the
 * directory's.
 */
#ifndef TK_APPS_CHECKPOINT_IMAGE_H
#define TK_APPS_CHECKPOINT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define TK_IMG_MAGIC "TKCKPT\r\n"
#define TK_IMG_VERSION 1u
#define TK_IMG_HEADER 4096u
#define TK_IMG_MAX_AREAS 16u
#define TK_IMG_INCREMENTAL 0x1u

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
    uint64_t nsaved;
    uint64_t data_off;
    uint64_t dir_off;
    uint64_t dir_len;
    uint64_t created_ns;
    uint64_t area_len[TK_IMG_MAX_AREAS];
    uint32_t dir_crc;
    uint32_t header_crc; /* of the bytes before it */
};

void tk__crc32c_init(void);
uint32_t tk__crc32c(uint32_t seed, const void *data, size_t n); /* [signal-safe] */

#endif
