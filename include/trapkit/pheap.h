/* trapkit/pheap.h - a transactional persistent heap: a program keeps its
 * data structures, pointers and all, in a file and reads them at memory
 * speed (Appel & Li's persistent stores; Thekkath & Levy 4.2.2, pointer
 * swizzling at page-fault time as in Wilson's Texas).
 *
 * The store.  A store is a file of 4 KiB pages (PATH) and its redo log
 * (PATH.log).  When it is opened, address space is reserved for all it may
 * grow to (tk_ph_config.max_size) and every page starts inaccessible: a page
 * is read from the file (pread, 64 KiB at a time) when the program first
 * touches it, its pointers are turned into addresses (swizzled) and it is
 * made read-only.  The store grows while it is open; nothing needs a fixed
 * map size beyond the reservation, and a store larger than the reservation
 * is refused with a clear error (-EFBIG: open it with a larger max_size).
 *
 * Objects and pointers.  Objects are allocated in the store with a type
 * (tk_ph_type: its size and where its pointers are).  In memory a pointer
 * field is an ordinary C pointer (NULL or an address inside the store); on
 * disk it is an offset from the start of the store.  All the store lies at
 * one base address, so a pointer to a page not yet read is already an
 * address: its page is read when it is first touched.  A pointer field that
 * points outside the store when a transaction commits makes the commit
 * fail with -EINVAL, naming the object and the field (the transaction stays
 * open: fix the field or abort).  Fields not declared as pointers are
 * stored as they are: never keep an address in one.
 *
 * Lazy swizzling (TK_PH_LAZY, Thekkath & Levy's second variant).  A page
 * read on first touch keeps its pointer fields as offsets and stays
 * no-access while any is left; each load from it traps, and trapkit swizzles
 * the pointer fields among the bytes the instruction reads (in memory, for
 * good) and performs the load itself.  The program never sees an offset:
 * every pointer it loads is an address, compares and hashes as one, and a
 * pointer once swizzled stays so.  A page opens (read-only, loads at full
 * speed) once its last pointer is swizzled.  Its other data meanwhile is read
 * by emulation, a trap a load, so a page loaded from 16 times without using
 * a pointer is swizzled whole, as are a page written in a transaction and
 * one read by an instruction the emulator leaves (VEX-encoded vector loads,
 * string moves, most of glibc's memcpy): lazy swizzling pays where a few of
 * many pointers are used, never where all are.  A lazy store's reservation
 * must lie above its size (max_size; the kernel's choice always does):
 * else -EINVAL.  The file is the same either way; a store may be opened
 * lazily one time and eagerly the next, and by readers of either kind.
 *
 * Transactions.  Every change to the store happens between tk_ph_begin and
 * tk_ph_commit (or tk_ph_abort); no log function is called per store.  The
 * first write to a page in a transaction is caught by trapkit (the page is
 * read-only), its before-image kept, and the page opened.  tk_ph_commit
 * writes the pages written, unswizzled and each with its CRC-32C, as one
 * record of the redo log, with one fdatasync: when it returns 0 the
 * transaction is durable.  tk_ph_abort puts every written page back.  A
 * thread of trapkit's applies the log to the store file as it fills (from
 * half of tk_ph_config.log_limit on; a commit waits while the log holds
 * twice log_limit), and tk_ph_close applies what is left; it also writes
 * the log file a few MiB ahead of its records (zeros), so that a commit
 * overwrites blocks the file has and its sync writes no metadata.  A write to
 * the store outside a transaction is a bug: the program stops with SIGSEGV
 * after a message saying where.
 *
 * Recovery.  Opening a store replays its log: every complete record, in
 * order.  After a crash at any instant (kill -9, power loss), opening the
 * store gives exactly the state of the last transaction whose tk_ph_commit
 * returned 0, or of one whose commit was under way when it crashed; never a
 * part of one.  A torn record at the end of the log (a commit the crash
 * interrupted) is dropped.
 *
 * Damage.  A store or log that is damaged, truncated, of another version or
 * not a store at all is refused at open with a negative errno and a message
 * (tk_last_error) saying what is wrong, and nothing is written: -EUCLEAN for
 * damage (a bad superblock, a store file shorter than its size, a damaged
 * record of the log followed by committed ones), -EPROTONOSUPPORT for
 * another version, -EINVAL for a file that is not a store.  A page read from
 * the file whose pointer fields point outside the store is not swizzled:
 * the program stops with SIGBUS after a message naming the page.
 *
 * Threads and processes.  One process at a time opens a store for writing
 * (an exclusive lock on PATH: a second such open fails with -EBUSY).  Within
 * it, transactions are made by one thread at a time (begin, the writes,
 * commit or abort); other threads may read the store between transactions,
 * never during one.  Page reads on first touch are safe from any number of
 * threads at once, and from a signal handler that interrupts one (trapkit
 * holds asynchronous signals back for the moments it reads a page in or
 * saves a before-image).  A child of fork() may not use its parent's store: in
 * the child the store is no-access from fork on, so a touch stops it with
 * SIGSEGV after a message (its writes never reach the parent's memory, even
 * to pages the parent had open in a transaction), tk_ph_begin and the calls
 * that need a transaction fail with -ECHILD, and tk_ph_close releases the
 * child's copy without touching the files (the child does not keep them
 * open, nor the parent's locks on them).  A child that calls exec, or
 * opens the store itself, is not affected.
 *
 * Readers.  Any number of other processes may open the store with
 * TK_PH_READONLY, while a writer has it open or not.  A reader sees the
 * state of the last transaction committed when it opened (a commit under
 * way then may be in it or not, never a part of it), however long it stays
 * open and whatever the writer commits meanwhile: the writer does not write
 * newer transactions into the store file while such a reader has it open,
 * and keeps them in its log instead (which then grows past log_limit, as
 * LMDB's file grows under a long read transaction).  To see newer commits,
 * close the store and open it again.  In a reader, tk_ph_begin fails with
 * -EROFS, and a write to the store stops the program with SIGSEGV after a
 * message.  A reader needs read access to PATH and PATH.log only; one that
 * is killed holds nothing back (its locks are the kernel's, on the open
 * file).
 *
 * Limits: objects of up to 2,064,384 bytes (504 pages; larger: -EFBIG);
 * types of up to 2,048 bytes, with their pointer fields 8-byte aligned; 63
 * types a store; a transaction of up to tk_ph_config.max_tx_pages pages (a
 * write to one more stops the program with a message).  Each run of pages
 * read is a mapping of its own until its neighbours are read too, and the
 * kernel bounds a process's mappings (vm.max_map_count, 65,530 by
 * default): where a store read sparsely reaches that limit, trapkit reads
 * the shortest gaps between the runs as well, joining them, and goes on.
 * Pages written in a transaction are mappings of their own too: one that
 * writes tens of thousands of scattered pages in a process at the limit
 * stops the program with a message (raise vm.max_map_count).
 *
 * Not async-signal-safe, none of it.
 */
