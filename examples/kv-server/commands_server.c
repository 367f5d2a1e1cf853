/* examples/kv-server/commands_server.c - the server's commands: PING, ECHO,
 * TIME, INFO, CONFIG, CLIENT, the saves and SHUTDOWN, and those that tools
 * and client libraries expect. */
#include <ctype.h>
#include <limits.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "net.h"
#include "persist.h"
#include "server.h"

/* PING [message]; in subscribed mode ["pong", message] */
void cmd_ping(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 2) return out_arity_error(c, "ping");
    if (c->subs) {
        out_array(c, 2);
        out_cstr(c, "pong");
        return argc == 2 ? out_bulk(c, a[1].p, a[1].n) : out_bulk(c, "", 0);
    }
    if (argc == 2)
        out_bulk(c, a[1].p, a[1].n);
    else
        out_str(c, "+PONG\r\n");
}

void cmd_echo(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    out_bulk(c, a[1].p, a[1].n);
}

void cmd_time(struct conn *c, struct arg *a, size_t argc)
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

/* BGSAVE [SCHEDULE].  While the image loaded at start is still arriving
 * (a lazy restore: INFO persistence loading:1) no save may replace it -
 * every page of it must have been verified first: BGSAVE replies an error,
 * BGSAVE SCHEDULE starts one once it has loaded (as Redis schedules one
 * behind an AOF rewrite).  SAVE waits until it has loaded.  Inside EXEC a
 * BGSAVE is scheduled, as Redis's is, to start once EXEC is done: its
 * snapshot must not fall inside the transaction (with --mechanism fork the
 * fork is the instant). */
void cmd_bgsave(struct conn *c, struct arg *a, size_t argc)
{
    bool schedule = argc == 2 && arg_is(&a[1], "SCHEDULE");
    if (argc > 2 || (argc == 2 && !schedule)) return out_syntax(c);
    if (in_exec && !persist.lazy) {
        if (persist.bgsave) return out_err(c, "ERR Background save already in progress");
        persist.bgsave_scheduled = true; /* persist_poll_loading starts it after this turn */
        return out_str(c, "+Background saving scheduled\r\n");
    }
    if (persist.lazy) {
        if (!schedule && !in_exec)
            return out_err(c, "ERR Background save not possible while the dataset is still "
                              "loading (INFO persistence: loading:1); use BGSAVE SCHEDULE");
        persist_schedule_save("BGSAVE SCHEDULE");
        return out_str(c, "+Background saving scheduled\r\n");
    }
    if (persist.bgsave) return out_err(c, "ERR Background save already in progress");
    if (persist_start_bgsave() < 0) return out_err(c, "ERR %s", persist.save_error);
    if (persist.instant_pending) return net_hold(c); /* the reply at the instant */
    out_str(c, "+Background saving started\r\n");
}

