/* examples/kv-server/main.c - a small Redis-protocol (RESP2) server whose
 * data lives in one memory area checkpointed by trapkit: BGSAVE writes a
 * consistent image while the server keeps serving, and the latest image is
 * loaded at start.
 *
 *   kv-server [--port N] [--bind ADDR] [--dir DIR] [--dbfilename NAME]
 *             [--memory SIZE] [--save "SECONDS CHANGES [SECONDS CHANGES ...]"]
 *             [--client-output-buffer-limit SIZE]
 *             [--mechanism uffd-thread|uffd-sigbus|posix|fork|stop-the-world]
 *
 * Commands, answered as redis-server 7.0 answers them:
 *   strings   GET SET [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL] SETNX SETEX PSETEX
 *             GETSET GETDEL MGET MSET MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT APPEND
 *             STRLEN GETRANGE SUBSTR SETRANGE
 *   keys      DEL UNLINK EXISTS TYPE RENAME RENAMENX KEYS SCAN [MATCH] [COUNT] [TYPE]
 *             DBSIZE FLUSHALL FLUSHDB EXPIRE PEXPIRE EXPIREAT PEXPIREAT [NX|XX|GT|LT]
 *             TTL PTTL EXPIRETIME PEXPIRETIME PERSIST
 *   lists     LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP [count] LRANGE LLEN LINDEX
 *   sets      SADD SREM SISMEMBER SMISMEMBER SMEMBERS SCARD SPOP SRANDMEMBER SSCAN
 *   hashes    HSET HMSET HSETNX HGET HMGET HDEL HLEN HEXISTS HSTRLEN HGETALL HKEYS HVALS
 *             HINCRBY HINCRBYFLOAT HSCAN
 *   zsets     ZADD [NX|XX] [GT|LT] [CH] [INCR] ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZRANK
 *             ZREVRANK ZCOUNT ZRANGE [BYSCORE] [REV] [LIMIT o c] [WITHSCORES] ZREVRANGE
 *             ZRANGEBYSCORE ZREVRANGEBYSCORE ZPOPMIN ZPOPMAX
 *   server    PING ECHO TIME INFO [server|clients|memory|persistence|stats|keyspace]
 *             CONFIG GET (save appendonly dir dbfilename port maxmemory maxmemory-policy
 *             databases proto-max-bulk-len) CONFIG RESETSTAT COMMAND (an empty list)
 *             SELECT 0 QUIT SAVE BGSAVE LASTSAVE SHUTDOWN [SAVE|NOSAVE]
 * Every value lives in the area (examples/kv-server/store.h), addressed by
 * offsets, so an image holds it and restores it at any address.  Expiry
 * times are kept there as absolute unix milliseconds, so they survive a
 * restore; an expired key is deleted when a command looks it up, and an
 * active cycle (every 100 ms, about a millisecond) deletes those nobody
 * looks at.  --memory is the area's size (maxmemory): a write whose
 * arguments need more than the free heap is refused with -OOM; one that
 * runs out part way (MSET, a multi-member ZADD) replies -OOM with what it
 * did before kept.
 *
 * It works with the unmodified redis-cli and redis-benchmark.  Replies are
 * Redis's, word for word where a test compares them with redis-server's.
 *
 * The protocol: RESP2 arrays of bulk strings, or inline commands split as
 * Redis and redis-cli split them ("..." with \n \r \t \b \a \\ \" \xHH
 * escapes, '...' with \').  Malformed input gets "-ERR Protocol error: ..."
 * and the connection is closed after it; lengths that do not fit (a count
 * above 1,048,576 arguments, a bulk above 64 MiB, any number that
 * overflows) are malformed.  An error reply never carries a client's bytes
 * as they came: a name is quoted with non-printable bytes as \xHH and cut
 * at 128 bytes.
 *
 * Fairness and memory: each event-loop turn reads at most 64 KiB from a
 * client and runs at most 1,000 of its commands, so a client pipelining
 * without pause cannot hold the others up; a client with 1 MiB of replies
 * unsent is not read until they drain (its input waits in the kernel), and
 * one whose unsent replies pass --client-output-buffer-limit (256 MiB) is
 * disconnected, as Redis's client-output-buffer-limit does.
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
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
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

#define MAX_BULK (64u << 20)            /* longest argument */
#define MAX_ARGS (1024 * 1024)          /* most arguments in one command */
#define MAX_INLINE (64u << 10)          /* longest inline command or length line */
#define QUERY_LIMIT (1024u << 20)       /* most input buffered for one command */
#define READ_CHUNK (64u << 10)          /* read from one client per event-loop turn */
#define TURN_COMMANDS 1000              /* commands run for one client per turn */
#define OUT_SOFT (1u << 20)             /* unsent output that stops reading a client */
#define OUT_HARD_DEFAULT (256ull << 20) /* unsent output that disconnects it */

struct arg {
    const char *p;
    size_t n;
};

/* A client.  Its input is parsed where it stands: in[scan..] is not yet
 * looked at; a command being parsed began at cmd_start; a multibulk has
 * mb_left bulk arguments still to come, the next of bulk_len bytes (-1:
 * its length line comes first).  Arguments are kept as offsets into in
 * (it may move as it grows) until the command is complete. */
struct conn {
    struct conn *prev, *next; /* every open connection */
    struct conn *pend_next;   /* on the list of clients with input to run */
    bool pending;
    int fd;
    uint32_t events; /* registered with epoll */
    char *in;
    size_t in_len, in_cap, scan, cmd_start;
    long long mb_left, bulk_len;
    bool need_more; /* the input holds no complete command */
    struct span {
        size_t off, n;
    } * args;
    size_t argc, args_cap;
    char *scratch; /* an inline command's words, unquoted */
    size_t scratch_cap;
    char *out;
    size_t out_len, out_cap, out_sent;
    bool closing; /* close once the output is sent */
    bool dead;    /* close now: the output limit was passed */
    uint64_t id;
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
    uint64_t saves; /* completed successfully since start */
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
    struct conn *conns, *pending;
    uint64_t nconns, next_id, total_conns, total_commands, out_limit_closed;
    unsigned long long out_hard;
    volatile sig_atomic_t stop;
} S = {.save_fd = -1,
       .last_status = "ok",
       .dbfile = "dump.tkimg",
       .dir = ".",
       .listen_fd = -1,
       .out_hard = OUT_HARD_DEFAULT};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- output ------------------------------------------------------------ */
/* Appends to the client's replies.  A client whose unsent replies would
 * pass the hard limit is marked dead: nothing more is added, and it is
 * disconnected after the command. */
