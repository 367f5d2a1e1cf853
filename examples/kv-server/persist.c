/* examples/kv-server/persist.c - persistence (persist.h): loading the
 * image at start, SAVE, BGSAVE and the save points, SHUTDOWN, and the fork
 * mechanism's child.  main.c describes what is saved when, as Redis does. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "net.h"
#include "persist.h"
#include "server.h"
#include "store.h"

struct persist_state persist = {.save_fd = -1,
                                .last_status = "ok",
                                .stop_writes_on_error = true,
                                /* Redis's default save points (redis-server without a
                                 * configuration file) */
                                .save_points = {{3600, 1}, {300, 100}, {60, 10000}},
                                .nsave_points = 3,
                                .dbfile = "dump.tkimg",
                                .dir = ".",
                                .last_bgsave_ms = -1,
                                .incremental = true,
                                .prefetch = true,
                                .full_after = 8,
                                .compact_after = 4,
                                .compact_percentage = 100,
                                .compact_min_size = 64u << 20,
                                .last_compact_status = "ok",
                                .last_compact_ms = -1,
                                .need_full = true};

/* ---- the chain on disk ------------------------------------------------- */
/* DIR/NAME.inc.SEQ */
static void inc_path(char *buf, size_t n, uint64_t seq)
{
    snprintf(buf, n, "%s.inc.%llu", persist.path, (unsigned long long)seq);
}

/* The SEQ of a directory entry named NAME.inc.SEQ, or 0 if it is not one. */
static uint64_t inc_seq(const char *name)
{
    size_t l = strlen(persist.dbfile);
    if (strncmp(name, persist.dbfile, l) || strncmp(name + l, ".inc.", 5)) return 0;
    const char *p = name + l + 5;
    if (*p < '1' || *p > '9') return 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    return *end ? 0 : (uint64_t)v;
}

/* Removes the incremental images that are not part of the chain from
 * from_seq to to_seq (all of them if from_seq > to_seq).  Touches only the
 * file system: the helper thread that publishes a save runs it. */
static void remove_incs_except(uint64_t from_seq, uint64_t to_seq, bool say)
{
    DIR *d = opendir(persist.dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        uint64_t seq = inc_seq(e->d_name);
        if (seq && (seq < from_seq || seq > to_seq)) {
            if (say) /* (at start: what the chain loaded did not take) */
                fprintf(stderr,
                        "kv-server: removing %s/%s: not an incremental image of the chain "
                        "loaded (left by an earlier one, or after a gap in the chain)\n",
                        persist.dir, e->d_name);
            unlinkat(dirfd(d), e->d_name, 0);
        }
    }
    closedir(d);
}

/* Whether DIR holds an incremental image (NAME.inc.SEQ); its name in
 * buf if so. */
static bool first_inc(char *buf, size_t n)
{
    DIR *d = opendir(persist.dir);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));)
        if (inc_seq(e->d_name)) {
            snprintf(buf, n, "%s", e->d_name);
            found = true;
        }
    closedir(d);
    return found;
}

/* An incremental image in DIR of the chain's lineage past last_seq: the
 * chain loaded stops before it because one between is missing (or not what
 * it should be); or a NAME.inc.SEQ past it that cannot be read as an image
 * (unreadable, damaged header: it may be of this chain too; *unreadable
 * set).  Its name in buf if so. */
static bool inc_past_gap(uint64_t lineage, uint64_t last_seq, char *buf, size_t n, bool *unreadable)
{
    DIR *d = opendir(persist.dir);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        uint64_t seq = inc_seq(e->d_name);
        if (seq <= last_seq) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        tk_ckpt_image_info info;
        bool read = fd >= 0 && tk_ckpt_info(fd, &info) == 0;
        if (!read || (info.incremental && info.lineage == lineage)) {
            snprintf(buf, n, "%s", e->d_name);
            *unreadable = !read;
            found = true;
        }
        if (fd >= 0) close(fd);
    }
    closedir(d);
    return found;
}

/* ---- loading ----------------------------------------------------------- */
/* A page of the chain is damaged (or cannot be read) and was found only
 * now, while the server runs: it is never served - the server stops.
 * Called from whichever thread found it, possibly in a fault handler:
 * [signal-safe] (write and _exit only). */
static void lazy_error(int err, uint64_t page, const char *msg, void *arg)
{
    (void)arg, (void)err;
    /* The fault handler and the prefetching thread may both find a damaged
     * page at once: the first says so, in one write; the other ends too. */
    static atomic_int said;
    if (atomic_exchange(&said, 1)) {
        for (;;) pause(); /* the first one's _exit ends the process */
    }
    char num[24], *p = num + sizeof num;
    *--p = 0;
    do *--p = (char)('0' + page % 10);
    while ((page /= 10) && p > num);
    const char *parts[] = {"kv-server: the image ",
                           persist.path,
                           " cannot be loaded: page ",
                           p,
                           ": ",
                           msg ? msg : "damaged",
                           "; stopping: no data of a damaged image is served\n"};
    char line[PATH_MAX + 512];
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        for (const char *c = parts[i]; *c && n < sizeof line - 1; c++) line[n++] = *c;
    if (n == sizeof line - 1) line[n - 1] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
    _exit(70);
}

/* --restore-prefetch no, and a save due: a thread reads the rest of the
 * image in (tk_ckpt_lazy_wait brings the missing pages in itself), the
 * server serving meanwhile. */
static pthread_t rest_thread;
static bool rest_reading;

static void *read_rest(void *arg)
{
    (void)arg;
    tk_ckpt_lazy_stats st;
    tk_ckpt_lazy_wait(persist.lazy_restore, &st);
    return NULL;
}

