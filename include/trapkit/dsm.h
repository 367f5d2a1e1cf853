/* trapkit/dsm.h - shared virtual memory across processes and hosts, on MPI
 * (Appel & Li's "shared virtual memory"; Li's IVY).
 *
 * The ranks of an MPI communicator share allocations: tk_dsm_alloc() gives
 * every rank the same virtual range, and a page's contents move between the
 * ranks as they touch it.  The page-protection primitives do the work: a
 * page a rank may not read is no-access (TRAP on first touch), a page it
 * may only read is read-only (PROT1), and the fault handler asks the page's
 * manager or home for it over MPI, installs it through a second view of the
 * memory (MAP2) and opens it (UNPROT).
 *
 * Two coherence protocols (tk_dsm_config.protocol, or TRAPKIT_DSM_PROTOCOL):
 *
 *   ivy  Sequential consistency, one writer or many readers per page (Li &
 *        Hudak's fixed distributed manager).  Each page has a manager rank
 *        that knows its owner and the ranks holding read-only copies.  A
 *        read fault gets a copy from the owner (which keeps a read-only
 *        one); a write fault has the manager invalidate every copy and the
 *        owner hand the page over.  Any program that is correct on shared
 *        memory with sequential consistency is correct on it, also one with
 *        data races; locks and barriers only order the ranks.
 *   rc   Release consistency, many writers per page (as TreadMarks and
 *        ArgoDSM).  Each page has a home rank that keeps its master copy.  A
 *        rank caches pages read-only; its first write to a cached page makes
 *        a twin (a copy of the page as it was) and opens the page; at a
 *        release (tk_dsm_unlock, tk_dsm_barrier) every written page is
 *        compared with its twin and the bytes that changed (a diff) go to
 *        the home, which merges the diffs of every writer; at an acquire
 *        (tk_dsm_lock, tk_dsm_barrier) the rank drops its cached copies.
 *        Writes by one rank are guaranteed visible to another only after a
 *        release by the writer followed by an acquire by the reader: the
 *        program must be free of data races (every conflicting pair of
 *        accesses ordered by locks or barriers).  Ranks writing different
 *        bytes of one page (false sharing) need no synchronisation among
 *        themselves: the diffs merge byte by byte.
 *
 * Page placement (TRAPKIT_DSM_PLACEMENT): "block" (the default) makes rank
 * i the manager or home of the i-th contiguous 1/N of an allocation's
 * pages, so a program whose rank i works on the i-th part of an array finds
 * its part at home; "cyclic" deals the pages out one at a time.  Every page
 * starts at its home, zero-filled, read-write there (ivy: its home owns it).
 *
 * MPI.  The caller initialises MPI with MPI_Init_thread(...,
 * MPI_THREAD_MULTIPLE, ...): tk_dsm_init checks that the library provides
 * it (Open MPI 4.1 does) and fails with -ENOTSUP if not.  MPI is not
 * async-signal-safe, so the fault handler never calls it: the faulting
 * thread hands its request to the rank's service thread and waits (futex);
 * the service thread talks to the other ranks with two-sided messages
 * (MPI_Isend / MPI_Iprobe / MPI_Recv) on a duplicate of the communicator,
 * serves their requests, and installs pages.  One-sided operations
 * (MPI_Win) are not used: tk_dsm_transport() says what is.  Barriers and
 * lock waits go through the service thread as well; the calling thread
 * sleeps.  MPI over TCP makes progress only when polled, so the service
 * thread polls: without pause while a thread of its rank waits for an
 * answer, and otherwise every TRAPKIT_DSM_POLL_US microseconds (default 100)
 * for TRAPKIT_DSM_SPIN_US (default 1000) after a message or a barrier,
 * then less and less often, down to every millisecond.  Between polls it
 * sleeps at real-time priority 1 where the process may (TRAPKIT_DSM_RT=0
 * turns this off): woken, it gets a CPU at once instead of after the time
 * slice of the program's thread on it.  Under rc a read fault also asks
 * for the next TRAPKIT_DSM_PREFETCH - 1 pages of the same home (default:
 * 4 pages in all).
 *
 * Failures.  A rank that gets no answer to a request for
 * TRAPKIT_DSM_TIMEOUT seconds (default 20) prints which page it waited
 * for, and from which rank, and calls MPI_Abort: a rank that died does not
 * leave the others hanging (Open MPI's mpirun usually ends the job first,
 * saying which rank died).  Faults outside the DSM's allocations are not
 * trapkit's: they crash the program as they would without it.
 *
 * fork().  A child of fork() is no rank: its first touch of a page the
 * parent could not access then crashes it (SIGSEGV), as any access to
 * memory it may not touch; pages the parent had are the child's copy.
 *
 * Threads.  Any thread of a rank may touch shared memory; tk_dsm_lock,
 * tk_dsm_unlock and tk_dsm_barrier may be called from any thread (a barrier
 * by one thread of each rank at a time).  Under rc, a release makes the
 * whole rank's writes visible and an acquire drops the whole rank's copies.
 */
