/* examples/kv-server/server.h - what every module of kv-server shares: the
 * data set, the configuration given at start, and the clocks.
 *
 * The other modules keep their own state: the connections in net.h
 * (struct net_state net), the saves in persist.h (struct persist_state
 * persist).  main.c describes the server and lists its files.
 */
#ifndef KV_SERVER_H
#define KV_SERVER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <trapkit/checkpoint.h>

struct kv_store;

#define REDIS_VERSION "7.0.0" /* the version kv-server answers as (INFO, HELLO) */

struct server_state {
    struct kv_store *kv;        /* the data set, in the checkpointed area */
    size_t mem;                 /* the area's size (--memory, maxmemory) */
    enum tk_ckpt_mech mech;     /* --mechanism */
    int port;                   /* the port listened on (--port 0: the one chosen) */
    time_t start_time;          /* for INFO's uptime */
    uint64_t changes;           /* writes not yet in a saved image (rdb_changes_since_last_save) */
    uint64_t total_commands;    /* executed since start */
    volatile sig_atomic_t stop; /* SIGTERM or SIGINT: shut down as SHUTDOWN does */
};

extern struct server_state server; /* main.c */

static inline int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
