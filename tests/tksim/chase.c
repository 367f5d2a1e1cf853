/* tests/tksim/chase.c - a pointer chase over a shuffled cycle of nodes, one
 * node in each of PAGES 8 KiB pages: nearly every load misses a small data
 * TLB.  Usage: chase [STEPS] (default 20000).  Exit status 0; prints the
 * sum of the nodes visited. */
#include <stdio.h>
#include <stdlib.h>

#define PAGES 1024
#define PAGE 8192

struct node {
    struct node *next;
    long value;
    char pad[PAGE - sizeof(struct node *) - sizeof(long)];
};

static struct node nodes[PAGES];
static unsigned order[PAGES];

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 20000;
    unsigned long x = 12345;
    for (unsigned i = 0; i < PAGES; i++) order[i] = i;
    for (unsigned i = PAGES - 1; i > 0; i--) { /* Fisher-Yates, a fixed LCG */
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        unsigned j = (unsigned)((x >> 33) % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (unsigned i = 0; i < PAGES; i++) {
        nodes[order[i]].next = &nodes[order[(i + 1) % PAGES]];
        nodes[order[i]].value = i;
    }
    struct node *p = &nodes[order[0]];
    long sum = 0;
    for (long s = 0; s < steps; s++) {
        sum += p->value;
        p = p->next;
    }
    printf("%ld\n", sum);
    return 0;
}