void cmd_save(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (persist.bgsave) return out_err(c, "ERR Background save already in progress");
    if (persist_save() < 0) return out_err(c, "ERR %s", persist.save_error);
    out_ok(c);
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0 takes it: NOW
 * (do not wait for replicas) changes nothing here, FORCE exits even if the
 * save fails, ABORT (alone) answers that no shutdown is in progress - this
 * server never delays one. */
void cmd_shutdown(struct conn *c, struct arg *a, size_t argc)
{
    enum shutdown_mode mode = SHUTDOWN_DEFAULT;
    bool now = false, force = false, abort_it = false;
    for (size_t i = 1; i < argc; i++) {
        if (arg_is(&a[i], "SAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_SAVE;
        else if (arg_is(&a[i], "NOSAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_NOSAVE;
        else if (arg_is(&a[i], "NOW") && !now)
            now = true;
        else if (arg_is(&a[i], "FORCE") && !force)
            force = true;
        else if (arg_is(&a[i], "ABORT") && !abort_it)
            abort_it = true;
        else
            return out_syntax(c);
    }
    if (abort_it) {
        if (mode != SHUTDOWN_DEFAULT || now || force) return out_syntax(c);
        return out_err(c, "ERR No shutdown in progress.");
    }
    if (persist_shutdown(mode) < 0) {
        if (force) {
            fprintf(stderr, "kv-server: SHUTDOWN FORCE: exiting without the save\n");
            persist_shutdown(SHUTDOWN_NOSAVE);
        }
        out_err(c, "ERR Errors trying to SHUTDOWN. Check logs.");
    }
}

void cmd_lastsave(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)persist.lastsave);
}

void cmd_select(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long db;
    if (!parse_ll(&a[1], &db)) return out_err(c, ERR_NOT_INT);
    if (db != 0) return out_err(c, "ERR DB index is out of range");
    out_ok(c);
}

void cmd_quit(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_ok(c);
    c->closing = true;
}

/* A client name: printable ASCII without spaces (CLIENT LIST's fields
 * are split at spaces in Redis); "" removes it.  false after replying an
 * error. */
static bool set_client_name(struct conn *c, const struct arg *n)
{
    for (size_t i = 0; i < n->n; i++)
        if ((unsigned char)n->p[i] < '!' || (unsigned char)n->p[i] > '~') {
            out_err(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return false;
        }
    char *name = NULL;
    if (n->n) {
        if (!(name = malloc(n->n + 1))) {
            out_oom(c);
            return false;
        }
        memcpy(name, n->p, n->n);
        name[n->n] = 0;
    }
    free(c->name);
    c->name = name;
    return true;
}

void cmd_client_setname(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    if (set_client_name(c, &a[2])) out_ok(c);
}

void cmd_client_getname(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (!c->name) return out_nil(c);
    out_cstr(c, c->name);
}

void cmd_client_id(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)c->id);
}

/* A client as CLIENT LIST and CLIENT INFO show it, in Redis 7.0's fields
 * (those of no meaning here with Redis's values for a plain client: db=0,
 * user=default, redir=-1; the memory ones from kv-server's buffers). */
static void client_line(struct conn *self, const struct conn *c, char *buf, size_t cap)
{
    char addr[80], laddr[80], flags[16];
    net_addr(c, false, addr, sizeof addr);
    net_addr(c, true, laddr, sizeof laddr);
    size_t f = 0, sub, psub, ssub;
    pubsub_counts(c, &sub, &psub, &ssub);
    if (c->blk) flags[f++] = 'b';
    if (c->closing) flags[f++] = 'c';
    if (c->watch_dirty) flags[f++] = 'd';
    if (c->subs) flags[f++] = 'P';
    if (c->in_multi) flags[f++] = 'x';
    if (!f) flags[f++] = 'N';
    flags[f] = 0;
    int64_t now = mono_ms();
    size_t qbuf = c->in_len - c->cmd_start, argv_mem = 0;
    for (size_t i = 0; i < c->argc; i++) argv_mem += c->args[i].n;
    /* (the command running is this one: its arguments are in the input) */
    if (c == self) argv_mem = c->in_len - c->cmd_start;
    size_t tot = c->in_cap + c->out_cap + c->queue_bytes + c->args_cap * sizeof(struct span);
    snprintf(buf, cap,
             "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 sub=%zu "
             "psub=%zu ssub=%zu multi=%lld qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=%zu "
             "rbs=%zu rbp=%zu obl=0 oll=0 omem=%zu tot-mem=%zu events=%s%s cmd=%s user=default "
             "redir=-1 resp=%d\n",
             (unsigned long long)c->id, addr, laddr, c->fd, c->name ? c->name : "",
             (long long)(now - c->ctime_ms) / 1000, (long long)(now - c->last_ms) / 1000, flags,
             sub, psub, ssub, c->in_multi ? (long long)c->queue_n : -1LL, qbuf,
             c->in_cap - c->in_len, argv_mem, c->queue_bytes, c->in_cap, c->in_len, conn_unsent(c),
             tot, c->closing ? "" : "r", conn_unsent(c) ? "w" : "",
             c->lastcmd[0] ? c->lastcmd : "NULL", c->proto);
}

void cmd_client_info(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    char line[1024];
    client_line(c, c, line, sizeof line);
    out_cstr(c, line);
}

static struct conn *client_by_id(long long id)
{
    for (struct conn *x = net.conns; x; x = x->next)
        if ((long long)x->id == id) return x;
    return NULL;
}

/* Redis's getClientTypeByName: 0 normal, 1 replica, 2 pubsub, 3 master;
 * -1 none of them */
static int client_type_by_name(const struct arg *a)
{
    if (arg_is(a, "normal")) return 0;
    if (arg_is(a, "slave") || arg_is(a, "replica")) return 1;
    if (arg_is(a, "pubsub")) return 2;
    if (arg_is(a, "master")) return 3;
    return -1;
}

static void unknown_client_type(struct conn *c, const struct arg *a)
{
    char t[600];
    out_err(c, "ERR Unknown client type '%s'", resp_escape(t, sizeof t, a->p, a->n, 128));
}

/* CLIENT LIST [TYPE type | ID id ...]: oldest first, as Redis's list */
void cmd_client_list(struct conn *c, struct arg *a, size_t argc)
{
    int type = -1;
    bool ids = false;
    if (argc == 4 && arg_is(&a[2], "TYPE")) {
        if ((type = client_type_by_name(&a[3])) < 0) return unknown_client_type(c, &a[3]);
    } else if (argc > 3 && arg_is(&a[2], "ID")) {
        ids = true;
        for (size_t j = 3; j < argc; j++) {
            long long id;
            if (!parse_ll(&a[j], &id)) return out_err(c, "ERR Invalid client ID");
        }
    } else if (argc != 2) {
        return out_syntax(c);
    }
    char *out = NULL, line[1024];
    size_t len = 0, cap = 0;
    struct conn *last = net.conns;
    while (last && last->next) last = last->next;
    for (size_t j = ids ? 3 : 0; ids ? j < argc : j == 0; j++) {
        long long id = 0;
        if (ids) parse_ll(&a[j], &id);
        for (struct conn *x = last; x; x = x->prev) {
            if (ids && (long long)x->id != id) continue;
            if (type >= 0 && type != (x->subs ? 2 : 0)) continue;
            client_line(c, x, line, sizeof line);
            size_t n = strlen(line);
            if (len + n > cap) {
                cap = (len + n) * 2;
                char *o = realloc(out, cap);
                if (!o) {
                    free(out);
                    return out_oom(c);
                }
                out = o;
            }
            memcpy(out + len, line, n);
            len += n;
        }
    }
    out_bulk(c, out ? out : "", len);
    free(out);
}

/* CLIENT KILL addr (the old form: +OK or an error), or CLIENT KILL [ID id]
 * [ADDR addr] [LADDR addr] [TYPE type] [USER name] [SKIPME yes|no]: how
 * many were killed.  Another client is closed at once; this one after the
 * reply. */
void cmd_client_kill(struct conn *c, struct arg *a, size_t argc)
{
    const struct arg *addr = NULL, *laddr = NULL;
    int type = -1;
    long long id = 0;
    bool skipme = true;
    if (argc == 3) {
        addr = &a[2];
        skipme = false;
    } else {
        for (size_t i = 2; i < argc; i += 2) {
            bool more = i + 1 < argc;
            if (arg_is(&a[i], "ID") && more) {
                if (!parse_ll(&a[i + 1], &id) || id < 1)
                    return out_err(c, "ERR client-id should be greater than 0");
            } else if (arg_is(&a[i], "TYPE") && more) {
                if ((type = client_type_by_name(&a[i + 1])) < 0)
                    return unknown_client_type(c, &a[i + 1]);
            } else if (arg_is(&a[i], "ADDR") && more) {
                addr = &a[i + 1];
            } else if (arg_is(&a[i], "LADDR") && more) {
                laddr = &a[i + 1];
            } else if (arg_is(&a[i], "USER") && more) {
                if (!arg_is(&a[i + 1], "default")) {
                    char u[600];
                    return out_err(c, "ERR No such user '%s'",
                                   resp_escape(u, sizeof u, a[i + 1].p, a[i + 1].n, 128));
                }
            } else if (arg_is(&a[i], "SKIPME") && more) {
                if (arg_is(&a[i + 1], "yes"))
                    skipme = true;
                else if (arg_is(&a[i + 1], "no"))
                    skipme = false;
                else
                    return out_syntax(c);
            } else {
                return out_syntax(c);
            }
        }
    }
    long long killed = 0;
    bool self = false;
    for (struct conn *x = net.conns, *next; x; x = next) {
        next = x->next;
        char buf[80];
        if (addr) {
            net_addr(x, false, buf, sizeof buf);
            if (strlen(buf) != addr->n || memcmp(buf, addr->p, addr->n)) continue;
        }
        if (laddr) {
            net_addr(x, true, buf, sizeof buf);
            if (strlen(buf) != laddr->n || memcmp(buf, laddr->p, laddr->n)) continue;
        }
        if (type >= 0 && type != (x->subs ? 2 : 0)) continue;
        if (id && (long long)x->id != id) continue;
        if (x == c && skipme) continue;
        if (x == c)
            self = true;
        else
            net_kill(x);
        killed++;
    }
    if (argc == 3) {
        if (!killed) return out_err(c, "ERR No such client");
        out_ok(c);
    } else {
        out_int(c, killed);
    }
    if (self) c->closing = true;
}

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was blocked */
void cmd_client_unblock(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 4) {
        char sub[600];
        return out_err(c,
                       "ERR unknown subcommand or wrong number of arguments for '%s'. Try CLIENT "
                       "HELP.",
                       resp_escape(sub, sizeof sub, a[1].p, a[1].n, 128));
    }
    long long id;
    if (!get_ll(c, &a[2], &id)) return;
    bool error = false;
    if (argc == 4) {
        if (arg_is(&a[3], "ERROR"))
            error = true;
        else if (!arg_is(&a[3], "TIMEOUT"))
            return out_err(c, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
    }
    struct conn *x = client_by_id(id);
    out_int(c, x && blocking_unblock(x, error));
}

void cmd_client_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

/* RESET: the connection as it was when it connected - out of MULTI, its
 * watched keys and subscriptions forgotten, no name, RESP2 */
void cmd_reset(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    multi_discard(c);
    pubsub_forget(c);
    free(c->name);
    c->name = NULL;
    c->proto = 2;
    out_str(c, "+RESET\r\n");
}

/* The default user, with no password (nopass), is the only one: any
 * password authenticates it, as with Redis's default configuration. */
static bool auth_ok(struct conn *c, const struct arg *user)
{
    if (arg_is(user, "default")) return true;
    out_err(c, "WRONGPASS invalid username-password pair or user is disabled.");
    return false;
}

void cmd_auth(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 3) return out_syntax(c);
    if (argc == 2)
        return out_err(c, "ERR AUTH <password> called without any password configured for the "
                          "default user. Are you sure your configuration is correct?");
    if (auth_ok(c, &a[1])) out_ok(c);
}

/* HELLO [protover [AUTH username password] [SETNAME name]]: RESP2 only (3
 * is refused as by a server without RESP3); the reply is Redis's map, as
 * the flat array RESP2 makes of it. */
void cmd_hello(struct conn *c, struct arg *a, size_t argc)
{
    size_t j = 1;
    if (argc >= 2) {
        long long ver;
        if (!parse_ll(&a[1], &ver))
            return out_err(c, "ERR Protocol version is not an integer or out of range");
        if (ver != 2) return out_err(c, "NOPROTO unsupported protocol version");
        j = 2;
    }
    const struct arg *user = NULL, *name = NULL;
    for (; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (arg_is(&a[j], "AUTH") && more >= 2) {
            user = &a[j + 1];
            j += 2;
        } else if (arg_is(&a[j], "SETNAME") && more) {
            name = &a[++j];
            for (size_t i = 0; i < name->n; i++)
                if ((unsigned char)name->p[i] < '!' || (unsigned char)name->p[i] > '~')
                    return out_err(c, "ERR Client names cannot contain spaces, newlines or "
                                      "special characters.");
        } else {
            char opt[600];
            return out_err(c, "ERR Syntax error in HELLO option '%s'",
                           resp_escape(opt, sizeof opt, a[j].p, a[j].n, 128));
        }
    }
    if (user && !auth_ok(c, user)) return;
    if (name && !set_client_name(c, name)) return;
    out_array(c, 14);
    out_cstr(c, "server");
    out_cstr(c, "redis");
    out_cstr(c, "version");
    out_cstr(c, REDIS_VERSION);
    out_cstr(c, "proto");
    out_int(c, 2);
    out_cstr(c, "id");
    out_int(c, (long long)c->id);
    out_cstr(c, "mode");
    out_cstr(c, "standalone");
    out_cstr(c, "role");
    out_cstr(c, "master");
    out_cstr(c, "modules");
    out_array(c, 0);
}

/* COMMAND: an empty list (kv-server keeps no command documentation);
 * COMMAND COUNT: how many commands it has, as Redis answers. */
/* ---- COMMAND ------------------------------------------------------------ */
/* A command's entry as Redis 7.0's COMMAND INFO has it: name, arity,
 * flags, first key, last key, step, ACL categories, tips, key
 * specifications, subcommands (kv-server has no ACLs, tips or key
 * specifications: those are empty) */
static void out_command(struct conn *c, const struct command *cmd)
{
    const char *flags[8];
    size_t nf = command_flags(cmd, flags), nsubs = 0;
    struct command_keys k = command_keys(cmd);
    for (const struct command *s = cmd->subs; s && s->name; s++) nsubs++;
    out_array(c, 10);
    out_cstr(c, cmd->name);
    out_int(c, cmd->arity);
    out_array(c, nf);
    for (size_t i = 0; i < nf; i++) out_fmt(c, "+%s\r\n", flags[i]);
    out_int(c, k.first);
    out_int(c, k.last);
    out_int(c, k.step);
    out_array(c, 0);
    out_array(c, 0);
    out_array(c, 0);
    out_array(c, nsubs);
    for (const struct command *s = cmd->subs; s && s->name; s++) out_command(c, s);
}

/* A command or "container|sub" named by a (any case), NULL if none. */
static const struct command *named(const struct arg *a)
{
    char low[64];
    if (a->n >= sizeof low) return NULL;
    for (size_t i = 0; i < a->n; i++)
        low[i] = a->p[i] >= 'A' && a->p[i] <= 'Z' ? (char)(a->p[i] + 32) : a->p[i];
    return command_find(low, a->n);
}

/* COMMAND: every command's entry */
void cmd_command(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    size_t n = command_count();
    out_array(c, n);
    for (size_t i = 0; i < n; i++) out_command(c, command_nth(i));
}

void cmd_command_count(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)command_count());
}

