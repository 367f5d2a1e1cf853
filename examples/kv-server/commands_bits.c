/* examples/kv-server/commands_bits.c - strings as arrays of bits: SETBIT,
 * GETBIT, BITCOUNT, BITPOS, BITOP, as redis-server 7.0's.
 *
 * Bit 0 is the most significant bit of the first byte.  A missing key is
 * an empty string (an endless run of 0 bits to BITPOS); SETBIT grows the
 * string with zero bytes as far as the bit it sets, up to Redis's 512 MiB
 * (offsets below 2^32).  Ranges are in bytes, or with BIT in bits, from
 * the end when negative, clamped as GETRANGE's.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"

#define ERR_BIT_OFFSET "ERR bit offset is not an integer or out of range"

static bool get_bit_offset(struct conn *c, const struct arg *a, uint64_t *off)
{
    long long v;
    if (!parse_ll(a, &v) || v < 0 || (unsigned long long)v >= MAX_STRING * 8) {
        out_err(c, ERR_BIT_OFFSET);
        return false;
    }
    *off = (uint64_t)v;
    return true;
}

/* SETBIT key offset 0|1: the bit's old value; a bit set to what it was
 * (in the string as long as it was) is no write (no change counted, no
 * WATCH touched), as in Redis */
void cmd_setbit(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    uint64_t off;
    long long on;
    if (!get_bit_offset(c, &a[2], &off)) return;
    if (!parse_ll(&a[3], &on) || (on & ~1LL))
        return out_err(c, "ERR bit is not an integer or out of range");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0, byte = (size_t)(off >> 3);
    int bit = 7 - (int)(off & 7);
    if (o) kv_str_get(o, &p, &n);
    if (byte < n && ((p[byte] >> bit) & 1) == on) /* no change: nothing written, as Redis */
        return out_int(c, on);
    if (!o && !(o = kv_str_set(server.kv, a[1].p, a[1].n, "", 0, false))) return out_oom(c);
    char *d;
    if (!(o = kv_str_resize(server.kv, o, byte + 1 > n ? byte + 1 : n, &d))) {
        if (!n) kv_delete(server.kv, a[1].p, a[1].n); /* (created above) */
        return out_oom(c);
    }
    int old = (d[byte] >> bit) & 1;
    d[byte] = (char)((d[byte] & ~(1 << bit)) | (int)(on << bit));
    server.changes++;
    out_int(c, old);
}

/* GETBIT key offset: 0 past the end or for a missing key */
void cmd_getbit(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    uint64_t off;
    if (!get_bit_offset(c, &a[2], &off)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0;
    if (o) kv_str_get(o, &p, &n);
    if ((off >> 3) >= n) return out_int(c, 0);
    out_int(c, (p[off >> 3] >> (7 - (off & 7))) & 1);
}

/* The range start..end of a string of len bytes (bits with bit), clamped
 * as Redis's BITCOUNT and BITPOS do, as bits [*from, *to]; false if empty. */
static bool bit_range(long long len, long long start, long long end, bool bit, uint64_t *from,
                      uint64_t *to)
{
    long long total = bit ? len * 8 : len;
    if (start < 0) start += total;
    if (end < 0) end += total;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= total) end = total - 1;
    if (start > end) return false;
    *from = bit ? (uint64_t)start : (uint64_t)start * 8;
    *to = bit ? (uint64_t)end : (uint64_t)end * 8 + 7;
    return true;
}

/* BYTE or BIT (true); false after a syntax error */
static bool get_unit(struct conn *c, const struct arg *a, bool *bit)
{
    *bit = arg_is(a, "BIT");
    if (*bit || arg_is(a, "BYTE")) return true;
    out_syntax(c);
    return false;
}

static const unsigned char *bytes_of(kv_obj *o, size_t *n)
{
    const char *p;
    kv_str_get(o, &p, n);
    return (const unsigned char *)p;
}

/* BITCOUNT key [start end [BYTE|BIT]]: a missing key 0 before the range
 * is looked at */
