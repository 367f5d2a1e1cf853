/* bench/loadgen.c - tk-loadgen, an open-loop load generator for Redis-protocol
 * (RESP2) servers.
 *
 * Open loop (--mode open, the default): requests leave on a fixed schedule at
 * --rate requests per second (Poisson arrivals: exponential gaps; or uniform:
 * equal gaps), spread round-robin over --connections connections and
 * pipelined on a connection whenever earlier replies are still outstanding.
 * Each request's latency runs from its *scheduled* send time to the arrival
 * of its reply, so a server that stalls is charged for every request the
 * stall delays (no coordinated omission).  The generator also records its
 * own lateness (how long after its scheduled time each request was handed
 * to the kernel) so that a generator that cannot keep up is seen.
 *
 * Closed loop (--mode closed): every connection keeps --depth requests
 * outstanding and sends the next one when a reply arrives: the server's
 * capacity (throughput) at that concurrency.
 *
 * Fill (--mode fill): SETs keys 0 .. --keys-1 once each, pipelined.
 *
 * Phases: --phases a,b,c names the phases of a run; SIGUSR1 starts the next
 * one (after the last one it ends the run), SIGTERM or SIGINT ends the run.
 * With --control, lines on standard input do the same and may name the
 * instant (CLOCK_MONOTONIC) the phase began, so a generator that was not
 * scheduled at that moment still draws the boundary where it was.  A request
 * belongs to the phase and to the --interval window (default 100 ms) in
 * which it was scheduled.  --warmup S puts the first S seconds
 * into a phase "warmup" that the totals leave out.
 *
 * Latencies go into log-linear histograms (128 sub-buckets per power of two:
 * at most 0.4% error from 1 ns to 18 minutes).  The result is one JSON object
 * on stdout; a summary and warnings go to stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ histogram */
#define SUB_BITS 7
#define SUB (1u << SUB_BITS)
#define MAX_MSB 40 /* values are clamped below 2^41 ns (~36 minutes) */
#define NBUCKETS ((MAX_MSB - SUB_BITS + 2) * SUB)

struct hist {
    uint64_t n, max, min;
    double sum;
    uint64_t *c;
};

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (!p) {
        fprintf(stderr, "tk-loadgen: out of memory\n");
        exit(1);
    }
    return p;
}

static void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
    h->c = xcalloc(NBUCKETS, sizeof *h->c);
}

static void hist_free(struct hist *h)
{
    free(h->c);
    h->c = NULL;
}

static unsigned bucket_of(uint64_t v)
{
    if (v >= (2ull << MAX_MSB)) v = (2ull << MAX_MSB) - 1;
    if (v < SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - SUB_BITS;
    return (shift + 1) * SUB + (unsigned)((v >> shift) - SUB);
}

/* The middle of a bucket: within 1/256 of every value in it. */
static uint64_t bucket_mid(unsigned i)
{
    if (i < SUB) return i;
    unsigned shift = i / SUB - 1;
    uint64_t lo = (uint64_t)(SUB + i % SUB) << shift;
    return lo + ((1ull << shift) >> 1);
}

static void hist_add(struct hist *h, uint64_t v)
{
    h->c[bucket_of(v)]++;
    h->n++;
    h->sum += (double)v;
    if (v > h->max) h->max = v;
    if (v < h->min) h->min = v;
}

static void hist_merge(struct hist *d, const struct hist *s)
{
    if (!s->n) return;
    for (unsigned i = 0; i < NBUCKETS; i++) d->c[i] += s->c[i];
    d->n += s->n;
    d->sum += s->sum;
    if (s->max > d->max) d->max = s->max;
    if (s->min < d->min) d->min = s->min;
}

/* The value at quantile q (0..1): the smallest bucket that holds the
 * ceil(q*n)-th value, as its middle, never beyond the exact extremes. */
static double hist_q(const struct hist *h, double q)
{
    if (!h->n) return 0;
    uint64_t rank = (uint64_t)ceil(q * (double)h->n);
    if (rank < 1) rank = 1;
    uint64_t acc = 0;
    for (unsigned i = 0; i < NBUCKETS; i++) {
        acc += h->c[i];
        if (acc >= rank) {
            uint64_t v = bucket_mid(i);
            if (v > h->max) v = h->max;
            if (v < h->min) v = h->min;
            return (double)v;
        }
    }
    return (double)h->max;
}

/* ------------------------------------------------------------ options */
enum mode { MODE_OPEN, MODE_CLOSED, MODE_FILL };
enum cmd { CMD_SET, CMD_GET, NCMD };
static const char *const cmd_name[NCMD] = {"set", "get"};

static struct {
    const char *host;
    int port;
    enum mode mode;
    double rate;
    bool poisson;
    int conns;
    int depth;
    double duration, warmup, interval, drain;
    uint64_t keys;
    int key_digits;
    const char *key_prefix;
    int value_size;
    double set_ratio;
    double slow_us, warn_late_us;
    char *phase_names[32];
    int nphase_names;
    uint64_t seed;
    bool quiet, progress, control;
} O = {
    .host = "127.0.0.1",
    .port = -1,
    .rate = -1,
    .poisson = true,
    .conns = 16,
    .depth = -1,
    .duration = 0,
    .warmup = 0,
    .interval = 0.1,
    .drain = 30,
    .keys = 100000,
    .key_digits = 12,
    .key_prefix = "key:",
    .value_size = 984,
    .set_ratio = 0.5,
    .slow_us = 10000,
    .warn_late_us = 1000,
    .seed = 1,
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tk-loadgen --port N [options]\n"
            "  --host ADDR           server address (127.0.0.1)\n"
            "  --port N              server port (required)\n"
            "  --mode open|closed|fill\n"
            "                        open: fixed schedule at --rate (default); closed: each\n"
            "                        connection keeps --depth requests outstanding (capacity);\n"
            "                        fill: SET every key 0..--keys-1 once\n"
            "  --rate R              offered requests per second (open mode, required)\n"
            "  --arrival poisson|uniform   gaps between scheduled sends (poisson)\n"
            "  --connections C       connections, 1..1024 (16)\n"
            "  --depth D             outstanding requests per connection (closed: 1, fill: 64)\n"
            "  --duration S          run length in seconds, warm-up included (0: until the\n"
            "                        last phase ends or SIGTERM/SIGINT)\n"
            "  --warmup S            the first S seconds form phase 'warmup', left out of totals\n"
            "  --phases A,B,...      phase names (run); SIGUSR1 starts the next phase, and\n"
            "                        after the last one ends the run\n"
            "  --control             also read phase changes from standard input: lines\n"
            "                        'next [T]' and 'stop [T]', T the instant on\n"
            "                        CLOCK_MONOTONIC in seconds (default: when read)\n"
            "  --interval MS         per-interval records every MS milliseconds (100; 0: none)\n"
            "  --keys N              key space: keys PREFIX%%0Dd for 0..N-1 (100000)\n"
            "  --key-prefix P        (key:)   --key-digits D (12)\n"
            "  --value-size B        SET value bytes (984)\n"
            "  --set-ratio F         fraction of requests that are SET, the rest GET (0.5)\n"
            "  --slow US             count requests slower than US microseconds (10000)\n"
            "  --warn-lateness US    warn when the p99 send lateness exceeds US (1000)\n"
            "  --drain S             at the end, wait up to S seconds for replies (30)\n"
            "  --seed N              random seed (1)\n"
            "  --progress            a progress line on stderr every second\n"
            "  --quiet               no summary on stderr\n"
            "Prints one JSON object on stdout.\n");
}