void persist_schedule_save(const char *why)
{
    if (!persist.bgsave_scheduled)
        fprintf(stderr,
                "kv-server: %s while the image is still loading: the save starts once it "
                "has loaded%s\n",
                why, persist.prefetch ? "" : " (the rest of it is read in now)");
    persist.bgsave_scheduled = true;
    if (persist.lazy && !persist.prefetch && !rest_reading)
        rest_reading = pthread_create(&rest_thread, NULL, read_rest, NULL) == 0;
}

/* The lazy restore is done: every page is in place and verified.  The
 * images may now be replaced, so the checkpointer is made. */
static void finish_lazy(void)
{
    if (rest_reading) {
        pthread_join(rest_thread, NULL);
        rest_reading = false;
    }
    tk_ckpt_lazy_stats st;
    tk_ckpt_lazy_poll(persist.lazy_restore, &st);
    int err = tk_ckpt_lazy_destroy(persist.lazy_restore);
    persist.lazy_restore = NULL;
    persist.lazy = false;
    if (server.kv) kv_hold_rehash(server.kv, false);
    for (int i = 0; i < persist.nchain_fds; i++) close(persist.chain_fds[i]);
    persist.nchain_fds = 0;
    if (err < 0) { /* the error function stops the server: this is in case it returned */
        fprintf(stderr, "kv-server: the image %s cannot be loaded: %s; stopping\n", persist.path,
                strerror(-err));
        _exit(70);
    }
    fprintf(stderr,
            "kv-server: loaded every page of %s: %lu on fault, %lu ahead of use, %lu verified, "
            "in %.1f ms\n",
            persist.path, (unsigned long)st.pages_by_fault, (unsigned long)st.pages_by_prefetch,
            (unsigned long)st.pages_verified, (double)(st.done_ns - st.start_ns) / 1e6);
    if (persist_create_ckpt(&persist.area) < 0) _exit(1);
}

void persist_poll_loading(void)
{
    if (persist.lazy) {
        tk_ckpt_lazy_stats st;
        if (tk_ckpt_lazy_poll(persist.lazy_restore, &st) == 1) return;
        finish_lazy();
    }
    if (persist.bgsave_scheduled && !persist.bgsave) {
        persist.bgsave_scheduled = false;
        fprintf(stderr, "kv-server: the scheduled background save starts\n");
        persist_start_bgsave(); /* (says why on stderr if it cannot) */
    }
}

void persist_finish_loading(void)
{
    if (!persist.lazy) return;
    fprintf(stderr, "kv-server: waiting for every page of the image to be loaded\n");
    tk_ckpt_lazy_stats st;
    tk_ckpt_lazy_wait(persist.lazy_restore, &st);
    finish_lazy();
}

bool persist_loading_stats(tk_ckpt_lazy_stats *st)
{
    if (!persist.lazy) return false;
    tk_ckpt_lazy_poll(persist.lazy_restore, st);
    return true;
}

static const char *const why_stop =
    "; not starting, as an empty store would replace it at the next save";

/* Opens one image of the chain and reads its header.  Returns the fd; -1
 * with nothing said if path does not exist and missing_ok; -2 after saying
 * why the server must not start. */
static int open_image(const char *path, bool missing_ok, tk_ckpt_image_info *info)
{
    /* (O_NONBLOCK: a FIFO in the image's place would block the open; it is
     * refused below as not a regular file) */
    int img = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (img >= 0) fcntl(img, F_SETFL, fcntl(img, F_GETFL) & ~O_NONBLOCK);
    if (img < 0) {
        int e = errno;
        struct stat lst;
        if (e == ENOENT && lstat(path, &lst) < 0 && errno == ENOENT && missing_ok) return -1;
        fprintf(stderr, "kv-server: cannot open the image %s: %s%s\n", path,
                e == ENOENT ? "a symbolic link to nothing" : strerror(e), why_stop);
        return -2;
    }
    struct stat sb;
    if (fstat(img, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "kv-server: the image %s is not a regular file%s\n", path, why_stop);
        close(img);
        return -2;
    }
    int err = tk_ckpt_info(img, info);
    if (err < 0) {
        if (err == -EINVAL)
            fprintf(stderr, "kv-server: %s is not a usable image: %s\n", path, tk_last_error());
        else
            fprintf(stderr, "kv-server: cannot read the image %s: %s%s\n", path, strerror(-err),
                    why_stop);
        close(img);
        return -2;
    }
    return img;
}

/* Only a missing image (ENOENT) formats an empty store.  An image that
 * exists but cannot be opened or read stops the server: starting empty
 * would let the next save replace it.  The chain is DIR/NAME, then
 * DIR/NAME.inc.SEQ for SEQ = its seq + 1, + 2, ... as long as each exists
 * and is an incremental image of the same lineage on the one before;
 * anything else is left over from an earlier chain (a save that a crash
 * interrupted before its old files were removed) and is removed. */