static void out_raw(struct conn *c, const void *p, size_t n)
{
    if (c->dead) return;
    if (c->out_len - c->out_sent + n > S.out_hard) {
        fprintf(stderr,
                "kv-server: client %lu disconnected: %zu bytes of replies unsent, above the "
                "limit of %llu (--client-output-buffer-limit)\n",
                (unsigned long)c->id, c->out_len - c->out_sent + n, S.out_hard);
        S.out_limit_closed++;
        c->dead = true;
        return;
    }
    if (c->out_sent && c->out_len + n > c->out_cap) { /* move what is unsent to the front */
        memmove(c->out, c->out + c->out_sent, c->out_len - c->out_sent);
        c->out_len -= c->out_sent;
        c->out_sent = 0;
    }
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 16384;
        while (cap < c->out_len + n) cap *= 2;
        char *o = realloc(c->out, cap);
        if (!o) {
            c->dead = true;
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

/* An error reply: "-" and the message, whose CR and LF become spaces, so
 * that no message can end the reply early (as Redis does). */
static void out_err(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_err(struct conn *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + 1, sizeof buf - 3, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf - 4 ? (size_t)n : sizeof buf - 4;
    buf[0] = '-';
    for (size_t i = 1; i <= len; i++)
        if (buf[i] == '\r' || buf[i] == '\n') buf[i] = ' ';
    memcpy(buf + 1 + len, "\r\n", 2);
    out_raw(c, buf, len + 3);
}

static void out_bulk(struct conn *c, const char *p, size_t n)
{
    char head[32], *h = head + sizeof head;
    *--h = '\n';
    *--h = '\r';
    size_t v = n;
    do *--h = (char)('0' + v % 10);
    while (v /= 10);
    *--h = '$';
    size_t hn = (size_t)(head + sizeof head - h);
    if (c->out_len + hn + n + 2 <= c->out_cap && !c->dead &&
        c->out_len - c->out_sent + hn + n + 2 <= S.out_hard) { /* the common case, in place */
        char *o = c->out + c->out_len;
        memcpy(o, h, hn);
        memcpy(o + hn, p, n);
        memcpy(o + hn + n, "\r\n", 2);
        c->out_len += hn + n + 2;
        return;
    }
    out_raw(c, h, hn);
    out_raw(c, p, n);
    out_raw(c, "\r\n", 2);
}

static void out_cstr(struct conn *c, const char *s)
{
    out_bulk(c, s, strlen(s));
}

static void out_int(struct conn *c, long long v)
{
    out_fmt(c, ":%lld\r\n", v);
}

static void out_array(struct conn *c, size_t n)
{
    out_fmt(c, "*%zu\r\n", n);
}

static void out_nil(struct conn *c)
{
    out_raw(c, "$-1\r\n", 5);
}

static void out_ok(struct conn *c)
{
    out_raw(c, "+OK\r\n", 5);
}

/* Client bytes as an error message may carry them: printable ASCII as it
 * is, every other byte as \xHH, at most max bytes of the input. */
static const char *repr(char *buf, size_t cap, const char *p, size_t n, size_t max)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < max && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f)
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    buf[o] = 0;
    return buf;
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
        S.saves++;
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
    S.save_error[0] = 0;
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

/* ---- the protocol ------------------------------------------------------ */
enum { PARSE_MORE, PARSE_DONE, PARSE_ERROR };

static int protocol_error(struct conn *c, const char *what)
{
    out_err(c, "ERR Protocol error: %s", what);
    c->closing = true;
    return PARSE_ERROR;
}

/* Parses a decimal line "<digits>\r\n" at p (after the type byte): an
 * optional '-', then 1 to 19 digits whose value fits in a long long.
 * Returns bytes used, 0 if incomplete, -1 if malformed. */
static long parse_len_line(const char *p, size_t n, long long *v)
{
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;
    size_t len = (size_t)(nl - p);
    if (len == 0 || p[len - 1] != '\r') return -1;
    len--;
    size_t i = p[0] == '-';
    if (i == len || len - i > 19) return -1;
    long long x = 0;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        if (x > (LLONG_MAX - (p[i] - '0')) / 10) return -1; /* does not fit */
        x = x * 10 + (p[i] - '0');
    }
    *v = p[0] == '-' ? -x : x;
    return (long)(nl - p + 1);
}

static bool push_arg(struct conn *c, size_t off, size_t n)
{
    if (c->argc == c->args_cap) {
        size_t cap = c->args_cap ? c->args_cap * 2 : 16;
        struct span *na = realloc(c->args, cap * sizeof *na);
        if (!na) return false;
        c->args = na;
        c->args_cap = cap;
    }
    c->args[c->argc++] = (struct span){off, n};
    return true;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static int hex_val(char ch)
{
    return ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Splits an inline command into words as Redis's sdssplitargs (and so
 * redis-cli) does, into c->scratch; the words' offsets into c->args.
 * line is NUL-terminated (a NUL inside ends it, as in Redis).  Returns
 * false on unbalanced quotes. */
static bool split_inline(struct conn *c, const char *p)
{
    size_t o = 0;
    c->argc = 0;
    for (;;) {
        while (*p && is_space(*p)) p++;
        if (!*p) return true;
        size_t start = o;
        bool inq = false, insq = false, done = false;
        while (!done) {
            if (inq) {
                if (p[0] == '\\' && p[1] == 'x' && is_hex(p[2]) && is_hex(p[3])) {
                    c->scratch[o++] = (char)(hex_val(p[2]) * 16 + hex_val(p[3]));
                    p += 3;
                } else if (p[0] == '\\' && p[1]) {
                    p++;
                    char ch = *p;
                    switch (ch) {
                    case 'n':
                        ch = '\n';
                        break;
                    case 'r':
                        ch = '\r';
                        break;
                    case 't':
                        ch = '\t';
                        break;
                    case 'b':
                        ch = '\b';
                        break;
                    case 'a':
                        ch = '\a';
                        break;
                    default:
                        break;
                    }
                    c->scratch[o++] = ch;
                } else if (*p == '"') {
                    /* a closing quote must be followed by a space or the end */
                    if (p[1] && !is_space(p[1])) return false;
                    done = true;
                } else if (!*p) {
                    return false;
                } else {
                    c->scratch[o++] = *p;
                }
            } else if (insq) {
                if (p[0] == '\\' && p[1] == '\'') {
                    p++;
                    c->scratch[o++] = '\'';
                } else if (*p == '\'') {
                    if (p[1] && !is_space(p[1])) return false;
                    done = true;
                } else if (!*p) {
                    return false;
                } else {
                    c->scratch[o++] = *p;
                }
            } else {
                switch (*p) {
                case ' ':
                case '\n':
                case '\r':
                case '\t':
                case '\0':
                    done = true;
                    break;
                case '"':
                    inq = true;
                    break;
                case '\'':
                    insq = true;
                    break;
                default:
                    c->scratch[o++] = *p;
                    break;
                }
            }
            if (*p) p++;
        }
        if (!push_arg(c, start, o - start)) return false;
    }
}

/* An inline command at c->in + c->scan. */
static int parse_inline(struct conn *c)
{
    char *p = c->in + c->scan;
    size_t n = c->in_len - c->scan;
    char *nl = memchr(p, '\n', n);
    if (!nl) {
        if (n > MAX_INLINE) return protocol_error(c, "too big inline request");
        return PARSE_MORE;
    }
    size_t len = (size_t)(nl - p);
    if (len > MAX_INLINE) return protocol_error(c, "too big inline request");
    if (len && p[len - 1] == '\r') len--;
    /* the words are never longer than the line; the line is copied behind
     * them, NUL-terminated */
    if (c->scratch_cap < 2 * len + 2) {
        char *ns = realloc(c->scratch, 2 * len + 2);
        if (!ns) return protocol_error(c, "out of memory");
        c->scratch = ns;
        c->scratch_cap = 2 * len + 2;
    }
    char *line = c->scratch + len + 1;
    memcpy(line, p, len);
    line[len] = 0;
    c->scan += (size_t)(nl - p) + 1;
    if (!split_inline(c, line)) return protocol_error(c, "unbalanced quotes in request");
    return PARSE_DONE;
}

/* Parses the next command: PARSE_DONE with its arguments in argv (an
 * empty one, argc 0, is to be skipped), PARSE_MORE if the input holds no
 * complete command, PARSE_ERROR after replying with a protocol error. */
static int parse_command(struct conn *c, struct arg **argv, size_t *argc)
{
    static struct arg *av;
    static size_t av_cap;
    const char *p = c->in;
    size_t n = c->in_len;
    bool inl = false;
    if (c->mb_left == 0) {
        c->cmd_start = c->scan;
        c->argc = 0;
        if (c->scan >= n) return PARSE_MORE;
        if (p[c->scan] != '*') {
            int r = parse_inline(c);
            if (r != PARSE_DONE) return r;
            inl = true;
        } else {
            long long count;
            long l = parse_len_line(p + c->scan + 1, n - c->scan - 1, &count);
            if (l == 0) {
                if (n - c->scan > MAX_INLINE)
                    return protocol_error(c, "too big mbulk count string");
                return PARSE_MORE;
            }
            if (l < 0 || count > MAX_ARGS) return protocol_error(c, "invalid multibulk length");
            c->scan += 1 + (size_t)l;
            if (count <= 0) { /* an empty command */
                *argc = 0;
                return PARSE_DONE;
            }
            c->mb_left = count;
            c->bulk_len = -1;
        }
    }
    while (c->mb_left > 0) {
        if (c->bulk_len < 0) {
            if (c->scan >= n) return PARSE_MORE;
            if (p[c->scan] != '$') {
                char ch = p[c->scan];
                out_err(c, "ERR Protocol error: expected '$', got '%c'",
                        ch >= 0x20 && ch < 0x7f ? ch : '?');
                c->closing = true;
                return PARSE_ERROR;
            }
            long long bl;
            long l = parse_len_line(p + c->scan + 1, n - c->scan - 1, &bl);
            if (l == 0) {
                if (n - c->scan > MAX_INLINE) return protocol_error(c, "too big bulk count string");
                return PARSE_MORE;
            }
            if (l < 0 || bl < 0 || bl > MAX_BULK) return protocol_error(c, "invalid bulk length");
            c->scan += 1 + (size_t)l;
            c->bulk_len = bl;
        }
        size_t bl = (size_t)c->bulk_len;
        if (n - c->scan < bl + 2) return PARSE_MORE;
        if (p[c->scan + bl] != '\r' || p[c->scan + bl + 1] != '\n')
            return protocol_error(c, "bulk string not terminated by CRLF");
        if (!push_arg(c, c->scan, bl)) return protocol_error(c, "out of memory");
        c->scan += bl + 2;
        c->mb_left--;
        c->bulk_len = -1;
    }
    if (c->argc > av_cap) {
        size_t cap = c->argc < 64 ? 64 : c->argc;
        struct arg *na = realloc(av, cap * sizeof *na);
        if (!na) return protocol_error(c, "out of memory");
        av = na;
        av_cap = cap;
    }
    const char *base = inl ? c->scratch : c->in;
    for (size_t i = 0; i < c->argc; i++) av[i] = (struct arg){base + c->args[i].off, c->args[i].n};
    *argv = av;
    *argc = c->argc;
    return PARSE_DONE;
}

/* Bytes of input still needed to complete the bulk argument being read
 * (0 if unknown): lets a large argument be read in large pieces. */
static size_t bulk_missing(const struct conn *c)
{
    if (c->mb_left == 0 || c->bulk_len < 0) return 0;
    size_t have = c->in_len - c->scan, want = (size_t)c->bulk_len + 2;
    return want > have ? want - have : 0;
}

/* Drops the input before the command being parsed. */
static void compact_input(struct conn *c)
{
    size_t drop = c->mb_left ? c->cmd_start : c->scan;
    if (drop == 0) return;
    memmove(c->in, c->in + drop, c->in_len - drop);
    c->in_len -= drop;
    c->scan -= drop;
    c->cmd_start -= drop;
    for (size_t i = 0; i < c->argc && c->mb_left; i++) c->args[i].off -= drop;
    if (c->in_cap > (1u << 20) && c->in_len < (64u << 10)) { /* give a large buffer back */
        char *ni = realloc(c->in, 128u << 10);
        if (ni) {
            c->in = ni;
            c->in_cap = 128u << 10;
        }
    }
}

/* ---- commands ---------------------------------------------------------- */
/* Each command replies as redis-server 7.0 does, errors word for word
 * (tests/kv_diff.py compares them).  A command flagged CMD_DENYOOM is
 * refused up front when the heap's free bytes are fewer than its arguments
 * need (about: their bytes and 64 per argument); a command that still runs
 * out of memory replies -OOM, having done what it did before it ran out
 * (MSET, multi-member ZADD and the like may be partly applied then). */
#define CMD_WRITE 0x1   /* may change the data set */
#define CMD_DENYOOM 0x2 /* may grow it */

#define MAX_STRING (512ull << 20) /* Redis's proto-max-bulk-len: APPEND and SETRANGE */

struct command {
    const char *name; /* lower case */
    int arity;        /* > 0: exactly this many words, the name included; < 0: at least -arity */
    unsigned flags;   /* CMD_* */
    void (*fn)(struct conn *c, struct arg *a, size_t argc);
};

static const char *const WRONGTYPE =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
static const char *const NOT_INT = "ERR value is not an integer or out of range";

static int64_t now_ms; /* the command's time, as the store sees it */

static bool is(const struct arg *a, const char *name)
{
    return a->n == strlen(name) && strncasecmp(a->p, name, a->n) == 0;
}

/* A decimal integer as Redis's string2ll takes it: no sign but '-', no
 * leading zero, no space, within a long long. */
static bool parse_ll(const struct arg *a, long long *out)
{
    const char *p = a->p;
    size_t n = a->n;
    if (n == 0 || n > 20) return false;
    if (n == 1 && p[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = p[0] == '-';
    if (i == n || p[i] < '1' || p[i] > '9') return false;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        if (v > (ULLONG_MAX - (unsigned)(p[i] - '0')) / 10) return false;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (p[0] == '-') {
        if (v > (unsigned long long)LLONG_MAX + 1) return false;
        *out = (long long)(0 - v);
    } else {
        if (v > LLONG_MAX) return false;
        *out = (long long)v;
    }
    return true;
}

static bool get_ll(struct conn *c, const struct arg *a, long long *out)
{
    if (parse_ll(a, out)) return true;
    out_err(c, "%s", NOT_INT);
    return false;
}

/* Redis's getPositiveLongFromObjectOrReply: a count >= 0 */
static bool get_count(struct conn *c, const struct arg *a, long long *out)
{
    if (parse_ll(a, out) && *out >= 0) return true;
    out_err(c, "ERR value is out of range, must be positive");
    return false;
}

/* Redis's string2d: all of it a number (inf allowed), no leading space,
 * no NaN, no overflow. */
static bool parse_double(const char *p, size_t n, double *out)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf || is_space(p[0])) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || end != buf + n || isnan(v) || (errno == ERANGE && (isinf(v) || v == 0)))
        return false;
    *out = v;
    return true;
}

/* Redis's string2ld */
static bool parse_ldouble(const char *p, size_t n, long double *out)
{
    char buf[5120];
    if (n == 0 || n >= sizeof buf || is_space(p[0])) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (*end || end != buf + n || isnan(v) || (errno == ERANGE && (isinf(v) || v == 0)))
        return false;
    *out = v;
    return true;
}

/* A long double as Redis's ld2string(LD_STR_HUMAN) writes it. */
static int format_ldouble(char *buf, size_t cap, long double v)
{
    int l = snprintf(buf, cap, "%.17Lf", v);
    if (l <= 0 || (size_t)l >= cap) return 0;
    if (strchr(buf, '.')) {
        while (buf[l - 1] == '0') l--;
        if (buf[l - 1] == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return l;
}

static void out_double(struct conn *c, double d)
{
    if (isinf(d)) return out_cstr(c, d > 0 ? "inf" : "-inf");
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%.17g", d);
    out_bulk(c, buf, (size_t)n);
}

static void out_oom(struct conn *c)
{
    out_str(c, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
}

static void out_wrongtype(struct conn *c)
{
    out_str(c, WRONGTYPE);
}

static void out_syntax(struct conn *c)
{
    out_err(c, "ERR syntax error");
}

static kv_obj *lookup(const struct arg *key)
{
    return kv_lookup(S.kv, key->p, key->n);
}

/* The key's object if it is of type t (NULL if there is none); false,
 * and NULL, after replying WRONGTYPE. */
static bool lookup_typed(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o)
{
    *o = lookup(key);
    if (*o && kv_obj_type(*o) != t) {
        *o = NULL;
        out_wrongtype(c);
        return false;
    }
    return true;
}

/* Like lookup_typed, creating an empty value of type t if there is none;
 * *o is NULL after an error reply. */
static void lookup_create(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o)
{
    if (!lookup_typed(c, key, t, o)) return;
    if (!*o) {
        *o = kv_create(S.kv, key->p, key->n, t);
        if (!*o) out_oom(c);
    }
}

/* Deletes a list, set, hash or sorted set left empty, as Redis does. */
static void drop_if_empty(kv_obj *o, size_t len)
{
    if (len == 0) kv_delete_obj(S.kv, o);
}

/* Redis's stringmatchlen: glob-style * ? [abc] [^a-z] and \ escapes;
 * bounded by the lengths (the bytes are not NUL-terminated). */
static bool match_impl(const char *p, size_t pn, const char *s, size_t sn, bool nocase, bool *skip)
{
    while (pn && sn) {
        switch (p[0]) {
        case '*':
            while (pn > 1 && p[1] == '*') p++, pn--;
            if (pn == 1) return true;
            while (sn) {
                if (match_impl(p + 1, pn - 1, s, sn, nocase, skip)) return true;
                if (*skip) return false;
                s++, sn--;
            }
            *skip = true; /* no later start can match either */
            return false;
        case '?':
            s++, sn--;
            break;
        case '[': {
            p++, pn--;
            bool not = pn && p[0] == '^', match = false;
            if (not ) p++, pn--;
            for (;;) {
                if (pn >= 2 && p[0] == '\\') {
                    p++, pn--;
                    if (p[0] == s[0]) match = true;
                } else if (pn && p[0] == ']') {
                    break;
                } else if (pn == 0) {
                    p--, pn++;
                    break;
                } else if (pn >= 3 && p[1] == '-') {
                    int lo = (unsigned char)p[0], hi = (unsigned char)p[2],
                        ch = (unsigned char)s[0];
                    if (lo > hi) {
                        int t = lo;
                        lo = hi;
                        hi = t;
                    }
                    if (nocase) lo = tolower(lo), hi = tolower(hi), ch = tolower(ch);
                    p += 2, pn -= 2;
                    if (ch >= lo && ch <= hi) match = true;
                } else if (nocase ? tolower((unsigned char)p[0]) == tolower((unsigned char)s[0])
                                  : p[0] == s[0]) {
                    match = true;
                }
                p++, pn--;
            }
            if (not ) match = !match;
            if (!match) return false;
            s++, sn--;
            break;
        }
        case '\\':
            if (pn >= 2) p++, pn--;
            /* fall through */
        default:
            if (nocase ? tolower((unsigned char)p[0]) != tolower((unsigned char)s[0])
                       : p[0] != s[0])
                return false;
            s++, sn--;
            break;
        }
        p++, pn--;
        if (sn == 0) {
            while (pn && *p == '*') p++, pn--;
            break;
        }
    }
    return pn == 0 && sn == 0;
}

static bool glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
    bool skip = false;
    return match_impl(p, pn, s, sn, false, &skip);
}

/* ---- strings */
static void cmd_get(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_nil(c);
    const char *v;
    size_t vn;
    kv_str_get(o, &v, &vn);
    out_bulk(c, v, vn);
}

/* SET's options, parsed as Redis's parseExtendedStringArgumentsOrReply does */
enum {
    SET_NX = 1,
    SET_XX = 2,
    SET_GET = 4,
    SET_KEEPTTL = 8,
    SET_EX = 16,
    SET_PX = 32,
    SET_EXAT = 64,
    SET_PXAT = 128
};

/* Sets key to val with SET's flags and expiry argument (exp, or NULL). */
static void set_generic(struct conn *c, const struct arg *key, const struct arg *val, int flags,
                        const struct arg *exp, const char *cmd, bool reply_ok)
{
    int64_t when = 0;
    if (exp) {
        long long ms;
        if (!get_ll(c, exp, &ms)) return;
        bool secs = flags & (SET_EX | SET_EXAT);
        if (ms <= 0 || (secs && ms > LLONG_MAX / 1000))
            return out_err(c, "ERR invalid expire time in '%s' command", cmd);
        if (secs) ms *= 1000;
        if (flags & (SET_EX | SET_PX)) {
            if (ms > LLONG_MAX - now_ms)
                return out_err(c, "ERR invalid expire time in '%s' command", cmd);
            ms += now_ms;
        }
        when = ms;
    }
    kv_obj *o = lookup(key);
    char *old = NULL; /* SET ... GET: the old value, copied before it is replaced */
    size_t oldn = 0;
    if (flags & SET_GET) {
        if (o && kv_obj_type(o) != KV_STRING) return out_wrongtype(c);
        if (o) {
            const char *v;
            kv_str_get(o, &v, &oldn);
            if (!(old = malloc(oldn ? oldn : 1))) return out_oom(c);
            memcpy(old, v, oldn);
        }
    }
    if (!(((flags & SET_NX) && o) || ((flags & SET_XX) && !o))) {
        kv_obj *n = kv_str_set(S.kv, key->p, key->n, val->p, val->n, flags & SET_KEEPTTL);
        if (!n) {
            free(old);
            return out_oom(c);
        }
        if (when) kv_set_expire(S.kv, n, when);
        S.changes++;
        if (reply_ok && !(flags & SET_GET)) out_ok(c);
    } else if (!(flags & SET_GET)) {
        out_nil(c);
    }
    if (flags & SET_GET) {
        if (o)
            out_bulk(c, old, oldn);
        else
            out_nil(c);
    }
    free(old);
}

static void cmd_set(struct conn *c, struct arg *a, size_t argc)
{
    int flags = 0;
    const struct arg *exp = NULL;
    for (size_t j = 3; j < argc; j++) {
        const struct arg *o = &a[j];
        bool next = j + 1 < argc;
        int ttl = flags & (SET_EX | SET_PX | SET_EXAT | SET_PXAT | SET_KEEPTTL);
        if (is(o, "NX") && !(flags & SET_XX)) {
            flags |= SET_NX;
        } else if (is(o, "XX") && !(flags & SET_NX)) {
            flags |= SET_XX;
        } else if (is(o, "GET")) {
            flags |= SET_GET;
        } else if (is(o, "KEEPTTL") && !(ttl & ~SET_KEEPTTL)) {
            flags |= SET_KEEPTTL;
        } else if (next &&
                   ((is(o, "EX") && !(ttl & ~SET_EX)) || (is(o, "PX") && !(ttl & ~SET_PX)) ||
                    (is(o, "EXAT") && !(ttl & ~SET_EXAT)) ||
                    (is(o, "PXAT") && !(ttl & ~SET_PXAT)))) {
            flags |= is(o, "EX")     ? SET_EX
                     : is(o, "PX")   ? SET_PX
                     : is(o, "EXAT") ? SET_EXAT
                                     : SET_PXAT;
            exp = &a[++j];
        } else {
            return out_syntax(c);
        }
    }
    set_generic(c, &a[1], &a[2], flags, exp, "set", true);
}

static void cmd_setnx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup(&a[1]);
    if (o) return out_int(c, 0);
    if (!kv_str_set(S.kv, a[1].p, a[1].n, a[2].p, a[2].n, false)) return out_oom(c);
    S.changes++;
    out_int(c, 1);
}

static void cmd_setex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool ms = a[0].n == 6; /* psetex */
    set_generic(c, &a[1], &a[3], ms ? SET_PX : SET_EX, &a[2], ms ? "psetex" : "setex", true);
}

static void cmd_getset(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    set_generic(c, &a[1], &a[2], SET_GET, NULL, "getset", false);
}

static void cmd_getdel(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_nil(c);
    const char *v;
    size_t vn;
    kv_str_get(o, &v, &vn);
    out_bulk(c, v, vn);
    kv_delete_obj(S.kv, o);
    S.changes++;
}

static void cmd_mget(struct conn *c, struct arg *a, size_t argc)
{
    out_array(c, argc - 1);
    for (size_t i = 1; i < argc; i++) {
        kv_obj *o = lookup(&a[i]);
        if (!o || kv_obj_type(o) != KV_STRING) {
            out_nil(c);
            continue;
        }
        const char *v;
        size_t vn;
        kv_str_get(o, &v, &vn);
        out_bulk(c, v, vn);
    }
}

static void mset_generic(struct conn *c, struct arg *a, size_t argc, bool nx)
{
    if (argc % 2 == 0)
        return out_err(c, "ERR wrong number of arguments for '%s' command", nx ? "msetnx" : "mset");
    if (nx)
        for (size_t i = 1; i < argc; i += 2)
            if (lookup(&a[i])) return out_int(c, 0);
    for (size_t i = 1; i < argc; i += 2) {
        if (!kv_str_set(S.kv, a[i].p, a[i].n, a[i + 1].p, a[i + 1].n, false)) return out_oom(c);
        S.changes++;
    }
    if (nx)
        out_int(c, 1);
    else
        out_ok(c);
}

static void cmd_mset(struct conn *c, struct arg *a, size_t argc)
{
    mset_generic(c, a, argc, false);
}

static void cmd_msetnx(struct conn *c, struct arg *a, size_t argc)
{
    mset_generic(c, a, argc, true);
}

static void incr_generic(struct conn *c, const struct arg *key, long long by)
{
    kv_obj *o;
    if (!lookup_typed(c, key, KV_STRING, &o)) return;
    long long v = 0;
    if (o) {
        const char *p;
        size_t n;
        kv_str_get(o, &p, &n);
        if (!parse_ll(&(struct arg){p, n}, &v)) return out_err(c, "%s", NOT_INT);
    }
    if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v))
        return out_err(c, "ERR increment or decrement would overflow");
    v += by;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", v);
    if (!kv_str_set(S.kv, key->p, key->n, buf, (size_t)n, true)) return out_oom(c);
    S.changes++;
    out_int(c, v);
}

