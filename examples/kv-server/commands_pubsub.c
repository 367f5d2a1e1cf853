/* examples/kv-server/commands_pubsub.c - pub/sub: SUBSCRIBE, UNSUBSCRIBE,
 * PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, their sharded forms SSUBSCRIBE,
 * SUNSUBSCRIBE, SPUBLISH (one shard: the server), and PUBSUB CHANNELS,
 * NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB, HELP, as redis-server 7.0's
 * over RESP2.
 *
 * Channels, patterns and shard channels are tables in process memory
 * (nothing of them is in the store or its images), each entry with the
 * clients subscribed, in the order they subscribed.  PUBLISH sends
 * ["message", channel, message] to each subscriber of the channel, then
 * ["pmessage", pattern, channel, message] to each subscriber of each
 * pattern that matches it (KEYS's glob; the patterns in no given order, as
 * Redis's dict), and replies how many it sent.  A client subscribed to
 * anything may run only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING (answered
 * ["pong", message]), QUIT and RESET (commands_table.c).  UNSUBSCRIBE
 * without a channel unsubscribes from every one (in no given order, as
 * Redis's), PUNSUBSCRIBE from every pattern in the order subscribed.
 *
 * A message is appended to the subscriber's output as any reply is: a
 * subscriber that does not read is disconnected once its unsent output
 * passes --client-output-buffer-limit (as Redis's pubsub class limit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "net.h"
#include "server.h"

enum kind { K_CHANNEL, K_PATTERN, K_SHARD, NKINDS };

/* A client's subscription: on the entry's queue (the server's table) and
 * on the client's list (its own table finds it). */
struct subn {
    struct subn *prev, *next;   /* the entry's subscribers, in order */
    struct subn *cprev, *cnext; /* the client's subscriptions of this kind, in order */
    struct conn *c;
    struct strent *e;  /* the server's entry */
    struct strent *ce; /* the client's entry (its head is this) */
};

/* A client's subscriptions (conn.subs), while it has any. */
struct sub {
    struct strtab t[NKINDS];
    struct subn *first[NKINDS], *last[NKINDS];
};

static struct strtab tabs[NKINDS];
static const char *const sub_names[NKINDS] = {"subscribe", "psubscribe", "ssubscribe"};
static const char *const unsub_names[NKINDS] = {"unsubscribe", "punsubscribe", "sunsubscribe"};

uint64_t pubsub_channels(void)
{
    return tabs[K_CHANNEL].n;
}

uint64_t pubsub_patterns(void)
{
    return tabs[K_PATTERN].n;
}

static size_t count_of(const struct conn *c, enum kind k)
{
    if (!c->subs) return 0;
    return k == K_SHARD ? c->subs->t[K_SHARD].n : c->subs->t[K_CHANNEL].n + c->subs->t[K_PATTERN].n;
}

/* (P|S)SUBSCRIBE's and (P|S)UNSUBSCRIBE's reply for one name (NULL: nil) */
static void out_sub_reply(struct conn *c, const char *what, const char *p, size_t n, enum kind k)
{
    out_array(c, 3);
    out_cstr(c, what);
    if (p)
        out_bulk(c, p, n);
    else
        out_nil(c);
    out_int(c, (long long)count_of(c, k));
}

/* A client with no subscription left is out of subscribed mode. */
static void sync_counts(struct conn *c)
{
    if (c->subs && !c->subs->t[K_CHANNEL].n && !c->subs->t[K_PATTERN].n && !c->subs->t[K_SHARD].n) {
        free(c->subs);
        c->subs = NULL;
    }
}

void pubsub_counts(const struct conn *c, size_t *sub, size_t *psub, size_t *ssub)
{
    *sub = c->subs ? c->subs->t[K_CHANNEL].n : 0;
    *psub = c->subs ? c->subs->t[K_PATTERN].n : 0;
    *ssub = c->subs ? c->subs->t[K_SHARD].n : 0;
}

