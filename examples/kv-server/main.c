/* examples/kv-server/main.c - a small Redis-protocol (RESP2) server whose
 * data lives in one memory area checkpointed by trapkit: BGSAVE writes a
 * consistent image while the server keeps serving, and the latest image is
 * loaded at start.
 *
 *   kv-server [--port N] [--bind ADDR] [--dir DIR] [--dbfilename NAME]
 *             [--memory SIZE] [--save "SECONDS CHANGES [SECONDS CHANGES ...]"]
 *             [--mechanism uffd-thread|uffd-sigbus|posix|fork|stop-the-world]
 *
 * Commands: GET SET DEL EXISTS INCR DBSIZE PING ECHO FLUSHALL SAVE BGSAVE
 * LASTSAVE SHUTDOWN [SAVE|NOSAVE] INFO CONFIG GET (save, appendonly, dir,
 * dbfilename, port, maxmemory, databases) SELECT 0 QUIT, and COMMAND (an
 * empty list) for redis-cli.  It works with the unmodified redis-cli and
 * redis-benchmark.  Malformed input gets a RESP error; a protocol error
 * closes that connection after the error is sent.
 *
 * Persistence, as Redis does it:
 * - An image holds the data as it was at its snapshot instant: inside
 *   BGSAVE or SAVE, after the commands executed before it and before any
 *   executed after (INFO: trapkit_last_snapshot_instant_ms).  BGSAVE writes
 *   DIR/NAME.tmp and renames it to DIR/NAME when complete, so a crash
 *   (kill -9) during BGSAVE leaves the previous image as it was.
 * - LASTSAVE (INFO rdb_last_save_time) is the time the last successful save
 *   completed; at start, the start time.  rdb_changes_since_last_save counts
 *   the writes made since the last successful save's snapshot instant, so
 *   writes made while a BGSAVE runs still count after it completes.
 * - --save takes Redis's save points: a BGSAVE starts once SECONDS have
 *   passed since the last save and at least CHANGES writes were made.  The
 *   default is none (redis-server --save "").
 * - SIGTERM and SIGINT shut down as SHUTDOWN does: with save points
 *   configured the data set is saved first (synchronously); SHUTDOWN SAVE
 *   always saves, SHUTDOWN NOSAVE never.  If that save fails the server
 *   says so on stderr and keeps running (SHUTDOWN replies with an error).
 *   A BGSAVE still running is waited for if an image is to be written, and
 *   abandoned otherwise.
 * - At start, an image that exists but cannot be opened or read stops the
 *   server with an error (exit status 1): starting empty would let the next
 *   save replace it.  Only a missing image (ENOENT) starts an empty store.
 * - The fork mechanism's child closes the server's sockets (pthread_atfork),
 *   so a server restarted while the child of a killed one still writes can
 *   listen on the same port.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "store.h"

#define MAX_BULK (64u << 20)   /* longest argument */
#define MAX_ARGS (1024 * 1024) /* most arguments in one command */
#define MAX_INLINE (64u << 10) /* longest inline command or length line */

struct conn {
    struct conn *prev, *next; /* every open connection */
    int fd;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_cap, out_sent;
    bool closing; /* close once the output is sent */
};

enum shutdown_mode { SHUTDOWN_DEFAULT, SHUTDOWN_SAVE, SHUTDOWN_NOSAVE };

static struct {
    struct kv_store *kv;
    tk_ckpt *ckpt;
    const char *dir, *dbfile;
    char path[PATH_MAX], tmp_path[PATH_MAX];
    int save_fd;
    bool bgsave;
    time_t lastsave, bgsave_start;
    const char *last_status;
    uint64_t changes, changes_at_save; /* changes_at_save: at the running save's instant */
    long last_bgsave_ms;
    tk_ckpt_stats last_stats;
    enum tk_ckpt_mech mech;
    size_t mem;
    int64_t last_instant_ms; /* the snapshot instant of the image last saved or loaded */
    int64_t save_instant_ms; /* the running save's */
    time_t start_time;
    struct save_point {
        long seconds, changes;
    } save_points[16];
    int nsave_points;
    time_t last_bgsave_try;
    int listen_fd, port;
    char save_error[PATH_MAX + 256];
    struct conn *conns;
    volatile sig_atomic_t stop;
} S = {.save_fd = -1, .last_status = "ok", .dbfile = "dump.tkimg", .dir = ".", .listen_fd = -1};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- output ------------------------------------------------------------ */
static void out_raw(struct conn *c, const void *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n) cap *= 2;
        char *o = realloc(c->out, cap);
        if (!o) {
            c->closing = true;
            return;
        }
        c->out = o;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void out_str(struct conn *c, const char *s)
{
    out_raw(c, s, strlen(s));
}

