/* bench/mosberger_unprot.c - the baseline of bench/mosberger.c: the same
 * LIFO and FIFO operations of trapkit/aseq.h, built without protection. */
#define TK_ASEQ_UNPROTECTED
#include <trapkit/aseq.h>

#include "mosberger.h"

static struct tk_aseq_stack stack;
static struct tk_aseq_queue queue;
static struct tk_aseq_node node;

__attribute__((noinline)) uint64_t lifo_unprot(long n)
{
    TIMED(n, {
        tk_aseq_push(&stack, &node);
        tk_aseq_pop(&stack);
    });
}

__attribute__((noinline)) uint64_t fifo_unprot(long n)
{
    TIMED(n, {
        tk_aseq_enqueue(&queue, &node);
        tk_aseq_dequeue(&queue);
    });
}