int persist_load_image(const struct tk_ckpt_area *ar)
{
    tk_ckpt_image_info info, inc;
    int fds[MAX_CHAIN + 1], n = 0;
    persist.area = *ar;
    unlink(persist.tmp_path);     /* a save a crash interrupted */
    unlink(persist.compact_path); /* a compaction a crash interrupted */
    int img = open_image(persist.path, true, &info);
    if (img == -1) {
        /* No full image, but incremental images of one: the full image was
         * moved or deleted (no save leaves them without it).  They are the
         * user's data, and not enough to load: say so rather than start
         * empty and remove them at the next save. */
        char orphan[NAME_MAX + 1];
        if (first_inc(orphan, sizeof orphan)) {
            fprintf(stderr,
                    "kv-server: %s/%s is an incremental image, but the full image %s it "
                    "continues is missing%s (restore that file, or move the %s.inc.* files "
                    "away to start with an empty store)\n",
                    persist.dir, orphan, persist.path, why_stop, persist.dbfile);
            return -1;
        }
        server.kv = kv_format(ar->addr, ar->len);
        return server.kv ? 0 : -1;
    }
    if (img < 0) return -1;
    fds[n++] = img;
    int ret = -1;
    if (info.nareas != 1 || info.area_len[0] != ar->len) {
        fprintf(stderr, "kv-server: %s was saved with --memory %lu; start with that size\n",
                persist.path, (unsigned long)info.area_len[0]);
        goto out;
    }
    if (info.incremental) {
        fprintf(stderr,
                "kv-server: %s is an incremental image, not the full image a chain "
                "begins with%s\n",
                persist.path, why_stop);
        goto out;
    }
    persist.chain.lineage = info.lineage;
    persist.chain.base_seq = persist.chain.last_seq = info.seq;
    persist.chain.base_bytes = info.file_bytes;
    persist.chain.inc_bytes = 0;
    uint64_t created_ns = info.created_ns;
    while (n < MAX_CHAIN + 1) {
        char path[PATH_MAX + 32];
        inc_path(path, sizeof path, persist.chain.last_seq + 1);
        int fd = open_image(path, true, &inc);
        if (fd == -1) break;
        if (fd < 0) goto out;
        if (!inc.incremental || inc.lineage != persist.chain.lineage ||
            inc.parent_seq != persist.chain.last_seq) {
            close(fd); /* of an earlier chain */
            break;
        }
        fds[n++] = fd;
        persist.chain.last_seq = inc.seq;
        persist.chain.inc_bytes += inc.file_bytes;
        created_ns = inc.created_ns;
    }
    char later[NAME_MAX + 1] = "";
    bool unreadable = false;
    if (inc_past_gap(persist.chain.lineage, persist.chain.last_seq, later, sizeof later,
                     &unreadable) &&
        unreadable) {
        fprintf(stderr,
                "kv-server: %s/%s, after the chain loaded (to sequence %llu of %s), cannot be read "
                "as an image (unreadable, or its header damaged), so whether it continues the "
                "chain is not known; not starting, as the next save would remove it (make it "
                "readable, or move it away to start from the state the chain holds)\n",
                persist.dir, later, (unsigned long long)persist.chain.last_seq, persist.path);
        goto out;
    }
    if (*later) {
        /* Later images of this chain, but one between them and the chain is
         * gone: loading the chain up to the gap would roll the data back
         * and the next save would remove the later ones.  The user's to
         * decide. */
        fprintf(stderr,
                "kv-server: %s/%s continues the chain, but %s.inc.%llu before it is missing or "
                "not of this chain; not starting, as loading the chain up to the gap would roll "
                "the data back and the next save would remove the later images (restore that "
                "file, or move the later %s.inc.* files away to start from the state the chain "
                "holds up to it)\n",
                persist.dir, later, persist.path, (unsigned long long)(persist.chain.last_seq + 1),
                persist.dbfile);
        goto out;
    }
    int err, nimg = n;
    if (persist.eager_restore) {
        err = tk_ckpt_restore(ar, 1, fds, (size_t)n);
    } else {
        tk_ckpt_lazy_config lc = {.areas = ar,
                                  .nareas = 1,
                                  .fds = fds,
                                  .nfds = (size_t)n,
                                  .flags = persist.prefetch ? 0 : TK_CKPT_LAZY_NO_PREFETCH,
                                  .on_error = lazy_error};
        err = tk_ckpt_restore_lazy(&lc, &persist.lazy_restore);
        if (!err) {
            tk_ckpt_lazy_stats ls;
            persist.lazy = tk_ckpt_lazy_poll(persist.lazy_restore, &ls) == 1;
            persist.loading_start = time(NULL);
            memcpy(persist.chain_fds, fds, sizeof fds);
            persist.nchain_fds = n;
            n = 0; /* kept open until the restore is done */
            if (!persist.lazy) finish_lazy();
        }
    }
    if (err < 0) {
        fprintf(stderr, "kv-server: cannot load %s: %s%s\n", persist.path, tk_last_error(),
                why_stop);
        goto out;
    }
    const char *bad;
    server.kv = kv_open(ar->addr, ar->len, &bad);
    if (!server.kv) {
        fprintf(stderr, "kv-server: cannot load %s: %s\n", persist.path,
                bad ? bad : "out of memory");
        goto out;
    }
    kv_hold_rehash(server.kv, persist.lazy);
    remove_incs_except(persist.chain.base_seq + 1, persist.chain.last_seq, true);
    persist.last_instant_ms = (int64_t)(created_ns / 1000000u);
    fprintf(stderr,
            "kv-server: %s %lu keys from %s and %d incremental images (the snapshot instant "
            "of the last: %.3f)\n",
            persist.lazy ? "loading (lazily, while serving)" : "loaded",
            (unsigned long)kv_count(server.kv), persist.path, nimg - 1,
            persist.last_instant_ms / 1e3);
    ret = 0;
out:
    if (ret < 0 && persist.lazy_restore) { /* not a store of ours: the threads end first */
        tk_ckpt_lazy_destroy(persist.lazy_restore);
        persist.lazy_restore = NULL;
        persist.lazy = false;
        for (int i = 0; i < persist.nchain_fds; i++) close(persist.chain_fds[i]);
        persist.nchain_fds = 0;
    }
    for (int i = 0; i < n; i++) close(fds[i]);
    return ret;
}

static bool trim_wanted; /* persist_trim asked while it could not run */