static void cmd_incr(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    incr_generic(c, &a[1], a[0].p[0] == 'd' || a[0].p[0] == 'D' ? -1 : 1);
}

static void cmd_incrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by;
    if (!get_ll(c, &a[2], &by)) return;
    incr_generic(c, &a[1], by);
}

static void cmd_decrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by;
    if (!get_ll(c, &a[2], &by)) return;
    if (by == LLONG_MIN) return out_err(c, "ERR decrement would overflow");
    incr_generic(c, &a[1], -by);
}

static void cmd_incrbyfloat(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    long double v = 0, by;
    if (o) {
        const char *p;
        size_t n;
        kv_str_get(o, &p, &n);
        if (!parse_ldouble(p, n, &v)) return out_err(c, "ERR value is not a valid float");
    }
    if (!parse_ldouble(a[2].p, a[2].n, &by)) return out_err(c, "ERR value is not a valid float");
    v += by;
    if (isnan(v) || isinf(v)) return out_err(c, "ERR increment would produce NaN or Infinity");
    char buf[5200];
    int n = format_ldouble(buf, sizeof buf, v);
    if (!kv_str_set(S.kv, a[1].p, a[1].n, buf, (size_t)n, true)) return out_oom(c);
    S.changes++;
    out_bulk(c, buf, (size_t)n);
}

static void cmd_append(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) {
        if (!kv_str_set(S.kv, a[1].p, a[1].n, a[2].p, a[2].n, false)) return out_oom(c);
        S.changes++;
        return out_int(c, (long long)a[2].n);
    }
    const char *p;
    size_t n;
    kv_str_get(o, &p, &n);
    if (n + a[2].n > MAX_STRING)
        return out_err(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    char *d;
    if (!(o = kv_str_resize(S.kv, o, n + a[2].n, &d))) return out_oom(c);
    memcpy(d + n, a[2].p, a[2].n);
    S.changes++;
    out_int(c, (long long)(n + a[2].n));
}

static void cmd_strlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0;
    if (o) kv_str_get(o, &p, &n);
    out_int(c, (long long)n);
}

static void cmd_getrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_bulk(c, "", 0);
    const char *p;
    size_t n;
    kv_str_get(o, &p, &n);
    long long len = (long long)n;
    if (start < 0 && end < 0 && start > end) return out_bulk(c, "", 0);
    if (start < 0) start += len;
    if (end < 0) end += len;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= len) end = len - 1;
    if (start > end || len == 0) return out_bulk(c, "", 0);
    out_bulk(c, p + start, (size_t)(end - start + 1));
}