/* false: no memory */
static bool subscribe(struct conn *c, enum kind k, const struct arg *name)
{
    if (!c->subs && !(c->subs = calloc(1, sizeof *c->subs))) return false;
    struct sub *s = c->subs;
    if (strtab_find(&s->t[k], name->p, name->n)) return true;
    struct subn *x = calloc(1, sizeof *x);
    struct strent *ce = x ? strtab_add(&s->t[k], name->p, name->n) : NULL;
    struct strent *e = ce ? strtab_add(&tabs[k], name->p, name->n) : NULL;
    if (!e) {
        if (ce) strtab_del(&s->t[k], ce);
        free(x);
        sync_counts(c);
        return false;
    }
    x->c = c;
    x->e = e;
    x->ce = ce;
    ce->head = x;
    x->prev = e->tail;
    if (e->tail)
        ((struct subn *)e->tail)->next = x;
    else
        e->head = x;
    e->tail = x;
    e->count++;
    x->cprev = s->last[k];
    if (s->last[k])
        s->last[k]->cnext = x;
    else
        s->first[k] = x;
    s->last[k] = x;
    sync_counts(c);
    return true;
}

/* Unsubscribes the client from x's name (x is on its list of kind k). */
static void unsubscribe_node(struct conn *c, enum kind k, struct subn *x)
{
    struct sub *s = c->subs;
    struct strent *e = x->e;
    DLIST_UNLINK(x, e->head, e->tail, prev, next);
    if (--e->count == 0) strtab_del(&tabs[k], e);
    DLIST_UNLINK(x, s->first[k], s->last[k], cprev, cnext);
    strtab_del(&s->t[k], x->ce);
    free(x);
}

void pubsub_forget(struct conn *c)
{
    for (int k = 0; k < NKINDS && c->subs; k++)
        while (c->subs->first[k]) unsubscribe_node(c, (enum kind)k, c->subs->first[k]);
    free(c->subs);
    c->subs = NULL;
}

static void subscribe_generic(struct conn *c, struct arg *a, size_t argc, enum kind k)
{
    if (k == K_SHARD && in_exec)
        return out_err(c, "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    for (size_t i = 1; i < argc; i++) {
        if (!subscribe(c, k, &a[i])) return out_oom(c);
        out_sub_reply(c, sub_names[k], a[i].p, a[i].n, k);
    }
}

/* UNSUBSCRIBE [channel ...]: each named (subscribed or not), or every
 * one the client has (nil if none) */
static void unsubscribe_generic(struct conn *c, struct arg *a, size_t argc, enum kind k)
{
    if (argc > 1) {
        for (size_t i = 1; i < argc; i++) {
            struct strent *ce = c->subs ? strtab_find(&c->subs->t[k], a[i].p, a[i].n) : NULL;
            if (ce) unsubscribe_node(c, k, ce->head);
            sync_counts(c);
            out_sub_reply(c, unsub_names[k], a[i].p, a[i].n, k);
        }
        return;
    }
    if (!c->subs || !c->subs->first[k]) return out_sub_reply(c, unsub_names[k], NULL, 0, k);
    /* channels in their table's order (Redis's dict's: none given),
     * patterns in the order subscribed (Redis's list) */
    while (c->subs && c->subs->first[k]) {
        struct subn *x =
            k == K_PATTERN ? c->subs->first[k] : strtab_next(&c->subs->t[k], NULL)->head;
        char *name = malloc(x->e->len ? x->e->len : 1);
        if (!name) return out_oom(c);
        size_t n = x->e->len;
        memcpy(name, x->e->s, n);
        unsubscribe_node(c, k, x);
        sync_counts(c);
        out_sub_reply(c, unsub_names[k], name, n, k);
        free(name);
    }
}

void cmd_subscribe(struct conn *c, struct arg *a, size_t argc)
{
    subscribe_generic(c, a, argc, K_CHANNEL);
}

void cmd_psubscribe(struct conn *c, struct arg *a, size_t argc)
{
    subscribe_generic(c, a, argc, K_PATTERN);
}

void cmd_ssubscribe(struct conn *c, struct arg *a, size_t argc)
{
    subscribe_generic(c, a, argc, K_SHARD);
}

void cmd_unsubscribe(struct conn *c, struct arg *a, size_t argc)
{
    unsubscribe_generic(c, a, argc, K_CHANNEL);
}

void cmd_punsubscribe(struct conn *c, struct arg *a, size_t argc)
{
    unsubscribe_generic(c, a, argc, K_PATTERN);
}

