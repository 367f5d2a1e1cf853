/* trapkit/gc.h - trapkit's garbage collector: a conservative, non-moving
 * mark-sweep collector whose write barrier is the page table (tk_gc(3)).
 *
 * Three ways to collect.  By default the world is stopped for every
 * collection, each full.  With a write barrier (tk_gc_set_barrier,
 * TRAPKIT_GC_BARRIER) collections are generational: minor ones mark from
 * the roots and from the old objects on the pages written since the last
 * collection (trapkit's DIRTY over each chunk of the heap).  With
 * mostly-concurrent marking (tk_gc_set_concurrent, TRAPKIT_GC_CONCURRENT)
 * a marker thread marks while the program runs, and the world is stopped
 * twice a cycle for a moment.  <trapkit/gc_compat.h> maps the core of
 * bdwgc's interface onto this one.
 *
 * Objects come from size-segregated pages (16-byte granules, classes up to
 * 2 KiB) and page runs (larger ones); mark bits and allocation bits are
 * kept aside from the objects, one of each per granule; pages are swept
 * lazily, when their class needs objects.  Roots are the writable segments
 * of every loaded object (dl_iterate_phdr), the stacks and registers of the
 * calling thread and of every registered thread (stopped by a signal during
 * the collection, as bdwgc does), and ranges added with tk_gc_add_roots.
 * Any word that points into an allocated object (its start or inside it)
 * keeps it alive.  Memory from malloc is not scanned.
 *
 * Every function is thread-safe (one lock); none may be called from a
 * signal handler.  A thread that calls any of them is registered until it
 * exits; one that holds collector pointers without calling them registers
 * itself (tk_gc_register_thread).  Collections stop the registered threads
 * with SIGPWR and resume them with SIGXCPU (as bdwgc does): a registered
 * thread must not block them, and the program must not handle them; a
 * registered thread's sleep (nanosleep, clock_nanosleep, usleep) may
 * return early with EINTR during a collection.  Thread-local variables are
 * not roots.
 */
#ifndef TRAPKIT_GC_H
#define TRAPKIT_GC_H

#include <stddef.h>
#include <stdint.h>

/* Called once for an object found unreachable, after the collection that
 * found it, with the world running and the collector unlocked; the object
 * stays valid during the call and is reclaimed by a later collection unless
 * the finalizer made it reachable again.  Objects reachable from a
 * finalizable object are kept until its finalizer has run; of two
 * unreachable finalizable objects where one reaches the other, the one that
 * reaches is finalized first (at a later collection, the other). */
typedef void (*tk_gc_finalizer)(void *obj, void *arg);

typedef struct tk_gc_stats {
    uint64_t collections;       /* collections done, minor ones included */
    uint64_t minor_collections; /* of which minor (generational) */
    uint64_t dirty_pages;       /* written pages the minor collections scanned, in all */
    uint64_t heap_bytes;        /* pages the heap holds (objects, free slots, free pages) */
    uint64_t live_bytes;        /* in objects marked by the last collection */
    uint64_t allocated_bytes;   /* asked for since the start (rounded to the granule) */
    uint64_t reclaimed_objects; /* found unreachable and reclaimed (by sweeping) */
    uint64_t freed_objects;     /* given back with tk_gc_free */
    uint64_t finalized_objects; /* finalizers run */
    uint64_t cleared_links;     /* weak links cleared */
    uint64_t last_pause_ns;     /* the world stopped, for the last collection */
    uint64_t max_pause_ns;      /* the longest time the world was stopped */
    uint64_t total_pause_ns;
    uint64_t concurrent_cycles;  /* of the collections, those marked concurrently */
    uint64_t concurrent_mark_ns; /* the marker thread's marking, the program running */
    uint64_t allocation_waits;   /* allocations that waited for the marker */
    uint64_t max_handshake_ns;   /* the longest wait for the threads to stop */
    uint32_t threads;            /* registered threads, the first caller's included */
    uint32_t markers;            /* threads that marked in the last world-stopped marking */
} tk_gc_stats;

/* Sets the collector up (once; every other function calls it): reserves
 * the heap's address space (64 GiB, or TRAPKIT_GC_RESERVE_MIB) and
 * registers the calling thread.  0, or a negative errno (-ENOMEM: the
 * address space could not be reserved) with the reason in tk_last_error. */
int tk_gc_init(void);