void cmd_bitcount(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_int(c, 0);
    size_t n;
    const unsigned char *p = bytes_of(o, &n);
    long long start = 0, end = (long long)n - 1;
    bool bit = false;
    if (argc == 4 || argc == 5) {
        if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
        if (argc == 5 && !get_unit(c, &a[4], &bit)) return;
        if (start < 0 && end < 0 && start > end) return out_int(c, 0);
    } else if (argc != 2) {
        return out_syntax(c);
    }
    uint64_t from, to;
    if (!bit_range((long long)n, start, end, bit, &from, &to)) return out_int(c, 0);
    long long count = 0;
    uint64_t i = from;
    for (; i <= to && (i & 7); i++) count += (p[i >> 3] >> (7 - (i & 7))) & 1;
    for (; i + 63 <= to; i += 64) {
        uint64_t w;
        memcpy(&w, p + (i >> 3), 8);
        count += __builtin_popcountll(w);
    }
    for (; i + 7 <= to; i += 8) count += __builtin_popcount(p[i >> 3]);
    for (; i <= to; i++) count += (p[i >> 3] >> (7 - (i & 7))) & 1;
    out_int(c, count);
}

/* BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first bit of that value in
 * the range; -1 if none (for 0 without an end, the bit past the string:
 * it continues as 0 bits); a missing key -1 for 1, 0 for 0. */
void cmd_bitpos(struct conn *c, struct arg *a, size_t argc)
{
    long long want;
    if (!get_ll(c, &a[2], &want)) return;
    if (want != 0 && want != 1) return out_err(c, "ERR The bit argument must be 1 or 0.");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_int(c, want ? -1 : 0);
    size_t n;
    const unsigned char *p = bytes_of(o, &n);
    long long start = 0, end = 0;
    bool bit = false, end_given = argc >= 5;
    if (argc == 4 || argc == 5 || argc == 6) {
        if (!get_ll(c, &a[3], &start)) return;
        if (argc == 6 && !get_unit(c, &a[5], &bit)) return;
        if (end_given && !get_ll(c, &a[4], &end)) return;
    } else if (argc != 3) {
        return out_syntax(c);
    }
    if (!end_given) end = bit ? (long long)n * 8 - 1 : (long long)n - 1;
    uint64_t from, to;
    if (!bit_range((long long)n, start, end, bit, &from, &to)) return out_int(c, -1);
    unsigned char skip = want ? 0x00 : 0xff;
    for (uint64_t i = from; i <= to;) {
        if (!(i & 7) && i + 7 <= to && p[i >> 3] == skip) {
            i += 8;
            continue;
        }
        if ((long long)((p[i >> 3] >> (7 - (i & 7))) & 1) == want) return out_int(c, (long long)i);
        i++;
    }
    out_int(c, want == 0 && !end_given ? (long long)to + 1 : -1);
}

/* BITOP AND|OR|XOR|NOT destkey key [key ...]: the result as long as the
 * longest source (missing keys and shorter strings padded with zero
 * bytes) replaces the destination (its expiry time gone), or deletes it
 * if empty; its length. */
void cmd_bitop(struct conn *c, struct arg *a, size_t argc)
{
    enum { AND, OR, XOR, NOT } op;
    if (arg_is(&a[1], "AND"))
        op = AND;
    else if (arg_is(&a[1], "OR"))
        op = OR;
    else if (arg_is(&a[1], "XOR"))
        op = XOR;
    else if (arg_is(&a[1], "NOT"))
        op = NOT;
    else
        return out_syntax(c);
    if (op == NOT && argc != 4)
        return out_err(c, "ERR BITOP NOT must be called with a single source key.");
    size_t nk = argc - 3, maxlen = 0;
    for (size_t j = 0; j < nk; j++) {
        kv_obj *o;
        if (!lookup_typed(c, &a[3 + j], KV_STRING, &o)) return;
        size_t n = 0;
        if (o) bytes_of(o, &n);
        if (n > maxlen) maxlen = n;
    }
    if (!maxlen) {
        if (lookup_key(&a[2])) {
            kv_delete(server.kv, a[2].p, a[2].n);
            server.changes++;
        }
        return out_int(c, 0);
    }
    unsigned char *res = calloc(1, maxlen);
    if (!res) return out_oom(c);
    for (size_t j = 0; j < nk; j++) {
        kv_obj *o = lookup_key(&a[3 + j]);
        size_t n = 0;
        const unsigned char *p = o ? bytes_of(o, &n) : NULL;
        for (size_t i = 0; i < maxlen; i++) {
            unsigned char b = i < n ? p[i] : 0;
            if (op == NOT)
                res[i] = (unsigned char)~b;
            else if (j == 0)
                res[i] = b;
            else if (op == AND)
                res[i] &= b;
            else if (op == OR)
                res[i] |= b;
            else
                res[i] ^= b;
        }
    }
    kv_obj *d = kv_str_set(server.kv, a[2].p, a[2].n, (const char *)res, maxlen, false);
    free(res);
    if (!d) return out_oom(c);
    server.changes++;
    out_int(c, (long long)maxlen);
}