__attribute__((noreturn, format(printf, 1, 2))) static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tk-loadgen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(tk-loadgen --help for the options)\n");
    va_end(ap);
    exit(2);
}

static double num_arg(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) die_usage("%s wants a number, not '%s'", opt, s);
    if (v < lo || v > hi) die_usage("%s must be between %g and %g, not %s", opt, lo, hi, s);
    return v;
}

static void parse(int argc, char **argv)
{
    enum {
        O_HOST = 256,
        O_PORT,
        O_MODE,
        O_RATE,
        O_ARRIVAL,
        O_CONNS,
        O_DEPTH,
        O_DURATION,
        O_WARMUP,
        O_PHASES,
        O_INTERVAL,
        O_KEYS,
        O_PREFIX,
        O_DIGITS,
        O_VSIZE,
        O_SETRATIO,
        O_SLOW,
        O_WARNLATE,
        O_DRAIN,
        O_SEED,
        O_PROGRESS,
        O_CONTROL,
        O_QUIET,
        O_HELP
    };
    static const struct option lo[] = {
        {"host", 1, 0, O_HOST},
        {"port", 1, 0, O_PORT},
        {"mode", 1, 0, O_MODE},
        {"rate", 1, 0, O_RATE},
        {"arrival", 1, 0, O_ARRIVAL},
        {"connections", 1, 0, O_CONNS},
        {"depth", 1, 0, O_DEPTH},
        {"duration", 1, 0, O_DURATION},
        {"warmup", 1, 0, O_WARMUP},
        {"phases", 1, 0, O_PHASES},
        {"interval", 1, 0, O_INTERVAL},
        {"keys", 1, 0, O_KEYS},
        {"key-prefix", 1, 0, O_PREFIX},
        {"key-digits", 1, 0, O_DIGITS},
        {"value-size", 1, 0, O_VSIZE},
        {"set-ratio", 1, 0, O_SETRATIO},
        {"slow", 1, 0, O_SLOW},
        {"warn-lateness", 1, 0, O_WARNLATE},
        {"drain", 1, 0, O_DRAIN},
        {"seed", 1, 0, O_SEED},
        {"progress", 0, 0, O_PROGRESS},
        {"control", 0, 0, O_CONTROL},
        {"quiet", 0, 0, O_QUIET},
        {"help", 0, 0, O_HELP},
        {0, 0, 0, 0},
    };
    char *phases = NULL;
    opterr = 0;
    for (;;) {
        int li = 0;
        int c = getopt_long(argc, argv, ":", lo, &li);
        if (c == -1) break;
        const char *a = optarg;
        switch (c) {
        case O_HOST:
            O.host = a;
            break;
        case O_PORT:
            O.port = (int)num_arg("--port", a, 1, 65535);
            break;
        case O_MODE:
            if (!strcmp(a, "open"))
                O.mode = MODE_OPEN;
            else if (!strcmp(a, "closed"))
                O.mode = MODE_CLOSED;
            else if (!strcmp(a, "fill"))
                O.mode = MODE_FILL;
            else
                die_usage("--mode is open, closed or fill, not '%s'", a);
            break;
        case O_RATE:
            O.rate = num_arg("--rate", a, 1e-3, 1e8);
            break;
        case O_ARRIVAL:
            if (!strcmp(a, "poisson"))
                O.poisson = true;
            else if (!strcmp(a, "uniform"))
                O.poisson = false;
            else
                die_usage("--arrival is poisson or uniform, not '%s'", a);
            break;
        case O_CONNS:
            O.conns = (int)num_arg("--connections", a, 1, 1024);
            break;
        case O_DEPTH:
            O.depth = (int)num_arg("--depth", a, 1, 100000);
            break;
        case O_DURATION:
            O.duration = num_arg("--duration", a, 0, 1e6);
            break;
        case O_WARMUP:
            O.warmup = num_arg("--warmup", a, 0, 1e6);
            break;
        case O_PHASES:
            phases = strdup(a);
            break;
        case O_INTERVAL:
            O.interval = num_arg("--interval", a, 0, 1e7) / 1000;
            break;
        case O_KEYS:
            O.keys = (uint64_t)num_arg("--keys", a, 1, 1e15);
            break;
        case O_PREFIX:
            O.key_prefix = a;
            break;
        case O_DIGITS:
            O.key_digits = (int)num_arg("--key-digits", a, 1, 20);
            break;
        case O_VSIZE:
            O.value_size = (int)num_arg("--value-size", a, 0, 64 << 20);
            break;
        case O_SETRATIO:
            O.set_ratio = num_arg("--set-ratio", a, 0, 1);
            break;
        case O_SLOW:
            O.slow_us = num_arg("--slow", a, 0, 1e12);
            break;
        case O_WARNLATE:
            O.warn_late_us = num_arg("--warn-lateness", a, 0, 1e12);
            break;
        case O_DRAIN:
            O.drain = num_arg("--drain", a, 0, 1e6);
            break;
        case O_SEED:
            O.seed = (uint64_t)num_arg("--seed", a, 0, 1e18);
            break;
        case O_CONTROL:
            O.control = true;
            break;
        case O_PROGRESS:
            O.progress = true;
            break;
        case O_QUIET:
            O.quiet = true;
            break;
        case O_HELP:
            usage(stdout);
            exit(0);
        case ':':
            die_usage("%s needs a value", argv[optind - 1]);
        default:
            die_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) die_usage("unexpected argument '%s'", argv[optind]);
    if (O.port < 0) die_usage("--port is required");
    if (O.mode == MODE_OPEN && O.rate < 0) die_usage("--mode open needs --rate");
    if (O.mode != MODE_OPEN && O.rate >= 0) die_usage("--rate is for --mode open only");
    if (O.mode == MODE_OPEN && O.depth >= 0) die_usage("--depth is for --mode closed or fill");
    if (O.depth < 0) O.depth = O.mode == MODE_FILL ? 64 : 1;
    if (O.mode == MODE_FILL && (phases || O.warmup > 0 || O.duration > 0))
        die_usage("--mode fill takes no --phases, --warmup or --duration");
    if (O.mode == MODE_CLOSED && O.duration <= 0 && !phases)
        die_usage("--mode closed needs --duration or --phases");
    if (O.warmup > 0 && O.duration > 0 && O.warmup >= O.duration)
        die_usage("--warmup must be shorter than --duration");
    if (O.keys > 1) {
        double digits = floor(log10((double)(O.keys - 1))) + 1;
        if (digits > O.key_digits)
            die_usage("--keys %llu needs more than --key-digits %d", (unsigned long long)O.keys,
                      O.key_digits);
    }
    if (strlen(O.key_prefix) > 200) die_usage("--key-prefix is too long");
    if (O.warmup > 0) O.phase_names[O.nphase_names++] = "warmup";
    if (phases) {
        for (char *save = NULL, *t = strtok_r(phases, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            if (O.nphase_names == 31) die_usage("at most 30 phases");
            if (!*t || strlen(t) > 64) die_usage("bad phase name");
            for (const char *p = t; *p; p++)
                if (*p == '"' || *p == '\\' || (unsigned char)*p < 32)
                    die_usage("phase names are plain words");
            O.phase_names[O.nphase_names++] = t;
        }
    } else {
        O.phase_names[O.nphase_names++] = "run";
    }
    if (O.nphase_names == (O.warmup > 0 ? 1 : 0)) die_usage("--phases names no phase");
}

/* ------------------------------------------------------------ state */
struct req {
    int64_t sched; /* ns since the start */
    int64_t late;  /* how long after sched it was handed to the kernel */
    uint8_t cmd;
};

struct conn {
    int fd;
    bool dead, want_out;
    char *out;
    size_t out_len, out_cap, out_off;
    char *in;
    size_t in_len, in_cap;
    struct req *q; /* outstanding requests, oldest first (a ring) */
    size_t q_head, q_len, q_cap;
    uint64_t filled_next; /* fill mode */
};

struct phase {
    const char *name;
    int64_t start, end; /* ns since the start */
    struct hist lat[NCMD], late;
    uint64_t sent, done, errors, slow, unanswered;
};

struct interval {
    struct hist *h; /* NULL once summarised */
    uint64_t n, errors, slow;
    double p50, p99, p999, max, late_max;
};

static struct conn *C;
static struct phase P[32];
static int nphases, cur_phase;
static struct interval *IV;
static size_t niv, iv_cap, iv_done; /* intervals [0, iv_done) are summarised */
static int64_t interval_ns;
static struct timespec t0;
static uint64_t rng_state;
static char *pool;
static size_t pool_len;
static char keybuf[256];
static int64_t slow_ns;
static uint64_t total_sent, total_done, total_errors, conn_losses;
static uint64_t fill_next;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec);
}

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static double rnd01(void)
{
    return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
}