/* n bytes (at least one granule), zeroed, scanned for pointers; NULL when
 * the heap is full (tk_last_error says so).  _atomic: never scanned (for
 * data without pointers), contents not zeroed. */
void *tk_gc_malloc(size_t n);
void *tk_gc_malloc_atomic(size_t n);
/* As realloc(3): p NULL allocates; n 0 frees p and returns NULL; a new
 * object takes the old contents and p is freed.  A p that is not the start
 * of a live object returns NULL with the reason (nothing freed). */
void *tk_gc_realloc(void *p, size_t n);
/* Gives p back at once.  0, or -EINVAL with the reason if p is not the
 * start of a live collector object (a pointer elsewhere, inside an
 * object, or one freed already): nothing is touched then.  NULL is 0. */
int tk_gc_free(void *p);

/* A full collection now. */
void tk_gc_collect(void);
/* A minor collection now (full without a write barrier, or after
 * FULL_EVERY minor ones): the objects marked by the collections since the
 * last full one are old and kept; the young ones are marked from the roots
 * and from the old objects on pages written since the last collection,
 * which the barrier reports. */
void tk_gc_collect_minor(void);
/* The write barrier generational collection uses: "none" (every
 * collection full), or trapkit's mechanism for DIRTY ("pagemap-scan":
 * no fault reaches the program; "uffd-sigbus", "uffd-thread", "posix":
 * a fault on the first write to a page after each collection).  Chosen by
 * TRAPKIT_GC_BARRIER (none, the default; auto; or a mechanism's name) when
 * the collector is set up; a mechanism this machine lacks makes tk_gc_init
 * fail with -EOPNOTSUPP, saying why. */
const char *tk_gc_barrier(void);
/* Turns the write barrier on (a mechanism's name, or "auto": pagemap-scan
 * where the machine has it, else uffd-sigbus, else posix) for the whole
 * heap from now on; the next collection is full.  0, -EINVAL (on already,
 * or an unknown name), -EOPNOTSUPP (not on this machine; tk_last_error
 * says why). */
int tk_gc_set_barrier(const char *mech);
/* Mostly-concurrent marking (Boehm, Demers and Shenker), on (nonzero) or
 * off: a collection is a cycle of the collector's marker thread, which
 * marks while the program runs; the program is stopped twice for a moment,
 * to scan the threads' stacks at the start, and at the end to scan the
 * roots and the objects on the pages written during the cycle again (the
 * write barrier's report).  Objects allocated during a cycle are kept by
 * it.  Turning it on turns the barrier on ("auto") if it is not; so does
 * TRAPKIT_GC_CONCURRENT=1 at set-up.  A program that allocates faster
 * than the marker marks has the heap grow meanwhile, up to about four
 * times what was in use when the cycle began; past that, or when the heap
 * cannot grow, an allocation waits for the cycle's end.  tk_gc_collect and
 * tk_gc_collect_minor wait for a cycle under way, then collect with the
 * world stopped.  0, or a negative errno (the barrier or the thread could
 * not be had: tk_last_error says why). */
int tk_gc_set_concurrent(int on);
int tk_gc_concurrent(void);
/* Parallel marking: while the world is stopped, n threads mark (the
 * collecting thread and n - 1 helpers, which the collector starts and
 * keeps; they block every signal and are not registered threads).  The
 * default is one per CPU online, at most 8, or TRAPKIT_GC_MARKERS; 1 marks
 * in the collecting thread alone.  The concurrent marker thread marks alone
 * while the program runs (the program has the other CPUs), and with the
 * helpers when it stops the world at a cycle's end.  0, or -EINVAL (n not
 * in 1..8). */
int tk_gc_set_markers(unsigned n);
unsigned tk_gc_markers(void);

/* How collections stop the registered threads: "signals" (the default:
 * SIGPWR and SIGXCPU, as bdwgc; a thread stops wherever it is) or
 * "safepoints" (TRAPKIT_GC_STOP=safepoints): no signal is sent, and each
 * registered thread stops at its next safepoint - an allocation,
 * tk_gc_safepoint(), or any call of the collector - or is counted stopped
 * while it runs tk_gc_do_blocking or waits for the collector.  Under
 * safepoints every registered thread must reach one often (a loop that
 * neither allocates nor calls tk_gc_safepoint holds every collection up,
 * with a message on stderr after 5 s), and must wait (sleep, read, join,
 * lock) only inside tk_gc_do_blocking.  0, -EINVAL (another name), -EBUSY
 * (a change while other threads are registered: choose before starting
 * them). */
