/* examples/kv-server/net.c - the event loop and the connections (net.h).
 *
 * Each turn: wait for events (not at all if clients have input to run);
 * read once from each readable client; run a bounded slice of each pending
 * client's commands; write replies.  A client is pending while its input
 * may hold a complete command.  It is read only while it is not pending
 * and its unsent output is below OUT_SOFT, so neither its input nor its
 * output grows without bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "net.h"
#include "persist.h"
#include "resp.h"
#include "server.h"
#include "store.h"

/* Redis's defaults: none for normal clients, 32mb 8mb 60 for subscribers. */
struct net_state net = {
    .listen_fd = -1, .ep = -1, .out_pubsub = {32ull << 20, 8ull << 20, 60}, .spare_fd = -1};

/* ---- output ------------------------------------------------------------ */
/* Whether a client whose unsent replies would be `after` bytes passes its
 * class's limit, as Redis's checkClientOutputBufferLimits decides it: the
 * hard limit at once, the soft one once it has stayed over it for more
 * than its seconds (the time is kept from the first time it is over). */
static bool over_limit(struct conn *c, size_t after, const char **which)
{
    const struct out_limit *l = conn_out_class(c);
    *which = "hard";
    if (l->hard && after > l->hard) return true;
    if (!l->soft || after <= l->soft) {
        c->soft_since = 0;
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec + 1;
    if (!c->soft_since) c->soft_since = now;
    *which = "soft";
    return (unsigned long long)(now - c->soft_since) > l->soft_seconds;
}

/* Appends to the client's replies.  A client whose unsent replies would
 * pass its class's limit is marked dead: nothing more is added, and it is
 * disconnected after the command. */
void out_raw(struct conn *c, const void *p, size_t n)
{
    if (c->dead) return;
    const char *which;
    if (over_limit(c, conn_unsent(c) + n, &which)) {
        const struct out_limit *l = conn_out_class(c);
        fprintf(stderr,
                "kv-server: client %lu disconnected: %zu bytes of replies unsent, above its "
                "%s limit of %llu (client-output-buffer-limit, class %s)\n",
                (unsigned long)c->id, conn_unsent(c) + n, which,
                which[0] == 'h' ? l->hard : l->soft, c->subs ? "pubsub" : "normal");
        net.out_limit_closed++;
        c->dead = true;
        return;
    }
    if (c->out_sent && c->out_len + n > c->out_cap) { /* move what is unsent to the front */
        memmove(c->out, c->out + c->out_sent, conn_unsent(c));
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

/* ---- connections ------------------------------------------------------- */
static void set_events(struct conn *c)
{
    if (c->fd < 0) return;
    size_t unsent = conn_unsent(c);
    uint32_t ev = 0;
    /* (a held client is not read: its end, once it has sent its last
     * command and closed, is seen after that command has run; a blocked
     * one is, so that a client that goes away while it waits is
     * forgotten) */
    if ((!c->pending && !c->closing && !c->held && unsent < OUT_SOFT) || c->linger_until)
        ev |= EPOLLIN;
    if (unsent) ev |= EPOLLOUT;
    if (ev == c->events) return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    epoll_ctl(net.ep, EPOLL_CTL_MOD, c->fd, &e);
    c->events = ev;
}

static void unhold(struct conn *c)
{
    if (!c->held) return;
    for (struct conn **l = &net.held; *l; l = &(*l)->held_next)
        if (*l == c) {
            *l = c->held_next;
            break;
        }
    c->held = false;
}

static void conn_close(struct conn *c)
{
    if (c->fd < 0) return;
    unhold(c);
    multi_discard(c);   /* its queue freed, its watched keys forgotten */
    blocking_forget(c); /* no longer waiting for a key */
    pubsub_forget(c);   /* unsubscribed from everything */
    if (c->prev)
        c->prev->next = c->next;
    else
        net.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    epoll_ctl(net.ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    net.nconns--;
    c->next = net.closed;
    net.closed = c;
}

/* Closes the closing clients whose time to send the rest has passed. */
static void close_lingering(int64_t now)
{
    for (struct conn *c = net.conns, *next; c; c = next) {
        next = c->next;
        if (c->linger_until && now >= c->linger_until) conn_close(c);
    }
}

static void free_closed(void)
{
    while (net.closed) {
        struct conn *c = net.closed;
        net.closed = c->next;
        free(c->in);
        free(c->out);
        free(c->args);
        free(c->scratch);
        free(c->name);
        free(c);
    }
}

static void set_pending(struct conn *c)
{
    if (c->pending) return;
    c->pending = true;
    c->pend_next = net.pending;
    net.pending = c;
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
        if (c->closing && !c->linger_until) {
            /* The last reply sent: the end of the stream follows it
             * (shutdown), and what the client still sends is read and
             * dropped until it closes too.  Closed at once, the socket
             * would answer that input with a reset, and a reset can
             * discard the last reply before the client reads it (a client
             * told why it is disconnected while it still pipelines). */
            shutdown(c->fd, SHUT_WR);
            c->linger_until = mono_ms() + LINGER_MS;
        }
    }
    return true;
}

/* Reads and drops what a closing client still sends, at most READ_CHUNK
 * a turn as from any client; returns false at its end (or an error): the
 * connection is then closed. */
static bool drain_closing(struct conn *c)
{
    char buf[READ_CHUNK];
    for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return true;
        return r > 0;
    }
}

/* One read of at most READ_CHUNK (or of the rest of a large argument, up
 * to 4 MiB); returns false if the connection is gone. */
static bool read_some(struct conn *c)
{
    size_t want = resp_bulk_missing(c);
    if (want < READ_CHUNK) want = READ_CHUNK;
    if (want > (4u << 20)) want = 4u << 20;
    if (c->in_cap - c->in_len < want) {
        resp_compact_input(c);
        size_t cap = c->in_cap ? c->in_cap : 16384;
        while (cap - c->in_len < want) cap *= 2;
        if (cap > QUERY_LIMIT) {
            resp_protocol_error(c, "query buffer limit reached");
            return true;
        }
        if (cap != c->in_cap) {
            char *ni = realloc(c->in, cap);
            if (!ni) {
                resp_protocol_error(c, "out of memory");
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
    if (!c->held && !c->blk) set_pending(c);
    return true;
}

/* Runs the client's commands: at most TURN_COMMANDS, and none once its
 * unsent output reaches OUT_SOFT.  It stays pending if it stopped for
 * either. */
static void run_commands(struct conn *c)
{
    unsigned ran = 0;
    while (!c->closing && !c->dead && ran < TURN_COMMANDS && conn_unsent(c) < OUT_SOFT) {
        struct arg *argv;
        size_t argc;
        int r = resp_parse_command(c, &argv, &argc);
        if (r == PARSE_MORE) {
            c->need_more = true;
            break;
        }
        if (r == PARSE_ERROR) break;
        if (argc) commands_execute(c, argv, argc);
        if (c->argc > 4096) { /* a very long command's argument list: give it back */
            free(c->args);
            c->args = NULL;
            c->args_cap = 0;
        }
        c->argc = 0;
        ran++;
        if (c->held) break; /* BGSAVE: the rest after its instant */
        if (c->blk) break;  /* a blocking command: the rest once it is served */
    }
    if (c->mb_left == 0 && c->scan == c->in_len) c->scan = c->in_len = c->cmd_start = 0;
}

void net_hold(struct conn *c)
{
    if (c->held) return;
    c->held = true;
    c->held_next = net.held;
    net.held = c;
}

void net_wake(struct conn *c)
{
    if (c->fd < 0) return;
    if (c->dead || (!c->held && !c->blk)) set_pending(c);
    set_events(c);
}

void net_kill(struct conn *c)
{
    conn_close(c);
}

void net_addr(const struct conn *c, bool local, char *buf, size_t cap)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (c->fd >= 0 && (local ? getsockname(c->fd, (struct sockaddr *)&sa, &sl)
                             : getpeername(c->fd, (struct sockaddr *)&sa, &sl)) == 0) {
        if (sa.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;
            inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
            port = ntohs(s6->sin6_port);
            snprintf(buf, cap, "%s:%d", host, port);
            return;
        }
        struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        port = ntohs(s4->sin_port);
    }
    snprintf(buf, cap, "%s:%d", host, port);
}

void net_release_held(int err)
{
    while (net.held) {
        struct conn *c = net.held;
        net.held = c->held_next;
        c->held = false;
        if (c->fd < 0) continue;
        if (err)
            out_err(c, "ERR %s", persist.save_error[0] ? persist.save_error : strerror(-err));
        else
            out_str(c, "+Background saving started\r\n");
        set_pending(c);
        set_events(c); /* (the reply to send; read again) */
    }
}

void net_init_limits(void)
{
    struct rlimit rl;
    uint64_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    net.maxclients = n > 64 ? n - 32 : n / 2; /* (the rest: images, the epoll, logs) */
    net.maxclients_limit = net.maxclients;
    net.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A connection past maxclients: told so, as redis-server tells it, and
 * closed. */
static void turn_away(int fd)
{
    static const char msg[] = "-ERR max number of clients reached\r\n";
    ssize_t w = write(fd, msg, sizeof msg - 1);
    (void)w;
    close(fd);
    if (net.rejected_conns++ % 1000 == 0)
        fprintf(stderr, "kv-server: max number of clients reached (%llu): connection refused\n",
                (unsigned long long)net.maxclients);
}

static void accept_clients(void)
{
    for (int k = 0; k < 1000; k++) {
        int fd = accept4(net.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors: the connection stays queued, and the
             * listener would wake the loop again at once, for ever.  The
             * spare descriptor makes room to take it out and turn it away. */
            if ((errno == EMFILE || errno == ENFILE) && net.spare_fd >= 0) {
                close(net.spare_fd);
                fd = accept4(net.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0) turn_away(fd);
                net.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fd >= 0) continue;
            }
            return;
        }
        if (net.maxclients && net.nconns >= net.maxclients) {
            turn_away(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = ++net.next_id;
        c->ctime_ms = c->last_ms = mono_ms();
        c->proto = 2;
        c->bulk_len = -1;
        c->next = net.conns;
        if (net.conns) net.conns->prev = c;
        net.conns = c;
        net.nconns++;
        net.total_conns++;
        c->events = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(net.ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

static void on_event(struct conn *c, uint32_t events)
{
    if (c->fd < 0) return;
    if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) return conn_close(c);
    if (c->linger_until) {
        if (!drain_closing(c)) return conn_close(c);
        return set_events(c);
    }
    if ((events & EPOLLIN) && !read_some(c)) return conn_close(c);
    if (events & EPOLLOUT) {
        if (!flush_out(c)) return conn_close(c);
        if (conn_unsent(c) < OUT_SOFT && !c->need_more && !c->held && !c->blk &&
            c->scan < c->in_len)
            set_pending(c); /* output drained: run what input waits */
    }
    set_events(c);
}

/* One slice for each pending client, in turn.  Every client on the list
 * is taken off it, so none that closed stays on it. */
static void run_pending(void)
{
    struct conn *list = net.pending, *keep = NULL;
    net.pending = NULL;
    while (list) {
        struct conn *c = list;
        list = c->pend_next;
        c->pending = false;
        if (c->fd < 0) continue;
        if (conn_unsent(c) < OUT_SOFT) run_commands(c);
        if (c->fd < 0) continue;
        if (c->dead || !flush_out(c)) {
            conn_close(c);
            continue;
        }
        if (!c->need_more && !c->closing && !c->held && !c->blk && c->scan < c->in_len &&
            conn_unsent(c) < OUT_SOFT) {
            c->pending = true;
            c->pend_next = keep;
            keep = c;
        }
        set_events(c);
    }
    /* (clients woken meanwhile - a blocked client served by another's
     * push, a subscriber sent a message - are on net.pending already) */
    while (keep) {
        struct conn *c = keep;
        keep = c->pend_next;
        c->pend_next = net.pending;
        net.pending = c;
    }
}

/* ---- the event loop ---------------------------------------------------- */
void net_watch_listener(void)
{
    net.ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(net.ep, EPOLL_CTL_ADD, net.listen_fd, &lev);
}

void net_event_loop(void)
{
    struct epoll_event evs[256];
    int64_t next_cron = 0;
    for (;;) {
        if (server.stop) {
            persist_shutdown(SHUTDOWN_DEFAULT);
            server.stop = 0; /* the save failed: keep serving */
        }
        bool freeing = kv_lazyfree_pending(server.kv) != 0; /* what UNLINK left */
        int timeout = net.pending || freeing ? 0 : persist.bgsave || persist.lazy ? 5 : 100;
        int64_t deadline = blocking_next_deadline(); /* a blocked client's timeout */
        if (deadline) {
            int64_t left = deadline - mono_ms();
            if (left < timeout) timeout = left < 0 ? 0 : (int)left;
        }
        int n = epoll_wait(net.ep, evs, 256, timeout);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr)
                accept_clients();
            else
                on_event(evs[i].data.ptr, evs[i].events);
        }
        kv_hold_resize(server.kv, persist.bgsave);
        run_pending();
        if (freeing) kv_lazyfree_step(server.kv, 2048); /* (~0.1 ms a turn) */
        int64_t now = mono_ms();
        if (deadline && now >= deadline) blocking_timeouts(now);
        free_closed();
        persist_poll_loading();
        if (now >= next_cron || persist.bgsave) {
            persist_poll_bgsave();
            persist_check_save_points();
            persist_poll_compact();
        }
        if (now >= next_cron) {
            close_lingering(now);
            store_cron();
            next_cron = now + 100;
        }
    }
}

/* ---- client-output-buffer-limit ---------------------------------------- */
/* A size as Redis's memtoull reads it: digits, then nothing (bytes), k, kb,
 * m, mb, g or gb, in any case. */
static bool parse_mem(const char *s, size_t n, unsigned long long *v)
{
    size_t i = 0;
    unsigned long long x = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (x > (ULLONG_MAX - 9) / 10) return false;
        x = x * 10 + (unsigned)(s[i++] - '0');
    }
    if (i == 0) return false;
    static const struct {
        const char *suffix;
        unsigned long long mul;
    } units[] = {{"", 1},           {"k", 1000},        {"kb", 1024},
                 {"m", 1000000},    {"mb", 1ull << 20}, {"g", 1000000000},
                 {"gb", 1ull << 30}};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        if (n - i == strlen(units[u].suffix) && !strncasecmp(s + i, units[u].suffix, n - i)) {
            if (x > ULLONG_MAX / units[u].mul) return false;
            *v = x * units[u].mul;
            return true;
        }
    return false;
}

bool net_parse_out_limits(const char *s, struct out_limit *normal, struct out_limit *pubsub)
{
    const char *w[64];
    size_t len[64], nw = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        if (nw == 64) return false;
        w[nw] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
        len[nw] = (size_t)(p - w[nw]);
        nw++;
    }
    if (nw == 0 || nw % 4) return false;
    struct out_limit got[2] = {*normal, *pubsub};
    for (size_t i = 0; i < nw; i += 4) {
        struct out_limit l;
        if (!parse_mem(w[i + 1], len[i + 1], &l.hard) || !parse_mem(w[i + 2], len[i + 2], &l.soft))
            return false;
        size_t k = 0;
        l.soft_seconds = 0;
        for (; k < len[i + 3] && w[i + 3][k] >= '0' && w[i + 3][k] <= '9' && k < 18; k++)
            l.soft_seconds = l.soft_seconds * 10 + (unsigned)(w[i + 3][k] - '0');
        if (k == 0 || k != len[i + 3]) return false;
#define IS(name) (len[i] == strlen(name) && !strncasecmp(w[i], name, len[i]))
        if (IS("normal"))
            got[0] = l;
        else if (IS("pubsub"))
            got[1] = l;
        else if (!IS("replica") && !IS("slave"))
            return false;
#undef IS
    }
    *normal = got[0];
    *pubsub = got[1];
    return true;
}

void net_out_limits_str(char *buf, size_t cap)
{
    snprintf(buf, cap, "normal %llu %llu %llu slave 0 0 0 pubsub %llu %llu %llu",
             net.out_normal.hard, net.out_normal.soft, net.out_normal.soft_seconds,
             net.out_pubsub.hard, net.out_pubsub.soft, net.out_pubsub.soft_seconds);
}