/* COMMAND INFO [name ...]: each one's entry, nil for a name unknown */
void cmd_command_info(struct conn *c, struct arg *a, size_t argc)
{
    if (argc == 2) return cmd_command(c, a, argc);
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        const struct command *cmd = named(&a[i]);
        if (cmd)
            out_command(c, cmd);
        else
            out_nil(c);
    }
}

/* COMMAND DOCS [name ...]: kv-server keeps no documentation of its
 * commands (redis-cli then uses its own), so an empty map */
void cmd_command_docs(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_array(c, 0);
}

/* COMMAND LIST [FILTERBY MODULE m|ACLCAT c|PATTERN p]: the names, the
 * subcommands' ("container|sub") too; no modules or ACL categories here */
void cmd_command_list(struct conn *c, struct arg *a, size_t argc)
{
    const struct arg *pattern = NULL;
    if (argc == 5 && arg_is(&a[2], "filterby") && arg_is(&a[3], "pattern"))
        pattern = &a[4];
    else if (argc == 5 && arg_is(&a[2], "filterby") &&
             (arg_is(&a[3], "module") || arg_is(&a[3], "aclcat")))
        return out_array(c, 0);
    else if (argc != 2)
        return out_err(c, "ERR syntax error");
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0;
        for (size_t i = 0; i < command_count(); i++) {
            const struct command *cmd = command_nth(i);
            for (const struct command *s = cmd; s && s->name; s = s == cmd ? cmd->subs : s + 1) {
                if (pattern && !glob_match(pattern->p, pattern->n, s->name, strlen(s->name)))
                    continue;
                if (pass) out_cstr(c, s->name);
                n++;
            }
        }
        if (!pass) out_array(c, n);
    }
}