static void cmd_setrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long off;
    if (!get_ll(c, &a[2], &off)) return;
    if (off < 0) return out_err(c, "ERR offset is out of range");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0;
    if (o) kv_str_get(o, &p, &n);
    if (a[3].n == 0) return out_int(c, (long long)n);
    if ((unsigned long long)off + a[3].n > MAX_STRING)
        return out_err(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    if (!o && !(o = kv_str_set(S.kv, a[1].p, a[1].n, "", 0, false))) return out_oom(c);
    size_t len = (size_t)off + a[3].n > n ? (size_t)off + a[3].n : n;
    char *d;
    if (!(o = kv_str_resize(S.kv, o, len, &d))) return out_oom(c);
    memcpy(d + off, a[3].p, a[3].n);
    S.changes++;
    out_int(c, (long long)len);
}

/* ---- keys */
static void cmd_del(struct conn *c, struct arg *a, size_t argc)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++)
        if (lookup(&a[i])) n += kv_delete(S.kv, a[i].p, a[i].n);
    S.changes += (uint64_t)n;
    out_int(c, n);
}

static void cmd_exists(struct conn *c, struct arg *a, size_t argc)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++) n += lookup(&a[i]) != NULL;
    out_int(c, n);
}

static const char *type_name(const kv_obj *o)
{
    static const char *names[] = {"none", "string", "list", "set", "hash", "zset"};
    return names[o ? kv_obj_type(o) : KV_NONE];
}

static void cmd_type(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    out_fmt(c, "+%s\r\n", type_name(lookup(&a[1])));
}

static void rename_generic(struct conn *c, struct arg *a, bool nx)
{
    kv_obj *o = lookup(&a[1]);
    if (!o) return out_err(c, "ERR no such key");
    if (a[1].n == a[2].n && memcmp(a[1].p, a[2].p, a[1].n) == 0)
        return nx ? out_int(c, 0) : out_ok(c);
    if (lookup(&a[2])) {
        if (nx) return out_int(c, 0);
        kv_delete(S.kv, a[2].p, a[2].n);
        o = lookup(&a[1]);
    }
    if (!kv_rename(S.kv, o, a[2].p, a[2].n)) return out_oom(c);
    S.changes++;
    nx ? out_int(c, 1) : out_ok(c);
}

static void cmd_rename(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    rename_generic(c, a, false);
}

static void cmd_renamenx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    rename_generic(c, a, true);
}

static void cmd_dbsize(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)kv_count(S.kv));
}

static void cmd_flushall(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 2 || (argc == 2 && !is(&a[1], "SYNC") && !is(&a[1], "ASYNC"))) return out_syntax(c);
    S.changes += kv_count(S.kv) + 1;
    kv_flush(S.kv);
    out_ok(c);
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT [NX|XX|GT|LT] */
static void expire_generic(struct conn *c, struct arg *a, size_t argc, bool secs, bool at)
{
    bool nx = false, xx = false, gt = false, lt = false;
    for (size_t j = 3; j < argc; j++) {
        if (is(&a[j], "NX"))
            nx = true;
        else if (is(&a[j], "XX"))
            xx = true;
        else if (is(&a[j], "GT"))
            gt = true;
        else if (is(&a[j], "LT"))
            lt = true;
        else {
            char buf[600];
            return out_err(c, "ERR Unsupported option %s",
                           repr(buf, sizeof buf, a[j].p, a[j].n, 128));
        }
    }
    if (nx && (xx || gt || lt))
        return out_err(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
    if (gt && lt) return out_err(c, "ERR GT and LT options at the same time are not compatible");
    long long when;
    if (!get_ll(c, &a[2], &when)) return;
    char name[16];
    snprintf(name, sizeof name, "%s%s%s", secs ? "" : "p", "expire", at ? "at" : "");
    if (secs) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
            return out_err(c, "ERR invalid expire time in '%s' command", name);
        when *= 1000;
    }
    long long base = at ? 0 : now_ms;
    if (when > LLONG_MAX - base) return out_err(c, "ERR invalid expire time in '%s' command", name);
    when += base;
    kv_obj *o = lookup(&a[1]);
    if (!o) return out_int(c, 0);
    int64_t cur = kv_obj_expire(o);
    if ((nx && cur) || (xx && !cur) || (gt && (!cur || when <= cur)) || (lt && cur && when >= cur))
        return out_int(c, 0);
    S.changes++;
    if (when <= now_ms) {
        kv_delete_obj(S.kv, o);
        return out_int(c, 1);
    }
    kv_set_expire(S.kv, o, when);
    out_int(c, 1);
}

static void cmd_expire(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, true, false);
}

static void cmd_pexpire(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, false, false);
}

static void cmd_expireat(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, true, true);
}

static void cmd_pexpireat(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, false, true);
}

/* TTL, PTTL, EXPIRETIME, PEXPIRETIME */
static void ttl_generic(struct conn *c, struct arg *a, bool ms, bool abs)
{
    kv_obj *o = lookup(&a[1]);
    if (!o) return out_int(c, -2);
    int64_t e = kv_obj_expire(o);
    if (!e) return out_int(c, -1);
    if (abs) return out_int(c, ms ? e : (e + 500) / 1000);
    int64_t ttl = e - now_ms;
    if (ttl < 0) ttl = 0;
    out_int(c, ms ? ttl : (ttl + 500) / 1000);
}

static void cmd_ttl(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, false, false);
}

static void cmd_pttl(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, true, false);
}

static void cmd_expiretime(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, false, true);
}

static void cmd_pexpiretime(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, true, true);
}

static void cmd_persist(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup(&a[1]);
    if (!o || !kv_obj_expire(o)) return out_int(c, 0);
    kv_set_expire(S.kv, o, 0);
    S.changes++;
    out_int(c, 1);
}

/* Keys collected by KEYS and SCAN: their bytes, copied (a lookup of an
 * expired key would change the table being walked). */
struct keylist {
    char *buf;
    size_t len, cap, n;
    const struct arg *pattern; /* NULL: all */
    bool oom;
};

static void keylist_add(struct keylist *l, const char *k, size_t kn)
{
    if (l->pattern && !glob_match(l->pattern->p, l->pattern->n, k, kn)) return;
    if (l->len + kn + sizeof(size_t) > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        while (cap < l->len + kn + sizeof(size_t)) cap *= 2;
        char *nb = realloc(l->buf, cap);
        if (!nb) {
            l->oom = true;
            return;
        }
        l->buf = nb;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, &kn, sizeof kn);
    memcpy(l->buf + l->len + sizeof kn, k, kn);
    l->len += sizeof kn + kn;
    l->n++;
}

static void collect_key(void *arg, kv_obj *o)
{
    struct keylist *l = arg;
    if (kv_obj_expired(S.kv, o)) return;
    const char *k;
    size_t kn;
    kv_obj_key(o, &k, &kn);
    keylist_add(l, k, kn);
}

static void out_keylist(struct conn *c, struct keylist *l)
{
    out_array(c, l->n);
    for (size_t o = 0; o < l->len;) {
        size_t kn;
        memcpy(&kn, l->buf + o, sizeof kn);
        out_bulk(c, l->buf + o + sizeof kn, kn);
        o += sizeof kn + kn;
    }
    free(l->buf);
}

static void cmd_keys(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool all = a[1].n == 1 && a[1].p[0] == '*';
    struct keylist l = {.pattern = all ? NULL : &a[1]};
    uint64_t cursor = 0;
    do cursor = kv_scan(S.kv, cursor, collect_key, &l);
    while (cursor && !l.oom);
    if (l.oom) {
        free(l.buf);
        return out_oom(c);
    }
    out_keylist(c, &l);
}

/* SCAN's cursor, as Redis's parseScanCursorOrReply takes it */
static bool get_cursor(struct conn *c, const struct arg *a, uint64_t *cursor)
{
    char buf[32];
    if (a->n == 0 || a->n >= sizeof buf || is_space(a->p[0])) goto bad;
    memcpy(buf, a->p, a->n);
    buf[a->n] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (*end || errno == ERANGE) goto bad;
    *cursor = v;
    return true;
bad:
    out_err(c, "ERR invalid cursor");
    return false;
}

/* SCAN, SSCAN, HSCAN's options from a[first]; false after an error reply */
static bool scan_options(struct conn *c, struct arg *a, size_t argc, size_t first,
                         const struct arg **pattern, long long *count, enum kv_type *type)
{
    *pattern = NULL;
    *count = 10;
    for (size_t j = first; j < argc; j++) {
        bool more = j + 1 < argc;
        if (is(&a[j], "COUNT") && more) {
            if (!get_ll(c, &a[j + 1], count)) return false;
            if (*count < 1) {
                out_syntax(c);
                return false;
            }
            j++;
        } else if (is(&a[j], "MATCH") && more) {
            *pattern = &a[++j];
            if ((*pattern)->n == 1 && (*pattern)->p[0] == '*') *pattern = NULL;
        } else if (type && is(&a[j], "TYPE") && more) {
            static const char *names[] = {"none", "string", "list", "set", "hash", "zset"};
            *type = KV_NONE;
            for (int t = 1; t < 6; t++)
                if (is(&a[j + 1], names[t])) *type = (enum kv_type)t;
            if (*type == KV_NONE) *type = (enum kv_type)99; /* matches nothing */
            j++;
        } else {
            out_syntax(c);
            return false;
        }
    }
    return true;
}

static void out_cursor(struct conn *c, uint64_t cursor)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)cursor);
    out_array(c, 2);
    out_bulk(c, buf, (size_t)n);
}

static void collect_any(void *arg, kv_obj *o)
{
    const char *k;
    size_t kn;
    kv_obj_key(o, &k, &kn);
    keylist_add(arg, k, kn);
}

/* As Redis: buckets until COUNT keys (before filtering) or 10*COUNT
 * buckets were visited; then MATCH, expired keys (deleted now) and TYPE
 * filter what was collected. */
static void cmd_scan(struct conn *c, struct arg *a, size_t argc)
{
    uint64_t cursor;
    const struct arg *pattern;
    long long count;
    enum kv_type type = KV_NONE;
    if (!get_cursor(c, &a[1], &cursor)) return;
    if (!scan_options(c, a, argc, 2, &pattern, &count, &type)) return;
    struct keylist l = {0}, m = {0};
    long long steps = count * 10;
    do cursor = kv_scan(S.kv, cursor, collect_any, &l);
    while (cursor && (long long)l.n < count && --steps > 0 && !l.oom);
    for (size_t o = 0; o < l.len && !l.oom;) {
        size_t kn;
        memcpy(&kn, l.buf + o, sizeof kn);
        const char *k = l.buf + o + sizeof kn;
        o += sizeof kn + kn;
        if (pattern && !glob_match(pattern->p, pattern->n, k, kn)) continue;
        kv_obj *x = kv_lookup(S.kv, k, kn);
        if (!x || (type != KV_NONE && kv_obj_type(x) != type)) continue;
        keylist_add(&m, k, kn);
    }
    free(l.buf);
    if (l.oom || m.oom) {
        free(m.buf);
        return out_oom(c);
    }
    out_cursor(c, cursor);
    out_keylist(c, &m);
}

/* ---- lists */
static void push_generic(struct conn *c, struct arg *a, size_t argc, bool tail, bool only_existing)
{
    kv_obj *o;
    if (only_existing) {
        if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
        if (!o) return out_int(c, 0);
    } else {
        lookup_create(c, &a[1], KV_LIST, &o);
        if (!o) return;
    }
    for (size_t i = 2; i < argc; i++) {
        if (kv_list_push(S.kv, o, tail, a[i].p, a[i].n) < 0) {
            drop_if_empty(o, kv_list_len(S.kv, o));
            return out_oom(c);
        }
        S.changes++;
    }
    out_int(c, (long long)kv_list_len(S.kv, o));
}

static void cmd_lpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, false);
}

static void cmd_rpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, false);
}

static void cmd_lpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, true);
}

static void cmd_rpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, true);
}