static void out_fmt(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fmt(struct conn *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) out_raw(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void out_bulk(struct conn *c, const char *p, size_t n)
{
    out_fmt(c, "$%zu\r\n", n);
    out_raw(c, p, n);
    out_raw(c, "\r\n", 2);
}

/* ---- persistence ------------------------------------------------------- */
static int open_tmp(void)
{
    /* a new file each time: a snapshot of an earlier run (killed during
     * BGSAVE) may still hold the old one open */
    unlink(S.tmp_path);
    return open(S.tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

/* The image in fd is complete (unless err): make it the current one, or
 * remove it.  Touches only the file system and fd, so the helper thread
 * below may run it while the event loop goes on; returns the error. */
static int publish_image(int err, int fd)
{
    if (!err && rename(S.tmp_path, S.path) < 0) err = -errno;
    if (!err) {
        int d = open(S.dir, O_RDONLY | O_DIRECTORY);
        if (d >= 0) {
            fsync(d);
            close(d);
        }
    } else {
        unlink(S.tmp_path);
        fprintf(stderr, "kv-server: saving failed: %s\n", strerror(-err));
    }
    close(fd);
    return err;
}

/* The save has ended: what INFO and LASTSAVE report.  The event loop's
 * thread only (it owns S).  The changes made since the save's instant are
 * still unsaved. */
static void note_save(int err, const tk_ckpt_stats *st)
{
    if (!err) {
        S.lastsave = time(NULL);
        S.changes -= S.changes_at_save;
        S.last_instant_ms = S.save_instant_ms;
        S.last_status = "ok";
    } else {
        S.last_status = "err";
    }
    S.changes_at_save = 0;
    if (st) {
        S.last_stats = *st;
        S.last_bgsave_ms = (long)(st->duration_ns / 1000000);
    }
    S.save_fd = -1;
}

static void commit_save(int err, const tk_ckpt_stats *st)
{
    note_save(publish_image(err, S.save_fd), st);
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
    S.bgsave = false;
}

static void poll_bgsave(void)
{
    if (!S.bgsave) return;
    if (atomic_load(&commit.live)) {
        if (atomic_load(&commit.done)) join_commit();
        return;
    }
    tk_ckpt_stats st;
    if (tk_ckpt_poll(S.ckpt, &st) == 1) return;
    int err = tk_ckpt_wait(S.ckpt, &st);
    commit.err = err;
    commit.fd = S.save_fd;
    commit.st = st;
    atomic_store(&commit.done, false);
    if (pthread_create(&commit.thread, NULL, commit_thread, NULL) == 0) {
        atomic_store(&commit.live, true);
    } else {
        commit_save(err, &st);
        S.bgsave = false;
    }
    fprintf(stderr,
            "kv-server: background save %s: %lu pages in %.1f ms (pause %.2f ms, %lu copied by "
            "writers, longest writer stall %.2f ms)\n",
            err ? "failed" : "done", (unsigned long)st.pages_saved, st.duration_ns / 1e6,
            st.pause_ns / 1e6, (unsigned long)st.pages_by_writers, st.max_stall_ns / 1e6);
}

/* Starts a background save: the snapshot instant is inside tk_ckpt_start,
 * between the last command executed before and the next. */
static int start_bgsave(void)
{
    S.save_fd = open_tmp();
    if (S.save_fd < 0) {
        snprintf(S.save_error, sizeof S.save_error, "cannot open %s: %s", S.tmp_path,
                 strerror(errno));
        return -1;
    }
    S.last_bgsave_try = time(NULL);
    int err = tk_ckpt_start(S.ckpt, S.save_fd, 0);
    if (err) {
        snprintf(S.save_error, sizeof S.save_error, "%s", tk_last_error());
        close(S.save_fd);
        S.save_fd = -1;
        unlink(S.tmp_path);
        S.last_status = "err";
        return -1;
    }
    S.save_instant_ms = wall_ms();
    S.bgsave = true;
    S.bgsave_start = time(NULL);
    S.changes_at_save = S.changes;
    return 0;
}

/* SAVE: the image is complete and published when it returns 0. */
static int save_sync(void)
{
    S.save_fd = open_tmp();
    if (S.save_fd < 0) {
        snprintf(S.save_error, sizeof S.save_error, "cannot open %s: %s", S.tmp_path,
                 strerror(errno));
        fprintf(stderr, "kv-server: saving failed: %s\n", S.save_error);
        S.last_status = "err";
        return -1;
    }
    tk_ckpt_stats st;
    S.changes_at_save = S.changes;
    int err = tk_ckpt_start(S.ckpt, S.save_fd, 0);
    S.save_instant_ms = wall_ms();
    if (!err) err = tk_ckpt_wait(S.ckpt, &st);
    if (err) snprintf(S.save_error, sizeof S.save_error, "%s", tk_last_error());
    err = publish_image(err, S.save_fd);
    note_save(err, err ? NULL : &st);
    if (err && !S.save_error[0])
        snprintf(S.save_error, sizeof S.save_error, "saving failed: %s", strerror(-err));
    return err ? -1 : 0;
}

/* A background save still running: wait for it and publish its image. */
static void finish_bgsave(void)
{
    if (!S.bgsave) return;
    if (!atomic_load(&commit.live)) {
        tk_ckpt_stats fin;
        int err = tk_ckpt_wait(S.ckpt, &fin);
        commit_save(err, &fin);
        S.bgsave = false;
        return;
    }
    join_commit();
}

/* The save points (--save): a background save starts once `seconds` have
 * passed since the last successful save and `changes` writes were made;
 * after a failed one, not before 5 seconds (as Redis does). */
static void check_save_points(void)
{
    if (S.bgsave || S.stop) return;
    time_t now = time(NULL);
    for (int i = 0; i < S.nsave_points; i++) {
        const struct save_point *sp = &S.save_points[i];
        if (S.changes >= (uint64_t)sp->changes && now - S.lastsave > sp->seconds &&
            (strcmp(S.last_status, "ok") == 0 || now - S.last_bgsave_try >= 5)) {
            fprintf(stderr, "kv-server: %ld changes in %ld seconds: saving\n", (long)S.changes,
                    (long)sp->seconds);
            start_bgsave();
            return;
        }
    }
}

/* SHUTDOWN and SIGTERM/SIGINT.  Saves if asked to (SAVE) or, by default,
 * if save points are configured - as Redis does - and refuses to exit if
 * that save fails.  A background save still running is waited for when an
 * image is to be written anyway, else abandoned (its file removed).
 * Returns -1 if the server must keep running; else does not return. */
static int shutdown_server(enum shutdown_mode mode)
{
    bool save = mode == SHUTDOWN_SAVE || (mode == SHUTDOWN_DEFAULT && S.nsave_points > 0);
    fprintf(stderr, "kv-server: shutting down%s\n", save ? ", saving first" : "");
    if (save) {
        finish_bgsave();
        if (save_sync() < 0) {
            fprintf(stderr, "kv-server: error trying to save the data set, cannot exit: %s\n",
                    S.save_error);
            return -1;
        }
    } else if (S.bgsave) {
        fprintf(stderr, "kv-server: a background save is running: abandoning it\n");
        if (atomic_load(&commit.live)) {
            join_commit();
        } else {
            unlink(S.tmp_path);
            fflush(NULL);
            _exit(0); /* the snapshot's thread (or fork child) stops with the process */
        }
    }
    tk_ckpt_destroy(S.ckpt);
    fflush(NULL);
    exit(0);
}

/* ---- commands ---------------------------------------------------------- */
struct arg {
    const char *p;
    size_t n;
};

static bool is(const struct arg *a, const char *name)
{
    return a->n == strlen(name) && strncasecmp(a->p, name, a->n) == 0;
}

static bool parse_i64(const char *p, size_t n, long long *out)
{
    if (n == 0 || n > 20) return false;
    char buf[24];
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || (buf[0] == '0' && n > 1) || buf[0] == '+' || buf[0] == ' ') return false;
    *out = v;
    return true;
}

static void wrong_args(struct conn *c, const struct arg *cmd)
{
    char name[65];
    size_t n = cmd->n > 64 ? 64 : cmd->n;
    for (size_t i = 0; i < n; i++)
        name[i] = (char)((cmd->p[i] >= 'A' && cmd->p[i] <= 'Z') ? cmd->p[i] + 32 : cmd->p[i]);
    name[n] = 0;
    out_fmt(c, "-ERR wrong number of arguments for '%s' command\r\n", name);
}

static void cmd_info(struct conn *c)
{
    char buf[2048];
    tk_ckpt_stats st = S.last_stats;
    int n = snprintf(buf, sizeof buf,
                     "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:%lu\r\n"
                     "rdb_bgsave_in_progress:%d\r\nrdb_last_save_time:%ld\r\n"
                     "rdb_last_bgsave_status:%s\r\nrdb_last_bgsave_time_sec:%ld\r\n"
                     "rdb_current_bgsave_time_sec:%ld\r\n"
                     "trapkit_checkpoint_mechanism:%s\r\ntrapkit_last_pages_saved:%lu\r\n"
                     "trapkit_last_pages_by_writers:%lu\r\ntrapkit_last_pause_us:%lu\r\n"
                     "trapkit_last_max_writer_stall_us:%lu\r\n"
                     "trapkit_last_snapshot_instant_ms:%lld\r\n"
                     "\r\n# Keyspace\r\ndb0:keys=%lu,expires=0,avg_ttl=0\r\n"
                     "\r\n# Memory\r\nused_memory:%lu\r\n",
                     (unsigned long)S.changes, S.bgsave ? 1 : 0, (long)S.lastsave, S.last_status,
                     S.last_bgsave_ms < 0 ? -1L : S.last_bgsave_ms / 1000,
                     S.bgsave ? (long)(time(NULL) - S.bgsave_start) : -1L,
                     tk_ckpt_mech_name(S.mech), (unsigned long)st.pages_saved,
                     (unsigned long)st.pages_by_writers, (unsigned long)(st.pause_ns / 1000),
                     (unsigned long)(st.max_stall_ns / 1000), (long long)S.last_instant_ms,
                     (unsigned long)kv_count(S.kv), (unsigned long)kv_used(S.kv));
    out_bulk(c, buf, (size_t)n);
}

static void save_points_str(char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < S.nsave_points; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%ld %ld", i ? " " : "", S.save_points[i].seconds,
                 S.save_points[i].changes);
    }
}

/* CONFIG GET: the parameters tools ask for (redis-benchmark: save,
 * appendonly), with their values. */
static void cmd_config_get(struct conn *c, const struct arg *names, size_t n)
{
    char save[512], port[16], mem[24];
    save_points_str(save, sizeof save);
    snprintf(port, sizeof port, "%d", S.port);
    snprintf(mem, sizeof mem, "%zu", S.mem);
    const char *params[][2] = {{"save", save},           {"appendonly", "no"}, {"dir", S.dir},
                               {"dbfilename", S.dbfile}, {"port", port},       {"maxmemory", mem},
                               {"databases", "1"}};
    size_t np = sizeof params / sizeof params[0];
    bool want[sizeof params / sizeof params[0]] = {false};
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < np; k++)
            if (!want[k] && is(&names[i], params[k][0])) {
                want[k] = true;
                count++;
            }
    out_fmt(c, "*%zu\r\n", 2 * count);
    for (size_t k = 0; k < np; k++)
        if (want[k]) {
            out_bulk(c, params[k][0], strlen(params[k][0]));
            out_bulk(c, params[k][1], strlen(params[k][1]));
        }
}

