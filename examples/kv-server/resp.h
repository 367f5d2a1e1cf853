/* examples/kv-server/resp.h - the protocol: RESP2 and inline commands
 * parsed from a client's input, and the reply writers.
 *
 * Input: RESP2 arrays of bulk strings, or inline commands split as Redis
 * and redis-cli split them.  Malformed input gets "-ERR Protocol error:
 * ..." and the connection is closed after it; lengths above the limits
 * below, or that overflow, are malformed.
 *
 * Replies are appended to the client's output buffer (net.h); an error
 * reply never ends early (CR and LF in its message become spaces) and
 * carries a client's bytes only through resp_escape.
 */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stdbool.h>
#include <stddef.h>

#define MAX_BULK (512u << 20)  /* longest argument (Redis's proto-max-bulk-len) */
#define MAX_ARGS 2147483647LL  /* most arguments in one command (Redis 7.0's, INT_MAX) */
#define MAX_INLINE (64u << 10) /* longest inline command or length line */

struct conn;

/* An argument of a command: its bytes, not NUL-terminated. */
struct arg {
    const char *p;
    size_t n;
};

/* ---- parsing */
enum { PARSE_MORE, PARSE_DONE, PARSE_ERROR };

/* Parses the client's next command: PARSE_DONE with its arguments in argv
 * (an empty one, argc 0, is to be skipped; argv is valid until the next
 * call), PARSE_MORE if the input holds no complete command, PARSE_ERROR
 * after replying with a protocol error (the connection then closes). */
int resp_parse_command(struct conn *c, struct arg **argv, size_t *argc);

/* Replies "-ERR Protocol error: what" and closes the connection after it;
 * returns PARSE_ERROR. */
int resp_protocol_error(struct conn *c, const char *what);

/* Bytes of input still needed to complete the bulk argument being read
 * (0 if unknown): lets a large argument be read in large pieces. */
size_t resp_bulk_missing(const struct conn *c);

/* Drops the input before the command being parsed. */
void resp_compact_input(struct conn *c);

/* A space as Redis's parsers take it (C's isspace in the C locale). */
static inline bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* ---- replies */
void out_str(struct conn *c, const char *s); /* raw protocol text */
void out_fmt(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void out_err(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void out_bulk(struct conn *c, const char *p, size_t n);
void out_cstr(struct conn *c, const char *s); /* a bulk string */
void out_int(struct conn *c, long long v);
void out_array(struct conn *c, size_t n); /* the header: n elements follow */
void out_nil(struct conn *c);
void out_ok(struct conn *c);
void out_double(struct conn *c, double d); /* a bulk string, as Redis writes a score */
/* A HELP subcommand's reply: the lines as simple strings. */
void out_help(struct conn *c, const char *const *lines, size_t n);

/* Redis's common error replies */
/* -OOM: the command needs more than the store has free */
void out_oom_full(struct conn *c);
/* -OOM: an allocation failed (the store full, or its free memory in pieces) */
void out_oom(struct conn *c);
void out_wrongtype(struct conn *c);
void out_syntax(struct conn *c);
void out_arity_error(struct conn *c, const char *cmd); /* cmd: lower case */

/* Client bytes as an error message may carry them: printable ASCII as it
 * is, every other byte as \xHH, at most max bytes of the input; in buf. */
const char *resp_escape(char *buf, size_t cap, const char *p, size_t n, size_t max);

#endif