static void pop_generic(struct conn *c, struct arg *a, size_t argc, bool tail)
{
    long long count = 1;
    if (argc > 3)
        return out_err(c, "ERR wrong number of arguments for '%s' command", tail ? "rpop" : "lpop");
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return argc == 3 ? out_str(c, "*-1\r\n") : out_nil(c);
    if (argc == 3 && count == 0) return out_array(c, 0);
    size_t len = kv_list_len(S.kv, o);
    if ((unsigned long long)count > len) count = (long long)len;
    if (argc == 3) out_array(c, (size_t)count);
    for (long long i = 0; i < count; i++) {
        kv_lnode *e = kv_list_at(S.kv, o, tail ? -1 : 0);
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        out_bulk(c, v, vn);
        kv_list_remove(S.kv, o, e);
        S.changes++;
    }
    drop_if_empty(o, kv_list_len(S.kv, o));
}

static void cmd_lpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, false);
}

static void cmd_rpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, true);
}

/* The range start..end (negative from the end) of a sequence of len
 * elements, clamped as LRANGE and ZRANGE do; false if empty. */
static bool clamp_range(long long len, long long *start, long long *end)
{
    if (*start < 0) *start += len;
    if (*end < 0) *end += len;
    if (*start < 0) *start = 0;
    if (*start > *end || *start >= len) return false;
    if (*end >= len) *end = len - 1;
    return true;
}

static void cmd_lrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o || !clamp_range((long long)kv_list_len(S.kv, o), &start, &end)) return out_array(c, 0);
    out_array(c, (size_t)(end - start + 1));
    kv_lnode *e = kv_list_at(S.kv, o, start);
    for (long long i = start; i <= end; i++, e = kv_list_next(S.kv, e)) {
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        out_bulk(c, v, vn);
    }
}

static void cmd_llen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    out_int(c, o ? (long long)kv_list_len(S.kv, o) : 0);
}

static void cmd_lindex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_nil(c);
    long long i;
    if (!get_ll(c, &a[2], &i)) return;
    kv_lnode *e = kv_list_at(S.kv, o, i);
    if (!e) return out_nil(c);
    const char *v;
    size_t vn;
    kv_lnode_get(e, &v, &vn);
    out_bulk(c, v, vn);
}

/* ---- sets */
static void cmd_sadd(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    lookup_create(c, &a[1], KV_SET, &o);
    if (!o) return;
    long long added = 0;
    for (size_t i = 2; i < argc; i++) {
        int r = kv_set_add(S.kv, o, a[i].p, a[i].n);
        if (r < 0) {
            drop_if_empty(o, kv_set_card(S.kv, o));
            return out_oom(c);
        }
        added += r;
    }
    S.changes += (uint64_t)added;
    out_int(c, added);
}

static void cmd_srem(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_set_rem(S.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_set_card(S.kv, o));
    S.changes += (uint64_t)n;
    out_int(c, n);
}

static void cmd_sismember(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_int(c, o && kv_set_has(S.kv, o, a[2].p, a[2].n));
}

static void cmd_smismember(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) out_int(c, o && kv_set_has(S.kv, o, a[i].p, a[i].n));
}

static void out_member(void *arg, const char *m, size_t n)
{
    out_bulk(arg, m, n);
}

static void cmd_smembers(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    if (!o) return out_array(c, 0);
    out_array(c, kv_set_card(S.kv, o));
    uint64_t cursor = 0;
    do cursor = kv_set_scan(S.kv, o, cursor, out_member, c);
    while (cursor);
}

static void cmd_scard(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_int(c, o ? (long long)kv_set_card(S.kv, o) : 0);
}

static void cmd_spop(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    if (!o) return argc == 3 ? out_array(c, 0) : out_nil(c);
    size_t card = kv_set_card(S.kv, o);
    if ((unsigned long long)count > card) count = (long long)card;
    if (argc == 3) out_array(c, (size_t)count);
    for (long long i = 0; i < count; i++) {
        const char *m;
        size_t n;
        kv_set_random(S.kv, o, &m, &n);
        out_bulk(c, m, n);
        kv_set_rem(S.kv, o, m, n);
        S.changes++;
    }
    drop_if_empty(o, kv_set_card(S.kv, o));
}

static void collect_member(void *arg, const char *m, size_t n)
{
    keylist_add(arg, m, n);
}

/* SRANDMEMBER key [count]: a positive count gives distinct members, a
 * negative one |count| members that may repeat. */
static void cmd_srandmember(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_ll(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    const char *m;
    size_t n;
    if (argc == 2) {
        if (!o || !kv_set_random(S.kv, o, &m, &n)) return out_nil(c);
        return out_bulk(c, m, n);
    }
    if (!o || count == 0) return out_array(c, 0);
    if (count < 0) {
        if (count == LLONG_MIN) return out_err(c, "ERR value is out of range");
        out_array(c, (size_t)-count);
        for (long long i = 0; i < -count; i++) {
            kv_set_random(S.kv, o, &m, &n);
            out_bulk(c, m, n);
        }
        return;
    }
    struct keylist l = {0};
    uint64_t cursor = 0;
    do cursor = kv_set_scan(S.kv, o, cursor, collect_member, &l);
    while (cursor && !l.oom);
    size_t total = l.n, want = (unsigned long long)count < total ? (size_t)count : total;
    struct arg *v = l.oom ? NULL : malloc(total * sizeof *v);
    if (!v) {
        free(l.buf);
        return out_oom(c);
    }
    for (size_t i = 0, off = 0; i < total; i++) {
        memcpy(&v[i].n, l.buf + off, sizeof v[i].n);
        v[i].p = l.buf + off + sizeof v[i].n;
        off += sizeof v[i].n + v[i].n;
    }
    out_array(c, want);
    for (size_t i = 0; i < want; i++) { /* a partial Fisher-Yates shuffle */
        size_t j = i + (size_t)rand() % (total - i);
        struct arg t = v[i];
        v[i] = v[j];
        v[j] = t;
        out_bulk(c, v[i].p, v[i].n);
    }
    free(v);
    free(l.buf);
}

/* SSCAN and HSCAN: a step of the cursor as SCAN's; MATCH filters members
 * (fields) after. */
static void collect_field(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    keylist_add(arg, f, fn);
    keylist_add(arg, v, vn);
}

static void cmd_sscan_hscan(struct conn *c, struct arg *a, size_t argc, enum kv_type t)
{
    uint64_t cursor;
    const struct arg *pattern;
    long long count;
    if (!get_cursor(c, &a[2], &cursor)) return;
    if (!scan_options(c, a, argc, 3, &pattern, &count, NULL)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], t, &o)) return;
    struct keylist l = {0}, m = {0};
    size_t per = t == KV_HASH ? 2 : 1;
    if (o) {
        long long steps = count * 10;
        do {
            cursor = t == KV_SET ? kv_set_scan(S.kv, o, cursor, collect_member, &l)
                                 : kv_hash_scan(S.kv, o, cursor, collect_field, &l);
        } while (cursor && (long long)(l.n / per) < count && --steps > 0 && !l.oom);
    } else {
        cursor = 0;
    }
    for (size_t off = 0; off < l.len && !l.oom;) {
        const char *e[2];
        size_t en[2];
        for (size_t k = 0; k < per; k++) {
            memcpy(&en[k], l.buf + off, sizeof en[k]);
            e[k] = l.buf + off + sizeof en[k];
            off += sizeof en[k] + en[k];
        }
        if (pattern && !glob_match(pattern->p, pattern->n, e[0], en[0])) continue;
        for (size_t k = 0; k < per; k++) keylist_add(&m, e[k], en[k]);
    }
    free(l.buf);
    if (l.oom || m.oom) {
        free(m.buf);
        return out_oom(c);
    }
    out_cursor(c, cursor);
    out_keylist(c, &m);
}

static void cmd_sscan(struct conn *c, struct arg *a, size_t argc)
{
    cmd_sscan_hscan(c, a, argc, KV_SET);
}

static void cmd_hscan(struct conn *c, struct arg *a, size_t argc)
{
    cmd_sscan_hscan(c, a, argc, KV_HASH);
}

/* ---- hashes */
static void hset_generic(struct conn *c, struct arg *a, size_t argc, bool hmset)
{
    if (argc % 2 == 1)
        return out_err(c, "ERR wrong number of arguments for '%s' command",
                       hmset ? "hmset" : "hset");
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    long long created = 0;
    for (size_t i = 2; i < argc; i += 2) {
        int r = kv_hash_set(S.kv, o, a[i].p, a[i].n, a[i + 1].p, a[i + 1].n);
        if (r < 0) {
            drop_if_empty(o, kv_hash_len(S.kv, o));
            return out_oom(c);
        }
        created += r;
    }
    S.changes += (argc - 2) / 2;
    if (hmset)
        out_ok(c);
    else
        out_int(c, created);
}

static void cmd_hset(struct conn *c, struct arg *a, size_t argc)
{
    hset_generic(c, a, argc, false);
}

static void cmd_hmset(struct conn *c, struct arg *a, size_t argc)
{
    hset_generic(c, a, argc, true);
}

static void cmd_hsetnx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *v;
    size_t vn;
    if (kv_hash_get(S.kv, o, a[2].p, a[2].n, &v, &vn)) return out_int(c, 0);
    if (kv_hash_set(S.kv, o, a[2].p, a[2].n, a[3].p, a[3].n) < 0) {
        drop_if_empty(o, kv_hash_len(S.kv, o));
        return out_oom(c);
    }
    S.changes++;
    out_int(c, 1);
}

static void cmd_hget(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn;
    if (!o || !kv_hash_get(S.kv, o, a[2].p, a[2].n, &v, &vn)) return out_nil(c);
    out_bulk(c, v, vn);
}

static void cmd_hmget(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        const char *v;
        size_t vn;
        if (o && kv_hash_get(S.kv, o, a[i].p, a[i].n, &v, &vn))
            out_bulk(c, v, vn);
        else
            out_nil(c);
    }
}

static void cmd_hdel(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_hash_del(S.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_hash_len(S.kv, o));
    S.changes += (uint64_t)n;
    out_int(c, n);
}

static void cmd_hlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    out_int(c, o ? (long long)kv_hash_len(S.kv, o) : 0);
}

static void cmd_hexists(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn;
    out_int(c, o && kv_hash_get(S.kv, o, a[2].p, a[2].n, &v, &vn));
}

static void cmd_hstrlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn = 0;
    if (o) kv_hash_get(S.kv, o, a[2].p, a[2].n, &v, &vn);
    out_int(c, (long long)vn);
}

/* HGETALL, HKEYS, HVALS */
struct hash_out {
    struct conn *c;
    bool keys, vals;
};

static void out_field(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    struct hash_out *h = arg;
    if (h->keys) out_bulk(h->c, f, fn);
    if (h->vals) out_bulk(h->c, v, vn);
}

static void hgetall_generic(struct conn *c, struct arg *a, bool keys, bool vals)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    if (!o) return out_array(c, 0);
    out_array(c, kv_hash_len(S.kv, o) * (keys && vals ? 2 : 1));
    struct hash_out h = {c, keys, vals};
    uint64_t cursor = 0;
    do cursor = kv_hash_scan(S.kv, o, cursor, out_field, &h);
    while (cursor);
}

static void cmd_hgetall(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, true, true);
}

static void cmd_hkeys(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, true, false);
}

static void cmd_hvals(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, false, true);
}

static void cmd_hincrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by, v = 0;
    if (!get_ll(c, &a[3], &by)) return;
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *p;
    size_t n;
    if (kv_hash_get(S.kv, o, a[2].p, a[2].n, &p, &n) && !parse_ll(&(struct arg){p, n}, &v))
        return out_err(c, "ERR hash value is not an integer");
    if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v)) {
        drop_if_empty(o, kv_hash_len(S.kv, o));
        return out_err(c, "ERR increment or decrement would overflow");
    }
    v += by;
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%lld", v);
    if (kv_hash_set(S.kv, o, a[2].p, a[2].n, buf, (size_t)len) < 0) {
        drop_if_empty(o, kv_hash_len(S.kv, o));
        return out_oom(c);
    }
    S.changes++;
    out_int(c, v);
}

