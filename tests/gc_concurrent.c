/* tests/gc_concurrent.c - mostly-concurrent marking (tk_gc_set_concurrent):
 * turned on and off; the cycles keep what is reachable - a list the
 * program keeps rewiring while the marker runs, objects only registers
 * and another thread's stack hold - and reclaim the rest; finalizers and
 * weak links work as they do with the world stopped; a child forked while
 * cycles run (one may be under way) goes on allocating and collecting.
 * argv[1]: the write barrier (pagemap-scan, uffd-sigbus, posix; one this
 * machine lacks is skipped).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <trapkit/gc.h>
#include "testutil.h"

struct node {
    struct node *next;
    uint64_t id, check;
};

static struct node *list_a, *list_b;

static uint64_t check_of(uint64_t id)
{
    return id * 0x9e3779b97f4a7c15ull ^ 0x5555;
}

static struct node *make(uint64_t id)
{
    struct node *n = tk_gc_malloc(sizeof *n);
    CHECK(n);
    n->id = id;
    n->check = check_of(id);
    return n;
}

/* Every node on the list intact, ids as expected: returns how many. */
static size_t verify(const struct node *l)
{
    size_t n = 0;
    for (; l; l = l->next, n++)
        if (l->check != check_of(l->id)) {
            fprintf(stderr, "node %p (id %lu) overwritten: reclaimed while reachable\n",
                    (const void *)l, (unsigned long)l->id);
            exit(1);
        }
    return n;
}

static uint64_t cycles(void)
{
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    return st.concurrent_cycles;
}

/* Garbage until `more` concurrent cycles have ended, moving nodes from
 * list_a to list_b meanwhile (the marker may have scanned b's page before
 * a node arrives there and a's after it left: the page's write brings it
 * back to the marker). */
static void churn(uint64_t more)
{
    uint64_t until = cycles() + more, steps = 0;
    while (cycles() < until) {
        for (int i = 0; i < 64; i++) CHECK(tk_gc_malloc(48));
        if (list_a) {
            struct node *n = list_a;
            list_a = n->next;
            n->next = list_b;
            list_b = n;
        } else {
            list_a = list_b;
            list_b = NULL;
        }
        CHECK(++steps < 100000000);
    }
}

/* ---- objects only another thread's stack holds ---------------------------- */
static atomic_int phase;

static void *holder(void *arg)
{
    (void)arg;
    volatile struct node *mine[64];
    for (int i = 0; i < 64; i++) mine[i] = make(1000000 + (uint64_t)i);
    atomic_store(&phase, 1);
    while (atomic_load(&phase) == 1) usleep(1000);
    for (int i = 0; i < 64; i++) CHECK(mine[i]->check == check_of(1000000 + (uint64_t)i));
    return NULL;
}

static atomic_int finalized;
static void fin(void *obj, void *arg)
{
    (void)obj;
    (void)arg;
    atomic_fetch_add(&finalized, 1);
}

/* weak links live in malloc'd memory, which the collector does not scan
 * (a link on the stack would itself keep its object) */
static void **links;

__attribute__((noinline)) static void make_unreachable(void)
{
    void *o = make(7);
    links[0] = o;
    CHECK_OK(tk_gc_register_weak(&links[0], o));
    CHECK_OK(tk_gc_register_finalizer(make(9), fin, NULL));
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    setenv("TRAPKIT_GC_BARRIER", argv[1], 1);
    unsetenv("TRAPKIT_GC_CONCURRENT");
    int err = tk_gc_init();
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    CHECK(!tk_gc_concurrent());
    CHECK_OK(tk_gc_set_concurrent(1));
    CHECK(tk_gc_concurrent());
    CHECK(strcmp(tk_gc_barrier(), argv[1]) == 0);

    /* a list, rewired while cycles run */
    for (uint64_t i = 0; i < 20000; i++) {
        struct node *n = make(i);
        n->next = list_a;
        list_a = n;
    }
    pthread_t th;
    CHECK(pthread_create(&th, NULL, holder, NULL) == 0);
    while (atomic_load(&phase) == 0) usleep(1000);
    links = calloc(2, sizeof *links);
    CHECK(links);
    void *kept = make(8);
    links[1] = kept;
    CHECK_OK(tk_gc_register_weak(&links[1], kept));
    make_unreachable();
    churn(6);
    CHECK(verify(list_a) + verify(list_b) == 20000);
    CHECK(kept && links[1] == kept);
    /* the finalizer runs in an allocating thread after the cycle */
    for (int i = 0; i < 100000 && !atomic_load(&finalized); i++) CHECK(tk_gc_malloc(64));
    churn(2);
    CHECK(atomic_load(&finalized) == 1);
    CHECK(links[0] == NULL);
    atomic_store(&phase, 2);
    CHECK(pthread_join(th, NULL) == 0);

    /* fork while cycles run: the child has no marker thread until it
     * needs one, and a cycle under way in the parent is dropped there */
    for (int k = 0; k < 8; k++) {
        churn(1);
        for (int i = 0; i < 2000 * k; i++) CHECK(tk_gc_malloc(32));
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(60);
            churn(2);
            tk_gc_collect();
            _exit(verify(list_a) + verify(list_b) == 20000 ? 0 : 1);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }

    /* off: collections stop the world again */
    CHECK_OK(tk_gc_set_concurrent(0));
    CHECK(!tk_gc_concurrent());
    tk_gc_stats before, after;
    tk_gc_get_stats(&before);
    for (int i = 0; i < 50000000; i++) {
        CHECK(tk_gc_malloc(64));
        if (i % 4096 == 0) {
            tk_gc_get_stats(&after);
            if (after.collections > before.collections + 1) break;
        }
    }
    tk_gc_get_stats(&after);
    CHECK(after.collections > before.collections + 1);
    CHECK(after.concurrent_cycles == before.concurrent_cycles);
    CHECK(verify(list_a) + verify(list_b) == 20000);
    printf("%s: %lu concurrent cycles of %lu collections, world stopped at most %.3f ms "
           "(stopping it %.3f ms); %lu pages rescanned\n",
           tk_gc_barrier(), (unsigned long)after.concurrent_cycles,
           (unsigned long)after.collections, after.max_pause_ns / 1e6, after.max_handshake_ns / 1e6,
           (unsigned long)after.dirty_pages);
    return 0;
}
