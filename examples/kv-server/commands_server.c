/* examples/kv-server/commands_server.c - the server's commands: PING, ECHO,
 * TIME, INFO, CONFIG, CLIENT, the saves and SHUTDOWN, and those that tools
 * and client libraries expect. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "net.h"
#include "persist.h"
#include "server.h"

void cmd_ping(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 2) return out_arity_error(c, "ping");
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

void cmd_shutdown(struct conn *c, struct arg *a, size_t argc)
{
    enum shutdown_mode mode = SHUTDOWN_DEFAULT;
    for (size_t i = 1; i < argc; i++) {
        if (arg_is(&a[i], "SAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_SAVE;
        else if (arg_is(&a[i], "NOSAVE") && mode == SHUTDOWN_DEFAULT)
            mode = SHUTDOWN_NOSAVE;
        else
            return out_syntax(c);
    }
    if (persist_shutdown(mode) < 0) out_err(c, "ERR Errors trying to SHUTDOWN. Check logs.");
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

/* CLIENT SETNAME: a name of printable ASCII without spaces (CLIENT LIST's
 * fields are split at spaces in Redis); "" removes it. */
void cmd_client_setname(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    for (size_t i = 0; i < a[2].n; i++)
        if ((unsigned char)a[2].p[i] < '!' || (unsigned char)a[2].p[i] > '~')
            return out_err(c, "ERR Client names cannot contain spaces, newlines or special "
                              "characters.");
    char *name = NULL;
    if (a[2].n) {
        if (!(name = malloc(a[2].n + 1))) return out_oom(c);
        memcpy(name, a[2].p, a[2].n);
        name[a[2].n] = 0;
    }
    free(c->name);
    c->name = name;
    out_ok(c);
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

void cmd_command(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_array(c, 0);
}

void cmd_config_resetstat(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_ok(c);
}

/* CONFIG GET pattern...: the parameters tools ask for (redis-benchmark:
 * save, appendonly), matched as globs */
void cmd_config_get(struct conn *c, struct arg *a, size_t argc)
{
    char save[512], port[16], mem[24], maxc[24];
    snprintf(maxc, sizeof maxc, "%llu", (unsigned long long)net.maxclients);
    persist_save_points_str(save, sizeof save);
    snprintf(port, sizeof port, "%d", server.port);
    snprintf(mem, sizeof mem, "%zu", server.mem);
    const char *params[][2] = {{"save", save},
                               {"appendonly", "no"},
                               {"dir", persist.dir},
                               {"dbfilename", persist.dbfile},
                               {"port", port},
                               {"maxmemory", mem},
                               {"maxmemory-policy", "noeviction"},
                               {"databases", "1"},
                               {"proto-max-bulk-len", "67108864"},
                               {"maxclients", maxc}};
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
        ADD("# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
            "kv_server:trapkit\r\narch_bits:64\r\nmultiplexing_api:epoll\r\n"
            "process_id:%ld\r\ntcp_port:%d\r\nuptime_in_seconds:%ld\r\n"
            "uptime_in_days:%ld\r\nexecutable:kv-server\r\n\r\n",
            (long)getpid(), server.port, (long)(now - server.start_time),
            (long)(now - server.start_time) / 86400);
    if (want[1])
        ADD("# Clients\r\nconnected_clients:%lu\r\nblocked_clients:0\r\n"
            "client_output_buffer_limit:%llu\r\n\r\n",
            (unsigned long)net.nconns, net.out_hard);
    if (want[2])
        ADD("# Memory\r\nused_memory:%lu\r\nused_memory_human:%.2fM\r\n"
            "used_memory_dataset:%lu\r\nmaxmemory:%zu\r\nmaxmemory_policy:noeviction\r\n"
            "kv_heap_free:%lu\r\nkv_keyspace_rehashing:%d\r\n\r\n",
            (unsigned long)kv_used(server.kv), kv_used(server.kv) / 1048576.0,
            (unsigned long)kv_used(server.kv), server.mem, (unsigned long)kv_free(server.kv),
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
            "rejected_connections:%lu\r\nexpired_keys:%lu\r\n"
            "client_output_limit_disconnections:%lu\r\n\r\n",
            (unsigned long)net.total_conns, (unsigned long)server.total_commands,
            (unsigned long)net.rejected_conns, (unsigned long)kv_expired_total(server.kv),
            (unsigned long)net.out_limit_closed);
    if (want[5]) {
        ADD("# Keyspace\r\n");
        if (kv_count(server.kv))
            ADD("db0:keys=%lu,expires=%lu,avg_ttl=0\r\n", (unsigned long)kv_count(server.kv),
                (unsigned long)kv_expires(server.kv));
        ADD("\r\n");
    }
#undef ADD
    if (o > sizeof buf - 1) o = sizeof buf - 1;
    if (o >= 2) o -= 2; /* no blank line after the last section */
    out_bulk(c, buf, o);
}