static void execute(struct conn *c, struct arg *a, size_t argc)
{
    if (argc == 0) return;
    struct arg *cmd = &a[0];
    if (is(cmd, "GET")) {
        if (argc != 2) return wrong_args(c, cmd);
        const char *v;
        size_t vn;
        if (kv_get(S.kv, a[1].p, a[1].n, &v, &vn))
            out_bulk(c, v, vn);
        else
            out_str(c, "$-1\r\n");
    } else if (is(cmd, "SET")) {
        if (argc < 3) return wrong_args(c, cmd);
        bool nx = false, xx = false;
        for (size_t i = 3; i < argc; i++) {
            if (is(&a[i], "NX"))
                nx = true;
            else if (is(&a[i], "XX"))
                xx = true;
            else
                return out_str(c, "-ERR syntax error\r\n");
        }
        if (nx && xx) return out_str(c, "-ERR syntax error\r\n");
        if (nx || xx) {
            const char *v;
            size_t vn;
            bool exists = kv_get(S.kv, a[1].p, a[1].n, &v, &vn);
            if ((nx && exists) || (xx && !exists)) return out_str(c, "$-1\r\n");
        }
        if (kv_set(S.kv, a[1].p, a[1].n, a[2].p, a[2].n) < 0)
            return out_str(c, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        S.changes++;
        out_str(c, "+OK\r\n");
    } else if (is(cmd, "DEL")) {
        if (argc < 2) return wrong_args(c, cmd);
        long n = 0;
        for (size_t i = 1; i < argc; i++) n += kv_del(S.kv, a[i].p, a[i].n);
        S.changes += (uint64_t)n;
        out_fmt(c, ":%ld\r\n", n);
    } else if (is(cmd, "EXISTS")) {
        if (argc < 2) return wrong_args(c, cmd);
        long n = 0;
        for (size_t i = 1; i < argc; i++) {
            const char *v;
            size_t vn;
            n += kv_get(S.kv, a[i].p, a[i].n, &v, &vn);
        }
        out_fmt(c, ":%ld\r\n", n);
    } else if (is(cmd, "INCR")) {
        if (argc != 2) return wrong_args(c, cmd);
        const char *v;
        size_t vn;
        long long x = 0;
        if (kv_get(S.kv, a[1].p, a[1].n, &v, &vn) && !parse_i64(v, vn, &x))
            return out_str(c, "-ERR value is not an integer or out of range\r\n");
        if (x == LLONG_MAX) return out_str(c, "-ERR increment or decrement would overflow\r\n");
        x++;
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%lld", x);
        if (kv_set(S.kv, a[1].p, a[1].n, buf, (size_t)n) < 0)
            return out_str(c, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        S.changes++;
        out_fmt(c, ":%lld\r\n", x);
    } else if (is(cmd, "DBSIZE")) {
        out_fmt(c, ":%lu\r\n", (unsigned long)kv_count(S.kv));
    } else if (is(cmd, "PING")) {
        if (argc > 2) return wrong_args(c, cmd);
        if (argc == 2)
            out_bulk(c, a[1].p, a[1].n);
        else
            out_str(c, "+PONG\r\n");
    } else if (is(cmd, "ECHO")) {
        if (argc != 2) return wrong_args(c, cmd);
        out_bulk(c, a[1].p, a[1].n);
    } else if (is(cmd, "FLUSHALL") || is(cmd, "FLUSHDB")) {
        kv_flush(S.kv);
        S.changes++;
        out_str(c, "+OK\r\n");
    } else if (is(cmd, "BGSAVE")) {
        if (S.bgsave) return out_str(c, "-ERR Background save already in progress\r\n");
        if (start_bgsave() < 0) return out_fmt(c, "-ERR %s\r\n", S.save_error);
        out_str(c, "+Background saving started\r\n");
    } else if (is(cmd, "SAVE")) {
        if (S.bgsave) return out_str(c, "-ERR Background save already in progress\r\n");
        if (save_sync() < 0) return out_fmt(c, "-ERR %s\r\n", S.save_error);
        out_str(c, "+OK\r\n");
    } else if (is(cmd, "SHUTDOWN")) {
        enum shutdown_mode mode = SHUTDOWN_DEFAULT;
        for (size_t i = 1; i < argc; i++) {
            if (is(&a[i], "SAVE") && mode == SHUTDOWN_DEFAULT)
                mode = SHUTDOWN_SAVE;
            else if (is(&a[i], "NOSAVE") && mode == SHUTDOWN_DEFAULT)
                mode = SHUTDOWN_NOSAVE;
            else
                return out_str(c, "-ERR syntax error\r\n");
        }
        if (shutdown_server(mode) < 0)
            return out_str(c, "-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    } else if (is(cmd, "LASTSAVE")) {
        out_fmt(c, ":%ld\r\n", (long)S.lastsave);
    } else if (is(cmd, "INFO")) {
        cmd_info(c);
    } else if (is(cmd, "CONFIG")) {
        if (argc >= 3 && is(&a[1], "GET")) return cmd_config_get(c, a + 2, argc - 2);
        out_str(c, "-ERR only CONFIG GET is supported\r\n");
    } else if (is(cmd, "COMMAND")) {
        out_str(c, "*0\r\n");
    } else if (is(cmd, "SELECT")) {
        if (argc != 2) return wrong_args(c, cmd);
        if (is(&a[1], "0")) return out_str(c, "+OK\r\n");
        out_str(c, "-ERR DB index is out of range\r\n");
    } else if (is(cmd, "QUIT")) {
        out_str(c, "+OK\r\n");
        c->closing = true;
    } else {
        out_fmt(c, "-ERR unknown command '%.*s'\r\n", (int)(cmd->n > 64 ? 64 : cmd->n), cmd->p);
    }
}

/* ---- the protocol ------------------------------------------------------ */
static void protocol_error(struct conn *c, const char *what)
{
    out_fmt(c, "-ERR Protocol error: %s\r\n", what);
    c->closing = true;
}

/* Parses a decimal line "<digits>\r\n" at p (after the type byte).
 * Returns bytes used, 0 if incomplete, -1 if malformed. */
static long parse_len_line(const char *p, size_t n, long long *v)
{
    const char *nl = memchr(p, '\n', n);
    if (!nl) return n > MAX_INLINE ? -1 : 0;
    size_t len = (size_t)(nl - p);
    if (len == 0 || p[len - 1] != '\r') return -1;
    len--;
    if (len == 0 || len > 19) return -1;
    long long x = 0;
    size_t i = 0;
    bool neg = p[0] == '-';
    if (neg) i = 1;
    if (i == len) return -1;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        if (x > (LLONG_MAX - (p[i] - '0')) / 10) return -1; /* too large: a protocol error */
        x = x * 10 + (p[i] - '0');
    }
    *v = neg ? -x : x;
    return (long)(nl - p + 1);
}

/* Runs every complete command in c->in. */
static void process(struct conn *c)
{
    size_t pos = 0;
    static struct arg *argv;
    static size_t argv_cap;
    while (pos < c->in_len && !c->closing) {
        const char *p = c->in + pos;
        size_t n = c->in_len - pos;
        size_t argc = 0, used = 0;
        if (p[0] == '*') {
            long long count;
            long l = parse_len_line(p + 1, n - 1, &count);
            if (l < 0) return protocol_error(c, "invalid multibulk length");
            if (l == 0) break;
            if (count > MAX_ARGS) return protocol_error(c, "invalid multibulk length");
            used = 1 + (size_t)l;
            if (count <= 0) {
                pos += used;
                continue;
            }
            if ((size_t)count > argv_cap) {
                struct arg *na = realloc(argv, (size_t)count * sizeof *na);
                if (!na) return protocol_error(c, "out of memory");
                argv = na;
                argv_cap = (size_t)count;
            }
            bool complete = true;
            for (long long i = 0; i < count; i++) {
                if (used >= n) {
                    complete = false;
                    break;
                }
                if (p[used] != '$') {
                    out_fmt(c, "-ERR Protocol error: expected '$', got '%c'\r\n",
                            (p[used] >= 32 && p[used] < 127) ? p[used] : '?');
                    c->closing = true;
                    return;
                }
                long long bl;
                long ll = parse_len_line(p + used + 1, n - used - 1, &bl);
                if (ll < 0 || (ll > 0 && (bl < 0 || bl > MAX_BULK)))
                    return protocol_error(c, "invalid bulk length");
                if (ll == 0) {
                    complete = false;
                    break;
                }
                size_t start = used + 1 + (size_t)ll;
                if (n - start < (size_t)bl + 2) {
                    complete = false;
                    break;
                }
                if (p[start + (size_t)bl] != '\r' || p[start + (size_t)bl + 1] != '\n')
                    return protocol_error(c, "bulk string not terminated by CRLF");
                argv[argc++] = (struct arg){p + start, (size_t)bl};
                used = start + (size_t)bl + 2;
            }
            if (!complete) break;
        } else {
            const char *nl = memchr(p, '\n', n);
            if (!nl) {
                if (n > MAX_INLINE) return protocol_error(c, "too big inline request");
                break;
            }
            used = (size_t)(nl - p) + 1;
            size_t end = (size_t)(nl - p);
            if (end && p[end - 1] == '\r') end--;
            if (argv_cap < 64) {
                struct arg *na = realloc(argv, 64 * sizeof *na);
                if (!na) return protocol_error(c, "out of memory");
                argv = na;
                argv_cap = 64;
            }
            for (size_t i = 0; i < end && argc < 64;) {
                while (i < end && (p[i] == ' ' || p[i] == '\t')) i++;
                size_t s = i;
                while (i < end && p[i] != ' ' && p[i] != '\t') i++;
                if (i > s) argv[argc++] = (struct arg){p + s, i - s};
            }
        }
        execute(c, argv, argc);
        pos += used;
    }
    if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
}

/* ---- the event loop ---------------------------------------------------- */
static int ep = -1;

static void conn_close(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        S.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Sends what it can; returns false if the connection is gone. */
static bool flush_out(struct conn *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_sent, c->out_len - c->out_sent);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            return false;
        }
        c->out_sent += (size_t)w;
    }
    if (c->out_sent == c->out_len) {
        c->out_sent = c->out_len = 0;
        if (c->closing) return false;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->out_len ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    return true;
}

static void on_readable(struct conn *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 16384) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
            if (cap > 2 * (size_t)MAX_BULK + 65536) {
                protocol_error(c, "request too large");
                break;
            }
            char *ni = realloc(c->in, cap);
            if (!ni) {
                protocol_error(c, "out of memory");
                break;
            }
            c->in = ni;
            c->in_cap = cap;
        }
        ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) {
            conn_close(c);
            return;
        }
        c->in_len += (size_t)r;
        process(c);
        if (c->closing) break;
    }
    if (!flush_out(c)) conn_close(c);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return 0;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        break;
    case 0:
        break;
    default:
        return 0;
    }
    return (size_t)v & ~(size_t)4095;
}