/* COMMAND GETKEYS command arg ...: its keys */
void cmd_command_getkeys(struct conn *c, struct arg *a, size_t argc)
{
    struct arg *ca = a + 2;
    size_t cargc = argc - 2;
    const struct command *cmd = named(&ca[0]);
    if (cmd && cmd->subs && cargc >= 2) {
        char full[80];
        int len = snprintf(full, sizeof full, "%s|%.*s", cmd->name,
                           (int)(ca[1].n < 32 ? ca[1].n : 32), ca[1].p);
        struct arg sub = {full, (size_t)len};
        const struct command *s = named(&sub);
        if (s) cmd = s;
    }
    if (!cmd) return out_err(c, "ERR Invalid command specified");
    struct command_keys k = command_keys(cmd);
    bool shard = !strcmp(cmd->name, "ssubscribe") || !strcmp(cmd->name, "sunsubscribe") ||
                 !strcmp(cmd->name, "spublish"); /* (channels, which Redis's key specs mark) */
    if ((k.first == 0 && !k.movable) || shard)
        return out_err(c, "ERR The command has no key arguments");
    if (cmd->arity > 0 ? cargc != (size_t)cmd->arity : cargc < (size_t)-cmd->arity)
        return out_err(c, "ERR Invalid number of arguments specified for command");
    size_t *idx = malloc(cargc * sizeof *idx);
    if (!idx) return out_oom(c);
    long n = command_getkeys(cmd, ca, cargc, idx);
    if (n <= 0) {
        free(idx);
        return out_err(c, "ERR Invalid arguments specified for command");
    }
    out_array(c, (size_t)n);
    for (long i = 0; i < n; i++) out_bulk(c, ca[idx[i]].p, ca[idx[i]].n);
    free(idx);
}