#ifndef TRAPKIT_PHEAP_H
#define TRAPKIT_PHEAP_H

#include <stddef.h>
#include <stdint.h>

#include "trapkit/region.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_ph tk_ph;

/* A type: the number tk_ph_type gives (1-64), or TK_PH_BYTES for plain
 * bytes without pointers. */
typedef uint32_t tk_ph_type_t;
#define TK_PH_BYTES 0u

/* tk_ph_config.flags */
#define TK_PH_CREATE 0x1   /* create the store if PATH does not exist */
#define TK_PH_READONLY 0x2 /* a reader: the last committed state, read-only */
#define TK_PH_LAZY 0x4     /* lazy swizzling: each pointer when first loaded (above) */

typedef struct tk_ph_config {
    unsigned flags;      /* TK_PH_* */
    size_t max_size;     /* bytes of address space reserved: the store may grow
                            to this (0: 64 GiB); a multiple of 2 MiB */
    void *addr;          /* where to reserve it (NULL: where the kernel chooses);
                            a 2 MiB-aligned address that must be free (-EEXIST) */
    enum tk_mech mech;   /* how first touches and first writes are caught:
                            TK_MECH_AUTO, posix, uffd-sigbus or uffd-thread */
    size_t log_limit;    /* log bytes the background application aims at
                            (0: 64 MiB) */
    size_t max_tx_pages; /* pages one transaction may write (0: 65,536) */
} tk_ph_config;

/* Opens the store at path (with path.log beside it), replaying its log, and
 * reserves its address range.  cfg may be NULL (the defaults, no
 * TK_PH_CREATE).  Returns 0, or -ENOENT (no store and no TK_PH_CREATE), -EBUSY
 * (open in another process), -EUCLEAN / -EPROTONOSUPPORT / -EINVAL (see
 * "Damage" above), -EFBIG (larger than max_size), -EEXIST (addr is taken),
 * -EOPNOTSUPP (the mechanism is not available here), or the error of a
 * system call; tk_last_error() says which. */
