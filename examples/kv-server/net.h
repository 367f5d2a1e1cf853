/* examples/kv-server/net.h - the event loop and the clients' connections:
 * accepting, reading a bounded slice of each client's input, running its
 * commands in turn, and its output buffer with the limits that keep one
 * client from holding up the others or the server's memory.
 */
#ifndef KV_NET_H
#define KV_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QUERY_LIMIT (1024u << 20) /* most input buffered for one command */
#define READ_CHUNK (64u << 10)    /* read from one client per event-loop turn */
#define TURN_COMMANDS 1000        /* commands run for one client per turn */
#define OUT_SOFT (1u << 20)       /* unsent output that stops reading a client */
#define LINGER_MS 2000            /* a closing client's time to read its last reply */
#define QUEUE_MAX_DEFAULT                                                                          \
    (256ull << 20) /* a transaction's queued commands, without a                                   \
                      normal class hard limit */

/* Redis's client-output-buffer-limit for one class of clients: unsent
 * replies past `hard` disconnect the client at once; past `soft` for more
 * than soft_seconds, too.  0: no such limit. */
struct out_limit {
    unsigned long long hard, soft;
    unsigned long long soft_seconds;
};

/* A client.  Its input is parsed where it stands (resp.c): in[scan..] is
 * not yet looked at; a command being parsed began at cmd_start; a
 * multibulk has mb_left bulk arguments still to come, the next of bulk_len
 * bytes (-1: its length line comes first).  Arguments are kept as offsets
 * into in (it may move as it grows) until the command is complete. */
struct conn {
    struct conn *prev, *next; /* every open connection */
    struct conn *pend_next;   /* on the list of clients with input to run */
    bool pending;
    bool held;              /* it sent BGSAVE: it waits for the save's instant (not read) */
    struct conn *held_next; /* on the list of such clients */
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
    bool closing;         /* close once the output is sent ... */
    int64_t linger_until; /* ... after reading what the client still sends, until
                             EOF or this instant (mono_ms; 0: not yet) */
    bool dead;            /* close now: the output limit was passed */
    int64_t soft_since;   /* CLOCK_MONOTONIC seconds + 1 since its output passed the soft
                             limit; 0: it is below it */
    uint64_t id;
    char *name; /* CLIENT SETNAME's, NUL-terminated; NULL if none */
    /* A transaction (commands_multi.c): after MULTI the commands queued,
     * their arguments copied, until EXEC or DISCARD; the keys WATCHed. */
    bool in_multi;
    bool multi_error;     /* a command was refused while queuing: EXEC aborts */
    bool watch_dirty;     /* a watched key changed: EXEC fails */
    struct queued *queue; /* queue_n commands, in order */
    size_t queue_n, queue_cap;
    size_t queue_bytes;    /* their memory, bounded as the output is (net.out_hard) */
    struct watch *watches; /* this client's watched keys */
    /* A blocking command waiting for a key (commands_blocking.c): the
     * client runs nothing else until it is served, times out or is
     * unblocked; it is still read, so that its end is seen (and its
     * waiting forgotten). */
    struct blocked *blk;
    /* Pub/sub (commands_pubsub.c): the channels and patterns it is
     * subscribed to; with any, it may run only (P)SUBSCRIBE,
     * (P)UNSUBSCRIBE, PING, QUIT and RESET. */
    struct sub *subs; /* NULL: none */
    /* CLIENT LIST, CLIENT INFO (commands_server.c) */
    int64_t ctime_ms, last_ms; /* connected, last command (mono_ms) */
    char lastcmd[40];          /* the last command's name, "container|sub" */
    uint8_t proto;             /* HELLO's protocol version (2) */
};

struct net_state {
    int listen_fd;
    int ep;                      /* the epoll instance */
    struct conn *conns;          /* every open connection */
    struct conn *pending;        /* clients whose input may hold a command to run */
    struct conn *closed;         /* closed this turn: freed at its end */
    struct conn *held;           /* clients whose next command waits (conn.held) */
    uint64_t nconns;             /* open */
    uint64_t next_id;            /* the last client's id */
    uint64_t total_conns;        /* accepted since start */
    uint64_t out_limit_closed;   /* disconnected for passing an output limit */
    struct out_limit out_normal; /* --client-output-buffer-limit: clients not subscribed */
    struct out_limit out_pubsub; /* ... and those subscribed to a channel or pattern */
    uint64_t maxclients;         /* the descriptors this process may open, less 32 (or fewer:
                                    CONFIG SET maxclients) */
    uint64_t maxclients_limit;   /* ... the most it may be */
    uint64_t rejected_conns;     /* turned away: maxclients reached */
    int spare_fd;                /* a descriptor kept to take a connection out of the queue
                                    when every other one is in use (EMFILE) */
};

/* Start-up: maxclients from RLIMIT_NOFILE, and the spare descriptor. */
void net_init_limits(void);

/* The client that sent BGSAVE waits for the snapshot instant: its reply
 * and its next commands come after it (net_release_held). */
void net_hold(struct conn *c);

/* The clients waiting for a background save's snapshot instant get
 * BGSAVE's reply - started, or the error that ended the save before its
 * instant (err < 0, message in persist.save_error) - and run again: called
 * once it is taken or the save is over. */
void net_release_held(int err);

extern struct net_state net;

/* Bytes of the client's replies not yet sent. */
static inline size_t conn_unsent(const struct conn *c)
{
    return c->out_len - c->out_sent;
}

/* The client-output-buffer-limit class of the client: pubsub while it is
 * subscribed to a channel or pattern, normal otherwise. */
static inline const struct out_limit *conn_out_class(const struct conn *c)
{
    return c->subs ? &net.out_pubsub : &net.out_normal;
}

/* Whether n more bytes of replies fit in the client's output buffer as it
 * is, within the limit, so that they may be written there in place. */
static inline bool conn_out_fits(const struct conn *c, size_t n)
{
    const struct out_limit *l = conn_out_class(c);
    size_t after = conn_unsent(c) + n;
    return c->out_len + n <= c->out_cap && !c->dead && (!l->hard || after <= l->hard) &&
           (!l->soft || after <= l->soft);
}

/* Parses Redis's client-output-buffer-limit value, "CLASS HARD SOFT
 * SECONDS ..." (classes normal, pubsub, and replica or slave, accepted and
 * unused: kv-server has no replicas; sizes as Redis writes them: 1k is
 * 1000, 1kb 1024), into *normal and *pubsub (classes not named keep what
 * they hold).  False if malformed. */
bool net_parse_out_limits(const char *s, struct out_limit *normal, struct out_limit *pubsub);

/* The same, as CONFIG GET shows it. */
void net_out_limits_str(char *buf, size_t cap);

/* A client told something while it was not running (a blocked client
 * served or timed out, a subscriber sent a message): its output is sent,
 * and its next commands run if it is not blocked; one that passed the
 * output limit is disconnected. */
void net_wake(struct conn *c);

/* Closes a client now (CLIENT KILL of another client). */
void net_kill(struct conn *c);

/* The client's peer and local addresses as CLIENT LIST shows them
 * ("127.0.0.1:50312", "[::1]:6379"). */
void net_addr(const struct conn *c, bool local, char *buf, size_t cap);

/* Appends to the client's replies (the reply writers in resp.h build on
 * it), or marks a client dead whose unsent replies would pass the limit. */
void out_raw(struct conn *c, const void *p, size_t n);

/* Start-up: watch net.listen_fd for clients. */
void net_watch_listener(void);

/* Serves until the server shuts down (persist_shutdown exits). */
void net_event_loop(void) __attribute__((noreturn));

#endif