static void out_reserve(struct conn *c, size_t n)
{
    if (c->out_off && c->out_off == c->out_len) c->out_off = c->out_len = 0;
    if (c->out_len + n <= c->out_cap) return;
    if (c->out_off) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
        if (c->out_len + n <= c->out_cap) return;
    }
    size_t cap = c->out_cap ? c->out_cap : 65536;
    while (cap < c->out_len + n) cap *= 2;
    c->out = realloc(c->out, cap);
    if (!c->out) {
        fprintf(stderr, "tk-loadgen: out of memory\n");
        exit(1);
    }
    c->out_cap = cap;
}

static void out_put(struct conn *c, const void *p, size_t n)
{
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void q_push(struct conn *c, struct req r)
{
    if (c->q_len == c->q_cap) {
        size_t cap = c->q_cap ? c->q_cap * 2 : 256;
        struct req *q = xcalloc(cap, sizeof *q);
        for (size_t i = 0; i < c->q_len; i++) q[i] = c->q[(c->q_head + i) % c->q_cap];
        free(c->q);
        c->q = q;
        c->q_cap = cap;
        c->q_head = 0;
    }
    c->q[(c->q_head + c->q_len) % c->q_cap] = r;
    c->q_len++;
}

static struct req q_pop(struct conn *c)
{
    struct req r = c->q[c->q_head];
    c->q_head = (c->q_head + 1) % c->q_cap;
    c->q_len--;
    return r;
}

/* Writes one request on c; key k (or a random one when k is UINT64_MAX). */
static void put_request(struct conn *c, enum cmd cmd, uint64_t k)
{
    if (k == UINT64_MAX) k = rnd() % O.keys;
    int kn = snprintf(keybuf, sizeof keybuf, "%s%0*llu", O.key_prefix, O.key_digits,
                      (unsigned long long)k);
    char head[64];
    if (cmd == CMD_SET) {
        size_t off = rnd() % (pool_len - (size_t)O.value_size + 1);
        out_reserve(c, (size_t)kn + (size_t)O.value_size + 96);
        int hn = snprintf(head, sizeof head, "*3\r\n$3\r\nSET\r\n$%d\r\n", kn);
        out_put(c, head, (size_t)hn);
        out_put(c, keybuf, (size_t)kn);
        hn = snprintf(head, sizeof head, "\r\n$%d\r\n", O.value_size);
        out_put(c, head, (size_t)hn);
        out_put(c, pool + off, (size_t)O.value_size);
        out_put(c, "\r\n", 2);
    } else {
        out_reserve(c, (size_t)kn + 64);
        int hn = snprintf(head, sizeof head, "*2\r\n$3\r\nGET\r\n$%d\r\n", kn);
        out_put(c, head, (size_t)hn);
        out_put(c, keybuf, (size_t)kn);
        out_put(c, "\r\n", 2);
    }
}

static int phase_of(int64_t sched)
{
    int p = cur_phase;
    while (p > 0 && sched < P[p].start) p--;
    return p;
}

static struct interval *interval_of(int64_t sched)
{
    if (!interval_ns) return NULL;
    size_t i = (size_t)(sched / interval_ns);
    if (i < iv_done) return NULL; /* cannot happen: summarised only when none are left */
    if (i >= iv_cap) {
        size_t cap = iv_cap ? iv_cap : 1024;
        while (cap <= i) cap *= 2;
        IV = realloc(IV, cap * sizeof *IV);
        if (!IV) {
            fprintf(stderr, "tk-loadgen: out of memory\n");
            exit(1);
        }
        memset(IV + iv_cap, 0, (cap - iv_cap) * sizeof *IV);
        iv_cap = cap;
    }
    if (i >= niv) niv = i + 1;
    struct interval *v = &IV[i];
    if (!v->h) {
        v->h = xcalloc(1, sizeof *v->h);
        hist_init(v->h);
    }
    return v;
}

static void send_one(struct conn *c, int64_t sched, int64_t now, uint64_t key)
{
    enum cmd cmd = rnd01() < O.set_ratio ? CMD_SET : CMD_GET;
    if (O.mode == MODE_FILL) cmd = CMD_SET;
    put_request(c, cmd, key);
    int64_t late = O.mode == MODE_OPEN && now > sched ? now - sched : 0;
    q_push(c, (struct req){.sched = sched, .late = late, .cmd = (uint8_t)cmd});
    if (O.mode == MODE_OPEN) {
        struct interval *v = interval_of(sched);
        if (v) {
            double l = (double)(now > sched ? now - sched : 0);
            if (l > v->late_max) v->late_max = l;
        }
    }
    total_sent++;
    c->want_out = true;
}

/* A request is counted in its phase when it completes: a phase change
 * given with an earlier instant (--control) still places it right. */
static void complete(struct req r, int64_t now, bool err)
{
    struct phase *p = &P[phase_of(r.sched)];
    struct interval *v = interval_of(r.sched);
    total_done++;
    p->sent++;
    if (O.mode == MODE_OPEN) hist_add(&p->late, (uint64_t)r.late);
    if (err) {
        p->errors++;
        total_errors++;
        if (v) v->errors++;
        return;
    }
    uint64_t lat = (uint64_t)(now > r.sched ? now - r.sched : 0);
    hist_add(&p->lat[r.cmd], lat);
    p->done++;
    if ((int64_t)lat > slow_ns) {
        p->slow++;
        if (v) v->slow++;
    }
    if (v) hist_add(v->h, lat);
}

/* ------------------------------------------------------------ network */
static int ep;
#define ID_SIGNAL UINT32_MAX
#define ID_CONTROL (UINT32_MAX - 1)

static int connect_one(void)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", O.port);
    int e = getaddrinfo(O.host, port, &hints, &ai);
    if (e) {
        fprintf(stderr, "tk-loadgen: %s: %s\n", O.host, gai_strerror(e));
        exit(1);
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        e = errno;
        close(fd);
        fd = -1;
        errno = e;
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "tk-loadgen: cannot connect to %s:%d: %s\n", O.host, O.port,
                strerror(errno));
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void conn_lost(struct conn *c, int64_t now, const char *why)
{
    if (c->dead) return;
    c->dead = true;
    conn_losses++;
    fprintf(stderr, "tk-loadgen: connection %d lost: %s (%zu replies outstanding)\n", (int)(c - C),
            why, c->q_len);
    while (c->q_len) complete(q_pop(c), now, true);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->out_len = c->out_off = 0;
}

static void flush_conn(struct conn *c, int64_t now)
{
    if (c->dead) return;
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        conn_lost(c, now, n < 0 ? strerror(errno) : "short send");
        return;
    }
    bool pending = c->out_off < c->out_len;
    if (pending != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (pending ? EPOLLOUT : 0), .data.u32 = 0};
        ev.data.u32 = (uint32_t)(c - C);
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
    c->want_out = pending;
    if (!pending) c->out_off = c->out_len = 0;
}

