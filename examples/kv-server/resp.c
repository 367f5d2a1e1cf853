/* examples/kv-server/resp.c - the protocol (resp.h): the reply writers,
 * then the parser of RESP2 and inline commands. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "resp.h"
#include "server.h"
#include "store.h"

/* ---- replies ----------------------------------------------------------- */
void out_str(struct conn *c, const char *s)
{
    out_raw(c, s, strlen(s));
}

void out_fmt(struct conn *c, const char *fmt, ...)
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
void out_err(struct conn *c, const char *fmt, ...)
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

void out_bulk(struct conn *c, const char *p, size_t n)
{
    char head[32], *h = head + sizeof head;
    *--h = '\n';
    *--h = '\r';
    size_t v = n;
    do *--h = (char)('0' + v % 10);
    while (v /= 10);
    *--h = '$';
    size_t hn = (size_t)(head + sizeof head - h);
    if (conn_out_fits(c, hn + n + 2)) { /* the common case, in place */
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

void out_cstr(struct conn *c, const char *s)
{
    out_bulk(c, s, strlen(s));
}

void out_int(struct conn *c, long long v)
{
    out_fmt(c, ":%lld\r\n", v);
}

void out_array(struct conn *c, size_t n)
{
    out_fmt(c, "*%zu\r\n", n);
}

void out_nil(struct conn *c)
{
    out_raw(c, "$-1\r\n", 5);
}

void out_ok(struct conn *c)
{
    out_raw(c, "+OK\r\n", 5);
}

void out_double(struct conn *c, double d)
{
    if (isinf(d)) return out_cstr(c, d > 0 ? "inf" : "-inf");
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%.17g", d);
    out_bulk(c, buf, (size_t)n);
}

void out_help(struct conn *c, const char *const *lines, size_t n)
{
    out_array(c, n);
    for (size_t i = 0; i < n; i++) out_fmt(c, "+%s\r\n", lines[i]);
}

/* The command needs more than the store has free (Redis's words). */
void out_oom_full(struct conn *c)
{
    out_str(c, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
}

/* A block the command needed could not be had: the store is full, or (a
 * fifth of it free or more) its free memory is in pieces too small - the
 * store is one fixed area (--memory), which the checkpointer saves as it
 * is, so it cannot take more pages as a malloc heap would. */
void out_oom(struct conn *c)
{
    if (server.kv && kv_free(server.kv) * 5 >= kv_used(server.kv) + kv_free(server.kv))
        return out_str(c, "-OOM command not allowed: no free block of the store is large enough "
                          "(its free memory is fragmented; --memory sets its size)\r\n");
    out_oom_full(c);
}

void out_wrongtype(struct conn *c)
{
    out_str(c, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
}

void out_syntax(struct conn *c)
{
    out_err(c, "ERR syntax error");
}

void out_arity_error(struct conn *c, const char *cmd)
{
    out_err(c, "ERR wrong number of arguments for '%s' command", cmd);
}

const char *resp_escape(char *buf, size_t cap, const char *p, size_t n, size_t max)
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

/* ---- parsing ----------------------------------------------------------- */
int resp_protocol_error(struct conn *c, const char *what)
{
    out_err(c, "ERR Protocol error: %s", what);
    c->closing = true;
    return PARSE_ERROR;
}

/* Parses a decimal line "<digits>\r\n" at p (after the type byte): "0",
 * or an optional '-' and 1 to 19 digits with no leading zero whose value
 * fits in a long long (Redis's string2ll: "01" and "-0" are malformed).
 * Returns bytes used, 0 if incomplete, -1 if malformed. */
static long parse_len_line(const char *p, size_t n, long long *v)
{
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;
    size_t len = (size_t)(nl - p);
    if (len == 0 || p[len - 1] != '\r') return -1;
    len--;
    size_t i = p[0] == '-';
    if (i == len || len - i > 19 || (p[i] == '0' && len != 1)) return -1;
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
        if (n > MAX_INLINE) return resp_protocol_error(c, "too big inline request");
        return PARSE_MORE;
    }
    size_t len = (size_t)(nl - p);
    if (len > MAX_INLINE) return resp_protocol_error(c, "too big inline request");
    if (len && p[len - 1] == '\r') len--;
    /* the words are never longer than the line; the line is copied behind
     * them, NUL-terminated */
    if (c->scratch_cap < 2 * len + 2) {
        char *ns = realloc(c->scratch, 2 * len + 2);
        if (!ns) return resp_protocol_error(c, "out of memory");
        c->scratch = ns;
        c->scratch_cap = 2 * len + 2;
    }
    char *line = c->scratch + len + 1;
    memcpy(line, p, len);
    line[len] = 0;
    c->scan += (size_t)(nl - p) + 1;
    if (!split_inline(c, line)) return resp_protocol_error(c, "unbalanced quotes in request");
    return PARSE_DONE;
}

/* Parses the next command: PARSE_DONE with its arguments in argv (an
 * empty one, argc 0, is to be skipped), PARSE_MORE if the input holds no
 * complete command, PARSE_ERROR after replying with a protocol error. */
int resp_parse_command(struct conn *c, struct arg **argv, size_t *argc)
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
                    return resp_protocol_error(c, "too big mbulk count string");
                return PARSE_MORE;
            }
            if (l < 0 || count > MAX_ARGS)
                return resp_protocol_error(c, "invalid multibulk length");
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
                char ch = p[c->scan], what[32];
                snprintf(what, sizeof what, "expected '$', got '%c'",
                         ch >= 0x20 && ch < 0x7f ? ch : '?');
                return resp_protocol_error(c, what);
            }
            long long bl;
            long l = parse_len_line(p + c->scan + 1, n - c->scan - 1, &bl);
            if (l == 0) {
                if (n - c->scan > MAX_INLINE)
                    return resp_protocol_error(c, "too big bulk count string");
                return PARSE_MORE;
            }
            if (l < 0 || bl < 0 || bl > MAX_BULK)
                return resp_protocol_error(c, "invalid bulk length");
            c->scan += 1 + (size_t)l;
            c->bulk_len = bl;
        }
        size_t bl = (size_t)c->bulk_len;
        if (n - c->scan < bl + 2) return PARSE_MORE;
        if (p[c->scan + bl] != '\r' || p[c->scan + bl + 1] != '\n')
            return resp_protocol_error(c, "bulk string not terminated by CRLF");
        if (!push_arg(c, c->scan, bl)) return resp_protocol_error(c, "out of memory");
        c->scan += bl + 2;
        c->mb_left--;
        c->bulk_len = -1;
    }
    if (c->argc > av_cap) {
        size_t cap = c->argc < 64 ? 64 : c->argc;
        struct arg *na = realloc(av, cap * sizeof *na);
        if (!na) return resp_protocol_error(c, "out of memory");
        av = na;
        av_cap = cap;
    }
    const char *base = inl ? c->scratch : c->in;
    for (size_t i = 0; i < c->argc; i++) av[i] = (struct arg){base + c->args[i].off, c->args[i].n};
    *argv = av;
    *argc = c->argc;
    return PARSE_DONE;
}

size_t resp_bulk_missing(const struct conn *c)
{
    if (c->mb_left == 0 || c->bulk_len < 0) return 0;
    size_t have = c->in_len - c->scan, want = (size_t)c->bulk_len + 2;
    return want > have ? want - have : 0;
}

void resp_compact_input(struct conn *c)
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