void cmd_command_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

/* CONFIG RESETSTAT: INFO's counters from 0 (total_commands_processed,
 * total_connections_received, rejected_connections, expired_keys,
 * client_output_limit_disconnections), as Redis resets its stats */
void cmd_config_resetstat(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    server.total_commands = 0;
    net.total_conns = net.rejected_conns = net.out_limit_closed = 0;
    kv_reset_expired_total(server.kv);
    out_ok(c);
}

/* CONFIG GET pattern...: the parameters tools ask for (redis-benchmark:
 * save, appendonly), matched as globs */
void cmd_config_get(struct conn *c, struct arg *a, size_t argc)
{
    char save[512], port[16], mem[24], maxc[24], slower[24], slowmax[24], cobl[200];
    net_out_limits_str(cobl, sizeof cobl);
    snprintf(slower, sizeof slower, "%lld", slowlog.slower_than);
    snprintf(slowmax, sizeof slowmax, "%lld", slowlog.max_len);
    snprintf(maxc, sizeof maxc, "%llu", (unsigned long long)net.maxclients);
    persist_save_points_str(save, sizeof save);
    snprintf(port, sizeof port, "%d", server.port);
    snprintf(mem, sizeof mem, "%zu", server.mem);
    const char *params[][2] = {
        {"save", save},
        {"appendonly", "no"},
        {"dir", persist.dir},
        {"dbfilename", persist.dbfile},
        {"port", port},
        {"maxmemory", mem},
        {"maxmemory-policy", "noeviction"},
        {"databases", "1"},
        {"proto-max-bulk-len", "536870912"},
        {"maxclients", maxc},
        {"slowlog-log-slower-than", slower},
        {"slowlog-max-len", slowmax},
        {"stop-writes-on-bgsave-error", persist.stop_writes_on_error ? "yes" : "no"},
        {"client-output-buffer-limit", cobl}};
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
void cmd_info(struct conn *c, struct arg *a, size_t argc)
{
    static const char *names[] = {"server",      "clients", "memory",
                                  "persistence", "stats",   "keyspace"};
    enum { N = sizeof names / sizeof names[0] };
    bool want[N];
    for (size_t k = 0; k < N; k++) want[k] = argc == 1;
    for (size_t i = 1; i < argc; i++)
        for (size_t k = 0; k < N; k++)
            if (arg_is(&a[i], names[k]) || arg_is(&a[i], "all") || arg_is(&a[i], "everything") ||
                arg_is(&a[i], "default"))
                want[k] = true;
    char buf[8192];
    size_t o = 0;
#define ADD(...) o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, __VA_ARGS__)
    time_t now = time(NULL);
    if (want[0])
        ADD("# Server\r\nredis_version:" REDIS_VERSION "\r\nredis_mode:standalone\r\n"
            "kv_server:trapkit\r\narch_bits:64\r\nmultiplexing_api:epoll\r\n"
            "process_id:%ld\r\ntcp_port:%d\r\nuptime_in_seconds:%ld\r\n"
            "uptime_in_days:%ld\r\nexecutable:kv-server\r\n\r\n",
            (long)getpid(), server.port, (long)(now - server.start_time),
            (long)(now - server.start_time) / 86400);
    if (want[1])
        ADD("# Clients\r\nconnected_clients:%lu\r\nblocked_clients:%lu\r\n\r\n",
            (unsigned long)net.nconns, (unsigned long)blocking_clients());
    if (want[2])
        ADD("# Memory\r\nused_memory:%lu\r\nused_memory_human:%.2fM\r\n"
            "used_memory_dataset:%lu\r\nmaxmemory:%zu\r\nmaxmemory_policy:noeviction\r\n"
            "lazyfree_pending_objects:%lu\r\nkv_heap_free:%lu\r\nkv_keyspace_rehashing:%d\r\n\r\n",
            (unsigned long)kv_used(server.kv), kv_used(server.kv) / 1048576.0,
            (unsigned long)kv_used(server.kv), server.mem,
            (unsigned long)kv_lazyfree_pending(server.kv), (unsigned long)kv_free(server.kv),
            kv_rehashing(server.kv) ? 1 : 0);
    if (want[3]) {
        tk_ckpt_stats st = persist.last_stats;
        tk_ckpt_lazy_stats ls;
        if (persist_loading_stats(&ls)) {
            uint64_t total = ls.pages_total ? ls.pages_total : 1;
            double perc = 100.0 * (double)ls.pages_resident / (double)total;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double el = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)ls.start_ns) / 1e9;
            double eta = ls.pages_resident
                             ? el * (double)(total - ls.pages_resident) / (double)ls.pages_resident
                             : 1;
            ADD("# Persistence\r\nloading:1\r\nasync_loading:0\r\nloading_start_time:%ld\r\n"
                "loading_total_bytes:%lu\r\nloading_loaded_bytes:%lu\r\n"
                "loading_loaded_perc:%.2f\r\nloading_eta_seconds:%ld\r\n"
                "trapkit_loading_pages_by_fault:%lu\r\ntrapkit_loading_pages_by_prefetch:%lu\r\n"
                "trapkit_loading_pages_verified:%lu\r\n",
                (long)persist.loading_start, (unsigned long)(ls.pages_total * 4096),
                (unsigned long)(ls.pages_resident * 4096), perc, (long)(eta + 0.5),
                (unsigned long)ls.pages_by_fault, (unsigned long)ls.pages_by_prefetch,
                (unsigned long)ls.pages_verified);
        } else {
            ADD("# Persistence\r\nloading:0\r\nasync_loading:0\r\n");
        }
        ADD("rdb_changes_since_last_save:%lu\r\n"
            "rdb_bgsave_in_progress:%d\r\nrdb_last_save_time:%ld\r\n"
            "rdb_last_bgsave_status:%s\r\nrdb_last_bgsave_time_sec:%ld\r\n"
            "rdb_current_bgsave_time_sec:%ld\r\nrdb_saves:%lu\r\naof_enabled:0\r\n"
            "trapkit_checkpoint_mechanism:%s\r\ntrapkit_last_pages_saved:%lu\r\n"
            "trapkit_last_pages_by_writers:%lu\r\ntrapkit_last_write_faults:%lu\r\n"
            "trapkit_last_pause_us:%lu\r\n"
            "trapkit_last_max_writer_stall_us:%lu\r\n"
            "trapkit_last_snapshot_instant_ms:%lld\r\n"
            "trapkit_last_image_incremental:%d\r\ntrapkit_last_image_compressed:%d\r\n"
            "trapkit_last_image_bytes:%lu\r\ntrapkit_chain_incremental_images:%lu\r\n"
            "trapkit_chain_full_bytes:%lu\r\ntrapkit_chain_incremental_bytes:%lu\r\n"
            "trapkit_restore:%s\r\n",
            (unsigned long)server.changes, persist.bgsave ? 1 : 0, (long)persist.lastsave,
            persist.last_status, persist.last_bgsave_ms < 0 ? -1L : persist.last_bgsave_ms / 1000,
            persist.bgsave ? (long)(now - persist.bgsave_start) : -1L, (unsigned long)persist.saves,
            tk_ckpt_mech_name(server.mech), (unsigned long)st.pages_saved,
            (unsigned long)st.pages_by_writers, (unsigned long)st.faults,
            (unsigned long)(st.pause_ns / 1000), (unsigned long)(st.max_stall_ns / 1000),
            (long long)persist.last_instant_ms, st.incremental ? 1 : 0, st.compressed ? 1 : 0,
            (unsigned long)st.image_bytes,
            (unsigned long)(persist.chain.last_seq - persist.chain.base_seq),
            (unsigned long)persist.chain.base_bytes, (unsigned long)persist.chain.inc_bytes,
            persist.eager_restore ? "eager" : "lazy");
        int64_t since;
        bool compacting = persist_compacting(&since);
        ADD("trapkit_compact_in_progress:%d\r\ntrapkit_current_compact_time_sec:%ld\r\n"
            "trapkit_last_compact_status:%s\r\ntrapkit_last_compact_time_sec:%ld\r\n"
            "trapkit_compactions:%lu\r\n\r\n",
            compacting ? 1 : 0, compacting ? (long)((mono_ms() - since) / 1000) : -1L,
            persist.last_compact_status,
            persist.last_compact_ms < 0 ? -1L : persist.last_compact_ms / 1000,
            (unsigned long)persist.compactions);
    }
    if (want[4])
        ADD("# Stats\r\ntotal_connections_received:%lu\r\ntotal_commands_processed:%lu\r\n"
            "rejected_connections:%lu\r\nexpired_keys:%lu\r\npubsub_channels:%lu\r\n"
            "pubsub_patterns:%lu\r\nclient_output_limit_disconnections:%lu\r\n\r\n",
            (unsigned long)net.total_conns, (unsigned long)server.total_commands,
            (unsigned long)net.rejected_conns, (unsigned long)kv_expired_total(server.kv),
            (unsigned long)pubsub_channels(), (unsigned long)pubsub_patterns(),
            (unsigned long)net.out_limit_closed);
    if (want[5]) {
        ADD("# Keyspace\r\n");
        if (kv_count(server.kv))
            ADD("db0:keys=%lu,expires=%lu,avg_ttl=%lld\r\n", (unsigned long)kv_count(server.kv),
                (unsigned long)kv_expires(server.kv), (long long)kv_avg_ttl(server.kv));
        ADD("\r\n");
    }