/* Length of the complete RESP reply at p (0: incomplete, -1: malformed);
 * *err is set for an error reply. */
static long resp_len(const char *p, size_t n, bool *err, int depth)
{
    if (!n) return 0;
    if (depth > 8) return -1;
    const char *nl = memchr(p, '\n', n);
    if (!nl) return n > 65536 ? -1 : 0;
    if (nl == p || nl[-1] != '\r') return -1;
    size_t line = (size_t)(nl - p) + 1;
    char t = p[0];
    if (t == '+' || t == ':') return (long)line;
    if (t == '-') {
        *err = true;
        return (long)line;
    }
    if (t != '$' && t != '*') return -1;
    char *end;
    long v = strtol(p + 1, &end, 10);
    if (end != nl - 1) return -1;
    if (t == '$') {
        if (v < 0) return (long)line;
        if ((size_t)v + 2 > n - line) return 0;
        if (p[line + (size_t)v] != '\r' || p[line + (size_t)v + 1] != '\n') return -1;
        return (long)(line + (size_t)v + 2);
    }
    size_t off = line;
    for (long i = 0; i < v; i++) {
        long m = resp_len(p + off, n - off, err, depth + 1);
        if (m <= 0) return m;
        off += (size_t)m;
    }
    return (long)off;
}

