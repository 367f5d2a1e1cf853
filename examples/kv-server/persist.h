/* examples/kv-server/persist.h - persistence: the chain of images loaded
 * at start, SAVE and BGSAVE (a full image, then incremental ones), the
 * save points (--save), SHUTDOWN, and the fork mechanism's child closing
 * the server's sockets.  The semantics, which are Redis's, are described
 * in main.c; the files on disk in README.md.
 */
#ifndef KV_PERSIST_H
#define KV_PERSIST_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <trapkit/checkpoint.h>

enum shutdown_mode { SHUTDOWN_DEFAULT, SHUTDOWN_SAVE, SHUTDOWN_NOSAVE };

#define MAX_SAVE_POINTS 16
#define MAX_CHAIN 64 /* incremental images kept before a full one, at most */

/* The event loop's thread owns it; the helper thread that publishes a
 * background save's image touches none of it. */
struct persist_state {
    tk_ckpt *ckpt;
    const char *dir, *dbfile;                /* --dir, --dbfilename */
    char path[PATH_MAX], tmp_path[PATH_MAX]; /* DIR/NAME and DIR/NAME.tmp */
    /* The chain on disk: DIR/NAME, a full image, then DIR/NAME.inc.SEQ for
     * SEQ = base_seq + 1 .. last_seq, each incremental on the one before. */
    struct {
        uint64_t lineage, base_seq, last_seq;
        uint64_t base_bytes, inc_bytes; /* the files' sizes */
        bool ours;                      /* its full image was written by this process */
    } chain;
    bool incremental;      /* --incremental yes (the default): BGSAVE writes incremental images */
    bool compress;         /* --compress yes: LZ4 */
    bool eager_restore;    /* --eager-restore yes: the chain is loaded before the server listens */
    bool lazy;             /* the chain loaded at start is being restored lazily */
    bool prefetch;         /* --restore-prefetch yes (the default): pages not touched come too */
    bool bgsave_scheduled; /* BGSAVE SCHEDULE during loading: once loaded; BGSAVE in EXEC: after it
                            */
    tk_ckpt_lazy *lazy_restore; /* while persist.lazy */
    int chain_fds[MAX_CHAIN + 1], nchain_fds;
    struct tk_ckpt_area area; /* the data set's */
    time_t loading_start;
    int full_after; /* --full-after N: a full image after N incremental ones */
    /* --compact-after N, --compact-percentage P: the chain is compacted in
     * the background once it holds N incremental images or they add up to
     * P% of the full image and compact_min_size (0: never for that reason) */
    int compact_after, compact_percentage;
    uint64_t compact_min_size;       /* --compact-min-size: P% counts from this many bytes on */
    long compact_delay_ms;           /* --compact-delay MS (tests): before the rename */
    char compact_hold[PATH_MAX];     /* --compact-hold FILE (tests): ... until FILE exists */
    char instant_hold[PATH_MAX];     /* --instant-hold FILE (tests): no BGSAVE instant until then */
    char compact_path[PATH_MAX];     /* DIR/NAME.tmp-compact */
    const char *last_compact_status; /* "ok" or "err" */
    long last_compact_ms;            /* how long the last compaction took; -1: none yet */
    uint64_t compactions;            /* chains replaced by a compacted image */
    time_t last_compact_try;
    bool need_full;  /* the next save is full (a save failed, or nothing of ours yet) */
    int save_fd;     /* the running save's file */
    bool bgsave;     /* a background save runs */
    time_t lastsave; /* the last successful save's end (LASTSAVE) */
    time_t bgsave_start, last_bgsave_try;
    const char *last_status;         /* "ok" or "err" */
    uint64_t changes_at_save;        /* server.changes at the running save's instant */
    bool instant_pending;            /* the running save's instant is this thread's to take */
    long last_bgsave_ms;             /* how long the last save took; -1: none yet */
    uint64_t saves;                  /* completed successfully since start */
    tk_ckpt_stats last_stats;        /* the last save's */
    char last_target[PATH_MAX + 32]; /* where the running (or last) save's image is published */
    int64_t last_instant_ms;         /* the snapshot instant of the image last saved or loaded */
    int64_t save_instant_ms;         /* the running save's */
    struct save_point {
        long seconds, changes;
    } save_points[MAX_SAVE_POINTS]; /* --save */
    int nsave_points;
    char save_error[PATH_MAX + 256]; /* why the last save failed to start or complete */
    /* --stop-writes-on-bgsave-error (yes): with save points, writes are
     * refused while the last save failed (Redis's MISCONF) */
    bool stop_writes_on_error;
    bool bgsave_failed; /* the last background save failed (no save succeeded since) */
};

/* Whether writes (and PING) are refused: save points are set, the last
 * background save failed (and no save succeeded since) and
 * stop-writes-on-bgsave-error is yes (as Redis). */
bool persist_writes_refused(void);

extern struct persist_state persist;

/* Loads the chain at persist.path (the full image, then its incremental
 * images) into the area, or formats an empty store there if there is none;
 * sets server.kv.  Returns -1 after saying why on stderr. */
int persist_load_image(const struct tk_ckpt_area *ar);

/* Creates the checkpointer over the area (persist.ckpt), unless a lazy
 * restore is still bringing its pages in: then once it is done
 * (persist_poll_loading).  -1 after saying why on stderr. */
int persist_create_ckpt(const struct tk_ckpt_area *ar);

/* The event loop's: notes a lazy restore that is done (every page in place
 * and verified) and creates the checkpointer; starts a scheduled BGSAVE. */
void persist_poll_loading(void);
/* Waits until a lazy restore is done (SAVE, SHUTDOWN SAVE). */
void persist_finish_loading(void);
/* The lazy restore's progress so far (INFO persistence); false if none runs. */
bool persist_loading_stats(tk_ckpt_lazy_stats *st);
/* A save is due while the image is still loading (why: what asked for it):
 * it starts once the image has loaded.  Under --restore-prefetch no nothing
 * else would read the rest of the image in, so a thread does it now. */
void persist_schedule_save(const char *why);

/* BGSAVE: 0 once the snapshot is taken and the image being written, -1
 * with persist.save_error (said on stderr too). */
int persist_start_bgsave(void);

/* SAVE: 0 once the image is complete and published, -1 with
 * persist.save_error. */
int persist_save(void);

/* Gives back the pages of the data set's free memory (after FLUSHALL): no
 * memory until used again, none in the next image, incremental or full
 * (tk_ckpt_discard).  While a save runs or the image still loads, once
 * that is over. */
void persist_trim(void);

/* The event loop's: notes a background save that completed and publishes
 * its image; starts one that a save point calls for. */
void persist_poll_bgsave(void);
void persist_check_save_points(void);

/* The event loop's: starts a compaction of the chain when it is due
 * (never while a lazy restore has pages not yet verified, nor during a
 * BGSAVE), notes one that has ended. */
void persist_poll_compact(void);
/* Whether a compaction runs; since when (mono_ms). */
bool persist_compacting(int64_t *since_ms);

/* SHUTDOWN and SIGTERM/SIGINT: returns -1 if the server must keep running
 * (the save failed); else exits. */
int persist_shutdown(enum shutdown_mode mode);

/* --save "SECONDS CHANGES [SECONDS CHANGES ...]" or ""; CONFIG GET save */
bool persist_parse_save_points(const char *v);
void persist_save_points_str(char *buf, size_t n);

#endif