int tk_ph_open(const char *path, const tk_ph_config *cfg, tk_ph **out);

/* Applies the log to the store file and closes it; the address range is
 * released (pointers into it are no longer valid).  A transaction still
 * open is aborted first.  Returns 0 or the error of writing the store (the
 * log is kept then: the next open replays it). */
int tk_ph_close(tk_ph *ph);

/* The store's address range: [tk_ph_base, tk_ph_base + tk_ph_size) is
 * its current size; it may grow up to max_size. */
void *tk_ph_base(const tk_ph *ph);
size_t tk_ph_size(const tk_ph *ph);

/* Declares a type of objects: name (up to 23 characters), size in bytes
 * (1-2048) and the byte offsets of its pointer fields (each 8-byte aligned,
 * within size).  The store remembers each type's layout: declaring a name
 * again, after every open, gives the same number if the layout is the same
 * and fails with -EINVAL if it differs (the data on disk was written with
 * the old one).  A new type is recorded by the next commit (declare it in a
 * transaction, or before one).  -ENOSPC past 64 types. */
int tk_ph_type(tk_ph *ph, const char *name, size_t size, const size_t *ptr_offsets, size_t nptrs,
               tk_ph_type_t *out);

/* Allocates count objects of type t side by side, zeroed, in the open
 * transaction (TK_PH_BYTES: count bytes).  NULL on failure, with
 * tk_last_error(): no transaction open, an unknown type, -EFBIG (too large),
 * -ENOSPC (the reservation is full). */
void *tk_ph_alloc(tk_ph *ph, tk_ph_type_t t, size_t count);

/* Frees an object tk_ph_alloc returned, in the open transaction.  Returns 0,
 * or -EINVAL (not the start of an allocated object of this store; nothing
 * changes). */
int tk_ph_free(tk_ph *ph, void *obj);

/* The root object (NULL in a new store), and setting it (in a
 * transaction: obj an object of the store, or NULL). */
void *tk_ph_root(tk_ph *ph);
int tk_ph_set_root(tk_ph *ph, void *obj);

/* Transactions.  begin: -EBUSY if one is open.  commit: 0 when durable (a
 * transaction that wrote nothing logs nothing); -EINVAL (a pointer field
 * outside the store: see above) or -ENOMEM, the transaction still open; or
 * the error of writing or syncing the log: the transaction is aborted in
 * memory, whether it reached the disk is not known (as with any failed
 * fsync), and every later begin and commit fails with that error - close
 * the store and open it again (the open replays what the log holds).
 * abort: 0, every page written since begin as it was. */
int tk_ph_begin(tk_ph *ph);
int tk_ph_commit(tk_ph *ph);
int tk_ph_abort(tk_ph *ph);

/* System calls.  The kernel does not fault pages in for the store: a
 * system call given store memory that trapkit has not opened (a page not
 * yet read; in a lazy store, one with pointers left; for writing, one not
 * yet written in the transaction) fails with EFAULT (but for a write into a
 * page already read on uffd-thread, whose userfaultfd thread catches the
 * kernel's write as the program's).  tk_ph_touch makes
 * [addr, addr + len) readable first - its pages read and, lazily, swizzled
 * whole - and with write, in a transaction, writable as the transaction's
 * own (each page's before-image saved, as by a first write).  Returns 0, or
 * -EINVAL (a range not inside the store; write outside a transaction),
 * -E2BIG (more than max_tx_pages), -EIO, -EUCLEAN or -ENOMEM (the kernel's
 * limit on mappings). */
int tk_ph_touch(tk_ph *ph, const void *addr, size_t len, int write);

struct tk_ph_stats {
    uint64_t size;       /* bytes in the store */
    uint64_t pages_read; /* pages read from the file on first touch */
    uint64_t pointers_swizzled;
    uint64_t commits, aborts;
    uint64_t pages_logged;   /* pages written to the log by commits */
    uint64_t log_bytes;      /* in the log now */
    uint64_t applies;        /* times the log was applied to the store file */
    uint64_t replayed;       /* records the last open replayed */
    enum tk_mech mech;       /* the mechanism catching first touches and writes */
    uint64_t loads_emulated; /* TK_PH_LAZY: loads from pages with pointers to swizzle */
};
int tk_ph_stats(const tk_ph *ph, struct tk_ph_stats *out);

#ifdef __cplusplus
}
#endif
#endif
