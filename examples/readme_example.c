/* The README's example: protect a page, catch the write, record it,
 * unprotect, resume.  Build: cc example.c $(pkg-config --cflags --libs trapkit) */
#include <stdio.h>
#include <trapkit/trapkit.h>

static void *written; /* the page the handler saw written */

static tk_action on_write(const tk_fault *f, void *arg)
{
    written = f->page;                                             /* record it */
    tk_unprot(f->region, f->page, tk_region_page_size(f->region)); /* unprotect */
    return TK_RESUME;                                              /* resume: the write completes */
}

int main(void)
{
    tk_region *r;
    tk_region_config cfg = {.len = 1 << 20, .handler = on_write};
    int err = tk_region_create(&cfg, &r);
    if (err) {
        fprintf(stderr, "tk_region_create: %s\n", tk_last_error());
        return 1;
    }
    char *mem = tk_region_base(r);
    tk_prot1(r, mem + 4096, TK_PROT_READ); /* protect a page */
    mem[4096 + 7] = 'x';                   /* the write traps, the handler runs */
    printf("mechanism %s: write to page %p caught, value '%c'\n", tk_mech_name(tk_region_mech(r)),
           written, mem[4096 + 7]);
    tk_region_destroy(r);
    return written == mem + 4096 ? 0 : 1;
}
