/* src/vm/uffd_serve.c - what a userfaultfd event means, on a uffd-thread
 * service thread (os/linux/uffd_ctx.c reads the events and runs the threads).
 *
 * A write-protect fault goes to its region's handler (tk__handle_fault); a
 * declined one is marked so that the faulting thread's retry raises the
 * SIGSEGV it would have had.  UFFD_EVENT_REMOVE (madvise dropped pages) and
 * UNMAP/REMAP (munmap, mmap MAP_FIXED, mremap) are told to the regions they
 * overlap (region.h, "Memory changed behind trapkit's back").
 */
#include <unistd.h>

#include "core/region_impl.h"
#include "os/linux/os.h"
#include "os/linux/uffd.h"

/* handlers faulting inside handlers (each level a service thread of its
 * own, up to TK_SERVICE_MAX: 64) */
#define TK_SERVICE_NESTING 48

__thread bool tk__uffd_serving __attribute__((tls_model("initial-exec")));

/* The kernel dropped or unmapped [start, end): tell each region it
 * overlaps. */
static void memory_changed(uintptr_t start, uintptr_t end, const char *gone)
{
    tk__table_enter();
    for (uintptr_t a = start; a < end;) {
        struct tk_region *r = tk__table_find(a);
        if (!r) {
            a += (uintptr_t)sysconf(_SC_PAGESIZE);
            continue;
        }
        uintptr_t lo = a, hi = end < r->rg_end ? end : r->rg_end;
        if (gone) {
            atomic_store(&r->rg_gone, gone);
        } else {
            /* Pages whose write protection goes to mprotect here are not
             * woken: a thread blocked on one of them has its own fault
             * event, still queued, which wakes it once served.  Woken now,
             * its retry would raise SIGSEGV, and the same write would reach
             * the handler twice (the stale event after the signal). */
            size_t first = tk__page_index(r, lo), last = tk__page_index(r, hi - 1);
            tk__uffd_serving = true;
            tk__pages_removed(r, first, last - first + 1);
            tk__uffd_serving = false;
        }
        a = hi;
    }
    tk__table_leave();
}

/* A write-protect fault at addr, raised `depth` handlers deep (1: by the
 * program).  Returns the length of the range to wake, from *wake_addr. */
static size_t serve_fault(uintptr_t addr, int depth, uintptr_t *wake_addr)
{
    size_t hw = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = hw;
    *wake_addr = addr & ~(uintptr_t)(hw - 1);

    tk__table_enter();
    struct tk_region *r = tk__table_find(addr);
    tk_action act = TK_DECLINE;
    /* not registered by any live region (destroyed meanwhile): the range is
     * no longer write-protected, the retry goes through */
    if (r && depth <= TK_SERVICE_NESTING) {
        tk__uffd_serving = true;
        act = tk__handle_fault(r, addr, TK_ACCESS_WRITE, NULL, NULL, TK_MECH_UFFD_THREAD,
                               TK_FAULT_THREAD);
        tk__uffd_serving = false;
        /* r may have been destroyed while its handler ran (then the fault
         * is resumed: see tk__handle_fault) */
        r = act == TK_RESUME ? NULL : tk__table_find(addr);
    }
    if (r) {
        /* Declined: the faulting thread must get the SIGSEGV it would have
         * had; the retried write faults in its own thread, where the signal
         * handler sees the mark and passes the fault on. */
        size_t page = tk__page_index(r, addr);
        *wake_addr = r->rg_start + (page << r->rg_shift);
        len = r->rg_page;
        tk__decline_wp(r, page);
    }
    tk__table_leave();
    return len;
}

size_t tk__uffd_serve(const struct uffd_msg *msg, int depth, uintptr_t *wake_addr)
{
    switch (msg->event) {
    case UFFD_EVENT_PAGEFAULT:
        return serve_fault((uintptr_t)msg->arg.pagefault.address, depth, wake_addr);
    case UFFD_EVENT_REMOVE:
        memory_changed(msg->arg.remove.start, msg->arg.remove.end, NULL);
        return 0;
    case UFFD_EVENT_UNMAP:
        memory_changed(msg->arg.remove.start, msg->arg.remove.end,
                       "trapkit: the region's memory was unmapped (munmap or mmap MAP_FIXED) "
                       "behind trapkit's back; destroy the region");
        return 0;
    case UFFD_EVENT_REMAP:
        memory_changed(msg->arg.remap.from, msg->arg.remap.from + msg->arg.remap.len,
                       "trapkit: the region's memory was moved by mremap behind trapkit's back; "
                       "destroy the region");
        return 0;
    default:
        return 0;
    }
}