int persist_create_ckpt(const struct tk_ckpt_area *ar)
{
    persist.area = *ar;
    if (persist.lazy || persist.ckpt) return 0; /* made once every page is in place */
    tk_ckpt_config cfg = {.areas = ar,
                          .nareas = 1,
                          .mech = server.mech,
                          /* the fork mechanism's child keeps none of the
                           * server's sockets: a listening socket held by a
                           * child that outlives a killed server would make
                           * the next server's bind() fail */
                          .flags = TK_CKPT_CLOSE_FDS | (persist.incremental ? TK_CKPT_TRACK : 0)};
    if (tk_ckpt_create(&cfg, &persist.ckpt) < 0) {
        fprintf(stderr, "kv-server: %s\n", tk_last_error());
        return -1;
    }
    tk_ckpt_stats none;
    tk_ckpt_poll(persist.ckpt, &none);
    persist.need_full = true; /* a new checkpointer's first image is full */
    if (trim_wanted) persist_trim();
    return 0;
}

/* ---- saving ------------------------------------------------------------ */
/* Opens DIR/NAME.tmp for a save: persist.save_fd, or -1 with
 * persist.save_error. */
static int open_tmp(void)
{
    /* a new file each time: a snapshot of an earlier run (killed during
     * BGSAVE) may still hold the old one open */
    unlink(persist.tmp_path);
    persist.save_fd = open(persist.tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (persist.save_fd < 0)
        snprintf(persist.save_error, sizeof persist.save_error, "cannot open %s: %s",
                 persist.tmp_path, strerror(errno));
    return persist.save_fd;
}

/* Opens the chain as persist.chain describes it (DIR/NAME, then
 * DIR/NAME.inc.SEQ up to its last seq) into fds, checking each file's
 * header: its seq, full or incremental, one lineage.  Returns 0, or -1
 * with why (the files opened closed). */
static int open_chain(int *fds, size_t *n, char *why, size_t why_len)
{
    uint64_t lineage = 0;
    *n = 0;
    for (uint64_t seq = persist.chain.base_seq; seq <= persist.chain.last_seq; seq++) {
        char path[PATH_MAX + 32];
        bool base = seq == persist.chain.base_seq;
        if (base)
            snprintf(path, sizeof path, "%s", persist.path);
        else
            inc_path(path, sizeof path, seq);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        tk_ckpt_image_info info;
        bool ok = fd >= 0 && tk_ckpt_info(fd, &info) == 0;
        if (ok && base) lineage = info.lineage;
        if (!ok || info.seq != seq || info.lineage != lineage || info.incremental == base) {
            snprintf(why, why_len, "%s: %s", path,
                     fd < 0 ? strerror(errno) : "not the image of the chain it should be");
            if (fd >= 0) close(fd);
            for (size_t i = 0; i < *n; i++) close(fds[i]);
            *n = 0;
            return -1;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        fds[(*n)++] = fd;
    }
    return 0;
}

static bool compaction_live(void);

/* Whether the chain on disk is still the one this server saved, for an
 * incremental image to continue: a full image moved away or replaced, an
 * incremental one missing, would leave every later image unloadable. */
static bool chain_intact(void)
{
    if (compaction_live()) return true; /* (its thread checks the images as it reads them) */
    int fds[MAX_CHAIN + 1];
    size_t n;
    char why[PATH_MAX + 128];
    int r = -1;
    if (persist.chain.last_seq - persist.chain.base_seq > MAX_CHAIN)
        snprintf(why, sizeof why, "more than %d incremental images", MAX_CHAIN);
    else
        r = open_chain(fds, &n, why, sizeof why);
    if (r < 0) {
        fprintf(stderr,
                "kv-server: the chain on disk is not the one this server saved (%s): this save "
                "writes a full image\n",
                why);
        return false;
    }
    for (size_t i = 0; i < n; i++) close(fds[i]);
    return true;
}

/* Whether the chain is compacted in the background (--compact-after,
 * --compact-percentage). */
static bool compaction_on(void)
{
    return persist.incremental && (persist.compact_after > 0 || persist.compact_percentage > 0);
}

/* The flags of the next save: incremental unless the chain on disk is not
 * this checkpointer's, a save failed since, --full-after incremental
 * images are there already, or, without compaction, they add up to more
 * than the full image (with it, compaction makes the chain short again). */
static unsigned save_flags(void)
{
    unsigned f = persist.compress ? TK_CKPT_COMPRESS : 0;
    uint64_t incs = persist.chain.last_seq - persist.chain.base_seq;
    bool heavy = persist.chain.inc_bytes > persist.chain.base_bytes && !compaction_on();
    if (persist.incremental && !persist.need_full && persist.chain.ours &&
        incs < (uint64_t)persist.full_after && !heavy && chain_intact())
        f |= TK_CKPT_INCREMENTAL;
    return f;
}

/* Where a complete image is published: DIR/NAME for a full one (which
 * ends the chain before it), DIR/NAME.inc.SEQ for an incremental one. */
static void set_target(const tk_ckpt_stats *st)
{
    if (st->incremental)
        inc_path(persist.last_target, sizeof persist.last_target, st->seq);
    else
        snprintf(persist.last_target, sizeof persist.last_target, "%s", persist.path);
}

/* Whoever renames a file into the chain (a save's helper thread, SAVE in
 * the event loop, the compaction thread) holds publish_lock from the rename
 * until the files it replaced are removed; full_generation counts the full
 * images renamed to DIR/NAME, so a compaction learns whether a save
 * replaced the full image it compacted from. */
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t full_generation; /* under publish_lock */

static void sync_dir(void)
{
    int d = open(persist.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        fsync(d);
        close(d);
    }
}

/* The image in fd is complete (unless err): make it part of the chain by
 * renaming it to target, or remove it.  A full image replaces the whole
 * chain: the incremental images of the one before are removed once it is
 * in place (a crash before leaves them, and the next start removes them:
 * they no longer chain onto DIR/NAME).  Touches only the file system and
 * fd, so the helper thread below may run it while the event loop goes on;
 * returns the error. */
static int publish_image(int err, int fd, const char *target, bool full)
{
    if (!err && fsync(fd) < 0) err = -errno;
    if (!err) {
        pthread_mutex_lock(&publish_lock);
        if (rename(persist.tmp_path, target) < 0) err = -errno;
        if (!err) {
            sync_dir();
            if (full) {
                full_generation++;
                remove_incs_except(1, 0, false);
            }
        }
        pthread_mutex_unlock(&publish_lock);
    }
    if (err) {
        unlink(persist.tmp_path);
        fprintf(stderr, "kv-server: saving failed: %s\n", strerror(-err));
    }
    close(fd);
    return err;
}

/* The save has ended: what INFO and LASTSAVE report.  The event loop's
 * thread only (it owns the state).  The changes made since the save's instant are
 * still unsaved. */
static void note_save(int err, const tk_ckpt_stats *st)
{
    if (!err) {
        persist.lastsave = time(NULL);
        server.changes -= persist.changes_at_save;
        persist.last_instant_ms = st && st->instant_realtime_ns
                                      ? (int64_t)(st->instant_realtime_ns / 1000000u)
                                      : persist.save_instant_ms;
        persist.last_status = "ok";
        persist.bgsave_failed = false;
        persist.saves++;
        if (st && st->incremental) {
            persist.chain.last_seq = st->seq;
            persist.chain.inc_bytes += st->image_bytes;
        } else if (st) {
            persist.chain.base_seq = persist.chain.last_seq = st->seq;
            persist.chain.base_bytes = st->image_bytes;
            persist.chain.inc_bytes = 0;
            persist.chain.ours = true;
        }
        persist.need_full = false;
    } else {
        persist.last_status = "err";
        if (persist.bgsave) persist.bgsave_failed = true;
        if (!persist.save_error[0]) /* (publishing it failed) */
            snprintf(persist.save_error, sizeof persist.save_error, "%s", strerror(-err));
        persist.need_full = true; /* the next image must not chain onto a missing one */
    }
    persist.changes_at_save = 0;
    if (st) {
        persist.last_stats = *st;
        persist.last_bgsave_ms = (long)(st->duration_ns / 1000000);
    }
    persist.save_fd = -1;
}

static void discard_run(void *addr, size_t len, void *arg)
{
    int *err = arg;
    if (!*err) *err = tk_ckpt_discard(persist.ckpt, addr, len);
}

void persist_trim(void)
{
    if (!persist.ckpt || persist.lazy || persist.bgsave) {
        trim_wanted = true;
        return;
    }
    trim_wanted = false;
    int err = 0;
    kv_free_pages(server.kv, discard_run, &err);
    if (err) /* (the pages keep their memory: nothing is lost) */
        fprintf(stderr, "kv-server: the free memory was not given back: %s\n", tk_last_error());
}

/* Whether a failed background save refuses writes (Redis's condition:
 * stop-writes-on-bgsave-error yes and save points set). */
static bool stop_writes_armed(void)
{
    return persist.stop_writes_on_error && persist.nsave_points > 0;
}

/* A background save has ended: its image published, in this thread. */
static void commit_bgsave(int err, const tk_ckpt_stats *st)
{
    set_target(st);
    note_save(publish_image(err, persist.save_fd, persist.last_target, !st->incremental), st);
    persist.bgsave = false;
    if (trim_wanted) persist_trim();
}

/* The rename and the directory's fsync can take a journal commit: a
 * helper thread does them, so the event loop does not wait; the event loop
 * notes the result once it has joined the thread. */
static struct {
    pthread_t thread;
    int err, fd;
    bool full;
    tk_ckpt_stats st;
    atomic_bool done, live;
} commit;

static void *commit_thread(void *arg)
{
    (void)arg;
    commit.err = publish_image(commit.err, commit.fd, persist.last_target, commit.full);
    atomic_store(&commit.done, true);
    return NULL;
}

static void join_commit(void)
{
    pthread_join(commit.thread, NULL);
    atomic_store(&commit.live, false);
    note_save(commit.err, &commit.st);
    persist.bgsave = false;
    if (trim_wanted) persist_trim();
}

void persist_poll_bgsave(void)
{
    if (!persist.bgsave) return;
    if (atomic_load(&commit.live)) {
        if (atomic_load(&commit.done)) join_commit();
        return;
    }
    if (persist.instant_pending &&
        !(persist.instant_hold[0] && access(persist.instant_hold, F_OK) != 0)) {
        /* between two commands: the instant may be taken here, and every
         * write made so far is before it */
        persist.changes_at_save = server.changes;
        int r = tk_ckpt_instant(persist.ckpt);
        if (r < 0) snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
        if (r != 0) {
            persist.instant_pending = false;
            net_release_held(r < 0 ? r : 0); /* BGSAVE's client: its reply */
        }
    }
    tk_ckpt_stats st;
    if (tk_ckpt_poll(persist.ckpt, &st) == 1) return;
    bool held = persist.instant_pending; /* (the save ended before its instant) */
    persist.instant_pending = false;
    int err = tk_ckpt_wait(persist.ckpt, &st);
    if (err) snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
    if (held) net_release_held(err);
    commit.err = err;
    commit.fd = persist.save_fd;
    commit.st = st;
    commit.full = !st.incremental;
    set_target(&st); /* persist.last_target: the helper thread reads it until joined */
    atomic_store(&commit.done, false);
    if (pthread_create(&commit.thread, NULL, commit_thread, NULL) == 0) {
        atomic_store(&commit.live, true);
    } else {
        commit_bgsave(err, &st);
    }
    if (err) {
        fprintf(stderr, "kv-server: background save failed: %s%s\n", persist.save_error,
                stop_writes_armed()
                    ? " (writes are refused until a save succeeds: stop-writes-on-bgsave-error)"
                    : "");
        return;
    }
    fprintf(stderr,
            "kv-server: background save done: %s image of %lu pages, %lu bytes, in %.1f ms (pause "
            "%.2f ms after %u rounds, %lu copied by writers, longest writer stall %.2f ms)\n",
            st.incremental ? "an incremental" : "a full", (unsigned long)st.pages_saved,
            (unsigned long)st.image_bytes, st.duration_ns / 1e6, st.pause_ns / 1e6,
            (unsigned)st.protect_rounds, (unsigned long)st.pages_by_writers, st.max_stall_ns / 1e6);
    if (st.stall_total_ns) /* TRAPKIT_CKPT_TIMING=1: where the writers' faults spent it */
        fprintf(stderr,
                "kv-server: %lu write faults took %.1f ms in all: %.1f waiting for the instant, "
                "%.1f for a page another writer copied, %.1f copying, %.1f opening pages again; "
                "the background thread used %.1f ms of CPU and spent %.1f ms writing\n",
                (unsigned long)st.faults, st.stall_total_ns / 1e6, st.stall_pause_ns / 1e6,
                st.stall_page_ns / 1e6, st.stall_copy_ns / 1e6, st.stall_unprot_ns / 1e6,
                st.thread_cpu_ns / 1e6, st.thread_io_ns / 1e6);
}

/* Starts a background save.  tk_ckpt_start returns at once
 * (TK_CKPT_ASYNC_START): the checkpointer's thread protects the data set
 * in steps while commands go on, and the event loop takes the snapshot
 * instant between two commands once that is done (TK_CKPT_CALLER_INSTANT,
 * persist_poll_bgsave): a short pause, not the whole protection.  The
 * client that sent BGSAVE gets its reply only at the instant, and its next
 * commands run after it (net_hold), so the image holds nothing it wrote
 * after BGSAVE replied - what a program that saves and then changes or
 * empties the store counts on, as with Redis's fork.  Other clients'
 * writes meanwhile are before the instant, as if they had come before
 * BGSAVE.  fork's instant is the fork, here. */
/* A background save that could not start (persist.save_error says why):
 * noted as failed, and said.  -1. */
static int start_failed(void)
{
    fprintf(stderr, "kv-server: the background save could not start: %s\n", persist.save_error);
    persist.last_status = "err";
    persist.bgsave_failed = true;
    return -1;
}

int persist_start_bgsave(void)
{
    persist.last_bgsave_try = time(NULL);
    persist.save_error[0] = 0;
    if (open_tmp() < 0) return start_failed(); /* (the save points wait 5 s to try again) */
    persist.changes_at_save = server.changes;
    int err = tk_ckpt_start(persist.ckpt, persist.save_fd,
                            save_flags() | TK_CKPT_ASYNC_START | TK_CKPT_CALLER_INSTANT);
    if (err) {
        snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
        close(persist.save_fd);
        persist.save_fd = -1;
        unlink(persist.tmp_path);
        persist.need_full = true;
        return start_failed();
    }
    persist.save_instant_ms = wall_ms();
    persist.bgsave = true;
    persist.bgsave_start = time(NULL);
    tk_ckpt_stats st;
    tk_ckpt_poll(persist.ckpt, &st);
    persist.instant_pending = st.instant_monotonic_ns == 0;
    return 0;
}

bool persist_writes_refused(void)
{
    return stop_writes_armed() && persist.bgsave_failed;
}

/* SAVE: the image is complete and published when it returns 0. */
int persist_save(void)
{
    persist_finish_loading(); /* the image is replaced only once every page was verified */
    persist.save_error[0] = 0;
    if (open_tmp() < 0) {
        fprintf(stderr, "kv-server: saving failed: %s\n", persist.save_error);
        persist.last_status = "err";
        return -1;
    }
    tk_ckpt_stats st;
    persist.changes_at_save = server.changes;
    int err = tk_ckpt_start(persist.ckpt, persist.save_fd, save_flags());
    persist.save_instant_ms = wall_ms();
    if (!err) err = tk_ckpt_wait(persist.ckpt, &st);
    if (err) snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
    if (!err) set_target(&st);
    err = publish_image(err, persist.save_fd, persist.last_target, !err && !st.incremental);
    note_save(err, err ? NULL : &st);
    if (err && !persist.save_error[0])
        snprintf(persist.save_error, sizeof persist.save_error, "saving failed: %s",
                 strerror(-err));
    return err ? -1 : 0;
}

/* A background save still running: wait for it and publish its image. */
static void finish_bgsave(void)
{
    if (!persist.bgsave) return;
    if (!atomic_load(&commit.live)) {
        tk_ckpt_stats fin;
        bool held = persist.instant_pending;
        if (held) persist.changes_at_save = server.changes; /* wait cuts */
        persist.instant_pending = false;
        int err = tk_ckpt_wait(persist.ckpt, &fin);
        if (held) net_release_held(err);
        commit_bgsave(err, &fin);
        return;
    }
    join_commit();
}

/* The save points (--save): a background save starts once `seconds` have
 * passed since the last successful save and `changes` writes were made;
 * after a failed one, not before 5 seconds (as Redis does). */
void persist_check_save_points(void)
{
    if (persist.bgsave || server.stop || (persist.lazy && persist.bgsave_scheduled)) return;
    time_t now = time(NULL);
    for (int i = 0; i < persist.nsave_points; i++) {
        const struct save_point *sp = &persist.save_points[i];
        if (server.changes >= (uint64_t)sp->changes && now - persist.lastsave > sp->seconds &&
            (strcmp(persist.last_status, "ok") == 0 || now - persist.last_bgsave_try >= 5)) {
            if (persist.lazy) {
                char why[96];
                snprintf(why, sizeof why, "%ld changes in %ld seconds", (long)server.changes,
                         (long)sp->seconds);
                persist_schedule_save(why);
                return;
            }
            fprintf(stderr, "kv-server: %ld changes in %ld seconds: saving\n", (long)server.changes,
                    (long)sp->seconds);
            persist_start_bgsave(); /* (says why on stderr if it cannot) */
            return;
        }
    }
}

static void compact_at_shutdown(void);

/* SHUTDOWN and SIGTERM/SIGINT.  Saves if asked to (SAVE) or, by default,
 * if save points are configured - as Redis does - and refuses to exit if
 * that save fails.  A background save still running is waited for when an
 * image is to be written anyway, else abandoned (its file removed).
 * Returns -1 if the server must keep running; else does not return. */
int persist_shutdown(enum shutdown_mode mode)
{
    bool save = mode == SHUTDOWN_SAVE || (mode == SHUTDOWN_DEFAULT && persist.nsave_points > 0);
    fprintf(stderr, "kv-server: shutting down%s\n", save ? ", saving first" : "");
    if (save) {
        persist_finish_loading();
        finish_bgsave();
        if (persist_save() < 0) {
            fprintf(stderr, "kv-server: error trying to save the data set, cannot exit: %s\n",
                    persist.save_error);
            return -1;
        }
    } else if (persist.bgsave) {
        fprintf(stderr, "kv-server: a background save is running: abandoning it\n");
        if (atomic_load(&commit.live)) {
            join_commit();
        } else {
            unlink(persist.tmp_path);
            fflush(NULL);
            _exit(0); /* the snapshot's thread (or fork child) stops with the process */
        }
    }
    /* a compaction that has ended is noted; one still running ends with the
     * process, as at a crash (its file is removed at the next start) */
    compact_at_shutdown();
    if (persist.lazy && persist.prefetch) {
        /* still loading: its prefetch thread ends first (once the pages it
         * brings in are there: no longer than the load would take); with
         * --restore-prefetch no, the fault handler ends with the process */
        tk_ckpt_lazy_destroy(persist.lazy_restore);
        persist.lazy_restore = NULL;
        persist.lazy = false;
    }
    tk_ckpt_destroy(persist.ckpt);
    fflush(NULL);
    exit(0);
}

/* ---- compaction -------------------------------------------------------- */
/* Once the chain holds --compact-after incremental images, or they add up
 * to --compact-percentage of the full image (and --compact-min-size), a
 * thread writes the whole chain as one full image (tk_ckpt_compact: no
 * snapshot, so no write fault in the server) to DIR/NAME.tmp-compact,
 * renames it over DIR/NAME and removes the incremental images it covers.
 * The compacted image has the newest image's sequence number and lineage,
 * so the images saved since (DIR/NAME.inc.SEQ with a greater SEQ) chain
 * onto it.  A crash at any instant leaves a chain that loads the last
 * completed save: before the rename the old chain is whole; after it,
 * DIR/NAME's sequence number is the newest compacted image's, and the old
 * incremental images no longer chain onto it (the next start removes
 * them).  A full image saved while the compaction runs makes it give up:
 * it would be older. */
static struct {
    pthread_t thread;
    atomic_bool live, done;
    /* set by the event loop before the thread starts */
    int fds[MAX_CHAIN + 1];
    size_t n;
    uint64_t base_seq, last_seq, inc_bytes, generation;
    unsigned flags;
    int64_t start_ms;
    /* set by the thread before done */
    int err;
    bool replaced;  /* the compacted image is DIR/NAME now */
    bool overtaken; /* a full image was saved meanwhile: the compaction gave up */
    uint64_t bytes;
    char error[PATH_MAX + 256];
} compact;

static void *compact_thread(void *arg)
{
    (void)arg;
    /* below the event loop: a compaction is never urgent */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    int err = 0;
    int out = open(persist.compact_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        err = -errno;
        snprintf(compact.error, sizeof compact.error, "cannot open %s: %s", persist.compact_path,
                 strerror(errno));
    } else {
        err = tk_ckpt_compact(compact.fds, compact.n, out, compact.flags);
        struct stat st;
        if (err)
            snprintf(compact.error, sizeof compact.error, "%s", tk_last_error());
        else if (fstat(out, &st) == 0)
            compact.bytes = (uint64_t)st.st_size;
        close(out);
    }
    for (size_t i = 0; i < compact.n; i++) close(compact.fds[i]);
    if (!err && persist.compact_delay_ms > 0) /* tests: saves complete meanwhile */
        nanosleep(&(struct timespec){persist.compact_delay_ms / 1000,
                                     persist.compact_delay_ms % 1000 * 1000000L},
                  NULL);
    /* tests: held until the test lets it go (at most 10 minutes) */
    for (int i = 0;
         !err && persist.compact_hold[0] && i < 60000 && access(persist.compact_hold, F_OK); i++)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    if (!err) { /* tk_ckpt_compact synced it */
        pthread_mutex_lock(&publish_lock);
        if (full_generation != compact.generation) {
            compact.overtaken = true;
        } else if (rename(persist.compact_path, persist.path) < 0) {
            err = -errno;
            snprintf(compact.error, sizeof compact.error, "cannot rename it to %s: %s",
                     persist.path, strerror(errno));
        } else {
            sync_dir();
            full_generation++;
            compact.replaced = true;
            for (uint64_t seq = compact.base_seq + 1; seq <= compact.last_seq; seq++) {
                char path[PATH_MAX + 32];
                inc_path(path, sizeof path, seq);
                unlink(path);
            }
        }
        pthread_mutex_unlock(&publish_lock);
    }
    if (!compact.replaced) unlink(persist.compact_path);
    compact.err = err;
    atomic_store(&compact.done, true);
    return NULL;
}

/* Whether the chain should be compacted now. */
static bool compact_due(void)
{
    if (!compaction_on() || persist.lazy || persist.bgsave || server.stop) return false;
    uint64_t incs = persist.chain.last_seq - persist.chain.base_seq;
    if (incs == 0) return false;
    if (!strcmp(persist.last_compact_status, "err") && time(NULL) - persist.last_compact_try < 5)
        return false;
    return (persist.compact_after > 0 && incs >= (uint64_t)persist.compact_after) ||
           (persist.compact_percentage > 0 && persist.chain.inc_bytes >= persist.compact_min_size &&
            persist.chain.inc_bytes * 100 >=
                persist.chain.base_bytes * (uint64_t)persist.compact_percentage);
}

/* The chain could not be compacted: a damaged or missing image, or the
 * compacted one could not be written.  The next save is a full image, and
 * one is saved now: the data is in memory, and an image chained onto a
 * damaged one would not load. */
static void compact_failed(const char *why)
{
    persist.last_compact_status = "err";
    persist.need_full = true;
    fprintf(stderr,
            "kv-server: compacting the chain failed: %s; a full image is saved in its place\n",
            why);
    persist.bgsave_scheduled = true; /* (persist_poll_loading starts it) */
}

static bool compaction_live(void)
{
    return atomic_load(&compact.live);
}

/* Opens the chain as it is on disk (no save is being published: the event
 * loop's thread, no BGSAVE running) and starts the thread. */
static void start_compact(void)
{
    persist.last_compact_try = time(NULL);
    compact.n = 0;
    compact.base_seq = persist.chain.base_seq;
    compact.last_seq = persist.chain.last_seq;
    compact.inc_bytes = persist.chain.inc_bytes;
    compact.flags = persist.compress ? TK_CKPT_COMPRESS : 0;
    compact.err = 0;
    compact.replaced = compact.overtaken = false;
    compact.bytes = 0;
    compact.error[0] = 0;
    pthread_mutex_lock(&publish_lock);
    compact.generation = full_generation;
    pthread_mutex_unlock(&publish_lock);
    char why[PATH_MAX + 128];
    if (open_chain(compact.fds, &compact.n, why, sizeof why) < 0) goto fail;
    atomic_store(&compact.done, false);
    compact.start_ms = mono_ms();
    if (pthread_create(&compact.thread, NULL, compact_thread, NULL) != 0) {
        snprintf(why, sizeof why, "cannot start a thread");
        goto fail;
    }
    atomic_store(&compact.live, true);
    fprintf(stderr, "kv-server: compacting the chain: the full image and %lu incremental images\n",
            (unsigned long)(compact.last_seq - compact.base_seq));
    return;
fail:
    for (size_t i = 0; i < compact.n; i++) close(compact.fds[i]);
    compact_failed(why);
}

/* The thread has ended: what INFO reports, and the chain as it is now. */
static void join_compact(void)
{
    pthread_join(compact.thread, NULL);
    atomic_store(&compact.live, false);
    persist.last_compact_ms = (long)(mono_ms() - compact.start_ms);
    if (compact.err) return compact_failed(compact.error);
    persist.last_compact_status = "ok";
    if (compact.overtaken) {
        fprintf(stderr, "kv-server: a full image was saved while the chain was compacted: the "
                        "compaction is dropped\n");
        return;
    }
    persist.compactions++;
    /* a full image saved after the rename is noted already: it stays */
    if (persist.chain.base_seq == compact.base_seq) {
        persist.chain.base_seq = compact.last_seq;
        persist.chain.base_bytes = compact.bytes;
        persist.chain.inc_bytes -= compact.inc_bytes;
    }
    fprintf(stderr,
            "kv-server: compacted the chain: a full image of %lu bytes replaces it and %lu "
            "incremental images (%lu bytes), in %ld ms\n",
            (unsigned long)compact.bytes, (unsigned long)(compact.last_seq - compact.base_seq),
            (unsigned long)compact.inc_bytes, persist.last_compact_ms);
}

static void compact_at_shutdown(void)
{
    if (atomic_load(&compact.live) && atomic_load(&compact.done)) join_compact();
}

void persist_poll_compact(void)
{
    if (atomic_load(&compact.live)) {
        if (atomic_load(&compact.done)) join_compact();
        return;
    }
    if (compact_due()) start_compact();
}

bool persist_compacting(int64_t *since_ms)
{
    if (!atomic_load(&compact.live)) return false;
    *since_ms = compact.start_ms;
    return true;
}

/* ---- save points ------------------------------------------------------- */
/* --save "SECONDS CHANGES [SECONDS CHANGES ...]" or "" */
bool persist_parse_save_points(const char *v)
{
    persist.nsave_points = 0;
    const char *p = v;
    for (;;) {
        char *end;
        while (*p == ' ') p++;
        if (!*p) return true;
        long sec = strtol(p, &end, 10);
        if (end == p || sec < 0 || *end != ' ') return false;
        p = end;
        long ch = strtol(p, &end, 10);
        if (end == p || ch < 0 || (*end && *end != ' ')) return false;
        if (persist.nsave_points == MAX_SAVE_POINTS) return false;
        persist.save_points[persist.nsave_points++] = (struct save_point){sec, ch};
        p = end;
    }
}

void persist_save_points_str(char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < persist.nsave_points; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%ld %ld", i ? " " : "", persist.save_points[i].seconds,
                 persist.save_points[i].changes);
    }
}