#ifndef TRAPKIT_DSM_H
#define TRAPKIT_DSM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tk_dsm_protocol {
    TK_DSM_DEFAULT = 0, /* TRAPKIT_DSM_PROTOCOL, else ivy */
    TK_DSM_IVY = 1,     /* sequentially consistent, single writer (Li's IVY) */
    TK_DSM_RC = 2,      /* release consistent, multiple writers (twins and diffs) */
};

enum tk_dsm_placement {
    TK_DSM_PLACE_DEFAULT = 0, /* TRAPKIT_DSM_PLACEMENT, else block */
    TK_DSM_PLACE_BLOCK = 1,   /* rank i is home of the i-th contiguous 1/N of the pages */
    TK_DSM_PLACE_CYCLIC = 2,  /* page p's home is rank p mod N */
};

typedef struct tk_dsm_config {
    enum tk_dsm_protocol protocol;
    enum tk_dsm_placement placement;
    size_t page_size;  /* the coherence unit: 0 = the hardware page, else a power-of-two
                          multiple of it (TRAPKIT_DSM_PAGE) */
    enum tk_mech mech; /* how faults are caught: TK_MECH_AUTO (TRAPKIT_BACKEND), posix,
                          uffd-sigbus or uffd-thread */
} tk_dsm_config;

/* Starts the DSM on the ranks of comm, with the defaults (and the
 * TRAPKIT_DSM_* environment variables).  Collective.  Returns 0, -ENOTSUP
 * (MPI without MPI_THREAD_MULTIPLE, more than 64 ranks), -EALREADY, -EINVAL
 * (a bad environment variable) or -ENOMEM; tk_last_error() says why.  The
 * ranks must agree on the configuration (checked: -EINVAL on every rank
 * otherwise). */
int tk_dsm_init(MPI_Comm comm);
int tk_dsm_init_config(MPI_Comm comm, const tk_dsm_config *cfg);

/* Ends it: a barrier, then the allocations are unmapped and the service
 * thread stopped.  Collective.  Call before MPI_Finalize. */
int tk_dsm_finalize(void);

/* Collective: every rank passes the same size and gets the same address;
 * the memory reads as zeros.  NULL with errno set (EINVAL: sizes differ
 * between ranks, or 0; ENOMEM; ENOTCONN: no tk_dsm_init) and the reason in
 * tk_last_error() - on every rank alike. */
void *tk_dsm_alloc(size_t size);
/* Collective: frees an allocation (every rank passes the same pointer).
 * Returns 0 or -EINVAL. */
int tk_dsm_free(void *p);

/* A barrier of every rank; under rc a release before it and an acquire
 * after it.  Returns 0 or a negative errno. */
int tk_dsm_barrier(void);

/* Global locks, ids 0 to TK_DSM_LOCKS - 1, each managed by rank id mod N,
 * granted in the order asked.  Under rc, tk_dsm_lock is an acquire and
 * tk_dsm_unlock a release.  Returns 0, -EINVAL (bad id; unlock of a lock
 * the rank does not hold). */
#define TK_DSM_LOCKS 4096
int tk_dsm_lock(int id);
int tk_dsm_unlock(int id);

int tk_dsm_rank(void);
int tk_dsm_size(void);
enum tk_dsm_protocol tk_dsm_protocol(void);
const char *tk_dsm_protocol_name(enum tk_dsm_protocol p); /* "ivy", "rc" */
size_t tk_dsm_page_size(void);
enum tk_mech tk_dsm_mech(void); /* the mechanism that catches the faults */
/* How the ranks talk, e.g. "two-sided MPI messages, service thread". */
const char *tk_dsm_transport(void);
/* The rank that manages (ivy) or is home of (rc) the page holding addr, or
 * -1 outside every allocation. */
int tk_dsm_home(const void *addr);

/* This rank's counters since tk_dsm_init. */
typedef struct tk_dsm_stats {
    uint64_t read_faults, write_faults; /* faults this rank's threads took */
    uint64_t pages_in, pages_out;       /* pages received, sent */
    uint64_t invalidations; /* copies this rank dropped (ivy: told to; rc: at acquires) */
    uint64_t twins, diffs_sent, diff_bytes; /* rc: twins made; diffs sent, bytes changed in them */
    uint64_t messages_sent, messages_received;
} tk_dsm_stats;
int tk_dsm_get_stats(tk_dsm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