#undef ADD
    if (o > sizeof buf - 1) o = sizeof buf - 1;
    if (o >= 2) o -= 2; /* no blank line after the last section */
    out_bulk(c, buf, o);
}

/* ---- CONFIG SET, CONFIG HELP, CONFIG REWRITE ---------------------------- */
/* CONFIG SET parameter value [parameter value ...]: the parameters
 * kv-server honours - save (its save points), slowlog-log-slower-than,
 * slowlog-max-len, maxclients (up to what the descriptors allow),
 * client-output-buffer-limit (normal and pubsub classes; replica accepted),
 * appendonly (no: kv-server saves images, it has no AOF), maxmemory-policy
 * (noeviction: it evicts nothing) - with Redis's checks and errors; those
 * CONFIG GET shows that are fixed at start (--port, --dir, --memory ...)
 * get Redis's error for an immutable one, any other Redis's error for an
 * unknown one.  Every value is checked before any is set. */
struct slowlog_state slowlog = {.slower_than = 10000, .max_len = 128};

static const char *const immutable_params[] = {"dir",       "dbfilename", "port",
                                               "maxmemory", "databases",  "proto-max-bulk-len"};

static bool config_param(const struct arg *a, const char *name)
{
    return arg_is(a, name);
}

/* Checks (set false) or sets (set true) one parameter; NULL if fine, else
 * the reason (after "CONFIG SET failed (possibly related to argument
 * '...') - "), or "" for an unknown parameter. */