static void cmd_hincrbyfloat(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long double by, v = 0;
    if (!parse_ldouble(a[3].p, a[3].n, &by)) return out_err(c, "ERR value is not a valid float");
    if (isnan(by) || isinf(by)) return out_err(c, "ERR value is NaN or Infinity");
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *p;
    size_t n;
    if (kv_hash_get(S.kv, o, a[2].p, a[2].n, &p, &n) && !parse_ldouble(p, n, &v))
        return out_err(c, "ERR hash value is not a float");
    v += by;
    if (isnan(v) || isinf(v)) {
        drop_if_empty(o, kv_hash_len(S.kv, o));
        return out_err(c, "ERR increment would produce NaN or Infinity");
    }
    char buf[5200];
    int len = format_ldouble(buf, sizeof buf, v);
    if (kv_hash_set(S.kv, o, a[2].p, a[2].n, buf, (size_t)len) < 0) {
        drop_if_empty(o, kv_hash_len(S.kv, o));
        return out_oom(c);
    }
    S.changes++;
    out_bulk(c, buf, (size_t)len);
}

/* ---- sorted sets */
enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

static void zadd_generic(struct conn *c, struct arg *a, size_t argc, int flags)
{
    size_t j = 2;
    for (; j < argc; j++) {
        if (is(&a[j], "NX"))
            flags |= Z_NX;
        else if (is(&a[j], "XX"))
            flags |= Z_XX;
        else if (is(&a[j], "GT"))
            flags |= Z_GT;
        else if (is(&a[j], "LT"))
            flags |= Z_LT;
        else if (is(&a[j], "CH"))
            flags |= Z_CH;
        else if (is(&a[j], "INCR"))
            flags |= Z_INCR;
        else
            break;
    }
    size_t elements = argc - j;
    if (elements % 2 || !elements) return out_syntax(c);
    elements /= 2;
    if ((flags & Z_NX) && (flags & Z_XX))
        return out_err(c, "ERR XX and NX options at the same time are not compatible");
    if (((flags & Z_GT) && (flags & Z_NX)) || ((flags & Z_LT) && (flags & Z_NX)) ||
        ((flags & Z_GT) && (flags & Z_LT)))
        return out_err(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
    if ((flags & Z_INCR) && elements > 1)
        return out_err(c, "ERR INCR option supports a single increment-element pair");
    for (size_t i = 0; i < elements; i++) {
        double d;
        if (!parse_double(a[j + 2 * i].p, a[j + 2 * i].n, &d))
            return out_err(c, "ERR value is not a valid float");
    }
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o) {
        if (flags & Z_XX) return (flags & Z_INCR) ? out_nil(c) : out_int(c, 0);
        if (!(o = kv_create(S.kv, a[1].p, a[1].n, KV_ZSET))) return out_oom(c);
    }
    long long added = 0, updated = 0, processed = 0;
    double result = 0;
    bool aborted = false;
    for (size_t i = 0; i < elements; i++) {
        const struct arg *m = &a[j + 2 * i + 1];
        double score, cur;
        parse_double(a[j + 2 * i].p, a[j + 2 * i].n, &score);
        bool exists = kv_zset_score(S.kv, o, m->p, m->n, &cur);
        if ((exists && (flags & Z_NX)) || (!exists && (flags & Z_XX))) {
            aborted = true;
            continue;
        }
        if (exists && (flags & Z_INCR)) {
            score += cur;
            if (isnan(score)) {
                drop_if_empty(o, kv_zset_card(S.kv, o));
                return out_err(c, "ERR resulting score is not a number (NaN)");
            }
        }
        if (exists && (((flags & Z_GT) && score <= cur) || ((flags & Z_LT) && score >= cur))) {
            aborted = true;
            continue;
        }
        /* stored without -0, as Redis's small sets keep scores as text ("0");
         * the reply has the score computed */
        int r = kv_zset_add(S.kv, o, m->p, m->n, score == 0 ? 0 : score);
        if (r < 0) {
            drop_if_empty(o, kv_zset_card(S.kv, o));
            return out_oom(c);
        }
        if (r == 1)
            added++;
        else if (score != cur)
            updated++;
        processed++;
        result = score;
    }
    drop_if_empty(o, kv_zset_card(S.kv, o));
    S.changes += (uint64_t)(added + updated);
    if (flags & Z_INCR) {
        if (aborted && !processed) return out_nil(c);
        return out_double(c, result);
    }
    out_int(c, (flags & Z_CH) ? added + updated : added);
}

static void cmd_zadd(struct conn *c, struct arg *a, size_t argc)
{
    zadd_generic(c, a, argc, 0);
}

static void cmd_zincrby(struct conn *c, struct arg *a, size_t argc)
{
    zadd_generic(c, a, argc, Z_INCR);
}

static void cmd_zrem(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_zset_rem(S.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_zset_card(S.kv, o));
    S.changes += (uint64_t)n;
    out_int(c, n);
}

static void cmd_zscore(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    double d;
    if (!o || !kv_zset_score(S.kv, o, a[2].p, a[2].n, &d)) return out_nil(c);
    out_double(c, d);
}

static void cmd_zmscore(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        double d;
        if (o && kv_zset_score(S.kv, o, a[i].p, a[i].n, &d))
            out_double(c, d);
        else
            out_nil(c);
    }
}

static void cmd_zcard(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    out_int(c, o ? (long long)kv_zset_card(S.kv, o) : 0);
}

static void cmd_zrank(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long r = o ? kv_zset_rank(S.kv, o, a[2].p, a[2].n) : -1;
    if (r < 0) return out_nil(c);
    bool rev = a[0].n == 8; /* zrevrank */
    out_int(c, rev ? (long long)kv_zset_card(S.kv, o) - 1 - r : r);
}

static void out_znode(struct conn *c, kv_znode *z, bool scores)
{
    const char *m;
    size_t n;
    double d;
    kv_znode_get(z, &m, &n, &d);
    out_bulk(c, m, n);
    if (scores) out_double(c, d);
}

/* A score range's end as ZRANGEBYSCORE takes it: "(" for exclusive */
static bool parse_score_bound(const struct arg *a, double *v, bool *excl)
{
    *excl = a->n && a->p[0] == '(';
    const char *p = a->p + *excl;
    size_t n = a->n - *excl;
    char buf[128];
    if (n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    *v = strtod(buf, &end); /* as Redis's zslParseRange: "" is 0 */
    return !*end && !isnan(*v);
}

static bool above_min(double s, double min, bool minex)
{
    return minex ? s > min : s >= min;
}

static bool below_max(double s, double max, bool maxex)
{
    return maxex ? s < max : s <= max;
}

/* ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES],
 * ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE */
static void zrange_generic(struct conn *c, struct arg *a, size_t argc, bool byscore, bool rev)
{
    bool scores = false, limit = false;
    long long offset = 0, count = -1;
    for (size_t j = 4; j < argc; j++) {
        if (is(&a[j], "WITHSCORES")) {
            scores = true;
        } else if (is(&a[j], "LIMIT") && j + 2 < argc) {
            if (!get_ll(c, &a[j + 1], &offset) || !get_ll(c, &a[j + 2], &count)) return;
            limit = true;
            j += 2;
        } else if (is(&a[0], "zrange") && is(&a[j], "BYSCORE")) {
            byscore = true;
        } else if (is(&a[0], "zrange") && is(&a[j], "REV")) {
            rev = true;
        } else {
            return out_syntax(c);
        }
    }
    if (limit && !byscore)
        return out_err(c, "ERR syntax error, LIMIT is only supported in combination with "
                          "either BYSCORE or BYLEX");
    if (!byscore) {
        long long start, end;
        if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
        kv_obj *o;
        if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
        long long len = o ? (long long)kv_zset_card(S.kv, o) : 0;
        if (!o || !clamp_range(len, &start, &end)) return out_array(c, 0);
        long long n = end - start + 1;
        out_array(c, (size_t)(n * (scores ? 2 : 1)));
        kv_znode *z = kv_zset_at(S.kv, o, (size_t)(rev ? len - 1 - start : start));
        for (long long i = 0; i < n; i++) {
            out_znode(c, z, scores);
            z = rev ? kv_zset_prev(S.kv, z) : kv_zset_next(S.kv, z);
        }
        return;
    }
    double min, max;
    bool minex, maxex;
    const struct arg *lo = rev ? &a[3] : &a[2], *hi = rev ? &a[2] : &a[3];
    if (!parse_score_bound(lo, &min, &minex) || !parse_score_bound(hi, &max, &maxex))
        return out_err(c, "ERR min or max is not a float");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o || offset < 0 || count == 0) return out_array(c, 0);
    /* the range's first member in the order of the reply */
    kv_znode *z;
    if (!rev) {
        z = kv_zset_first_from(S.kv, o, min, minex);
    } else { /* the last member with a score within max */
        z = kv_zset_first_from(S.kv, o, max, !maxex);
        z = z ? kv_zset_prev(S.kv, z) : kv_zset_at(S.kv, o, kv_zset_card(S.kv, o) - 1);
    }
    for (; z && offset > 0; offset--) z = rev ? kv_zset_prev(S.kv, z) : kv_zset_next(S.kv, z);
    /* count first, then reply */
    size_t n = 0;
    for (kv_znode *x = z; x && (count < 0 || (long long)n < count);
         x = rev ? kv_zset_prev(S.kv, x) : kv_zset_next(S.kv, x)) {
        const char *m;
        size_t mn;
        double d;
        kv_znode_get(x, &m, &mn, &d);
        if (rev ? !above_min(d, min, minex) : !below_max(d, max, maxex)) break;
        n++;
    }
    out_array(c, n * (scores ? 2 : 1));
    for (size_t i = 0; i < n; i++) {
        out_znode(c, z, scores);
        z = rev ? kv_zset_prev(S.kv, z) : kv_zset_next(S.kv, z);
    }
}

static void cmd_zrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, false, false);
}

static void cmd_zrevrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, false, true);
}

static void cmd_zrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, true, false);
}

static void cmd_zrevrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, true, true);
}

static void cmd_zcount(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    double min, max;
    bool minex, maxex;
    if (!parse_score_bound(&a[2], &min, &minex) || !parse_score_bound(&a[3], &max, &maxex))
        return out_err(c, "ERR min or max is not a float");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long n = 0;
    for (kv_znode *z = o ? kv_zset_first_from(S.kv, o, min, minex) : NULL; z;
         z = kv_zset_next(S.kv, z)) {
        const char *m;
        size_t mn;
        double d;
        kv_znode_get(z, &m, &mn, &d);
        if (!below_max(d, max, maxex)) break;
        n++;
    }
    out_int(c, n);
}

static void zpop_generic(struct conn *c, struct arg *a, size_t argc, bool max)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    if (count == 0) return out_array(c, 0);
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o) return out_array(c, 0);
    size_t card = kv_zset_card(S.kv, o);
    if ((unsigned long long)count > card) count = (long long)card;
    out_array(c, (size_t)count * 2);
    for (long long i = 0; i < count; i++) {
        kv_znode *z = kv_zset_at(S.kv, o, max ? kv_zset_card(S.kv, o) - 1 : 0);
        const char *m;
        size_t n;
        double d;
        kv_znode_get(z, &m, &n, &d);
        out_bulk(c, m, n);
        out_double(c, d);
        kv_zset_rem(S.kv, o, m, n);
        S.changes++;
    }
    drop_if_empty(o, kv_zset_card(S.kv, o));
}

static void cmd_zpopmin(struct conn *c, struct arg *a, size_t argc)
{
    zpop_generic(c, a, argc, false);
}

static void cmd_zpopmax(struct conn *c, struct arg *a, size_t argc)
{
    zpop_generic(c, a, argc, true);
}

/* ---- the server */
static void cmd_ping(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 2) return out_err(c, "ERR wrong number of arguments for 'ping' command");
    if (argc == 2)
        out_bulk(c, a[1].p, a[1].n);
    else
        out_str(c, "+PONG\r\n");
}