/* A child of fork() - the fork mechanism's, which writes the image - must
 * not keep the server's sockets: a listening socket held by a child that
 * outlives a killed server would make the next server's bind() fail, and
 * client connections would stay open.  The child only writes the image. */
static void close_sockets_in_child(void)
{
    for (struct conn *c = S.conns; c; c = c->next) close(c->fd);
    if (S.listen_fd >= 0) close(S.listen_fd);
    if (ep >= 0) close(ep);
}

static void on_signal(int sig)
{
    (void)sig;
    S.stop = 1;
}

/* Loads the image at S.path into the area, or formats an empty store if
 * there is none (ENOENT).  An image that exists but cannot be opened or
 * read stops the server: starting empty would let the next save replace
 * it.  Returns -1 after saying why on stderr. */
static int load_image(const struct tk_ckpt_area *ar)
{
    const char *why = "; not starting, as an empty store would replace it at the next save";
    int img = open(S.path, O_RDONLY | O_CLOEXEC);
    if (img < 0) {
        int e = errno;
        struct stat lst;
        if (e == ENOENT && lstat(S.path, &lst) < 0 && errno == ENOENT) {
            S.kv = kv_format(ar->addr, ar->len);
            return 0;
        }
        fprintf(stderr, "kv-server: cannot open the image %s: %s%s\n", S.path,
                e == ENOENT ? "a symbolic link to nothing" : strerror(e), why);
        return -1;
    }
    struct stat sb;
    if (fstat(img, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "kv-server: the image %s is not a regular file%s\n", S.path, why);
        close(img);
        return -1;
    }
    tk_ckpt_image_info info;
    int err = tk_ckpt_info(img, &info);
    if (err < 0) {
        if (err == -EINVAL)
            fprintf(stderr, "kv-server: %s is not a usable image: %s\n", S.path, tk_last_error());
        else
            fprintf(stderr, "kv-server: cannot read the image %s: %s%s\n", S.path, strerror(-err),
                    why);
        close(img);
        return -1;
    }
    if (info.nareas != 1 || info.area_len[0] != ar->len) {
        fprintf(stderr, "kv-server: %s was saved with --memory %lu; start with that size\n", S.path,
                (unsigned long)info.area_len[0]);
        close(img);
        return -1;
    }
    err = tk_ckpt_restore(ar, 1, &img, 1);
    close(img);
    if (err < 0) {
        fprintf(stderr, "kv-server: cannot load %s: %s%s\n", S.path, tk_last_error(), why);
        return -1;
    }
    S.kv = kv_open(ar->addr, ar->len);
    if (!S.kv) {
        fprintf(stderr, "kv-server: %s does not hold a kv-server store\n", S.path);
        return -1;
    }
    S.last_instant_ms = (int64_t)(info.created_ns / 1000000u);
    fprintf(stderr, "kv-server: loaded %lu keys from %s (its snapshot instant: %.3f)\n",
            (unsigned long)kv_count(S.kv), S.path, S.last_instant_ms / 1e3);
    return 0;
}

