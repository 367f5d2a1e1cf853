/* examples/kv-server/persist.c - persistence (persist.h): loading the
 * image at start, SAVE, BGSAVE and the save points, SHUTDOWN, and the fork
 * mechanism's child.  main.c describes what is saved when, as Redis does. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "net.h"
#include "persist.h"
#include "server.h"
#include "store.h"

struct persist_state persist = {
    .save_fd = -1, .last_status = "ok", .dbfile = "dump.tkimg", .dir = ".", .last_bgsave_ms = -1};

/* ---- loading ----------------------------------------------------------- */
/* Only a missing image (ENOENT) formats an empty store.  An image that
 * exists but cannot be opened or read stops the server: starting empty
 * would let the next save replace it. */
int persist_load_image(const struct tk_ckpt_area *ar)
{
    const char *why = "; not starting, as an empty store would replace it at the next save";
    int img = open(persist.path, O_RDONLY | O_CLOEXEC);
    if (img < 0) {
        int e = errno;
        struct stat lst;
        if (e == ENOENT && lstat(persist.path, &lst) < 0 && errno == ENOENT) {
            server.kv = kv_format(ar->addr, ar->len);
            return server.kv ? 0 : -1;
        }
        fprintf(stderr, "kv-server: cannot open the image %s: %s%s\n", persist.path,
                e == ENOENT ? "a symbolic link to nothing" : strerror(e), why);
        return -1;
    }
    struct stat sb;
    if (fstat(img, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "kv-server: the image %s is not a regular file%s\n", persist.path, why);
        close(img);
        return -1;
    }
    tk_ckpt_image_info info;
    int err = tk_ckpt_info(img, &info);
    if (err < 0) {
        if (err == -EINVAL)
            fprintf(stderr, "kv-server: %s is not a usable image: %s\n", persist.path,
                    tk_last_error());
        else
            fprintf(stderr, "kv-server: cannot read the image %s: %s%s\n", persist.path,
                    strerror(-err), why);
        close(img);
        return -1;
    }
    if (info.nareas != 1 || info.area_len[0] != ar->len) {
        fprintf(stderr, "kv-server: %s was saved with --memory %lu; start with that size\n",
                persist.path, (unsigned long)info.area_len[0]);
        close(img);
        return -1;
    }
    err = tk_ckpt_restore(ar, 1, &img, 1);
    close(img);
    if (err < 0) {
        fprintf(stderr, "kv-server: cannot load %s: %s%s\n", persist.path, tk_last_error(), why);
        return -1;
    }
    const char *bad;
    server.kv = kv_open(ar->addr, ar->len, &bad);
    if (!server.kv) {
        fprintf(stderr, "kv-server: cannot load %s: %s\n", persist.path,
                bad ? bad : "out of memory");
        return -1;
    }
    persist.last_instant_ms = (int64_t)(info.created_ns / 1000000u);
    fprintf(stderr, "kv-server: loaded %lu keys from %s (its snapshot instant: %.3f)\n",
            (unsigned long)kv_count(server.kv), persist.path, persist.last_instant_ms / 1e3);
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

/* The image in fd is complete (unless err): make it the current one, or
 * remove it.  Touches only the file system and fd, so the helper thread
 * below may run it while the event loop goes on; returns the error. */
static int publish_image(int err, int fd)
{
    if (!err && rename(persist.tmp_path, persist.path) < 0) err = -errno;
    if (!err) {
        int d = open(persist.dir, O_RDONLY | O_DIRECTORY);
        if (d >= 0) {
            fsync(d);
            close(d);
        }
    } else {
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
        persist.last_instant_ms = persist.save_instant_ms;
        persist.last_status = "ok";
        persist.saves++;
    } else {
        persist.last_status = "err";
    }
    persist.changes_at_save = 0;
    if (st) {
        persist.last_stats = *st;
        persist.last_bgsave_ms = (long)(st->duration_ns / 1000000);
    }
    persist.save_fd = -1;
}

/* A background save has ended: its image published, in this thread. */
static void commit_bgsave(int err, const tk_ckpt_stats *st)
{
    note_save(publish_image(err, persist.save_fd), st);
    persist.bgsave = false;
}

/* The rename and the directory's fsync can take a journal commit: a
 * helper thread does them, so the event loop does not wait; the event loop
 * notes the result once it has joined the thread. */
static struct {
    pthread_t thread;
    int err, fd;
    tk_ckpt_stats st;
    atomic_bool done, live;
} commit;

static void *commit_thread(void *arg)
{
    (void)arg;
    commit.err = publish_image(commit.err, commit.fd);
    atomic_store(&commit.done, true);
    return NULL;
}

static void join_commit(void)
{
    pthread_join(commit.thread, NULL);
    atomic_store(&commit.live, false);
    note_save(commit.err, &commit.st);
    persist.bgsave = false;
}

void persist_poll_bgsave(void)
{
    if (!persist.bgsave) return;
    if (atomic_load(&commit.live)) {
        if (atomic_load(&commit.done)) join_commit();
        return;
    }
    tk_ckpt_stats st;
    if (tk_ckpt_poll(persist.ckpt, &st) == 1) return;
    int err = tk_ckpt_wait(persist.ckpt, &st);
    commit.err = err;
    commit.fd = persist.save_fd;
    commit.st = st;
    atomic_store(&commit.done, false);
    if (pthread_create(&commit.thread, NULL, commit_thread, NULL) == 0) {
        atomic_store(&commit.live, true);
    } else {
        commit_bgsave(err, &st);
    }
    fprintf(stderr,
            "kv-server: background save %s: %lu pages in %.1f ms (pause %.2f ms, %lu copied by "
            "writers, longest writer stall %.2f ms)\n",
            err ? "failed" : "done", (unsigned long)st.pages_saved, st.duration_ns / 1e6,
            st.pause_ns / 1e6, (unsigned long)st.pages_by_writers, st.max_stall_ns / 1e6);
}

/* Starts a background save: the snapshot instant is inside tk_ckpt_start,
 * between the last command executed before and the next. */
int persist_start_bgsave(void)
{
    if (open_tmp() < 0) return -1;
    persist.last_bgsave_try = time(NULL);
    int err = tk_ckpt_start(persist.ckpt, persist.save_fd, 0);
    if (err) {
        snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
        close(persist.save_fd);
        persist.save_fd = -1;
        unlink(persist.tmp_path);
        persist.last_status = "err";
        return -1;
    }
    persist.save_instant_ms = wall_ms();
    persist.bgsave = true;
    persist.bgsave_start = time(NULL);
    persist.changes_at_save = server.changes;
    return 0;
}

/* SAVE: the image is complete and published when it returns 0. */
int persist_save(void)
{
    persist.save_error[0] = 0;
    if (open_tmp() < 0) {
        fprintf(stderr, "kv-server: saving failed: %s\n", persist.save_error);
        persist.last_status = "err";
        return -1;
    }
    tk_ckpt_stats st;
    persist.changes_at_save = server.changes;
    int err = tk_ckpt_start(persist.ckpt, persist.save_fd, 0);
    persist.save_instant_ms = wall_ms();
    if (!err) err = tk_ckpt_wait(persist.ckpt, &st);
    if (err) snprintf(persist.save_error, sizeof persist.save_error, "%s", tk_last_error());
    err = publish_image(err, persist.save_fd);
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
        int err = tk_ckpt_wait(persist.ckpt, &fin);
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
    if (persist.bgsave || server.stop) return;
    time_t now = time(NULL);
    for (int i = 0; i < persist.nsave_points; i++) {
        const struct save_point *sp = &persist.save_points[i];
        if (server.changes >= (uint64_t)sp->changes && now - persist.lastsave > sp->seconds &&
            (strcmp(persist.last_status, "ok") == 0 || now - persist.last_bgsave_try >= 5)) {
            fprintf(stderr, "kv-server: %ld changes in %ld seconds: saving\n", (long)server.changes,
                    (long)sp->seconds);
            persist_start_bgsave();
            return;
        }
    }
}

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
    tk_ckpt_destroy(persist.ckpt);
    fflush(NULL);
    exit(0);
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

/* ---- the fork child ---------------------------------------------------- */
/* A child of fork() - the fork mechanism's, which writes the image - must
 * not keep the server's sockets: a listening socket held by a child that
 * outlives a killed server would make the next server's bind() fail, and
 * client connections would stay open.  The child only writes the image. */
void persist_close_sockets_in_child(void)
{
    for (struct conn *c = net.conns; c; c = c->next) close(c->fd);
    if (net.listen_fd >= 0) close(net.listen_fd);
    if (net.ep >= 0) close(net.ep);
}