static void after_reply(struct conn *c, int64_t now);

static void read_conn(struct conn *c)
{
    for (int rounds = 0; rounds < 16 && !c->dead; rounds++) {
        if (c->in_cap - c->in_len < 65536) {
            c->in_cap = c->in_cap ? c->in_cap * 2 : 262144;
            c->in = realloc(c->in, c->in_cap);
            if (!c->in) {
                fprintf(stderr, "tk-loadgen: out of memory\n");
                exit(1);
            }
        }
        size_t room = c->in_cap - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, room, 0);
        int64_t now = now_ns();
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            conn_lost(c, now, n < 0 ? strerror(errno) : "closed by the server");
            return;
        }
        c->in_len += (size_t)n;
        size_t off = 0;
        for (;;) {
            bool err = false;
            long m = resp_len(c->in + off, c->in_len - off, &err, 0);
            if (m == 0) break;
            if (m < 0) {
                conn_lost(c, now, "malformed reply");
                return;
            }
            if (!c->q_len) {
                conn_lost(c, now, "a reply to no request");
                return;
            }
            off += (size_t)m;
            complete(q_pop(c), now, err);
            after_reply(c, now);
        }
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        if ((size_t)n < room) return; /* the socket is drained */
    }
}

/* ------------------------------------------------------------ run */
static volatile bool stopping;
static int64_t stop_at = INT64_MAX; /* when sending stops */
static int64_t warm_end = -1;       /* when the warm-up phase ends by itself */

/* The next phase (or the end, after the last) from instant t (ns since the
 * start; not in the future, not before the current phase began). */
static void advance(int64_t t, int64_t now)
{
    if (stopping) return;
    if (t > now) t = now;
    if (t < P[cur_phase].start) t = P[cur_phase].start;
    if (warm_end >= 0 && cur_phase == 0) warm_end = -1;
    if (cur_phase + 1 < nphases) {
        P[cur_phase].end = t;
        P[++cur_phase].start = t;
    } else {
        stopping = true;
        stop_at = t;
    }
}

/* The end of the run at instant t (as advance()). */
static void stop_run(int64_t t, int64_t now)
{
    if (stopping) return;
    if (t > now) t = now;
    if (t < P[cur_phase].start) t = P[cur_phase].start;
    stopping = true;
    stop_at = t;
}

/* --control: lines "next [T]" and "stop [T]" on standard input, T being
 * the instant on CLOCK_MONOTONIC in seconds (default: now). */
static char ctl_buf[4096];
static size_t ctl_len;

static bool control_input(int fd)
{
    for (;;) {
        ssize_t n = read(fd, ctl_buf + ctl_len, sizeof ctl_buf - 1 - ctl_len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n <= 0) return false; /* end of input: no more commands */
        ctl_len += (size_t)n;
        char *nl;
        while ((nl = memchr(ctl_buf, '\n', ctl_len))) {
            *nl = 0;
            char word[16];
            double t = -1;
            int got = sscanf(ctl_buf, "%15s %lf", word, &t);
            int64_t now = now_ns();
            int64_t at = now;
            if (got == 2) at = (int64_t)((t - (double)t0.tv_sec - t0.tv_nsec / 1e9) * 1e9);
            if (got >= 1 && !strcmp(word, "next")) {
                advance(at, now);
            } else if (got >= 1 && !strcmp(word, "stop")) {
                stop_run(at, now);
            } else if (got >= 1) {
                fprintf(stderr, "tk-loadgen: --control: unknown command '%s'\n", ctl_buf);
            }
            size_t used = (size_t)(nl - ctl_buf) + 1;
            memmove(ctl_buf, nl + 1, ctl_len - used);
            ctl_len -= used;
        }
        if (ctl_len == sizeof ctl_buf - 1) ctl_len = 0; /* an overlong line */
    }
}

static void after_reply(struct conn *c, int64_t now)
{
    if (stopping) return;
    if (O.mode == MODE_CLOSED) {
        send_one(c, now, now, UINT64_MAX);
    } else if (O.mode == MODE_FILL && fill_next < O.keys) {
        send_one(c, now, now, fill_next++);
    }
}

