/* An outside program using an installed trapkit: catches one write. */
#include <stdio.h>
#include <trapkit/trapkit.h>

static int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    faults++;
    return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) == 0 ? TK_RESUME
                                                                              : TK_DECLINE;
}

int main(void)
{
    tk_region *r;
    tk_region_config cfg = {.len = 65536, .handler = on_fault};
    if (tk_region_create(&cfg, &r) != 0) {
        fprintf(stderr, "consumer: %s\n", tk_last_error());
        return 1;
    }
    char *p = tk_region_base(r);
    tk_prot1(r, p, TK_PROT_READ);
    p[1] = 1;
    tk_region_destroy(r);
    printf("consumer (trapkit %s): %d fault\n", TRAPKIT_VERSION, faults);
    return faults == 1 ? 0 : 1;
}
