/* tests/powercut.h - the power-cut simulation (tests/powercut.c): the
 * journal libtk_powercut.so keeps beside each watched file, and
 * tk_powercut(), which applies a random power cut to a file from it. */
#ifndef TK_POWERCUT_H
#define TK_POWERCUT_H

#include <stdint.h>

#define PC_MAGIC 0x5443504bu /* "KPCT" */
enum { PC_WRITE = 1, PC_TRUNCATE = 2, PC_SECTOR = 512 };

struct pc_hdr {
    uint32_t magic, pad;
    int64_t synced_size; /* the file's size at its last sync */
};
/* then one per write or truncation since, each followed by `have` old bytes */
struct pc_ent {
    uint32_t kind, pad;
    int64_t off, len; /* PC_WRITE: the bytes written; PC_TRUNCATE: off the new size, len the
                         bytes it cut off */
    int64_t have;     /* old bytes kept (those the file had in the range) */
    int64_t size;     /* the file's size before */
};

/* Simulates a power cut on path from path.pcj (removed after): each
 * unsynced write's sectors are undone or kept at random (newest first),
 * and the file ends at its synced size or its size at the cut.  seed
 * chooses.  Returns the number of sectors undone, or -1 if path has no
 * journal. */
long tk_powercut(const char *path, unsigned seed);

#endif