static void summarise_interval(struct interval *v)
{
    if (!v->h) return;
    v->n = v->h->n;
    v->p50 = hist_q(v->h, 0.5);
    v->p99 = hist_q(v->h, 0.99);
    v->p999 = hist_q(v->h, 0.999);
    v->max = (double)(v->h->n ? v->h->max : 0);
    hist_free(v->h);
    free(v->h);
    v->h = NULL;
}

/* Summarises every interval that can no longer receive a reply. */
static void close_intervals(int64_t horizon)
{
    if (!interval_ns) return;
    for (int i = 0; i < O.conns; i++)
        if (!C[i].dead && C[i].q_len && C[i].q[C[i].q_head].sched < horizon)
            horizon = C[i].q[C[i].q_head].sched;
    size_t upto = (size_t)(horizon / interval_ns);
    if (upto > niv) upto = niv;
    while (iv_done < upto) summarise_interval(&IV[iv_done++]);
}

static double us(double ns)
{
    return ns / 1000.0;
}

/* errors and slow < 0: not counted for this histogram (left out) */
static void json_summary(FILE *f, const struct hist *h, long long errors, long long slow,
                         double seconds)
{
    fprintf(f, "{\"count\": %llu, ", (unsigned long long)h->n);
    if (errors >= 0) fprintf(f, "\"errors\": %lld, \"slow\": %lld, ", errors, slow);
    fprintf(f,
            "\"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"p99_9_us\": %.1f, "
            "\"p99_99_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f}",
            seconds > 0 ? (double)h->n / seconds : 0.0, us(hist_q(h, 0.5)), us(hist_q(h, 0.99)),
            us(hist_q(h, 0.999)), us(hist_q(h, 0.9999)), us((double)(h->n ? h->max : 0)),
            h->n ? us(h->sum / (double)h->n) : 0.0);
}

static void json_lateness(FILE *f, const struct hist *h)
{
    fprintf(f, "{\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}", us(hist_q(h, 0.5)),
            us(hist_q(h, 0.99)), us((double)(h->n ? h->max : 0)));
}

