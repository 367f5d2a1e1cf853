/* src/core/table.c - the region table.
 *
 * The fault path must find the region of an address without locks (it runs
 * in a signal handler, possibly while another thread adds or removes
 * regions).  The table is an immutable sorted array; a writer builds a new
 * one under a mutex and publishes it with one atomic store.  Old arrays and
 * removed regions are "retired" and freed only when no reader can still hold
 * them:
 *
 *   reader:  readers++ (seq_cst); t = table (seq_cst); ...use t...; readers--
 *   writer:  table = new (seq_cst); later, if readers == 0 (seq_cst), free
 *            everything retired before that check
 *
 * A reader that incremented before the writer's check keeps the count above
 * zero; one that increments after it loads the new table.  Frees are tried at
 * every insert and remove, so under constant faulting they are delayed, never
 * unsafe.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "core/region_impl.h"

struct table {
    size_t n;
    struct table *retired_next;
    struct tk_region *r[];
};

static struct table empty_table = {0, NULL};
static _Atomic(struct table *) current = &empty_table;
static atomic_long readers;
static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table *retired_tables;
static struct tk_region *retired_regions;

/* [signal-safe] */
void tk__table_enter(void)
{
    atomic_fetch_add(&readers, 1);
}
/* [signal-safe] */
void tk__table_leave(void)
{
    long was = atomic_fetch_sub(&readers, 1);
    TK_ASSERT(was > 0);
    (void)was;
}

/* [signal-safe] */
struct tk_region *tk__table_find(uintptr_t addr)
{
    struct table *t = atomic_load(&current);
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct tk_region *r = t->r[mid];
        if (addr < r->rg_start)
            hi = mid;
        else if (addr >= r->rg_end)
            lo = mid + 1;
        else
            return r;
    }
    return NULL;
}

tk_region *tk_region_find(const void *addr)
{
    tk__table_enter();
    tk_region *r = tk__table_find((uintptr_t)addr);
    tk__table_leave();
    return r;
}

struct tk_region *const *tk__table_fork_begin(size_t *n)
{
    pthread_mutex_lock(&writer_lock);
    struct table *t = atomic_load(&current);
    *n = t->n;
    return t->r;
}

void tk__table_fork_end(bool child)
{
    if (child)
        pthread_mutex_init(&writer_lock, NULL);
    else
        pthread_mutex_unlock(&writer_lock);
}

/* The quarantine: freed regions, oldest first (see tk__table_retire). */
static struct tk_region *quarantine_head, *quarantine_tail;
static size_t quarantined;

static void free_region(struct tk_region *r)
{
    tk__region_free_meta(r);
    r->rg_retired_next = NULL;
    if (quarantine_tail)
        quarantine_tail->rg_retired_next = r;
    else
        quarantine_head = r;
    quarantine_tail = r;
    if (++quarantined > TK_REGION_QUARANTINE) {
        struct tk_region *old = quarantine_head;
        quarantine_head = old->rg_retired_next;
        quarantined--;
        free(old);
    }
}

/* Called with writer_lock held. */
static void reclaim(void)
{
    if (atomic_load(&readers) != 0) return;
    while (retired_tables) {
        struct table *t = retired_tables;
        retired_tables = t->retired_next;
        free(t);
    }
    while (retired_regions) {
        struct tk_region *r = retired_regions;
        retired_regions = r->rg_retired_next;
        free_region(r);
    }
}

static void publish(struct table *t)
{
    struct table *old = atomic_exchange(&current, t);
    if (old != &empty_table) {
        old->retired_next = retired_tables;
        retired_tables = old;
    }
}

bool tk__table_overlaps(uintptr_t start, uintptr_t end)
{
    pthread_mutex_lock(&writer_lock);
    struct table *t = atomic_load(&current);
    bool hit = false;
    for (size_t i = 0; i < t->n && !hit; i++)
        hit = t->r[i]->rg_start < end && start < t->r[i]->rg_end;
    pthread_mutex_unlock(&writer_lock);
    return hit;
}

int tk__table_insert(struct tk_region *r)
{
    pthread_mutex_lock(&writer_lock);
    struct table *t = atomic_load(&current);
    size_t pos = 0;
    while (pos < t->n && t->r[pos]->rg_start < r->rg_start) pos++;
    if ((pos > 0 && t->r[pos - 1]->rg_end > r->rg_start) ||
        (pos < t->n && t->r[pos]->rg_start < r->rg_end)) {
        pthread_mutex_unlock(&writer_lock);
        return tk__fail(-EEXIST, "tk_region_create: the range overlaps a region trapkit watches");
    }
    struct table *nt = malloc(sizeof *nt + (t->n + 1) * sizeof nt->r[0]);
    if (!nt) {
        pthread_mutex_unlock(&writer_lock);
        return tk__fail(-ENOMEM, "tk_region_create: out of memory for the region table");
    }
    nt->n = t->n + 1;
    nt->retired_next = NULL;
    for (size_t i = 0; i < pos; i++) nt->r[i] = t->r[i];
    nt->r[pos] = r;
    for (size_t i = pos; i < t->n; i++) nt->r[i + 1] = t->r[i];
    publish(nt);
    reclaim();
    pthread_mutex_unlock(&writer_lock);
    return 0;
}

int tk__table_remove(struct tk_region *r)
{
    pthread_mutex_lock(&writer_lock);
    struct table *t = atomic_load(&current);
    bool listed = false;
    for (size_t i = 0; i < t->n && !listed; i++) listed = t->r[i] == r;
    if (!listed) {
        pthread_mutex_unlock(&writer_lock);
        return -EINVAL;
    }
    struct table *nt = &empty_table;
    if (t->n > 1) {
        nt = malloc(sizeof *nt + (t->n - 1) * sizeof nt->r[0]);
        /* Without memory for a new table the region stays listed but marked
         * empty: its range can never match again. */
        if (!nt) {
            r->rg_end = r->rg_start;
            pthread_mutex_unlock(&writer_lock);
            return -ENOMEM;
        }
        nt->retired_next = NULL;
        size_t j = 0;
        for (size_t i = 0; i < t->n; i++)
            if (t->r[i] != r) nt->r[j++] = t->r[i];
        nt->n = j;
    }
    publish(nt);
    reclaim();
    pthread_mutex_unlock(&writer_lock);
    return 0;
}

void tk__table_retire(struct tk_region *r)
{
    pthread_mutex_lock(&writer_lock);
    r->rg_retired_next = retired_regions;
    retired_regions = r;
    reclaim();
    pthread_mutex_unlock(&writer_lock);
}
