/* src/apps/checkpoint/chain.h - a chain of images opened for reading (a full
 * image and its incremental images), as restore, lazy restore and
 * compaction read it (restore.c). */
#ifndef TK_APPS_CHECKPOINT_CHAIN_H
#define TK_APPS_CHECKPOINT_CHAIN_H

#include "apps/checkpoint/image.h"

struct tk_chain {
    struct tk_img *imgs; /* the images read, oldest first */
    size_t *idx;         /* each one's place in the caller's list */
    size_t n;
    size_t skipped; /* incremental images the full image already covers */
};

/* Opens and checks every image's header and directory, the layout against
 * the areas, lineage and sequence (not the pages).  `who` names the caller
 * in the error message. */
int tk__chain_open(const char *who, const struct tk_ckpt_area *areas, size_t nareas, const int *fds,
                   size_t nfds, struct tk_chain *ch);
void tk__chain_close(struct tk_chain *ch);

/* The newest image that holds page i, or -1: the page is zero.
 * [signal-safe] */
int tk__chain_find(const struct tk_chain *ch, uint64_t i);

/* How many of the first npages pages the chain restores from data (not
 * zero), a 64-page word at a time. */
uint64_t tk__chain_data_pages(const struct tk_chain *ch, uint64_t npages);

/* The address of page i of the areas.  [signal-safe] */
unsigned char *tk__area_page(const struct tk_ckpt_area *areas, size_t nareas, uint64_t i,
                             size_t ps);

/* Whether any of the areas overlaps one under a lazy restore that is not
 * done (lazy.c): a checkpointer must not be created on them yet. */
bool tk__lazy_busy(const struct tk_ckpt_area *areas, size_t nareas);

#endif