int tk_gc_set_stop(const char *how);
const char *tk_gc_stop(void);
/* A safepoint: a few instructions while no collection waits; parks the
 * calling registered thread while one does.  Signal-safe to omit under
 * "signals" (it does nothing there). */
const unsigned *tk_gc_stop_flag(void);
void tk_gc_park(void);
static inline void tk_gc_safepoint(void)
{
    static const unsigned *flag; /* (one per file that polls) */
    if (__builtin_expect(!flag, 0)) flag = tk_gc_stop_flag();
    if (__builtin_expect(__atomic_load_n(flag, __ATOMIC_RELAXED) != 0, 0)) tk_gc_park();
}
/* Runs fn(arg) with the calling thread counted as stopped (bdwgc's
 * GC_do_blocking): for a wait under "safepoints".  fn must not allocate or
 * touch collector objects (the thread's stack is scanned as it was at the
 * call: what fn's frames hold is not seen).  Returns fn's value; on
 * return the thread waits out a collection under way. */
void *tk_gc_do_blocking(void *(*fn)(void *), void *arg);
/* The software write barrier, for comparison with the page table's
 * (tk_gc_set_barrier("cards"), TRAPKIT_GC_BARRIER=cards): the program
 * stores pointers into collector objects with tk_gc_write (GC_WRITE in
 * <trapkit/gc_compat.h>), which marks a byte per 512-byte card of the
 * heap, and collections read the marked cards instead of the page table.
 * A store not made through it is not seen: under this barrier every store
 * of a pointer into a collector object must be (the collector's own, as
 * tk_gc_realloc's copy, mark their cards).  Under any other barrier the
 * cards are ignored: tk_gc_write is a store and a byte's store. */
#define TK_GC_CARD_SHIFT 9
typedef struct tk_gc_card_map {
    unsigned char *cards; /* cards[(address - base) >> TK_GC_CARD_SHIFT] */
    uintptr_t base, size; /* the heap's reservation (size 0: no collector) */
} tk_gc_card_map;
const tk_gc_card_map *tk_gc_cards(void);
static inline void tk_gc_write(void *slot, const void *v)
{
    static const tk_gc_card_map *map; /* (one per file that stores) */
    *(const void **)slot = v;
    if (!map) map = tk_gc_cards();
    uintptr_t off = (uintptr_t)slot - map->base;
    if (off < map->size)
        __atomic_store_n(&map->cards[off >> TK_GC_CARD_SHIFT], 1, __ATOMIC_RELEASE);
}

/* No collection starts while disabled (nested: each disable needs an
 * enable); the heap grows instead. */
void tk_gc_disable(void);
void tk_gc_enable(void);

/* [lo, hi) is scanned as a root at each collection (8-byte aligned words;
 * lo is rounded up, hi down).  Removing takes exactly a range added.  0,
 * or -EINVAL (lo > hi, or no such range to remove), -ENOMEM. */
int tk_gc_add_roots(void *lo, void *hi);
int tk_gc_remove_roots(void *lo, void *hi);

/* The start of the live object p points into (its start or inside), or
 * NULL; its usable size (the class's), or 0. */
void *tk_gc_base(const void *p);
size_t tk_gc_size(const void *p);

/* Registers fn(obj, arg) to run once obj is unreachable (see
 * tk_gc_finalizer); fn NULL removes obj's finalizer.  obj must be the start
 * of a live object (else -EINVAL). */
int tk_gc_register_finalizer(void *obj, tk_gc_finalizer fn, void *arg);
/* *link is set to NULL by the first collection that finds obj unreachable
 * (reachability through finalizable objects does not count), as bdwgc's
 * disappearing links; the link itself may be anywhere (a collector object
 * holding it that is reclaimed drops it).  obj must be inside a live object;
 * link must be 8-byte aligned.  0, -EINVAL, -ENOMEM; registering a link
 * again moves it to obj.  Unregistering: 0, or -EINVAL if not registered. */
int tk_gc_register_weak(void **link, const void *obj);
int tk_gc_unregister_weak(void **link);

/* The calling thread's stack and registers become roots, and collections
 * stop it while they mark.  0, -EINVAL (registered already), -ENOMEM. */
int tk_gc_register_thread(void);
int tk_gc_unregister_thread(void);

void tk_gc_get_stats(tk_gc_stats *st);

#endif
