/* src/vm/map2.c - MAP2: a second view of a region's memory.
 *
 * A TK_REGION_MAP2 region lives on a memfd mapped shared; a view is another
 * shared mapping of the same file, so both see the same physical pages.  The
 * view is not registered with any userfaultfd and its protection is its own:
 * a collector or a fault handler reads and writes through it while the
 * region's pages are protected from the program.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/region_impl.h"

int tk_map2(tk_region *r, int prot, void **view)
{
    int cerr =
        tk__check_region(r, "tk_map2: the region is NULL", "tk_map2: the region was destroyed");
    if (cerr) return cerr;
    if (!view) return tk__fail(-EINVAL, "tk_map2: view (where the view's address goes) is NULL");
    if (!(r->rg_flags & TK_REGION_MAP2) || r->rg_memfd < 0)
        return tk__fail(-EINVAL, "tk_map2: the region was not created with TK_REGION_MAP2");
    if (prot != TK_PROT_READ && prot != TK_PROT_RW)
        return tk__fail(-EINVAL, "tk_map2: protection must be TK_PROT_READ or TK_PROT_RW");
    struct tk_view *v = malloc(sizeof *v);
    if (!v) return tk__fail(-ENOMEM, "tk_map2: out of memory");
    int mp = prot == TK_PROT_RW ? PROT_READ | PROT_WRITE : PROT_READ;
    void *p = mmap(NULL, r->rg_len, mp, MAP_SHARED | MAP_NORESERVE, r->rg_memfd, 0);
    if (p == MAP_FAILED) {
        int err = -errno;
        free(v);
        return tk__failf(err, "tk_map2: mmap failed: %s", strerror(-err));
    }
    v->v_addr = p;
    pthread_mutex_lock(&r->rg_views_lock);
    v->v_next = r->rg_views;
    r->rg_views = v;
    pthread_mutex_unlock(&r->rg_views_lock);
    *view = p;
    return 0;
}

int tk_unmap2(tk_region *r, void *view)
{
    int cerr =
        tk__check_region(r, "tk_unmap2: the region is NULL", "tk_unmap2: the region was destroyed");
    if (cerr) return cerr;
    pthread_mutex_lock(&r->rg_views_lock);
    for (struct tk_view **pp = &r->rg_views; *pp; pp = &(*pp)->v_next) {
        if ((*pp)->v_addr == view) {
            struct tk_view *v = *pp;
            *pp = v->v_next;
            pthread_mutex_unlock(&r->rg_views_lock);
            munmap(v->v_addr, r->rg_len);
            free(v);
            return 0;
        }
    }
    pthread_mutex_unlock(&r->rg_views_lock);
    return tk__fail(-EINVAL, "tk_unmap2: not a view of this region");
}