static const char *config_one(const struct arg *p, const struct arg *v, bool set, char *buf,
                              size_t cap)
{
    char val[1024];
    size_t n = v->n < sizeof val - 1 ? v->n : sizeof val - 1;
    memcpy(val, v->p, n);
    val[n] = 0;
    long long x;
    if (config_param(p, "save")) {
        struct save_point saved[MAX_SAVE_POINTS];
        int nsaved = persist.nsave_points;
        memcpy(saved, persist.save_points, sizeof saved);
        bool ok = n == v->n && !memchr(v->p, 0, v->n) && persist_parse_save_points(val);
        if (!set || !ok) {
            memcpy(persist.save_points, saved, sizeof saved);
            persist.nsave_points = nsaved;
        }
        return ok ? NULL : "Invalid save parameters";
    }
    if (config_param(p, "stop-writes-on-bgsave-error")) {
        if (!arg_is(v, "yes") && !arg_is(v, "no")) return "argument must be 'yes' or 'no'";
        if (set) persist.stop_writes_on_error = arg_is(v, "yes");
        return NULL;
    }
    if (config_param(p, "client-output-buffer-limit")) {
        struct out_limit normal = net.out_normal, pubsub = net.out_pubsub;
        if (n != v->n || memchr(v->p, 0, v->n) || !net_parse_out_limits(val, &normal, &pubsub))
            return "Invalid argument";
        if (set) {
            net.out_normal = normal;
            net.out_pubsub = pubsub;
        }
        return NULL;
    }
    if (config_param(p, "appendonly")) {
        if (!arg_is(v, "yes") && !arg_is(v, "no")) return "argument must be 'yes' or 'no'";
        return arg_is(v, "no") ? NULL
                               : "kv-server has no append-only file: it saves checkpoint images";
    }
    if (config_param(p, "maxmemory-policy")) {
        static const char *const policies[] = {"volatile-lru",   "volatile-lfu", "volatile-random",
                                               "volatile-ttl",   "allkeys-lru",  "allkeys-lfu",
                                               "allkeys-random", "noeviction"};
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
            if (arg_is(v, policies[i]))
                return i == 7 ? NULL : "kv-server evicts no key: noeviction only";
        return "argument(s) must be one of the following: volatile-lru, volatile-lfu, "
               "volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, "
               "noeviction";
    }
    if (config_param(p, "slowlog-log-slower-than") || config_param(p, "slowlog-max-len") ||
        config_param(p, "maxclients")) {
        bool slower = config_param(p, "slowlog-log-slower-than"),
             maxc = config_param(p, "maxclients");
        if (!parse_ll(v, &x)) return "argument couldn't be parsed into an integer";
        long long lo = slower ? -1 : maxc ? 1 : 0, hi = maxc ? 4294967295LL : LLONG_MAX;
        if (x < lo || x > hi) {
            snprintf(buf, cap, "argument must be between %lld and %lld inclusive", lo, hi);
            return buf;
        }
        if (maxc && (unsigned long long)x > net.maxclients_limit) {
            snprintf(buf, cap,
                     "The operating system is not able to handle the specified number of "
                     "clients, try with %llu",
                     (unsigned long long)net.maxclients_limit);
            return buf;
        }
        if (set && slower) slowlog.slower_than = x;
        if (set && maxc) net.maxclients = (uint64_t)x;
        if (set && !slower && !maxc) {
            slowlog.max_len = x;
            slowlog_trim();
        }
        return NULL;
    }
    for (size_t i = 0; i < sizeof immutable_params / sizeof immutable_params[0]; i++)
        if (config_param(p, immutable_params[i])) return "can't set immutable config";
    return "";
}

void cmd_config_set(struct conn *c, struct arg *a, size_t argc)
{
    char name[600], buf[256];
    if (argc % 2) return out_syntax(c);
    for (size_t i = 2; i < argc; i += 2) {
        for (size_t j = 2; j < i; j += 2)
            if (a[j].n == a[i].n && !strncasecmp(a[j].p, a[i].p, a[i].n))
                return out_err(c,
                               "ERR CONFIG SET failed (possibly related to argument '%s') - "
                               "duplicate parameter",
                               resp_escape(name, sizeof name, a[i].p, a[i].n, 128));
        const char *why = config_one(&a[i], &a[i + 1], false, buf, sizeof buf);
        resp_escape(name, sizeof name, a[i].p, a[i].n, 128);
        if (why && !*why)
            return out_err(c, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                           name);
        if (why)
            return out_err(c, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                           name, why);
    }
    for (size_t i = 2; i < argc; i += 2) config_one(&a[i], &a[i + 1], true, buf, sizeof buf);
    out_ok(c);
}

void cmd_config_rewrite(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_err(c, "ERR The server is running without a config file");
}

void cmd_config_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

/* ---- SLOWLOG ------------------------------------------------------------ */
/* An entry: Redis's id, unix time, microseconds, the arguments (at most 32,
 * the last then "... (N more arguments)"; each at most 128 bytes, then
 * "... (N more bytes)"; AUTH's and HELLO's passwords "(redacted)"), the
 * client's address and name. */
struct slowlog_entry {
    struct slowlog_entry *next; /* older */
    uint64_t id;
    long long time, us;
    size_t argc;
    struct arg *argv; /* and their bytes, in one block */
    char addr[80], name[130];
};

