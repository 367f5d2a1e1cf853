/* examples/kv-server/main.c - a small Redis-protocol (RESP2) server whose
 * data lives in one memory area checkpointed by trapkit: BGSAVE writes a
 * consistent image while the server keeps serving, and the latest image is
 * loaded at start.
 *
 *   kv-server [--port N] [--bind ADDR] [--dir DIR] [--dbfilename NAME]
 *             [--memory SIZE] [--save "SECONDS CHANGES [SECONDS CHANGES ...]"]
 *             [--client-output-buffer-limit SIZE|"CLASS HARD SOFT SECONDS ..."]
 *             [--stop-writes-on-bgsave-error yes|no]
 *             [--mechanism uffd-thread|uffd-sigbus|posix|fork|stop-the-world|precopy]
 *             [--incremental yes|no] [--full-after N] [--compress yes|no]
 *             [--compact-after N] [--compact-percentage P] [--compact-min-size SIZE]
 *             [--eager-restore yes|no] [--restore-prefetch yes|no]
 *
 * Commands: the strings, keys, lists, sets, hashes, sorted sets,
 * transactions (MULTI/EXEC/WATCH), blocking pops (BLPOP ...), pub/sub,
 * connection and server commands of redis-server 7.0, answered as it
 * answers them; the list is in commands_table.c and README.md.
 *
 * Every value lives in the area (examples/kv-server/store.h), addressed by
 * offsets, so an image holds it and restores it at any address.  Expiry
 * times are kept there as absolute unix milliseconds, so they survive a
 * restore; an expired key is deleted when a command looks it up, and an
 * active cycle (every 100 ms, about a millisecond) deletes those nobody
 * looks at.  --memory is the area's size (maxmemory): a write whose
 * arguments need more than the free heap is refused with -OOM; one that
 * runs out part way (MSET, a multi-member ZADD) replies -OOM with what it
 * did before kept.
 *
 * It works with the unmodified redis-cli and redis-benchmark.  Replies are
 * Redis's, word for word where a test compares them with redis-server's.
 *
 * The protocol (resp.h): RESP2 arrays of bulk strings, or inline commands split as
 * Redis and redis-cli split them ("..." with \n \r \t \b \a \\ \" \xHH
 * escapes, '...' with \').  Malformed input gets "-ERR Protocol error: ..."
 * and the connection is closed after it; lengths that do not fit (a count
 * above 2,147,483,647 arguments, a bulk above 512 MiB, any number that
 * overflows: Redis 7.0's limits) are malformed.  An error reply never carries a client's bytes
 * as they came: a name is quoted with non-printable bytes as \xHH and cut
 * at 128 bytes.
 *
 * Fairness and memory (net.h): each event-loop turn reads at most 64 KiB from a
 * client and runs at most 1,000 of its commands, so a client pipelining
 * without pause cannot hold the others up; a client with 1 MiB of replies
 * unsent is not read until they drain (its input waits in the kernel), so
 * its replies pass 1 MiB only by the one command that did it.  Redis's
 * client-output-buffer-limit (--client-output-buffer-limit, CONFIG SET) for
 * the normal class (Redis's default: none) and the pubsub class (32mb 8mb
 * 60) disconnects a client past its hard limit, or past its soft limit
 * for longer than its seconds.  A transaction's queued commands are bounded
 * by the normal hard limit, or 256 MiB without one.
 *
 * Persistence (persist.h), as Redis does it:
 * - An image holds the data as it was at its snapshot instant, always
 *   between two commands: every command executed before it, none after
 *   (INFO: trapkit_last_snapshot_instant_ms).  SAVE's is inside SAVE;
 *   BGSAVE's a few milliseconds after it, at the start of an event-loop
 *   turn (the data set is write-protected in steps while commands run,
 *   then the event loop pauses briefly for the last step), or with
 *   --mechanism fork inside BGSAVE, at the fork.
 * - The dump is a chain (README.md): DIR/NAME, a full image, then
 *   DIR/NAME.inc.SEQ, incremental images of the pages written since the
 *   image before (--incremental yes, the default), with a full image again
 *   after --full-after N (8) of them.  A save writes DIR/NAME.tmp and
 *   renames it into the chain when complete, so a crash (kill -9) at any
 *   instant leaves the chain of the last completed save.  A thread compacts
 *   the chain into one full image once it holds --compact-after N (4)
 *   incremental images or they add up to --compact-percentage P (100) % of
 *   the full image and at least --compact-min-size (64m) (0 and 0: never;
 *   then a full image is saved once they outweigh it).  --compact-delay MS makes a compaction wait
 * that long before it renames its image, for tests (as Redis's rdb-key-save-delay slows its saves);
 * --compact-hold FILE makes it wait there until FILE exists (at most 10 minutes).
 * --instant-hold FILE, for tests: a BGSAVE's snapshot instant is not taken
 *   until FILE exists (the server serves meanwhile).
 * --compress yes compresses pages with LZ4.
 * - LASTSAVE (INFO rdb_last_save_time) is the time the last successful save
 *   completed; at start, the start time.  rdb_changes_since_last_save counts
 *   the writes made since the last successful save's snapshot instant, so
 *   writes made while a BGSAVE runs still count after it completes.
 * - --save takes Redis's save points: a BGSAVE starts once SECONDS have
 *   passed since the last save and at least CHANGES writes were made.  The
 *   default is Redis's, "3600 1 300 100 60 10000"; --save "" sets none.
 * - SIGTERM and SIGINT shut down as SHUTDOWN does: with save points
 *   configured the data set is saved first (synchronously); SHUTDOWN SAVE
 *   always saves, SHUTDOWN NOSAVE never.  If that save fails the server
 *   says so on stderr and keeps running (SHUTDOWN replies with an error).
 *   A BGSAVE still running is waited for if an image is to be written, and
 *   abandoned otherwise.
 * - At start, an image that exists but cannot be opened or read stops the
 *   server with an error (exit status 1): starting empty would let the next
 *   save replace it.  Only a missing image (ENOENT) starts an empty store.
 * - The fork mechanism's child closes every descriptor but the image's
 *   (TK_CKPT_CLOSE_FDS), so a server restarted while the child of a killed one still writes can
 *   listen on the same port.
 *
 * The files:
 *   main.c            options and start-up
 *   server.h          the state every module shares: the data set, the configuration
 *   net.c, net.h      the event loop, connections, reading, output buffers and their limits
 *   resp.c, resp.h    the RESP2 and inline parser (MAX_BULK, MAX_ARGS, MAX_INLINE), reply
 *                     writers, error messages' escaping
 *   commands.h        the commands' interface and shared helpers (commands_common.c)
 *   commands_table.c  the command table and list, running a command (arity, OOM, clock)
 *   commands_strings.c, commands_keys.c, commands_lists.c, commands_sets.c,
 *   commands_hashes.c, commands_zsets.c, commands_server.c (INFO, CONFIG, SAVE ...)
 *                     the commands, as cmd_NAME
 *   commands_blocking.c  the blocking pops: clients waiting on keys, served, timed out
 *   commands_pubsub.c     pub/sub: channels, patterns, messages
 *   commands_bits.c       SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP
 *   commands_sort.c       SORT, SORT_RO
 *   persist.c, persist.h  loading the image, SAVE, BGSAVE, save points, SHUTDOWN
 *   store.c, store.h  the data set in the checkpointed area
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "commands.h"
#include "net.h"
#include "persist.h"
#include "server.h"
#include "store.h"

struct server_state server;

static void on_signal(int sig)
{
    (void)sig;
    server.stop = 1;
}

static int usage(const char *msg)
{
    fprintf(
        msg ? stderr : stdout,
        "%s%s%susage: kv-server [--port N] [--bind ADDR] [--dir DIR] [--dbfilename "
        "NAME] [--memory SIZE] [--save \"SECONDS CHANGES ...\"] [--client-output-buffer-limit "
        "SIZE|\"CLASS HARD SOFT SECONDS ...\"] [--stop-writes-on-bgsave-error yes|no] [--mechanism "
        "uffd-thread|uffd-sigbus|posix|fork|stop-the-world|precopy] [--incremental "
        "yes|no] [--full-after N] [--compress yes|no] [--compact-after N] "
        "[--compact-percentage P] [--compact-min-size SIZE] [--eager-restore yes|no] "
        "[--restore-prefetch yes|no]\n",
        msg ? "kv-server: " : "", msg ? msg : "", msg ? "\n" : "");
    return msg ? 2 : 0;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return 0;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        break;
    case 0:
        break;
    default:
        return 0;
    }
    return (size_t)v & ~(size_t)4095;
}

int main(int argc, char **argv)
{
    int port = 6379;
    const char *bind_addr = "127.0.0.1";
    server.mem = 256u << 20;
    server.mech = TK_CKPT_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) return usage(NULL);
        if (!v) {
            char msg[160];
            snprintf(msg, sizeof msg, "%.120s takes a value (every option does)", o);
            return usage(msg);
        }
        i++;
        if (!strcmp(o, "--port")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > 65535)
                return usage("--port takes a port number, 0 to 65535 (0: any free one)");
            port = (int)n;
        } else if (!strcmp(o, "--bind")) {
            bind_addr = v;
        } else if (!strcmp(o, "--dir")) {
            persist.dir = v;
        } else if (!strcmp(o, "--dbfilename")) {
            persist.dbfile = v;
        } else if (!strcmp(o, "--memory")) {
            server.mem = parse_size(v);
            if (server.mem < (1u << 20)) return usage("--memory must be at least 1m");
        } else if (!strcmp(o, "--save")) {
            if (!persist_parse_save_points(v))
                return usage("--save takes \"SECONDS CHANGES ...\" or \"\"");
        } else if (!strcmp(o, "--client-output-buffer-limit")) {
            size_t one = strchr(v, ' ') ? 0 : parse_size(v);
            if (one) { /* one size: the hard limit of both classes */
                if (one < OUT_SOFT)
                    return usage("--client-output-buffer-limit must be at least 1m");
                net.out_normal = net.out_pubsub = (struct out_limit){one, 0, 0};
            } else if (!net_parse_out_limits(v, &net.out_normal, &net.out_pubsub)) {
                return usage("--client-output-buffer-limit takes SIZE or \"CLASS HARD SOFT "
                             "SECONDS ...\" (classes normal, pubsub)");
            }
        } else if (!strcmp(o, "--stop-writes-on-bgsave-error")) {
            if (strcmp(v, "yes") && strcmp(v, "no"))
                return usage("--stop-writes-on-bgsave-error takes yes or no");
            persist.stop_writes_on_error = !strcmp(v, "yes");
        } else if (!strcmp(o, "--incremental") || !strcmp(o, "--compress") ||
                   !strcmp(o, "--eager-restore") || !strcmp(o, "--restore-prefetch")) {
            bool yes = !strcmp(v, "yes");
            if (!yes && strcmp(v, "no"))
                return usage("--incremental, --compress, --eager-restore and --restore-prefetch "
                             "take yes or no");
            if (o[2] == 'i')
                persist.incremental = yes;
            else if (o[2] == 'c')
                persist.compress = yes;
            else if (o[2] == 'r')
                persist.prefetch = yes;
            else
                persist.eager_restore = yes;
        } else if (!strcmp(o, "--full-after")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > MAX_CHAIN)
                return usage("--full-after takes a count of incremental images, 0 to 64");
            persist.full_after = (int)n;
        } else if (!strcmp(o, "--compact-after") || !strcmp(o, "--compact-percentage")) {
            char *end;
            long n = strtol(v, &end, 10);
            bool after = o[10] == 'a';
            if (end == v || *end || n < 0 || n > (after ? MAX_CHAIN : 100000))
                return usage(after ? "--compact-after takes a count of incremental images, 0 to 64"
                                   : "--compact-percentage takes a percentage, 0 to 100000");
            if (after)
                persist.compact_after = (int)n;
            else
                persist.compact_percentage = (int)n;
        } else if (!strcmp(o, "--compact-min-size")) {
            persist.compact_min_size = strcmp(v, "0") ? parse_size(v) : 0;
            if (strcmp(v, "0") && !persist.compact_min_size)
                return usage("--compact-min-size takes a size (64m, 1g, 0)");
        } else if (!strcmp(o, "--compact-delay")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > 600000)
                return usage("--compact-delay takes milliseconds, 0 to 600000");
            persist.compact_delay_ms = n;
        } else if (!strcmp(o, "--compact-hold")) {
            if (!*v || strlen(v) >= sizeof persist.compact_hold)
                return usage("--compact-hold takes a file name");
            snprintf(persist.compact_hold, sizeof persist.compact_hold, "%s", v);
        } else if (!strcmp(o, "--instant-hold")) {
            if (!*v || strlen(v) >= sizeof persist.instant_hold)
                return usage("--instant-hold takes a file name");
            snprintf(persist.instant_hold, sizeof persist.instant_hold, "%s", v);
        } else if (!strcmp(o, "--mechanism")) {
            server.mech = tk_ckpt_mech_parse(v);
            if (server.mech == TK_CKPT_COUNT_) return usage("unknown --mechanism");
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown option %.120s", o);
            return usage(msg);
        }
    }
    if (persist.compress && server.mech == TK_CKPT_PRECOPY)
        return usage("--compress yes does not go with --mechanism precopy (its images are not "
                     "compressed)");
    /* as redis-server, which cannot chdir there: a mistyped --dir would
     * otherwise start an empty store beside the data */
    struct stat dst;
    if (stat(persist.dir, &dst) != 0 || !S_ISDIR(dst.st_mode)) {
        fprintf(stderr, "kv-server: --dir %s: %s\n", persist.dir,
                S_ISDIR(dst.st_mode) || errno != 0 ? strerror(errno) : "not a directory");
        return 1;
    }
    snprintf(persist.path, sizeof persist.path, "%s/%s", persist.dir, persist.dbfile);
    snprintf(persist.tmp_path, sizeof persist.tmp_path, "%s/%s.tmp", persist.dir, persist.dbfile);
    snprintf(persist.compact_path, sizeof persist.compact_path, "%s/%s.tmp-compact", persist.dir,
             persist.dbfile);
    commands_init();

    void *area = mmap(NULL, server.mem, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) {
        fprintf(stderr, "kv-server: cannot map %zu bytes: %s\n", server.mem, strerror(errno));
        return 1;
    }
    struct tk_ckpt_area ar = {area, server.mem};
    server.start_time = time(NULL);
    persist.lastsave = server.start_time; /* as Redis: at start the data set counts as saved */
    if (persist_load_image(&ar) < 0) return 1;
    if (persist_create_ckpt(&ar) < 0) return 1;

    /* --bind: an IPv4 or IPv6 address, or a host name (localhost) */
    char port_s[8];
    snprintf(port_s, sizeof port_s, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    int gai = getaddrinfo(bind_addr, port_s, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "kv-server: --bind %s: %s\n", bind_addr, gai_strerror(gai));
        return 2;
    }
    int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    net.listen_fd = ls;
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) < 0 || listen(ls, 511) < 0) {
        fprintf(stderr, "kv-server: cannot listen on %s:%d: %s\n", bind_addr, port,
                strerror(errno));
        return 1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    server.port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                 : ((struct sockaddr_in *)&sa)->sin_port);
    net_init_limits();
    signal(SIGPIPE, SIG_IGN);
    struct sigaction st = {.sa_handler = on_signal};
    sigaction(SIGINT, &st, NULL);
    sigaction(SIGTERM, &st, NULL);
    net_watch_listener();
    printf("kv-server: listening on %s:%d, %zu MiB, checkpoints by %s, image %s\n", bind_addr,
           server.port, server.mem >> 20, tk_ckpt_mech_name(server.mech), persist.path);
    fflush(stdout);
    net_event_loop();
}