static void print_hist_line(const char *name, const struct hist *h)
{
    fprintf(stderr,
            "  %-12s %9llu requests  p50 %9.1f us  p99 %9.1f us  p99.9 %9.1f us  "
            "max %10.1f us\n",
            name, (unsigned long long)h->n, us(hist_q(h, 0.5)), us(hist_q(h, 0.99)),
            us(hist_q(h, 0.999)), us((double)(h->n ? h->max : 0)));
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    rng_state = O.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (!rng_state) rng_state = 1;
    slow_ns = (int64_t)(O.slow_us * 1000);
    interval_ns = O.mode == MODE_FILL ? 0 : (int64_t)(O.interval * 1e9);
    pool_len = (size_t)O.value_size + 65536;
    pool = xcalloc(pool_len, 1);
    for (size_t i = 0; i < pool_len; i++) pool[i] = (char)('!' + rnd() % 94);

    nphases = O.nphase_names;
    for (int i = 0; i < nphases; i++) {
        P[i].name = O.phase_names[i];
        for (int k = 0; k < NCMD; k++) hist_init(&P[i].lat[k]);
        hist_init(&P[i].late);
        P[i].start = P[i].end = -1;
    }

    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGUSR1);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    int sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (sfd < 0 || ep < 0) {
        perror("tk-loadgen: signalfd/epoll");
        return 1;
    }
    struct epoll_event sev = {.events = EPOLLIN, .data.u32 = ID_SIGNAL};
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev);
    if (O.control) {
        fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
        struct epoll_event cev = {.events = EPOLLIN, .data.u32 = ID_CONTROL};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, 0, &cev) != 0) {
            fprintf(stderr, "tk-loadgen: --control: standard input cannot be watched: %s\n",
                    strerror(errno));
            return 1;
        }
    }

    int nconns = O.conns;
    C = xcalloc((size_t)nconns, sizeof *C);
    for (int i = 0; i < nconns; i++) {
        C[i].fd = connect_one();
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, C[i].fd, &ev);
    }

    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t now = 0;
    P[0].start = 0;
    cur_phase = 0;
    warm_end = O.warmup > 0 ? (int64_t)(O.warmup * 1e9) : -1;
    if (O.duration > 0) stop_at = (int64_t)(O.duration * 1e9);
    double next = 0; /* the next scheduled send, ns */
    uint64_t nscheduled = 0;
    if (O.mode == MODE_OPEN && O.poisson) next = -log(1.0 - rnd01()) * 1e9 / O.rate;
    int rr = 0;
    int64_t last_progress = 0;

    /* closed and fill: start every connection's window */
    if (O.mode != MODE_OPEN) {
        for (int i = 0; i < nconns; i++)
            for (int d = 0; d < O.depth; d++) {
                if (O.mode == MODE_FILL) {
                    if (fill_next >= O.keys) break;
                    send_one(&C[i], 0, 0, fill_next++);
                } else {
                    send_one(&C[i], 0, 0, UINT64_MAX);
                }
            }
        for (int i = 0; i < nconns; i++) flush_conn(&C[i], 0);
    }

    int64_t drain_until = INT64_MAX;
    struct epoll_event evs[256];
    for (;;) {
        now = now_ns();
        if (warm_end >= 0 && cur_phase == 0 && now >= warm_end) {
            P[0].end = warm_end;
            P[++cur_phase].start = warm_end;
        }
        if (!stopping && now >= stop_at) stopping = true;
        if (O.mode == MODE_FILL && fill_next >= O.keys) stopping = true;
        if (stopping && drain_until == INT64_MAX) {
            if (stop_at > now) stop_at = now;
            P[cur_phase].end = stop_at;
            drain_until = now + (int64_t)(O.drain * 1e9);
        }
        /* open loop: every request now due */
        if (O.mode == MODE_OPEN && !stopping) {
            int made = 0;
            while ((int64_t)next <= now && (int64_t)next < stop_at && made < 4096) {
                struct conn *c = NULL;
                for (int k = 0; k < nconns; k++) {
                    struct conn *t = &C[(rr + k) % nconns];
                    if (!t->dead) {
                        c = t;
                        rr = (rr + k + 1) % nconns;
                        break;
                    }
                }
                if (!c) break;
                send_one(c, (int64_t)next, now, UINT64_MAX);
                made++;
                nscheduled++;
                if (O.poisson)
                    next += -log(1.0 - rnd01()) * 1e9 / O.rate;
                else
                    next = (double)nscheduled * 1e9 / O.rate; /* equal gaps, no drift */
            }
        }
        for (int i = 0; i < nconns; i++)
            if (C[i].want_out || C[i].out_off < C[i].out_len) flush_conn(&C[i], now);

        bool alive = false, outstanding = false;
        for (int i = 0; i < nconns; i++) {
            if (!C[i].dead) alive = true;
            if (!C[i].dead && C[i].q_len) outstanding = true;
        }
        if (!alive) break;
        if (stopping && (!outstanding || now >= drain_until)) break;

        close_intervals(O.mode == MODE_OPEN && !stopping ? (int64_t)next : now);

        if (O.progress && now - last_progress >= 1000000000) {
            last_progress = now;
            if (O.mode == MODE_FILL)
                fprintf(stderr, "tk-loadgen: filled %llu of %llu keys (%.0f s)\n",
                        (unsigned long long)(total_done), (unsigned long long)O.keys, now / 1e9);
            else
                fprintf(stderr, "tk-loadgen: %.0f s, %llu sent, %llu answered, phase %s\n",
                        now / 1e9, (unsigned long long)total_sent, (unsigned long long)total_done,
                        P[cur_phase].name);
        }

        /* sleep until the next send, the next deadline, or an event */
        int64_t wake = INT64_MAX;
        if (O.mode == MODE_OPEN && !stopping) wake = (int64_t)next;
        if (!stopping && stop_at < wake) wake = stop_at;
        if (warm_end >= 0 && cur_phase == 0 && warm_end < wake) wake = warm_end;
        if (stopping && drain_until < wake) wake = drain_until;
        if (O.progress && last_progress + 1000000000 < wake) wake = last_progress + 1000000000;
        struct timespec ts, *tsp = NULL;
        if (wake != INT64_MAX) {
            int64_t d = wake - now_ns();
            if (d < 0) d = 0;
            ts.tv_sec = d / 1000000000;
            ts.tv_nsec = d % 1000000000;
            tsp = &ts;
        }
        int n = epoll_pwait2(ep, evs, 256, tsp, NULL);
        if (n < 0 && errno == ENOSYS) {
            int ms = tsp ? (int)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000) : -1;
            n = epoll_wait(ep, evs, 256, ms);
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("tk-loadgen: epoll");
            return 1;
        }
        /* phase changes first, so replies read in the same turn count in
         * the phase their requests were scheduled in */
        for (int i = 0; i < n; i++) {
            uint32_t id = evs[i].data.u32;
            if (id == ID_SIGNAL) {
                struct signalfd_siginfo si;
                while (read(sfd, &si, sizeof si) == sizeof si) {
                    int64_t t = now_ns();
                    if (si.ssi_signo == SIGUSR1)
                        advance(t, t);
                    else
                        stop_run(t, t);
                }
            } else if (id == ID_CONTROL) {
                if (!control_input(0)) epoll_ctl(ep, EPOLL_CTL_DEL, 0, NULL);
            }
        }
        for (int i = 0; i < n; i++) {
            uint32_t id = evs[i].data.u32;
            if (id == ID_SIGNAL || id == ID_CONTROL) continue;
            struct conn *c = &C[id];
            if (c->dead) continue;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) read_conn(c);
            if (!c->dead && (evs[i].events & EPOLLOUT)) flush_conn(c, now_ns());
        }
    }
    now = now_ns();
    /* what never got a reply */
    uint64_t unanswered = 0;
    for (int i = 0; i < nconns; i++) {
        while (C[i].q_len) {
            struct req r = q_pop(&C[i]);
            P[phase_of(r.sched)].unanswered++;
            unanswered++;
            complete(r, now, true);
        }
    }
    for (int p = 0; p <= cur_phase; p++)
        if (P[p].end < 0) P[p].end = stop_at < now ? stop_at : now;
    close_intervals(INT64_MAX);

    /* totals, warm-up left out */
    int first = O.warmup > 0 ? 1 : 0;
    if (first > cur_phase) first = cur_phase;
    struct hist tot[NCMD + 1], late, all_p;
    for (int k = 0; k <= NCMD; k++) hist_init(&tot[k]);
    hist_init(&late);
    uint64_t terr = 0, tslow = 0;
    double tsec = 0;
    for (int p = first; p <= cur_phase; p++) {
        for (int k = 0; k < NCMD; k++) {
            hist_merge(&tot[k], &P[p].lat[k]);
            hist_merge(&tot[NCMD], &P[p].lat[k]);
        }
        hist_merge(&late, &P[p].late);
        terr += P[p].errors;
        tslow += P[p].slow;
        tsec += (double)(P[p].end - P[p].start) / 1e9;
    }

    char warn[512] = "";
    if (O.mode == MODE_OPEN && late.n && hist_q(&late, 0.99) > O.warn_late_us * 1000) {
        snprintf(warn, sizeof warn,
                 "the generator fell behind its schedule: p99 send lateness %.0f us (max %.0f "
                 "us) exceeds --warn-lateness %.0f us; latencies include that delay",
                 us(hist_q(&late, 0.99)), us((double)late.max), O.warn_late_us);
        fprintf(stderr, "tk-loadgen: warning: %s\n", warn);
    }
    if (conn_losses && !O.quiet)
        fprintf(stderr, "tk-loadgen: %llu connection(s) lost\n", (unsigned long long)conn_losses);

    FILE *f = stdout;
    const char *mname[] = {"open", "closed", "fill"};
    fprintf(f, "{\"mode\": \"%s\", \"connections\": %d, \"t0_monotonic_s\": %.6f", mname[O.mode],
            nconns, (double)t0.tv_sec + t0.tv_nsec / 1e9);
    if (O.mode == MODE_OPEN)
        fprintf(f, ", \"rate\": %.3f, \"arrival\": \"%s\"", O.rate,
                O.poisson ? "poisson" : "uniform");
    else
        fprintf(f, ", \"depth\": %d", O.depth);
    fprintf(f,
            ", \"keys\": %llu, \"value_size\": %d, \"set_ratio\": %.3f, \"slow_us\": %.1f, "
            "\"seconds\": %.6f, \"sent\": %llu, \"answered\": %llu, \"errors\": %llu, "
            "\"unanswered\": %llu, \"connections_lost\": %llu",
            (unsigned long long)O.keys, O.value_size, O.set_ratio, O.slow_us, now / 1e9,
            (unsigned long long)total_sent, (unsigned long long)(total_done - total_errors),
            (unsigned long long)total_errors, (unsigned long long)unanswered,
            (unsigned long long)conn_losses);
    fprintf(f, ",\n \"total\": ");
    json_summary(f, &tot[NCMD], (long long)terr, (long long)tslow, tsec);
    for (int k = 0; k < NCMD; k++) {
        fprintf(f, ",\n \"total_%s\": ", cmd_name[k]);
        json_summary(f, &tot[k], -1, -1, tsec);
    }
    if (O.mode == MODE_OPEN) {
        fprintf(f, ",\n \"lateness\": ");
        json_lateness(f, &late);
    }
    fprintf(f, ",\n \"warning\": ");
    if (warn[0])
        fprintf(f, "\"%s\"", warn);
    else
        fprintf(f, "null");
    fprintf(f, ",\n \"phases\": [");
    for (int p = 0; p <= cur_phase; p++) {
        struct phase *ph = &P[p];
        double sec = (double)(ph->end - ph->start) / 1e9;
        hist_init(&all_p);
        for (int k = 0; k < NCMD; k++) hist_merge(&all_p, &ph->lat[k]);
        fprintf(f,
                "%s\n  {\"name\": \"%s\", \"start_s\": %.6f, \"end_s\": %.6f, \"sent\": %llu, "
                "\"unanswered\": %llu,\n   \"all\": ",
                p ? "," : "", ph->name, ph->start / 1e9, ph->end / 1e9,
                (unsigned long long)ph->sent, (unsigned long long)ph->unanswered);
        json_summary(f, &all_p, (long long)ph->errors, (long long)ph->slow, sec);
        for (int k = 0; k < NCMD; k++) {
            fprintf(f, ",\n   \"%s\": ", cmd_name[k]);
            json_summary(f, &ph->lat[k], -1, -1, sec);
        }
        if (O.mode == MODE_OPEN) {
            fprintf(f, ",\n   \"lateness\": ");
            json_lateness(f, &ph->late);
        }
        fprintf(f, "}");
        hist_free(&all_p);
    }
    fprintf(f, "]");
    if (interval_ns) {
        /* columns, one entry per interval: compact for long runs */
        fprintf(f, ",\n \"interval_s\": %.6f, \"intervals\": {", interval_ns / 1e9);
        const char *cols[] = {"n",      "errors",   "slow",   "p50_us",
                              "p99_us", "p99_9_us", "max_us", "late_max_us"};
        for (int col = 0; col < 8; col++) {
            fprintf(f, "%s\"%s\": [", col ? ", " : "", cols[col]);
            for (size_t i = 0; i < niv; i++) {
                struct interval *v = &IV[i];
                double x = 0;
                switch (col) {
                case 0:
                    x = (double)v->n;
                    break;
                case 1:
                    x = (double)v->errors;
                    break;
                case 2:
                    x = (double)v->slow;
                    break;
                case 3:
                    x = us(v->p50);
                    break;
                case 4:
                    x = us(v->p99);
                    break;
                case 5:
                    x = us(v->p999);
                    break;
                case 6:
                    x = us(v->max);
                    break;
                case 7:
                    x = us(v->late_max);
                    break;
                }
                fprintf(f, col < 3 ? "%s%.0f" : "%s%.1f", i ? "," : "", x);
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "}\n");
    fflush(f);

    if (!O.quiet) {
        if (O.mode == MODE_FILL) {
            fprintf(stderr, "tk-loadgen: filled %llu keys in %.1f s (%.0f/s), %llu errors\n",
                    (unsigned long long)(total_done - total_errors), now / 1e9,
                    (double)(total_done - total_errors) / (now / 1e9),
                    (unsigned long long)total_errors);
        } else {
            fprintf(stderr,
                    "tk-loadgen: %s loop, %d connections, %.1f s: %llu sent, %llu errors, "
                    "%llu unanswered\n",
                    mname[O.mode], nconns, now / 1e9, (unsigned long long)total_sent,
                    (unsigned long long)total_errors, (unsigned long long)unanswered);
            for (int p = 0; p <= cur_phase; p++) {
                hist_init(&all_p);
                for (int k = 0; k < NCMD; k++) hist_merge(&all_p, &P[p].lat[k]);
                print_hist_line(P[p].name, &all_p);
                hist_free(&all_p);
            }
            if (O.mode == MODE_OPEN)
                fprintf(stderr, "  send lateness p99 %.1f us, max %.1f us\n",
                        us(hist_q(&late, 0.99)), us((double)late.max));
        }
    }
    return 0;
}