static struct slowlog_entry *slowlog_first; /* the newest */
static size_t slowlog_n;
static uint64_t slowlog_next_id;

void slowlog_trim(void)
{
    struct slowlog_entry **l = &slowlog_first;
    for (size_t i = 0; *l && i < (size_t)slowlog.max_len; i++) l = &(*l)->next;
    while (*l) {
        struct slowlog_entry *e = *l;
        *l = e->next;
        free(e->argv);
        free(e);
        slowlog_n--;
    }
}

void slowlog_push(struct conn *c, const struct arg *a, size_t argc, long long us)
{
    if (slowlog.slower_than < 0 || us < slowlog.slower_than || slowlog.max_len == 0) return;
    size_t n = argc > 32 ? 32 : argc, bytes = 0;
    char more[64];
    bool redact_all = arg_is(&a[0], "auth");
    size_t redact_from = SIZE_MAX;
    for (size_t i = 1; i + 2 < argc; i++) /* HELLO ... AUTH user pass */
        if (arg_is(&a[0], "hello") && arg_is(&a[i], "AUTH")) {
            redact_from = i + 1;
            break;
        }
    struct arg v[32];
    for (size_t i = 0; i < n; i++) {
        if (i == 31 && argc > 32) {
            int m = snprintf(more, sizeof more, "... (%zu more arguments)", argc - 31);
            v[i] = (struct arg){more, (size_t)m};
        } else if ((redact_all && i > 0) ||
                   (redact_from != SIZE_MAX && (i == redact_from || i == redact_from + 1))) {
            v[i] = (struct arg){"(redacted)", 10};
        } else {
            v[i] = (struct arg){a[i].p, a[i].n > 128 ? 128 : a[i].n};
        }
        bytes += v[i].n + 32;
    }
    struct slowlog_entry *e = calloc(1, sizeof *e);
    struct arg *copy = e ? malloc(n * sizeof *copy + bytes) : NULL;
    if (!copy) {
        free(e);
        return;
    }
    char *p = (char *)(copy + n);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, v[i].p, v[i].n);
        size_t len = v[i].n;
        if (v[i].p == a[i].p && a[i].n > 128)
            len += (size_t)snprintf(p + len, 32, "... (%zu more bytes)", a[i].n - 128);
        copy[i] = (struct arg){p, len};
        p += len;
    }
    e->id = slowlog_next_id++;
    e->time = (long long)time(NULL);
    e->us = us;
    e->argc = n;
    e->argv = copy;
    net_addr(c, false, e->addr, sizeof e->addr);
    snprintf(e->name, sizeof e->name, "%s", c->name ? c->name : "");
    e->next = slowlog_first;
    slowlog_first = e;
    slowlog_n++;
    slowlog_trim();
}

/* SLOWLOG GET [count] (10; -1 all), newest first */
void cmd_slowlog_get(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 10;
    if (argc > 3) {
        char sub[600];
        return out_err(c,
                       "ERR unknown subcommand or wrong number of arguments for '%s'. Try SLOWLOG "
                       "HELP.",
                       resp_escape(sub, sizeof sub, a[1].p, a[1].n, 128));
    }
    if (argc == 3 && (!parse_ll(&a[2], &count) || count < -1))
        return out_err(c, "ERR count should be greater than or equal to -1");
    if (count == -1 || (unsigned long long)count > slowlog_n) count = (long long)slowlog_n;
    out_array(c, (size_t)count);
    struct slowlog_entry *e = slowlog_first;
    for (long long i = 0; i < count; i++, e = e->next) {
        out_array(c, 6);
        out_int(c, (long long)e->id);
        out_int(c, e->time);
        out_int(c, e->us);
        out_array(c, e->argc);
        for (size_t j = 0; j < e->argc; j++) out_bulk(c, e->argv[j].p, e->argv[j].n);
        out_cstr(c, e->addr);
        out_cstr(c, e->name);
    }
}

void cmd_slowlog_len(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)slowlog_n);
}

void cmd_slowlog_reset(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    long long keep = slowlog.max_len;
    slowlog.max_len = 0;
    slowlog_trim();
    slowlog.max_len = keep;
    out_ok(c);
}

void cmd_slowlog_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

/* ---- ROLE, SWAPDB, LOLWUT ----------------------------------------------- */
/* ROLE: a master with no replica (and no replication offset) */
void cmd_role(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_array(c, 3);
    out_cstr(c, "master");
    out_int(c, 0);
    out_array(c, 0);
}

/* SWAPDB index1 index2: a server of one database swaps 0 with 0 only (a
 * change, as Redis counts it) */
void cmd_swapdb(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long x, y;
    if (!parse_ll(&a[1], &x) || x < INT_MIN || x > INT_MAX)
        return out_err(c, "ERR invalid first DB index");
    if (!parse_ll(&a[2], &y) || y < INT_MIN || y > INT_MAX)
        return out_err(c, "ERR invalid second DB index");
    if (x != 0 || y != 0) return out_err(c, "ERR DB index is out of range");
    server.changes++;
    out_ok(c);
}

/* LOLWUT [VERSION v]: the version line Redis 7.0 answers (without the art
 * of its versions 5 and 6) */
void cmd_lolwut(struct conn *c, struct arg *a, size_t argc)
{
    long long v;
    if (argc >= 3 && arg_is(&a[1], "VERSION") && !get_ll(c, &a[2], &v)) return;
    out_cstr(c, "Redis ver. " REDIS_VERSION "\n");
}