/* --save "SECONDS CHANGES [SECONDS CHANGES ...]" or "" */
static bool parse_save_points(const char *v)
{
    S.nsave_points = 0;
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
        if (S.nsave_points == 16) return false;
        S.save_points[S.nsave_points++] = (struct save_point){sec, ch};
        p = end;
    }
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "kv-server: %s\nusage: kv-server [--port N] [--bind ADDR] [--dir DIR] [--dbfilename "
            "NAME] [--memory SIZE] [--save \"SECONDS CHANGES ...\"] [--mechanism "
            "uffd-thread|uffd-sigbus|posix|fork|"
            "stop-the-world]\n",
            msg);
    return 2;
}

int main(int argc, char **argv)
{
    int port = 6379;
    const char *bind_addr = "127.0.0.1";
    S.mem = 256u << 20;
    S.mech = TK_CKPT_AUTO;
    S.last_bgsave_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage("every option takes a value");
        i++;
        if (!strcmp(o, "--port")) {
            port = atoi(v);
            if (port < 0 || port > 65535) return usage("bad --port");
        } else if (!strcmp(o, "--bind")) {
            bind_addr = v;
        } else if (!strcmp(o, "--dir")) {
            S.dir = v;
        } else if (!strcmp(o, "--dbfilename")) {
            S.dbfile = v;
        } else if (!strcmp(o, "--memory")) {
            S.mem = parse_size(v);
            if (S.mem < (1u << 20)) return usage("--memory must be at least 1m");
        } else if (!strcmp(o, "--save")) {
            if (!parse_save_points(v)) return usage("--save takes \"SECONDS CHANGES ...\" or \"\"");
        } else if (!strcmp(o, "--mechanism")) {
            S.mech = tk_ckpt_mech_parse(v);
            if (S.mech == TK_CKPT_COUNT_) return usage("unknown --mechanism");
        } else {
            return usage("unknown option");
        }
    }
    snprintf(S.path, sizeof S.path, "%s/%s", S.dir, S.dbfile);
    snprintf(S.tmp_path, sizeof S.tmp_path, "%s/%s.tmp", S.dir, S.dbfile);

    void *area = mmap(NULL, S.mem, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) {
        fprintf(stderr, "kv-server: cannot map %zu bytes: %s\n", S.mem, strerror(errno));
        return 1;
    }
    struct tk_ckpt_area ar = {area, S.mem};
    S.start_time = time(NULL);
    S.lastsave = S.start_time; /* as Redis: at start the data set counts as saved */
    if (load_image(&ar) < 0) return 1;
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = S.mech};
    if (tk_ckpt_create(&cfg, &S.ckpt) < 0) {
        fprintf(stderr, "kv-server: %s\n", tk_last_error());
        return 1;
    }
    tk_ckpt_stats none;
    tk_ckpt_poll(S.ckpt, &none);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    S.listen_fd = ls;
    pthread_atfork(NULL, NULL, close_sockets_in_child);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) return usage("bad --bind address");
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 511) < 0) {
        fprintf(stderr, "kv-server: cannot listen on %s:%d: %s\n", bind_addr, port,
                strerror(errno));
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    S.port = ntohs(sa.sin_port);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction st = {.sa_handler = on_signal};
    sigaction(SIGINT, &st, NULL);
    sigaction(SIGTERM, &st, NULL);
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev);
    printf("kv-server: listening on %s:%d, %zu MiB, checkpoints by %s, image %s\n", bind_addr,
           ntohs(sa.sin_port), S.mem >> 20, tk_ckpt_mech_name(S.mech), S.path);
    fflush(stdout);

    struct epoll_event evs[128];
    for (;;) {
        if (S.stop) {
            shutdown_server(SHUTDOWN_DEFAULT);
            S.stop = 0; /* the save failed: keep serving */
        }
        int n = epoll_wait(ep, evs, 128, S.bgsave ? 5 : 100);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) {
                for (;;) {
                    int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *c = calloc(1, sizeof *c);
                    if (!c) {
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    c->next = S.conns;
                    if (S.conns) S.conns->prev = c;
                    S.conns = c;
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            struct conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
                conn_close(c);
                continue;
            }
            if (evs[i].events & EPOLLIN)
                on_readable(c);
            else if (!flush_out(c))
                conn_close(c);
        }
        poll_bgsave();
        check_save_points();
    }
    return 0;
}