static void cmd_echo(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    out_bulk(c, a[1].p, a[1].n);
}

static void cmd_time(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char s[24], us[24];
    int n = snprintf(s, sizeof s, "%lld", (long long)ts.tv_sec);
    int m = snprintf(us, sizeof us, "%ld", ts.tv_nsec / 1000);
    out_array(c, 2);
    out_bulk(c, s, (size_t)n);
    out_bulk(c, us, (size_t)m);
}

static void cmd_bgsave(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (S.bgsave) return out_err(c, "ERR Background save already in progress");
    if (start_bgsave() < 0) return out_err(c, "ERR %s", S.save_error);
    out_str(c, "+Background saving started\r\n");
}

static void cmd_save(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (S.bgsave) return out_err(c, "ERR Background save already in progress");
    if (save_sync() < 0) return out_err(c, "ERR %s", S.save_error);
    out_ok(c);
}

static void cmd_shutdown(struct conn *c, struct arg *a, size_t argc)
{
    enum shutdown_mode mode = SHUTDOWN_DEFAULT;
    for (size_t i = 1; i < argc; i++) {
        if (is(&a[i], "SAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_SAVE;
        else if (is(&a[i], "NOSAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_NOSAVE;
        else
            return out_syntax(c);
    }
    if (shutdown_server(mode) < 0) out_err(c, "ERR Errors trying to SHUTDOWN. Check logs.");
}

static void cmd_lastsave(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)S.lastsave);
}

static void cmd_select(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long db;
    if (!parse_ll(&a[1], &db)) return out_err(c, "ERR value is not an integer or out of range");
    if (db != 0) return out_err(c, "ERR DB index is out of range");
    out_ok(c);
}

static void cmd_quit(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_ok(c);
    c->closing = true;
}

static void cmd_command(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_array(c, 0);
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

/* CONFIG GET pattern...: the parameters tools ask for (redis-benchmark:
 * save, appendonly), matched as globs */
static void cmd_config(struct conn *c, struct arg *a, size_t argc)
{
    if (is(&a[1], "RESETSTAT") && argc == 2) return out_ok(c);
    if (!is(&a[1], "GET") || argc < 3) {
        char sub[600];
        return out_err(c, "ERR unknown subcommand '%s'. Try CONFIG HELP.",
                       repr(sub, sizeof sub, a[1].p, a[1].n, 128));
    }
    char save[512], port[16], mem[24], limit[64];
    save_points_str(save, sizeof save);
    snprintf(port, sizeof port, "%d", S.port);
    snprintf(mem, sizeof mem, "%zu", S.mem);
    snprintf(limit, sizeof limit, "normal 0 0 0 slave 0 0 0 pubsub 0 0 0");
    const char *params[][2] = {{"save", save},
                               {"appendonly", "no"},
                               {"dir", S.dir},
                               {"dbfilename", S.dbfile},
                               {"port", port},
                               {"maxmemory", mem},
                               {"maxmemory-policy", "noeviction"},
                               {"databases", "1"},
                               {"proto-max-bulk-len", "67108864"}};
    enum { NP = sizeof params / sizeof params[0] };
    bool want[NP] = {false};
    size_t count = 0;
    for (size_t i = 2; i < argc; i++)
        for (size_t k = 0; k < NP; k++) {
            char low[64];
            size_t n = a[i].n < sizeof low ? a[i].n : sizeof low - 1;
            for (size_t j = 0; j < n; j++) low[j] = (char)tolower((unsigned char)a[i].p[j]);
            if (!want[k] && glob_match(low, n, params[k][0], strlen(params[k][0]))) {
                want[k] = true;
                count++;
            }
        }
    out_array(c, 2 * count);
    for (size_t k = 0; k < NP; k++)
        if (want[k]) {
            out_cstr(c, params[k][0]);
            out_cstr(c, params[k][1]);
        }
}

/* INFO [section ...]: the sections and fields tools read. */
static void cmd_info(struct conn *c, struct arg *a, size_t argc)
{
    static const char *names[] = {"server",      "clients", "memory",
                                  "persistence", "stats",   "keyspace"};
    enum { N = sizeof names / sizeof names[0] };
    bool want[N];
    for (size_t k = 0; k < N; k++) want[k] = argc == 1;
    for (size_t i = 1; i < argc; i++)
        for (size_t k = 0; k < N; k++)
            if (is(&a[i], names[k]) || is(&a[i], "all") || is(&a[i], "everything") ||
                is(&a[i], "default"))
                want[k] = true;
    char buf[4096];
    size_t o = 0;
#define ADD(...) o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, __VA_ARGS__)
    time_t now = time(NULL);
    if (want[0])
        ADD("# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
            "kv_server:trapkit\r\narch_bits:64\r\nmultiplexing_api:epoll\r\n"
            "process_id:%ld\r\ntcp_port:%d\r\nuptime_in_seconds:%ld\r\n"
            "uptime_in_days:%ld\r\nexecutable:kv-server\r\n\r\n",
            (long)getpid(), S.port, (long)(now - S.start_time), (long)(now - S.start_time) / 86400);
    if (want[1])
        ADD("# Clients\r\nconnected_clients:%lu\r\nblocked_clients:0\r\n"
            "client_output_buffer_limit:%llu\r\n\r\n",
            (unsigned long)S.nconns, S.out_hard);
    if (want[2])
        ADD("# Memory\r\nused_memory:%lu\r\nused_memory_human:%.2fM\r\n"
            "used_memory_dataset:%lu\r\nmaxmemory:%zu\r\nmaxmemory_policy:noeviction\r\n"
            "kv_heap_free:%lu\r\n\r\n",
            (unsigned long)kv_used(S.kv), kv_used(S.kv) / 1048576.0, (unsigned long)kv_used(S.kv),
            S.mem, (unsigned long)kv_free(S.kv));
    if (want[3]) {
        tk_ckpt_stats st = S.last_stats;
        ADD("# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:%lu\r\n"
            "rdb_bgsave_in_progress:%d\r\nrdb_last_save_time:%ld\r\n"
            "rdb_last_bgsave_status:%s\r\nrdb_last_bgsave_time_sec:%ld\r\n"
            "rdb_current_bgsave_time_sec:%ld\r\nrdb_saves:%lu\r\naof_enabled:0\r\n"
            "trapkit_checkpoint_mechanism:%s\r\ntrapkit_last_pages_saved:%lu\r\n"
            "trapkit_last_pages_by_writers:%lu\r\ntrapkit_last_pause_us:%lu\r\n"
            "trapkit_last_max_writer_stall_us:%lu\r\n"
            "trapkit_last_snapshot_instant_ms:%lld\r\n\r\n",
            (unsigned long)S.changes, S.bgsave ? 1 : 0, (long)S.lastsave, S.last_status,
            S.last_bgsave_ms < 0 ? -1L : S.last_bgsave_ms / 1000,
            S.bgsave ? (long)(now - S.bgsave_start) : -1L, (unsigned long)S.saves,
            tk_ckpt_mech_name(S.mech), (unsigned long)st.pages_saved,
            (unsigned long)st.pages_by_writers, (unsigned long)(st.pause_ns / 1000),
            (unsigned long)(st.max_stall_ns / 1000), (long long)S.last_instant_ms);
    }
    if (want[4])
        ADD("# Stats\r\ntotal_connections_received:%lu\r\ntotal_commands_processed:%lu\r\n"
            "expired_keys:%lu\r\nclient_output_limit_disconnections:%lu\r\n\r\n",
            (unsigned long)S.total_conns, (unsigned long)S.total_commands,
            (unsigned long)kv_expired_total(S.kv), (unsigned long)S.out_limit_closed);
    if (want[5]) {
        ADD("# Keyspace\r\n");
        if (kv_count(S.kv))
            ADD("db0:keys=%lu,expires=%lu,avg_ttl=0\r\n", (unsigned long)kv_count(S.kv),
                (unsigned long)kv_expires(S.kv));
        ADD("\r\n");
    }
#undef ADD
    if (o > sizeof buf - 1) o = sizeof buf - 1;
    if (o >= 2) o -= 2; /* no blank line after the last section */
    out_bulk(c, buf, o);
}

#define W CMD_WRITE
#define WM (CMD_WRITE | CMD_DENYOOM)
static struct command commands[] = {
    /* strings */
    {"get", 2, 0, cmd_get},
    {"set", -3, WM, cmd_set},
    {"setnx", 3, WM, cmd_setnx},
    {"setex", 4, WM, cmd_setex},
    {"psetex", 4, WM, cmd_setex},
    {"getset", 3, WM, cmd_getset},
    {"getdel", 2, W, cmd_getdel},
    {"mget", -2, 0, cmd_mget},
    {"mset", -3, WM, cmd_mset},
    {"msetnx", -3, WM, cmd_msetnx},
    {"incr", 2, WM, cmd_incr},
    {"decr", 2, WM, cmd_incr},
    {"incrby", 3, WM, cmd_incrby},
    {"decrby", 3, WM, cmd_decrby},
    {"incrbyfloat", 3, WM, cmd_incrbyfloat},
    {"append", 3, WM, cmd_append},
    {"strlen", 2, 0, cmd_strlen},
    {"getrange", 4, 0, cmd_getrange},
    {"substr", 4, 0, cmd_getrange},
    {"setrange", 4, WM, cmd_setrange},
    /* keys */
    {"del", -2, W, cmd_del},
    {"unlink", -2, W, cmd_del},
    {"exists", -2, 0, cmd_exists},
    {"type", 2, 0, cmd_type},
    {"rename", 3, W, cmd_rename},
    {"renamenx", 3, W, cmd_renamenx},
    {"keys", 2, 0, cmd_keys},
    {"scan", -2, 0, cmd_scan},
    {"dbsize", 1, 0, cmd_dbsize},
    {"flushall", -1, W, cmd_flushall},
    {"flushdb", -1, W, cmd_flushall},
    {"expire", -3, W, cmd_expire},
    {"pexpire", -3, W, cmd_pexpire},
    {"expireat", -3, W, cmd_expireat},
    {"pexpireat", -3, W, cmd_pexpireat},
    {"ttl", 2, 0, cmd_ttl},
    {"pttl", 2, 0, cmd_pttl},
    {"expiretime", 2, 0, cmd_expiretime},
    {"pexpiretime", 2, 0, cmd_pexpiretime},
    {"persist", 2, W, cmd_persist},
    /* lists */
    {"lpush", -3, WM, cmd_lpush},
    {"rpush", -3, WM, cmd_rpush},
    {"lpushx", -3, WM, cmd_lpushx},
    {"rpushx", -3, WM, cmd_rpushx},
    {"lpop", -2, W, cmd_lpop},
    {"rpop", -2, W, cmd_rpop},
    {"lrange", 4, 0, cmd_lrange},
    {"llen", 2, 0, cmd_llen},
    {"lindex", 3, 0, cmd_lindex},
    /* sets */
    {"sadd", -3, WM, cmd_sadd},
    {"srem", -3, W, cmd_srem},
    {"sismember", 3, 0, cmd_sismember},
    {"smismember", -3, 0, cmd_smismember},
    {"smembers", 2, 0, cmd_smembers},
    {"scard", 2, 0, cmd_scard},
    {"spop", -2, W, cmd_spop},
    {"srandmember", -2, 0, cmd_srandmember},
    {"sscan", -3, 0, cmd_sscan},
    /* hashes */
    {"hset", -4, WM, cmd_hset},
    {"hmset", -4, WM, cmd_hmset},
    {"hsetnx", 4, WM, cmd_hsetnx},
    {"hget", 3, 0, cmd_hget},
    {"hmget", -3, 0, cmd_hmget},
    {"hdel", -3, W, cmd_hdel},
    {"hlen", 2, 0, cmd_hlen},
    {"hexists", 3, 0, cmd_hexists},
    {"hstrlen", 3, 0, cmd_hstrlen},
    {"hgetall", 2, 0, cmd_hgetall},
    {"hkeys", 2, 0, cmd_hkeys},
    {"hvals", 2, 0, cmd_hvals},
    {"hincrby", 4, WM, cmd_hincrby},
    {"hincrbyfloat", 4, WM, cmd_hincrbyfloat},
    {"hscan", -3, 0, cmd_hscan},
    /* sorted sets */
    {"zadd", -4, WM, cmd_zadd},
    {"zincrby", 4, WM, cmd_zincrby},
    {"zrem", -3, W, cmd_zrem},
    {"zscore", 3, 0, cmd_zscore},
    {"zmscore", -3, 0, cmd_zmscore},
    {"zcard", 2, 0, cmd_zcard},
    {"zrank", 3, 0, cmd_zrank},
    {"zrevrank", 3, 0, cmd_zrank},
    {"zcount", 4, 0, cmd_zcount},
    {"zrange", -4, 0, cmd_zrange},
    {"zrevrange", -4, 0, cmd_zrevrange},
    {"zrangebyscore", -4, 0, cmd_zrangebyscore},
    {"zrevrangebyscore", -4, 0, cmd_zrevrangebyscore},
    {"zpopmin", -2, W, cmd_zpopmin},
    {"zpopmax", -2, W, cmd_zpopmax},
    /* the server */
    {"ping", -1, 0, cmd_ping},
    {"echo", 2, 0, cmd_echo},
    {"time", 1, 0, cmd_time},
    {"info", -1, 0, cmd_info},
    {"config", -2, 0, cmd_config},
    {"command", -1, 0, cmd_command},
    {"select", 2, 0, cmd_select},
    {"quit", -1, 0, cmd_quit},
    {"bgsave", -1, 0, cmd_bgsave},
    {"save", 1, 0, cmd_save},
    {"lastsave", 1, 0, cmd_lastsave},
    {"shutdown", -1, 0, cmd_shutdown},
};
#undef W
#undef WM
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static int command_cmp(const void *a, const void *b)
{
    return strcmp(((const struct command *)a)->name, ((const struct command *)b)->name);
}

static const struct command *lookup_command(const struct arg *name)
{
    char low[32];
    if (name->n >= sizeof low) return NULL;
    for (size_t i = 0; i < name->n; i++) {
        char ch = name->p[i];
        low[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    low[name->n] = 0;
    struct command key = {.name = low};
    return bsearch(&key, commands, NCOMMANDS, sizeof commands[0], command_cmp);
}

static void unknown_command(struct conn *c, struct arg *a, size_t argc)
{
    char name[600], args[700], one[600];
    size_t o = 0;
    args[0] = 0;
    for (size_t i = 1; i < argc && o < 128; i++) {
        repr(one, sizeof one, a[i].p, a[i].n, 128 - o);
        o += (size_t)snprintf(args + o, sizeof args - o, "'%s' ", one);
    }
    out_err(c, "ERR unknown command '%s', with args beginning with: %s",
            repr(name, sizeof name, a[0].p, a[0].n, 128), args);
}

static void execute(struct conn *c, struct arg *a, size_t argc)
{
    S.total_commands++;
    const struct command *cmd = lookup_command(&a[0]);
    if (!cmd) return unknown_command(c, a, argc);
    if ((cmd->arity > 0 && argc != (size_t)cmd->arity) ||
        (cmd->arity < 0 && argc < (size_t)-cmd->arity))
        return out_err(c, "ERR wrong number of arguments for '%s' command", cmd->name);
    now_ms = wall_ms();
    kv_set_now(S.kv, now_ms);
    if (cmd->flags & CMD_DENYOOM) {
        uint64_t need = 0;
        for (size_t i = 1; i < argc; i++) need += a[i].n + 64;
        if (need > kv_free(S.kv)) return out_oom(c);
    }
    cmd->fn(c, a, argc);
}

/* Background work for the store, every 100 ms: expired keys (for at most
 * about a millisecond, more while a quarter of those looked at had
 * expired, as Redis's active expiry does) and a step of rehashing. */
static void store_cron(void)
{
    now_ms = wall_ms();
    kv_set_now(S.kv, now_ms);
    for (int k = 0; k < 16 && kv_expires(S.kv); k++)
        if (kv_expire_cycle(S.kv, 200) < 50 || wall_ms() - now_ms >= 1) break;
    kv_cron(S.kv);
}

/* ---- the event loop ---------------------------------------------------- */
/* Each turn: wait for events (not at all if clients have input to run);
 * read once from each readable client; run a bounded slice of each pending
 * client's commands; write replies.  A client is pending while its input
 * may hold a complete command.  It is read only while it is not pending
 * and its unsent output is below OUT_SOFT, so neither its input nor its
 * output grows without bound. */
static int ep = -1;
static struct conn *closed; /* freed at the end of the turn */

static void set_events(struct conn *c)
{
    if (c->fd < 0) return;
    size_t unsent = c->out_len - c->out_sent;
    uint32_t ev = 0;
    if (!c->pending && !c->closing && unsent < OUT_SOFT) ev |= EPOLLIN;
    if (unsent) ev |= EPOLLOUT;
    if (ev == c->events) return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
    c->events = ev;
}

static void conn_close(struct conn *c)
{
    if (c->fd < 0) return;
    if (c->prev)
        c->prev->next = c->next;
    else
        S.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    S.nconns--;
    c->next = closed;
    closed = c;
}

static void free_closed(void)
{
    while (closed) {
        struct conn *c = closed;
        closed = c->next;
        free(c->in);
        free(c->out);
        free(c->args);
        free(c->scratch);
        free(c);
    }
}

static void set_pending(struct conn *c)
{
    if (c->pending) return;
    c->pending = true;
    c->pend_next = S.pending;
    S.pending = c;
}

/* Sends what the socket takes; returns false if the connection is gone. */
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
        if (c->out_cap > (1u << 20)) { /* give a large buffer back */
            free(c->out);
            c->out = NULL;
            c->out_cap = 0;
        }
        if (c->closing) return false;
    }
    return true;
}

/* One read of at most READ_CHUNK (or of the rest of a large argument, up
 * to 4 MiB); returns false if the connection is gone. */
static bool read_some(struct conn *c)
{
    size_t want = bulk_missing(c);
    if (want < READ_CHUNK) want = READ_CHUNK;
    if (want > (4u << 20)) want = 4u << 20;
    if (c->in_cap - c->in_len < want) {
        compact_input(c);
        size_t cap = c->in_cap ? c->in_cap : 16384;
        while (cap - c->in_len < want) cap *= 2;
        if (cap > QUERY_LIMIT) {
            protocol_error(c, "query buffer limit reached");
            return true;
        }
        if (cap != c->in_cap) {
            char *ni = realloc(c->in, cap);
            if (!ni) {
                protocol_error(c, "out of memory");
                return true;
            }
            c->in = ni;
            c->in_cap = cap;
        }
    }
    ssize_t r = read(c->fd, c->in + c->in_len, want);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (r <= 0) return false;
    c->in_len += (size_t)r;
    c->need_more = false;
    set_pending(c);
    return true;
}

/* Runs the client's commands: at most TURN_COMMANDS, and none once its
 * unsent output reaches OUT_SOFT.  It stays pending if it stopped for
 * either. */
static void run_commands(struct conn *c)
{
    unsigned ran = 0;
    while (!c->closing && !c->dead && ran < TURN_COMMANDS && c->out_len - c->out_sent < OUT_SOFT) {
        struct arg *argv;
        size_t argc;
        int r = parse_command(c, &argv, &argc);
        if (r == PARSE_MORE) {
            c->need_more = true;
            break;
        }
        if (r == PARSE_ERROR) break;
        if (argc) execute(c, argv, argc);
        if (c->argc > 4096) { /* a very long command's argument list: give it back */
            free(c->args);
            c->args = NULL;
            c->args_cap = 0;
        }
        c->argc = 0;
        ran++;
    }
    if (c->mb_left == 0 && c->scan == c->in_len) c->scan = c->in_len = c->cmd_start = 0;
}

static void accept_clients(void)
{
    for (int k = 0; k < 1000; k++) {
        int fd = accept4(S.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = ++S.next_id;
        c->bulk_len = -1;
        c->next = S.conns;
        if (S.conns) S.conns->prev = c;
        S.conns = c;
        S.nconns++;
        S.total_conns++;
        c->events = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

static void on_event(struct conn *c, uint32_t events)
{
    if (c->fd < 0) return;
    if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) return conn_close(c);
    if ((events & EPOLLIN) && !read_some(c)) return conn_close(c);
    if (events & EPOLLOUT) {
        if (!flush_out(c)) return conn_close(c);
        if (c->out_len - c->out_sent < OUT_SOFT && !c->need_more && c->scan < c->in_len)
            set_pending(c); /* output drained: run what input waits */
    }
    set_events(c);
}

/* One slice for each pending client, in turn.  Every client on the list
 * is taken off it, so none that closed stays on it. */
static void run_pending(void)
{
    struct conn *list = S.pending, *keep = NULL;
    S.pending = NULL;
    while (list) {
        struct conn *c = list;
        list = c->pend_next;
        c->pending = false;
        if (c->fd < 0) continue;
        if (c->out_len - c->out_sent < OUT_SOFT) run_commands(c);
        if (c->fd < 0) continue;
        if (c->dead || !flush_out(c)) {
            conn_close(c);
            continue;
        }
        if (!c->need_more && !c->closing && c->scan < c->in_len &&
            c->out_len - c->out_sent < OUT_SOFT) {
            c->pending = true;
            c->pend_next = keep;
            keep = c;
        }
        set_events(c);
    }
    S.pending = keep;
}

static void event_loop(void)
{
    struct epoll_event evs[256];
    int64_t next_cron = 0;
    for (;;) {
        if (S.stop) {
            shutdown_server(SHUTDOWN_DEFAULT);
            S.stop = 0; /* the save failed: keep serving */
        }
        int timeout = S.pending ? 0 : S.bgsave ? 5 : 100;
        int n = epoll_wait(ep, evs, 256, timeout);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr)
                accept_clients();
            else
                on_event(evs[i].data.ptr, evs[i].events);
        }
        kv_hold_resize(S.kv, S.bgsave);
        run_pending();
        free_closed();
        int64_t now = mono_ms();
        if (now >= next_cron || S.bgsave) {
            poll_bgsave();
            check_save_points();
        }
        if (now >= next_cron) {
            store_cron();
            next_cron = now + 100;
        }
    }
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
            return S.kv ? 0 : -1;
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
    const char *bad;
    S.kv = kv_open(ar->addr, ar->len, &bad);
    if (!S.kv) {
        fprintf(stderr, "kv-server: cannot load %s: %s\n", S.path, bad ? bad : "out of memory");
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
            "NAME] [--memory SIZE] [--save \"SECONDS CHANGES ...\"] [--client-output-buffer-limit "
            "SIZE] [--mechanism uffd-thread|uffd-sigbus|posix|fork|stop-the-world]\n",
            msg);
    return 2;
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
        } else if (!strcmp(o, "--client-output-buffer-limit")) {
            S.out_hard = parse_size(v);
            if (S.out_hard < OUT_SOFT)
                return usage("--client-output-buffer-limit must be at least 1m");
        } else if (!strcmp(o, "--mechanism")) {
            S.mech = tk_ckpt_mech_parse(v);
            if (S.mech == TK_CKPT_COUNT_) return usage("unknown --mechanism");
        } else {
            return usage("unknown option");
        }
    }
    snprintf(S.path, sizeof S.path, "%s/%s", S.dir, S.dbfile);
    snprintf(S.tmp_path, sizeof S.tmp_path, "%s/%s.tmp", S.dir, S.dbfile);
    qsort(commands, NCOMMANDS, sizeof commands[0], command_cmp);

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
           S.port, S.mem >> 20, tk_ckpt_mech_name(S.mech), S.path);
    fflush(stdout);
    event_loop();
}