void cmd_sunsubscribe(struct conn *c, struct arg *a, size_t argc)
{
    unsubscribe_generic(c, a, argc, K_SHARD);
}

/* The message to each subscriber of the entry: kind's header, then the
 * pattern (pmessage), the channel and the message. */
static long long deliver(struct strent *e, const char *what, const struct arg *pattern,
                         const struct arg *ch, const struct arg *msg)
{
    long long n = 0;
    for (struct subn *x = e ? e->head : NULL; x; x = x->next, n++) {
        struct conn *s = x->c;
        if (s->closing) continue; /* (QUIT: nothing after its reply; counted, as in Redis) */
        out_array(s, pattern ? 4 : 3);
        out_cstr(s, what);
        if (pattern) out_bulk(s, pattern->p, pattern->n);
        out_bulk(s, ch->p, ch->n);
        out_bulk(s, msg->p, msg->n);
        net_wake(s);
    }
    return n;
}

void cmd_publish(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long n =
        deliver(strtab_find(&tabs[K_CHANNEL], a[1].p, a[1].n), "message", NULL, &a[1], &a[2]);
    for (struct strent *e = strtab_next(&tabs[K_PATTERN], NULL); e;
         e = strtab_next(&tabs[K_PATTERN], e))
        if (glob_match(e->s, e->len, a[1].p, a[1].n)) {
            const struct arg pat = {e->s, e->len};
            n += deliver(e, "pmessage", &pat, &a[1], &a[2]);
        }
    out_int(c, n);
}

void cmd_spublish(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    out_int(c,
            deliver(strtab_find(&tabs[K_SHARD], a[1].p, a[1].n), "smessage", NULL, &a[1], &a[2]));
}

/* PUBSUB CHANNELS [pattern], SHARDCHANNELS [pattern] */
static void channels_generic(struct conn *c, struct arg *a, size_t argc, enum kind k)
{
    if (argc > 3) {
        char sub[600];
        return out_err(c,
                       "ERR unknown subcommand or wrong number of arguments for '%s'. Try PUBSUB "
                       "HELP.",
                       resp_escape(sub, sizeof sub, a[1].p, a[1].n, 128));
    }
    struct keylist l = {.pattern = argc == 3 ? &a[2] : NULL};
    for (struct strent *e = strtab_next(&tabs[k], NULL); e; e = strtab_next(&tabs[k], e))
        keylist_add(&l, e->s, e->len);
    if (l.oom) {
        free(l.buf);
        return out_oom(c);
    }
    out_keylist(c, &l);
}

void cmd_pubsub_channels(struct conn *c, struct arg *a, size_t argc)
{
    channels_generic(c, a, argc, K_CHANNEL);
}

void cmd_pubsub_shardchannels(struct conn *c, struct arg *a, size_t argc)
{
    channels_generic(c, a, argc, K_SHARD);
}

static void numsub_generic(struct conn *c, struct arg *a, size_t argc, enum kind k)
{
    out_array(c, (argc - 2) * 2);
    for (size_t i = 2; i < argc; i++) {
        struct strent *e = strtab_find(&tabs[k], a[i].p, a[i].n);
        out_bulk(c, a[i].p, a[i].n);
        out_int(c, e ? (long long)e->count : 0);
    }
}

void cmd_pubsub_numsub(struct conn *c, struct arg *a, size_t argc)
{
    numsub_generic(c, a, argc, K_CHANNEL);
}

void cmd_pubsub_shardnumsub(struct conn *c, struct arg *a, size_t argc)
{
    numsub_generic(c, a, argc, K_SHARD);
}

void cmd_pubsub_numpat(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)tabs[K_PATTERN].n);
}

void cmd_pubsub_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: "
        "'*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

bool pubsub_allowed(const struct command *cmd)
{
    command_fn *ok[] = {cmd_ping,         cmd_subscribe,    cmd_ssubscribe,
                        cmd_unsubscribe,  cmd_sunsubscribe, cmd_psubscribe,
                        cmd_punsubscribe, cmd_quit,         cmd_reset};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (cmd->fn == ok[i]) return true;
    return false;
}
