/* trapkit/gc_compat.h - the core of bdwgc's interface (gc.h) on
 * trapkit's collector, so that a program written to it builds against
 * either collector by choosing the header:
 *
 *   #ifdef USE_TRAPKIT_GC
 *   #include <trapkit/gc_compat.h>
 *   #else
 *   #include <gc.h>
 *   #endif
 *
 * Macros and inline functions only: the library exports tk_gc_* names.
 * What differs: GC_enable_incremental turns on mostly-concurrent marking
 * with the write barrier (trapkit's best DIRTY mechanism); the old
 * finalizer is not returned (*ofn and *ocd are set to NULL); threads that
 * call the collector are registered by it (GC_register_my_thread is for
 * the others).
 */
#ifndef TRAPKIT_GC_COMPAT_H
#define TRAPKIT_GC_COMPAT_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include <trapkit/error.h>
#include <trapkit/gc.h>

#define GC_SUCCESS 0
#define GC_DUPLICATE 1
#define GC_NO_MEMORY 2
#define GC_UNIMPLEMENTED 3

typedef void (*GC_finalization_proc)(void *obj, void *client_data);
struct GC_stack_base {
    void *mem_base;
};

#define GC_INIT() ((void)tk_gc_init())
#define GC_MALLOC(n) tk_gc_malloc(n)
#define GC_MALLOC_ATOMIC(n) tk_gc_malloc_atomic(n)
#define GC_REALLOC(p, n) tk_gc_realloc((p), (n))
#define GC_FREE(p) tk_gc_compat_free(p)
#define GC_malloc(n) tk_gc_malloc(n)
#define GC_malloc_atomic(n) tk_gc_malloc_atomic(n)
#define GC_realloc(p, n) tk_gc_realloc((p), (n))
#define GC_free(p) tk_gc_compat_free(p)
#define GC_gcollect() tk_gc_collect()
#define GC_disable() tk_gc_disable()
#define GC_enable() tk_gc_enable()
#define GC_base(p) tk_gc_base(p)
#define GC_size(p) tk_gc_size(p)
#define GC_add_roots(lo, hi) ((void)tk_gc_add_roots((lo), (hi)))
#define GC_remove_roots(lo, hi) ((void)tk_gc_remove_roots((lo), (hi)))
#define GC_allow_register_threads() ((void)0)
#define GC_do_blocking(fn, cd) tk_gc_do_blocking((fn), (cd))
/* a pointer stored into a collector object through the software barrier
 * (tk_gc_write; with <gc.h> a program defines it as a plain store) */
#define GC_WRITE(lvalue, v) tk_gc_write((void *)&(lvalue), (v))

/* GC_FREE of what is not the start of a live object (a pointer outside the
 * heap, inside an object, or to one freed already) is refused - nothing is
 * touched - and said on stderr, where bdwgc's would corrupt its heap. */
static inline void tk_gc_compat_free(void *p)
{
    if (tk_gc_free(p) != 0) fprintf(stderr, "GC_FREE(%p): %s\n", p, tk_last_error());
}

static inline void GC_enable_incremental(void)
{
    (void)tk_gc_set_concurrent(1);
}

static inline size_t GC_get_heap_size(void)
{
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    return (size_t)st.heap_bytes;
}

static inline size_t GC_get_gc_no(void)
{
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    return (size_t)st.collections;
}

static inline void GC_register_finalizer(void *obj, GC_finalization_proc fn, void *cd,
                                         GC_finalization_proc *ofn, void **ocd)
{
    (void)tk_gc_register_finalizer(obj, fn, cd);
    if (ofn) *ofn = NULL;
    if (ocd) *ocd = NULL;
}

static inline int GC_general_register_disappearing_link(void **link, const void *obj)
{
    int err = tk_gc_register_weak(link, obj);
    return err == 0 ? GC_SUCCESS : err == -ENOMEM ? GC_NO_MEMORY : GC_UNIMPLEMENTED;
}

static inline int GC_unregister_disappearing_link(void **link)
{
    return tk_gc_unregister_weak(link) == 0;
}

static inline int GC_get_stack_base(struct GC_stack_base *sb)
{
    sb->mem_base = NULL; /* trapkit finds the stack itself */
    return GC_SUCCESS;
}

static inline int GC_register_my_thread(const struct GC_stack_base *sb)
{
    (void)sb;
    return tk_gc_register_thread() == 0 ? GC_SUCCESS : GC_DUPLICATE;
}

static inline int GC_unregister_my_thread(void)
{
    return tk_gc_unregister_thread() == 0 ? GC_SUCCESS : GC_UNIMPLEMENTED;
}

#endif
